"""CEL's values and functions for :mod:`reconsume.apiserver.cel`: type names, equality across
types, and the functions and methods rules may call, with cel-go's results and errors
(Kubernetes' string library for ``substring``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from ..re2 import re2_search
from .tokens import INT64_MAX, INT64_MIN, CelError


def cel_type(value: object) -> str:
    """CEL's name of the type of ``value``."""
    if value is None:
        return "null_type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


def overload_error(function: str, position: int | None, *args: object) -> CelError:
    types = ", ".join(cel_type(arg) for arg in args)
    return CelError(f"no such overload: {function}({types})", position)


def equal(a: object, b: object) -> bool:
    """CEL's ``==``: numbers compare by value across int and double, other types never
    equal each other, lists and maps compare element by element."""
    kind_a, kind_b = cel_type(a), cel_type(b)
    if kind_a in ("int", "double") and kind_b in ("int", "double"):
        return a == b
    if kind_a != kind_b:
        return False
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(equal, a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return len(a) == len(b) and all(
            any(equal(key, other) and equal(a[key], b[other]) for other in b) for key in a
        )
    return a == b


def _string_args(*args: object) -> None:
    if not all(isinstance(arg, str) for arg in args):
        raise TypeError("string arguments expected")


def size(value: object) -> int:
    if isinstance(value, str | list | tuple | Mapping):
        return len(value)
    raise TypeError(cel_type(value))


def matches(text: object, pattern: object) -> bool:
    """RE2, unanchored (``re.search``)."""
    _string_args(text, pattern)
    assert isinstance(text, str)
    assert isinstance(pattern, str)
    try:
        return re2_search(pattern, text)
    except re.error as exc:
        raise CelError(f"invalid regular expression {pattern!r}: {exc}") from exc


def starts_with(text: object, prefix: object) -> bool:
    _string_args(text, prefix)
    return str(text).startswith(str(prefix))


def ends_with(text: object, suffix: object) -> bool:
    _string_args(text, suffix)
    return str(text).endswith(str(suffix))


def contains(text: object, part: object) -> bool:
    _string_args(text, part)
    return str(part) in str(text)


def substring(text: object, start: object, end: object = None) -> str:
    """Code points ``start`` to ``end`` (the end when absent), with the Kubernetes string
    library's errors."""
    _string_args(text)
    assert isinstance(text, str)
    stop = len(text) if end is None else end
    if cel_type(start) != "int" or cel_type(stop) != "int":
        raise TypeError("int arguments expected")
    assert isinstance(start, int)
    assert isinstance(stop, int)
    if end is not None and start > stop:
        raise CelError(f"invalid substring range. start: {start}, end: {stop}")
    for index in (start, stop):
        if not 0 <= index <= len(text):
            raise CelError(f"index out of range: {index}")
    return text[start:stop]


def to_int(value: object) -> int:
    kind = cel_type(value)
    if kind == "int":
        assert isinstance(value, int)
        return value
    if kind == "double":
        assert isinstance(value, float)
        if math.isnan(value) or not INT64_MIN < value < INT64_MAX:
            raise CelError("integer overflow")
        return int(value)
    if kind == "string":
        assert isinstance(value, str)
        if not re.fullmatch(r"[+-]?[0-9]+", value, re.ASCII):
            raise CelError(f"type conversion error from 'string' to 'int': {value!r}")
        number = int(value)
        if not INT64_MIN <= number <= INT64_MAX:
            raise CelError(f"type conversion error from 'string' to 'int': {value!r}")
        return number
    raise TypeError(kind)


_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)")


def to_double(value: object) -> float:
    kind = cel_type(value)
    if kind in ("int", "double"):
        assert isinstance(value, int | float)
        return float(value)
    if kind == "string":
        assert isinstance(value, str)
        if not _FLOAT.fullmatch(value.lower()):
            raise CelError(f"type conversion error from 'string' to 'double': {value!r}")
        return float(value)
    raise TypeError(kind)


def to_string(value: object) -> str:
    kind = cel_type(value)
    if kind == "string":
        assert isinstance(value, str)
        return value
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return str(value)
    if kind == "double":
        assert isinstance(value, float)
        return format_double(value)
    raise TypeError(kind)


def format_double(value: float) -> str:
    """``value`` as CEL's ``string(double)`` writes it (Go's ``%g``, shortest form)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # where the decimal point goes in the digits
    prefix = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{point - 1:+03d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{prefix}{text}{'0' * (point - len(text))}"
    return f"{prefix}{text[:point]}.{text[point:]}"


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "size": size,
    "matches": matches,
    "startsWith": starts_with,
    "endsWith": ends_with,
    "contains": contains,
    "substring": substring,
    "int": to_int,
    "double": to_double,
    "string": to_string,
    "dyn": lambda value: value,
}
"""Each function by name; a method's receiver is its first argument. A TypeError or
ValueError they raise is reported as CEL's "no such overload"."""
