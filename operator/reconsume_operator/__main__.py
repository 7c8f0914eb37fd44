import sys

from reconsume_operator.main import main

sys.exit(main())
