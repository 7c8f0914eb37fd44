"""A recording relay for ``apache.rocketmq.v2.MessagingService``: a gRPC server on 127.0.0.1
that forwards every call, unary or streaming, to an upstream endpoint (RocketMQ's proxy, or
reconsume's) and records each request and response message in order, decoded, with the
calling client's id (its ``x-mq-client-id`` header).

    with GrpcRecorder("127.0.0.1:8081") as recorder:
        run the client against recorder.endpoint
        recorder.calls()      # [Call(client, method, started_ms, requests, responses, code)]

A client learns its brokers' endpoints from ``QueryRoute`` answers, which name the proxy's own
port unless the proxy is told ``useEndpointPortFromRequest`` (``bench.rocketmq_proxy`` does):
then every call of the client goes through the relay. Messages are decoded with the message
classes of Apache RocketMQ's Python client (``rocketmq.grpc_protocol``, the published .proto
files); the relay itself forwards bytes unchanged.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.message import Message

SERVICE = "apache.rocketmq.v2.MessagingService"
_SKIPPED_HEADERS = ("user-agent", "grpc-", ":", "te", "content-type")
"""Headers gRPC sets itself (and refuses from an application)."""


def _message_classes() -> dict[str, tuple[type[Message], type[Message]]]:
    # The published protocol's classes (the package ships no type information).
    from rocketmq.grpc_protocol import service_pb2  # type: ignore[import-untyped]

    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    return {
        method.name: (
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
        )
        for method in service.methods
    }


@dataclass
class Call:
    client: str
    """The caller's ``x-mq-client-id`` header ("" without one)."""
    method: str
    """The RPC's name, e.g. ``QueryRoute``."""
    started_ms: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    code: str | None = None
    """The gRPC status the call ended with (``OK``), None while it is open."""
    headers: dict[str, str] = field(default_factory=dict)

    def statuses(self) -> list[str]:
        """The ``status.code`` of each response (``OK``, ``MESSAGE_NOT_FOUND``, ...)."""
        return [r["status"]["code"] for r in self.responses if "status" in r]


def _decode(cls: type[Message] | None, data: bytes) -> dict[str, Any]:
    if cls is None:
        return {"bytes": len(data)}
    message = cls()
    message.ParseFromString(data)
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=False)


class GrpcRecorder:
    """The relay; a context manager that starts it on a free port and stops it."""

    def __init__(self, upstream: str, log: Path | None = None, max_workers: int = 64) -> None:
        self.upstream = upstream
        self._log = log
        self._classes = _message_classes()
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._channel = grpc.insecure_channel(upstream)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
        self._server.add_generic_rpc_handlers((_Handler(self),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"127.0.0.1:{self.port}"

    def __enter__(self) -> GrpcRecorder:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=1).wait()
        self._channel.close()
        if self._log is not None:
            self.write(self._log)

    def calls(self, since: int = 0) -> list[Call]:
        """The calls made so far (from index ``since``), in the order they started."""
        with self._lock:
            return list(self._calls[since:])

    def mark(self) -> int:
        """An index for :meth:`calls`'s ``since``: the calls after this moment."""
        with self._lock:
            return len(self._calls)

    def write(self, path: Path) -> None:
        """Every call as one JSON object a line."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for call in self.calls():
                out.write(json.dumps(call.__dict__, default=str) + "\n")

    # -- the relay

    def _open(self, method: str, headers: dict[str, str]) -> Call:
        name = method.rsplit("/", 1)[-1]
        call = Call(headers.get("x-mq-client-id", ""), name, int(time.time() * 1000))
        call.headers = {k: v for k, v in headers.items() if k.startswith("x-mq-")}
        with self._lock:
            self._calls.append(call)
        return call

    def relay(
        self, method: str, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        metadata = [
            (key, value)
            for key, value in context.invocation_metadata()
            if not key.startswith(_SKIPPED_HEADERS)
        ]
        headers = {key: str(value) for key, value in metadata}
        call = self._open(method, headers)
        request_class, response_class = self._classes.get(call.method, (None, None))

        def forward() -> Iterator[bytes]:
            for data in requests:
                with self._lock:
                    call.requests.append(_decode(request_class, data))
                yield data

        remaining = context.time_remaining()
        stub: Callable[..., Any] = self._channel.stream_stream(method)
        upstream = stub(forward(), metadata=metadata, timeout=remaining)
        context.add_callback(upstream.cancel)
        try:
            context.send_initial_metadata(
                tuple(
                    (k, v)
                    for k, v in upstream.initial_metadata()
                    if not k.startswith(_SKIPPED_HEADERS)
                )
            )
            for data in upstream:
                with self._lock:
                    call.responses.append(_decode(response_class, data))
                yield data
        except grpc.RpcError as failure:
            call.code = failure.code().name if failure.code() is not None else "UNKNOWN"
            context.abort(failure.code(), failure.details() or "")
        call.code = "OK"
        trailing = upstream.trailing_metadata() or ()
        context.set_trailing_metadata(
            tuple((k, v) for k, v in trailing if not k.startswith(_SKIPPED_HEADERS))
        )


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, recorder: GrpcRecorder) -> None:
        self._recorder = recorder

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        method = str(getattr(handler_call_details, "method", ""))

        def behavior(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            return self._recorder.relay(method, requests, context)

        return grpc.stream_stream_rpc_method_handler(behavior)


def sequence(calls: list[Call]) -> list[str]:
    """The method names of ``calls`` in order, with repeats of one method run together as
    ``Method xN`` (a consumer's long polls, heartbeats)."""
    out: list[str] = []
    for call in calls:
        if out and (out[-1] == call.method or out[-1].startswith(call.method + " x")):
            times = int(out[-1].split(" x")[1]) + 1 if " x" in out[-1] else 2
            out[-1] = f"{call.method} x{times}"
        else:
            out.append(call.method)
    return out
