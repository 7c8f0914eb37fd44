"""The "RocketMQ 5 clients (gRPC) side by side with Apache RocketMQ 5.3.3 broker + proxy"
section of bench/RESULTS.md (see ``bench.compare_client5``, which writes it to
``OUT/compare_client5.md``)."""

from __future__ import annotations

from typing import Any

from bench.common import machine_sentence, markdown_table
from bench.rocketmq_report import _get, _ms, _rate, _ratio, _reconsume_version
from bench.rocketmq_servers import display

HEADER = ["", "reconsume", "Apache RocketMQ (broker + proxy)", "reconsume / RocketMQ"]
THROUGHPUT = (
    ("produce, 1 thread", "produce-1"),
    ("produce, 8 threads", "produce-8"),
    ("consume, simple consumer (receive 32, ack each)", "consume-simple"),
    ("consume, push consumer", "consume-push"),
)
CPU_CASES = (
    ("produce, 1 thread", "produce-1", "sent_total"),
    ("produce, 8 threads", "produce-8", "sent_total"),
    ("consume, simple consumer", "consume-simple", "messages"),
    ("consume, push consumer", "consume-push", "messages"),
)
"""(label, case, the result's count of the messages the servers handled in the command)."""
THROUGHPUT_GOAL = 1.0
"""reconsume / RocketMQ msg/s the issue asks for, at least."""
LATENESS_GOAL_MS = 5.0
"""Redelivery lateness p99 the issue asks for, at most."""


def _cases(document: dict[str, Any], system: str) -> dict[str, Any] | None:
    for entry in document.get("runs", []):
        if entry["system"] == system:
            cases: dict[str, Any] = entry["cases"]
            return cases
    return None


def _per_message(cases: dict[str, Any] | None, case: str, key: str, count: str) -> float | None:
    """CPU seconds ``key`` over the whole command per message it handled, in µs."""
    cpu, messages = _get(cases, case, key), _get(cases, case, count)
    return None if cpu is None or not messages else cpu / messages * 1e6


def _errors(cases: dict[str, Any] | None, case: str, *keys: str) -> str:
    values = [_get(cases, case, key) for key in keys]
    if all(value is None for value in values):
        return "-"
    return f"{sum(value or 0 for value in values):,.0f}"


def _lateness_ratio(ours: float | None, theirs: float | None) -> str:
    """reconsume / RocketMQ of a lateness: "-" unless both are above zero (a lateness may be
    slightly negative), "< 0.01" below that."""
    if ours is not None and theirs is not None and 0 < ours < theirs / 100:
        return "< 0.01"
    return _ratio(ours, theirs)


def figures(document: dict[str, Any]) -> list[str]:
    """The main table: throughput, send latency, redelivery lateness."""
    ours, theirs = _cases(document, "reconsume"), _cases(document, "rocketmq")
    rows: list[list[str]] = []
    for label, case in THROUGHPUT:
        a, b = _get(ours, case, "msgs_per_s"), _get(theirs, case, "msgs_per_s")
        rows.append([f"**{label}: msg/s**", _rate(a), _rate(b), f"**{_ratio(a, b)}**"])
        if case.startswith("produce"):
            for q in ("p50", "p99"):
                a, b = _get(ours, case, f"latency_{q}_ms"), _get(theirs, case, f"latency_{q}_ms")
                rows.append([f"{label}: send latency {q} ms", _ms(a), _ms(b), _ratio(a, b)])
    for q in ("p50", "p99", "max"):
        a, b = (_get(c, "redelivery", "lateness_ms", q) for c in (ours, theirs))
        label = f"redelivery lateness {q} ms"
        if q == "p99":
            rows.append([f"**{label}**", _ms(a), _ms(b), f"**{_lateness_ratio(a, b)}**"])
        else:
            rows.append([label, _ms(a), _ms(b), _lateness_ratio(a, b)])
    for q in ("p99", "max"):
        a, b = (_get(c, "redelivery", "warmup_lateness_ms", q) for c in (ours, theirs))
        label = f"redelivery lateness {q} ms, warm-up messages"
        rows.append([label, _ms(a), _ms(b), _lateness_ratio(a, b)])
    for q in ("p50", "p99"):
        a, b = (_get(c, "redelivery", "first_delivery_ms", q) for c in (ours, theirs))
        rows.append([f"redelivery: send to first receipt {q} ms", _ms(a), _ms(b), _ratio(a, b)])
    errors = (
        ("produce: failed sends (1 thread + 8 threads)", ("produce-1", "produce-8"), ("errors",)),
        ("consume: failed receives and acks", ("consume-simple",),
         ("receive_errors", "ack_errors")),
        ("redelivery: failed sends, receives, acks; 3rd+ deliveries",
         ("redelivery",), ("send_errors", "receive_errors", "ack_errors", "extra_deliveries")),
    )  # fmt: skip
    for label, names, keys in errors:
        counts = []
        for cases in (ours, theirs):
            values = [_errors(cases, name, *keys) for name in names]
            counts.append(" + ".join(values))
        rows.append([label, *counts, ""])
    return markdown_table(HEADER, rows)


