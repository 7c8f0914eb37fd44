"""Every scenario of the RocketMQ 5.x client drivers (:mod:`.client5_support`) against a gRPC
endpoint, with checks of what they report and the gRPC calls each client made:

    .venv/bin/python -m tests.compat.validate_client5                 # Apache RocketMQ 5.3
    .venv/bin/python -m tests.compat.validate_client5 --drivers python --endpoint HOST:PORT

Without ``--endpoint`` it starts Apache RocketMQ's name server, broker and proxy
(:func:`bench.rocketmq_proxy.rocketmq_proxy_servers`) and creates the topics (``message.type``
NORMAL, FIFO and DELAY) and the FIFO group (``consumeMessageOrderly``); with it, those must
exist already (``--prefix`` names them, see :func:`names`). Each client reaches the endpoint
through a recording relay (:mod:`.grpc_recorder`), so the report lists every RPC it made.

Prints a report, writes every driver event and every recorded call under ``--out`` (default
``bench/out/client5``), and exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .client5_support import DRIVERS, TIMEOUT_S, ensure_java5_built, finish_client5, start_client5
from .driver_support import DriverRun, Event
from .grpc_recorder import Call, GrpcRecorder, sequence

REPO = Path(__file__).resolve().parents[2]
INVISIBLE_MS = 10_000
"""The least invisible duration RocketMQ's proxy lets a ReceiveMessage ask
(``minInvisibleTimeMillsForRecv``)."""


def names(prefix: str, driver: str) -> dict[str, str]:
    """The topics and groups of one driver's run."""
    base = f"{prefix}-{driver}"
    return {
        "normal": f"{base}-normal",
        "fifo": f"{base}-fifo",
        "delay": f"{base}-delay",
        "fifo_group": f"{base}-fifo-group",
    }


@dataclass
class Step:
    driver: str
    name: str
    runs: dict[str, DriverRun]
    calls: list[Call]
    mark: int
    """The recorder's mark when the step started."""
    numbers: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def check(self, condition: bool, what: str) -> None:
        if not condition:
            self.failures.append(what)


class Validation:
    def __init__(self, endpoint: str, recorder: GrpcRecorder, out: Path, prefix: str) -> None:
        self.endpoint = endpoint
        self.recorder = recorder
        self.out = out
        self.prefix = prefix
        self.steps: list[Step] = []

    def state(self, driver: str, step: str, role: str) -> Path:
        """The directory of one run's events and client log."""
        slug = re.sub(r"[^a-z0-9]+", "-", step.lower()).strip("-")
        return self.out / driver / slug / role

    @contextmanager
    def step(self, driver: str, name: str) -> Iterator[Step]:
        mark = self.recorder.mark()
        step = Step(driver, name, {}, [], mark)
        started = time.monotonic()
        try:
            yield step
        except AssertionError as failure:
            step.failures.append(str(failure)[:3000])
        step.numbers["seconds"] = round(time.monotonic() - started, 1)
        step.calls = self.recorder.calls(mark)
        self.steps.append(step)
        for role, run in step.runs.items():
            path = self.state(driver, name, role) / "events.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(e) + "\n" for e in run.sequence))

    def run(
        self, step: Step, role: str, driver: str, scenario: str, **options: object
    ) -> DriverRun:
        client = start_client5(
            driver, scenario, self.recorder.endpoint, self.state(driver, step.name, role),
            **options,
        )  # fmt: skip
        step.runs[role] = finish_client5(client, check=False)
        run = step.runs[role]
        finished(run, role)
        return run

    def wait_receiving(self, group: str, since: int, timeout_s: float = 30.0) -> None:
        """Until a ReceiveMessage of ``group`` went through the relay after mark ``since``."""
        deadline = time.monotonic() + timeout_s
        while not any(
            c.method == "ReceiveMessage" and c.requests and c.requests[0]["group"]["name"] == group
            for c in self.recorder.calls(since)
        ):
            if time.monotonic() > deadline:
                raise AssertionError(f"no ReceiveMessage of {group} in {timeout_s} s")
            time.sleep(0.05)


def finished(run: DriverRun, role: str) -> None:
    """The run exited 0 after its "done" event (else the step fails)."""
    if run.returncode != 0 or not run["done"]:
        raise AssertionError(f"{role}: {run.explain()}")


