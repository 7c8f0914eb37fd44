"""The HTTP endpoint's request parsing, routing and response bytes (no sockets: the
integration tests talk to a real broker's port)."""

from __future__ import annotations

import pytest

from reconsume.broker.http_endpoint import (
    MAX_HEADERS,
    HttpEndpoint,
    Request,
    Response,
    parse_request_head,
    render,
    text,
)


def head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def test_a_plain_get_parses_with_lower_cased_headers_and_no_query() -> None:
    request = parse_request_head(
        head("GET /metrics?x=1 HTTP/1.1", "Host: b", "Accept:  text/plain ")
    )
    assert request == Request("GET", "/metrics", "HTTP/1.1", {"host": "b", "accept": "text/plain"})
    assert request.keep_alive


@pytest.mark.parametrize(
    ("lines", "keep_alive"),
    [
        (["GET / HTTP/1.0"], False),
        (["GET / HTTP/1.1", "Connection: close"], False),
        (["GET / HTTP/1.1", "Connection: Keep-Alive"], True),
        (["POST / HTTP/1.1", "Content-Length: 3"], False),
        (["POST / HTTP/1.1", "Content-Length: 0"], True),
        (["POST / HTTP/1.1", "Transfer-Encoding: chunked"], False),
    ],
)
def test_keep_alive_only_when_http_1_1_allows_it_and_no_body_follows(
    lines: list[str], keep_alive: bool
) -> None:
    request = parse_request_head(head(*lines))
    assert request is not None
    assert request.keep_alive is keep_alive


@pytest.mark.parametrize(
    "raw",
    [
        b"\r\n\r\n",
        b"GET /\r\n\r\n",
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET / HTTP/1.1 extra\r\n\r\n",
        b"GET  / HTTP/1.1\r\n\r\n",
        b"G(T / HTTP/1.1\r\n\r\n",
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"GET /a b HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
        b"GET / HTTP/1.1\r\n folded: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n\r\n",
        b"\x00\x00\x00\x10\x00\x00\x00\x04abcd\r\n\r\n",
        head("GET / HTTP/1.1", *[f"h{i}: v" for i in range(MAX_HEADERS + 1)]),
    ],
)
def test_malformed_heads_do_not_parse(raw: bytes) -> None:
    assert parse_request_head(raw) is None


def test_render_has_status_length_and_close() -> None:
    response = Response(503, b"busy\n", headers={"Retry-After": "1"})
    data = render(response, keep_alive=False, head_only=False)
    assert data == (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 5\r\nRetry-After: 1\r\nConnection: close\r\n\r\nbusy\n"
    )
    assert render(response, keep_alive=True, head_only=True).endswith(b"Retry-After: 1\r\n\r\n")


def route_failing(request: Request) -> Response:
    raise RuntimeError("broken collector")


@pytest.fixture
def endpoint() -> HttpEndpoint:
    return HttpEndpoint({"/ok": lambda _r: text(200, "ok"), "/broken": route_failing})


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/ok", 200),
        ("HEAD", "/ok", 200),
        ("GET", "/nope", 404),
        ("POST", "/nope", 404),
        ("POST", "/ok", 405),
        ("DELETE", "/ok", 405),
        ("GET", "/broken", 500),
    ],
)
def test_routing(endpoint: HttpEndpoint, method: str, path: str, status: int) -> None:
    response = endpoint.answer(Request(method, path, "HTTP/1.1"))
    assert response.status == status
    if status == 405:
        assert response.headers == {"Allow": "GET, HEAD"}
