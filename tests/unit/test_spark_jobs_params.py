"""The pure parts of the dead-letter jobs and the ``reconsume`` writer: the job's options and
their refusals, the result JSON within a termination message, a run's scope planned (against
brokers faked in memory), limited or advanced, the writer's schema check and options, and rows
turned into messages. No Spark session: pyspark is imported for its types only."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyspark")  # reconsume.spark.writer builds on pyspark's writer classes

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from reconsume.client.admin import AdminClient
from reconsume.client.routes import BrokerRoute, MessageQueue, TopicRoute
from reconsume.errors import InvalidArgumentError, InvalidNameError
from reconsume.message import properties as props
from reconsume.message.configs import PERM_READ_WRITE, TopicConfig
from reconsume.spark.jobs.params import Action, JobParams, parse
from reconsume.spark.jobs.result import COUNTS, TERMINATION_MESSAGE_LIMIT, Result
from reconsume.spark.jobs.scope import QueueScope, Scope, plan
from reconsume.spark.ledger import LEDGER_TOPIC, SENDING, Entry, Resume, TargetMark
from reconsume.spark.offsets import QueueKey
from reconsume.spark.outgoing import to_message
from reconsume.spark.schema import SCHEMA
from reconsume.spark.sender import Counts
from reconsume.spark.writer import check_schema, parse_send_options, tracked_columns
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand

BASE = ["--name-server", "ns-0:9876", "--group", "orders-consumer"]


# ------------------------------------------------------------------ job parameters


def test_drain_with_every_option() -> None:
    params = parse(
        [
            "drain",
            "--name-server",
            "ns-0:9876; ns-1:9876,ns-2:9876",
            "--group",
            "orders-consumer",
            "--job",
            "nightly-drain",
            "--filter",
            "reconsumeTimes >= 3 AND originTopic = 'orders'",
            "--format",
            "json",
            "--path",
            "s3a://archive/dlq",
            "--max-messages",
            "5000",
            "--rate-per-second",
            "200",
            "--dry-run",
            "--master",
            "spark://master:7077",
            "--conf",
            "spark.executor.memory=2g",
            "--conf",
            " spark.hadoop.fs.s3a.endpoint =http://minio:9000?a=b",
            "--termination-log",
            "/dev/termination-log",
            "--timeout",
            "2.5",
        ]
    )
    assert params == JobParams(
        action=Action.DRAIN,
        name_servers=("ns-0:9876", "ns-1:9876", "ns-2:9876"),
        group="orders-consumer",
        job="nightly-drain",
        filter="reconsumeTimes >= 3 AND originTopic = 'orders'",
        sink_format="json",
        sink_path="s3a://archive/dlq",
        target_topic=None,
        max_messages=5000,
        rate_per_second=200,
        dry_run=True,
        master="spark://master:7077",
        conf=(
            ("spark.executor.memory", "2g"),
            ("spark.hadoop.fs.s3a.endpoint", "http://minio:9000?a=b"),
        ),
        termination_log="/dev/termination-log",
        timeout_s=2.5,
    )


def test_reprocess_with_a_target_topic_and_the_defaults() -> None:
    params = parse(["reprocess", *BASE, "--target-topic", "orders-replay"])
    assert params.action is Action.REPROCESS
    assert params.target_topic == "orders-replay"
    assert params.job == "reprocess-orders-consumer"  # <action>-<group>
    assert (params.sink_format, params.sink_path, params.filter) == ("parquet", None, None)
    assert (params.max_messages, params.rate_per_second, params.dry_run) == (None, None, False)
    assert (params.master, params.conf, params.termination_log) == ("local[*]", (), None)
    assert params.timeout_s == 10.0
    assert parse(["purge", *BASE]).job == "purge-orders-consumer"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["drain", *BASE], "drain needs --path"),
        (["reprocess", *BASE, "--path", "/archive"], "--path applies only to drain"),
        (["purge", *BASE, "--path", "/archive"], "--path applies only to drain"),
        (
            ["drain", *BASE, "--path", "/archive", "--target-topic", "orders"],
            "--target-topic applies only to reprocess",
        ),
        (["purge", *BASE, "--target-topic", "orders"], "--target-topic applies only to reprocess"),
        (["reprocess", *BASE, "--max-messages", "0"], "--max-messages must be at least 1, not 0"),
        (["purge", *BASE, "--max-messages", "-5"], "--max-messages must be at least 1"),
        (["reprocess", *BASE, "--rate-per-second", "0"], "--rate-per-second must be at least 1"),
        (["purge", *BASE, "--conf", "spark.executor.memory"], "is not KEY=VALUE"),
        (["purge", *BASE, "--conf", " =2g"], "is not KEY=VALUE"),
        (["purge", *BASE, "--filter", ""], "--filter is empty"),
        (["purge", *BASE, "--filter", " \t "], "--filter is empty"),
        (["purge", "--name-server", " ; ", "--group", "g"], "--name-server is required"),
    ],
)
def test_bad_parameters_are_refused(argv: list[str], error: str) -> None:
    with pytest.raises(InvalidArgumentError, match=error):
        parse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["reprocess", *BASE, "--target-topic", "orders replay"],
        ["reprocess", *BASE, "--target-topic", "t" * 128],
        ["purge", "--name-server", "ns:9876", "--group", "orders/consumer"],
    ],
)
def test_bad_names_are_refused(argv: list[str]) -> None:
    with pytest.raises(InvalidNameError):
        parse(argv)


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["drain", *BASE, "--path", "/a", "--format", "csv"], "invalid choice: 'csv'"),
        (["archive", *BASE], "invalid choice: 'archive'"),
        (["Drain", *BASE, "--path", "/a"], "invalid choice: 'Drain'"),
        (["purge", "--group", "g"], "the following arguments are required: --name-server"),
        (["purge", *BASE, "--max-messages", "many"], "invalid int value: 'many'"),
        (["purge", *BASE, "--timeout", "soon"], "invalid float value: 'soon'"),
    ],
)
def test_malformed_command_lines_exit_with_usage(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    assert complaint in capsys.readouterr().err


def test_actions_parse_whatever_their_case() -> None:
    assert Action.parse("DRAIN") is Action.DRAIN
    assert Action.parse("reProcess") is Action.REPROCESS
    with pytest.raises(InvalidArgumentError, match="not drain, reprocess or purge"):
        Action.parse("delete")


# ------------------------------------------------------------------ result


def result(**changes: Any) -> Result:
    values: dict[str, Any] = {
        "action": Action.REPROCESS,
        "group": "orders-consumer",
        "job": "reprocess-orders-consumer",
        "dry_run": False,
        "start_time": "2025-01-02T03:04:05Z",
    }
    values.update(changes)
    return Result(**values)


def test_a_result_has_every_count_and_only_those() -> None:
    assert COUNTS == ("read", "matched", "archived", "resent", "purged", "kept", "skipped")
    data = json.loads(result().to_json())
    assert data["counts"] == dict.fromkeys(COUNTS, 0)
    partial = result(counts={"read": 7, "resent": 5, "extra": 9}, completion_time="t1")
    data = json.loads(partial.to_json())
    assert data["counts"] == {**dict.fromkeys(COUNTS, 0), "read": 7, "resent": 5}
    assert data == {
        "phase": "Succeeded",
        "action": "Reprocess",
        "group": "orders-consumer",
        "job": "reprocess-orders-consumer",
        "dryRun": False,
        "counts": data["counts"],
        "offsets": {},
        "startTime": "2025-01-02T03:04:05Z",
        "completionTime": "t1",
    }


def test_a_failure_names_its_reason_and_message() -> None:
    failed = result().failed("InvalidFilter", "filter 'x >': syntax error")
    data = json.loads(failed.to_json())
    assert (data["phase"], data["reason"], data["message"]) == (
        "Failed",
        "InvalidFilter",
        "filter 'x >': syntax error",
    )
    assert data["completionTime"].endswith("Z")


def test_a_huge_message_is_shortened_to_fit_a_termination_message() -> None:
    offsets = {"start": {"%DLQ%orders-consumer": {f"broker-{i}:0": i for i in range(20)}}}
    failed = result(offsets=offsets).failed("JobFailed", "boom " * 100_000)
    text = failed.to_json()
    assert len(text.encode()) <= TERMINATION_MESSAGE_LIMIT
    data = json.loads(text)
    assert data["message"].startswith("boom boom ")
    assert data["message"].endswith("...")
    assert len(data["message"]) > TERMINATION_MESSAGE_LIMIT // 2  # shortened, not emptied
    assert data["offsets"] == offsets
    assert data["reason"] == "JobFailed"


@given(st.text(min_size=1, max_size=20_000))
def test_any_message_fits_a_termination_message(message: str) -> None:
    text = result().failed("JobFailed", message).to_json()
    assert len(text.encode()) <= TERMINATION_MESSAGE_LIMIT
    shown = json.loads(text)["message"]
    assert shown == message or (shown.endswith("...") and message.startswith(shown[:-3]))


# ------------------------------------------------------------------ scope

A0, A1, B0 = QueueKey("broker-a", 0), QueueKey("broker-a", 1), QueueKey("broker-b", 0)
SCOPE = Scope(
    "orders-consumer",
    (
        QueueScope(A0, "10.0.0.1:10911", 10, 50),
        QueueScope(A1, "10.0.0.1:10911", 0, 0),
        QueueScope(B0, "10.0.0.2:10911", 5, 8),
    ),
    (("broker-a", "10.0.0.1:10911", 3), ("broker-b", "10.0.0.2:10911", 0)),
)


def ranges(scope: Scope) -> dict[QueueKey, tuple[int, int]]:
    return {q.key: (q.start, q.end) for q in scope.queues}


def test_a_scope_limited_to_a_failed_attempts_ends() -> None:
    # A failed attempt's scope ended at A0 30 and B0 20 (further than this one reaches).
    limited = SCOPE.limited({A0: 30, B0: 20})
    assert ranges(limited) == {A0: (10, 30), A1: (0, 0), B0: (5, 8)}
    assert limited.size == 23
    # An end before the start leaves the queue empty, never reversed.
    assert ranges(SCOPE.limited({A0: 4, B0: 5})) == {A0: (10, 10), A1: (0, 0), B0: (5, 5)}
    assert SCOPE.limited({A0: 4}).size == 3
    # The rest of the scope is kept.
    assert (limited.group, limited.ledger_start) == (SCOPE.group, SCOPE.ledger_start)
    assert limited.brokers == SCOPE.brokers
    assert SCOPE.limited({}) == SCOPE


def test_a_scope_advanced_past_a_crashed_attempts_finished_part() -> None:
    advanced = SCOPE.advanced({A0: 25, B0: 99})
    assert ranges(advanced) == {A0: (25, 50), A1: (0, 0), B0: (8, 8)}  # never past the end
    assert advanced.size == 25
    assert ranges(SCOPE.advanced({A0: 3})) == ranges(SCOPE)  # never backwards
    assert advanced.committed() == {A0: 25, A1: 0, B0: 8}
    assert advanced.starting().to_dict() == {
        "%DLQ%orders-consumer": {"broker-a:0": 25, "broker-a:1": 0, "broker-b:0": 8}
    }
    assert advanced.ending() == SCOPE.ending()
    assert advanced.ledger_start == SCOPE.ledger_start
    assert SCOPE.advanced({}) == SCOPE


def test_limited_then_advanced_is_what_is_left_of_a_failed_attempt() -> None:
    left = SCOPE.limited({A0: 30, B0: 7}).advanced({A0: 12, B0: 7})
    assert ranges(left) == {A0: (12, 30), A1: (0, 0), B0: (7, 7)}
    assert left.size == 18
    assert left.topic == "%DLQ%orders-consumer"


ADDRESS_A, ADDRESS_B = "10.0.0.1:10911", "10.0.0.2:10911"


class PlanBrokers:
    """What :func:`plan` asks of an AdminClient, for two brokers holding one dead-letter queue
    each (offsets 0..10, 4 handled), the ledger topic on those of ``with_ledger``; records
    the requests that name a broker."""

    def __init__(
        self, with_ledger: set[str], acked: dict[str, list[tuple[int, int]]] | None = None
    ) -> None:
        self.addresses = {"broker-a": ADDRESS_A, "broker-b": ADDRESS_B}
        self.with_ledger = with_ledger
        self.acked = acked
        """Per address, what filtered runs acknowledged past offset 4 (None: brokers that do
        not know QUERY_ACKED_OFFSETS)."""
        self.requests: list[tuple[str, str]] = []
        """(request code name, broker address) in order."""
        self.created: list[TopicConfig] = []
        self.broker_api = self

    async def route(self, topic: str) -> TopicRoute:
        brokers = {name: BrokerRoute(name, "c1", {0: a}) for name, a in self.addresses.items()}
        queues = tuple(MessageQueue(topic, name, 0) for name in self.addresses)
        return TopicRoute(topic, brokers, queues, queues)

    async def min_offset(self, address: str, queue: MessageQueue) -> int:
        self.requests.append(("GET_MIN_OFFSET", address))
        return 0

    async def max_offset(self, address: str, queue: MessageQueue) -> int:
        self.requests.append(("GET_MAX_OFFSET", address))
        return 10

    async def call(
        self, address: str, code: int, fields: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        assert code == RequestCode.QUERY_ACKED_OFFSETS
        assert fields is not None
        assert fields["consumerGroup"] == "%DLQ%orders-consumer"
        self.requests.append(("QUERY_ACKED_OFFSETS", address))
        request = RemotingCommand.request(code, fields)
        if self.acked is None:
            return request.respond(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no such request")
        answer = {"committedOffset": 4, "acked": self.acked.get(address, [])}
        return request.respond(body=json.dumps(answer).encode())

    async def committed_offset_at(self, address: str, group: str, queue: MessageQueue) -> int:
        assert group == "%DLQ%orders-consumer"
        self.requests.append(("QUERY_CONSUMER_OFFSET", address))
        return -1 if queue.topic == LEDGER_TOPIC else 4

    async def topic_configs(self, address: str) -> dict[str, TopicConfig]:
        self.requests.append(("GET_ALL_TOPIC_CONFIG", address))
        ledger = TopicConfig(LEDGER_TOPIC, 1, 1, PERM_READ_WRITE)
        return {LEDGER_TOPIC: ledger} if address in self.with_ledger else {}

    async def update_topic(self, config: TopicConfig, *, brokers: list[str]) -> list[str]:
        self.requests.extend(("UPDATE_AND_CREATE_TOPIC", address) for address in brokers)
        self.created.append(config)
        return brokers

    def plan(self, *, prepare_ledger: bool, max_messages: int | None = None) -> Scope:
        admin = cast(AdminClient, self)
        return asyncio.run(
            plan(admin, "orders-consumer", max_messages=max_messages,
                 prepare_ledger=prepare_ledger)
        )  # fmt: skip


def created_on(brokers: PlanBrokers) -> list[str]:
    return [address for code, address in brokers.requests if code == "UPDATE_AND_CREATE_TOPIC"]


def test_a_plan_creates_no_ledger_where_the_brokers_have_it() -> None:
    """Creating a topic needs an admin account; a job whose account is limited to its group
    only reads the brokers' topics (GET_ALL_TOPIC_CONFIG, any account) and finds the ledger."""
    brokers = PlanBrokers(with_ledger={ADDRESS_A, ADDRESS_B})
    scope = brokers.plan(prepare_ledger=True)
    assert created_on(brokers) == []
    assert ("GET_ALL_TOPIC_CONFIG", ADDRESS_A) in brokers.requests
    assert ("GET_ALL_TOPIC_CONFIG", ADDRESS_B) in brokers.requests
    assert ranges(scope) == {A0: (4, 10), B0: (4, 10)}
    assert scope.ledger_start == (("broker-a", ADDRESS_A, -1), ("broker-b", ADDRESS_B, -1))


def test_a_plan_leaves_out_what_filtered_runs_acknowledged() -> None:
    acked = {ADDRESS_A: [(6, 8)], ADDRESS_B: [(5, 10)]}
    scope = PlanBrokers(with_ledger={ADDRESS_A, ADDRESS_B}, acked=acked).plan(prepare_ledger=True)
    assert ranges(scope) == {A0: (4, 10), B0: (4, 10)}
    assert [q.acked for q in scope.queues] == [((6, 8),), ((5, 10),)]
    assert [len(q) for q in scope.queues] == [4, 1]
    assert scope.size == 5
    assert json.loads(scope.skip_json()) == {"broker-a:0": [[6, 8]], "broker-b:0": [[5, 10]]}
    # A budget counts what is still to read: broker-a's 4, 5, 8 and 9 (6 and 7 acknowledged).
    budget = PlanBrokers(with_ledger={ADDRESS_A, ADDRESS_B}, acked=acked).plan(
        prepare_ledger=True, max_messages=4
    )
    assert ranges(budget) == {A0: (4, 10), B0: (4, 4)}
    assert budget.size == 4
    # Brokers that keep no acknowledged offsets: the committed offset alone.
    old = PlanBrokers(with_ledger={ADDRESS_A, ADDRESS_B}).plan(prepare_ledger=True)
    assert ranges(old) == {A0: (4, 10), B0: (4, 10)}
    assert old.skip_json() == "{}"


