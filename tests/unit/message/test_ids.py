"""Message ids: the offset id and the producer's unique id (MessageClientIDSetter layout)."""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import CodecError, InvalidMessageIdError
from reconsume.message.address import HostAddress
from reconsume.message.ids import (
    UniqIdGenerator,
    offset_msg_id,
    parse_offset_msg_id,
    parse_uniq_id,
)

ports = st.integers(0, 0x7FFFFFFF)
hosts = st.builds(
    HostAddress,
    ip=st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16),
    port=ports,
)
ips = st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16)
ZONES = ["UTC", "Asia/Shanghai", "America/New_York", "Australia/Lord_Howe"]
# 2000-01-01 .. 2099-12-31 (UTC), in milliseconds.
times_ms = st.integers(946_684_800_000, 4_102_358_400_000)


@contextmanager
def local_zone(zone: str) -> Iterator[None]:
    """Run with the process's local time zone set to ``zone`` (ids use local month starts)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


def local_ms(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> int:
    return int(
        datetime(year, month, day, hour, minute, second).timestamp() * 1000
    )  # local time, as ids use


# ---------------------------------------------------------------- offset ids


def test_offset_msg_id_layout() -> None:
    host = HostAddress(bytes([10, 0, 0, 1]), 10911)
    msg_id = offset_msg_id(host, 0x1234)
    # address 0A000001, port 10911 = 0x2A9F as int32, offset as int64
    assert msg_id == "0A000001" + "00002A9F" + "0000000000001234"
    assert parse_offset_msg_id(msg_id) == (host, 0x1234)
    assert parse_offset_msg_id(msg_id.lower()) == (host, 0x1234)


def test_offset_msg_id_ipv6_layout() -> None:
    host = HostAddress(bytes(range(16)), 1)
    msg_id = offset_msg_id(host, 2**63 - 1)
    assert msg_id == bytes(range(16)).hex().upper() + "00000001" + "7FFFFFFFFFFFFFFF"
    assert len(msg_id) == 56
    assert parse_offset_msg_id(msg_id) == (host, 2**63 - 1)


@given(hosts, st.integers(-(2**63), 2**63 - 1))
def test_offset_msg_id_round_trip(host: HostAddress, offset: int) -> None:
    msg_id = offset_msg_id(host, offset)
    assert len(msg_id) == (56 if host.is_v6 else 32)
    assert msg_id == msg_id.upper()
    assert bytes.fromhex(msg_id) == host.packed() + struct.pack(">q", offset)
    assert parse_offset_msg_id(msg_id) == (host, offset)


BAD_IDS = [
    "",
    "0A",
    "0" * 31,
    "0" * 33,
    "0" * 55,
    "0" * 57,
    "0" * 64,
    "G" * 32,
    "0A000001 0002A9F000000000000123",  # 32 characters, one of them a space
    "0A000001" + "00002A9F" + "00000000000012" + "  ",
    " " * 32,
    "0A000001\n0002A9F000000000000123",
    "0A00000100002A9F00000000000012é4",
    "0A00000100002A9F000000000000123٤",
]


@pytest.mark.parametrize("msg_id", BAD_IDS)
def test_invalid_offset_msg_id(msg_id: str) -> None:
    with pytest.raises(InvalidMessageIdError):
        parse_offset_msg_id(msg_id)


def test_offset_msg_id_with_a_negative_port() -> None:
    with pytest.raises(InvalidMessageIdError):
        parse_offset_msg_id("0A000001" + "FFFFFFFF" + "0000000000001234")


@pytest.mark.parametrize("msg_id", BAD_IDS)
def test_invalid_uniq_id(msg_id: str) -> None:
    with pytest.raises(InvalidMessageIdError):
        parse_uniq_id(msg_id, now_ms=1_700_000_000_000)


def test_invalid_message_id_is_a_codec_error() -> None:
    assert issubclass(InvalidMessageIdError, CodecError)


@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_raises_invalid_id(text: str) -> None:
    for parse in (parse_offset_msg_id, lambda t: parse_uniq_id(t, now_ms=1_700_000_000_000)):
        with suppress(InvalidMessageIdError):
            parse(text)


# ---------------------------------------------------------------- unique ids


def test_uniq_id_layout() -> None:
    with local_zone("UTC"):
        gen = UniqIdGenerator(bytes([10, 0, 0, 1]), pid=0x1234, salt=0x01020304)
        start = local_ms(2025, 3, 1)
        uniq = gen.create(now_ms=start + 5000)
    assert len(uniq) == 32
    assert uniq == uniq.upper()
    # ip | pid int16 | salt int32 | ms since month start uint32 | counter uint16
    assert uniq[:8] == "0A000001"
    assert uniq[8:12] == "1234"
    assert uniq[12:20] == "01020304"
    assert uniq[20:28] == "00001388"  # 5000 ms


def test_uniq_id_ipv6_length() -> None:
    gen = UniqIdGenerator(bytes(range(16)), pid=7, salt=1)
    uniq = gen.create(now_ms=1_700_000_000_000)
    assert len(uniq) == 56
    info = parse_uniq_id(uniq, now_ms=1_700_000_000_000)
    assert (info.ip, info.pid, info.time_ms) == (bytes(range(16)), 7, 1_700_000_000_000)


def test_uniq_id_counter_increments_and_wraps() -> None:
    gen = UniqIdGenerator(b"\x01\x02\x03\x04", pid=1, salt=1)
    counts = [int(gen.create(now_ms=1_700_000_000_000)[28:], 16) for _ in range(70_000)]
    assert all((b - a) % 0x10000 == 1 for a, b in itertools.pairwise(counts))
    assert len(set(counts)) == 0x10000


def test_uniq_ids_are_distinct() -> None:
    gen = UniqIdGenerator(b"\x01\x02\x03\x04")
    ids = {gen.create() for _ in range(1000)}
    assert len(ids) == 1000


def test_uniq_id_pid_is_truncated_to_16_bits() -> None:
    gen = UniqIdGenerator(b"\x01\x02\x03\x04", pid=0x12345, salt=0)
    assert parse_uniq_id(gen.create(now_ms=1_700_000_000_000), 1_700_000_000_000).pid == 0x2345


def test_uniq_id_defaults_to_this_process() -> None:
    gen = UniqIdGenerator(b"\x01\x02\x03\x04")
    info = parse_uniq_id(gen.create())
    assert info.pid == os.getpid() & 0xFFFF
    assert abs(info.time_ms - time.time() * 1000) < 5000


@pytest.mark.parametrize("length", [0, 3, 5, 8, 20])
def test_uniq_generator_rejects_bad_ip(length: int) -> None:
    with pytest.raises(InvalidMessageIdError):
        UniqIdGenerator(b"\x01" * length)


BOUNDARIES = [
    (2025, 12, 31, 23, 59, 59, 999_000),  # Dec -> Jan, year change
    (2024, 1, 31, 23, 59, 59, 500_000),  # Jan -> Feb
    (2024, 2, 29, 23, 59, 59, 1_000),  # leap February -> March
    (2025, 2, 28, 23, 59, 59, 999_000),  # February -> March
    (2026, 3, 31, 23, 59, 59, 0),
    (2026, 11, 1, 0, 0, 0, 0),  # the first instant of a month
]


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("when", BOUNDARIES)
def test_uniq_id_time_across_month_boundaries(zone: str, when: tuple[int, ...]) -> None:
    with local_zone(zone):
        created = local_ms(*when[:3], *when[3:6]) + when[6] // 1000
        gen = UniqIdGenerator(b"\x0a\x00\x00\x01", pid=4321, salt=99)
        uniq = gen.create(now_ms=created)
        for delay in (0, 1, 500, 999):
            info = parse_uniq_id(uniq, now_ms=created + delay)
            assert (info.ip, info.pid) == (b"\x0a\x00\x00\x01", 4321)
            assert info.time_ms == created


@pytest.mark.parametrize("zone", ZONES)
def test_generator_moves_to_the_next_month(zone: str) -> None:
    with local_zone(zone):
        gen = UniqIdGenerator(b"\x01\x02\x03\x04", pid=1, salt=1)
        dec = local_ms(2025, 12, 31, 23, 59, 59)
        jan = local_ms(2026, 1, 1, 0, 0, 1)
        first = gen.create(now_ms=dec)
        second = gen.create(now_ms=jan)
        assert int(second[20:28], 16) == 1000  # one second into January
        assert parse_uniq_id(first, now_ms=jan).time_ms == dec
        assert parse_uniq_id(second, now_ms=jan).time_ms == jan
        # A clock that steps back a month is handled too.
        assert parse_uniq_id(gen.create(now_ms=dec), now_ms=dec).time_ms == dec


@given(
    ips,
    st.integers(0, 0xFFFF),
    st.integers(-(2**31), 2**31 - 1),
    times_ms,
    st.integers(0, 999),
    st.sampled_from(ZONES),
)
def test_uniq_id_parse_round_trip(
    ip: bytes, pid: int, salt: int, created: int, delay: int, zone: str
) -> None:
    with local_zone(zone):
        uniq = UniqIdGenerator(ip, pid=pid, salt=salt).create(now_ms=created)
        info = parse_uniq_id(uniq, now_ms=created + delay)
    assert len(uniq) == (56 if len(ip) == 16 else 32)
    assert info.ip == ip
    assert info.pid == pid
    assert abs(info.time_ms - created) < 1000
    assert info.time_ms == created
