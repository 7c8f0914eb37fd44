"""Broker settings from a TOML config file, with command-line flags taking precedence.

The file's keys are the names of :class:`~reconsume.broker.settings.BrokerSettings` fields; an
optional ``[store]`` table holds :class:`~reconsume.store.settings.StoreSettings` fields (all
but ``flush_mode`` and ``table_flush_interval_ms``, which the top-level ``flush_mode`` and
``offset_persist_interval_ms`` set). An unknown key or a value of the wrong type is refused
with an error naming the setting, as is every value ``BrokerSettings`` itself refuses.
"""

from __future__ import annotations

import difflib
import enum
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from reconsume.broker.settings import BrokerSettings
from reconsume.errors import InvalidArgumentError
from reconsume.store.settings import StoreSettings

_BROKER_HINTS = typing.get_type_hints(BrokerSettings)
_STORE_HINTS = typing.get_type_hints(StoreSettings)
_BROKER_KEYS = [f.name for f in fields(BrokerSettings)]
_STORE_OVERRIDDEN = {
    "flush_mode": "flush_mode",
    "table_flush_interval_ms": "offset_persist_interval_ms",
}
"""Store fields the broker sets from its own settings: the top-level key to use instead."""
_STORE_KEYS = [f.name for f in fields(StoreSettings) if f.name not in _STORE_OVERRIDDEN]


def _invalid(setting: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"setting {setting}: {problem}")


def load_config_file(path: Path | str) -> dict[str, Any]:
    """The TOML document at ``path``; InvalidArgumentError when unreadable or not TOML."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"config file {path}: cannot read it: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgumentError(f"config file {path}: not valid TOML: {exc}") from None


def broker_settings(
    file_values: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> BrokerSettings:
    """Settings from a config file's values, each replaced by the one in ``overrides`` (the
    command line's, already typed) when it has it; the rest keep their defaults."""
    values = {**file_values, **(overrides or {})}
    arguments: dict[str, Any] = {}
    for key, value in values.items():
        if key == "store":
            arguments[key] = _store_settings(value)
        else:
            arguments[key] = _convert(key, value, _hint(key, _BROKER_KEYS, _BROKER_HINTS, ""))
    if "store_dir" not in arguments:
        raise _invalid("store_dir", "required (--store-dir, or store_dir in the config file)")
    return BrokerSettings(**arguments)


def _store_settings(value: object) -> StoreSettings:
    if isinstance(value, StoreSettings):
        return value
    if not isinstance(value, dict):
        raise _invalid("store", f"expected a table ([store]), got {value!r}")
    arguments: dict[str, Any] = {}
    for key, item in value.items():
        if key in _STORE_OVERRIDDEN:
            raise _invalid(f"store.{key}", f"set {_STORE_OVERRIDDEN[key]} (top level) instead")
        hint = _hint(key, _STORE_KEYS, _STORE_HINTS, "store.")
        arguments[key] = _convert(f"store.{key}", item, hint)
    try:
        return StoreSettings(**arguments)
    except InvalidArgumentError as exc:
        raise _invalid("store", str(exc)) from None


def _hint(key: str, known: list[str], hints: Mapping[str, Any], prefix: str) -> Any:
    if key not in known:
        close = difflib.get_close_matches(key, known, n=1)
        suggestion = f"did you mean {prefix}{close[0]}?" if close else f"known: {', '.join(known)}"
        raise _invalid(f"{prefix}{key}", f"unknown setting ({suggestion})")
    return hints[key]


def _convert(setting: str, value: object, hint: Any) -> object:
    """``value`` as the type ``hint`` names, or InvalidArgumentError naming ``setting``."""
    if isinstance(hint, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        choices = [member.value for member in hint]
        if value not in choices:
            expected = ", ".join(map(str, choices))
            raise _invalid(setting, f"expected one of {expected}, got {value!r}")
        return hint(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _invalid(setting, f"expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _invalid(setting, f"expected an integer, got {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _invalid(setting, f"expected a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise _invalid(setting, f"expected a string, got {value!r}")
    if typing.get_origin(hint) is tuple:
        if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise _invalid(setting, f"expected a list of strings, got {value!r}")
    raise TypeError(f"setting {setting}: no conversion for {hint!r}")  # a new field's type