def test_a_plan_creates_the_ledger_only_where_it_is_missing() -> None:
    brokers = PlanBrokers(with_ledger={ADDRESS_A})
    scope = brokers.plan(prepare_ledger=True)
    assert created_on(brokers) == [ADDRESS_B]
    assert brokers.created == [TopicConfig(LEDGER_TOPIC, 1, 1, PERM_READ_WRITE)]
    assert scope == PlanBrokers(with_ledger={ADDRESS_A, ADDRESS_B}).plan(prepare_ledger=True)
    everywhere = PlanBrokers(with_ledger=set())
    everywhere.plan(prepare_ledger=True)
    assert created_on(everywhere) == [ADDRESS_A, ADDRESS_B]
    assert len(everywhere.created) == 1  # one call; AdminClient sends a request per broker


def test_a_dry_run_plan_neither_creates_nor_looks_for_the_ledger() -> None:
    brokers = PlanBrokers(with_ledger=set())
    scope = brokers.plan(prepare_ledger=False)
    assert not [code for code, _ in brokers.requests if "TOPIC" in code]
    assert scope == PlanBrokers(with_ledger={ADDRESS_A, ADDRESS_B}).plan(prepare_ledger=True)


# ------------------------------------------------------------------ writer schema

PLAIN = StructType(
    [StructField("topic", StringType()), StructField("body", BinaryType())],
)
TRACKED = StructType(
    [
        *PLAIN.fields,
        StructField("sourceBroker", StringType()),
        StructField("sourceQueueId", IntegerType()),
        StructField("sourceQueueOffset", LongType()),
    ]
)


