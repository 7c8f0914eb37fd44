"""IP whitelist patterns as RocketMQ's ACL reads them, and the ones refused at load time."""

from __future__ import annotations

import pytest

from reconsume.access.acl import address_matches
from reconsume.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("pattern", "ip", "matches"),
    [
        ("*", "1.2.3.4", True),
        ("*.*.*.*", "::1", True),
        ("*:*:*:*:*:*:*:*", "10.0.0.1", True),
        ("192.168.1.*", "192.168.1.77", True),
        ("192.168.1.*", "192.168.2.77", False),
        ("192.168.*.*", "192.168.200.1", True),
        ("192.168.*", "192.168.3.4", True),
        ("10.*", "10.9.9.9", True),
        ("10.*", "11.0.0.1", False),
        ("192.168.0-15.*", "192.168.15.1", True),
        ("192.168.0-15.*", "192.168.16.1", False),
        ("192.168.1.10-20", "192.168.1.10", True),
        ("192.168.1.10-20", "192.168.1.20", True),
        ("192.168.1.10-20", "192.168.1.21", False),
        ("192.168.1.10-20", "192.168.1.9", False),
        ("192.168.1.{1,7,9}", "192.168.1.7", True),
        ("192.168.1.{1,7,9}", "192.168.1.8", False),
        ("10.0.0.1,10.0.0.2", "10.0.0.2", True),
        ("10.0.0.1, 10.0.0.2", "10.0.0.3", False),
        ("10.0.0.1", "10.0.0.1", True),
        ("10.0.0.1", "10.0.0.10", False),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("fe80::1,::1", "::1", True),
        ("2001:db8::{1,2}", "2001:db8::2", True),
        ("2001:db8::{1,2}", "2001:db8::3", False),
        ("10.0.0.1", "::ffff:10.0.0.1", True),
        ("192.168.1.*", "::ffff:192.168.1.5", True),
        ("192.168.1.*", "::1", False),
        ("192.168.1.*", "not-an-ip", False),
        ("10.0.0.1", "", False),
        ("10.0.0.1", "10.0.0.1:5678", False),
    ],
)
def test_address_matches(pattern: str, ip: str, matches: bool) -> None:
    assert address_matches(pattern, ip) is matches


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        "  ",
        "192.168.1",
        "192.168.1.256",
        "192.168.01.1",
        "*.1.2.3",
        "10.1-2.3.4",
        "10.*.3.*",
        "192.168.1.20-10",
        "192.168.1.-5",
        "1.2.3.4.*",
        "192.168.1.{1,x}",
        "192.{1,2}.1.1",
        "192.168.1.{1,2",
        "fe80::*",
        "10.0.0.1,bogus",
        "localhost",
    ],
)
def test_bad_address_patterns(pattern: str) -> None:
    with pytest.raises(InvalidArgumentError, match="address pattern"):
        address_matches(pattern, "10.0.0.1")
