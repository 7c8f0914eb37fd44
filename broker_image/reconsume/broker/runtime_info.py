"""What a broker says about itself: GET_BROKER_RUNTIME_INFO and GET_BROKER_CONFIG (RocketMQ's
``AdminBrokerProcessor``), which ``mqadmin clusterList``, ``brokerStatus`` and
``getBrokerConfig`` print, and the message rates they show.

Runtime info is a ``KVTable`` of strings under RocketMQ's key names, limited to what reconsume
measures; the configuration is Java ``Properties`` text (``key=value`` lines) under
RocketMQ's setting names.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from reconsume.broker.context import BrokerContext
from reconsume.broker.stats import BrokerStats
from reconsume.message.decode import peek_routing
from reconsume.store import FlushMode
from reconsume.wire.broker_headers import GetBrokerConfigResponseHeader
from reconsume.wire.codes import VERSION
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

SAMPLE_INTERVAL_S = 10.0
"""How often the broker samples its totals (its housekeeping interval)."""
TPS_WINDOWS_S = (10, 60, 600)
"""RocketMQ's ``putTps``/``getTransferedTps``: rates over the last 10 s, 1 min and 10 min."""
GROUP_TPS_WINDOW_S = 60
"""A group's ``consumeTps``: messages it pulled from a topic per second over the last minute."""
VERSION_DESC = "V4_9_8"
"""``MQVersion.getVersionDesc`` of :data:`reconsume.wire.codes.VERSION`."""


class _Sample(NamedTuple):
    at_s: float
    stored: int
    pulled: int
    pulled_by: dict[tuple[str, str], int]


class Throughput:
    """Message rates from :class:`BrokerStats` totals: each rate compares the totals now with
    the newest sample at least a window old (the broker's start, with zero totals, when it is
    younger than the window), per second of the time between them."""

    def __init__(self, stats: BrokerStats, now_s: float) -> None:
        self.stats = stats
        kept = int(max(TPS_WINDOWS_S) / SAMPLE_INTERVAL_S) + 2
        self._samples: deque[_Sample] = deque([_Sample(now_s, 0, 0, {})], maxlen=kept)
        self._first = self._samples[0]

    def _now(self, now_s: float) -> _Sample:
        stats = self.stats
        return _Sample(
            now_s,
            sum(stats.messages_in.values()),
            sum(stats.messages_out.values()),
            dict(stats.messages_out),
        )

    def sample(self, now_s: float) -> None:
        self._samples.append(self._now(now_s))

    def _base(self, now_s: float, window_s: float) -> _Sample:
        base = self._first
        for sample in self._samples:
            if sample.at_s <= now_s - window_s:
                base = sample
        return base

    def tps(self, now_s: float | None = None) -> tuple[list[float], list[float]]:
        """(stored, pulled) messages per second over each of :data:`TPS_WINDOWS_S`."""
        at = time.monotonic() if now_s is None else now_s
        current = self._now(at)
        stored, pulled = [], []
        for window in TPS_WINDOWS_S:
            base = self._base(at, window)
            elapsed = max(at - base.at_s, 1e-3)
            stored.append((current.stored - base.stored) / elapsed)
            pulled.append((current.pulled - base.pulled) / elapsed)
        return stored, pulled

    def pulled_tps(self, topic: str, group: str, now_s: float | None = None) -> float:
        at = time.monotonic() if now_s is None else now_s
        base = self._base(at, GROUP_TPS_WINDOW_S)
        key = (topic, group)
        delta = self.stats.messages_out.get(key, 0) - base.pulled_by.get(key, 0)
        return delta / max(at - base.at_s, 1e-3)


def human_bytes(count: int) -> str:
    """RocketMQ's ``MixAll.humanReadableByteCount(bytes, false)``: ``12.3 GiB``."""
    if count < 1024:
        return f"{count} B"
    exponent = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024**exponent:.1f} {'KMGTPE'[exponent - 1]}iB"


