"""Topic routes as clients see them: which brokers serve a topic, with which queues.

Parses the name server's ``TopicRouteData`` in both forms it is written in (standard JSON, and
fastjson's with unquoted integer map keys) and turns it into the queues a producer writes to
and a consumer reads from, the way RocketMQ's ``MQClientInstance`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconsume.errors import CodecError, InvalidArgumentError
from reconsume.message.configs import is_readable, is_writable
from reconsume.wire import fastjson

MASTER_ID = 0


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (RocketMQ's ``MessageQueue``)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MessageQueue:
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))


@dataclass(frozen=True, slots=True)
class BrokerRoute:
    broker_name: str
    cluster: str
    addresses: dict[int, str]

    @property
    def master(self) -> str | None:
        return self.addresses.get(MASTER_ID)

    @property
    def reader(self) -> str | None:
        """Where to pull and commit offsets: the master, else the replica with the lowest id
        (Apache RocketMQ's ``findBrokerAddressInSubscribe``: consumers go on reading from a
        replica while the master is away)."""
        master = self.addresses.get(MASTER_ID)
        if master is not None or not self.addresses:
            return master
        return self.addresses[min(self.addresses)]


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    brokers: dict[str, BrokerRoute]
    write_queues: tuple[MessageQueue, ...]
    """Queues a producer may send to (writable, on a broker with a master), in order."""
    read_queues: tuple[MessageQueue, ...]
    """Queues a consumer reads (readable), in order."""

    def for_topic(self, topic: str) -> TopicRoute:
        """This route's brokers and queues under another topic name (a template route)."""
        return TopicRoute(
            topic,
            self.brokers,
            tuple(MessageQueue(topic, q.broker_name, q.queue_id) for q in self.write_queues),
            tuple(MessageQueue(topic, q.broker_name, q.queue_id) for q in self.read_queues),
        )

    def master_of(self, broker_name: str) -> str | None:
        broker = self.brokers.get(broker_name)
        return None if broker is None else broker.master

    def reader_of(self, broker_name: str) -> str | None:
        """:attr:`BrokerRoute.reader` of ``broker_name``."""
        broker = self.brokers.get(broker_name)
        return None if broker is None else broker.reader

    @classmethod
    def parse(cls, topic: str, body: bytes) -> TopicRoute:
        data = fastjson.loads(body)
        try:
            brokers = {
                str(b["brokerName"]): BrokerRoute(
                    str(b["brokerName"]),
                    str(b.get("cluster", "")),
                    {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()},
                )
                for b in data.get("brokerDatas") or []
            }
            write: list[MessageQueue] = []
            read: list[MessageQueue] = []
            for queue_data in sorted(data.get("queueDatas") or [], key=lambda q: q["brokerName"]):
                name = str(queue_data["brokerName"])
                perm = int(queue_data.get("perm", 6))
                broker = brokers.get(name)
                if broker is None:
                    continue
                if is_writable(perm) and broker.master is not None:
                    write.extend(
                        MessageQueue(topic, name, i)
                        for i in range(int(queue_data["writeQueueNums"]))
                    )
                if is_readable(perm):
                    read.extend(
                        MessageQueue(topic, name, i)
                        for i in range(int(queue_data["readQueueNums"]))
                    )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise CodecError(f"route data of {topic} is malformed: {exc}") from exc
        return cls(topic, brokers, tuple(write), tuple(read))


def select_queue(
    queues: tuple[MessageQueue, ...], counter: int, avoid_broker: str | None = None
) -> MessageQueue:
    """Round-robin choice from ``queues``, skipping ``avoid_broker`` when another broker is
    available (a send retried after a failure goes elsewhere, as RocketMQ's latency-fault
    strategy does at its simplest)."""
    if not queues:
        raise InvalidArgumentError("no queue to choose from")
    if avoid_broker is not None:
        others = tuple(q for q in queues if q.broker_name != avoid_broker)
        if others:
            queues = others
    return queues[counter % len(queues)]
