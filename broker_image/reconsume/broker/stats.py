"""Counters the request handlers keep for ``/metrics``.

Plain dict increments, one per request (a batch counts all its messages at once), so counting
costs the send and pull paths next to nothing; the metrics collector turns them into Prometheus
samples only when scraped.
"""

from __future__ import annotations

from reconsume.wire.codes import ResponseCode

_PULL_RESULTS: dict[int, str] = {
    ResponseCode.SUCCESS: "found",
    ResponseCode.PULL_NOT_FOUND: "not_found",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "retry_immediately",
    ResponseCode.PULL_OFFSET_MOVED: "offset_moved",
}
PULL_REFUSED = "refused"
"""Result label of a pull answered with any other code (no group, no permission, ...)."""


class BrokerStats:
    """Totals since the broker started."""

    __slots__ = (
        "bytes_in",
        "dead_letters",
        "messages_in",
        "messages_out",
        "pop",
        "pulls",
        "retries_dropped",
        "send_backs",
    )

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = {}
        """Messages stored by sends, per topic."""
        self.bytes_in: dict[str, int] = {}
        """Body bytes of those messages, per topic."""
        self.messages_out: dict[tuple[str, str], int] = {}
        """Messages returned by pulls, per (topic, consumer group)."""
        self.pulls: dict[str, int] = {}
        """Answered pull requests, per result (see :func:`pull_result`)."""
        self.send_backs: dict[tuple[str, str], int] = {}
        """Messages stored by CONSUMER_SEND_MSG_BACK (retries and dead letters), per
        (consumer group, origin topic)."""
        self.dead_letters: dict[tuple[str, str], int] = {}
        """Messages stored in ``%DLQ%<group>``, per (consumer group, origin topic)."""
        self.retries_dropped: dict[str, int] = {}
        """Send-backs of groups with ``retryQueueNums`` 0, acknowledged and dropped."""
        self.pop: dict[tuple[str, str], int] = {}
        """Pop consumption (RocketMQ 5's clients), per (consumer group, event): ``received``,
        ``acked``, ``invisible_changed``, ``expired`` (taken back at the end of its invisible
        duration), ``forwarded`` (to the dead letters by the client)."""

    def stored(self, topic: str, messages: int, body_bytes: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + messages
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + body_bytes

    def pulled(self, code: int) -> None:
        """A pull was answered with ``code``."""
        result = pull_result(code)
        self.pulls[result] = self.pulls.get(result, 0) + 1

    def delivered(self, topic: str, group: str, messages: int) -> None:
        """A pull answered SUCCESS with ``messages`` messages."""
        key = (topic, group)
        self.messages_out[key] = self.messages_out.get(key, 0) + messages

    def sent_back(self, group: str, origin_topic: str) -> None:
        """A send-back of ``group``'s message first sent to ``origin_topic`` was stored."""
        key = (group, origin_topic)
        self.send_backs[key] = self.send_backs.get(key, 0) + 1

    def dead_lettered(self, group: str, origin_topic: str) -> None:
        """A message of ``group`` first sent to ``origin_topic`` became a dead letter."""
        key = (group, origin_topic)
        self.dead_letters[key] = self.dead_letters.get(key, 0) + 1

    def popped(self, group: str, event: str, messages: int = 1) -> None:
        key = (group, event)
        self.pop[key] = self.pop.get(key, 0) + messages

    def retry_dropped(self, group: str) -> None:
        self.retries_dropped[group] = self.retries_dropped.get(group, 0) + 1


def pull_result(code: int) -> str:
    """The ``result`` label of a pull answered with ``code``."""
    return _PULL_RESULTS.get(code, PULL_REFUSED)
