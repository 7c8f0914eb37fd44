"""Structural OpenAPI v3 schemas of CRDs, checked and defaulted without an API server.

Covers what the API server's schema validation does for the keywords reconsume's CRDs use:
``type`` (with ``nullable`` and ``x-kubernetes-int-or-string``), ``enum``, ``minimum`` /
``maximum`` (and their exclusive forms), ``multipleOf``, ``minLength`` / ``maxLength`` (in
characters), ``pattern`` (RE2), ``format`` ``date`` and ``date-time``, ``minItems`` /
``maxItems``, ``x-kubernetes-list-type`` ``map`` and ``set`` (no duplicates),
``minProperties`` / ``maxProperties``, ``required``, ``additionalProperties``, and unknown
fields, which are refused (what ``fieldValidation=Strict`` and ``kubectl --validate=strict``
do). CEL rules are evaluated by :mod:`reconsume.apiserver.rules`, not here.

Paths are written as the API server writes them: ``spec.retry.maxTimes``,
``spec.subscriptions[1].topic``, a map's entry as ``spec.spark.conf.<key>``; the whole object
is the empty path.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .re2 import re2_search

Schema = Mapping[str, Any]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a value is refused: where (``spec.retry.maxTimes``; empty for the whole
    object) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class SchemaReport:
    """What :func:`inspect` found."""

    problems: list[Problem] = field(default_factory=list)
    rules_blocked: bool = False
    """Whether a problem is of a kind after which the API server does not evaluate the CEL
    rules: a wrong type, a missing required field, a value outside an enum, or a string,
    list or map above its maximum size (they bound the rules' cost)."""


def child_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def walk(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every schema node with its path: ``spec.retry.policy``, ``status.brokers[*]`` for the
    items of an array, ``spec.spark.conf{*}`` for the values of a map."""
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        yield from walk(child, child_path(path, name))
    if isinstance(schema.get("items"), Mapping):
        yield from walk(schema["items"], f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from walk(schema["additionalProperties"], f"{path}{{*}}")


# ------------------------------------------------------------------------------------- types
def type_name(value: object) -> str:
    """The JSON type of ``value``, as the API server names it in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if INT64_MIN <= value <= INT64_MAX else "number"
    if isinstance(value, float):
        return "integer" if value.is_integer() and abs(value) < 2**63 else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    raise TypeError(f"{type(value).__name__} is not a JSON value: {value!r}")


def _expected_types(schema: Schema) -> tuple[str, ...]:
    if schema.get("x-kubernetes-int-or-string"):
        return ("integer", "string")
    expected = schema.get("type")
    return (expected,) if expected else ()


def _type_ok(expected: tuple[str, ...], actual: str) -> bool:
    return not expected or actual in expected or (actual == "integer" and "number" in expected)


def _quoted(value: object) -> str:
    """``value`` as the API server quotes it in messages (JSON)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


# ---------------------------------------------------------------------------------- validate
def validate(schema: Schema, value: Any, path: str = "") -> list[Problem]:
    """Problems of ``value`` against ``schema`` ([] when valid); ``path`` is where ``value``
    is in its document."""
    return inspect(schema, value, path).problems


def inspect(schema: Schema, value: Any, path: str = "") -> SchemaReport:
    """Like :func:`validate`, telling also whether the API server would go on to the CEL
    rules."""
    report = SchemaReport()
    _Validator(report).value(schema, value, path)
    return report


class _Validator:
    def __init__(self, report: SchemaReport) -> None:
        self.report = report

    def add(self, path: str, message: str, *, blocking: bool = False) -> None:
        self.report.problems.append(Problem(path, message))
        if blocking:
            self.report.rules_blocked = True

    def value(self, schema: Schema, value: Any, path: str) -> None:
        actual = type_name(value)
        expected = _expected_types(schema)
        if value is None and schema.get("nullable"):
            return
        if not _type_ok(expected, actual):
            self.add(
                path,
                f"Invalid value: {_quoted(actual)}: must be of type {','.join(expected)}",
                blocking=True,
            )
            return
        if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
            supported = ", ".join(_quoted(option) for option in schema["enum"])
            self.add(
                path,
                f"Unsupported value: {_quoted(value)}: supported values: {supported}",
                blocking=True,
            )
        if actual in ("integer", "number"):
            self.number(schema, value, path)
        elif actual == "string":
            self.string(schema, value, path)
        elif actual == "array":
            self.array(schema, value, path)
        elif actual == "object":
            self.object(schema, value, path)

    def number(self, schema: Schema, value: float, path: str) -> None:
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") and value == low):
                relation = (
                    "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
                )
                self.add(path, f"Invalid value: {_quoted(value)}: should be {relation} {low}")
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") and value == high):
                relation = (
                    "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
                )
                self.add(path, f"Invalid value: {_quoted(value)}: should be {relation} {high}")
        factor = schema.get("multipleOf")
        if factor and value % factor:
            self.add(path, f"Invalid value: {_quoted(value)}: should be a multiple of {factor}")

    def string(self, schema: Schema, value: str, path: str) -> None:
        if len(value) < schema.get("minLength", 0):
            self.add(
                path,
                f"Invalid value: {_quoted(value)}: should be at least "
                f"{schema['minLength']} chars long",
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.add(
                path,
                f"Too long: may not be longer than {schema['maxLength']} characters",
                blocking=True,
            )
        if "pattern" in schema and not re2_search(schema["pattern"], value):
            self.add(path, f"Invalid value: {_quoted(value)}: should match '{schema['pattern']}'")
        kind = schema.get("format")
        if kind in _FORMATS and not _FORMATS[kind](value):
            self.add(path, f"Invalid value: {_quoted(value)}: must be of type {kind}")

    def array(self, schema: Schema, value: list[Any], path: str) -> None:
        if len(value) < schema.get("minItems", 0):
            self.add(
                path,
                f"Invalid value: {len(value)}: should have at least {schema['minItems']} items",
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.add(
                path,
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                blocking=True,
            )
        items = schema.get("items")
        for index, item in enumerate(value):
            if isinstance(items, Mapping):
                self.value(items, item, f"{path}[{index}]")
        self.unique(schema, value, path)

    def unique(self, schema: Schema, value: list[Any], path: str) -> None:
        list_type = schema.get("x-kubernetes-list-type")
        if list_type not in ("map", "set"):
            return
        keys = schema.get("x-kubernetes-list-map-keys", ())
        seen: list[Any] = []
        for index, item in enumerate(value):
            if list_type == "map":
                if not isinstance(item, Mapping):
                    continue
                identity: Any = {key: item[key] for key in keys if key in item}
            else:
                identity = item
            if any(_equal(identity, earlier) for earlier in seen):
                self.add(f"{path}[{index}]", f"Duplicate value: {_quoted(identity)}")
            else:
                seen.append(identity)

    def object(self, schema: Schema, value: Mapping[str, Any], path: str) -> None:
        for name in schema.get("required", ()):
            if name not in value:
                self.add(child_path(path, name), "Required value", blocking=True)
        if len(value) < schema.get("minProperties", 0):
            self.add(
                path,
                f"Invalid value: {len(value)}: should have at least "
                f"{schema['minProperties']} properties",
            )
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self.add(
                path,
                f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                blocking=True,
            )
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in properties:
                self.value(properties[name], item, child_path(path, name))
            elif isinstance(extra, Mapping):
                self.value(extra, item, child_path(path, name))
            elif extra is True or path == "metadata":
                continue  # the object's metadata: checked by reconsume.apiserver.metadata
            else:
                self.add(child_path(path, name), "unknown field")


# ----------------------------------------------------------------------------------- formats
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|[+-][0-9]{2}:[0-9]{2})", re.ASCII)


def is_date(text: str) -> bool:
    """``2026-01-31`` (a day that exists)."""
    match = _DATE.fullmatch(text)
    if not match:
        return False
    try:
        datetime.date(*(int(part) for part in match.groups()))
    except ValueError:
        return False
    return True


def is_date_time(text: str) -> bool:
    """RFC 3339 as the API server checks ``format: date-time``: ``2026-01-31T12:00:00Z``,
    with optional fractional seconds and a numeric offset."""
    parts = text.lower().split("t")
    if len(parts) != 2 or not is_date(parts[0]):
        return False
    match = _TIME.fullmatch(parts[1])
    if not match:
        return False
    hour, minute, second = (int(part) for part in match.groups()[:3])
    return hour <= 23 and minute <= 59 and second <= 59


_FORMATS = {"date": is_date, "date-time": is_date_time}


# ---------------------------------------------------------------------------------- equality
def _equal(left: object, right: object) -> bool:
    """JSON equality: ``True`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_equal(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(_equal, left, right))
    return type_name(left) == type_name(right) and left == right


# --------------------------------------------------------------------------------- defaulted
def defaulted(schema: Schema, value: Any) -> Any:
    """A copy of ``value`` as the API server stores it: null fields that are not nullable
    removed, the schema's defaults filled in (in objects, array items and map values), and
    integral numbers of integer fields made ints."""
    value = copy.deepcopy(value)
    return _default(schema, value)


def _default(schema: Schema, value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and "integer" in _expected_types(schema):
        return int(value)
    if isinstance(value, dict) and schema.get("type") == "object":
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name in list(value):
            child = properties.get(name, extra if isinstance(extra, Mapping) else None)
            if value[name] is None and not (child or {}).get("nullable"):
                del value[name]
        for name, child in properties.items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
        for name in value:
            child = properties.get(name, extra if isinstance(extra, Mapping) else None)
            if child is not None:
                value[name] = _default(child, value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value[:] = [_default(schema["items"], item) for item in value]
    return value
