"""CONSUMER_SEND_MSG_BACK (RocketMQ's ``SendMessageProcessor.consumerSendMsgBack``).

Checks, in this order (DESIGN §3): the group's config (SUBSCRIPTION_GROUP_NOT_EXIST), the
broker writable (NO_PERMISSION), ``retryQueueNums <= 0`` (SUCCESS, the message is dropped and
counted), the retry topic created with ``retryQueueNums`` queues and writable (NO_PERMISSION),
the original found at the header's commit-log offset (SYSTEM_ERROR). Then the engine decides
with the group's retry policy (:mod:`reconsume.engine.retry`,
:mod:`reconsume.engine.policies`): a retry is stored in the schedule topic at its delay level
or in the timer topic after its policy's delay, a dead letter in ``%DLQ%<group>`` (one queue,
readable and writable). Under Sync flush the answer waits for the fsync covering the stored
message.
"""

from __future__ import annotations

import logging
import random
import time

from reconsume.broker.context import BrokerContext
from reconsume.engine.policies import retry_policy
from reconsume.engine.retry import (
    DLQ_QUEUE_NUMS,
    DelayLevelPolicy,
    RetryDecision,
    RetryPolicy,
    max_reconsume_times,
)
from reconsume.engine.retry_message import origin_topic, send_back_request
from reconsume.errors import InvalidArgumentError, StoreError
from reconsume.message.configs import PERM_READ_WRITE, SubscriptionGroupConfig, is_writable
from reconsume.message.decode import decode_record
from reconsume.message.names import dead_letter_topic, retry_topic, validate_group
from reconsume.wire.broker_headers import ConsumerSendMsgBackRequestHeader
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

UNIT_SUB_TOPIC_SYS_FLAG = 0x2
"""``TopicSysFlag.buildSysFlag(false, true)``: the retry topic of a unit-mode consumer."""


def _stored(request: RemotingCommand, code: int) -> RemotingCommand:
    """The answer once the store said ``code``: as Apache RocketMQ's send-back, any status but
    stored is SYSTEM_ERROR with the status's name (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE,
    ...); the retry stays stored either way."""
    if code != ResponseCode.SUCCESS:
        return request.respond(ResponseCode.SYSTEM_ERROR, _status_name(code))
    return request.respond()


def _status_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"store status {code}"


def _sent_back_from(stored_topic: str, group: str, origin: str | None) -> bool:
    """Whether a send-back of a message stored in ``stored_topic`` is one a consumer of
    ``group`` makes: of a message of the topic it names as origin (checked for SUB with access
    control on), or of one already in the group's retry topic."""
    return stored_topic == retry_topic(group) or (bool(origin) and stored_topic == origin)


class SendBackProcessor:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self.policy = DelayLevelPolicy(context.delays)
        """The default policy: the broker's delay levels."""
        self._policies: dict[str, tuple[SubscriptionGroupConfig, RetryPolicy]] = {}
        """Per group: the config its policy was read from, and the policy."""

    def send_back(self, request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        """The response; None when the retry counts as stored only once fsynced or held by the
        in-sync replicas: then whatever releases it answers
        (:meth:`BrokerContext.answer_when_stored`), as a send is answered — no task per
        send-back, and the answers one release makes leave in one write per connection."""
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        validate_group(header.group)
        context = self.context
        group = context.find_group(header.group)
        if group is None:
            return request.respond(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {header.group}",
            )
        if not context.writable:
            return request.respond(
                ResponseCode.NO_PERMISSION,
                f"the broker[{context.address}] sending message is forbidden",
            )
        if group.retry_queue_nums <= 0:
            context.stats.retry_dropped(header.group)
            return request.respond()
        retry = retry_topic(header.group)
        config = context.ensure_topic(
            retry,
            group.retry_queue_nums,
            PERM_READ_WRITE,
            UNIT_SUB_TOPIC_SYS_FLAG if header.unit_mode else 0,
        )
        if not is_writable(config.perm):
            return request.respond(
                ResponseCode.NO_PERMISSION, f"the topic[{retry}] sending message is forbidden"
            )
        record = context.store.read_message(header.offset) if header.offset >= 0 else None
        if record is None:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        original = decode_record(record)
        if context.settings.acl_file is not None and not _sent_back_from(
            original.topic, header.group, header.origin_topic
        ):
            # The request names an offset, not a topic: without this, an account with SUB
            # on its own group only could copy any message into its retry topic and read it.
            return request.respond(
                ResponseCode.NO_PERMISSION,
                f"the message at offset {header.offset} is in topic {original.topic}, neither "
                f"the request's origin topic nor group {header.group}'s retry topic",
            )
        decision = self.policy_of(group).decide(
            original.reconsume_times,
            max_reconsume_times(group.retry_max_times, header.max_reconsume_times),
            header.delay_level,
        )
        if decision.dead_letter:
            context.ensure_topic(dead_letter_topic(header.group), DLQ_QUEUE_NUMS, PERM_READ_WRITE)
            queue_id = 0
        else:
            # Only queues the retry topic has: a group whose retryQueueNums was raised before
            # its topic must not write retries into queues no consumer reads.
            queues = max(1, min(group.retry_queue_nums, config.write_queue_nums))
            queue_id = random.randrange(99_999_999) % queues
        put = send_back_request(
            original,
            group=header.group,
            decision=decision,
            queue_id=queue_id,
            levels=context.delays,
            now_ms=time.time_ns() // 1_000_000,
        )
        try:
            result = context.append(put)
        except (InvalidArgumentError, StoreError, OSError) as exc:
            log.warning("send-back of %s for %s failed: %s", original.msg_id, header.group, exc)
            return request.respond(ResponseCode.SYSTEM_ERROR, f"storing the retry failed: {exc}")
        origin = origin_topic(original.properties, original.topic)
        if context.waits_for_storage:
            group_name = header.group

            def told(code: int) -> None:
                if code == ResponseCode.SUCCESS:
                    self._count(group_name, origin, decision)

            context.reply_when_stored(
                result, connection, request, lambda code: _stored(request, code), told=told
            )
            return None
        self._count(header.group, origin, decision)
        return request.respond()

    def policy_of(self, group: SubscriptionGroupConfig) -> RetryPolicy:
        """The group's retry policy (``groupRetryPolicy``), read once per config version. A
        stored policy that does not parse (written by an older broker) means the delay levels."""
        if group.group_retry_policy is None:
            return self.policy
        cached = self._policies.get(group.group_name)
        if cached is not None and cached[0] is group:
            return cached[1]
        try:
            policy = retry_policy(
                group.group_retry_policy,
                self.context.delays,
                self.context.settings.timer_max_delay_s * 1000,
            )
        except InvalidArgumentError as exc:
            log.warning("group %s: %s; retrying at the delay levels", group.group_name, exc)
            policy = self.policy
        self._policies[group.group_name] = (group, policy)
        return policy

    def _count(self, group: str, origin: str, decision: RetryDecision) -> None:
        """A send-back stored: counted, and its dead letter when it became one."""
        stats = self.context.stats
        stats.sent_back(group, origin)
        if decision.dead_letter:
            stats.dead_lettered(group, origin)