def cpu_table(document: dict[str, Any]) -> list[str]:
    """Server CPU time per message: reconsume's broker; RocketMQ's broker and proxy."""
    ours, theirs = _cases(document, "reconsume"), _cases(document, "rocketmq")
    rows: list[list[str]] = []
    for label, case, count in CPU_CASES:
        a = _per_message(ours, case, "server_cpu_seconds", count)
        broker = _per_message(theirs, case, "broker_cpu_seconds", count)
        proxy = _per_message(theirs, case, "proxy_cpu_seconds", count)
        b = _per_message(theirs, case, "server_cpu_seconds", count)
        rows.append([label, _ms(a, 0), _ms(broker, 0), _ms(proxy, 0), _ms(b, 0), _ratio(a, b)])
    header = [
        "server CPU µs/msg",
        "reconsume broker",
        "RocketMQ broker",
        "RocketMQ proxy",
        "RocketMQ broker + proxy",
        "reconsume / RocketMQ",
    ]
    return markdown_table(header, rows)


def goals(document: dict[str, Any]) -> list[str]:
    """The issue's goals: msg/s at least RocketMQ's, redelivery lateness p99 at most 5 ms."""
    ours, theirs = _cases(document, "reconsume"), _cases(document, "rocketmq")
    rows: list[list[str]] = []
    for label, case in THROUGHPUT:
        a, b = _get(ours, case, "msgs_per_s"), _get(theirs, case, "msgs_per_s")
        ratio = None if a is None or b is None or b <= 0 else a / b
        verdict = "-" if ratio is None else "met" if ratio >= THROUGHPUT_GOAL else "**missed**"
        shown = "-" if ratio is None else f"{ratio:.2f}"
        goal = f"{label}: msg/s, reconsume / RocketMQ ≥ {THROUGHPUT_GOAL:.1f}"
        rows.append([goal, shown, verdict])
    p99 = _get(ours, "redelivery", "lateness_ms", "p99")
    verdict = "-" if p99 is None else "met" if p99 <= LATENESS_GOAL_MS else "**missed**"
    rows.append([f"redelivery lateness p99 ≤ {LATENESS_GOAL_MS:g} ms", f"{_ms(p99)} ms", verdict])
    return markdown_table(["goal (the issue)", "reconsume", ""], rows)


def _versions(document: dict[str, Any]) -> list[str]:
    v = document.get("versions", {})
    return markdown_table(
        ["", ""],
        [
            [
                "Apache RocketMQ (name server, broker; proxy)",
                f"{v.get('rocketmq', '?')}; {v.get('proxy', '?')} (Maven Central)",
            ],
            ["Client of the load generator", f"rocketmq-client-java {v.get('client', '?')}"],
            ["Java", f"{v.get('java', '?')}; {v.get('java_runtime', '')}"],
            ["reconsume", _reconsume_version()],
        ],
    )


def conditions(document: dict[str, Any]) -> list[str]:
    order = ["setup", *(c["case"] for c in document["settings"]["commands"])]
    rows = []
    for entry in document.get("runs", []):
        cases = entry["cases"]
        loads = ", ".join(
            f"{case} {cases[case]['loadavg_start'].split()[0]}" for case in order if case in cases
        )
        rows.append(
            [
                entry["system"],
                f"{entry['start_seconds']:.1f}",
                f"{entry['stop_seconds']:.1f}",
                loads,
            ]
        )
    header = [
        "system",
        "start s",
        "stop s",
        "1-min load average at the start of each case",
    ]
    return markdown_table(header, rows)


def commands(document: dict[str, Any]) -> list[str]:
    s = document["settings"]
    lines = [
        "Built by (`make bench-java`):",
        "",
        "```",
        s["mvn"],
        "```",
        "",
        "Apache RocketMQ (`DIR`: the run's data directory, removed afterwards; logs under "
        "`DIR/logs` and `DIR/proxy/logs` through `user.home`; ports picked free for each run, "
        "shown here as 9876, 10911, 8081 and 8080):",
        "",
        "```",
        *s["rocketmq_commands"],
        "```",
        "",
        "broker.conf:",
        "",
        "```properties",
        s["broker_conf"].rstrip(),
        "```",
        "",
        "rmq-proxy.json (cluster mode):",
        "",
        "```json",
        s["proxy_conf"].rstrip(),
        "```",
        "",
        "Setup (`mqadmin`: `org.apache.rocketmq.tools.command.MQAdminStartup` from the servers' "
        "jars; each returns once the proxy routes the topic):",
        "",
        "```",
        *s["rocketmq_setup"],
        "```",
        "",
        "reconsume (`bench/servers.py`):",
        "",
        "```",
        *s["reconsume_commands"],
        "```",
        "",
        f"Setup: {s['reconsume_setup']}.",
        "",
        "The load generator, against each system in turn, one JVM per command (`ENDPOINT`: that "
        "system's gRPC endpoint; `WARMUP_SENT`: the number of messages the warm-up sent):",
        "",
        "```",
        f'loadgen5() {{ {s["loadgen_prefix"]} "$@"; }}',
    ]
    for case in s["commands"]:
        name, _, rest = case["args"].partition(" ")
        lines.append(f"loadgen5 {name} --endpoint ENDPOINT {rest}")
    return [*lines, "```"]


