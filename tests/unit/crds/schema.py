"""A small validator for the subset of OpenAPI v3 the CRDs use (types, enums, bounds, lengths,
patterns, required, unknown fields) and structural defaulting, so examples and defaults are
checked without an API server. CEL rules are not evaluated here (tests/k8s does that)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "crds"
EXAMPLES_DIR = ROOT / "examples"
KINDS = ("BrokerCluster", "ConsumerGroup", "Topic", "DeadLetterJob")

Schema = dict[str, Any]


def load_crds() -> dict[str, dict[str, Any]]:
    """Every CRD file, by kind."""
    crds = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        crds[document["spec"]["names"]["kind"]] = document
    return crds


def root_schema(crd: dict[str, Any]) -> Schema:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def walk(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every schema node with its path (``.spec.retry.policy``, ``.status.brokers[*]``)."""
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{*}}")


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _type_ok(schema: Schema, value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    expected = schema.get("type")
    if expected is None:
        return True
    if value is None:
        return bool(schema.get("nullable"))
    if isinstance(value, bool) and expected != "boolean":
        return False
    return isinstance(value, _TYPES[expected])


def validate(schema: Schema, value: Any, path: str = "") -> list[str]:
    """Problems of ``value`` against ``schema``; [] when valid. Unknown fields are problems
    (what ``kubectl apply --validate=strict`` reports)."""
    if not _type_ok(schema, value):
        return [f"{path}: expected {schema.get('type')}, got {value!r}"]
    if value is None:
        return []
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, str) and schema.get("type") == "string":
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: shorter than {schema['minLength']}")
        if len(value) > schema.get("maxLength", len(value)):
            problems.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", 1e9):
            problems.append(f"{path}: {len(value)} items")
        for index, item in enumerate(value):
            problems += validate(schema["items"], item, f"{path}[{index}]")
    if isinstance(value, dict) and schema.get("type") == "object":
        problems += _validate_object(schema, value, path)
    return problems


def _validate_object(schema: Schema, value: dict[str, Any], path: str) -> list[str]:
    problems = [
        f"{path}.{name}: required" for name in schema.get("required", ()) if name not in value
    ]
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if len(value) > schema.get("maxProperties", 1e9):
        problems.append(f"{path}: more than {schema['maxProperties']} properties")
    for name, item in value.items():
        if name in properties:
            problems += validate(properties[name], item, f"{path}.{name}")
        elif isinstance(extra, dict):
            problems += validate(extra, item, f"{path}.{name}")
        elif path == ".metadata":
            continue  # the API server's own metadata fields
        else:
            problems.append(f"{path}.{name}: unknown field")
    return problems


def defaulted(schema: Schema, value: Any) -> Any:
    """``value`` with the schema's defaults filled in, as the API server defaults."""
    value = copy.deepcopy(value)
    _default(schema, value)
    return value


def _default(schema: Schema, value: Any) -> None:
    if isinstance(value, dict) and schema.get("type") == "object":
        for name, child in (schema.get("properties") or {}).items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                _default(child, value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)
