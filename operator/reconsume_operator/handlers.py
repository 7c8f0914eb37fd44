"""The operator for ``kopf run -m reconsume_operator.handlers``: every handler in Kopf's
default registry, with settings from the environment (``RECONSUME_*``)."""

from __future__ import annotations

import kopf

from reconsume_operator.config import OperatorConfig
from reconsume_operator.registration import register

context = register(kopf.get_default_registry(), OperatorConfig.from_env())