def render_client5(document: dict[str, Any]) -> list[str]:
    if document.get("skipped"):
        first, _, rest = str(document["skipped"]).partition("\n")
        return [f"**Skipped**: {first}", *(["", "```", rest, "```"] if rest else [])]
    sizes = document["settings"]["sizes"]
    machine = document.get("machine", {})
    lines = [
        f"Run {document.get('started', '?')} to {document.get('finished', '?')} (load average "
        f"{document.get('loadavg_start', '?')} at its start, {document.get('loadavg_end', '?')} "
        "at its end):",
        "",
        "```",
        display(str(document.get("command", "?")).split(" ")),
        "```",
        "",
        machine_sentence(machine),
        "",
        "One Java load generator (`bench/java/loadgen5`, Apache RocketMQ's 5.x client "
        f"rocketmq-client-java {document['versions'].get('client', '?')}, plaintext gRPC, one "
        "JVM per command) against reconsume's broker with `--grpc-listen` (its name server "
        "beside it), then against Apache RocketMQ's name server, broker and proxy in cluster "
        "mode, one system at a time on this machine. Both: one broker, Async flush, 64 MiB "
        f"commit-log files; topics of {document['settings']['queues']} queues (Apache "
        "RocketMQ: `message.type=NORMAL`) and the consumer groups created before the run. "
        f"First {sizes['warmup_seconds']:g} s of unmeasured sends from 8 threads, drained by a "
        "simple consumer (the JVMs compile their hot paths). Bold: the figures the comparison is "
        "about; *reconsume / RocketMQ* above 1 means reconsume is faster for msg/s, slower for "
        "latency and lateness, costlier for CPU.",
        "",
        f"* produce: sync `send()` of 1 KiB bodies, 1 thread or 8 threads sharing one producer, "
        f"{sizes['produce_seconds']:g} s measured after {sizes['produce_warmup_seconds']:g} s "
        "of the same unmeasured; latency of each send as the thread sees it.",
        f"* consume: {sizes['consume_messages']:,} messages of 1 KiB stored by async sends "
        f"(unmeasured), drained first by a simple consumer of a new group ({sizes['receivers']} "
        "threads sharing it, each `receive(32, 30 s)` then `ackAsync` of every message of the "
        "batch, all awaited, before its next receive; msg/s from the first receipt to the last "
        "ack), then by a push consumer of another new group (the client's defaults: 20 "
        "consumption threads, 1,024 messages cached; msg/s from the first listener call to the "
        "last).",
        f"* redelivery: {sizes['redelivery_rate']:g} messages/s for "
        f"{sizes['redelivery_warmup_seconds'] + sizes['redelivery_seconds']:g} s; a simple "
        f"consumer of {sizes['receivers']} threads, each receiving again as soon as it has "
        "handled a batch, so a long poll is always waiting, with invisible duration "
        f"{sizes['invisible_ms']:,} ms (Apache RocketMQ's proxy: `minInvisibleTimeMillsForRecv` "
        "lowered to it from 10 s); a message's first delivery is not acked, its second is. "
        "Lateness = second receipt - (first receipt + invisible duration), both taken as the "
        "receive returns in the load generator (the server starts the invisible time when it "
        "hands the message out, before the first receipt, so a lateness below zero is possible, "
        "by up to the time from hand-out to receipt). The first "
        f"{sizes['redelivery_warmup_seconds']:g} s of messages are summarized apart (warm-up).",
        "",
        *_versions(document),
        "",
        *figures(document),
        "",
        "Server CPU time over the whole command (its unmeasured seconds too) per message, all "
        "of each process's threads (for the JVMs also JIT and GC); each name server left out:",
        "",
        *cpu_table(document),
        "",
        *goals(document),
        "",
        "Each figure is one run on a machine shared with other work, where single timings move "
        "by ±30 % (bench/CHANGES.md) and more under load. The load averages at the start of "
        "each case, and the servers' start and stop times:",
        "",
        *conditions(document),
        "",
        "#### How it was run",
        "",
        *commands(document),
    ]
    return lines