def with_fields(schema: StructType, *fields: StructField, without: str = "") -> StructType:
    kept = [
        f for f in schema.fields if f.name != without and f.name not in {g.name for g in fields}
    ]
    return StructType([*kept, *fields])


@pytest.mark.parametrize(
    ("schema", "tracked"),
    [
        (PLAIN, False),
        (with_fields(PLAIN, StructField("body", StringType())), False),
        (SCHEMA, False),  # a read's rows, written back as they are
        (
            with_fields(
                PLAIN,
                StructField("properties", MapType(StringType(), StringType())),
                StructField("tags", StringType()),
                StructField("keys", ArrayType(StringType())),
                StructField("ignored", IntegerType()),
            ),
            False,
        ),
        (TRACKED, True),
        (TRACKED, False),
        (
            with_fields(
                TRACKED,
                StructField("sourceQueueId", LongType()),
                StructField("sourceQueueOffset", IntegerType()),
            ),
            True,
        ),
    ],
)
def test_schemas_with_the_columns_a_send_needs_are_accepted(
    schema: StructType, tracked: bool
) -> None:
    check_schema(schema, tracked=tracked)


@pytest.mark.parametrize(
    ("schema", "tracked", "error"),
    [
        (with_fields(PLAIN, without="topic"), False, "have no column 'topic'"),
        (with_fields(PLAIN, without="body"), False, "have no column 'body'"),
        (
            with_fields(PLAIN, StructField("body", IntegerType())),
            False,
            "column 'body' is int, not binary or string",
        ),
        (
            with_fields(PLAIN, StructField("topic", BinaryType())),
            False,
            "column 'topic' is binary, not string",
        ),
        (
            with_fields(PLAIN, StructField("tags", ArrayType(StringType()))),
            False,
            "column 'tags' is array<string>, not string",
        ),
        (
            with_fields(PLAIN, StructField("keys", StringType())),
            False,
            "column 'keys' is string, not array<string>",
        ),
        (
            with_fields(PLAIN, StructField("properties", MapType(StringType(), LongType()))),
            False,
            "column 'properties' is map<string,bigint>, not map<string,string>",
        ),
        (SCHEMA, True, "have no column 'sourceBroker'"),
        (
            with_fields(TRACKED, without="sourceQueueOffset"),
            True,
            "have no column 'sourceQueueOffset'",
        ),
        (
            with_fields(TRACKED, StructField("sourceQueueId", StringType())),
            True,
            "column 'sourceQueueId' is string, not int or bigint",
        ),
    ],
)
def test_schemas_without_what_a_send_needs_are_refused(
    schema: StructType, tracked: bool, error: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=error):
        check_schema(schema, tracked=tracked)


