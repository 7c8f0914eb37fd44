"""The "access control off and on" section of bench/RESULTS.md (see ``bench.compare_acl``):
``python -m bench.compare_rocketmq --acl`` writes it to ``OUT/compare_rocketmq_acl.md``."""

from __future__ import annotations

from typing import Any

from bench.common import markdown_table
from bench.rocketmq_report import _get, _ms, _rate, _ratio, _reconsume_version
from bench.rocketmq_servers import display

SYSTEMS = ("reconsume", "rocketmq")
CASES = (
    ("produce, 1 thread", "produce-1", "sent_total"),
    ("produce, 8 threads", "produce-8", "sent_total"),
    ("consume", "consume", "messages"),
)
"""(label, case, the result's count of the messages the broker handled in the command)."""
HEADER = [
    "",
    "reconsume, ACL off",
    "reconsume, ACL on",
    "reconsume: ACL cost µs/msg",
    "RocketMQ, ACL off",
    "RocketMQ, ACL on",
    "RocketMQ: ACL cost µs/msg",
    "reconsume / RocketMQ, ACL on",
]


def _cases(document: dict[str, Any], system: str, acl: bool) -> dict[str, Any] | None:
    for entry in document.get("runs", []):
        if entry["system"] == system and entry["acl"] == acl:
            cases: dict[str, Any] = entry["cases"]
            return cases
    return None


def cost_per_message(off: float | None, on: float | None) -> float | None:
    """1e6 / on - 1e6 / off: microseconds each message costs more with access control."""
    if off is None or on is None or off <= 0 or on <= 0:
        return None
    return 1e6 / on - 1e6 / off


def _cpu(cases: dict[str, Any] | None, case: str, count: str) -> float | None:
    """The broker's CPU time over the whole command per message it handled, in µs."""
    cpu, messages = _get(cases, case, "broker_cpu_seconds"), _get(cases, case, count)
    return None if cpu is None or not messages else cpu / messages * 1e6


def _difference(off: float | None, on: float | None, scale: float = 1.0) -> float | None:
    return None if off is None or on is None else (on - off) * scale


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:+,.1f}"


def figures(document: dict[str, Any]) -> list[str]:
    """One row per case and figure: both systems off and on, the cost and the ratio with
    access control on."""
    runs = {
        (system, acl): _cases(document, system, acl) for system in SYSTEMS for acl in (False, True)
    }
    rows: list[list[str]] = []
    for label, case, count in CASES:
        row = [f"**{label}: msg/s**"]
        for system in SYSTEMS:
            off, on = (_get(runs[system, acl], case, "msgs_per_s") for acl in (False, True))
            row += [_rate(off), _rate(on), f"**{_cost(cost_per_message(off, on))}**"]
        ours, theirs = (_get(runs[system, True], case, "msgs_per_s") for system in SYSTEMS)
        rows.append([*row, f"**{_ratio(ours, theirs)}**"])
        if case != "consume":
            row = [f"{label}: send latency p50 ms"]
            for system in SYSTEMS:
                off, on = (_get(runs[system, acl], case, "latency_p50_ms") for acl in (False, True))
                row += [_ms(off), _ms(on), _cost(_difference(off, on, 1e3))]
            ours, theirs = (_get(runs[system, True], case, "latency_p50_ms") for system in SYSTEMS)
            rows.append([*row, _ratio(ours, theirs)])
        row = [f"{label}: broker CPU µs/msg"]
        for system in SYSTEMS:
            off, on = (_cpu(runs[system, acl], case, count) for acl in (False, True))
            row += [_ms(off, 0), _ms(on, 0), _cost(_difference(off, on))]
        ours, theirs = (_cpu(runs[system, True], case, count) for system in SYSTEMS)
        rows.append([*row, _ratio(ours, theirs)])
    return markdown_table(HEADER, rows)


def _versions(document: dict[str, Any]) -> list[str]:
    v = document.get("versions", {})
    return markdown_table(
        ["", ""],
        [
            [
                "Apache RocketMQ broker, name server",
                f"{v.get('rocketmq', '?')}, {v.get('rocketmq_namesrv', '?')} (Maven Central)",
            ],
            ["Client of the load generator", f"Apache RocketMQ client {v.get('client', '?')}"],
            ["Java", f"{v.get('java', '?')}; {v.get('java_runtime', '')}"],
            ["reconsume", _reconsume_version()],
        ],
    )


def _conditions(document: dict[str, Any]) -> list[str]:
    order = [command["case"] for command in document["settings"]["commands"]]
    rows = []
    for entry in document["runs"]:
        cases = entry["cases"]
        loads = ", ".join(
            f"{case} {cases[case]['loadavg_start'].split()[0]}" for case in order if case in cases
        )
        rows.append(
            [
                entry["system"],
                "on" if entry["acl"] else "off",
                f"{entry['start_seconds']:.1f}",
                f"{entry['stop_seconds']:.1f}",
                loads,
            ]
        )
    return markdown_table(
        ["system", "ACL", "start s", "stop s", "1-min load average at the start of each case"],
        rows,
    )


