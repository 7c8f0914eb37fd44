"""``apache.rocketmq.v2.Status`` as Apache RocketMQ's proxy answers it: remoting response
codes mapped to gRPC protocol codes (its ``ResponseBuilder`` and ``SendMessageActivity``), and
the refusals the service raises itself."""

from __future__ import annotations

from reconsume.wire.codes import ResponseCode
from reconsume.wire.v2 import definition_pb2 as pb

_FROM_REMOTING: dict[int, pb.Code] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.FLOW_CONTROL: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
}


def status(code: pb.Code, message: str | None = None) -> pb.Status:
    """A Status; its message is the code's name when none is given (as the proxy's OK)."""
    return pb.Status(code=code, message=message if message is not None else pb.Code.Name(code))


def from_remoting(code: int, remark: str | None) -> pb.Status:
    """The Status of a remoting answer; codes without a counterpart are internal errors. An
    answer without a remark (a Sync write's SLAVE_NOT_AVAILABLE) says its code's name."""
    if not remark:
        try:
            remark = f"{ResponseCode(code).name} ({code})"
        except ValueError:
            remark = str(code)
    return status(_FROM_REMOTING.get(code, pb.INTERNAL_SERVER_ERROR), remark)


class Refused(Exception):
    """A request refused with a protocol code (the call is answered with it, not failed)."""

    def __init__(self, code: pb.Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def status(self) -> pb.Status:
        return status(self.code, self.message)
