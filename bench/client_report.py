"""The client-throughput section of bench/RESULTS.md (see ``bench.client_throughput``)."""

from __future__ import annotations

from typing import Any

from bench.common import markdown_table


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _cpu(row: dict[str, Any], who: str) -> str:
    per_msg = row.get(f"{who}_cpu_us_per_msg")
    share = f"{row[f'{who}_cpu_pct']:.0f} %"
    return share if per_msg is None else f"{share}, {per_msg:.0f} µs"


def render_client(result: dict[str, Any]) -> list[str]:
    body = result["body_bytes"]
    repeats = result["repeats"]
    produce_rows = [
        [
            r["flush_mode"],
            str(r["producers"]),
            _n(r["messages"]),
            _n(r["msgs_per_s"]),
            _n(r["msgs_per_s_best"]),
            _n(r["mb_per_s"], 2),
            f"{r['latency_p50_ms']:.2f} / {r['latency_p99_ms']:.2f}",
            _cpu(r, "broker"),
            _cpu(r, "client"),
        ]
        for r in result["produce"]
    ]
    floor = result.get("floor")
    if floor:
        produce_rows.append(
            [
                "floor: echo, no reconsume",
                "1",
                _n(floor["messages"]),
                _n(floor["msgs_per_s"]),
                _n(floor["msgs_per_s_best"]),
                _n(floor["mb_per_s"], 2),
                f"{floor['latency_p50_ms']:.3f} / {floor['latency_p99_ms']:.3f}",
                _cpu(floor, "broker"),
                _cpu(floor, "client"),
            ]
        )
    consume_rows = [
        [
            r["flush_mode"],
            _n(r["messages"]),
            f"{r['seconds']:.2f}",
            f"{sorted(x['start_seconds'] for x in r['runs'])[len(r['runs']) // 2]:.2f}",
            _n(r["msgs_per_s"]),
            _n(r["msgs_per_s_best"]),
            _n(r["mb_per_s"], 2),
            _cpu(r, "broker"),
            _cpu(r, "client"),
        ]
        for r in result["consume"]
    ]
    lines = [
        "reconsume's own asyncio client against one `reconsume broker` and one `reconsume "
        "namesrv`, each its own process on 127.0.0.1 (one broker only; 64 MiB commit-log "
        "segments, a fresh store per flush mode). Clients run in separate processes "
        f"(`bench.client_worker`) on {result['event_loop']}; *4 producers* are four processes, "
        "one Producer each, so they share no GIL (they share the machine's cores with the "
        f"broker). {body} B bodies with one tag, topics of {result['queues']} queues. "
        f"*MB/s* counts message bodies ({body} B x msg/s / 10⁶). Median of {repeats} runs, "
        "best next to it. *CPU* columns: CPU time of the broker process and of all client "
        "processes over the run's wall time (100 % = one core), then per message (less "
        "sensitive to other load on the machine than msg/s); medians of the runs.",
        "",
        "### Produce",
        "",
        "Each producer sends one message at a time (`await producer.send(...)`, one request in "
        "flight, like a Java producer thread doing sync sends) to the topic's queues in turn. "
        f"Every process first makes {_n(result['warmup_sends'])} unmeasured sends; then each "
        f"run lasts {result['client_seconds']:g} s, all producers starting together. msg/s = "
        "all sends / (last end - first start). Latency: each `send()` as its caller sees it, "
        "all runs pooled. Sync flush answers a send after the fsync that covers it (sends "
        "arriving together share an fsync). The *floor* row is the same exchange without "
        "reconsume: a uvloop client sends a send-sized request (body + 300 B) and awaits a "
        "300 B answer from a uvloop server process that does nothing else (its CPU is in the "
        "broker column); it varies several-fold from run to run with whether the two "
        "processes share a core, since waking a process on the other vCPU of this VM costs "
        "tens of µs of CPU on both sides.",
        "",
        *markdown_table(
            [
                "flush",
                "producers",
                "messages (all runs)",
                "msg/s",
                "best msg/s",
                "MB/s",
                "send latency p50 / p99 ms",
                "broker CPU",
                "client CPU",
            ],
            produce_rows,
        ),
    ]
    if consume_rows:
        lines += [
            "",
            "### Consume",
            "",
            "One PushConsumer (clustering, a new group each run consuming from the first "
            "offset, an `async def` listener that only counts, pull batch 32, consume batch 1, "
            "20 concurrent batches, defaults otherwise) drains a pre-filled topic; the time "
            "runs from `start()` (which includes joining the group and the first rebalance) "
            "until the listener has seen every message. The consumer process first drains "
            f"{_n(result['consume_warmup_messages'])} messages of another topic. Async flush "
            "broker (flushing is not on the read path); the messages were stored by batch "
            "sends and are in the page cache.",
            "",
            *markdown_table(
                [
                    "flush",
                    "messages per run",
                    "seconds",
                    "of which start()",
                    "msg/s",
                    "best msg/s",
                    "MB/s",
                    "broker CPU",
                    "consumer CPU",
                ],
                consume_rows,
            ),
        ]
    return lines
