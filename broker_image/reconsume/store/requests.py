"""What a put takes and returns, and the consume-queue tag-code hook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from reconsume.message.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, TAGS
from reconsume.message.tags import java_string_hash

TagsCode = Callable[[str, str, int], int]
"""(topic, encoded properties, store timestamp ms) → the consume-queue tag code. It must
depend on nothing else: recovery recomputes it from the record."""

_TAGS_NEEDLE = TAGS + NAME_VALUE_SEPARATOR


def default_tags_code(topic: str, properties: str, store_timestamp_ms: int) -> int:
    """Java's ``String.hashCode`` of the TAGS property (its last occurrence wins, as in
    :func:`~reconsume.message.properties.decode_properties`); 0 without tags."""
    at = properties.rfind(_TAGS_NEEDLE)
    while at > 0 and properties[at - 1] != PROPERTY_SEPARATOR:
        at = properties.rfind(_TAGS_NEEDLE, 0, at)
    if at < 0:
        return 0
    start = at + len(_TAGS_NEEDLE)
    end = properties.find(PROPERTY_SEPARATOR, start)
    tags = properties[start:] if end < 0 else properties[start:end]
    return java_string_hash(tags) if tags else 0


@dataclass(slots=True)
class PutRequest:
    """One message to append. ``properties`` is the encoded properties string."""

    topic: str
    queue_id: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
    """Packed born host (:meth:`HostAddress.packed`)."""
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class PutResult(NamedTuple):
    commit_log_offset: int
    size: int
    queue_offset: int
    store_timestamp_ms: int

    @property
    def end_offset(self) -> int:
        """Offset one past the record; durable once the flush reaches it."""
        return self.commit_log_offset + self.size


class BatchPut(NamedTuple):
    """What appending a batch's messages gave (:meth:`MessageStore.append_parts`)."""

    offsets: list[int]
    """Each record's commit-log offset, in order."""
    end_offset: int
    """One past the last record."""
    queue_offset: int
    """The first record's queue offset (the others follow it)."""
    store_timestamp_ms: int
    tag_codes: list[int]
    """Each record's consume-queue tag code."""

    def last(self) -> PutResult:
        """The last record as a single append would have described it."""
        at = self.offsets[-1]
        return PutResult(
            at, self.end_offset - at, self.queue_offset + len(self.offsets) - 1,
            self.store_timestamp_ms,
        )  # fmt: skip
