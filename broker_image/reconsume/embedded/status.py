"""``reconsume status``: what a running ``reconsume up`` has, from its state file.

``reconsume up`` rewrites ``<data>/state.json`` after every pass (every 2 s by default): the
clusters and their processes, each Topic's and ConsumerGroup's last reconcile (ready, reason,
retry and dead-letter depths, as the operator puts them in ``status``) and each
DeadLetterJob's last run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from reconsume.embedded.environment import STATE_FILE
from reconsume.errors import InvalidArgumentError


def read_state(data_dir: Path) -> dict[str, Any] | None:
    path = data_dir / STATE_FILE
    if not path.exists():
        return None
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except ValueError as exc:  # written atomically by reconsume up; someone else's file
        raise InvalidArgumentError(f"{path} is not a state file of reconsume up: {exc}") from None
    return state


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _age(then: float | None) -> str:
    if then is None:
        return "never"
    seconds = max(0, int(time.time() - then))
    return f"{seconds} s ago" if seconds < 120 else f"{seconds // 60} min ago"


def _namespaced(state: dict[str, Any]) -> bool:
    """Whether anything lives outside ``default``: then every table gets a NAMESPACE column
    (as ``kubectl get -A`` has), since the same name may be in two namespaces."""
    items = [*(state.get("clusters") or []), *(state.get("objects") or []),
             *(state.get("jobs") or [])]  # fmt: skip
    return any(item.get("namespace", "default") != "default" for item in items)


def _table(
    title: str, columns: tuple[str, ...], namespaced: bool, right: tuple[str, ...] = ()
) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("NAMESPACE", *columns) if namespaced else columns:
        table.add_column(column, justify="right" if column in right else "left")
    return table


def _brokers(cluster: dict[str, Any]) -> str:
    """Each broker process with its address, ``(down)`` when not running, else its gRPC
    endpoint (RocketMQ 5's clients); with replicas one line each, marked ``master`` (its
    broker's lease holder) or ``replica``."""
    if cluster.get("external"):
        return "external"
    replicated = int(cluster.get("replicas") or 1) > 1
    shown = []
    for broker in cluster.get("brokers") or []:
        tags = ["master" if broker.get("master") else "replica"] if replicated else []
        if not broker.get("running"):
            tags.append("down")
        elif broker.get("grpc"):
            tags.append(f"gRPC {broker['grpc']}")
        shown.append(
            f"{broker['name']} {broker['address']}" + (f" ({', '.join(tags)})" if tags else "")
        )
    return ("\n" if replicated else ", ").join(shown)


def render(state: dict[str, Any], out: TextIO) -> None:
    console = Console(file=out, width=120, highlight=False, soft_wrap=False)
    namespaced = _namespaced(state)

    def cells(item: dict[str, Any], *values: str) -> list[str]:
        return [str(item.get("namespace", "default")), *values] if namespaced else list(values)

    running = bool(state.get("running")) and alive(int(state.get("pid") or 0))
    header = "running" if running else "not running (last state shown)"
    console.print(
        f"reconsume up {header}, pid {state.get('pid')}, data {state.get('dataDir')}, "
        f"synced {_age(state.get('syncedAt'))}"
    )
    clusters = _table("Clusters", ("CLUSTER", "NAME SERVER", "BROKERS", "PROBLEM"), namespaced)
    for cluster in state.get("clusters") or []:
        clusters.add_row(*cells(cluster, cluster["name"], str(cluster.get("nameServer")),
                                _brokers(cluster), cluster.get("problem") or ""))  # fmt: skip
    console.print(clusters)
    groups = _table("Consumer groups", ("NAME", "GROUP", "CLUSTER", "READY", "RETRY", "DLQ",
                    "MESSAGE"), namespaced, right=("RETRY", "DLQ"))  # fmt: skip
    topics = _table("Topics", ("NAME", "TOPIC", "CLUSTER", "READY", "DEPTH", "MESSAGE"),
                    namespaced, right=("DEPTH",))  # fmt: skip
    for item in state.get("objects") or []:
        status = item.get("status") or {}
        ready = "Deleting" if item.get("deleting") else ("True" if item.get("ready") else "False")
        message = "" if item.get("ready") else f"{item.get('reason')}: {item.get('message')}"
        if item["kind"] == "ConsumerGroup":
            groups.add_row(*cells(
                item, item["name"], str(status.get("groupName", "")),
                str(item.get("cluster") or ""), ready, str(status.get("retryDepth", "")),
                str(status.get("deadLetterDepth", "")), message,
            ))  # fmt: skip
        else:
            topics.add_row(*cells(
                item, item["name"], str(status.get("topicName", "")),
                str(item.get("cluster") or ""), ready, str(status.get("depth", "")), message,
            ))  # fmt: skip
    console.print(groups)
    console.print(topics)
    jobs = _table("Dead-letter jobs", ("NAME", "PHASE", "RUNS", "LAST RUN", "NEXT RUN", "COUNTS",
                  "MESSAGE"), namespaced)  # fmt: skip
    for job in state.get("jobs") or []:
        counts = ", ".join(f"{k} {v}" for k, v in (job.get("counts") or {}).items() if v)
        jobs.add_row(*cells(
            job, job["name"], job.get("phase", ""), str(job.get("runs", 0)),
            job.get("startTime") or "", job.get("nextRun") or "", counts,
            (job.get("message") or "").splitlines()[0] if job.get("message") else "",
        ))  # fmt: skip
    console.print(jobs)
    for problem in state.get("problems") or []:
        console.print(f"problem: {problem}")


def main(data_dir: Path, out: TextIO, *, as_json: bool = False) -> int:
    try:
        state = read_state(data_dir)
    except InvalidArgumentError as exc:
        print(f"reconsume status: {exc}", file=sys.stderr)
        return 1
    if state is None:
        print(f"reconsume status: no reconsume up has run with data directory {data_dir}",
              file=sys.stderr)  # fmt: skip
        return 1
    if as_json:
        print(json.dumps(state, indent=2), file=out)
    else:
        render(state, out)
    return 0
