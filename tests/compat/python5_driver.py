"""Runs one scenario of Apache RocketMQ's 5.x Python client (rocketmq-python-client, gRPC)
against an endpoint, as the Java driver (``java5/``) does with the 5.x Java client:

    python tests/compat/python5_driver.py SCENARIO --endpoints HOST:PORT --topic T --group G ...

Options as ``--name value`` or ``--name=value``; a flag alone means true. Prints one JSON object
per line on stdout, the same events with the same keys as the Java driver, and exits 0 after a
"done" event; 2 after an "error" event naming what was still missing at the deadline
(``--timeout-ms``, default 30 s); 1 after an "error" event with the exception; 3 if even closing
the client hangs 5 s past the deadline. The client logs to ``~/logs/rocketmq_python`` (a runner
points HOME at a directory of its own).

Scenarios: send, send-fifo, send-delay, simple-consume, push-consume, fifo-consume (see
:func:`send`, :func:`simple_consume` and :func:`push_consume`). The client counts durations in
whole seconds (invisible durations, the long-polling wait, the request timeout) and delivery
timestamps in seconds: the driver's millisecond options are rounded up to whole seconds.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NoReturn, Protocol, cast

import rocketmq  # type: ignore[import-untyped]  # the client ships no type information

DRIVER = "python5"
SCENARIOS = ("send", "send-fifo", "send-delay", "simple-consume", "push-consume", "fifo-consume")

# ---------------------------------------------------------------- the client, as typed here


class QueueProto(Protocol):
    """``apache.rocketmq.v2.MessageQueue`` (a protobuf message)."""

    @property
    def id(self) -> int: ...

    @property
    def broker(self) -> Any: ...


class MessageQueue(Protocol):
    @property
    def topic(self) -> str: ...

    def message_queue0(self) -> QueueProto: ...


class SendReceipt(Protocol):
    @property
    def message_id(self) -> str: ...

    @property
    def message_queue(self) -> MessageQueue | None: ...

    @property
    def offset(self) -> int | None: ...


class Message(Protocol):
    """A message to send (the setters) or one received (the getters)."""

    topic: str
    body: bytes
    tag: str | None
    message_group: str | None
    delivery_timestamp: int | None
    """Seconds when sending; milliseconds once received."""

    @property
    def message_id(self) -> str: ...

    @property
    def keys(self) -> Collection[str]: ...

    @keys.setter
    def keys(self, key: str) -> None: ...

    @property
    def properties(self) -> Mapping[str, str]: ...

    @property
    def born_timestamp(self) -> int | None: ...

    @property
    def born_host(self) -> str | None: ...

    @property
    def delivery_attempt(self) -> int | None: ...

    def add_property(self, key: str, value: str) -> None: ...


class Client(Protocol):
    @property
    def client_id(self) -> str: ...

    def startup(self) -> None: ...

    def shutdown(self) -> None: ...


class Producer(Client, Protocol):
    def send(self, message: Message) -> SendReceipt: ...


class SimpleConsumer(Client, Protocol):
    def receive(self, max_message_num: int, invisible_duration: int) -> list[Message]: ...

    def ack(self, message: Message) -> None: ...

    def change_invisible_duration(self, message: Message, invisible_duration: int) -> None: ...


class Listener(Protocol):
    """What a PushConsumer calls (the client's MessageListener is only this method)."""

    def consume(self, message: Message) -> object: ...


def _configuration(options: Options) -> object:
    credentials = rocketmq.Credentials(options.get("access-key", ""), options.get("secret-key", ""))
    return rocketmq.ClientConfiguration(
        options.require("endpoints"),
        credentials,
        options.get("namespace", ""),
        seconds(options.number("request-timeout-ms", 3000)),
    )


def _subscription(options: Options, topic: str) -> dict[str, object]:
    return {topic: rocketmq.FilterExpression(options.get("filter", "*"))}


def new_message() -> Message:
    return cast(Message, rocketmq.Message())


def new_producer(options: Options, topic: str) -> Producer:
    producer = rocketmq.Producer(_configuration(options), (topic,), tls_enable=options.flag("tls"))
    return cast(Producer, producer)


def new_simple_consumer(options: Options, group: str, topic: str) -> SimpleConsumer:
    consumer = rocketmq.SimpleConsumer(
        _configuration(options),
        group,
        _subscription(options, topic),
        await_duration=seconds(options.number("await-ms", 5000)),
        tls_enable=options.flag("tls"),
    )
    return cast(SimpleConsumer, consumer)


def new_push_consumer(options: Options, group: str, topic: str, listener: Listener) -> Client:
    consumer = rocketmq.PushConsumer(
        _configuration(options),
        group,
        listener,
        _subscription(options, topic),
        consumption_thread_count=options.number("threads", 4),
        tls_enable=options.flag("tls"),
    )
    return cast(Client, consumer)


def consume_result(success: bool) -> object:
    return rocketmq.ConsumeResult.SUCCESS if success else rocketmq.ConsumeResult.FAILURE


# ---------------------------------------------------------------- options, events, deadline


def seconds(millis: int) -> int:
    """``millis`` rounded up to whole seconds, the client's unit."""
    return max(0, math.ceil(millis / 1000))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Deadline(Exception):
    """A condition was not reached by the deadline; the message says which."""


class Options:
    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)

    @staticmethod
    def parse(args: list[str]) -> Options:
        values: dict[str, str] = {}
        at = 0
        while at < len(args):
            arg = args[at]
            if not arg.startswith("--"):
                raise ValueError(f"unexpected argument {arg}")
            name, eq, value = arg[2:].partition("=")
            if not eq:
                if at + 1 < len(args) and not args[at + 1].startswith("--"):
                    at += 1
                    value = args[at]
                else:
                    value = "true"
            values[name] = value
            at += 1
        return Options(values)

    def get(self, name: str, fallback: str) -> str:
        return self.values.get(name, fallback)

    def require(self, name: str) -> str:
        if name not in self.values:
            raise ValueError(f"missing option --{name}=...")
        return self.values[name]

    def number(self, name: str, fallback: int) -> int:
        return int(self.values.get(name, fallback))

    def flag(self, name: str) -> bool:
        return self.values.get(name, "false").lower() == "true"


