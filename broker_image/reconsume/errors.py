"""The exception tree of reconsume. Every error raised on purpose derives from ReconsumeError.

::

    ReconsumeError
    ├── InvalidArgumentError          a caller passed something out of bounds (also ValueError)
    │   ├── InvalidNameError          topic or group name breaks the naming rules
    │   ├── MessageTooLargeError      body + properties exceed the configured maximum
    │   └── PropertyError             a property name or value holds a separator character
    ├── CodecError                    bytes that do not decode (also ValueError)
    │   ├── TruncatedRecordError      fewer bytes than the record's own lengths announce
    │   ├── BadMagicError             the magic code is not a message record's
    │   ├── RecordLengthError         the total size disagrees with the lengths inside
    │   ├── BodyCrcError              the stored body CRC does not match the body
    │   ├── InvalidMessageIdError     a message id that is not hex of the expected length
    │   └── FrameError                a remoting frame that does not decode
    ├── RemotingError                 talking to a name server or broker failed
    │   ├── RemotingConnectError      no connection could be made (retriable)
    │   ├── RemotingTimeoutError      no response within the timeout (retriable)
    │   └── ResponseError             the peer answered with an error code; one subclass per
    │       │                         code in reconsume.wire.errors, each with ``retriable``
    │       ├── ResponseCodeError     base of those per-code classes (SystemBusyError, ...)
    │       └── UnknownResponseError  a code reconsume does not know (not retriable)
    └── StoreError                    the message store could not do what was asked
        ├── StoreClosedError          the store was closed
        ├── StoreCorruptionError      a file is damaged beyond what recovery repairs
        ├── TableError                a persisted table (configs, offsets) cannot be read
        ├── ReplicationError          replicated bytes that do not continue this log
        ├── ReplicaUnavailableError   no replica in sync for a Sync-replicated write
        └── NotMasterError            an append to a store that is a replica

Third-party and OS exceptions are translated where they enter (``raise ... from exc``) when
the caller can act on the difference; plain ``OSError`` from disk I/O propagates unchanged.
"""

from __future__ import annotations


class ReconsumeError(Exception):
    """Root of every error reconsume raises on purpose."""


class InvalidArgumentError(ReconsumeError, ValueError):
    """A caller passed a value outside what the operation accepts."""


class InvalidNameError(InvalidArgumentError):
    """A topic or consumer-group name breaks the naming rules."""


class MessageTooLargeError(InvalidArgumentError):
    """A message is larger than the configured maximum."""


class PropertyError(InvalidArgumentError):
    """A property name or value cannot be encoded."""


class CodecError(ReconsumeError, ValueError):
    """Bytes that do not decode as what they claim to be."""


class TruncatedRecordError(CodecError):
    """The buffer ends before the record's own lengths say it does."""


class BadMagicError(CodecError):
    """The magic code is not the message-record magic code."""


class RecordLengthError(CodecError):
    """The record's total size disagrees with the lengths of its parts."""


class BodyCrcError(CodecError):
    """The body CRC stored in the record does not match the body."""


class InvalidMessageIdError(CodecError):
    """A message id that is not hex of the expected length."""


class FrameError(CodecError):
    """A remoting frame that does not decode (bad length, header or serialization type)."""


class RemotingError(ReconsumeError):
    """Talking to a name server or broker failed."""

    retriable = False


class RemotingConnectError(RemotingError):
    """No connection could be made to the address."""

    retriable = True


class RemotingTimeoutError(RemotingError):
    """The peer did not answer within the timeout."""

    retriable = True


class ResponseError(RemotingError):
    """The peer answered with an error response code."""

    def __init__(self, code: int, remark: str | None, operation: str = "") -> None:
        self.code = code
        self.remark = remark
        self.operation = operation
        where = f"{operation}: " if operation else ""
        super().__init__(f"{where}{type(self).__name__} (code {code}): {remark or 'no remark'}")


class StoreError(ReconsumeError):
    """The message store could not complete an operation."""


class StoreClosedError(StoreError):
    """The store was used after it was closed."""


class StoreCorruptionError(StoreError):
    """A store file is damaged beyond what recovery can repair."""


class TableError(StoreError):
    """A persisted table cannot be read from its file or from its backup."""


class ReplicationError(StoreError):
    """Bytes from a replication peer that do not continue this log (a gap, a damaged or
    misplaced record, an offset outside the log, a stale epoch)."""


class ReplicaUnavailableError(StoreError):
    """No replica is in sync: a Sync-replicated write is on the master only."""


class NotMasterError(StoreError):
    """A store that is a replica takes appends only from its master's log."""
