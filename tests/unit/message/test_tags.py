"""Tag codes: Java's String.hashCode of the TAGS property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.message.tags import java_string_hash, tags_code


def reference_hash(text: str) -> int:
    """String.hashCode from its definition: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units,
    reduced to a signed 32-bit int at the end (the same as wrapping at every step)."""
    units: list[int] = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    total = sum(unit * 31 ** (n - 1 - i) for i, unit in enumerate(units))
    return int((total + 2**31) % 2**32 - 2**31)


# Each value below is worked out by hand in the comment (Java: h = 31*h + c, int overflow).
KNOWN = [
    ("", 0),  # no characters
    ("a", 97),  # 'a' = 97
    ("abc", 96354),  # (97*31 + 98)*31 + 99 = 3105*31 + 99
    ("Aa", 2112),  # 65*31 + 97, the classic collision with "BB"
    ("BB", 2112),  # 66*31 + 66
    ("TagA", 2598919),  # ((84*31 + 97)*31 + 103)*31 + 65 = 83834*31 + 65
    ("TagB", 2598920),  # one more than "TagA"
    ("hello", 99162322),  # a well-known Java value
    ("polygenelubricants", -2147483648),  # the well-known Integer.MIN_VALUE string
    ("😀", 1772899),  # U+1F600 = D83D DE00: 31*55357 + 56832
    ("é", 233),  # U+00E9, one UTF-16 unit
]


@pytest.mark.parametrize(("text", "expected"), KNOWN)
def test_known_java_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
    assert reference_hash(text) == expected


def test_surrogate_arithmetic() -> None:
    assert "😀".encode("utf-16-be") == bytes.fromhex("D83DDE00")
    assert (0xD83D, 0xDE00) == (55357, 56832)
    assert 31 * 55357 + 56832 == 1772899


@given(st.text(max_size=200))
def test_matches_reference(text: str) -> None:
    value = java_string_hash(text)
    assert value == reference_hash(text)
    assert -(2**31) <= value < 2**31


def test_tags_code() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919
    assert tags_code("TagA || TagB") == java_string_hash("TagA || TagB")
