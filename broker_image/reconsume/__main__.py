"""``python -m reconsume``: the command line, also where no ``reconsume`` script is on PATH."""

import sys

from reconsume.cli import main

sys.exit(main())