def expected(run: DriverRun) -> list[Event]:
    return [e for e in run["received"] if e.get("expected")]


SHARDING_KEY = "__SHARDINGKEY"
"""RocketMQ's proxy hands a FIFO message's group back among its user properties too (the
broker's property of that name), beside ``message_group``."""


def same_messages(step: Step, sent: DriverRun, received: list[Event]) -> None:
    """Each sent message arrived with its topic, tag, keys, user properties and body (user
    properties other than :data:`SHARDING_KEY` as sent)."""
    by_id = {e["messageId"]: e for e in received}
    extra: set[str] = set()
    for message in sent["sent"]:
        got = by_id.get(message["messageId"])
        step.check(got is not None, f"{message['body']} ({message['messageId']}) not received")
        if got is None:
            continue
        properties = dict(got["properties"])
        if SHARDING_KEY in properties:
            extra.add(SHARDING_KEY)
            step.check(properties.pop(SHARDING_KEY) == message["messageGroup"], "sharding key")
        step.check(properties == message["properties"], f"{message['body']}: {properties}")
        for key in ("topic", "tag", "keys", "body", "messageGroup"):
            step.check(got[key] == message[key], f"{message['body']}: {key} {got[key]!r}")
    if extra:
        step.numbers["extra_user_properties"] = sorted(extra)


def delays(received: list[Event]) -> list[int]:
    return sorted(
        e["sinceLastDeliveryMs"] for e in received if e["sinceLastDeliveryMs"] is not None
    )


def send_and_simple_consume(v: Validation, driver: str, topics: dict[str, str]) -> None:
    with v.step(driver, "send + simple-consume") as step:
        sent = v.run(step, "producer", driver, "send", topic=topics["normal"], count=10,
                     prefix="plain")  # fmt: skip
        ids = [e["messageId"] for e in sent["sent"]]
        step.check(len(set(ids)) == 10, f"message ids {ids}")
        step.check(all(e["queueOffset"] is not None for e in sent["sent"]), "no offsets")
        got = v.run(step, "consumer", driver, "simple-consume", topic=topics["normal"],
                    group=f"{topics['normal']}-simple", count=10, prefix="plain",
                    invisible_ms=INVISIBLE_MS, max_messages=4)  # fmt: skip
        mine = expected(got)
        same_messages(step, sent, mine)
        step.check(all(e["deliveryAttempt"] == 1 for e in mine), "a redelivery")
        step.numbers.update(sent=len(ids), received=len(mine), receives=got["done"][0]["receives"])


def simple_fail_first(v: Validation, driver: str, topics: dict[str, str]) -> None:
    with v.step(driver, "simple-consume --fail-first") as step:
        v.run(step, "producer", driver, "send", topic=topics["normal"], count=3, prefix="ff")
        got = v.run(step, "consumer", driver, "simple-consume", topic=topics["normal"],
                    group=f"{topics['normal']}-ff", count=3, prefix="ff",
                    invisible_ms=INVISIBLE_MS, fail_first=True)  # fmt: skip
        mine = expected(got)
        attempts = sorted(e["deliveryAttempt"] for e in mine)
        step.check(attempts == [1, 1, 1, 2, 2, 2], f"delivery attempts {attempts}")
        again = delays(mine)
        step.check(all(d >= INVISIBLE_MS for d in again), f"back before {INVISIBLE_MS} ms: {again}")
        step.numbers.update(
            attempts=attempts, invisible_ms=INVISIBLE_MS, redelivered_after_ms=again
        )


def simple_change_invisible(v: Validation, driver: str, topics: dict[str, str]) -> None:
    with v.step(driver, "simple-consume --change-invisible-ms") as step:
        v.run(step, "producer", driver, "send", topic=topics["normal"], count=3, prefix="ci")
        got = v.run(step, "consumer", driver, "simple-consume", topic=topics["normal"],
                    group=f"{topics['normal']}-ci", count=3, prefix="ci",
                    invisible_ms=INVISIBLE_MS, change_invisible_ms=3000)  # fmt: skip
        mine = expected(got)
        changed = got["invisibleChanged"]
        step.check(len(changed) == 3, f"{len(changed)} changes")
        again = delays(mine)
        step.check(all(d >= 3000 for d in again) and len(again) == 3, f"redeliveries {again}")
        step.numbers.update(changed_to_ms=3000, redelivered_after_ms=again)


