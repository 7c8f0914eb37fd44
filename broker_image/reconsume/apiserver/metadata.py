"""An object's ``metadata`` as the API server checks it outside the CRD's schema: the fields
ObjectMeta has and their types, the name (a DNS-1123 subdomain), the namespace (a DNS-1123
label), label keys and values, annotation keys and size, and finalizer names. Messages are
the API server's.

Unlike the API server, a ``generateName`` without a ``name`` is refused: nothing generates
names in embedded mode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from .schema import Problem, type_name

_FIELDS: Final = {
    "name": "string",
    "generateName": "string",
    "namespace": "string",
    "selfLink": "string",
    "uid": "string",
    "resourceVersion": "string",
    "generation": "integer",
    "creationTimestamp": "string",
    "deletionTimestamp": "string",
    "deletionGracePeriodSeconds": "integer",
    "labels": "object",
    "annotations": "object",
    "ownerReferences": "array",
    "finalizers": "array",
    "managedFields": "array",
}
"""ObjectMeta's fields and their JSON types (``creationTimestamp`` may also be null)."""

DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = f"({QUALIFIED_NAME})?"
ANNOTATIONS_MAX_BYTES = 256 * 1024

_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{DNS1123_SUBDOMAIN}')"
)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{DNS1123_LABEL}')"
)
_NAME_PART_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    f"used for validation is '{QUALIFIED_NAME}')"
)
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '{LABEL_VALUE}')"
)


def _invalid(value: str, why: str) -> str:
    return f'Invalid value: "{value}": {why}'


def subdomain_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (the name of most objects)."""
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not re.fullmatch(DNS1123_SUBDOMAIN, value):
        problems.append(_SUBDOMAIN_MESSAGE)
    return problems


def label_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 label (a namespace's name)."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not re.fullmatch(DNS1123_LABEL, value):
        problems.append(_LABEL_MESSAGE)
    return problems


def qualified_name_problems(value: str) -> list[str]:
    """Why ``value`` is not a qualified name (``example.com/my-name``): a label key, an
    annotation key, a finalizer."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character, with an optional DNS "
            "subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    problems = []
    if len(parts) == 2:
        if not parts[0]:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {why}" for why in subdomain_problems(parts[0])]
    name = parts[-1]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if name and not re.fullmatch(QUALIFIED_NAME, name):
        problems.append(_NAME_PART_MESSAGE)
    return problems


def decoding_problems(metadata: object) -> list[Problem]:
    """Fields ObjectMeta does not have, and fields of the wrong type: what keeps the API
    server from decoding ``metadata`` at all (it then checks nothing else)."""
    if not isinstance(metadata, Mapping):
        return []  # absent, or not an object: the schema's checks report it
    problems = []
    for key, value in metadata.items():
        expected = _FIELDS.get(key)
        if expected is None:
            problems.append(Problem(f"metadata.{key}", "unknown field"))
        elif type_name(value) != expected and not (key == "creationTimestamp" and value is None):
            why = f'Invalid value: "{type_name(value)}": must be of type {expected}'
            problems.append(Problem(f"metadata.{key}", why))
    return problems


def check_metadata(metadata: object) -> tuple[list[Problem], bool]:
    """The problems of an object's ``metadata`` that decodes (see :func:`decoding_problems`),
    and whether one is a missing name (after which the API server does not evaluate the CEL
    rules). Its schema (``metadata.name``'s bounds in a CRD) is checked with the rest of the
    object."""
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, Mapping):
        return [], False  # the schema's type check reports it
    name = metadata.get("name")
    if not name:
        why = "name or generateName is required"
        if metadata.get("generateName"):
            why = "name is required (generateName needs an API server to generate it)"
        return [Problem("metadata.name", f"Required value: {why}")], True
    problems = [Problem("metadata.name", _invalid(name, why)) for why in subdomain_problems(name)]
    namespace = metadata.get("namespace")
    if namespace:
        problems += [
            Problem("metadata.namespace", _invalid(namespace, why))
            for why in label_problems(namespace)
        ]
    problems += _labels(metadata.get("labels") or {})
    problems += _annotations(metadata.get("annotations") or {})
    for finalizer in metadata.get("finalizers") or ():
        problems += _string_problems("metadata.finalizers", finalizer, qualified_name_problems)
    return problems, False


def _string_problems(path: str, value: object, rule: Any) -> list[Problem]:
    if not isinstance(value, str):
        return [Problem(path, f'Invalid value: "{type_name(value)}": must be of type string')]
    return [Problem(path, _invalid(value, why)) for why in rule(value)]


def _labels(labels: Mapping[str, Any]) -> list[Problem]:
    problems = []
    for key, value in labels.items():
        problems += _string_problems("metadata.labels", key, qualified_name_problems)
        problems += _string_problems("metadata.labels", value, _label_value_problems)
    return problems


def _label_value_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not re.fullmatch(LABEL_VALUE, value):
        problems.append(_LABEL_VALUE_MESSAGE)
    return problems


def _annotations(annotations: Mapping[str, Any]) -> list[Problem]:
    problems = []
    size = 0
    for key, value in annotations.items():
        problems += _string_problems(
            "metadata.annotations", key, lambda k: qualified_name_problems(k.lower())
        )
        problems += _string_problems("metadata.annotations", value, lambda _: [])
        size += len(str(key).encode()) + len(str(value).encode())
    if size > ANNOTATIONS_MAX_BYTES:
        problems.append(
            Problem(
                "metadata.annotations",
                f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes",
            )
        )
    return problems
