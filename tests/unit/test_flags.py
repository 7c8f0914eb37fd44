"""reconsume.flags on small settings classes: what a declaration turns into."""

from __future__ import annotations

import argparse
import enum
from dataclasses import dataclass, field

import pytest

from reconsume.flags import add_flags, flag, given_settings


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Example:
    ratio: float = field(default=0.5, metadata=flag("--ratio", "share in %"))
    colour: Colour = field(default=Colour.RED, metadata=flag("--colour", "a colour"))
    name: str | None = field(default=None, metadata=flag("--name", "a name", empty="anonymous"))
    hidden: int = 3


def parser_of(settings: type) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="example")
    add_flags(parser, settings)
    return parser


def test_help_shows_the_defaults_and_keeps_a_percent_sign() -> None:
    text = " ".join(parser_of(Example).format_help().split())
    assert "--ratio RATIO share in % (default 0.5)" in text
    assert "--colour {red,blue} a colour (default red)" in text
    assert "--name NAME a name (default anonymous)" in text
    assert "--hidden" not in text


def test_given_settings_holds_only_the_options_given() -> None:
    parser = parser_of(Example)
    assert given_settings(Example, parser.parse_args([])) == {}
    args = parser.parse_args(["--colour", "blue", "--ratio", "2"])
    assert given_settings(Example, args) == {"colour": Colour.BLUE, "ratio": 2.0}


def test_a_field_type_without_a_conversion_needs_a_parse() -> None:
    @dataclass(frozen=True)
    class Listed:
        items: tuple[str, ...] = field(default=(), metadata=flag("--items", "items"))

    with pytest.raises(TypeError, match="--items: give a parse"):
        parser_of(Listed)