def push_retry(v: Validation, driver: str, topics: dict[str, str]) -> None:
    with v.step(driver, "push-consume --fail-times 2") as step:
        v.run(step, "producer", driver, "send", topic=topics["normal"], count=3, prefix="pf")
        got = v.run(step, "consumer", driver, "push-consume", topic=topics["normal"],
                    group=f"{topics['normal']}-push", count=3, prefix="pf", fail_times=2,
                    timeout_s=TIMEOUT_S + 30)  # fmt: skip
        mine = expected(got)
        attempts = sorted(e["deliveryAttempt"] for e in mine)
        step.check(attempts == [1, 1, 1, 2, 2, 2, 3, 3, 3], f"delivery attempts {attempts}")
        results = [e["result"] for e in sorted(mine, key=lambda e: e["delivery"])]
        step.check(results.count("FAILURE") == 6, f"results {results}")
        by_attempt: dict[int, list[int]] = {}
        for e in mine:
            if e["sinceLastDeliveryMs"] is not None:
                by_attempt.setdefault(e["delivery"], []).append(e["sinceLastDeliveryMs"])
        nacks = [
            c.requests[0].get("invisibleDuration")
            for c in v.recorder.calls(step.mark)
            if c.method == "ChangeInvisibleDuration" and c.requests
        ]
        step.numbers.update(
            attempts=attempts, redelivered_after_ms_by_delivery=by_attempt, nack_durations=nacks
        )


def fifo(v: Validation, driver: str, topics: dict[str, str]) -> None:
    with v.step(driver, "send-fifo + fifo-consume --fail-times 1") as step:
        sent = v.run(step, "producer", driver, "send-fifo", topic=topics["fifo"], count=8,
                     message_groups=2, prefix="fifo")  # fmt: skip
        got = v.run(step, "consumer", driver, "fifo-consume", topic=topics["fifo"],
                    group=topics["fifo_group"], count=8, prefix="fifo", fail_times=1)  # fmt: skip
        mine = expected(got)
        same_messages(step, sent, [e for e in mine if e["result"] == "SUCCESS"])
        step.check(got["done"][0]["inOrder"] is True, f"order {got['order']}")
        step.numbers.update(
            order={e["messageGroup"]: e["seqs"] for e in got["order"]},
            attempts=[e["deliveryAttempt"] for e in mine],
            local_retry_after_ms=delays(mine),
        )


def delay(v: Validation, driver: str, topics: dict[str, str]) -> None:
    with v.step(driver, "send-delay + push-consume") as step:
        group = f"{topics['delay']}-push"
        mark = v.recorder.mark()
        consumer = start_client5(
            driver, "push-consume", v.recorder.endpoint, v.state(driver, step.name, "consumer"),
            topic=topics["delay"], group=group, count=3, prefix="delay",
        )  # fmt: skip
        try:
            v.wait_receiving(group, mark)
            sent = v.run(step, "producer", driver, "send-delay", topic=topics["delay"], count=3,
                         delay_ms=4000, prefix="delay")  # fmt: skip
        finally:
            step.runs["consumer"] = finish_client5(consumer, check=False)
        got = step.runs["consumer"]
        finished(got, "consumer")
        mine = expected(got)
        same_messages(step, sent, mine)
        at = {e["messageId"]: e["deliveryTimestamp"] for e in sent["sent"]}
        late = sorted(e["receivedAt"] - at[e["messageId"]] for e in mine)
        early = [e for e in mine if e["receivedAt"] < at[e["messageId"]]]
        step.check(not early, f"delivered early: {early}")
        step.numbers.update(
            delay_ms=4000,
            lateness_ms=late,
            sent_after_ms=[e["deliveryTimestamp"] - e["sentAt"] for e in sent["sent"]],
        )


