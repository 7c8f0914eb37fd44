"""HPACK's Huffman code (RFC 7541, Appendix B).

The code is canonical: ordered by (length, symbol), each code is the previous one plus one,
shifted left by the difference in length. So the table is the 257 code lengths alone, and the
codes follow from them (checked against the RFC's own values in the unit tests).

Decoding walks the code tree an octet at a time through a table built from the lengths: first
for each inner node of the tree and each nibble, the node reached and the symbol completed on
the way, if any (a code is at least five bits long, so a nibble completes at most one); then
two nibble steps composed into one per octet.
"""

from __future__ import annotations

from reconsume.errors import InvalidArgumentError

# Code length of each symbol 0..256 (256 is EOS), as ``chr(ord("0") + length)``.
_LENGTHS = (
    "=GLLLLLLLHNLLNLLLLLLLLNLLLLLLLLL6::<=68;::8;8666555666666678?6<:=6777777777777777777777787"
    "8=C=>6?56565666577666567655677777?;>=LDFDDFFFGFGGGGGHGHHFGHGGGGEFGFGGHFEDFFGGEGFFHEFGGEEF"
    "EGFGGDFFFGFFGJJDCFGFIJJJKKJHICEJKKJKHEEJJLKKKDHDEFEEGFFIIHHJGJKJJKKKKKLKKKKKJN"
)
LENGTHS: tuple[int, ...] = tuple(ord(char) - ord("0") for char in _LENGTHS)
EOS = 256


def _codes() -> tuple[int, ...]:
    codes = [0] * len(LENGTHS)
    code = -1
    previous = 0
    for symbol in sorted(range(len(LENGTHS)), key=lambda s: (LENGTHS[s], s)):
        code = (code + 1) << (LENGTHS[symbol] - previous)
        previous = LENGTHS[symbol]
        codes[symbol] = code
    return tuple(codes)


CODES = _codes()

_NO_SYMBOL = -1
_FAILED = -2


def _tree() -> tuple[list[list[int]], list[bool]]:
    """Inner nodes as [child for bit 0, child for bit 1]; a child >= 0 is an inner node, a
    child < 0 is the leaf of symbol ``-child - 1``. ``accepting[node]``: a decoding may end
    there (the root, or up to seven 1 bits into the EOS code: the padding)."""
    nodes: list[list[int]] = [[0, 0]]
    filled: list[list[bool]] = [[False, False]]
    for symbol, length in enumerate(LENGTHS):
        node = 0
        code = CODES[symbol]
        for depth in range(length - 1, 0, -1):
            bit = (code >> depth) & 1
            if not filled[node][bit]:
                nodes.append([0, 0])
                filled.append([False, False])
                nodes[node][bit] = len(nodes) - 1
                filled[node][bit] = True
            node = nodes[node][bit]
        nodes[node][code & 1] = -symbol - 1
        filled[node][code & 1] = True
    accepting = [False] * len(nodes)
    node = 0
    accepting[0] = True
    for _ in range(7):
        node = nodes[node][1]
        accepting[node] = True
    return nodes, accepting


def _nibble_table() -> tuple[list[int], list[int], list[bool]]:
    nodes, accepting = _tree()
    next_node = [0] * (len(nodes) * 16)
    emitted = [_NO_SYMBOL] * (len(nodes) * 16)
    for start in range(len(nodes)):
        for nibble in range(16):
            node = start
            symbol = _NO_SYMBOL
            for shift in (3, 2, 1, 0):
                child = nodes[node][(nibble >> shift) & 1]
                if child >= 0:
                    node = child
                    continue
                if -child - 1 == EOS:
                    symbol = _FAILED
                    break
                symbol = -child - 1
                node = 0
            next_node[start * 16 + nibble] = node
            emitted[start * 16 + nibble] = symbol
    return next_node, emitted, accepting


_NEXT, _EMITTED, _ACCEPTING = _nibble_table()


def _byte_table() -> tuple[list[int], list[bytes]]:
    """The nibble table composed into one step per octet: for each node and octet, the node
    reached and the symbols completed (none, one or two). A walk through EOS leads to
    ``_FAIL``, a node whose every step stays there."""
    fail = len(_ACCEPTING)
    nodes = fail + 1
    next_node = [fail] * (nodes * 256)
    emitted = [b""] * (nodes * 256)
    for start in range(fail):
        for octet in range(256):
            out = b""
            node = start
            for nibble in (octet >> 4, octet & 0x0F):
                index = node * 16 + nibble
                symbol = _EMITTED[index]
                if symbol == _FAILED:
                    node = fail
                    break
                if symbol >= 0:
                    out += bytes((symbol,))
                node = _NEXT[index]
            next_node[start * 256 + octet] = node
            emitted[start * 256 + octet] = out
    return next_node, emitted


_FAIL = len(_ACCEPTING)
_octet_table: tuple[list[int], list[bytes]] | None = None


def decode(data: bytes) -> bytes:
    """The octets ``data`` Huffman-encodes; InvalidArgumentError for EOS in the data, padding
    longer than seven bits or padding that is not the EOS code's leading 1 bits. (One table
    step per octet; the table, 64 Ki entries, is built at the first call.)"""
    global _octet_table  # built once, on first use
    if _octet_table is None:
        _octet_table = _byte_table()
    table_next, table_emitted = _octet_table
    out = bytearray()
    node = 0
    for octet in data:
        index = (node << 8) | octet
        out += table_emitted[index]
        node = table_next[index]
    if node == _FAIL:
        raise InvalidArgumentError("HPACK: EOS inside a Huffman-coded string")
    if not _ACCEPTING[node]:
        raise InvalidArgumentError("HPACK: a Huffman-coded string ends in bad padding")
    return bytes(out)


def encode(data: bytes) -> bytes:
    """``data`` Huffman-coded, padded with 1 bits to a whole octet."""
    value = 0
    bits = 0
    for byte in data:
        value = (value << LENGTHS[byte]) | CODES[byte]
        bits += LENGTHS[byte]
    padding = -bits % 8
    value = (value << padding) | ((1 << padding) - 1)
    return value.to_bytes((bits + padding) // 8, "big")
