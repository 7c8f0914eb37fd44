"""Tag codes: the hash a consume-queue entry stores so the broker filters without reading the
commit log. RocketMQ uses Java's ``String.hashCode`` of the TAGS property."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, as a signed int32)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def tags_code(tags: str | None) -> int:
    """The consume-queue tag code of a message's TAGS property (0 when it has none)."""
    return java_string_hash(tags) if tags else 0