def test_the_tracked_columns() -> None:
    assert tracked_columns() == ("sourceBroker", "sourceQueueId", "sourceQueueOffset")


# ------------------------------------------------------------------ writer options


def test_send_options_parsed_whatever_the_case_of_their_names() -> None:
    pending = Entry(
        "job-1", SENDING, QueueKey("broker-a", 0), 10, 20, (TargetMark("t", "a", 1, 5),)
    )
    resume = {"broker-a:0": Resume(10, pending).to_dict(), "broker-b:0": {"done": 4}}
    options = parse_send_options(
        {
            "NAMESERVER": "ns-0:9876;ns-1:9876",
            "batchSize": "16",
            "maxratepertask": "2.5",
            "ledgerJob": "job-1",
            "LedgerGroup": "orders-consumer",
            "ledgerResume": json.dumps(resume),
            "ledgerBrokers": json.dumps({"broker-a": "10.0.0.1:10911"}),
        }
    )
    assert options.name_servers == ("ns-0:9876", "ns-1:9876")
    assert (options.batch, options.rate_per_task) == (16, 2.5)
    assert (options.job, options.group) == ("job-1", "orders-consumer")
    assert options.brokers == {"broker-a": "10.0.0.1:10911"}
    assert options.resume == {
        QueueKey("broker-a", 0): Resume(10, pending),
        QueueKey("broker-b", 0): Resume(4),
    }


