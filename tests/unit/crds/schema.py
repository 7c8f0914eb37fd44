"""The CRDs of ``crds/`` and the schema checks of :mod:`reconsume.apiserver.schema`, in the shape
the CRD, example, operator and topology tests use: paths with a leading dot
(``.spec.retry.maxTimes``) and problems as strings. CEL rules are not evaluated here; the
whole API-server check is :func:`reconsume.apiserver.validation.check`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import yaml

from reconsume.apiserver import schema as local_schema
from reconsume.apiserver.crds import KINDS

__all__ = [
    "CRD_DIR",
    "EXAMPLES_DIR",
    "KINDS",
    "ROOT",
    "Schema",
    "defaulted",
    "load_crds",
    "root_schema",
    "validate",
    "walk",
]

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "crds"
EXAMPLES_DIR = ROOT / "examples"

Schema = dict[str, Any]
defaulted = local_schema.defaulted


def load_crds() -> dict[str, dict[str, Any]]:
    """Every CRD file of ``crds/`` (not the package's copies), by kind."""
    crds = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        crds[document["spec"]["names"]["kind"]] = document
    return crds


def root_schema(crd: dict[str, Any]) -> Schema:
    (version,) = crd["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def _dotted(path: str) -> str:
    return path if not path or path[0] in "[{" else f".{path}"


def walk(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every schema node with its path (``.spec.retry.policy``, ``.status.brokers[*]``)."""
    for found, node in local_schema.walk(schema, path.lstrip(".")):
        yield _dotted(found), cast(Schema, node)


def validate(schema: Schema, value: Any, path: str = "") -> list[str]:
    """Problems of ``value`` against ``schema`` (``.spec.extra: unknown field``); [] when
    valid."""
    return [
        f"{_dotted(p.path)}: {p.message}"
        for p in local_schema.validate(schema, value, path.lstrip("."))
    ]
