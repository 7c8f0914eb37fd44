"""HPACK (RFC 7541): the Huffman code of Appendix B, the decoder against the examples of
Appendix C byte for byte (header lists, dynamic table sizes, eviction), malformed blocks refused
with HpackError and nothing else, and the server's own encoding decoding back to its headers."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError
from reconsume.wire.h2 import huffman
from reconsume.wire.h2.hpack import (
    STATIC_TABLE,
    Decoder,
    Header,
    HeaderListTooLarge,
    HpackError,
    encode,
)

BIG = 1 << 20
"""A header list limit no example reaches."""


# ---------------------------------------------------------------------------- Huffman
@pytest.mark.parametrize(
    ("symbol", "code", "length"),
    [
        (0, 0x1FF8, 13),
        (1, 0x7FFFD8, 23),
        (9, 0xFFFFEA, 24),
        (10, 0x3FFFFFFC, 30),
        (13, 0x3FFFFFFD, 30),
        (22, 0x3FFFFFFE, 30),
        (ord(" "), 0x14, 6),
        (ord("!"), 0x3F8, 10),
        (ord("/"), 0x18, 6),
        (ord("0"), 0x0, 5),
        (ord(":"), 0x5C, 7),
        (ord("A"), 0x21, 6),
        (ord("a"), 0x3, 5),
        (ord("e"), 0x5, 5),
        (ord("{"), 0x7FFE, 15),
        (ord("~"), 0x1FFD, 13),
        (127, 0xFFFFFFC, 28),
        (128, 0xFFFE6, 20),
        (255, 0x3FFFFEE, 26),
        (256, 0x3FFFFFFF, 30),
    ],
)
def test_huffman_codes_are_the_rfcs(symbol: int, code: int, length: int) -> None:
    """The codes derived from the lengths alone are the values Appendix B lists."""
    assert (huffman.CODES[symbol], huffman.LENGTHS[symbol]) == (code, length)


def test_huffman_code_is_complete_and_prefix_free() -> None:
    """257 distinct codes, each within its length, filling the code space exactly."""
    assert len(huffman.CODES) == len(huffman.LENGTHS) == 257
    assert sum(1 << (30 - length) for length in huffman.LENGTHS) == 1 << 30
    assert all(
        code < 1 << length for code, length in zip(huffman.CODES, huffman.LENGTHS, strict=True)
    )
    padded = {
        code << (30 - length) for code, length in zip(huffman.CODES, huffman.LENGTHS, strict=True)
    }
    assert len(padded) == 257


def test_huffman_rfc_example() -> None:
    """C.4.1: "www.example.com" is f1e3c2e5f23a6ba0ab90f4ff, both ways."""
    coded = bytes.fromhex("f1e3c2e5f23a6ba0ab90f4ff")
    assert huffman.encode(b"www.example.com") == coded
    assert huffman.decode(coded) == b"www.example.com"


@given(st.binary(max_size=300))
@example(b"")
@example(bytes(range(256)))
def test_huffman_round_trip(data: bytes) -> None:
    """Any octets decode back from their coding, padded to no more than the next octet."""
    coded = huffman.encode(data)
    assert huffman.decode(coded) == data
    assert len(coded) == (sum(huffman.LENGTHS[byte] for byte in data) + 7) // 8


def test_huffman_padding_of_seven_bits_is_accepted() -> None:
    """Five '0's are 25 bits: seven bits of padding, the most allowed."""
    coded = huffman.encode(b"00000")
    assert len(coded) == 4
    assert huffman.decode(coded) == b"00000"


def _eos_then_a() -> bytes:
    bits = (huffman.CODES[256] << 5 | huffman.CODES[ord("a")]) << 5 | 0x1F
    return bits.to_bytes(5, "big")


@pytest.mark.parametrize(
    "coded",
    [
        huffman.encode(b"a") + b"\xff",  # 3 + 8 bits of padding
        b"\xff",  # 8 bits of padding alone
        b"\x18",  # 'a' then padding 000
        b"\x1b",  # 'a' then padding 011
        b"\x00",  # '0' then padding 000
        b"\xff\xff\xff\xfc",  # EOS, then 00
        b"\xff\xff\xff\xff",  # EOS, then 11
        _eos_then_a(),
    ],
    ids=[
        "long-padding",
        "padding-only",
        "zero-padding",
        "mixed-padding",
        "zero-pad-0",
        "eos",
        "eos-ones",
        "eos-inside",
    ],
)
def test_huffman_refuses_bad_padding_and_eos(coded: bytes) -> None:
    with pytest.raises(InvalidArgumentError):
        huffman.decode(coded)


# ---------------------------------------------------------------------------- Appendix C
def dynamic_table(decoder: Decoder) -> list[Header]:
    """The dynamic table, newest first, read through indexed fields (which leave it as it
    is): index 62 on, up to the first index the decoder refuses."""
    entries: list[Header] = []
    index = len(STATIC_TABLE) + 1
    while True:
        try:
            [header] = decoder.decode(bytes((0x80 | index,)), BIG)
        except HpackError:
            return entries
        entries.append(header)
        index += 1


GET_HTTP = [(":method", "GET"), (":scheme", "http"), (":path", "/")]
AUTHORITY = (":authority", "www.example.com")
NO_CACHE = ("cache-control", "no-cache")
CUSTOM = ("custom-key", "custom-value")
THIRD_REQUEST = [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"), AUTHORITY]
REQUESTS = [
    ([*GET_HTTP, AUTHORITY], 57, [AUTHORITY]),
    ([*GET_HTTP, AUTHORITY, NO_CACHE], 110, [NO_CACHE, AUTHORITY]),
    ([*THIRD_REQUEST, CUSTOM], 164, [CUSTOM, NO_CACHE, AUTHORITY]),
]
C3 = [
    "828684410f7777772e6578616d706c652e636f6d",
    "828684be58086e6f2d6361636865",
    "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
]
C4 = [
    "828684418cf1e3c2e5f23a6ba0ab90f4ff",
    "828684be5886a8eb10649cbf",
    "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
]

DATE_21 = ("date", "Mon, 21 Oct 2013 20:13:21 GMT")
DATE_22 = ("date", "Mon, 21 Oct 2013 20:13:22 GMT")
PRIVATE = ("cache-control", "private")
LOCATION = ("location", "https://www.example.com")
GZIP = ("content-encoding", "gzip")
COOKIE = ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")
RESPONSES = [
    (
        [(":status", "302"), PRIVATE, DATE_21, LOCATION],
        222,
        [LOCATION, DATE_21, PRIVATE, (":status", "302")],
    ),
    (
        [(":status", "307"), PRIVATE, DATE_21, LOCATION],
        222,
        [(":status", "307"), LOCATION, DATE_21, PRIVATE],
    ),
    ([(":status", "200"), PRIVATE, DATE_22, LOCATION, GZIP, COOKIE], 215, [COOKIE, GZIP, DATE_22]),
]
C5 = [
    "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a3231"
    "20474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
    "4803333037c1c0bf",
    "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a6970"
    "7738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167"
    "653d333630303b2076657273696f6e3d31",
]
C6 = [
    "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad1718"
    "63c78f0b97c8e9ae82ae43d3",
    "4883640effc1c0bf",
    "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7"
    "b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
]


@pytest.mark.parametrize(
    ("blocks", "expected", "table_size"),
    [(C3, REQUESTS, 4096), (C4, REQUESTS, 4096), (C5, RESPONSES, 256), (C6, RESPONSES, 256)],
    ids=["C.3", "C.4", "C.5", "C.6"],
)
def test_rfc_examples(
    blocks: list[str], expected: list[tuple[list[Header], int, list[Header]]], table_size: int
) -> None:
    """Each block of an example sequence decodes to its header list, and leaves the dynamic
    table with the RFC's entries and size (C.5 and C.6 evict: the table holds 256 octets)."""
    decoder = Decoder(max_table_size=table_size)
    for block, (headers, size, table) in zip(blocks, expected, strict=True):
        assert decoder.decode(bytes.fromhex(block), BIG) == headers
        assert decoder.size == size
        assert dynamic_table(decoder) == table


