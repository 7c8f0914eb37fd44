"""How a push consumer behaves: one frozen dataclass, checked when it is made.

::

    settings = ConsumerSettings(consume_from=ConsumeFrom.FIRST_OFFSET, batch_size=16)
    consumer = PushConsumer(["127.0.0.1:9876"], "orders-consumer", settings=settings)

The group, the name servers and the listener say who a consumer is and stay arguments of
:class:`~reconsume.client.push.PushConsumer`; everything here has a default that suits most
consumers. Where RocketMQ's ``DefaultMQPushConsumer`` (or its ``ClientConfig``) has the same
setting, its name is given, so a Java consumer's configuration can be carried over.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconsume.client.concurrent import LOCAL_RETRY_DELAY_S
from reconsume.client.listener import ConsumeFrom, MessageModel
from reconsume.errors import InvalidArgumentError

DEFAULT_MAX_RECONSUME_TIMES = 16
"""A concurrent consumer's maximum when ``max_reconsume_times`` is -1, as in RocketMQ."""
ORDERLY_UNLIMITED = 2**31 - 1
"""An orderly consumer's maximum when ``max_reconsume_times`` is -1: no limit, as in RocketMQ."""


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """A push consumer's settings; each is checked here, so a consumer never starts with a
    value it would refuse later."""

    model: MessageModel = MessageModel.CLUSTERING
    """Clustering (the group's consumers split the queues) or broadcasting (each reads every
    queue). RocketMQ: ``messageModel``."""
    consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET
    """Where a queue with no committed offset starts. RocketMQ: ``consumeFromWhere``."""
    consume_timestamp_ms: int = 0
    """With ``ConsumeFrom.TIMESTAMP``: the time, in milliseconds since the epoch, to start
    from. RocketMQ: ``consumeTimestamp`` (a ``yyyyMMddHHmmss`` string there)."""
    batch_size: int = 1
    """Messages handed to the listener at once, 1-1024. RocketMQ:
    ``consumeMessageBatchMaxSize``."""
    pull_batch_size: int = 32
    """Messages asked for per pull, 1-1024. RocketMQ: ``pullBatchSize``."""
    concurrency: int = 20
    """Batches in the listener at once, and threads of the pool plain-function listeners run
    on. RocketMQ: ``consumeThreadMax`` (and ``consumeThreadMin``)."""
    max_held_per_queue: int = 1000
    """Unfinished messages a queue may hold before its pulls pause (flow control). RocketMQ:
    ``pullThresholdForQueue``."""
    max_reconsume_times: int = -1
    """Deliveries of a failed message before it goes to the dead-letter queue; -1: 16 for a
    concurrent listener, unlimited for an orderly one. Sent with every send-back, so it
    overrides the group's ``retryMaxTimes``. RocketMQ: ``maxReconsumeTimes``."""
    suspend_ms: int = 1000
    """Milliseconds an orderly queue pauses after a failure when the listener does not say.
    RocketMQ: ``suspendCurrentQueueTimeMillis``."""
    local_retry_delay_s: float = LOCAL_RETRY_DELAY_S
    """Seconds before a batch that could not be sent back is consumed again by this consumer.
    RocketMQ waits 5 s too, without a setting."""
    long_poll_ms: int = 15_000
    """Milliseconds a pull waits on the broker for new messages. RocketMQ:
    ``BROKER_SUSPEND_MAX_TIME_MILLIS`` (a constant there)."""
    rebalance_interval_s: float = 20.0
    """Seconds between rebalances when no broker announces a change of the group. RocketMQ:
    ``rocketmq.client.rebalance.waitInterval``."""
    heartbeat_interval_s: float = 30.0
    """Seconds between heartbeats to every broker. RocketMQ: ``heartbeatBrokerInterval``."""
    persist_interval_s: float = 5.0
    """Seconds between commits of every queue's offset. RocketMQ:
    ``persistConsumerOffsetInterval``."""
    lock_interval_s: float = 20.0
    """Orderly clustering: seconds between renewals of the queues' broker locks. RocketMQ:
    ``rocketmq.client.rebalance.lockInterval``."""
    shutdown_wait_s: float = 10.0
    """Seconds a shutdown or a queue's hand-over waits for batches in the listener. RocketMQ's
    nearest is ``awaitTerminationMillisWhenShutdown`` (shutdown only, 0 by default)."""
    instance_name: str | None = None
    """The second half of the client id ``<ip>@<instance_name>``; None: ``<pid>-<object id>``,
    distinct for every consumer of a process. RocketMQ: ``instanceName``."""
    offset_dir: Path | None = None
    """Broadcasting: directory of the local offset files; None:
    ``~/.reconsume/offsets/<instance_name>``. RocketMQ: ``rocketmq.client.localOffsetStoreDir``."""
    timeout_s: float = 3.0
    """Seconds a request to a broker or name server may take. RocketMQ:
    ``mqClientApiTimeout``."""

    def __post_init__(self) -> None:
        for name, value in (
            ("batch_size", self.batch_size),
            ("pull_batch_size", self.pull_batch_size),
        ):
            if not 1 <= value <= 1024:
                raise InvalidArgumentError(f"{name} must be in 1..1024, not {value}")
        if self.concurrency < 1 or self.max_held_per_queue < 1:
            raise InvalidArgumentError("concurrency and max_held_per_queue must be >= 1")
        if self.local_retry_delay_s < 0:
            raise InvalidArgumentError("local_retry_delay_s must be >= 0")

    def reconsume_limit(self, orderly: bool) -> int:
        """The maximum reconsume times in force: ``max_reconsume_times``, or when it is -1,
        RocketMQ's default for the kind of listener."""
        if self.max_reconsume_times >= 0:
            return self.max_reconsume_times
        return ORDERLY_UNLIMITED if orderly else DEFAULT_MAX_RECONSUME_TIMES


DEFAULT_SETTINGS = ConsumerSettings()
"""The settings of a consumer given none (one shared instance: settings are frozen)."""
