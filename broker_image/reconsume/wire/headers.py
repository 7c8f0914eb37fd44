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
        writer = type(self).__dict__.get("_writer_cache")
        if writer is None:
            writer = _compile_writer(self._fields())
            type.__setattr__(type(self), "_writer_cache", writer)
        result: dict[str, str] = writer(self)
        return result

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        reader = cls.__dict__.get("_reader_cache")
        if reader is None:
            reader = _compile_reader(cls, cls._fields())
            type.__setattr__(cls, "_reader_cache", reader)
        try:
            header: Self = reader(ext)
        except (ValueError, TypeError, AttributeError):
            # The compiled reader handles well-formed headers only; this one says what is wrong.
            return cls._read_checked(ext)
        return header

    @classmethod
    def _read_checked(cls, ext: Mapping[str, str]) -> Self:
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


# A header is read or written for every request on the hot path; the generic loop over the
# field specs (a dict lookup, a kind test and a getattr per field) costs several times what
# straight-line code per class does. These build that code once per class, as dataclasses
# builds ``__init__``. Field names come from the class definitions, never from the wire.
def _compile_reader(cls: type, spec: tuple[tuple[str, str, str, bool], ...]) -> Any:
    # Each slot is set through its descriptor: a frozen dataclass's __init__ goes through
    # object.__setattr__ per field, which costs twice as much.
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = ["def read(ext):", "    get = ext.get", "    header = new(cls)"]
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    for index, (attr, name, kind, required) in enumerate(spec):
        value = f"v{index}"
        namespace[f"set{index}"] = getattr(cls, attr).__set__
        convert = {_INT: f"int({value})", _BOOL: f'{value}.strip().lower() == "true"'}
        converted = convert.get(kind, value)
        lines.append(f"    {value} = get({name!r})")
        if required:
            lines.append(f"    if {value} is None: raise ValueError")
            lines.append(f"    set{index}(header, {converted})")
            continue
        field = defaults[attr]
        if field.default_factory is not dataclasses.MISSING:
            namespace[f"default{index}"] = field.default_factory
            default = f"default{index}()"
        else:
            namespace[f"default{index}"] = field.default
            default = f"default{index}"
        lines.append(f"    set{index}(header, {default} if {value} is None else {converted})")
    lines.append("    return header")
    exec("\n".join(lines), namespace)
    return namespace["read"]


def _compile_writer(spec: tuple[tuple[str, str, str, bool], ...]) -> Any:
    lines = ["def write(self):", "    ext = {}"]
    for attr, name, kind, _required in spec:
        lines.append(f"    v = self.{attr}")
        if kind == _BOOL:
            lines.append(f'    if v is not None: ext[{name!r}] = "true" if v else "false"')
        else:
            lines.append(f"    if v is not None: ext[{name!r}] = str(v)")
    lines.append("    return ext")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    return namespace["write"]


# ------------------------------------------------------------------ name server
EPOCH_FIELD = "reconsumeEpoch"
"""REGISTER_BROKER and UNREGISTER_BROKER header field a failover-run broker adds: its master
epoch. Apache RocketMQ's name servers ignore it; reconsume's refuse a master older than one
they have seen, and ignore the unregistration of a master address that a newer master has
registered (the same address: a master Service)."""
STABLE_ADDRESS_FIELD = "reconsumeStableAddress"
"""REGISTER_BROKER header field (``true``) of a master registering its broker name's stable
address (a Kubernetes master Service): the address outlives the registering connection, so a
name server keeps it when that connection closes (until the expiry, or the next master
registers it) instead of dropping it from routes while a replica takes over."""


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
