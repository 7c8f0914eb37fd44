"""The CEL rules of a schema (``x-kubernetes-validations``) evaluated over an object, node by
node, as the API server evaluates them.

Each rule runs on every node of the object its schema node describes (array items one by
one, map values one by one), never on an absent or null value. A transition rule (one that
mentions ``oldSelf``) runs only when there is an old object and it has a value at that node:
object fields and map values are matched by key, items of ``x-kubernetes-list-type: map``
lists by their keys and of ``set`` lists by value; items of other lists have no old value.
At the root, ``self.metadata`` holds only ``name`` and ``generateName``. A null field of an
object with properties (a ``nullable`` one) is absent to the rules, as to the API server's:
``has()`` is false for it.

A failing rule is reported at the node's path plus the rule's ``fieldPath``, with the value
of its ``messageExpression`` (when that gives a non-blank, single-line string), else its
``message``, else ``failed rule: <rule>``. A rule that fails to evaluate (a missing key, a type
mismatch, an overflow) is reported as the API server reports it: at the node's path,
``<error> evaluating rule: <message or rule>``. ``reason`` is accepted and not reported
(every problem is a path and a message).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .cel import ABSENT, CelError, compile_rule
from .cel.functions import equal
from .schema import Problem, Schema, child_path

ROOT_METADATA_FIELDS = ("name", "generateName")


def rule_problems(schema: Schema, value: Any, old: Any = ABSENT, path: str = "") -> list[Problem]:
    """The problems the CEL rules of ``schema`` and of its descendants find in ``value`` (the
    whole object when ``path`` is empty); ``old`` is the object before an update, or
    :data:`~reconsume.apiserver.cel.ABSENT` on a create."""
    problems: list[Problem] = []
    _node(schema, _without_nulls(schema, value), _without_nulls(schema, old), path, problems)
    return problems


def _without_nulls(schema: Schema, value: Any) -> Any:
    """``value`` with the null fields of its objects with properties removed (the values of a
    map, ``additionalProperties``, stay)."""
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        kept: dict[str, Any] = {}
        for name, item in value.items():
            child = properties.get(name, extra if isinstance(extra, Mapping) else None)
            if item is None and name in properties:
                continue
            kept[name] = item if child is None else _without_nulls(child, item)
        return kept
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_without_nulls(schema["items"], item) for item in value]
    return value


def _node(schema: Schema, value: Any, old: Any, path: str, problems: list[Problem]) -> None:
    if value is None:
        return
    rules = schema.get("x-kubernetes-validations") or ()
    if rules:
        seen, old_seen = value, old
        if not path and isinstance(value, Mapping) and "metadata" in value:
            seen, old_seen = _root_view(value), _root_view(old)
        for rule in rules:
            problems += _evaluate(rule, seen, old_seen, path)
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            child = properties.get(name, extra if isinstance(extra, Mapping) else None)
            if child is not None:
                before = old[name] if isinstance(old, Mapping) and name in old else ABSENT
                _node(child, item, before, child_path(path, name), problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            before = _old_item(schema, item, old)
            _node(schema["items"], item, before, f"{path}[{index}]", problems)


def _root_view(value: Any) -> Any:
    if not isinstance(value, Mapping) or not isinstance(value.get("metadata"), Mapping):
        return value
    metadata = {k: v for k, v in value["metadata"].items() if k in ROOT_METADATA_FIELDS}
    return {**value, "metadata": metadata}


def _old_item(schema: Schema, item: Any, old: Any) -> Any:
    """The item of the old list that ``item`` is an update of, if the list type says."""
    if not isinstance(old, list):
        return ABSENT
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        return item if any(equal(item, candidate) for candidate in old) else ABSENT
    if list_type == "map" and isinstance(item, Mapping):
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        for candidate in old:
            if isinstance(candidate, Mapping) and all(
                equal(candidate.get(key), item.get(key)) for key in keys
            ):
                return candidate
    return ABSENT


def _evaluate(rule: Mapping[str, Any], value: Any, old: Any, path: str) -> list[Problem]:
    program = compile_rule(rule["rule"])
    if program.uses_old_self and old is ABSENT:
        return []
    label = (rule.get("message") or "").strip() or rule["rule"].strip()
    try:
        result = program.evaluate(value, old)
    except CelError as exc:
        return [Problem(path, f"{exc.reason} evaluating rule: {label}")]
    if result is True:
        return []
    if result is not False:
        return [Problem(path, f"rule gave {result!r}, not a bool, evaluating rule: {label}")]
    target = path
    if rule.get("fieldPath"):
        target = join_field_path(path, rule["fieldPath"])
    return [Problem(target, _message(rule, value, old))]


def _message(rule: Mapping[str, Any], value: Any, old: Any) -> str:
    expression = rule.get("messageExpression")
    if expression:
        try:
            message = compile_rule(expression).evaluate(value, old)
        except CelError:
            message = None  # the API server logs it and falls back to the message
        if isinstance(message, str) and message.strip() and "\n" not in message:
            return message
    return str(rule.get("message") or "").strip() or f"failed rule: {rule['rule'].strip()}"


_SEGMENT = re.compile(r"\.([A-Za-z_$][A-Za-z0-9_$-]*)|\['((?:[^'\\]|\\.)*)'\]|\[([0-9]+)\]")


def join_field_path(path: str, field_path: str) -> str:
    """``path`` followed by a rule's ``fieldPath`` (``.spec.groupName``, ``.conf['a.b']``,
    ``.items[0]``), written as the API server writes paths."""
    position, out = 0, path
    while position < len(field_path):
        segment = _SEGMENT.match(field_path, position)
        if segment is None:
            raise ValueError(f"fieldPath {field_path!r} is not a JSON path at {position}")
        name, key, index = segment.groups()
        if name is not None:
            out = child_path(out, name)
        else:
            out = f"{out}[{key if key is not None else index}]"
        position = segment.end()
    return out
