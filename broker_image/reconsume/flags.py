"""Command-line flags declared on the fields of a settings dataclass.

A server's settings are a frozen dataclass. A field the command line can set carries a
:class:`Flag` in its metadata::

    default_topic_queue_nums: int = field(
        default=8, metadata=flag("--default-queues", "queues of an auto-created topic")
    )

:func:`add_flags` adds one argparse option per such field, its help ending in the field's
default (``(default 8)``), and :func:`given_settings` turns the options given back into field
values. A default is written once, in the dataclass, so the help cannot disagree with it.

Every option's argparse default is None and an option left out is missing from
:func:`given_settings`: what lies underneath (a config file's value, else the dataclass
default) stays. A value is checked in two steps: argparse checks numbers and choices (a usage
error), then ``Flag.parse`` or the field's type makes the setting's value; a parse refuses
text with InvalidArgumentError naming the setting, as the dataclass refuses values.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

METADATA_KEY = "reconsume.flag"
"""The key of a field's :class:`Flag` in ``dataclasses.field(metadata=...)``."""


@dataclass(frozen=True, slots=True)
class Flag:
    """How one setting (or a few set together) appears on the command line."""

    name: str
    """The option, e.g. ``--default-queues``."""
    meaning: str
    """What the option sets, for the help; ``(default …)`` is added from the dataclass."""
    parse: Callable[[str], object] | None = None
    """The setting's value from the option's text. None: by the field's type, an int or float
    through argparse's ``type``, an Enum by its values (argparse ``choices``), a bool as
    ``--name`` / ``--no-name``, a str as given."""
    sets: tuple[str, ...] = ()
    """The fields the option sets together, in order, when more than the one carrying it
    (``--listen host:port`` sets ``listen_host`` and ``listen_port``); ``parse`` then returns
    a tuple with one value per field."""
    show: Callable[..., str] | None = None
    """The default as the help shows it, from the defaults of the fields set; None: the
    default itself (a bool as on/off, an Enum as its value)."""
    empty: str = "none"
    """The help's word for a default of None, ``""`` or ``()``."""

    @property
    def dest(self) -> str:
        """The argparse destination: the option without ``--``, ``-`` as ``_``."""
        return self.name.removeprefix("--").replace("-", "_")


def flag(
    name: str,
    meaning: str,
    *,
    parse: Callable[[str], object] | None = None,
    sets: tuple[str, ...] = (),
    show: Callable[..., str] | None = None,
    empty: str = "none",
) -> Mapping[str, Flag]:
    """Field metadata declaring a flag (see :class:`Flag` for the arguments)."""
    return {METADATA_KEY: Flag(name, meaning, parse, sets, show, empty)}


def flagged(settings: type) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    """The fields of the dataclass ``settings`` that carry a flag, each with it."""
    for field in dataclasses.fields(settings):
        declared = field.metadata.get(METADATA_KEY)
        if isinstance(declared, Flag):
            yield field, declared


def add_flags(parser: argparse.ArgumentParser, settings: type) -> None:
    """One option per flagged field of ``settings``, in field order."""
    hints = typing.get_type_hints(settings)
    for field, declared in flagged(settings):
        kind = _bare(hints[field.name])
        options: dict[str, Any] = {"dest": declared.dest, "default": None}
        if declared.parse is None:
            if kind is bool:
                options["action"] = argparse.BooleanOptionalAction
            elif isinstance(kind, type) and issubclass(kind, enum.Enum):
                options["choices"] = [str(member.value) for member in kind]
            elif kind in (int, float):
                options["type"] = kind
            elif kind is not str:
                raise TypeError(f"flag {declared.name}: give a parse for {kind!r}")
        # argparse expands %-formats in help texts: a literal % is written %%.
        options["help"] = help_text(settings, field, declared).replace("%", "%%")
        parser.add_argument(declared.name, **options)


def help_text(settings: type, field: dataclasses.Field[Any], declared: Flag) -> str:
    """The option's help: its meaning, then the default of the fields it sets."""
    names = declared.sets or (field.name,)
    by_name = {f.name: f for f in dataclasses.fields(settings)}
    defaults = [_default(by_name[name]) for name in names]
    if any(value is dataclasses.MISSING for value in defaults):
        return f"{declared.meaning} (required)"
    return f"{declared.meaning} (default {shown_default(declared, defaults)})"


def shown_default(declared: Flag, defaults: list[object]) -> str:
    """The defaults of the fields a flag sets, as its help shows them."""
    if declared.show is not None:
        return declared.show(*defaults)
    (value,) = defaults
    if value is None or value == "" or value == ():
        return declared.empty
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return f"'{text}'" if any(char.isspace() for char in text) else text


def given_settings(settings: type, namespace: argparse.Namespace) -> dict[str, Any]:
    """The values of the fields of ``settings`` whose options ``namespace`` holds, ready for
    its constructor; options left out are missing. ``Flag.parse`` may raise
    (InvalidArgumentError naming the setting)."""
    hints = typing.get_type_hints(settings)
    given: dict[str, Any] = {}
    for field, declared in flagged(settings):
        text = getattr(namespace, declared.dest, None)
        if text is None:
            continue
        names = declared.sets or (field.name,)
        kind = _bare(hints[field.name])
        if declared.parse is not None:
            value = declared.parse(text)
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            value = kind(text)
        else:
            value = text  # argparse made the int, float or bool already
        if len(names) == 1:
            given[names[0]] = value
        elif isinstance(value, tuple) and len(value) == len(names):
            given.update(zip(names, value, strict=True))
        else:
            raise TypeError(f"flag {declared.name}: parse must return a value per field {names}")
    return given


def _default(field: dataclasses.Field[Any]) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _bare(hint: Any) -> Any:
    """``X`` of ``X | None``; other hints unchanged."""
    if isinstance(hint, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint
