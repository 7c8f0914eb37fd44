"""What a push consumer's listener returns, and the context it is given.

The names follow RocketMQ's ``ConsumeConcurrentlyStatus`` / ``ConsumeOrderlyStatus`` and their
contexts. A listener may be a plain function (run on the consumer's thread pool, so it may
block) or a coroutine function (awaited on the event loop, so it must not block). Raising an
exception or returning None counts as RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from reconsume.client.routes import MessageQueue
from reconsume.message import properties as props
from reconsume.message.model import StoredMessage
from reconsume.message.names import retry_topic


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class OrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFrom(enum.Enum):
    """Where a group with no committed offset starts (RocketMQ's ``ConsumeFromWhere``)."""

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


ACK_ALL = 2**31 - 1
"""The default ``ack_index``: every message of the batch succeeded."""


@dataclass(slots=True)
class ConcurrentContext:
    queue: MessageQueue
    ack_index: int = ACK_ALL
    """With CONSUME_SUCCESS: messages after this index failed (RocketMQ's ``ackIndex``)."""
    delay_level_when_next_consume: int = 0
    """For failed messages: 0 the broker decides, -1 straight to the dead-letter queue,
    > 0 that delay level."""


@dataclass(slots=True)
class OrderlyContext:
    queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_ms: int = -1
    """How long to pause the queue after a failure; -1 the consumer's default."""


ConcurrentListener = Callable[
    [list[StoredMessage], ConcurrentContext],
    ConsumeStatus | Awaitable[ConsumeStatus | None] | None,
]
OrderlyListener = Callable[
    [list[StoredMessage], OrderlyContext],
    OrderlyStatus | Awaitable[OrderlyStatus | None] | None,
]


def restore_retry_topic(message: StoredMessage, group: str) -> StoredMessage:
    """A message pulled from ``%RETRY%<group>`` as its listener expects it: under the topic it
    was first sent to (RETRY_TOPIC), as RocketMQ's ``resetRetryAndNamespace`` does."""
    original = message.properties.get(props.RETRY_TOPIC)
    if original and message.topic == retry_topic(group) and original != message.topic:
        return replace(message, topic=original)
    return message


def is_async_callable(listener: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)  # noqa: B004 - the bound method, not callable()
    )


def checked_result(result: object) -> object:
    """A plain listener's result; an awaitable means the listener was async after all (for
    instance a ``functools.partial`` of a coroutine function) and is refused, not ignored."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError("the listener returned an awaitable from a thread; make it async def")
    return result


_Status = TypeVar("_Status", ConsumeStatus, OrderlyStatus)


async def call_listener(
    listener: Callable[..., Any],
    is_async: bool,
    executor: Executor,
    batch: list[StoredMessage],
    context: ConcurrentContext | OrderlyContext,
    log: logging.Logger,
) -> Any:
    """Run ``listener`` on ``batch``: awaited when it is async, on ``executor`` otherwise. An
    exception is logged and answered with None (consume later / suspend)."""
    try:
        if is_async:
            return await cast(Awaitable[Any], listener(batch, context))
        loop = asyncio.get_running_loop()
        return checked_result(await loop.run_in_executor(executor, listener, batch, context))
    except Exception:
        log.exception("listener failed on %d message(s) of %s", len(batch), context.queue)
        return None