@pytest.mark.parametrize(
    ("block", "header", "size"),
    [
        (
            "400a637573746f6d2d6b65790d637573746f6d2d686561646572",
            ("custom-key", "custom-header"),
            55,
        ),
        ("040c2f73616d706c652f70617468", (":path", "/sample/path"), 0),
        ("100870617373776f726406736563726574", ("password", "secret"), 0),
        ("82", (":method", "GET"), 0),
    ],
    ids=["C.2.1-indexing", "C.2.2-without-indexing", "C.2.3-never-indexed", "C.2.4-indexed"],
)
def test_rfc_field_representations(block: str, header: Header, size: int) -> None:
    """C.2: only a literal with incremental indexing enters the dynamic table."""
    decoder = Decoder()
    assert decoder.decode(bytes.fromhex(block), BIG) == [header]
    assert decoder.size == size
    assert dynamic_table(decoder) == ([header] if size else [])


# ---------------------------------------------------------------------------- table size
def test_table_size_update_at_the_start_evicts() -> None:
    """An update to 0 empties the table; two updates may open a block; back to 4096, the
    table fills again."""
    decoder = Decoder()
    decoder.decode(bytes.fromhex(C3[0]), BIG)
    assert decoder.decode(bytes.fromhex("2082"), BIG) == [(":method", "GET")]
    assert (decoder.size, dynamic_table(decoder)) == (0, [])
    assert decoder.decode(bytes.fromhex("203fe11f" + C3[0]), BIG) == [*GET_HTTP, AUTHORITY]
    assert (decoder.max_size, decoder.size) == (4096, 57)


