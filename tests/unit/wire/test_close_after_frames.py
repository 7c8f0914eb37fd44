"""Frames a client writes right before it closes are all served, over plaintext and TLS, on
asyncio's loop and on uvloop: the close (a FIN, over TLS with or without close_notify) comes
after them on the same stream, and the server handles everything it reads before the end —
right after connecting or on a connection that already carried requests, whole or split into
the small writes some clients make (a length, then a header, then the rest).

A client that closes a socket holding data it never read does not close but *resets* the
connection: Linux sends an RST and drops what the socket had not yet sent. Over TLS 1.3 a
server's session tickets, sent after the handshake, were such data: with them, a client that
sent 8 frames right after the handshake and closed lost the bytes still unsent in its socket
at the close (``SIOCOUTQNSD``: 750 bytes unsent, 5 frames of 150 missing; 450, 3; 0, none),
and the "new" TLS cases below fail. The servers send no tickets
(:func:`reconsume.wire.tls.server_context`). A client closing with unread *answers* resets
all the same; no server can serve bytes that never left the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl

import pytest

from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingServer
from reconsume.wire.frame import encode_frame
from reconsume.wire.tls import TlsMode, client_context
from reconsume.wire.transport import Connection
from tests.polling import eventually_async
from tests.tls_certs import CertAuthority

from .test_tls_transport import LOOPS, LoopFactory, ca, config_of, run

__all__ = ["ca"]

NOTE = RequestCode.UPDATE_CONSUMER_OFFSET
FRAMES = 8
ROUNDS = 5


def frames(round_: int) -> list[bytes]:
    """``FRAMES`` oneway frames (no answer comes back: the close is a FIN, not a reset)."""
    encoded = []
    for i in range(FRAMES):
        command = RemotingCommand.request(NOTE, {"n": f"{round_}.{i}"}, oneway=True)
        encoded.append(encode_frame(command))
    return encoded


def write_then_close(
    port: int, tls: ssl.SSLContext | None, round_: int, *, warm: bool, split: bool, notify: bool
) -> None:
    """A blocking client: connect (and shake hands), optionally one request and its answer
    first, then the frames, then the close at once."""
    raw = socket.create_connection(("127.0.0.1", port))
    sock: socket.socket = raw if tls is None else tls.wrap_socket(raw)
    try:
        if warm:
            sock.sendall(encode_frame(RemotingCommand.request(RequestCode.HEART_BEAT)))
            answer = b""
            while len(answer) < 4 or len(answer) < 4 + int.from_bytes(answer[:4], "big"):
                chunk = sock.recv(65536)
                assert chunk, "the server closed before answering"
                answer += chunk
        for frame in frames(round_):
            if split:
                sock.sendall(frame[:4])
                sock.sendall(frame[4:8])
                sock.sendall(frame[8:])
            else:
                sock.sendall(frame)
        if notify and isinstance(sock, ssl.SSLSocket):
            # close_notify first, as Go's tls.Conn.Close sends it. A non-blocking unwrap sends
            # the alert and stops there, without waiting for the server's own.
            sock.setblocking(False)
            with contextlib.suppress(ssl.SSLWantReadError):
                sock.unwrap()
    finally:
        sock.close()


@LOOPS
@pytest.mark.parametrize("transport", ["plaintext", "tls", "tls-close-notify"])
@pytest.mark.parametrize("warm", [False, True], ids=["new", "established"])
@pytest.mark.parametrize("split", [False, True], ids=["whole", "split"])
def test_frames_written_right_before_a_close_are_all_served(
    loop_factory: LoopFactory, ca: CertAuthority, transport: str, warm: bool, split: bool
) -> None:
    tls = None if transport == "plaintext" else client_context(str(ca.ca_file))

    async def main() -> None:
        noted: list[str] = []

        def note(request: RemotingCommand, connection: Connection) -> None:
            noted.append(request.ext_fields["n"])

        dispatcher = Dispatcher("close-test")
        dispatcher.register(NOTE, note)
        dispatcher.register(RequestCode.HEART_BEAT, lambda request, connection: request.respond())
        config = None if tls is None else config_of(ca, TlsMode.ENFORCING)
        server = RemotingServer(dispatcher, tls=config)
        port = await server.start("127.0.0.1", 0)
        try:
            for round_ in range(ROUNDS):
                await asyncio.to_thread(
                    write_then_close, port, tls, round_, warm=warm, split=split,
                    notify=transport == "tls-close-notify",
                )  # fmt: skip
                expected = [f"{r}.{i}" for r in range(round_ + 1) for i in range(FRAMES)]
                await eventually_async(
                    lambda expected=expected: noted == expected,
                    5.0,
                    f"the {FRAMES} frames of round {round_} served",
                    detail=lambda: f"served {noted[-FRAMES:]}",
                )
            await eventually_async(lambda: not server.connections, 5.0, "every connection closed")
        finally:
            await server.stop()

    run(loop_factory, main())
