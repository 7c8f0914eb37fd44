"""IP whitelist patterns of Apache RocketMQ's ACL (``RemoteAddressStrategyFactory``).

* ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: every address.
* ``192.168.1.{1,7,9}`` (a set in the last position) or ``10.0.0.1,10.0.0.2`` (a list):
  those addresses.
* ``192.168.1.*``, ``192.168.0-15.*``, ``10.*``: IPv4 whose octets before the first ``*`` or
  ``n-m`` are the given ones and whose octet there falls in the range.
* Anything else: one address, IPv4 or IPv6 (compared as addresses, so ``::1`` is
  ``0:0:0:0:0:0:0:1``).

Stricter than RocketMQ, whose patterns mean something other than they seem in a few cases:
after a ``*`` or a range only ``*`` may follow (RocketMQ ignores the octets there, so
``10.1-2.3.4`` would match ``10.1.200.200``); the first octet is a number; a range on IPv6
(hex groups) is refused, so is an empty pattern (RocketMQ: never matches). Each is an error at
load time. A peer given as an IPv4-mapped IPv6 address (``::ffff:10.0.0.1``, from a dual-stack
socket) is matched as its IPv4 address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from reconsume.errors import InvalidArgumentError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_EVERYTHING = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """A parsed whitelist pattern (:func:`parse_address_pattern`)."""

    text: str
    everything: bool = False
    addresses: frozenset[IPAddress] = frozenset()
    """A set, a list or one address."""
    head: bytes | None = None
    """A range: the octets before the ranged one; its bounds below."""
    low: int = 0
    high: int = 255

    def matches(self, ip: str) -> bool:
        """Whether the peer address ``ip`` (no port, no brackets) matches; never raises."""
        if self.everything:
            return True
        address = _address(ip)
        if address is None:
            return False
        if self.head is None:
            return address in self.addresses
        if address.version != 4:
            return False
        octets = address.packed
        return octets.startswith(self.head) and self.low <= octets[len(self.head)] <= self.high


def _address(text: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_address_pattern(text: str, where: str) -> AddressPattern:
    """Parse a whitelist pattern; ``where`` names its place in the error."""
    pattern = text.strip()
    if pattern in _EVERYTHING:
        return AddressPattern(text, everything=True)
    if not pattern:
        raise InvalidArgumentError(f"{where}: empty address pattern")
    if pattern.endswith("}"):
        return AddressPattern(text, addresses=_set(pattern, where))
    if "," in pattern:
        return AddressPattern(
            text, addresses=frozenset(_exact(a, where) for a in pattern.split(","))
        )
    if "*" in pattern or "-" in pattern:
        return _range(text, pattern, where)
    return AddressPattern(text, addresses=frozenset({_exact(pattern, where)}))


def _exact(text: str, where: str) -> IPAddress:
    address = _address(text)
    if address is None:
        raise InvalidArgumentError(f"{where}: {text.strip()!r} is not an IPv4 or IPv6 address")
    return address


def _set(pattern: str, where: str) -> frozenset[IPAddress]:
    """``a.b.c.{x,y}`` (or ``…:{x,y}``): the head followed by each member."""
    brace = pattern.find("{")
    head = pattern[:brace]
    if brace <= 0 or pattern.count("{") != 1 or not head.endswith((".", ":")):
        raise InvalidArgumentError(
            f"{where}: {pattern!r}: a set goes last, as in 192.168.1.{{1,2}}"
        )
    members = pattern[brace + 1 : -1].split(",")
    return frozenset(_exact(head + member.strip(), where) for member in members)


def _octet(text: str, pattern: str, where: str) -> int:
    if not text.isdigit() or int(text) > 255 or text != str(int(text)):
        raise InvalidArgumentError(f"{where}: {pattern!r}: {text!r} is not an octet (0-255)")
    return int(text)


def _range(text: str, pattern: str, where: str) -> AddressPattern:
    """``a.*``, ``a.b.*``, ``a.b.c.*`` or with ``n-m`` in place of the ``*``; trailing ``*``
    may be left out."""
    if ":" in pattern:
        raise InvalidArgumentError(
            f"{where}: {pattern!r}: IPv6 patterns are exact addresses, sets or lists only"
        )
    parts = [part.strip() for part in pattern.split(".")]
    ranged = next((i for i, part in enumerate(parts) if part == "*" or "-" in part), -1)
    if len(parts) > 4 or ranged < 1:
        raise InvalidArgumentError(
            f"{where}: {pattern!r}: expected a.*, a.b.*, a.b.c.* or a range n-m in place of a *"
        )
    if any(part != "*" for part in parts[ranged + 1 :]):
        raise InvalidArgumentError(
            f"{where}: {pattern!r}: only * may follow a * or a range (RocketMQ would ignore "
            "those octets)"
        )
    head = bytes(_octet(part, pattern, where) for part in parts[:ranged])
    low, high = 0, 255
    if parts[ranged] != "*":
        first, _sep, last = parts[ranged].partition("-")
        low, high = _octet(first, pattern, where), _octet(last, pattern, where)
        if low > high:
            raise InvalidArgumentError(f"{where}: {pattern!r}: the range {low}-{high} is empty")
    return AddressPattern(text, head=head, low=low, high=high)


def address_matches(pattern: str, ip: str) -> bool:
    """Whether ``ip`` matches the whitelist ``pattern``; an invalid pattern raises
    :class:`InvalidArgumentError`."""
    return parse_address_pattern(pattern, "address pattern").matches(ip)
