"""The name server's route table: which brokers live, which topics they serve.

Pure state, no I/O: the server feeds it registrations and the clock. Compared with Apache
RocketMQ's ``RouteInfoManager`` one thing differs on purpose: a master's registration carries
its whole topic table, and a topic missing from it loses that broker's queues (RocketMQ keeps
them until someone deletes the topic from the name server), so deleting a topic on a broker
is enough for routes to follow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconsume.message.configs import TopicConfig

MASTER_ID = 0


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrs": dict(sorted(self.broker_addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }


@dataclass(slots=True)
class LiveBroker:
    cluster: str
    broker_name: str
    broker_id: int
    ha_server_addr: str
    last_update_s: float
    data_version: Mapping[str, Any] | None
    connection_id: int | None = None


@dataclass(frozen=True, slots=True)
class Registration:
    """What a broker learns from registering: its master (for a slave) and the order config."""

    master_addr: str | None
    ha_server_addr: str | None


class RouteTable:
    def __init__(self) -> None:
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.brokers: dict[str, BrokerData] = {}
        self.clusters: dict[str, set[str]] = {}
        self.live: dict[str, LiveBroker] = {}
        self.master_epochs: dict[str, tuple[int, str]] = {}
        """Per broker name: the newest master epoch registered and its address."""

    # ------------------------------------------------------------------ registration
    def stale_master(
        self, broker_name: str, broker_addr: str, epoch: int, *, stable: bool = False
    ) -> str | None:
        """Why a master's registration in ``epoch`` is refused (a newer master was seen, or
        another address in the same epoch), or None; accepting it records the epoch. Brokers
        that send no epoch are not judged. A ``stable`` address (a master Service) may
        replace the address of its own epoch: the master moves to it once it has claimed it."""
        if not epoch:
            return None
        known = self.master_epochs.get(broker_name)
        moving = stable and known is not None and epoch == known[0]
        if known is not None and (epoch, broker_addr) != known and epoch <= known[0] and not moving:
            return (
                f"broker {broker_name}: {broker_addr} registers as master in epoch {epoch}, "
                f"{known[1]} was master in epoch {known[0]}"
            )
        self.master_epochs[broker_name] = (epoch, broker_addr)
        return None

    def newer_master(self, broker_name: str, epoch: int) -> bool:
        """Whether a master of an epoch newer than ``epoch`` has registered (never for a
        broker that sends no epoch)."""
        known = self.master_epochs.get(broker_name)
        return bool(epoch) and known is not None and known[0] > epoch

    def register(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: Mapping[str, TopicConfig] | None,
        data_version: Mapping[str, Any] | None,
        now_s: float,
        connection_id: int | None = None,
    ) -> Registration:
        self.clusters.setdefault(cluster, set()).add(broker_name)
        data = self.brokers.get(broker_name)
        if data is None or data.cluster != cluster:
            data = BrokerData(cluster, broker_name, dict(data.broker_addrs) if data else {})
            self.brokers[broker_name] = data
        # One address has one role: drop it under any other id (a slave promoted, say).
        for other_id, addr in list(data.broker_addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del data.broker_addrs[other_id]
        data.broker_addrs[broker_id] = broker_addr
        previous = self.live.get(broker_addr)
        if (
            broker_id == MASTER_ID
            and topics is not None
            and (previous is None or previous.data_version != data_version)
        ):
            self._replace_topics(broker_name, topics)
        self.live[broker_addr] = LiveBroker(
            cluster, broker_name, broker_id, ha_server_addr, now_s, data_version, connection_id
        )
        if broker_id == MASTER_ID:
            return Registration(None, None)
        master = data.broker_addrs.get(MASTER_ID)
        master_live = self.live.get(master) if master else None
        return Registration(master, master_live.ha_server_addr if master_live else None)

    def _replace_topics(self, broker_name: str, topics: Mapping[str, TopicConfig]) -> None:
        for topic, config in topics.items():
            self.topic_queues.setdefault(topic, {})[broker_name] = QueueData(
                broker_name,
                config.read_queue_nums,
                config.write_queue_nums,
                config.perm,
                config.topic_sys_flag,
            )
        for topic in [t for t, queues in self.topic_queues.items() if broker_name in queues]:
            if topic not in topics:
                self._drop_queue_data(topic, broker_name)

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        if not queues:
            del self.topic_queues[topic]

    def unregister(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> bool:
        """Remove one broker address; returns whether it was known."""
        live = self.live.pop(broker_addr, None)
        data = self.brokers.get(broker_name)
        removed = live is not None
        if data is not None and data.broker_addrs.get(broker_id) == broker_addr:
            del data.broker_addrs[broker_id]
            removed = True
        if data is not None and not data.broker_addrs:
            del self.brokers[broker_name]
            names = self.clusters.get(cluster) or self.clusters.get(data.cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    self.clusters.pop(data.cluster, None)
            for topic in [t for t, q in self.topic_queues.items() if broker_name in q]:
                self._drop_queue_data(topic, broker_name)
        return removed

    def remove_address(self, broker_addr: str) -> bool:
        live = self.live.get(broker_addr)
        if live is None:
            return False
        return self.unregister(
            cluster=live.cluster,
            broker_addr=broker_addr,
            broker_name=live.broker_name,
            broker_id=live.broker_id,
        )

    def expire(self, now_s: float, expiry_s: float) -> list[str]:
        """Remove brokers not heard from for ``expiry_s``; returns their addresses."""
        stale = [addr for addr, live in self.live.items() if now_s - live.last_update_s > expiry_s]
        for addr in stale:
            self.remove_address(addr)
        return stale

    def addresses_of_connection(self, connection_id: int) -> list[str]:
        return [a for a, live in self.live.items() if live.connection_id == connection_id]

    # ------------------------------------------------------------------ queries
    def route(self, topic: str) -> dict[str, Any] | None:
        """RocketMQ's ``TopicRouteData`` for ``topic`` as a JSON-able dict, or None."""
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        broker_datas = [
            self.brokers[name].to_dict()
            for name in sorted(queues)
            if name in self.brokers and self.brokers[name].broker_addrs
        ]
        if not broker_datas:
            return None
        return {
            "brokerDatas": broker_datas,
            "filterServerTable": {},
            "queueDatas": [queues[name].to_dict() for name in sorted(queues)],
        }

    def cluster_info(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {
                name: data.to_dict() for name, data in sorted(self.brokers.items())
            },
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.clusters.items())},
        }

    def topic_names(self, cluster: str | None = None) -> list[str]:
        if cluster is None:
            return sorted(self.topic_queues)
        names = self.clusters.get(cluster, set())
        return sorted(t for t, queues in self.topic_queues.items() if names & queues.keys())

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        queues = self.topic_queues.get(topic)
        if queues is None:
            return False
        if cluster is None:
            del self.topic_queues[topic]
            return True
        for name in self.clusters.get(cluster, set()):
            self._drop_queue_data(topic, name)
        return True