def test_plain_send_options_have_their_defaults() -> None:
    options = parse_send_options({"nameServer": "ns:9876"})
    assert (options.batch, options.rate_per_task, options.job, options.group) == (
        256,
        None,
        None,
        None,
    )
    assert (dict(options.resume), dict(options.brokers)) == ({}, {})


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({}, "option nameServer .* is missing"),
        ({"nameServer": " ;, "}, "option nameServer .* is missing"),
        ({"nameServer": "ns:9876", "ledgerJob": "j"}, "ledgerBrokers is required with ledgerJob"),
        (
            {"nameServer": "ns:9876", "ledgerJob": "j", "ledgerBrokers": "{}"},
            "ledgerBrokers is required with ledgerJob",
        ),
        ({"nameServer": "ns:9876", "maxRatePerTask": "-1"}, "maxratepertask must be positive"),
        ({"nameServer": "ns:9876", "maxRatePerTask": "0"}, "maxratepertask must be positive"),
        ({"nameServer": "ns:9876", "batchSize": "0"}, "batchsize must be positive"),
        ({"nameServer": "ns:9876", "batchSize": "1.5"}, "batchsize must be a number"),
        ({"nameServer": "ns:9876", "maxRatePerTask": "fast"}, "must be a number, not 'fast'"),
        ({"nameServer": "ns:9876", "ledgerResume": '{"b0": {"done": 1}}'}, "not <brokerName>"),
    ],
)
def test_bad_send_options_are_refused(options: dict[str, str], error: str) -> None:
    with pytest.raises(InvalidArgumentError, match=error):
        parse_send_options(options)