class Events:
    """One JSON object per line on stdout, each with an "event" name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, name: str, **fields: object) -> None:
        line = json.dumps({"event": name, **fields}, separators=(",", ":"))
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def text(body: bytes | None) -> str:
    return (body or b"").decode("utf-8", errors="replace")


def received(consumer: str, message: Message, received_at: int) -> dict[str, object]:
    """What a consumer was handed (the keys of the Java driver's; this client keeps no
    message's queue offset)."""
    return {
        "consumer": consumer,
        "messageId": message.message_id,
        "topic": message.topic,
        "tag": message.tag,
        "keys": sorted(message.keys),
        "properties": dict(sorted(message.properties.items())),
        "body": text(message.body),
        "messageGroup": message.message_group,
        "deliveryTimestamp": message.delivery_timestamp or None,  # 0 for none
        "bornTimestamp": message.born_timestamp,
        "bornHost": message.born_host,
        "deliveryAttempt": message.delivery_attempt,
        "queueOffset": None,
        "receivedAt": received_at,
    }


def sent(receipt: SendReceipt, sent_at: int) -> dict[str, object]:
    queue = receipt.message_queue
    proto = queue.message_queue0() if queue is not None else None
    return {
        "messageId": receipt.message_id,
        "brokerName": str(proto.broker.name) if proto is not None else None,
        "queueId": proto.id if proto is not None else None,
        "queueOffset": receipt.offset,
        "sentAt": sent_at,
        "ackedAt": now_ms(),
    }


class Run:
    def __init__(self, options: Options, events: Events, deadline_ms: int) -> None:
        self.options = options
        self.events = events
        self.deadline_ms = deadline_ms
        self.topic = options.require("topic")
        self.tag = options.get("tag", "compat")
        self.prefix = options.get("prefix", "message")
        self.count = options.number("count", 10)

    def check_deadline(self, what: str) -> None:
        if now_ms() > self.deadline_ms:
            raise Deadline(f"timed out waiting for {what}")

    def wait(self, what: str, condition: Callable[[], bool]) -> None:
        """Poll ``condition`` every 20 ms until it holds; past the deadline, raise."""
        while not condition():
            self.check_deadline(what)
            time.sleep(0.02)

    def expected(self, message: Message) -> bool:
        return text(message.body).startswith(self.prefix + " ")


# ---------------------------------------------------------------- scenarios


def send(run: Run, kind: str) -> dict[str, object]:
    """``--count`` messages, one at a time. "fifo": message i in the message group
    "PREFIX-g(i mod K)" (``--message-groups`` K, default 2). "delay": each with a delivery
    timestamp ``--delay-ms`` (default 3000) after it is sent, rounded up to a whole second."""
    options = run.options
    groups = options.number("message-groups", 2)
    delay_ms = options.number("delay-ms", 3000)
    producer = new_producer(options, run.topic)
    producer.startup()
    run.events.emit(
        "started", client="producer", kind=kind, topic=run.topic, clientId=producer.client_id
    )
    first = now_ms()
    for i in range(run.count):
        body = f"{run.prefix} {i}"
        keys = sorted((f"{run.prefix}-{i}", run.prefix))
        properties = {"index": str(i), "driver": DRIVER}
        message = new_message()
        message.topic = run.topic
        message.tag = run.tag
        for key in keys:
            message.keys = key  # the client's setter adds one key at a time
        message.body = body.encode()
        message_group: str | None = None
        deliver_at: int | None = None
        if kind == "fifo":
            message_group = f"{run.prefix}-g{i % groups}"
            properties["seq"] = str(i // groups)
            message.message_group = message_group
        sent_at = now_ms()
        if kind == "delay":
            deliver_s = seconds(sent_at + delay_ms)
            deliver_at = deliver_s * 1000
            message.delivery_timestamp = deliver_s
        for key, value in sorted(properties.items()):
            message.add_property(key, value)
        receipt = producer.send(message)
        run.events.emit(
            "sent",
            **sent(receipt, sent_at),
            kind=kind,
            topic=run.topic,
            tag=run.tag,
            keys=keys,
            properties=dict(sorted(properties.items())),
            body=body,
            messageGroup=message_group,
            deliveryTimestamp=deliver_at,
        )
    elapsed = now_ms() - first
    producer.shutdown()
    return {"sent": run.count, "elapsedMs": elapsed}


def simple_consume(run: Run) -> dict[str, object]:
    """A simple consumer receiving batches of up to ``--max-messages`` (default 16) with the
    invisible duration ``--invisible-ms`` (default 15000; RocketMQ's proxy refuses less than
    10 s) until ``--count`` distinct messages are acked. A message's deliveries go through
    these steps, then it is acked: with ``--fail-first``, the first is left unacked; with
    ``--change-invisible-ms D``, the next calls change_invisible_duration(D) and leaves it
    unacked."""
    options = run.options
    group = options.require("group")
    max_messages = options.number("max-messages", 16)
    invisible_ms = options.number("invisible-ms", 15000)
    change_ms = options.number("change-invisible-ms", 0)
    steps = [*(["skip"] if options.flag("fail-first") else []), *(["change"] if change_ms else [])]
    deliveries: dict[str, int] = {}
    last_delivery: dict[str, int] = {}
    last_asked: dict[str, int] = {}
    acked: set[str] = set()
    receives = total = 0
    consumer = new_simple_consumer(options, group, run.topic)
    consumer.startup()
    run.events.emit(
        "started", client="simple-consumer", group=group, topic=run.topic,
        invisibleMs=seconds(invisible_ms) * 1000, maxMessages=max_messages,
        clientId=consumer.client_id,
    )  # fmt: skip
    while len(acked) < run.count:
        run.check_deadline(f"{run.count} messages acked, {len(acked)} so far")
        asked = now_ms()
        messages = consumer.receive(max_messages, seconds(invisible_ms)) or []
        now = now_ms()
        receives += 1
        run.events.emit("receive", messages=len(messages), askedAt=asked, answeredAt=now)
        for message in messages:
            mid = message.message_id
            delivery = deliveries[mid] = deliveries.get(mid, 0) + 1
            previous = last_delivery.get(mid)
            last_delivery[mid] = now
            previous_asked = last_asked.get(mid)
            last_asked[mid] = asked
            total += 1
            wanted = run.expected(message)
            step = "ack" if not wanted or delivery > len(steps) else steps[delivery - 1]
            run.events.emit(
                "received", **received("simple", message, now), delivery=delivery,
                sinceLastDeliveryMs=None if previous is None else now - previous,
                sinceLastAskedMs=None if previous_asked is None else now - previous_asked,
                expected=wanted, action=step,
            )  # fmt: skip
            body = text(message.body)
            if step == "skip":
                run.events.emit(
                    "notAcked", messageId=mid, body=body,
                    visibleAgainAt=now + seconds(invisible_ms) * 1000,
                )  # fmt: skip
            elif step == "change":
                consumer.change_invisible_duration(message, seconds(change_ms))
                changed_at = now_ms()
                run.events.emit(
                    "invisibleChanged", messageId=mid, body=body,
                    invisibleMs=seconds(change_ms) * 1000, changedAt=changed_at,
                    visibleAgainAt=changed_at + seconds(change_ms) * 1000,
                )  # fmt: skip
            else:
                consumer.ack(message)
                run.events.emit(
                    "acked", messageId=mid, body=body, ackedAt=now_ms(), expected=wanted
                )
                if wanted:
                    acked.add(mid)
    consumer.shutdown()
    return {"acked": len(acked), "deliveries": total, "receives": receives}


class Recorder:
    """The push consumer's listener: FAILURE for the first ``fail_times`` deliveries of each
    expected message, SUCCESS after; each delivery printed."""

    def __init__(self, run: Run, kind: str, fail_times: int) -> None:
        self.run = run
        self.kind = kind
        self.fail_times = fail_times
        self.lock = threading.Lock()
        self.deliveries: dict[str, int] = {}
        self.last_delivery: dict[str, int] = {}
        self.succeeded: set[str] = set()
        self.order: dict[str, list[int]] = {}
        self.total = 0

    def consume(self, message: Message) -> object:
        now = now_ms()
        mid = message.message_id
        wanted = self.run.expected(message)
        with self.lock:
            delivery = self.deliveries[mid] = self.deliveries.get(mid, 0) + 1
            previous = self.last_delivery.get(mid)
            self.last_delivery[mid] = now
            self.total += 1
        success = not (wanted and delivery <= self.fail_times)
        self.run.events.emit(
            "received", **received(self.kind, message, now), delivery=delivery,
            sinceLastDeliveryMs=None if previous is None else now - previous,
            expected=wanted, result="SUCCESS" if success else "FAILURE",
        )  # fmt: skip
        seq = message.properties.get("seq")
        with self.lock:
            if success and wanted and mid not in self.succeeded:
                self.succeeded.add(mid)
                if seq is not None:
                    self.order.setdefault(message.message_group or "", []).append(int(seq))
        return consume_result(success)

    def consumed(self) -> int:
        with self.lock:
            return len(self.succeeded)


def push_consume(run: Run, fifo: bool) -> dict[str, object]:
    """A push consumer whose listener answers FAILURE to the first ``--fail-times`` (default 0)
    deliveries of each message and SUCCESS after, until ``--count`` distinct messages
    succeeded; "fifo" also prints each message group's order ("order" events)."""
    options = run.options
    group = options.require("group")
    fail_times = options.number("fail-times", 0)
    recorder = Recorder(run, "fifo" if fifo else "push", fail_times)
    consumer = new_push_consumer(options, group, run.topic, recorder)
    consumer.startup()
    run.events.emit(
        "started", client="fifo-push-consumer" if fifo else "push-consumer", group=group,
        topic=run.topic, failTimes=fail_times, clientId=consumer.client_id,
    )  # fmt: skip
    run.wait(f"{run.count} messages consumed", lambda: recorder.consumed() >= run.count)
    consumer.shutdown()
    in_order = True
    with recorder.lock:
        order = {g: list(seqs) for g, seqs in sorted(recorder.order.items())}
        total = recorder.total
    for message_group, seqs in order.items():
        ordered = all(a < b for a, b in itertools.pairwise(seqs))
        in_order = in_order and ordered
        run.events.emit("order", messageGroup=message_group, seqs=seqs, inOrder=ordered)
    summary: dict[str, object] = {"consumed": recorder.consumed(), "deliveries": total}
    if fifo:
        summary["inOrder"] = in_order
    return summary


def scenario(run: Run, name: str) -> dict[str, object]:
    match name:
        case "send":
            return send(run, "normal")
        case "send-fifo":
            return send(run, "fifo")
        case "send-delay":
            return send(run, "delay")
        case "simple-consume":
            return simple_consume(run)
        case "push-consume":
            return push_consume(run, fifo=False)
        case "fifo-consume":
            return push_consume(run, fifo=True)
    raise ValueError(f"unknown scenario {name} ({', '.join(SCENARIOS)})")


def _watchdog(events: Events, timeout_ms: int) -> None:
    def halt() -> NoReturn:
        events.emit("error", error="still running 5 s past the deadline")
        os._exit(3)

    timer = threading.Timer((timeout_ms + 5000) / 1000, halt)
    timer.daemon = True
    timer.start()


def main(args: Iterable[str]) -> int:
    events = Events()
    argv = list(args)
    name = argv[0] if argv else ""
    try:
        options = Options.parse(argv[1:])
    except ValueError as bad:
        events.emit("error", error=str(bad))
        return 1
    timeout_ms = options.number("timeout-ms", 30000)
    _watchdog(events, timeout_ms)
    try:
        run = Run(options, events, now_ms() + timeout_ms)
        summary = scenario(run, name)
    except Deadline as missing:
        events.emit("error", error=str(missing))
        return 2
    except Exception as failure:  # the driver reports every failure as an event
        events.emit("error", error=repr(failure), trace=traceback.format_exc())
        return 1
    events.emit("done", scenario=name, **summary)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    # The client's threads (its schedulers, its gRPC event loop) may outlive shutdown.
    os._exit(code)
