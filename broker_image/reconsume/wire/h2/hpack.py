"""HPACK (RFC 7541): the decoder of a connection's request header blocks, and the encoding of
the few header blocks a gRPC server answers with.

The decoder keeps the dynamic table the client's encoder indexes into, so a client's repeated
headers (the path, its id, its user agent) cost one octet each after their first call. The
server's own blocks use no dynamic table (literals "without indexing", static indexes where
the static table has the field): a response's headers are the same few octets every time and
are built once.
"""

from __future__ import annotations

from reconsume.errors import InvalidArgumentError
from reconsume.wire.h2 import huffman

Header = tuple[str, str]

STATIC_TABLE: tuple[Header, ...] = (
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
)
ENTRY_OVERHEAD = 32
DEFAULT_TABLE_SIZE = 4096
MAX_INTEGER = 1 << 32
"""An integer past this (a prefix-coded length or index) is refused as malformed."""


class HpackError(InvalidArgumentError):
    """A header block that does not decode: HTTP/2's COMPRESSION_ERROR, fatal to the
    connection (the dynamic tables of its two ends no longer agree)."""


def _integer(data: bytes, position: int, prefix_bits: int) -> tuple[int, int]:
    """The prefix-coded integer starting at ``data[position]``, and the position after it."""
    mask = (1 << prefix_bits) - 1
    try:
        value = data[position] & mask
        position += 1
        if value < mask:
            return value, position
        shift = 0
        while True:
            byte = data[position]
            position += 1
            value += (byte & 0x7F) << shift
            if value > MAX_INTEGER:
                raise HpackError("HPACK: an integer too large")
            if not byte & 0x80:
                return value, position
            shift += 7
    except IndexError:
        raise HpackError("HPACK: a header block ends inside an integer") from None


def _string(data: bytes, position: int) -> tuple[str, int]:
    if position >= len(data):
        raise HpackError("HPACK: a header block ends before a string")
    coded = data[position] & 0x80
    length, position = _integer(data, position, 7)
    end = position + length
    if end > len(data):
        raise HpackError("HPACK: a string runs past the end of its header block")
    raw = data[position:end]
    if coded:
        try:
            raw = huffman.decode(raw)
        except InvalidArgumentError as exc:
            raise HpackError(str(exc)) from None
    return raw.decode("latin-1"), end


class Decoder:
    """One connection's decoding context (its dynamic table)."""

    def __init__(self, max_table_size: int = DEFAULT_TABLE_SIZE) -> None:
        self.max_allowed = max_table_size
        """The table size the server's SETTINGS_HEADER_TABLE_SIZE allows the encoder."""
        self.max_size = max_table_size
        self.size = 0
        self._entries: list[Header] = []
        """Oldest first: dynamic index 1 is the last."""

    def _lookup(self, index: int) -> Header:
        if 0 < index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        dynamic = index - len(STATIC_TABLE)
        if 0 < dynamic <= len(self._entries):
            return self._entries[-dynamic]
        raise HpackError(f"HPACK: index {index} is not in the table")

    def _add(self, header: Header) -> None:
        size = len(header[0]) + len(header[1]) + ENTRY_OVERHEAD
        self.size += size
        self._entries.append(header)
        self._evict()
        if size > self.max_size:  # larger than the whole table: it empties it
            self._entries.clear()
            self.size = 0

    def _evict(self) -> None:
        entries = self._entries
        while self.size > self.max_size and entries:
            name, value = entries.pop(0)
            self.size -= len(name) + len(value) + ENTRY_OVERHEAD

    def _literal(self, block: bytes, position: int, prefix_bits: int) -> tuple[Header, int]:
        """A literal field: its name by index (``prefix_bits`` wide) or as a string, then its
        value; and the position after it."""
        index, position = _integer(block, position, prefix_bits)
        if index:
            name = self._lookup(index)[0]
        else:
            name, position = _string(block, position)
        value, position = _string(block, position)
        return (name, value), position

    def decode(self, block: bytes, max_list_size: int) -> list[Header]:
        """The header list of one whole block; a list larger than ``max_list_size`` (names,
        values and 32 octets each) is decoded to the end, to keep the table in step, then
        refused with :class:`HeaderListTooLarge`."""
        headers: list[Header] = []
        position = 0
        end = len(block)
        list_size = 0
        first = True
        while position < end:
            byte = block[position]
            if byte & 0x80:  # indexed field
                if 0x80 < byte <= 0x80 + len(STATIC_TABLE):  # the static table, one octet
                    header = STATIC_TABLE[byte - 0x81]
                    position += 1
                else:
                    index, position = _integer(block, position, 7)
                    header = self._lookup(index)
            elif byte & 0x40:  # literal with incremental indexing
                header, position = self._literal(block, position, 6)
                self._add(header)
            elif byte & 0x20:  # dynamic table size update
                if not first:
                    raise HpackError("HPACK: a table size update after the first field")
                size, position = _integer(block, position, 5)
                if size > self.max_allowed:
                    raise HpackError(f"HPACK: table size {size} above {self.max_allowed}")
                self.max_size = size
                self._evict()
                continue
            else:  # literal without indexing (0000) or never indexed (0001)
                header, position = self._literal(block, position, 4)
            first = False
            list_size += len(header[0]) + len(header[1]) + ENTRY_OVERHEAD
            headers.append(header)
        if list_size > max_list_size:
            raise HeaderListTooLarge(f"header list of {list_size} octets above {max_list_size}")
        return headers


class HeaderListTooLarge(InvalidArgumentError):
    """A header list above the server's limit: the stream is refused, the connection stays."""


def _encode_integer(value: int, prefix_bits: int, first: int) -> bytes:
    mask = (1 << prefix_bits) - 1
    if value < mask:
        return bytes((first | value,))
    out = bytearray((first | mask,))
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_string(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")
    return _encode_integer(len(raw), 7, 0) + raw


_STATIC_INDEX = {header: index for index, header in reversed(list(enumerate(STATIC_TABLE, 1)))}
_STATIC_NAME = {name: index for index, (name, _) in reversed(list(enumerate(STATIC_TABLE, 1)))}


def encode(headers: list[Header] | tuple[Header, ...]) -> bytes:
    """A header block of ``headers`` that leaves the peer's dynamic table as it is: a static
    index where the static table has the field, else a literal without indexing (the name by
    static index where it has the name)."""
    out = bytearray()
    for name, value in headers:
        index = _STATIC_INDEX.get((name, value))
        if index is not None:
            out += _encode_integer(index, 7, 0x80)
            continue
        name_index = _STATIC_NAME.get(name)
        if name_index is not None:
            out += _encode_integer(name_index, 4, 0)
        else:
            out += b"\x00" + _encode_string(name)
        out += _encode_string(value)
    return bytes(out)