# ------------------------------------------------------------------ rows as messages


def test_a_row_becomes_a_message() -> None:
    message = to_message(
        {
            "topic": "orders",
            "body": bytearray(b"\x00\xff"),
            "properties": {"number": "7"},
            "tags": "even",
            "keys": ["key-7", "order-0"],
            "msgId": "ignored",
        }
    )
    assert (message.topic, message.body) == ("orders", b"\x00\xff")
    assert isinstance(message.body, bytes)
    assert message.properties == {"number": "7", props.TAGS: "even", props.KEYS: "key-7 order-0"}
    assert (message.tags, message.keys) == ("even", ["key-7", "order-0"])


def test_the_tags_and_keys_columns_override_the_properties() -> None:
    stale = {props.TAGS: "old", props.KEYS: "old-1 old-2", "number": "1"}
    message = to_message(
        {"topic": "t", "body": b"", "properties": stale, "tags": "new", "keys": ["k"]}
    )
    assert (message.tags, message.keys) == ("new", ["k"])
    assert message.properties["number"] == "1"
    assert stale[props.TAGS] == "old"  # the row is not changed
    # Null columns leave the properties' tags and keys; an empty keys column removes them.
    kept = to_message({"topic": "t", "body": b"", "properties": stale, "tags": None, "keys": None})
    assert (kept.tags, kept.keys) == ("old", ["old-1", "old-2"])
    emptied = to_message({"topic": "t", "body": b"", "properties": stale, "keys": []})
    assert props.KEYS not in emptied.properties


def test_a_string_body_is_encoded_and_a_null_body_is_empty() -> None:
    assert to_message({"topic": "t", "body": "día"}).body == "día".encode()
    assert to_message({"topic": "t", "body": None}).body == b""
    assert to_message({"topic": "t"}).properties == {}


@pytest.mark.parametrize("row", [{"body": b"x"}, {"topic": None, "body": b"x"}, {"topic": ""}])
def test_a_row_without_a_topic_is_refused(row: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError, match="a row to send has no topic"):
        to_message(row)


def test_a_null_property_value_is_left_out() -> None:
    # properties map<string,string> may hold nulls (check_schema accepts valueContainsNull):
    # they are left out instead of failing the send.
    message = to_message({"topic": "t", "body": b"", "properties": {"a": "1", "b": None}})
    props.encode_properties(message.properties)
    assert message.properties == {"a": "1"}


def test_a_null_key_is_left_out() -> None:
    # keys array<string> may hold nulls (check_schema accepts containsNull).
    assert to_message({"topic": "t", "body": b"", "keys": ["k", None]}).keys == ["k"]


def test_counts_add_up_over_tasks() -> None:
    parts: list[dict[str, Any]] = [
        {"sent": {"orders": 3, "%DLQ%g": 1}, "skipped": 2},
        {"sent": {"orders": 4}},
        {},
        Counts(Counter({"audit": 5}), 1).to_dict(),
    ]
    total = Counts.total(parts)
    assert total.sent == Counter({"orders": 7, "audit": 5, "%DLQ%g": 1})
    assert total.skipped == 3
    assert total.to_dict() == {"sent": {"orders": 7, "%DLQ%g": 1, "audit": 5}, "skipped": 3}
    assert Counts.total([]).to_dict() == {"sent": {}, "skipped": 0}


def test_the_jobs_import_without_numpy() -> None:
    # The image's `spark` extra is pyspark and pyarrow: numpy is not in it.
    code = "import sys; sys.modules['numpy'] = None; import reconsume.spark.jobs.main"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