def too_short(v: Validation, driver: str, topics: dict[str, str]) -> None:
    """RocketMQ's proxy refuses a receive's invisible duration under 10 s (40011
    ILLEGAL_INVISIBLE_TIME). A receive that reaches it before the client's Telemetry settings
    is answered INTERNAL_SERVER_ERROR instead (a NullPointerException of the proxy's): then the
    run is tried again, up to three times in all."""
    with v.step(driver, "simple-consume --invisible-ms 5000 (refused)") as step:
        races = []
        for attempt in range(3):
            client = start_client5(
                driver, "simple-consume", v.recorder.endpoint,
                v.state(driver, step.name, f"consumer-{attempt}"), topic=topics["normal"],
                group=f"{topics['normal']}-short", count=1, prefix="none", invisible_ms=5000,
                timeout_s=30,
            )  # fmt: skip
            run = step.runs[f"consumer-{attempt}"] = finish_client5(client, check=False)
            errors = [e["error"] for e in run["error"]]
            if not any("NullPointerException" in e for e in errors):
                break
            races.append(errors[0][:160])
        step.check(
            run.returncode == 1 and any("40011" in e or "too small" in e for e in errors),
            f"exit {run.returncode}, errors {errors}",
        )
        step.numbers.update(exit=run.returncode, error=errors[0][:200] if errors else None)
        if races:
            step.numbers["settings_races"] = races


SCENARIOS: list[Callable[[Validation, str, dict[str, str]], None]] = [
    send_and_simple_consume,
    simple_fail_first,
    simple_change_invisible,
    push_retry,
    fifo,
    delay,
    too_short,
]


def rpc_lines(step: Step) -> list[str]:
    """Per client (in the order they first called), its RPCs in order."""
    by_client: dict[str, list[Call]] = {}
    for call in step.calls:
        by_client.setdefault(call.client, []).append(call)
    lines = []
    for client, calls in by_client.items():
        roles = [
            r for r, run in step.runs.items() for e in run["started"] if e.get("clientId") == client
        ]
        statuses = sorted({s for c in calls for s in c.statuses() if s != "OK"})
        odd = f" (non-OK statuses: {', '.join(statuses)})" if statuses else ""
        lines.append(f"    {'/'.join(roles) or client}: {' > '.join(sequence(calls))}{odd}")
    return lines


def report(v: Validation) -> int:
    failed = 0
    for step in v.steps:
        verdict = "ok" if not step.failures else "FAILED"
        failed += bool(step.failures)
        print(f"[{step.driver}] {step.name}: {verdict}")
        for key, value in step.numbers.items():
            print(f"    {key}: {value}")
        for failure in step.failures:
            print(f"    ! {failure}")
        print("  RPCs:")
        for line in rpc_lines(step):
            print(line)
    print(f"{len(v.steps) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--endpoint", help="a running gRPC endpoint (default: start RocketMQ)")
    parser.add_argument("--prefix", default="c5", help="of the topics and groups")
    parser.add_argument(
        "--scenarios",
        default=",".join(s.__name__ for s in SCENARIOS),
        help="which of them, in this order",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "client5")
    parser.add_argument("--data-root", type=Path, default=REPO / "bench" / "out" / "data")
    args = parser.parse_args(argv)
    drivers = [d for d in args.drivers.split(",") if d]
    if "java" in drivers and (reason := ensure_java5_built(print)) is not None:
        print(f"the Java driver cannot run: {reason}")
        return 1
    with ExitStack() as stack:
        endpoint = args.endpoint
        if endpoint is None:
            from bench import rocketmq_proxy, rocketmq_servers

            if (reason := rocketmq_servers.ensure_built(print)) is not None:
                print(f"Apache RocketMQ cannot run: {reason}")
                return 1
            running = stack.enter_context(rocketmq_proxy.rocketmq_proxy_servers(args.data_root))
            endpoint = running.endpoint
            print(f"Apache RocketMQ: name server {running.namesrv}, proxy {endpoint}")
            for driver in drivers:
                topics = names(args.prefix, driver)
                for kind, message_type in (("normal", "NORMAL"), ("fifo", "FIFO"),
                                           ("delay", "DELAY")):  # fmt: skip
                    rocketmq_proxy.create_topic(running, topics[kind], message_type)
                rocketmq_proxy.create_group(running, topics["fifo_group"], orderly=True)
        recorder = stack.enter_context(GrpcRecorder(endpoint, log=args.out / "calls.jsonl"))
        v = Validation(endpoint, recorder, args.out, args.prefix)
        chosen = {s.__name__: s for s in SCENARIOS}
        for driver in drivers:
            for name in args.scenarios.split(","):
                chosen[name](v, driver, names(args.prefix, driver))
        return report(v)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
