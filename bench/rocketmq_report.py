"""The "reconsume vs Apache RocketMQ" section of bench/RESULTS.md (see
``bench.compare_rocketmq``)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from bench.common import machine_sentence, markdown_table
from bench.rocketmq_servers import display

Row = tuple[str, str, bool]
"""(label, case, higher is better)."""


def _reconsume_version() -> str:
    try:
        return metadata.version("reconsume")
    except metadata.PackageNotFoundError:
        return "?"


def _runs(result: dict[str, Any], flush_mode: str) -> dict[str, dict[str, Any]]:
    return {r["system"]: r["cases"] for r in result["runs"] if r["flush_mode"] == flush_mode}


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return "-"
    return f"{ours / theirs:.2f}"


def _get(cases: dict[str, Any] | None, case: str, *path: str) -> float | None:
    value: Any = (cases or {}).get(case)
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, int | float) else None


def _cpu_per_message(
    cases: dict[str, Any] | None, case: str, count: str, key: str = "broker_cpu_seconds"
) -> float | None:
    """A process's CPU time over the whole command (its unmeasured part too) per message: the
    broker's, or with ``key`` another's (``client_cpu_seconds``: the load generator's JVM)."""
    cpu, messages = _get(cases, case, key), _get(cases, case, count)
    return None if cpu is None or not messages else cpu / messages * 1e6


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ms(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _figures(result: dict[str, Any], flush_mode: str) -> list[str]:
    runs = _runs(result, flush_mode)
    ours, theirs = runs.get("reconsume"), runs.get("rocketmq")
    rows: list[list[str]] = []
    for label, case in (("produce, 1 thread", "produce-1"), ("produce, 8 threads", "produce-8")):
        a, b = _get(ours, case, "msgs_per_s"), _get(theirs, case, "msgs_per_s")
        rows.append([f"{label}: msg/s", _rate(a), _rate(b), _ratio(a, b)])
        for q in ("p50", "p99"):
            a, b = _get(ours, case, f"latency_{q}_ms"), _get(theirs, case, f"latency_{q}_ms")
            rows.append([f"{label}: send latency {q} ms", _ms(a), _ms(b), _ratio(a, b)])
    for label, case, count in (
        ("produce, 1 thread", "produce-1", "sent_total"),
        ("produce, 8 threads", "produce-8", "sent_total"),
        ("consume", "consume", "messages"),
    ):
        for who, key in (("broker", "broker_cpu_seconds"), ("client", "client_cpu_seconds")):
            a, b = (_cpu_per_message(cases, case, count, key) for cases in (ours, theirs))
            if a is not None or b is not None:
                rows.append([f"{label}: {who} CPU µs/msg", _ms(a, 0), _ms(b, 0), _ratio(a, b)])
    for label, case in (
        ("consume (push, drain a filled topic): msg/s", "consume"),
        ("retry path (fail once, succeed on redelivery): msg/s", "retry"),
    ):
        a, b = _get(ours, case, "msgs_per_s"), _get(theirs, case, "msgs_per_s")
        if a is not None or b is not None:
            rows.append([label, _rate(a), _rate(b), _ratio(a, b)])
    for path, label in (("level", "delay level"), ("timer", "TIMER_DELIVER_MS")):
        for q in ("p50", "p99", "max"):
            a, b = _get(ours, "lateness", path, q), _get(theirs, "lateness", path, q)
            if a is not None or b is not None:
                rows.append([f"lateness, {label}: {q} ms", _ms(a, 0), _ms(b, 0), _ratio(a, b)])
    return markdown_table(["", "reconsume", "Apache RocketMQ", "reconsume / RocketMQ"], rows)


def _versions(result: dict[str, Any]) -> list[str]:
    v = result.get("versions", {})
    return markdown_table(
        ["", ""],
        [
            ["Apache RocketMQ (name server, broker)", f"{v.get('rocketmq', '?')} (Maven Central)"],
            ["Client of the load generator", f"Apache RocketMQ client {v.get('client', '?')}"],
            ["Java", f"{v.get('java', '?')}; {v.get('java_runtime', '')}"],
            ["reconsume", _reconsume_version()],
        ],
    )


def _conditions(result: dict[str, Any]) -> list[str]:
    rows = []
    for entry in result["runs"]:
        cases = entry["cases"]
        order = [c["case"] for c in result["settings"]["commands"][entry["flush_mode"]]]
        loads = ", ".join(
            f"{case} {cases[case]['loadavg_start'].split()[0]}" for case in order if case in cases
        )
        rows.append(
            [
                entry["system"],
                entry["flush_mode"],
                f"{entry['start_seconds']:.1f}",
                f"{entry['stop_seconds']:.1f}",
                loads,
            ]
        )
    return markdown_table(
        ["system", "flush", "start s", "stop s", "1-min load average at the start of each case"],
        rows,
    )


def _commands(result: dict[str, Any]) -> list[str]:
    s = result["settings"]
    lines = [
        "Built by (`make bench-java`; `make bench` runs it first):",
        "",
        "```",
        s["mvn"],
        "```",
        "",
        "Apache RocketMQ (`DIR`: the run's data directory, removed afterwards; its logs go to "
        "`DIR/logs` through `user.home`; the ports are picked free for each run):",
        "",
        "```",
        s["namesrv_command"],
        s["broker_command"],
        "```",
        "",
    ]
    for mode, conf in s["broker_conf"].items():
        lines += [f"broker.conf ({mode} flush):", "", "```properties", conf.rstrip(), "```", ""]
    return [*lines, *_reconsume_and_loadgen_commands(s)]


def _reconsume_and_loadgen_commands(s: dict[str, Any]) -> list[str]:
    """reconsume's commands and the load generator's, as both reports end."""
    lines = ["reconsume (`bench/servers.py`):", "", "```", *s["reconsume_commands"], "```", ""]
    lines += [
        "The load generator, against each system in turn, one JVM per command (`NAMESRV`: that "
        "system's name server; `WARMUP_SENT`: the number of messages the warm-up sent):",
        "",
        "```",
        f'loadgen() {{ {s["loadgen_prefix"]} "$@"; }}',
    ]
    for mode, cases in s["commands"].items():
        lines.append(f"# {mode} flush")
        for case in cases:
            name, _, rest = case["args"].partition(" ")
            lines.append(f"loadgen {name} --namesrv NAMESRV {rest}")
    return [*lines, "```"]


def render_rocketmq(result: dict[str, Any]) -> list[str]:
    if result.get("skipped"):
        first, _, rest = str(result["skipped"]).partition("\n")
        return [f"**Skipped**: {first}", *(["", "```", rest, "```"] if rest else [])]
    sizes = result["settings"]["sizes"]
    lines = [
        "The same Java load generator (`bench/java/loadgen`, Apache RocketMQ's "
        f"{result['versions'].get('client', '?')} client, one JVM per command) against one "
        "reconsume name server and broker, then against one Apache RocketMQ name server and "
        "broker, one system at a time on this machine (loopback, same disk). Both brokers: one "
        "master, 64 MiB commit-log files, autoCreateTopic on, delay levels "
        f"`{result['settings']['delay_levels']}`, topics of 8 queues created before the run. "
        f"Before the measured commands each broker gets {sizes['warmup_seconds']:g} s of "
        "unmeasured sends from 8 threads, drained by a push consumer (the JVM compiles its hot "
        "paths). *reconsume / RocketMQ* above 1 means reconsume is faster for msg/s, slower "
        "for latency and lateness, costlier for CPU. *broker CPU µs/msg*: the broker "
        "process's CPU time (all its threads: for the JVM also JIT and GC) over the whole "
        "command, unmeasured seconds included, per message it handled in that time; *client "
        "CPU µs/msg* the same of the load generator's JVM (the same client against both: where "
        "it is near a core's worth, the case measures the client more than the broker).",
        "",
        f"* produce: sync `send()` of 1 KiB bodies, 1 thread or 8 threads sharing one "
        f"producer, {sizes['produce_seconds']:g} s measured after "
        f"{sizes['produce_warmup_seconds']:g} s of the same unmeasured; latency of each send "
        "as the thread sees it.",
        f"* consume: {sizes['consume_messages']:,} messages stored by batch sends (32), drained by "
        "one push consumer (a new group from the first offset, default settings: 20 threads, pull "
        "batch 32, consume batch 1); msg/s from the first receipt to the last.",
        f"* retry path: {sizes['retry_messages']:,} stored messages; the listener returns "
        "RECONSUME_LATER on a message's first delivery and CONSUME_SUCCESS on its redelivery, so "
        "each goes through the broker's send-back, delay level 3 (1 s) and `%RETRY%bench-retry` "
        "(created beforehand); msg/s = messages / (consumer start to the last success).",
        f"* lateness: {sizes['lateness_rate']:g} delayed messages/s for "
        f"{sizes['lateness_seconds']:g} s, alternately a random delay level 1 to "
        f"{sizes['max_level']} and a `TIMER_DELIVER_MS` property of now + "
        f"{sizes['timer_ms'][0]} to {sizes['timer_ms'][1]} ms; lateness = receive time in the "
        "listener - intended delivery time (send time + the level's delay, or the "
        "TIMER_DELIVER_MS value), both clocks the load generator's. Apache RocketMQ's timer "
        "wheel has slots of `timerPrecisionMs` (1 s by default, kept here): it rounds a timer "
        "message's delivery time down to a slot, which shows in its timer lateness.",
        "",
        *_versions(result),
        "",
    ]
    for mode in result["settings"]["sizes"]["flush_modes"]:
        lines += [f"### {mode} flush", "", *_figures(result, mode), ""]
    lines += [
        "Each figure is one run on a machine shared with other work, where single timings move "
        "by ±30 % (bench/CHANGES.md) and more under load: read a ratio within that band as no "
        "difference. The load averages at the start of each case, and the servers' start and "
        "stop times:",
        "",
        *_conditions(result),
        "",
        "### How it was run",
        "",
        *_commands(result),
    ]
    return lines


def _replicated_figures(result: dict[str, Any], flush_mode: str) -> list[str]:
    runs = _runs(result, flush_mode)
    ours, theirs = runs.get("reconsume"), runs.get("rocketmq")
    rows: list[list[str]] = []
    for label, case in (("produce, 1 thread", "produce-1"), ("produce, 8 threads", "produce-8")):
        a, b = _get(ours, case, "msgs_per_s"), _get(theirs, case, "msgs_per_s")
        rows.append([f"**{label}: msg/s**", _rate(a), _rate(b), f"**{_ratio(a, b)}**"])
        for q in ("p50", "p99"):
            a, b = _get(ours, case, f"latency_{q}_ms"), _get(theirs, case, f"latency_{q}_ms")
            rows.append([f"{label}: send latency {q} ms", _ms(a), _ms(b), _ratio(a, b)])
    for label, case in (
        ("consume (push, drain a filled topic): msg/s", "consume"),
        ("retry path (fail once, succeed on redelivery): msg/s", "retry"),
    ):
        a, b = _get(ours, case, "msgs_per_s"), _get(theirs, case, "msgs_per_s")
        rows.append([f"**{label}**", _rate(a), _rate(b), f"**{_ratio(a, b)}**"])
    for label, case, count in (
        ("produce, 1 thread", "produce-1", "sent_total"),
        ("produce, 8 threads", "produce-8", "sent_total"),
        ("consume", "consume", "messages"),
        ("retry path", "retry", "messages"),
    ):
        for who, key in (
            ("master", "broker_cpu_seconds"),
            ("replica", "replica_cpu_seconds"),
            ("client", "client_cpu_seconds"),
        ):
            a, b = (_cpu_per_message(cases, case, count, key) for cases in (ours, theirs))
            rows.append([f"{label}: {who} CPU µs/msg", _ms(a, 0), _ms(b, 0), _ratio(a, b)])
    for label, case in (("produce, 1 thread", "produce-1"), ("produce, 8 threads", "produce-8")):
        a, b = _not_ok(ours, case), _not_ok(theirs, case)
        rows.append([f"{label}: sends not answered SEND_OK", _count(a), _count(b), ""])
    return markdown_table(["", "reconsume", "Apache RocketMQ", "reconsume / RocketMQ"], rows)


def _not_ok(cases: dict[str, Any] | None, case: str) -> float | None:
    not_ok, errors = _get(cases, case, "not_ok"), _get(cases, case, "errors")
    return None if not_ok is None or errors is None else not_ok + errors


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _replicated_commands(result: dict[str, Any]) -> list[str]:
    s = result["settings"]
    lines = [
        "Apache RocketMQ (`DIR`: the run's data directory, removed afterwards; ports picked "
        "free for each run; each broker its own `user.home` under `DIR`):",
        "",
        "```",
        s["namesrv_command"],
        s["broker_command"].replace("broker.conf", "broker-master.conf") + "   # then:",
        s["broker_command"].replace("broker.conf", "broker-slave.conf"),
        "```",
        "",
    ]
    for mode, confs in s["broker_conf"].items():
        for role, conf in confs.items():
            lines += [
                f"broker-{role}.conf ({mode} flush):",
                "",
                "```properties",
                conf.rstrip(),
                "```",
                "",
            ]
    return [*lines, *_reconsume_and_loadgen_commands(s)]


def render_replication(result: dict[str, Any]) -> list[str]:
    """The throughput part of "Replication: Sync replica side by side with Apache RocketMQ
    SYNC_MASTER + SLAVE" (``python -m bench.compare_rocketmq --replication``)."""
    if result.get("skipped"):
        first, _, rest = str(result["skipped"]).partition("\n")
        return [f"**Skipped**: {first}", *(["", "```", rest, "```"] if rest else [])]
    sizes = result["settings"]["sizes"]
    machine = result.get("machine", {})
    lines = [
        f"Run {result.get('started', '?')} to {result.get('finished', '?')} (load average "
        f"{result.get('loadavg_start', '?')} at its start, {result.get('loadavg_end', '?')} at "
        "its end):",
        "",
        "```",
        display(str(result.get("command", "?")).split(" ")),
        "```",
        "",
        machine_sentence(machine),
        "",
        "As in *reconsume vs Apache RocketMQ* above (the same load generator, one JVM per "
        "command, one system at a time, the same warm-up), but each system is a master and one "
        "replica kept in sync, all on this machine: two `reconsume broker` processes, the "
        "master with `--replication Sync` and a replica `--broker-id 1 --master MASTER`, "
        "against an Apache RocketMQ SYNC_MASTER (brokerId 0) and SLAVE (brokerId 1) of one "
        "brokerName, with `inSyncReplicas=2` on the master (since 5.0 a SYNC_MASTER waits for "
        "`inSyncReplicas` copies, its own included, 1 by default: without it the master "
        "answers before its slave has the message). On both, a send is answered only once the "
        "replica has the message; all four brokers use the flush mode of the table. Setup "
        "waits until the name server lists both brokers and a send is answered SEND_OK. "
        f"produce: sync `send()` of 1 KiB bodies, {sizes['produce_seconds']:g} s measured after "
        f"{sizes['produce_warmup_seconds']:g} s unmeasured; consume: "
        f"{sizes['consume_messages']:,} messages stored by batch sends, drained by one push "
        f"consumer; retry path: {sizes['retry_messages']:,} messages, each failed once "
        "(send-back to the master, delay level 3 = 1 s, `%RETRY%bench-retry`) and consumed on "
        "its redelivery. *CPU µs/msg*: CPU time of the master or of the replica process over "
        "the whole command (unmeasured seconds included) per message. Bold: the figures the "
        "comparison is about; above 1 reconsume is faster.",
        "",
        *_versions(result),
        "",
    ]
    for mode in sizes["flush_modes"]:
        lines += [f"#### {mode} flush", "", *_replicated_figures(result, mode), ""]
    lines += [
        "The load averages at the start of each case, and the servers' start and stop times:",
        "",
        *_conditions(result),
        "",
        "#### How it was run",
        "",
        *_replicated_commands(result),
    ]
    return lines
