"""The message a producer sends and the stored message a consumer receives."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from reconsume.message import properties as props
from reconsume.message import sysflag
from reconsume.message.address import HostAddress
from reconsume.message.ids import offset_msg_id


@dataclass(slots=True)
class Message:
    """A message to send: topic, body, user flag and properties (tags and keys among them)."""

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(props.TAGS, value)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(props.KEYS, "")
        return [k for k in raw.split(props.KEY_SEPARATOR) if k]

    @keys.setter
    def keys(self, value: list[str]) -> None:
        self._set(props.KEYS, props.KEY_SEPARATOR.join(value) if value else None)

    @property
    def delay_level(self) -> int:
        return int(self.properties.get(props.DELAY_TIME_LEVEL, "0") or 0)

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self._set(props.DELAY_TIME_LEVEL, str(level) if level > 0 else None)

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value


@dataclass(slots=True)
class StoredMessage:
    """A message as stored by a broker (RocketMQ's ``MessageExt``); decoded, treat as read-only."""

    store_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: HostAddress
    store_timestamp_ms: int
    store_host: HostAddress
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]

    @property
    def msg_id(self) -> str:
        """The offset message id: hex of the store host and the commit-log offset."""
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def uniq_key(self) -> str | None:
        """The producer-assigned unique id (UNIQ_KEY), which clients show as the message id."""
        return self.properties.get(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(props.KEYS, "")
        return [k for k in raw.split(props.KEY_SEPARATOR) if k]

    @property
    def is_compressed(self) -> bool:
        return bool(self.sys_flag & sysflag.COMPRESSED)

    def uncompressed_body(self) -> bytes:
        """The body, inflated when the producer compressed it (zlib, as RocketMQ clients do)."""
        return zlib.decompress(self.body) if self.is_compressed else self.body
