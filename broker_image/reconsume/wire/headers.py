"""Custom headers: the typed form of a command's ``extFields``.

Each header is a frozen dataclass whose fields map to RocketMQ's names: snake_case becomes
camelCase unless a field says otherwise (``field(metadata=wire("a"))`` for SEND_MESSAGE_V2's
single-letter names). Values travel as strings; ``to_ext_fields``/``from_ext_fields`` convert
them. A field without a default is required (RocketMQ's ``@CFNotNull``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Self

from reconsume.errors import InvalidArgumentError


class HeaderError(InvalidArgumentError):
    """A request header misses a required field or holds a value of the wrong type."""


def wire(name: str) -> dict[str, str]:
    """Field metadata naming the field on the wire."""
    return {"wire": name}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_INT, _BOOL, _STR = "int", "bool", "str"


def _kind(annotation: object) -> str:
    text = str(annotation)
    if "bool" in text:
        return _BOOL
    if "int" in text:
        return _INT
    return _STR


class Header:
    """Base of every custom header; subclasses are ``@dataclass(frozen=True, slots=True)``."""

    @classmethod
    def _fields(cls) -> tuple[tuple[str, str, str, bool], ...]:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            spec = tuple(
                (
                    f.name,
                    f.metadata.get("wire", _camel(f.name)),
                    _kind(f.type),
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
            type.__setattr__(cls, "_spec_cache", spec)
        return spec

    def to_ext_fields(self) -> dict[str, str]:
        ext: dict[str, str] = {}
        for attr, name, kind, _required in self._fields():
            value = getattr(self, attr)
            if value is None:
                continue
            if kind == _BOOL:
                ext[name] = "true" if value else "false"
            else:
                ext[name] = str(value)
        return ext

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        values: dict[str, Any] = {}
        for attr, name, kind, required in cls._fields():
            raw = ext.get(name)
            if raw is None:
                if required:
                    raise HeaderError(f"{cls.__name__}: field {name!r} is required")
                continue
            if kind == _INT:
                try:
                    values[attr] = int(raw)
                except ValueError as exc:
                    raise HeaderError(
                        f"{cls.__name__}: field {name!r} must be an integer, got {raw!r}"
                    ) from exc
            elif kind == _BOOL:
                values[attr] = raw.strip().lower() == "true"
            else:
                values[attr] = raw
        return cls(**values)


# ------------------------------------------------------------------ name server
@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(Header):
    namespace: str
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader(Header):
    cluster: str
