"""What a push consumer did with the messages it received: counters since it started.

One :class:`ConsumerStats` per consumer, shared by its consume service and its send-back, read
through ``PushConsumer.stats``. Counts are of messages, not batches; a message consumed
several times counts at each attempt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ConsumerStats:
    consumed: int = 0
    """Messages the listener consumed successfully."""
    failed: int = 0
    """Messages the listener failed (RECONSUME_LATER, SUSPEND, an exception, None, or after
    ``ack_index``), one per attempt."""
    sent_back: int = 0
    """Failed messages the broker took back with CONSUMER_SEND_MSG_BACK (for a retry, or as a
    dead letter)."""
    retry_sends: int = 0
    """Failed messages sent to ``%RETRY%<group>`` as normal messages: the fallback when the
    send-back failed, and orderly messages given up at the maximum."""
    local_retries: int = 0
    """Failed messages consumed again by this consumer: concurrent ones neither the send-back
    nor the fallback could store (after ``local_retry_delay_s``), and orderly ones after the
    queue's suspension."""
    dropped: int = 0
    """Broadcasting messages whose consumption failed: logged and dropped, never retried."""
