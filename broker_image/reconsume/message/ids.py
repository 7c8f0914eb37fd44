"""Message ids: the broker's offset id and the producer's unique id (UNIQ_KEY).

* Offset id: hex of the store host (address + port) and the commit-log offset — 32 hex
  characters for IPv4, 56 for IPv6. It locates the message on its broker.
* Unique id (RocketMQ ``MessageClientIDSetter``): hex of the producer's address, process id
  (int16), a per-process random int32, milliseconds since the start of the current month
  (int32) and a counter (int16) — 32 hex characters for IPv4, 56 for IPv6.
"""

from __future__ import annotations

import itertools
import os
import random
import struct
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from reconsume.errors import InvalidArgumentError, InvalidMessageIdError
from reconsume.message.address import HostAddress

_OFFSET = struct.Struct(">q")
_UNIQ_TAIL = struct.Struct(">IH")
_UNIQ_FIX = struct.Struct(">Hi")


def offset_msg_id(store_host: HostAddress, commit_log_offset: int) -> str:
    """The offset message id of the record at ``commit_log_offset`` on ``store_host``."""
    return (store_host.packed() + _OFFSET.pack(commit_log_offset)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[HostAddress, int]:
    """Split an offset message id into its store host and commit-log offset."""
    raw = _unhex(msg_id, (32, 56))
    try:
        host = HostAddress.unpack(raw[:-8])
    except InvalidArgumentError as exc:
        raise InvalidMessageIdError(f"message id {msg_id!r}: {exc}") from exc
    return host, _OFFSET.unpack(raw[-8:])[0]


@dataclass(frozen=True, slots=True)
class UniqIdInfo:
    """What a unique id tells: the producer's address and process, and roughly when."""

    ip: bytes
    pid: int
    time_ms: int


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Start of the month containing ``now_ms`` and of the next one, in local time (as Java's
    default Calendar does)."""
    now = datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqIdGenerator:
    """Creates unique ids in RocketMQ's layout; thread-safe."""

    def __init__(self, ip: bytes, pid: int | None = None, salt: int | None = None) -> None:
        if len(ip) not in (4, 16):
            raise InvalidMessageIdError(f"address must be 4 or 16 bytes, got {len(ip)}")
        pid = os.getpid() if pid is None else pid
        salt = random.getrandbits(31) if salt is None else salt
        self._prefix = (ip + _UNIQ_FIX.pack(pid & 0xFFFF, salt)).hex().upper()
        self._counter = itertools.count(random.getrandbits(16))
        self._lock = threading.Lock()
        self._start_ms = 0
        self._next_start_ms = 0

    def create(self, now_ms: int | None = None) -> str:
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        with self._lock:
            if now_ms >= self._next_start_ms or now_ms < self._start_ms:
                self._start_ms, self._next_start_ms = _month_start_ms(now_ms)
            span = now_ms - self._start_ms
            count = next(self._counter) & 0xFFFF
        return self._prefix + _UNIQ_TAIL.pack(span & 0xFFFFFFFF, count).hex().upper()


def parse_uniq_id(uniq_id: str, now_ms: int | None = None) -> UniqIdInfo:
    """Recover the producer address, pid and (approximate) creation time of a unique id.

    The id stores milliseconds since the start of *a* month; like RocketMQ this assumes the
    latest month start not after ``now_ms`` (or the previous month if that lands later).
    """
    raw = _unhex(uniq_id, (32, 56))
    ip_len = len(raw) - 12
    pid, _salt = _UNIQ_FIX.unpack_from(raw, ip_len)
    span, _count = _UNIQ_TAIL.unpack_from(raw, ip_len + 6)
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    start, _next = _month_start_ms(now_ms)
    if start + span > now_ms:
        prev_day = datetime.fromtimestamp(start / 1000 - 1)
        start, _next = _month_start_ms(int(prev_day.timestamp() * 1000))
    return UniqIdInfo(ip=raw[:ip_len], pid=pid, time_ms=start + span)


def _unhex(text: str, lengths: tuple[int, ...]) -> bytes:
    if len(text) not in lengths:
        raise InvalidMessageIdError(
            f"message id {text!r} has {len(text)} characters, expected one of {lengths}"
        )
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise InvalidMessageIdError(f"message id {text!r} is not hexadecimal") from exc
    if len(raw) * 2 != len(text):  # fromhex skips whitespace
        raise InvalidMessageIdError(f"message id {text!r} is not hexadecimal")
    return raw
