"""Settings of one broker process."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from reconsume.broker.kube_api import dns_label_problem
from reconsume.broker.kube_lease import kube_election_problem
from reconsume.broker.listening import (
    advertised,
    check_listening,
    check_master_ports,
    invalid,
    listen_address,
    parse_address,
)
from reconsume.engine.delays import parse_delay_levels
from reconsume.errors import InvalidArgumentError
from reconsume.flags import flag
from reconsume.message.address import HostAddress
from reconsume.message.durations import DEFAULT_DELAY_LEVELS
from reconsume.store.settings import FlushMode, StoreSettings
from reconsume.wire.listen import listen_flag
from reconsume.wire.tls import TLS_FLAGS, ClientAuth, TlsMode, TlsServerConfig

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class ReplicationMode(StrEnum):
    """When a write counts as stored with respect to the broker's replicas."""

    ASYNC = "Async"
    SYNC = "Sync"


def _namesrv_flag(text: str) -> tuple[str, ...]:
    """``--namesrv a:1;b:2`` as the name servers' addresses."""
    return tuple(address.strip() for address in text.split(";") if address.strip())


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """What one broker listens on, where it registers, where it stores and how it behaves.

    Every validation error starts with ``setting <name>:`` so the operator or the command line
    can say which setting is wrong. A field with a ``flag`` in its metadata is also a flag of
    ``reconsume broker`` (:mod:`reconsume.flags`), whose help shows the default given here.
    """

    store_dir: str = field(metadata=flag("--store-dir", "directory of the message store"))
    """Directory of the message store (commit log, consume queues, tables); created if absent."""
    listen_host: str = field(
        default="127.0.0.1",
        metadata=listen_flag(),
    )
    """IP address to listen on; ``""`` (``--listen :PORT``) for every interface of both IP
    families, ``0.0.0.0`` or ``::`` for every interface of one (:mod:`reconsume.wire.listen`)."""
    listen_port: int = 10911
    """TCP port to listen on; 0 picks a free one (the advertised address then uses it)."""
    advertised_address: str | None = field(
        default=None,
        metadata=flag(
            "--advertise",
            "ip:port to register and put in message ids",
            empty="the --listen address; on every interface, the host name's",
        ),
    )
    """``ip:port`` clients and name servers are told to use; default: the listen address, or,
    listening on every interface, the address this machine's host name resolves to (a
    container's or pod's own; :func:`reconsume.wire.listen.own_address`). Its port 0 stands
    for the port actually bound. It is also the store host of every record, so
    offset message ids carry it."""
    namesrv_addresses: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "--namesrv",
            "name server addresses, ';'-separated (host:port;host:port)",
            parse=_namesrv_flag,
            empty="none: run unregistered",
        ),
    )
    """Name servers (``host:port``) to register with; empty: run unregistered."""
    broker_name: str = field(
        default="broker-a", metadata=flag("--broker-name", "this shard's broker name")
    )
    """Broker name: one shard of the cluster; routes list queues under this name."""
    cluster_name: str = field(default="DefaultCluster", metadata=flag("--cluster", "cluster name"))
    """Cluster the broker belongs to (name-server cluster info groups brokers by it)."""
    broker_id: int = field(
        default=0,
        metadata=flag("--broker-id", "0 for the master, 1 or more for a replica (with --master)"),
    )
    """0 for the master of its broker name; a replica's id (1 or more) is how routes list it,
    as Apache RocketMQ lists slaves."""
    master_address: str | None = field(
        default=None,
        metadata=flag(
            "--master", "ip:port of the master this replica follows", empty="none: a master"
        ),
    )
    """``ip:port`` of the master a replica (``broker_id`` 1 or more) follows; None for a
    master."""
    replication: ReplicationMode = field(
        default=ReplicationMode.ASYNC,
        metadata=flag("--replication", "when a write counts as stored on the replicas"),
    )
    """Sync: a send, a send-back and a schedule put count as stored once every in-sync
    replica has stored them (SYNC_MASTER). Async: replicas follow in the background."""
    replica_lag_max_ms: int = field(
        default=3_000,
        metadata=flag(
            "--replica-lag-max-ms",
            "milliseconds a replica may stay behind the master's log end and remain in sync",
        ),
    )
    """A replica that has not held the master's whole log within this many milliseconds
    leaves the in-sync set; Sync writes stop waiting for it."""
    replicas: int = field(
        default=1,
        metadata=flag("--replicas", "brokers (pods) of this broker name, the master included"),
    )
    """How many brokers this broker name has, the master included (1: no replica). Only
    reported (``reconsume_broker_replicas_declared``): with it a master having no replica in
    sync is told from one that has none to have; a master also reports this many minus one
    replicas at most, those disconnected included."""
    acl_file: str | None = field(
        default=None,
        metadata=flag(
            "--acl-file",
            "ACL file (TOML): check every request's signature and permissions against it",
            empty="none: no access control",
        ),
    )
    """Access control: accounts, permissions and whitelists (:mod:`reconsume.access.acl`),
    read again when the file changes. Requests the broker itself sends (registrations,
    replication) are signed with ``RECONSUME_ACCESS_KEY``/``RECONSUME_SECRET_KEY``."""
    tls_mode: TlsMode = field(default=TlsMode.DISABLED, metadata=TLS_FLAGS.mode)
    tls_cert_file: str | None = field(default=None, metadata=TLS_FLAGS.cert_file)
    tls_key_file: str | None = field(default=None, metadata=TLS_FLAGS.key_file)
    tls_ca_file: str | None = field(default=None, metadata=TLS_FLAGS.ca_file)
    tls_client_auth: ClientAuth = field(default=ClientAuth.NONE, metadata=TLS_FLAGS.client_auth)
    """TLS on the remoting port (:mod:`reconsume.wire.tls`); the broker's own connections
    (registrations, replication) use TLS when ``RECONSUME_TLS`` says so."""
    election: str | None = field(
        default=None,
        metadata=flag(
            "--election",
            "where the brokers of this name elect their master: file:PATH (one machine), "
            "kube:NAME or kube:NAMESPACE/NAME (a Kubernetes Lease)",
            empty="none: the roles --broker-id gives",
        ),
    )
    """The lease the brokers of one broker name share to elect their master and fail over
    (``file:PATH``, or a Kubernetes Lease ``kube:NAME`` in the pod's namespace or
    ``kube:NAMESPACE/NAME``). With it ``broker_id`` is this broker's index (0 is the first
    master) and no ``master_address`` is given: the lease names the master."""
    lease_duration_ms: int = field(
        default=3_000,
        metadata=flag(
            "--lease-duration-ms",
            "milliseconds an unrenewed master lease lasts before a replica takes over",
        ),
    )
    """How long a master's lease lasts unrenewed (it renews every third of it; replicas look
    every sixth): a lost master is replaced after this plus at most a sixth of it (3.5 s
    measured with 3 s, bench/failover.py). Shorter fails over sooner, and deposes a master
    whose renewals stall for more than four fifths of it."""
    kube_api: str | None = field(
        default=None,
        metadata=flag(
            "--kube-api",
            "https://HOST:PORT of the Kubernetes API server of a kube: election",
            empty="the pod's (KUBERNETES_SERVICE_HOST)",
        ),
    )
    """The API server holding a ``kube:`` election's Lease; None: the pod's own."""
    kube_token_file: str | None = field(
        default=None,
        metadata=flag(
            "--kube-token-file",
            "bearer token file for the Kubernetes API server (read again on every request)",
            empty="the pod's ServiceAccount token",
        ),
    )
    """The token a ``kube:`` election authenticates with; None: the pod's ServiceAccount
    token. Read for every request, so a rotated token is used at once."""
    kube_ca_file: str | None = field(
        default=None,
        metadata=flag(
            "--kube-ca-file",
            "CA certificate file the Kubernetes API server's certificate is checked against",
            empty="the pod's ServiceAccount ca.crt",
        ),
    )
    """The CA that signs the API server's certificate; None: the pod's (else the system's)."""
    master_service: str | None = field(
        default=None,
        metadata=flag(
            "--master-service",
            "a Service without a selector, in the kube: election's namespace, whose "
            "EndpointSlice of the same name the master points at itself: the address it "
            "registers",
            empty="none: the master registers its own address",
        ),
    )
    """A stable address for the broker name (:mod:`reconsume.broker.master_endpoint`): the
    master of the moment registers the Service's cluster IP and points its EndpointSlice at
    its own pod, so clients' cached routes stay valid through failovers. Only with a
    ``kube:`` election; replicas register their own address."""
    master_port: int = field(
        default=10912,
        metadata=flag(
            "--master-port",
            "with --master-service: the port the master listens on for the Service's clients "
            "(the EndpointSlice's)",
        ),
    )
    """With ``master_service``: the master, and only the master, listens here too (on the
    remoting port's host) and closes every connection it took here when it stops being
    master, so a client that reached a master through the Service is never left talking to
    a replica."""
    master_grpc_port: int = field(
        default=8082,
        metadata=flag(
            "--master-grpc-port",
            "with --master-service and --grpc-listen: the port the master serves RocketMQ 5's "
            "clients on for the Service's port grpc",
        ),
    )
    """As ``master_port``, for the gRPC service: RocketMQ 5's clients' routes name the
    Service's gRPC address while this broker is master."""
    replication_accept_alone: bool = field(
        default=False,
        metadata=flag(
            "--replication-accept-alone",
            "under Sync replication, accept writes on the master when no replica is in sync",
        ),
    )
    """Under Sync replication with no replica in sync: accept the write on the master alone
    (counted in ``reconsume_replication_stored_alone_total``) instead of answering
    SLAVE_NOT_AVAILABLE."""
    auto_create_topic: bool = field(
        default=True, metadata=flag("--auto-create-topic", "create unknown topics on first send")
    )
    """Create an unknown topic on first send (RocketMQ's ``autoCreateTopicEnable``; the broker
    then also serves the template topic TBW102)."""
    auto_create_subscription_group: bool = field(
        default=True,
        metadata=flag(
            "--auto-create-group",
            "create an unknown consumer group's config on first heartbeat or pull",
        ),
    )
    """Create an unknown consumer group's config on first heartbeat or pull, with defaults
    (RocketMQ's ``autoCreateSubscriptionGroup``)."""
    default_topic_queue_nums: int = field(
        default=8, metadata=flag("--default-queues", "queues of an auto-created topic, at most")
    )
    """Queues (read and write) of an auto-created topic, at most; a producer may ask for fewer."""
    flush_mode: FlushMode = field(
        default=FlushMode.ASYNC, metadata=flag("--flush", "when a send counts as durable")
    )
    """Sync: a send is answered after the fsync covering it. Async: fsync in the background."""
    sync_flush_timeout_ms: int = 5_000
    """Sync flush: milliseconds a send waits for its fsync before answering FLUSH_DISK_TIMEOUT
    (the message is stored either way)."""
    offset_persist_interval_ms: int = field(
        default=5_000,
        metadata=flag(
            "--offset-persist-interval-ms",
            "milliseconds between writes of changed consumer offsets",
        ),
    )
    """Milliseconds between writes of changed consumer offsets to disk (a crash loses at most
    this window of offset commits, as in RocketMQ)."""
    delay_levels: str = field(
        default=DEFAULT_DELAY_LEVELS,
        metadata=flag("--delay-levels", "delay levels, e.g. '1s 5s 10s 30s 1m'"),
    )
    """Delay levels (``1s 5s ... 2h``; units ms s m h d), parsed by the engine's
    :func:`~reconsume.engine.delays.parse_delay_levels`."""
    timer_max_delay_s: int = field(
        default=3 * 24 * 3600,
        metadata=flag(
            "--timer-max-delay-s",
            "longest delay of a timer message or policy retry, in seconds",
        ),
    )
    """Longest delay, in seconds, of a timer message (TIMER_DELAY_SEC / TIMER_DELAY_MS /
    TIMER_DELIVER_MS) or a policy's retry (RocketMQ 5's ``timerMaxDelaySec``): a send asking
    for more is refused, a longer retry delay is shortened to it."""
    http_listen: str | None = field(
        default=None,
        metadata=flag(
            "--http-listen", "host:port of the HTTP endpoint: /metrics, /healthz, /readyz"
        ),
    )
    """``ip:port`` of the HTTP endpoint (``/metrics``, ``/healthz``, ``/readyz``), ``:port`` on
    every interface; port 0 picks a free one. None: no HTTP endpoint."""
    grpc_listen: str | None = field(
        default=None,
        metadata=flag(
            "--grpc-listen",
            "host:port of the gRPC service of RocketMQ 5's clients (apache.rocketmq.v2)",
        ),
    )
    """``ip:port`` of the gRPC service Apache RocketMQ 5's clients speak
    (:mod:`reconsume.broker.messaging`), ``:port`` on every interface; port 0 picks a free
    one. None: no gRPC service."""
    register_interval_s: float = field(
        default=30.0,
        metadata=flag(
            "--register-interval-s", "seconds between registrations with the name servers"
        ),
    )
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
            raise invalid("store_dir", "must name a directory")
        default_advertised = check_listening(self)
        if default_advertised is not None:
            # Frozen: set once, here, as the default the field's docstring gives.
            object.__setattr__(self, "advertised_address", default_advertised)
        for address in self.namesrv_addresses:
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise invalid("namesrv_addresses", f"{address!r} is not host:port")
        for setting in ("broker_name", "cluster_name"):
            value = getattr(self, setting)
            if not value or not set(value) <= _NAME_CHARS:
                raise invalid(
                    setting, f"{value!r} must be letters, digits, '_', '-' or '.' (non-empty)"
                )
        if self.broker_id < 0:
            raise invalid("broker_id", f"{self.broker_id} is negative")
        if (tls_problem := self.tls().problem()) is not None:
            raise invalid(*tls_problem)
        if self.election is not None:
            if self.master_address is not None:
                raise invalid("master_address", "with an election the lease names the master")
            scheme, _sep, where = self.election.partition(":")
            if scheme not in ("file", "kube") or not where:
                raise invalid(
                    "election",
                    f"{self.election!r} is not file:PATH, kube:NAME or kube:NAMESPACE/NAME",
                )
            if self.lease_duration_ms < 300:
                raise invalid("lease_duration_ms", "must be at least 300")
        elif self.broker_id and self.master_address is None:
            raise invalid("master_address", f"required for a replica (broker_id {self.broker_id})")
        problem = kube_election_problem(
            self.election, self.kube_api, self.kube_token_file, self.kube_ca_file
        )
        if problem is not None:
            raise invalid(*problem)
        if self.master_service is not None:
            if self.election is None or not self.election.startswith("kube:"):
                raise invalid("master_service", "only with a Kubernetes Lease election")
            problem_text = dns_label_problem(self.master_service)
            if problem_text is not None:
                raise invalid("master_service", problem_text)
            check_master_ports(self)
        if self.master_address is not None:
            if not self.broker_id:
                raise invalid("master_address", "a master (broker_id 0) follows no master")
            parse_address("master_address", self.master_address)
        if not isinstance(self.replication, ReplicationMode):
            raise invalid("replication", f"{self.replication!r} is not Async or Sync")
        if self.replica_lag_max_ms <= 0:
            raise invalid("replica_lag_max_ms", "must be positive")
        if self.replicas < 1:
            raise invalid("replicas", f"{self.replicas} is not 1 or more")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise invalid(
                "default_topic_queue_nums", f"{self.default_topic_queue_nums} is not 1-1024"
            )
        if not isinstance(self.flush_mode, FlushMode):
            raise invalid("flush_mode", f"{self.flush_mode!r} is not Async or Sync")
        for setting in ("sync_flush_timeout_ms", "offset_persist_interval_ms", "timer_max_delay_s"):
            if getattr(self, setting) <= 0:
                raise invalid(setting, "must be positive")
        try:
            parse_delay_levels(self.delay_levels)
        except InvalidArgumentError as exc:
            raise invalid("delay_levels", str(exc)) from None
        if not (math.isfinite(self.register_interval_s) and self.register_interval_s > 0):
            raise invalid("register_interval_s", f"{self.register_interval_s} is not positive")
        if self.metrics_max_queue_series < 0:
            raise invalid("metrics_max_queue_series", "must not be negative")
        if not isinstance(self.store, StoreSettings):
            raise invalid("store", f"{self.store!r} is not StoreSettings")

    def tls(self) -> TlsServerConfig:
        return TlsServerConfig(
            self.tls_mode, self.tls_cert_file, self.tls_key_file, self.tls_ca_file,
            self.tls_client_auth,
        )  # fmt: skip

    def store_settings(self) -> StoreSettings:
        """The store's settings with this broker's flush mode and offset persist interval."""
        return replace(
            self.store,
            flush_mode=self.flush_mode,
            table_flush_interval_ms=self.offset_persist_interval_ms,
        )

    def http_address(self) -> tuple[str, int] | None:
        """``(host, port)`` of the HTTP endpoint (host ``""``: every interface), or None when
        there is none."""
        return listen_address("http_listen", self.http_listen)

    def grpc_address(self) -> tuple[str, int] | None:
        """``(host, port)`` of the gRPC service (host ``""``: every interface), or None when
        there is none."""
        return listen_address("grpc_listen", self.grpc_listen)

    def advertised(self, bound_port: int) -> HostAddress:
        """The address to advertise once the server listens on ``bound_port``."""
        return advertised(self, bound_port)