def test_table_size_update_shrinks_to_the_newest_entries() -> None:
    decoder = Decoder()
    decoder.decode(bytes.fromhex(C3[0]), BIG)
    decoder.decode(bytes.fromhex(C3[1]), BIG)
    decoder.decode(bytes.fromhex("3f5e"), BIG)  # 31 + 94 = 125: room for 110 only
    assert (decoder.size, dynamic_table(decoder)) == (110, [NO_CACHE, AUTHORITY])
    decoder.decode(bytes.fromhex("3f1a"), BIG)  # 57: the newest (53) alone
    assert (decoder.size, dynamic_table(decoder)) == (53, [NO_CACHE])


def test_table_size_update_after_a_field_is_refused() -> None:
    with pytest.raises(HpackError):
        Decoder().decode(bytes.fromhex("8220"), BIG)


def test_table_size_update_above_the_allowed_maximum_is_refused() -> None:
    decoder = Decoder(max_table_size=256)
    decoder.decode(bytes.fromhex("3fe101"), BIG)  # 256 exactly
    with pytest.raises(HpackError):
        decoder.decode(bytes.fromhex("3fe201"), BIG)  # 257


def test_an_entry_larger_than_the_table_empties_it() -> None:
    decoder = Decoder(max_table_size=100)
    decoder.decode(bytes.fromhex(C3[0]), BIG)
    assert decoder.size == 57
    big = ("x-big", "v" * 64)  # 5 + 64 + 32 = 101
    assert decoder.decode(b"\x40" + _literal_string(big[0]) + _literal_string(big[1]), BIG) == [big]
    assert (decoder.size, dynamic_table(decoder)) == (0, [])


def _literal_string(text: str) -> bytes:
    assert len(text) < 127
    return bytes((len(text),)) + text.encode()


# ---------------------------------------------------------------------------- malformed
@pytest.mark.parametrize(
    "block",
    [
        "80",  # index 0
        "be",  # index 62 of an empty dynamic table
        "ff00",  # index 127
        "7e0161",  # literal, name at index 62 of an empty table
        "ff",  # an integer cut after its prefix
        "ff80",  # an integer cut after a continuation octet
        "40",  # a literal cut before its name
        "4003616263",  # a literal cut before its value
        "400a6375",  # a name longer than what is left
        "0003616263056162",  # a value longer than what is left
        "0081000161",  # a Huffman-coded name of bad padding
        "00016181ff",  # a Huffman-coded value of EOS-long padding
        "ff" + "ffffffffffff" + "7f",  # an integer far past 2**32
        "3f" + "ffffffff7f",  # a table size far past 2**32
    ],
)
def test_malformed_blocks_raise_hpack_error(block: str) -> None:
    with pytest.raises(HpackError):
        Decoder().decode(bytes.fromhex(block), BIG)


