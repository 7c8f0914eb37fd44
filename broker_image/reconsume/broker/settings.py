"""Settings of one broker process."""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field, replace

from reconsume.engine.delays import parse_delay_levels
from reconsume.errors import InvalidArgumentError
from reconsume.message.address import HostAddress
from reconsume.message.durations import DEFAULT_DELAY_LEVELS
from reconsume.store.settings import FlushMode, StoreSettings

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def _invalid(setting: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"setting {setting}: {problem}")


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """What one broker listens on, where it registers, where it stores and how it behaves.

    Every validation error starts with ``setting <name>:`` so the operator or the command line
    can say which setting is wrong.
    """

    store_dir: str
    """Directory of the message store (commit log, consume queues, tables); created if absent."""
    listen_host: str = "127.0.0.1"
    """IP address to listen on (``0.0.0.0`` or ``::`` for every interface)."""
    listen_port: int = 10911
    """TCP port to listen on; 0 picks a free one (the advertised address then uses it)."""
    advertised_address: str | None = None
    """``ip:port`` clients and name servers are told to use; default: the listen address. Its
    port 0 stands for the port actually bound. It is also the store host of every record, so
    offset message ids carry it."""
    namesrv_addresses: tuple[str, ...] = ()
    """Name servers (``host:port``) to register with; empty: run unregistered."""
    broker_name: str = "broker-a"
    """Broker name: one shard of the cluster; routes list queues under this name."""
    cluster_name: str = "DefaultCluster"
    """Cluster the broker belongs to (name-server cluster info groups brokers by it)."""
    broker_id: int = 0
    """0 for a master; reconsume runs masters only, so this stays 0."""
    auto_create_topic: bool = True
    """Create an unknown topic on first send (RocketMQ's ``autoCreateTopicEnable``; the broker
    then also serves the template topic TBW102)."""
    auto_create_subscription_group: bool = True
    """Create an unknown consumer group's config on first heartbeat or pull, with defaults
    (RocketMQ's ``autoCreateSubscriptionGroup``)."""
    default_topic_queue_nums: int = 8
    """Queues (read and write) of an auto-created topic, at most; a producer may ask for fewer."""
    flush_mode: FlushMode = FlushMode.ASYNC
    """Sync: a send is answered after the fsync covering it. Async: fsync in the background."""
    sync_flush_timeout_ms: int = 5_000
    """Sync flush: milliseconds a send waits for its fsync before answering FLUSH_DISK_TIMEOUT
    (the message is stored either way)."""
    offset_persist_interval_ms: int = 5_000
    """Milliseconds between writes of changed consumer offsets to disk (a crash loses at most
    this window of offset commits, as in RocketMQ)."""
    delay_levels: str = DEFAULT_DELAY_LEVELS
    """Delay levels (``1s 5s ... 2h``; units ms s m h d), parsed by the engine's
    :func:`~reconsume.engine.delays.parse_delay_levels`."""
    timer_max_delay_s: int = 3 * 24 * 3600
    """Longest delay, in seconds, of a timer message (TIMER_DELAY_SEC / TIMER_DELAY_MS /
    TIMER_DELIVER_MS) or a policy's retry (RocketMQ 5's ``timerMaxDelaySec``): a send asking
    for more is refused, a longer retry delay is shortened to it."""
    http_listen: str | None = None
    """``ip:port`` of the HTTP endpoint (``/metrics``, ``/healthz``, ``/readyz``); port 0 picks
    a free one. None: no HTTP endpoint."""
    register_interval_s: float = 30.0
    """Seconds between registrations with every name server (they expire a broker after 120 s).
    Until the first registration succeeds, failed rounds are retried sooner."""
    metrics_max_queue_series: int = 2_000
    """Queues reported per queue in ``/metrics`` (``reconsume_queue_max_offset``), at most;
    the rest are left out (and counted) so a topic explosion cannot flood Prometheus."""
    store: StoreSettings = field(default_factory=StoreSettings)
    """Store sizes and intervals; ``flush_mode`` and ``offset_persist_interval_ms`` above
    override the matching store fields."""

    def __post_init__(self) -> None:
        if not self.store_dir:
            raise _invalid("store_dir", "must name a directory")
        try:
            ipaddress.ip_address(self.listen_host)
        except ValueError:
            raise _invalid("listen_host", f"{self.listen_host!r} is not an IP address") from None
        if not 0 <= self.listen_port <= 65535:
            raise _invalid("listen_port", f"{self.listen_port} is not 0-65535")
        if self.advertised_address is not None:
            advertised = _parse_address("advertised_address", self.advertised_address)
            if ipaddress.ip_address(advertised.ip).is_unspecified:
                raise _invalid("advertised_address", "must be an address clients can reach")
        elif ipaddress.ip_address(self.listen_host).is_unspecified:
            raise _invalid(
                "advertised_address",
                f"required when listening on {self.listen_host} (clients cannot reach it)",
            )
        for address in self.namesrv_addresses:
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise _invalid("namesrv_addresses", f"{address!r} is not host:port")
        for setting in ("broker_name", "cluster_name"):
            value = getattr(self, setting)
            if not value or not set(value) <= _NAME_CHARS:
                raise _invalid(
                    setting, f"{value!r} must be letters, digits, '_', '-' or '.' (non-empty)"
                )
        if self.broker_id != 0:
            raise _invalid("broker_id", "reconsume runs masters only; it must be 0")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise _invalid(
                "default_topic_queue_nums", f"{self.default_topic_queue_nums} is not 1-1024"
            )
        if not isinstance(self.flush_mode, FlushMode):
            raise _invalid("flush_mode", f"{self.flush_mode!r} is not Async or Sync")
        for setting in ("sync_flush_timeout_ms", "offset_persist_interval_ms", "timer_max_delay_s"):
            if getattr(self, setting) <= 0:
                raise _invalid(setting, "must be positive")
        try:
            parse_delay_levels(self.delay_levels)
        except InvalidArgumentError as exc:
            raise _invalid("delay_levels", str(exc)) from None
        if self.http_listen is not None:
            http_host, http_port = self.http_address() or ("", 0)
            hosts = {ipaddress.ip_address(http_host), ipaddress.ip_address(self.listen_host)}
            if http_port == self.listen_port != 0 and (
                len(hosts) == 1 or any(host.is_unspecified for host in hosts)
            ):
                raise _invalid("http_listen", f"port {http_port} is the remoting port (listen)")
        if not (math.isfinite(self.register_interval_s) and self.register_interval_s > 0):
            raise _invalid("register_interval_s", f"{self.register_interval_s} is not positive")
        if self.metrics_max_queue_series < 0:
            raise _invalid("metrics_max_queue_series", "must not be negative")
        if not isinstance(self.store, StoreSettings):
            raise _invalid("store", f"{self.store!r} is not StoreSettings")

    def store_settings(self) -> StoreSettings:
        """The store's settings with this broker's flush mode and offset persist interval."""
        return replace(
            self.store,
            flush_mode=self.flush_mode,
            table_flush_interval_ms=self.offset_persist_interval_ms,
        )

    def http_address(self) -> tuple[str, int] | None:
        """``(ip, port)`` of the HTTP endpoint, or None when there is none."""
        if self.http_listen is None:
            return None
        address = _parse_address("http_listen", self.http_listen)
        if address.port > 65535:
            raise _invalid("http_listen", f"port {address.port} is not 0-65535")
        return str(ipaddress.ip_address(address.ip)), address.port

    def advertised(self, bound_port: int) -> HostAddress:
        """The address to advertise once the server listens on ``bound_port``."""
        if self.advertised_address is None:
            return HostAddress(ipaddress.ip_address(self.listen_host).packed, bound_port)
        address = _parse_address("advertised_address", self.advertised_address)
        return address if address.port else HostAddress(address.ip, bound_port)


def _parse_address(setting: str, text: str) -> HostAddress:
    try:
        return HostAddress.parse(text)
    except InvalidArgumentError as exc:
        raise _invalid(setting, str(exc)) from None
