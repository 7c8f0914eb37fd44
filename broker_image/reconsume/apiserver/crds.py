"""The CustomResourceDefinitions of reconsume's kinds, read from this package's copies of
``crds/*.yaml`` (a test proves they are byte-identical), so that embedded mode validates
manifests exactly as the API server would, without one."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

API_VERSION = "reconsume.io/v1alpha1"
KINDS = ("BrokerCluster", "ConsumerGroup", "Topic", "DeadLetterJob", "User")

_FILES = {
    "BrokerCluster": "brokerclusters.reconsume.io.yaml",
    "ConsumerGroup": "consumergroups.reconsume.io.yaml",
    "Topic": "topics.reconsume.io.yaml",
    "DeadLetterJob": "deadletterjobs.reconsume.io.yaml",
    "User": "users.reconsume.io.yaml",
}


def _file(kind: str) -> str:
    try:
        return _FILES[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}: expected one of {', '.join(KINDS)}") from None


@functools.cache
def _load(kind: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath("crds", _file(kind)).read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    if not isinstance(document, dict) or document["spec"]["names"]["kind"] != kind:
        raise ValueError(f"{_file(kind)} is not the CustomResourceDefinition of {kind}")
    return document


def crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition of ``kind`` (loaded once; do not modify it)."""
    return _load(kind)


def root_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of the single version ``kind`` serves."""
    (version,) = crd(kind)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def plural(kind: str) -> str:
    """The resource name of ``kind`` in URLs and kubectl (``consumergroups``)."""
    name: str = crd(kind)["spec"]["names"]["plural"]
    return name


def short_names(kind: str) -> tuple[str, ...]:
    """The short names kubectl accepts for ``kind`` (``rcg``)."""
    return tuple(crd(kind)["spec"]["names"].get("shortNames", ()))
