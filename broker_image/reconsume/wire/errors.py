"""One :class:`ResponseError` subclass per RocketMQ response code, and the helpers that turn an
error response into one.

``retriable`` answers: may the *same* request succeed if sent again later, or to another broker
of the topic, without the caller changing anything? A retriable error is worth a retry loop
with backoff; anything else is a problem with the request, the configuration or the peer's
capabilities that a retry will only repeat. Some retriable codes come from sends whose message
was already stored (the flush and slave timeouts): retrying them is at-least-once delivery
and may duplicate the message.

Codes that are statuses rather than failures (PULL_NOT_FOUND, QUERY_NOT_FOUND, the
transaction-check answers) still get a class, so that :func:`raise_for_response` can raise
them when a caller did not expect them; callers that do expect them list them in
``expected``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import ClassVar

from reconsume.errors import ResponseError
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand

__all__ = [
    "ResponseCodeError",
    "UnknownResponseError",
    "error_class",
    "error_for",
    "raise_for_response",
    "ERROR_CLASSES",
    # one class per code, in code order
    "RemoteSystemError",
    "SystemBusyError",
    "RequestCodeNotSupportedError",
    "TransactionFailedError",
    "FlushDiskTimeoutError",
    "SlaveNotAvailableError",
    "FlushSlaveTimeoutError",
    "MessageIllegalError",
    "ServiceNotAvailableError",
    "VersionNotSupportedError",
    "NoPermissionError",
    "TopicNotExistError",
    "TopicExistAlreadyError",
    "PullNotFoundError",
    "PullRetryImmediatelyError",
    "PullOffsetMovedError",
    "QueryNotFoundError",
    "SubscriptionParseFailedError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionGroupNotExistError",
    "FilterDataNotExistError",
    "FilterDataNotLatestError",
    "TransactionShouldCommitError",
    "TransactionShouldRollbackError",
    "TransactionStateUnknownError",
    "TransactionStateGroupWrongError",
    "NoBuyerIdError",
    "NotInCurrentUnitError",
    "ConsumerNotOnlineError",
    "ConsumeMsgTimeoutError",
    "NoMessageError",
    "FlowControlError",
]


class ResponseCodeError(ResponseError):
    """Base of the per-code classes; ``response_code`` is the class's code (instances also
    carry it as ``code``)."""

    response_code: ClassVar[ResponseCode]
    retriable: bool = False


class UnknownResponseError(ResponseError):
    """A response code reconsume does not know; never retried blindly."""

    retriable = False


# ---------------------------------------------------------------- 1..4: remoting-level codes
class RemoteSystemError(ResponseCodeError):
    """SYSTEM_ERROR (``SystemError`` would shadow the builtin)."""

    response_code = ResponseCode.SYSTEM_ERROR
    # The peer failed while handling the request (a handler exception, a store write that
    # failed, thread pool rejection); nothing says the request was wrong. RocketMQ's producer
    # retries it too.
    retriable = True


class SystemBusyError(ResponseCodeError):
    response_code = ResponseCode.SYSTEM_BUSY
    # Page cache busy or a full request queue: load shedding that passes.
    retriable = True


class RequestCodeNotSupportedError(ResponseCodeError):
    response_code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    # The peer does not implement the request; it will not learn to.
    retriable = False


class TransactionFailedError(ResponseCodeError):
    response_code = ResponseCode.TRANSACTION_FAILED
    # The transaction outcome was decided against the request.
    retriable = False


# ---------------------------------------------------------------- 10..28: broker codes
class FlushDiskTimeoutError(ResponseCodeError):
    response_code = ResponseCode.FLUSH_DISK_TIMEOUT
    # Stored but not flushed in time under SYNC_FLUSH; the disk catches up. A retry may
    # store the message twice.
    retriable = True


class SlaveNotAvailableError(ResponseCodeError):
    response_code = ResponseCode.SLAVE_NOT_AVAILABLE
    # Stored on the master, no slave to replicate to under SYNC_MASTER; slaves reconnect.
    # A retry may store the message twice.
    retriable = True


class FlushSlaveTimeoutError(ResponseCodeError):
    response_code = ResponseCode.FLUSH_SLAVE_TIMEOUT
    # Stored on the master, replication did not finish in time; it catches up. A retry may
    # store the message twice.
    retriable = True


class MessageIllegalError(ResponseCodeError):
    response_code = ResponseCode.MESSAGE_ILLEGAL
    # Too large, bad properties or bad topic name: the same message fails the same way.
    retriable = False


class ServiceNotAvailableError(ResponseCodeError):
    response_code = ResponseCode.SERVICE_NOT_AVAILABLE
    # Broker starting, shutting down, read-only after a disk error or a slave asked to write:
    # another broker of the topic, or this one later, can take the request.
    retriable = True


class VersionNotSupportedError(ResponseCodeError):
    response_code = ResponseCode.VERSION_NOT_SUPPORTED
    # The client's protocol version is refused; sending it again changes nothing.
    retriable = False


class NoPermissionError(ResponseCodeError):
    response_code = ResponseCode.NO_PERMISSION
    # Topic or broker permission (or ACL) forbids the operation until an operator changes it.
    # RocketMQ's producer does try another broker on it; one that does not is not retriable.
    retriable = False


class TopicNotExistError(ResponseCodeError):
    response_code = ResponseCode.TOPIC_NOT_EXIST
    # Routes may appear: a topic being created or auto-created reaches the brokers and name
    # servers after a delay.
    retriable = True


class TopicExistAlreadyError(ResponseCodeError):
    response_code = ResponseCode.TOPIC_EXIST_ALREADY
    # The topic exists; creating it again fails again.
    retriable = False


class PullNotFoundError(ResponseCodeError):
    response_code = ResponseCode.PULL_NOT_FOUND
    # A pull status (no new message); pullers expect it rather than retry on it.
    retriable = False


class PullRetryImmediatelyError(ResponseCodeError):
    response_code = ResponseCode.PULL_RETRY_IMMEDIATELY
    # The broker asks for the pull to be sent again (e.g. filtered everything it read).
    retriable = True


class PullOffsetMovedError(ResponseCodeError):
    response_code = ResponseCode.PULL_OFFSET_MOVED
    # The offset is outside the queue; the caller must correct it first.
    retriable = False


class QueryNotFoundError(ResponseCodeError):
    response_code = ResponseCode.QUERY_NOT_FOUND
    # A lookup found nothing; asking again finds nothing.
    retriable = False


class SubscriptionParseFailedError(ResponseCodeError):
    response_code = ResponseCode.SUBSCRIPTION_PARSE_FAILED
    # The subscription expression does not parse.
    retriable = False


class SubscriptionNotExistError(ResponseCodeError):
    response_code = ResponseCode.SUBSCRIPTION_NOT_EXIST
    # The broker has no subscription of the group; a heartbeat must register it first.
    retriable = False


class SubscriptionNotLatestError(ResponseCodeError):
    response_code = ResponseCode.SUBSCRIPTION_NOT_LATEST
    # The pull carries an older subscription version; a heartbeat must update it first.
    retriable = False


class SubscriptionGroupNotExistError(ResponseCodeError):
    response_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    # The group is not configured and auto-creation is off: an operator must create it.
    retriable = False


class FilterDataNotExistError(ResponseCodeError):
    response_code = ResponseCode.FILTER_DATA_NOT_EXIST
    # Expression filter data missing for the group; needs a heartbeat or a fixed expression.
    retriable = False


class FilterDataNotLatestError(ResponseCodeError):
    response_code = ResponseCode.FILTER_DATA_NOT_LATEST
    # Expression filter data outdated; needs a heartbeat first.
    retriable = False


# ---------------------------------------------------------------- 200..215: extended codes
class TransactionShouldCommitError(ResponseCodeError):
    response_code = ResponseCode.TRANSACTION_SHOULD_COMMIT
    # A transaction-check answer, not a failure to retry.
    retriable = False


class TransactionShouldRollbackError(ResponseCodeError):
    response_code = ResponseCode.TRANSACTION_SHOULD_ROLLBACK
    # A transaction-check answer, not a failure to retry.
    retriable = False


class TransactionStateUnknownError(ResponseCodeError):
    """TRANSACTION_STATE_UNKNOW (RocketMQ's spelling)."""

    response_code = ResponseCode.TRANSACTION_STATE_UNKNOW
    # A transaction-check answer; the broker checks again on its own schedule.
    retriable = False


class TransactionStateGroupWrongError(ResponseCodeError):
    response_code = ResponseCode.TRANSACTION_STATE_GROUP_WRONG
    # The producer group does not own the transaction.
    retriable = False


class NoBuyerIdError(ResponseCodeError):
    response_code = ResponseCode.NO_BUYER_ID
    # A unit-deployment property is missing from the message.
    retriable = False


class NotInCurrentUnitError(ResponseCodeError):
    response_code = ResponseCode.NOT_IN_CURRENT_UNIT
    # Unit-deployment routing sent the message to the wrong unit.
    retriable = False


class ConsumerNotOnlineError(ResponseCodeError):
    response_code = ResponseCode.CONSUMER_NOT_ONLINE
    # The addressed consumer client is not connected to the broker.
    retriable = False


class ConsumeMsgTimeoutError(ResponseCodeError):
    response_code = ResponseCode.CONSUME_MSG_TIMEOUT
    # The consumer (or a reply's requester) did not answer in time; it may next time.
    retriable = True


class NoMessageError(ResponseCodeError):
    response_code = ResponseCode.NO_MESSAGE
    # The message asked for does not exist.
    retriable = False


class FlowControlError(ResponseCodeError):
    response_code = ResponseCode.FLOW_CONTROL
    # Rate limiting on the peer; it lets requests through again after a backoff.
    retriable = True


def _registry() -> Mapping[int, type[ResponseCodeError]]:
    table: dict[int, type[ResponseCodeError]] = {}
    for cls in ResponseCodeError.__subclasses__():
        code = int(cls.response_code)
        if code in table:
            raise RuntimeError(f"{cls.__name__} and {table[code].__name__} share code {code}")
        table[code] = cls
    return MappingProxyType(table)


ERROR_CLASSES: Mapping[int, type[ResponseCodeError]] = _registry()
"""Response code → its exception class (every code but SUCCESS)."""


def error_class(code: int) -> type[ResponseError]:
    """The exception class of ``code``; :class:`UnknownResponseError` for unknown codes."""
    return ERROR_CLASSES.get(code, UnknownResponseError)


def error_for(response: RemotingCommand, operation: str) -> ResponseError:
    """The exception describing an error ``response`` to ``operation`` (e.g. "SEND_MESSAGE to
    broker-a")."""
    return error_class(response.code)(response.code, response.remark, operation)


def raise_for_response(
    response: RemotingCommand,
    operation: str,
    expected: Collection[int] = (ResponseCode.SUCCESS,),
) -> RemotingCommand:
    """Return ``response`` if its code is one of ``expected``; raise its error otherwise."""
    if response.code in expected:
        return response
    raise error_for(response, operation)