def _runtime(elapsed_ms: int) -> str:
    seconds, _ = divmod(elapsed_ms, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


def _tps(rates: list[float]) -> str:
    return " ".join(f"{rate:.2f}" for rate in rates)


def properties_text(values: dict[str, str]) -> str:
    """Java ``Properties`` text as RocketMQ's ``MixAll.properties2String`` writes it."""
    return "".join(f"{key}={value}\n" for key, value in sorted(values.items()))


class BrokerInfoProcessor:
    def __init__(
        self,
        context: BrokerContext,
        throughput: Throughput,
        acl_digest: Callable[[], str | None] = lambda: None,
        grpc_address: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.context = context
        self.throughput = throughput
        self.boot_ms = int(time.time() * 1000)
        self.grpc_address = grpc_address
        """``ip:port`` of this broker's gRPC service (None: it serves none): ``grpcAddress``,
        where the gRPC services of the other brokers route 5.x clients for its queues."""
        self.acl_digest = acl_digest
        """The digest of the ACL file in force (None: access control off): ``aclDigest``,
        which tells whoever wrote the file that this broker enforces it."""

    def runtime_values(self) -> dict[str, str]:
        context = self.context
        store = context.store
        commitlog = store.commitlog
        earliest = -1
        record = store.read_message(commitlog.min_offset)
        if record is not None:
            earliest = peek_routing(record, 0)[3]
        disk = shutil.disk_usage(store.root)
        stored, pulled = self.throughput.tps()
        now_ms = int(time.time() * 1000)
        values = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(VERSION),
            "bootTimestamp": str(self.boot_ms),
            "runtime": _runtime(now_ms - self.boot_ms),
            "putTps": _tps(stored),
            "getTransferedTps": _tps(pulled),
            "putMessageTimesTotal": str(sum(context.stats.messages_in.values())),
            "commitLogMinOffset": str(commitlog.min_offset),
            "commitLogMaxOffset": str(commitlog.write_offset),
            "commitLogDiskRatio": str((disk.total - disk.free) / disk.total if disk.total else 0),
            "commitLogDirCapacity": (
                f"Total : {human_bytes(disk.total)}, Free : {human_bytes(disk.free)}."
            ),
            "earliestMessageTimeStamp": str(earliest),
        }
        # Requests are handled as they arrive, never parked in a thread pool's queue, and an
        # append holds no lock between requests: RocketMQ's queue figures are zero here.
        for name in (
            "sendThreadPoolQueueSize",
            "pullThreadPoolQueueSize",
            "sendThreadPoolQueueHeadWaitTimeMills",
            "pullThreadPoolQueueHeadWaitTimeMills",
            "pageCacheLockTimeMills",
        ):
            values[name] = "0"
        if (digest := self.acl_digest()) is not None:
            values["aclDigest"] = digest
        if (grpc := self.grpc_address()) is not None:
            values["grpcAddress"] = grpc
        return values

    def runtime_info(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        body = json.dumps({"table": self.runtime_values()}, sort_keys=True)
        return request.respond(body=body.encode())

    def config_values(self) -> dict[str, str]:
        context = self.context
        settings = context.settings
        store = context.store.settings
        host, _, port = context.address.rpartition(":")
        hours = store.retention_hours
        return {
            "brokerClusterName": settings.cluster_name,
            "brokerName": settings.broker_name,
            "brokerId": str(settings.broker_id),
            "brokerIP1": host.strip("[]"),
            "listenPort": port,
            "namesrvAddr": ";".join(settings.namesrv_addresses),
            "storePathRootDir": settings.store_dir,
            "brokerRole": "ASYNC_MASTER",
            "brokerPermission": "6" if context.writable else "4",
            "flushDiskType": (
                "SYNC_FLUSH" if settings.flush_mode is FlushMode.SYNC else "ASYNC_FLUSH"
            ),
            "syncFlushTimeout": str(settings.sync_flush_timeout_ms),
            "flushIntervalCommitLog": str(store.flush_interval_ms),
            "flushConsumerOffsetInterval": str(settings.offset_persist_interval_ms),
            "autoCreateTopicEnable": str(settings.auto_create_topic).lower(),
            "autoCreateSubscriptionGroup": str(settings.auto_create_subscription_group).lower(),
            "defaultTopicQueueNums": str(settings.default_topic_queue_nums),
            "messageDelayLevel": settings.delay_levels,
            "timerMaxDelaySec": str(settings.timer_max_delay_s),
            "mappedFileSizeCommitLog": str(store.commit_log_segment_bytes),
            "mappedFileSizeConsumeQueue": str(store.consume_queue_entries_per_file * 20),
            "maxMessageSize": str(store.max_message_bytes),
            "fileReservedTime": str(int(hours) if hours == int(hours) else hours),
            "registerNameServerPeriod": str(round(settings.register_interval_s * 1000)),
        }

    def broker_config(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        version = json.dumps({"counter": 0, "timestamp": self.boot_ms}, sort_keys=True)
        header = GetBrokerConfigResponseHeader(version=version)
        return request.respond(
            ext_fields=header.to_ext_fields(), body=properties_text(self.config_values()).encode()
        )
