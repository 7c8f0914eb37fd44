"""A consumer's subscriptions as it sends them to brokers and filters pulled messages by them.

The broker filters by tag hash code; hash codes collide, so the client compares the tag
strings again before a message reaches the listener (RocketMQ's ``PullAPIWrapper``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reconsume.errors import InvalidArgumentError
from reconsume.message.model import StoredMessage
from reconsume.message.tags import java_string_hash

SUB_ALL = "*"


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str
    expression: str
    tags: frozenset[str] | None
    """The tags accepted; None: every message."""
    version: int

    @classmethod
    def parse(cls, topic: str, expression: str | None = SUB_ALL) -> Subscription:
        text = (expression or "").strip()
        if not text or text == SUB_ALL:
            return cls(topic, SUB_ALL, None, time.time_ns() // 1_000_000)
        tags = frozenset(tag.strip() for tag in text.split("||") if tag.strip())
        if not tags:
            raise InvalidArgumentError(f"tag expression {expression!r} names no tag")
        return cls(topic, text, tags, time.time_ns() // 1_000_000)

    def accepts(self, message: StoredMessage) -> bool:
        return self.tags is None or message.properties.get("TAGS") in self.tags

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's ``SubscriptionData`` as a heartbeat carries it."""
        tags = sorted(self.tags or ())
        return {
            "classFilterMode": False,
            "topic": self.topic,
            "subString": self.expression,
            "tagsSet": tags,
            "codeSet": [java_string_hash(tag) for tag in tags],
            "subVersion": self.version,
            "expressionType": "TAG",
        }


def heartbeat_body(
    client_id: str,
    producer_group: str,
    group: str,
    model: str,
    consume_from: str,
    subscriptions: Iterable[Subscription],
) -> dict[str, Any]:
    """RocketMQ's ``HeartbeatData`` for one consumer (and its inner producer)."""
    return {
        "clientID": client_id,
        "producerDataSet": [{"groupName": producer_group}],
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": model,
                "consumeFromWhere": consume_from,
                "unitMode": False,
                "subscriptionDataSet": [s.to_json() for s in subscriptions],
            }
        ],
    }
