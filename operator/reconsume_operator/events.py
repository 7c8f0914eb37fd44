"""Kubernetes Events the operator posts on its resources.

Kopf's ``kopf.info`` and ``kopf.warn`` are gated by ``settings.posting.level``, the level above
which Kopf also turns every log line of a handler into an Event. The operator keeps that level at
WARNING (routine log lines would flood the Events) and posts its own Events here, with
``kopf.event``, which only needs posting to be enabled: changes made on brokers (``Configured``,
``Deleted``), runs started and finished, and each new failure reason.
"""

from __future__ import annotations

import kopf

MESSAGE_MAX_CHARS = 1_000
"""Longer messages are cut: the API server refuses an Event message over 1 KiB."""


def normal(body: kopf.Body, reason: str, message: str) -> None:
    kopf.event(body, type="Normal", reason=reason, message=message[:MESSAGE_MAX_CHARS])


def warning(body: kopf.Body, reason: str, message: str) -> None:
    kopf.event(body, type="Warning", reason=reason, message=message[:MESSAGE_MAX_CHARS])