def _how(document: dict[str, Any]) -> list[str]:
    s = document["settings"]
    lines = ["Built by (`make bench-java`):", "", "```", s["mvn"], "```", ""]
    lines += [
        "Apache RocketMQ, off and on (`DIR`: the run's data directory, its rocketmq.home.dir "
        "and user.home, removed afterwards; ports picked free for each run): 5.3.3's name "
        "server, as Maven Central has no rocketmq-namesrv 5.3.0 to 5.3.2 (its sources did not "
        "change from 5.3.2 to 5.3.3; it checks no ACL), and the 5.3.2 broker:",
        "",
        "```",
        s["namesrv_command"],
        s["broker_command"],
        "```",
        "",
        "broker.conf with access control (off: the same without `aclEnable=true`):",
        "",
        "```properties",
        s["broker_conf"].rstrip(),
        "```",
        "",
        "`DIR/conf/plain_acl.yml`:",
        "",
        "```yaml",
        s["plain_acl_yml"].rstrip(),
        "```",
        "",
        "reconsume (`bench/compare_acl.py`; `broker.toml`: `[store] commit_log_segment_bytes = "
        "67108864`), off, then on with `acl.toml`:",
        "",
        "```",
        *s["reconsume_commands"]["off"],
        *s["reconsume_commands"]["on"],
        "```",
        "",
        "```toml",
        s["acl_toml"].rstrip(),
        "```",
        "",
        "The load generator, one JVM per command (`NAMESRV`: that system's name server; "
        "`WARMUP_SENT`: the number of messages the warm-up sent; `SIGNING`: with access "
        "control on, the account shown in the comment, nothing with it off; `ADMIN_SECRET` and "
        "`CLIENT_SECRET`: the secret keys of `bench/compare_acl.py`):",
        "",
        "```",
        f'loadgen() {{ {s["loadgen_prefix"]} "$@"; }}',
    ]
    for command in s["commands"]:
        name, _, rest = command["args"].partition(" ")
        lines.append(f"loadgen {name} --namesrv NAMESRV {rest} $SIGNING   # {command['signing']}")
    return [*lines, "```"]


def render_acl(document: dict[str, Any]) -> list[str]:
    if document.get("skipped"):
        first, _, rest = str(document["skipped"]).partition("\n")
        return [f"**Skipped**: {first}", *(["", "```", rest, "```"] if rest else [])]
    sizes = document["settings"]["sizes"]
    accounts = document["settings"]["accounts"]
    lines = [
        f"Run {document.get('started', '?')} to {document.get('finished', '?')} (load average "
        f"{document.get('loadavg_start', '?')} at its start, {document.get('loadavg_end', '?')} "
        "at its end):",
        "",
        "```",
        display(str(document.get("command", "?")).split(" ")),
        "```",
        "",
        "The load generator of *reconsume vs Apache RocketMQ* against each system twice, one "
        "system at a time: fresh servers with access control off, then fresh servers with it on "
        "(reconsume: `--acl-file` on the name server and the broker; Apache RocketMQ's 5.3.2 "
        "broker, the last release with ACL 1.0: `aclEnable=true` and `conf/plain_acl.yml`, its "
        "name server unchecked). With it on every request is signed (HMAC-SHA1, "
        f"`AclClientRPCHook`): setup as the admin `{accounts['admin']}`, everything else as "
        f"`{accounts['client']}`, which "
        "holds `PUB|SUB` on the bench topics and `SUB` on the consumer groups and nothing more; "
        "off, nothing is signed. So the cost is the client's signing and the broker's check "
        "together (after the commands an unsigned send must be refused with it on and accepted "
        "with it off, or the run fails). Async flush; "
        f"{sizes['warmup_seconds']:g} s of unmeasured 8-thread sends and "
        "their draining first; produce: sync `send()` of 1 KiB bodies, "
        f"{sizes['produce_seconds']:g} s measured after {sizes['produce_warmup_seconds']:g} s "
        f"unmeasured; consume: {sizes['consume_messages']:,} messages stored by batch sends, "
        "drained by one push consumer. *ACL cost µs/msg*: 1e6 / (msg/s on) - 1e6 / (msg/s off) "
        "for msg/s, on - off for latency (in µs) and broker CPU; negative = faster with access "
        "control, that is noise. *reconsume / RocketMQ, ACL on*: above 1 reconsume is faster "
        "for msg/s, slower for latency, costlier for CPU.",
        "",
        *_versions(document),
        "",
        *figures(document),
        "",
        "Each figure is one run on a machine shared with other work (single timings move by "
        "±30 %, bench/CHANGES.md): a cost smaller than that band's share of a message's time is "
        "no measured cost. The load averages at the start of each case, and the servers' start "
        "and stop times:",
        "",
        *_conditions(document),
        "",
        "#### How it was run",
        "",
        *_how(document),
    ]
    return lines
