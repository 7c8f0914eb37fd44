"""Kubernetes Events the operator posts on its resources.

Only the operator's own Events are posted, with ``kopf.event``: changes made on brokers
(``Configured``, ``Deleted``), runs started and finished, scaling, and each new failure reason
(:class:`Warnings`): a resource waiting for its name servers is retried with backoff for as
long as it waits, and an Event per retry would bury the one that matters. Kopf's log lines are
not turned into Events (``settings.posting.loggers`` stays off). Kopf logs each retry of a
handler that raised ``kopf.TemporaryError`` at ERROR; those are expected waits, logged at INFO
here (:class:`ExpectedWaits`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from reconsume_operator.conditions import ready_of
from reconsume_operator.passes import object_key

MESSAGE_MAX_CHARS = 1_000
"""Longer messages are cut: the API server refuses an Event message over 1 KiB."""
KOPF_OBJECT_LOGGER = "kopf.objects"
"""The logger of Kopf's per-object messages (handler outcomes among them)."""


def normal(body: kopf.Body, reason: str, message: str) -> None:
    kopf.event(body, type="Normal", reason=reason, message=message[:MESSAGE_MAX_CHARS])


def warning(body: kopf.Body, reason: str, message: str) -> None:
    kopf.event(body, type="Warning", reason=reason, message=message[:MESSAGE_MAX_CHARS])


def ready_reason(body: Mapping[str, Any]) -> str | None:
    """The reason of the Ready condition the object's status holds now."""
    ready = ready_of((body.get("status") or {}).get("conditions"))
    return None if ready is None else str(ready.get("reason"))


class Warnings:
    """Warning Events posted once per reason change of each object, not once per retry.

    The last reason posted is remembered per object; after an operator restart, the Ready
    reason in the object's status stands for it (what the last operator posted about)."""

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def post(self, body: kopf.Body, reason: str, message: str) -> bool:
        """Post the warning unless ``reason`` is the one posted last; whether it was."""
        key = object_key(body)
        last = self._last.get(key, ready_reason(body))
        self._last[key] = reason
        if last == reason:
            return False
        warning(body, reason, message)
        return True

    def settled(self, body: kopf.Body, reason: str) -> bool:
        """The object is fine (``reason``), so a later failure is a new one; whether this is a
        change (a Normal Event may be due)."""
        key = object_key(body)
        last = self._last.get(key, ready_reason(body))
        self._last[key] = reason
        return last != reason

    def forget(self, body: Mapping[str, Any]) -> None:
        """The object is gone."""
        self._last.pop(object_key(body), None)


class ExpectedWaits(logging.Filter):
    """Kopf's "failed temporarily" records at INFO: the handlers raise ``kopf.TemporaryError``
    only for waits they expect (name servers not up yet, a refused deletion, a job waiting for
    its group), each of which the resource's status and a Warning Event already report."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and "failed temporarily:" in str(record.msg):
            record.levelno = logging.INFO
            record.levelname = logging.getLevelName(logging.INFO)
        return True


def install_log_filter() -> None:
    """Add :class:`ExpectedWaits` to Kopf's object logger (once per process)."""
    logger = logging.getLogger(KOPF_OBJECT_LOGGER)
    if not any(isinstance(f, ExpectedWaits) for f in logger.filters):
        logger.addFilter(ExpectedWaits())
