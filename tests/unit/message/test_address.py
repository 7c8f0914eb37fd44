"""Host addresses: the packed record form and text form, IPv4 and IPv6."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError
from reconsume.message.address import LOOPBACK_V4, HostAddress

ports = st.integers(0, 0x7FFFFFFF)
v4 = st.builds(HostAddress, ip=st.binary(min_size=4, max_size=4), port=ports)
v6 = st.builds(HostAddress, ip=st.binary(min_size=16, max_size=16), port=ports)


def test_packed_ipv4_layout() -> None:
    host = HostAddress(bytes([192, 168, 0, 1]), 10911)
    assert host.packed() == bytes([192, 168, 0, 1]) + struct.pack(">i", 10911)
    assert host.packed().hex() == "c0a8000100002a9f"
    assert not host.is_v6


def test_packed_ipv6_layout() -> None:
    ip = ipaddress.IPv6Address("2001:db8::1").packed
    host = HostAddress(ip, 443)
    assert host.packed() == ip + b"\x00\x00\x01\xbb"
    assert len(host.packed()) == 20
    assert host.is_v6


def test_loopback() -> None:
    assert HostAddress(b"\x7f\x00\x00\x01", 0) == LOOPBACK_V4
    assert str(LOOPBACK_V4) == "127.0.0.1:0"


@pytest.mark.parametrize(
    ("text", "ip", "port"),
    [
        ("1.2.3.4:10911", "1.2.3.4", 10911),
        ("0.0.0.0:0", "0.0.0.0", 0),
        ("255.255.255.255:65535", "255.255.255.255", 65535),
        ("[::1]:10911", "::1", 10911),
        ("::1:10911", "::1", 10911),  # RocketMQ's unbracketed form
        ("[2001:db8::8:800:200c:417a]:9876", "2001:db8::8:800:200c:417a", 9876),
        ("fe80::1:2:80", "fe80::1:2", 80),
        ("1.2.3.4:2147483647", "1.2.3.4", 2**31 - 1),
    ],
)
def test_parse(text: str, ip: str, port: int) -> None:
    host = HostAddress.parse(text)
    assert host == HostAddress(ipaddress.ip_address(ip).packed, port)


@pytest.mark.parametrize(
    ("host", "text"),
    [
        (HostAddress(bytes([10, 0, 0, 1]), 10911), "10.0.0.1:10911"),
        (HostAddress(ipaddress.IPv6Address("::1").packed, 80), "[::1]:80"),
        (HostAddress(ipaddress.IPv6Address("2001:db8::1").packed, 1), "[2001:db8::1]:1"),
    ],
)
def test_str(host: HostAddress, text: str) -> None:
    assert str(host) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.2.3.4",
        "1.2.3.4:",
        ":10911",
        "1.2.3.4:port",
        "1.2.3.4:-1",
        "1.2.3.4:+1",
        "1.2.3.4: 1",
        "1.2.3.4:²",  # str.isdigit() is true for superscripts; int() rejects them
        "1.2.3.4:١٢",  # non-ASCII digits
        "1.2.3.4:2147483648",
        "999.1.1.1:80",
        "localhost:80",
        "[::1]",
        "[::g]:80",
        "::1",
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        HostAddress.parse(text)


@pytest.mark.parametrize("length", [0, 3, 5, 15, 17, 20])
def test_bad_ip_length(length: int) -> None:
    with pytest.raises(InvalidArgumentError, match="4 or 16 bytes"):
        HostAddress(b"\x01" * length, 1)


@pytest.mark.parametrize("port", [-1, -(2**31), 2**31])
def test_bad_port(port: int) -> None:
    with pytest.raises(InvalidArgumentError, match="out of range"):
        HostAddress(b"\x01\x02\x03\x04", port)


@pytest.mark.parametrize("length", [0, 4, 7, 9, 16, 19, 21])
def test_unpack_bad_length(length: int) -> None:
    with pytest.raises(InvalidArgumentError, match="8 or 20 bytes"):
        HostAddress.unpack(b"\x00" * length)


def test_unpack_negative_port() -> None:
    with pytest.raises(InvalidArgumentError):
        HostAddress.unpack(b"\x01\x02\x03\x04\xff\xff\xff\xff")


@given(v4 | v6)
def test_packed_unpack_round_trip(host: HostAddress) -> None:
    packed = host.packed()
    assert len(packed) == (20 if host.is_v6 else 8)
    assert HostAddress.unpack(packed) == host
    assert struct.unpack(">i", packed[-4:])[0] == host.port


@given(v4 | v6)
def test_str_parse_round_trip(host: HostAddress) -> None:
    assert HostAddress.parse(str(host)) == host


@given(v6)
def test_unbracketed_ipv6_parses(host: HostAddress) -> None:
    text = f"{ipaddress.IPv6Address(host.ip)}:{host.port}"
    assert HostAddress.parse(text) == host


@given(st.ip_addresses(), st.integers(0, 65535))
def test_parse_str_round_trip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> None:
    text = f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"
    host = HostAddress.parse(text)
    assert host.ip == ip.packed
    assert host.port == port
    assert str(host) == text


@given(st.text(max_size=40))
def test_parse_arbitrary_text_raises_only_argument_errors(text: str) -> None:
    try:
        host = HostAddress.parse(text)
    except InvalidArgumentError:
        return
    assert isinstance(host, HostAddress)
