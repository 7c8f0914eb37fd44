"""Manifests of reconsume's kinds checked as the API server checks them on a create or an
update, without one.

In the API server's order: the envelope (``apiVersion`` ``reconsume.io/v1alpha1`` and one of the
four kinds; nothing else is checked when they are wrong), ``metadata`` (see
:mod:`reconsume.apiserver.metadata`), defaults applied
(:func:`~reconsume.apiserver.schema.defaulted`), the CRD's schema
(:mod:`reconsume.apiserver.schema`), then the CEL rules (:mod:`reconsume.apiserver.rules`). Like
the API server, the CEL rules are not evaluated when an earlier problem is of a kind that bounds
their cost (a wrong type, a missing required field or name, a value outside an enum, a string,
list or map above its maximum size); the last problem then says that some rules were not
checked. Other schema problems (a bound, a pattern) do not stop the rules, so both are reported.

Where the result differs from the API server's (``fieldValidation=Strict``), on purpose:

- unknown fields are reported together with every other problem (the API server refuses the
  request on the first ones it finds, before validating), except in ``metadata``: fields
  ObjectMeta does not have or of the wrong type are reported alone, as there;
- ``status`` is validated when present (a create through the API server drops it; its
  status subresource validates it as here);
- ``metadata.generateName`` does not stand in for a name;
- on an update, nothing is ratcheted: the whole new object is validated, including fields
  that were already invalid in the old one and did not change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .cel import ABSENT
from .crds import API_VERSION, KINDS, root_schema
from .metadata import check_metadata, decoding_problems
from .rules import rule_problems
from .schema import Problem, defaulted, inspect

__all__ = ["NOT_CHECKED", "Problem", "check", "checked"]

NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)
"""The API server's last problem when an earlier one kept the CEL rules from running."""


def check(document: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """The problems the API server would find in ``document`` on a create, or on an update
    of ``old`` when given; [] when it would accept it."""
    return checked(document, old)[1]


def checked(
    document: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    """``document`` as the API server would store it (defaults applied), and its problems
    (see :func:`check`). The document is not modified."""
    problems = _envelope(document)
    if problems:
        return copy.deepcopy(dict(document)), problems
    schema = root_schema(document["kind"])
    value: dict[str, Any] = defaulted(schema, dict(document))
    problems = decoding_problems(value.get("metadata"))
    if problems:
        return value, problems
    problems, blocked = check_metadata(value.get("metadata"))
    report = inspect(schema, value)
    problems += report.problems
    before: Any = ABSENT
    if old is not None:
        problems += _update_problems(value, old)
        before = defaulted(schema, dict(old))
    if blocked or report.rules_blocked:
        problems.append(Problem("", NOT_CHECKED))
    else:
        problems += rule_problems(schema, value, before)
    return value, problems


def _envelope(document: Mapping[str, Any]) -> list[Problem]:
    problems = []
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if api_version != API_VERSION:
        problems.append(
            Problem("apiVersion", _unsupported(api_version, (API_VERSION,)))
            if api_version
            else Problem("apiVersion", f'Required value: must be "{API_VERSION}"')
        )
    if kind not in KINDS:
        problems.append(
            Problem("kind", _unsupported(kind, KINDS))
            if kind
            else Problem("kind", "Required value: one of " + ", ".join(f'"{k}"' for k in KINDS))
        )
    return problems


def _unsupported(value: object, supported: tuple[str, ...]) -> str:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return f"Unsupported value: {shown}: supported values: " + ", ".join(
        f'"{option}"' for option in supported
    )


def _update_problems(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Problem]:
    """What an update may not change: the kind, the name and the namespace (an absent
    namespace is whichever the object is applied to, as in a request's URL)."""
    problems = []
    for path in ("apiVersion", "kind", "metadata.name", "metadata.namespace"):
        now, before = _lookup(new, path), _lookup(old, path)
        if path == "metadata.namespace" and not (now and before):
            continue
        if now != before:
            problems.append(Problem(path, f'Invalid value: "{now}": field is immutable'))
    return problems


def _lookup(document: Mapping[str, Any], path: str) -> object:
    value: object = document
    for name in path.split("."):
        value = value.get(name) if isinstance(value, Mapping) else None
    return value
