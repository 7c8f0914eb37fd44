"""Manifests of embedded mode: YAML or JSON files, read and checked like ``kubectl apply -f``.

Each file may hold several documents (``---``) and ``kind: List`` objects. A document of one of
reconsume's kinds is checked against its CRD as the API server would (schema, defaults, CEL
rules; :mod:`reconsume.apiserver.validation`); any other kind is reported and left alone. Every
problem names the file (and document, when there are several), the object and the field::

    examples/consumergroup.yaml: ConsumerGroup orders-consumer: spec.retry.maxTimes: ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconsume.apiserver.crds import API_VERSION, KINDS
from reconsume.apiserver.validation import checked
from reconsume.embedded.cron import CronSchedule
from reconsume.errors import InvalidArgumentError

SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_NAMESPACE = "default"

Key = tuple[str, str, str]
"""An object's identity: (kind, namespace, name)."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where a document came from."""

    path: Path
    document: int = 0
    """Its index among the file's documents."""
    documents: int = 1

    def __str__(self) -> str:
        if self.documents > 1:
            return f"{self.path} (document {self.document + 1})"
        return str(self.path)


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object of reconsume's kinds, defaulted, and where it came from."""

    source: Source
    body: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"].get("namespace") or DEFAULT_NAMESPACE)

    @property
    def key(self) -> Key:
        return (self.kind, self.namespace, self.name)

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.body.get("spec") or {}

    def describe(self) -> str:
        namespace = "" if self.namespace == DEFAULT_NAMESPACE else f"{self.namespace}/"
        return f"{self.kind} {namespace}{self.name}"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a document was not accepted: its file, its object (when known) and the field."""

    source: Source | Path
    message: str
    object: str | None = None

    def __str__(self) -> str:
        where = str(self.source) if self.object is None else f"{self.source}: {self.object}"
        return f"{where}: {self.message}"


@dataclass(slots=True)
class Loaded:
    """What a set of paths holds."""

    manifests: list[Manifest] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Documents of other kinds (named), which embedded mode does not handle."""
    unreadable: set[Path] = field(default_factory=set)
    """Files that could not be read or parsed at all: their objects are unknown, so whatever
    they held before must be kept rather than deleted."""

    def by_key(self) -> dict[Key, Manifest]:
        return {m.key: m for m in self.manifests}


def manifest_files(paths: Iterable[Path], *, recursive: bool = False) -> list[Path]:
    """The files ``paths`` name: files as given, directories' ``*.yaml|*.yml|*.json`` (their
    subdirectories too when ``recursive``), sorted. A path that does not exist is an error."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            pattern = "**/*" if recursive else "*"
            files += sorted(p for p in path.glob(pattern) if p.is_file() and p.suffix in SUFFIXES)
        elif path.is_file():
            files.append(path)
        else:
            raise InvalidArgumentError(f"{path}: no such file or directory")
    return files


def _documents(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    expanded: list[Any] = []
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == "List":
            expanded += document.get("items") or []
        else:
            expanded.append(document)
    return expanded


def _title(document: Mapping[str, Any]) -> str | None:
    kind = document.get("kind")
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(kind, str):
        return None
    return f"{kind} {name}" if isinstance(name, str) and name else kind


def check_document(
    document: Any, source: Source, old: Mapping[str, Any] | None = None
) -> tuple[Manifest | None, list[Problem]]:
    """One document as a manifest, or the problems that keep it from being one. ``old`` is the
    object applied before under the same identity (transition rules, e.g. immutable names)."""
    if not isinstance(document, Mapping):
        return None, [Problem(source, f"expected an object, got {type(document).__name__}")]
    title = _title(document)
    defaulted, problems = checked(document, old)
    if problems:
        return None, [Problem(source, str(p), title) for p in problems]
    schedule = (defaulted.get("spec") or {}).get("schedule")
    if defaulted.get("kind") == "DeadLetterJob" and schedule:
        # The CRD's pattern admits schedules that can never run (``0 0 30 2 *``), which a
        # CronJob would never start either; here they are refused up front.
        try:
            CronSchedule.parse(str(schedule))
        except InvalidArgumentError as exc:
            return None, [Problem(source, f"spec.schedule: {exc}", title)]
    return Manifest(source, defaulted), []


def load(
    paths: Sequence[Path],
    *,
    recursive: bool = False,
    applied: Mapping[Key, Mapping[str, Any]] | None = None,
) -> Loaded:
    """Read and check every manifest under ``paths``; ``applied`` (the objects applied before,
    by identity) lets transition rules compare against the previous version."""
    loaded = Loaded()
    seen: dict[Key, Source] = {}
    applied = applied or {}
    for path in manifest_files(paths, recursive=recursive):
        try:
            documents = _documents(path)
        except (OSError, UnicodeDecodeError) as exc:
            loaded.problems.append(Problem(path, f"cannot be read: {exc}"))
            loaded.unreadable.add(path)
            continue
        except yaml.YAMLError as exc:
            loaded.problems.append(Problem(path, f"is not valid YAML: {_yaml_problem(exc)}"))
            loaded.unreadable.add(path)
            continue
        for index, document in enumerate(documents):
            source = Source(path, index, len(documents))
            if isinstance(document, Mapping) and not _ours(document):
                loaded.ignored.append(f"{source}: {_title(document) or 'an object'}")
                continue
            old = applied.get(_key_of(document)) if isinstance(document, Mapping) else None
            manifest, problems = check_document(document, source, old)
            loaded.problems += problems
            if manifest is None:
                continue
            if manifest.key in seen:
                loaded.problems.append(
                    Problem(source, f"also declared in {seen[manifest.key]}", manifest.describe())
                )
                continue
            seen[manifest.key] = source
            loaded.manifests.append(manifest)
    return loaded


def _ours(document: Mapping[str, Any]) -> bool:
    """Whether a document is meant for reconsume (its group, or one of its kinds without an
    apiVersion): those are checked; a Deployment or ConfigMap is not embedded mode's."""
    api_version = str(document.get("apiVersion") or "")
    if api_version.partition("/")[0] == API_VERSION.partition("/")[0]:
        return True
    return not api_version and document.get("kind") in KINDS


def _key_of(document: Mapping[str, Any]) -> Key:
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return (
        str(document.get("kind")),
        str(metadata.get("namespace") or DEFAULT_NAMESPACE),
        str(metadata.get("name")),
    )


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)
