"""Response codes → exception classes, their retriable flags and raise_for_response."""

from __future__ import annotations

import pytest

from reconsume.errors import RemotingError, ResponseError
from reconsume.wire import errors
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.errors import (
    ERROR_CLASSES,
    ResponseCodeError,
    UnknownResponseError,
    error_class,
    error_for,
    raise_for_response,
)

ERROR_CODES = [code for code in ResponseCode if code is not ResponseCode.SUCCESS]

RETRIABLE = {
    ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY,
    ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
    ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.CONSUME_MSG_TIMEOUT,
    ResponseCode.FLOW_CONTROL,
}


def response(code: int, remark: str | None = "why") -> RemotingCommand:
    return RemotingCommand.request(0).respond(code, remark)


def test_every_error_code_has_its_own_class() -> None:
    assert set(ERROR_CLASSES) == {int(code) for code in ERROR_CODES}
    assert ResponseCode.SUCCESS not in ERROR_CLASSES
    assert len(set(ERROR_CLASSES.values())) == len(ERROR_CLASSES)


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_class_of_code(code: ResponseCode) -> None:
    cls = ERROR_CLASSES[code]
    assert cls.response_code is code
    assert issubclass(cls, ResponseCodeError)
    assert issubclass(cls, ResponseError)
    assert issubclass(cls, RemotingError)
    assert cls.__name__.endswith("Error")
    assert cls.__name__ in errors.__all__
    assert getattr(errors, cls.__name__) is cls
    assert isinstance(cls.__dict__["retriable"], bool), "each class states retriable itself"


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_retriable(code: ResponseCode) -> None:
    assert ERROR_CLASSES[code].retriable is (code in RETRIABLE)


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (ResponseCode.SYSTEM_ERROR, "RemoteSystemError"),
        (ResponseCode.SYSTEM_BUSY, "SystemBusyError"),
        (ResponseCode.TOPIC_NOT_EXIST, "TopicNotExistError"),
        (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "RequestCodeNotSupportedError"),
        (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "SubscriptionGroupNotExistError"),
        (ResponseCode.TRANSACTION_STATE_UNKNOW, "TransactionStateUnknownError"),
    ],
)
def test_names(code: ResponseCode, name: str) -> None:
    assert error_class(code).__name__ == name


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_error_for(code: ResponseCode) -> None:
    error = error_for(response(code, "broken"), "SEND_MESSAGE to broker-a")
    assert type(error) is ERROR_CLASSES[code]
    assert error.code == code
    assert error.remark == "broken"
    assert error.operation == "SEND_MESSAGE to broker-a"
    assert str(error) == (
        f"SEND_MESSAGE to broker-a: {type(error).__name__} (code {int(code)}): broken"
    )


@pytest.mark.parametrize("code", [-1, 5, 29, 209, 1000, 2**31 - 1])
def test_unknown_codes(code: int) -> None:
    error = error_for(response(code, None), "PULL_MESSAGE")
    assert type(error) is UnknownResponseError
    assert isinstance(error, ResponseError)
    assert not isinstance(error, ResponseCodeError)
    assert error.retriable is False
    assert error.code == code
    assert error.remark is None
    assert "no remark" in str(error)


def test_raise_for_response_returns_success() -> None:
    ok = response(ResponseCode.SUCCESS)
    assert raise_for_response(ok, "HEART_BEAT") is ok


def test_raise_for_response_raises_the_code_class() -> None:
    with pytest.raises(errors.SystemBusyError) as info:
        raise_for_response(response(ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]"), "SEND")
    assert info.value.retriable is True
    assert info.value.remark == "[PC_SYNCHRONIZED]"
    assert "SEND: SystemBusyError (code 2)" in str(info.value)


def test_raise_for_response_with_expected_codes() -> None:
    expected = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)
    for code in expected:
        got = response(code)
        assert raise_for_response(got, "PULL_MESSAGE", expected) is got
    with pytest.raises(errors.PullRetryImmediatelyError):
        raise_for_response(response(ResponseCode.PULL_RETRY_IMMEDIATELY), "PULL", expected)
    # SUCCESS is an error when not expected
    with pytest.raises(UnknownResponseError):
        raise_for_response(response(ResponseCode.SUCCESS), "X", (ResponseCode.NO_MESSAGE,))


def test_raise_for_unknown_code() -> None:
    with pytest.raises(UnknownResponseError, match="code 999"):
        raise_for_response(response(999), "X")
