"""Listener helpers: retry-topic restoration, telling async listeners from plain ones, and
refusing an awaitable that a plain listener returned."""

from __future__ import annotations

import functools
import gc
import inspect
import warnings
from collections.abc import Callable, Generator
from typing import Any

import pytest

from reconsume.client.listener import (
    ACK_ALL,
    ConsumeFrom,
    ConsumeStatus,
    OrderlyStatus,
    checked_result,
    is_async_callable,
    restore_retry_topic,
)
from reconsume.message import properties as props
from tests.unit.client._helpers import stored


# --------------------------------------------------------------------------- retry topic
def test_a_message_from_the_groups_retry_topic_gets_its_first_topic_back() -> None:
    message = stored(topic="%RETRY%g", properties={props.RETRY_TOPIC: "T", "k": "v"})
    restored = restore_retry_topic(message, "g")
    assert restored.topic == "T"
    assert restored.properties == {props.RETRY_TOPIC: "T", "k": "v"}
    assert restored.queue_offset == message.queue_offset
    assert restored.commit_log_offset == message.commit_log_offset
    assert message.topic == "%RETRY%g"  # the pulled message itself is unchanged


def test_messages_without_a_retry_topic_property_stay_where_they_are() -> None:
    message = stored(topic="%RETRY%g", properties={})
    assert restore_retry_topic(message, "g") is message


def test_messages_of_a_normal_topic_are_not_moved() -> None:
    message = stored(topic="T", properties={props.RETRY_TOPIC: "X"})
    assert restore_retry_topic(message, "g") is message


def test_a_retry_topic_naming_itself_is_left_alone() -> None:
    message = stored(topic="%RETRY%g", properties={props.RETRY_TOPIC: "%RETRY%g"})
    assert restore_retry_topic(message, "g") is message


def test_only_the_consumers_own_retry_topic_is_restored() -> None:
    # RocketMQ's resetRetryAndNamespace: `groupTopic.equals(msg.getTopic())` with
    # groupTopic = %RETRY%<consumerGroup>; another group's retry topic (subscribed to
    # explicitly, e.g. to inspect it) keeps its name.
    message = stored(topic="%RETRY%other", properties={props.RETRY_TOPIC: "T"})
    assert restore_retry_topic(message, "g").topic == "%RETRY%other"


# --------------------------------------------------------------------------- async or not
def plain(messages: list[Any], context: Any) -> ConsumeStatus:
    return ConsumeStatus.CONSUME_SUCCESS


async def coroutine_function(messages: list[Any], context: Any) -> ConsumeStatus:
    return ConsumeStatus.CONSUME_SUCCESS


class AsyncCall:
    async def __call__(self, messages: list[Any], context: Any) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS

    async def method(self, messages: list[Any], context: Any) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS


class PlainCall:
    def __call__(self, messages: list[Any], context: Any) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS


@pytest.mark.parametrize(
    ("listener", "expected"),
    [
        (plain, False),
        (lambda messages, context: ConsumeStatus.CONSUME_SUCCESS, False),
        (PlainCall(), False),
        (functools.partial(plain), False),
        (coroutine_function, True),
        (AsyncCall(), True),
        (AsyncCall().method, True),
        (functools.partial(coroutine_function), True),
        (functools.partial(AsyncCall().method), True),
    ],
    ids=[
        "function",
        "lambda",
        "object-with-call",
        "partial-of-function",
        "coroutine-function",
        "object-with-async-call",
        "async-method",
        "partial-of-coroutine-function",
        "partial-of-async-method",
    ],
)
def test_is_async_callable(listener: Callable[..., Any], expected: bool) -> None:
    assert is_async_callable(listener) is expected


@pytest.mark.parametrize(
    "listener",
    [
        functools.partial(AsyncCall()),
        lambda messages, context: coroutine_function(messages, context),
    ],
    ids=["partial-of-async-callable-object", "lambda-returning-coroutine"],
)
def test_async_listeners_in_disguise_are_never_silently_ignored(
    listener: Callable[..., Any],
) -> None:
    # Either recognised as async, or its coroutine is refused when it comes back from a thread.
    if is_async_callable(listener):
        return
    with pytest.raises(TypeError, match="async def"):
        checked_result(listener([], None))


# --------------------------------------------------------------------------- results
@pytest.mark.parametrize(
    "result", [ConsumeStatus.CONSUME_SUCCESS, OrderlyStatus.SUCCESS, None, 0, "x"]
)
def test_checked_result_passes_plain_results(result: object) -> None:
    assert checked_result(result) is result


def test_checked_result_refuses_a_coroutine_and_closes_it() -> None:
    coroutine = coroutine_function([], None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="async def"):
            checked_result(coroutine)
        assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
        del coroutine
        gc.collect()
    assert [str(w.message) for w in caught] == []


class Awaitable:
    def __await__(self) -> Generator[None, None, ConsumeStatus]:
        yield
        return ConsumeStatus.CONSUME_SUCCESS


def test_checked_result_refuses_any_awaitable() -> None:
    with pytest.raises(TypeError, match="awaitable"):
        checked_result(Awaitable())


# --------------------------------------------------------------------------- names
def test_names_and_constants_are_rocketmqs() -> None:
    assert ACK_ALL == 2_147_483_647  # Integer.MAX_VALUE
    assert ConsumeStatus.RECONSUME_LATER.value == "RECONSUME_LATER"
    assert OrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT.value == "SUSPEND_CURRENT_QUEUE_A_MOMENT"
    assert [c.value for c in ConsumeFrom] == [
        "CONSUME_FROM_LAST_OFFSET",
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ]