def test_integer_overflow_is_refused_as_such() -> None:
    with pytest.raises(HpackError, match="too large"):
        Decoder().decode(bytes.fromhex("7fffffffffff0f"), BIG)


def test_header_list_above_the_limit_keeps_the_table_in_step() -> None:
    """C.3.1's list is 180 octets (names, values, 32 each): 180 passes, 179 is refused with
    HeaderListTooLarge, after the block's insertion into the table."""
    assert Decoder().decode(bytes.fromhex(C3[0]), 180) == [*GET_HTTP, AUTHORITY]
    decoder = Decoder()
    with pytest.raises(HeaderListTooLarge):
        decoder.decode(bytes.fromhex(C3[0]), 179)
    assert issubclass(HeaderListTooLarge, InvalidArgumentError)
    assert (decoder.size, dynamic_table(decoder)) == (57, [AUTHORITY])
    assert decoder.decode(bytes.fromhex(C3[1]), BIG) == [*GET_HTTP, AUTHORITY, NO_CACHE]


# ---------------------------------------------------------------------------- encoding
def test_encode_uses_static_indexes() -> None:
    """A whole static field is one octet; a static name is a literal without indexing;
    other names are new literals."""
    assert encode([(":status", "200"), ("content-type", "application/grpc")]) == (
        b"\x88" + b"\x0f\x10\x10application/grpc"
    )
    assert encode([(":status", "431")]) == b"\x08\x03431"
    assert encode([("grpc-status", "0")]) == b"\x00\x0bgrpc-status\x010"
    assert encode([("x", "v" * 200)]) == b"\x00\x01x\x7f\x49" + b"v" * 200


def test_encode_leaves_the_peer_table_empty() -> None:
    decoder = Decoder()
    headers = [(":status", "200"), ("grpc-status", "0"), ("grpc-message", "")]
    assert decoder.decode(encode(headers), BIG) == headers
    assert decoder.size == 0


ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=150)
names = st.sampled_from([name for name, _ in STATIC_TABLE]) | ascii_text
headers_lists = st.lists(st.tuples(names, ascii_text) | st.sampled_from(STATIC_TABLE), max_size=12)


@given(headers_lists)
def test_encode_decode_round_trip(headers: list[Header]) -> None:
    assert Decoder().decode(encode(headers), BIG) == headers


@given(st.lists(st.tuples(ascii_text, ascii_text), max_size=12))
def test_huffman_literals_with_indexing_fill_the_table(headers: list[Header]) -> None:
    """Literals with incremental indexing and Huffman-coded strings decode to their fields,
    and the table holds the newest entries that fit in 4096 octets, as its size says."""

    def coded(text: str) -> bytes:
        raw = huffman.encode(text.encode())
        length = len(raw)
        prefix = bytes((0x80 | length,)) if length < 127 else b"\xff" + _continued(length - 127)
        return prefix + raw

    block = b"".join(b"\x40" + coded(name) + coded(value) for name, value in headers)
    decoder = Decoder()
    assert decoder.decode(block, BIG) == headers
    kept: list[Header] = []
    size = 0
    for name, value in reversed(headers):
        if size + len(name) + len(value) + 32 > 4096:
            break
        kept.append((name, value))
        size += len(name) + len(value) + 32
    assert (decoder.size, dynamic_table(decoder)) == (size, kept)


def _continued(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@settings(max_examples=500)
@given(st.binary(max_size=200))
@example(b"\x3f\xe1\x1f\x82\xff\xff\xff\xff\xff\x0f")
def test_arbitrary_blocks_decode_or_raise_hpack_error(block: bytes) -> None:
    """Any octets give a header list or HpackError (HeaderListTooLarge with a small limit),
    never another exception."""
    for limit in (BIG, 64):
        try:
            headers = Decoder().decode(block, limit)
        except (HpackError, HeaderListTooLarge):
            continue
        assert all(isinstance(n, str) and isinstance(v, str) for n, v in headers)
