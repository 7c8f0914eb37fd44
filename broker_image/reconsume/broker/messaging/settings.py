"""What Telemetry answers a client's Settings with (Apache RocketMQ's
``GrpcClientSettingsManager``): a producer gets the send retries and the largest body; a
consumer gets its group's retry policy — the same ``groupRetryPolicy`` and ``retryMaxTimes``
the broker applies to 4.x consumers' send-backs — its FIFO flag, batch size and longest poll.

A group without a ``groupRetryPolicy`` retries at the broker's delay levels from level 3 on
(1 s, 5 s, 10 s, ... with RocketMQ's default levels), what a 4.x consumer's send-back gets:
sent as RocketMQ's customized backoff with those delays.
"""

from __future__ import annotations

from reconsume.broker.messaging.times import duration
from reconsume.engine.delays import DelayLevels
from reconsume.engine.policies import CustomizedPolicy, ExponentialPolicy, retry_policy
from reconsume.engine.retry import next_delay_level
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.wire.v2 import definition_pb2 as pb

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1_000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
"""The proxy's defaults (``grpcClientProducer*``)."""
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_TIMEOUT_MS = 30_000
"""The proxy's ``grpcClientConsumerLongPollingBatchSize`` and ``...MaxLongPollingTimeoutMillis``."""


def group_backoff(
    config: SubscriptionGroupConfig, levels: DelayLevels, max_delay_ms: int
) -> pb.RetryPolicy:
    """The group's retry policy as the protocol carries it."""
    policy = retry_policy(config.group_retry_policy, levels, max_delay_ms)
    backoff = pb.RetryPolicy(max_attempts=config.retry_max_times + 1)
    if isinstance(policy, ExponentialPolicy):
        backoff.exponential_backoff.CopyFrom(
            pb.ExponentialBackoff(
                initial=duration(policy.initial_ms),
                max=duration(min(policy.max_ms, max_delay_ms)),
                multiplier=float(policy.multiplier),
            )
        )
    elif isinstance(policy, CustomizedPolicy):
        backoff.customized_backoff.CopyFrom(
            pb.CustomizedBackoff(next=[duration(min(ms, max_delay_ms)) for ms in policy.next_ms])
        )
    else:
        delays = [
            levels.delay_ms(next_delay_level(times, levels))
            for times in range(max(1, levels.max_level - next_delay_level(0, levels) + 1))
        ]
        backoff.customized_backoff.CopyFrom(
            pb.CustomizedBackoff(next=[duration(ms) for ms in delays])
        )
    return backoff


def answer(
    settings: pb.Settings,
    group: SubscriptionGroupConfig | None,
    levels: DelayLevels,
    *,
    max_body_bytes: int,
    max_delay_ms: int,
) -> pb.Settings:
    """The client's settings with the server's part filled in."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    if settings.HasField("publishing"):
        merged.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=PRODUCER_MAX_ATTEMPTS,
                exponential_backoff=pb.ExponentialBackoff(
                    initial=duration(PRODUCER_BACKOFF_INITIAL_MS),
                    max=duration(PRODUCER_BACKOFF_MAX_MS),
                    multiplier=PRODUCER_BACKOFF_MULTIPLIER,
                ),
            )
        )
        merged.publishing.validate_message_type = True
        merged.publishing.max_body_size = max_body_bytes
    elif settings.HasField("subscription"):
        subscription = merged.subscription
        subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        subscription.long_polling_timeout.CopyFrom(duration(LONG_POLLING_TIMEOUT_MS))
        config = group or SubscriptionGroupConfig(group_name=settings.subscription.group.name)
        subscription.fifo = config.consume_message_orderly
        merged.backoff_policy.CopyFrom(group_backoff(config, levels, max_delay_ms))
    merged.metric.CopyFrom(pb.Metric(on=False))
    return merged
