"""Which :class:`~reconsume.wire.h2.rpc.Call` a request stream opens (:class:`Router`): its
``:path`` names the method, its headers the content type, the message encoding, the deadline
and the metadata the behavior sees. A request that is not gRPC is answered 415, an unknown
method or encoding UNIMPLEMENTED, in one HEADERS frame.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any

from reconsume.wire.h2.api import CallContext, Method, StatusCode
from reconsume.wire.h2.hpack import Header
from reconsume.wire.h2.hpack import encode as encode_headers
from reconsume.wire.h2.rpc import Call, parse_timeout, status_block
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.h2.streams import Stream

UNKNOWN_METHOD = "unknown"
"""The method label of a call to a path the server does not serve."""
_ENCODINGS = "identity,deflate,gzip"


class Router:
    """The :class:`~reconsume.wire.h2.connection.Application` of a gRPC server: each request
    stream to its method's :class:`Call`."""

    def __init__(self, methods: Mapping[str, Method], stats: TransportStats) -> None:
        self.methods = dict(methods)
        self._names = {path: path.rsplit("/", 1)[-1] for path in methods}
        self.stats = stats

    def open(self, stream: Stream, headers: list[Header], end_stream: bool) -> Any:
        path = method = content_type = ""
        encoding = timeout = ""
        metadata: dict[str, str] = {}
        for name, value in headers:
            if name[0] == ":":
                if name == ":path":
                    path = value
                elif name == ":method":
                    method = value
                continue
            if name == "content-type":
                content_type = value
            elif name == "grpc-encoding":
                encoding = value
            elif name == "grpc-timeout":
                timeout = value
            metadata[name] = value
        if method != "POST" or not content_type.startswith("application/grpc"):
            stream.send_headers(encode_headers([(":status", "415")]), True)
            return _Ignored()
        context = CallContext(stream.connection.peer, metadata)
        found = self.methods.get(path)
        if found is None:
            self.stats.calls[UNKNOWN_METHOD, StatusCode.UNIMPLEMENTED] += 1
            stream.send_headers(
                status_block(StatusCode.UNIMPLEMENTED, "Method not found!", True), True
            )
            return _Ignored()
        decompress: Callable[[bytes], bytes] | None = None
        if encoding and encoding != "identity":
            if encoding == "gzip":
                decompress = _gunzip
            elif encoding == "deflate":
                decompress = zlib.decompress
            else:
                self.stats.calls[self._names[path], StatusCode.UNIMPLEMENTED] += 1
                block = status_block(
                    StatusCode.UNIMPLEMENTED, f"grpc-encoding {encoding} is not supported", True
                )
                stream.send_headers(
                    block + encode_headers([("grpc-accept-encoding", _ENCODINGS)]), True
                )
                return _Ignored()
        call = Call(stream, found, context, decompress, self._names[path], self.stats)
        if timeout and found.kind != "unary_now":
            seconds = parse_timeout(timeout)
            if seconds is not None:
                call.set_deadline(seconds)
        if end_stream:
            call.data(b"", True)
        return call


def _gunzip(data: bytes) -> bytes:
    return zlib.decompress(data, 31)


class _Ignored:
    """The handler of a stream already answered: what else arrives on it is dropped."""

    def data(self, payload: bytes, end_stream: bool) -> None:
        pass

    def reset(self) -> None:
        pass
