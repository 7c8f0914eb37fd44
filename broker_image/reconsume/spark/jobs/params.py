"""The parameters of a dead-letter job: ``reconsume dlq drain|reprocess|purge`` options."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from reconsume.errors import InvalidArgumentError
from reconsume.message.names import validate_group, validate_topic

_SEPARATORS = re.compile(r"[;,\s]+")


class Action(Enum):
    DRAIN = "Drain"
    REPROCESS = "Reprocess"
    PURGE = "Purge"

    @classmethod
    def parse(cls, text: str) -> Action:
        for action in cls:
            if action.value.lower() == text.lower():
                return action
        raise InvalidArgumentError(f"action {text!r} is not drain, reprocess or purge")


FORMATS = ("parquet", "json")


@dataclass(frozen=True, slots=True)
class JobParams:
    action: Action
    name_servers: tuple[str, ...]
    group: str
    job: str
    filter: str | None = None
    sink_format: str = "parquet"
    sink_path: str | None = None
    target_topic: str | None = None
    max_messages: int | None = None
    rate_per_second: int | None = None
    dry_run: bool = False
    master: str = "local[*]"
    conf: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    termination_log: str | None = None
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        validate_group(self.group)
        if not self.name_servers:
            raise InvalidArgumentError("--name-server is required")
        if self.action is Action.DRAIN and not self.sink_path:
            raise InvalidArgumentError("drain needs --path, where the archive is written")
        if self.action is not Action.DRAIN and self.sink_path:
            raise InvalidArgumentError("--path applies only to drain")
        if self.action is not Action.REPROCESS and self.target_topic:
            raise InvalidArgumentError("--target-topic applies only to reprocess")
        if self.target_topic:
            validate_topic(self.target_topic)
        if self.sink_format not in FORMATS:
            raise InvalidArgumentError(f"--format must be parquet or json, not {self.sink_format}")
        for name, value in (("--max-messages", self.max_messages),
                            ("--rate-per-second", self.rate_per_second)):  # fmt: skip
            if value is not None and value < 1:
                raise InvalidArgumentError(f"{name} must be at least 1, not {value}")
        if self.timeout_s <= 0:
            raise InvalidArgumentError(f"--timeout must be positive, not {self.timeout_s}")
        if self.filter is not None and not self.filter.strip():
            raise InvalidArgumentError("--filter is empty")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``reconsume dlq``."""
    parser.add_argument("action", choices=["drain", "reprocess", "purge"])
    parser.add_argument("--name-server", required=True, help="name server(s), host:port[;...]")
    parser.add_argument("--group", required=True, help="consumer group whose %%DLQ%% to handle")
    parser.add_argument("--job", help="the job's identity in the ledger (default <action>-<group>)")
    parser.add_argument("--filter", help="Spark SQL condition a dead letter must meet")
    parser.add_argument("--format", default="parquet", choices=FORMATS, help="drain: file format")
    parser.add_argument("--path", help="drain: directory URI the archive is written to")
    parser.add_argument("--target-topic", help="reprocess: topic to send to (default: origin)")
    parser.add_argument("--max-messages", type=int, help="most dead letters one run reads")
    parser.add_argument("--rate-per-second", type=int, help="most messages sent per second")
    parser.add_argument("--dry-run", action="store_true", help="count only; change nothing")
    parser.add_argument("--master", default="local[*]", help="Spark master URL")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark configuration (repeatable)")  # fmt: skip
    parser.add_argument("--termination-log", help="file the result JSON is also written to")
    parser.add_argument("--timeout", type=float, default=10.0, help="broker request timeout (s)")


def from_args(args: argparse.Namespace) -> JobParams:
    action = Action.parse(args.action)
    conf: list[tuple[str, str]] = []
    for item in args.conf:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--conf {item!r} is not KEY=VALUE")
        conf.append((key.strip(), value))
    return JobParams(
        action=action,
        name_servers=split_servers(args.name_server),
        group=args.group,
        job=args.job or f"{action.value.lower()}-{args.group}",
        filter=args.filter,
        sink_format=args.format,
        sink_path=args.path,
        target_topic=args.target_topic,
        max_messages=args.max_messages,
        rate_per_second=args.rate_per_second,
        dry_run=args.dry_run,
        master=args.master,
        conf=tuple(conf),
        termination_log=args.termination_log,
        timeout_s=args.timeout,
    )


def split_servers(text: str) -> tuple[str, ...]:
    return tuple(s for s in _SEPARATORS.split(text or "") if s)


def parse(argv: Sequence[str]) -> JobParams:
    parser = argparse.ArgumentParser(prog="reconsume dlq")
    add_arguments(parser)
    return from_args(parser.parse_args(argv))
