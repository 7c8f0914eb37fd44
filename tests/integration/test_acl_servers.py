"""Access control on real servers: a name server and a broker started with ``--acl-file``, every
request code either serves sent unsigned, with a wrong signature, by an account without the
permission and by one with it; the Python client with and without credentials; the broker's
own registration signed with the cluster's admin credential; a changed ACL file in force
within a bound; refusals counted in /metrics and logged once; a dead-letter job's requests
with an account limited to its group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconsume.broker.acl_resources import ADMIN_CODES, SIGNATURE_ONLY_CODES
from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.client.routes import MessageQueue
from reconsume.errors import RemotingError
from reconsume.message.ids import parse_offset_msg_id
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_job_group, dead_letter_topic
from reconsume.namesrv.access import NAMESRV_ADMIN_CODES, NAMESRV_OPEN_CODES
from reconsume.spark import ledger
from reconsume.spark.jobs.scope import acknowledge, ledger_entries, mark_handled, plan
from reconsume.spark.offsets import QueueKey
from reconsume.wire.broker_headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.credential_files import CredentialFiles
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.errors import NoPermissionError
from reconsume.wire.signing import ACCESS_KEY_ENV, SECRET_KEY_ENV, Credentials

from ..acl_requests import ADMIN, DECISIONS, SIGNATURE_ONLY, command
from ..polling import eventually, eventually_async
from ..scratch import module_dir
from .cluster import SMALL_SEGMENTS
from .processes import ServerProcess, start_server
from .retry_support import http_address, metric, read_queue, scrape_now
from .test_broker_http import get
from .wire_client import BrokerClient

ADMIN_KEY = Credentials("cluster-admin", "admin-secret-0123456789")
ORDERS = Credentials("orders-team", "orders-secret-0123456789")
OUTSIDER = Credentials("outsider", "outsider-secret-0123456789")
FORGER = Credentials("orders-team", "not-the-orders-secret")
EVERY_TOPIC = Credentials("every-topic", "every-secret-0123456789")
DEAD_LETTERS = Credentials("cg-dead-letters", "dead-letters-secret-0123456789")
"""What a dead-letter job of group cg needs: cg (its retry and dead-letter topics, and the
jobs' group %DLQ%cg) and the ledger topic."""

ACL = f"""
[[accounts]]
access_key = "{ADMIN_KEY.access_key}"
secret_key = "{ADMIN_KEY.secret_key}"
admin = true

[[accounts]]
access_key = "{ORDERS.access_key}"
secret_key = "{ORDERS.secret_key}"
default_topic_perm = "DENY"
default_group_perm = "DENY"
topic_perms = {{ orders = "PUB|SUB" }}
group_perms = {{ cg = "SUB" }}

[[accounts]]
access_key = "{EVERY_TOPIC.access_key}"
secret_key = "{EVERY_TOPIC.secret_key}"
default_topic_perm = "PUB|SUB"
default_group_perm = "SUB"

[[accounts]]
access_key = "{OUTSIDER.access_key}"
secret_key = "{OUTSIDER.secret_key}"

[[accounts]]
access_key = "{DEAD_LETTERS.access_key}"
secret_key = "{DEAD_LETTERS.secret_key}"
topic_perms = {{ {ledger.LEDGER_TOPIC} = "PUB|SUB" }}
group_perms = {{ cg = "SUB" }}
"""
REQUEST_TIMEOUT_S = 5.0


@dataclass
class Servers:
    namesrv: ServerProcess
    broker: ServerProcess
    acl_file: Path


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with module_dir(tmp_path_factory, "acl") as root:
        acl_file = root / "acl.toml"
        acl_file.write_text(ACL)
        config = root / "broker.toml"
        config.write_text(SMALL_SEGMENTS)
        namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", "--acl-file", str(acl_file))
        broker = start_server(
            "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv.address,
            "--store-dir", str(root / "store"), "--broker-name", "broker-a",
            "--cluster", "acl", "--config", str(config), "--http-listen", "127.0.0.1:0",
            "--acl-file", str(acl_file),
            env={ACCESS_KEY_ENV: ADMIN_KEY.access_key, SECRET_KEY_ENV: ADMIN_KEY.secret_key},
        )  # fmt: skip
        try:
            asyncio.run(_invoke(broker.address, _create_topic("orders"), ADMIN_KEY))
            yield Servers(namesrv, broker, acl_file)
        finally:
            broker.kill()
            namesrv.kill()


def _create_topic(topic: str, queues: int = 2) -> RemotingCommand:
    fields = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false",
    }  # fmt: skip
    return command(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


async def _invoke(
    address: str, request: RemotingCommand, credentials: Credentials | None
) -> RemotingCommand:
    client = RemotingClient(signer=None if credentials is None else credentials.sign)
    try:
        return await client.invoke(address, request, REQUEST_TIMEOUT_S)
    finally:
        await client.close()


def _answer(address: str, make: Callable[[], RemotingCommand], who: Credentials | None) -> int:
    return asyncio.run(_invoke(address, make(), who)).code


# ------------------------------------------------------------------ every code, four ways
def _broker_sample(code: int) -> Callable[[], RemotingCommand]:
    decision = DECISIONS[code]
    if isinstance(decision, str):
        return lambda: command(code)
    return decision[0]


def _broker_entitled(code: int) -> Credentials:
    """An account that holds what ``code``'s sample request needs: the admin for admin codes,
    else one with every permission on every topic and group."""
    return ADMIN_KEY if code in ADMIN_CODES else EVERY_TOPIC


@pytest.mark.parametrize("code", DECISIONS, ids=[RequestCode(c).name for c in DECISIONS])
def test_every_broker_code_refuses_the_unsigned_the_forged_and_the_unentitled(
    servers: Servers, code: int
) -> None:
    make = _broker_sample(code)
    address = servers.broker.address
    assert _answer(address, make, None) == ResponseCode.NO_PERMISSION
    assert _answer(address, make, FORGER) == ResponseCode.NO_PERMISSION
    outsider = _answer(address, make, OUTSIDER)
    if DECISIONS[code] == SIGNATURE_ONLY:
        assert code in SIGNATURE_ONLY_CODES
        assert outsider != ResponseCode.NO_PERMISSION  # any valid account may
    else:
        assert outsider == ResponseCode.NO_PERMISSION
        if DECISIONS[code] == ADMIN:
            # Holding every permission is not being an admin.
            assert _answer(address, make, ORDERS) == ResponseCode.NO_PERMISSION
    assert _answer(address, make, _broker_entitled(code)) != ResponseCode.NO_PERMISSION


NAMESRV_CODES = sorted(NAMESRV_ADMIN_CODES | NAMESRV_OPEN_CODES)


@pytest.mark.parametrize("code", NAMESRV_CODES, ids=[RequestCode(c).name for c in NAMESRV_CODES])
def test_every_name_server_code_needs_an_admin_to_change_and_nobody_to_read(
    servers: Servers, code: int
) -> None:
    def make() -> RemotingCommand:
        return command(code, {"topic": "orders", "namespace": "n", "key": "k", "value": "v"})

    address = servers.namesrv.address
    answers = {
        who: _answer(address, make, credentials)
        for who, credentials in {
            "unsigned": None,
            "forged": FORGER,
            "non-admin": ORDERS,
            "admin": ADMIN_KEY,
        }.items()
    }
    if code in NAMESRV_OPEN_CODES:
        assert ResponseCode.NO_PERMISSION not in answers.values(), answers
    else:
        refused = {who for who, answer in answers.items() if answer == ResponseCode.NO_PERMISSION}
        assert refused == {"unsigned", "forged", "non-admin"}, answers


def test_a_refusal_names_the_account_the_resource_and_the_permission(servers: Servers) -> None:
    response = asyncio.run(
        _invoke(servers.broker.address, _broker_sample(RequestCode.PULL_MESSAGE)(), OUTSIDER)
    )
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == (
        "account outsider has no SUB on topic orders (its default_topic_perm is DENY)"
    )


# ------------------------------------------------------------------ the client, end to end
def test_a_producer_with_credentials_sends_and_one_without_is_refused(servers: Servers) -> None:
    async def scenario() -> None:
        async with Producer([servers.namesrv.address], credentials=ORDERS) as producer:
            result = await producer.send(Message("orders", b"signed"))
            assert result.queue.topic == "orders"
        async with Producer([servers.namesrv.address], credentials=OUTSIDER) as producer:
            with pytest.raises(RemotingError, match="outsider has no PUB on topic orders"):
                await producer.send(Message("orders", b"unsigned"))

    asyncio.run(scenario())


def test_the_brokers_registration_is_signed_and_an_unsigned_broker_is_not_listed(
    servers: Servers, tmp_path: Path
) -> None:
    rogue = start_server(
        "broker", "--listen", "127.0.0.1:0", "--namesrv", servers.namesrv.address,
        "--store-dir", str(tmp_path / "rogue"), "--broker-name", "broker-rogue",
        "--cluster", "acl", "--register-interval-s", "1", "--http-listen", "127.0.0.1:0",
        env={ACCESS_KEY_ENV: "", SECRET_KEY_ENV: ""},
    )  # fmt: skip
    try:
        eventually(
            lambda: any("NO_PERMISSION" in line or "code 16" in line for line in rogue.output),
            20,
            "the name server refused the unsigned registration",
        )

        async def brokers() -> set[str]:
            async with AdminClient([servers.namesrv.address], credentials=ORDERS) as admin:
                return {broker.name for broker in await admin.brokers()}

        assert asyncio.run(brokers()) == {"broker-a"}
        status, reason, _headers = get(http_address(rogue), "/readyz")
        assert status == 503
        assert "last refusal" in reason, reason
        assert "carries no AccessKey" in reason, reason
    finally:
        rogue.kill()


# ------------------------------------------------------------------ changes, metrics, logs
def test_a_revocation_is_in_force_within_two_seconds(servers: Servers) -> None:
    pull = _broker_sample(RequestCode.PULL_MESSAGE)
    address = servers.broker.address
    assert _answer(address, pull, ORDERS) != ResponseCode.NO_PERMISSION
    revoked = ACL.replace('topic_perms = { orders = "PUB|SUB" }', "")
    staged = servers.acl_file.with_suffix(".new")
    staged.write_text(revoked)
    try:
        staged.replace(servers.acl_file)  # as a Secret's update: a new file, swapped in
        started = time.monotonic()
        eventually(
            lambda: _answer(address, pull, ORDERS) == ResponseCode.NO_PERMISSION,
            2.5,
            "the revocation in force",
        )
        assert time.monotonic() - started < 2.5
    finally:
        staged.write_text(ACL)
        staged.replace(servers.acl_file)
    eventually(lambda: _answer(address, pull, ORDERS) != ResponseCode.NO_PERMISSION, 5, "restored")


def test_a_broken_acl_file_keeps_the_acl_in_force(servers: Servers) -> None:
    pull = _broker_sample(RequestCode.PULL_MESSAGE)
    samples = scrape_now(servers.broker)
    before = metric(samples, "reconsume_acl_reloads_total", result="failure")
    reloaded = metric(samples, "reconsume_acl_reloads_total", result="success")
    staged = servers.acl_file.with_suffix(".new")
    staged.write_text(ACL + "\n[[accounts]]\naccess_key = 'x'\n")
    try:
        staged.replace(servers.acl_file)
        eventually(
            lambda: (
                metric(scrape_now(servers.broker), "reconsume_acl_reloads_total", result="failure")
                > before
            ),
            5,
            "the failed reload counted",
        )
        assert _answer(servers.broker.address, pull, ORDERS) != ResponseCode.NO_PERMISSION
        assert _answer(servers.broker.address, pull, None) == ResponseCode.NO_PERMISSION
    finally:
        staged.write_text(ACL)
        staged.replace(servers.acl_file)
    eventually(
        lambda: (
            metric(scrape_now(servers.broker), "reconsume_acl_reloads_total", result="success")
            > reloaded
        ),
        5,
        "the repaired file read",
    )


def test_refusals_are_counted_and_logged_once_without_secrets(servers: Servers) -> None:
    make = _broker_sample(RequestCode.SEND_MESSAGE_V2)
    samples = scrape_now(servers.broker)
    before = metric(samples, "reconsume_acl_refused_requests_total", reason="no_permission")
    assert metric(samples, "reconsume_acl_enabled") == 1
    # Since the last reload (one clears what was logged: the new ACL may decide otherwise).
    earlier = len(servers.broker.output)
    for _ in range(20):
        assert _answer(servers.broker.address, make, OUTSIDER) == ResponseCode.NO_PERMISSION
    after = metric(
        scrape_now(servers.broker), "reconsume_acl_refused_requests_total", reason="no_permission"
    )
    assert after - before == 20
    logged = [
        line
        for line in servers.broker.output[earlier:]
        if "outsider has no PUB on topic orders" in line
    ]
    assert len(logged) == 1
    output = "".join(servers.broker.output) + "".join(servers.namesrv.output)
    for credentials in (ADMIN_KEY, ORDERS, OUTSIDER, FORGER):
        assert credentials.secret_key not in output
    assert http_address(servers.broker)


# ------------------------------------------------------------------ bad input
def _raw(code: int, fields: dict[str, str]) -> RemotingCommand:
    """A sample send with header fields set by hand (signature fields included)."""
    request = _broker_sample(code)()
    request.ext_fields.update(fields)
    return request


@pytest.mark.parametrize(
    ("fields", "remark"),
    [
        ({"AccessKey": "k" * 100_000, "Signature": "x"}, "no account for access key " + "k" * 32),
        ({"AccessKey": "\u202e\x00evil", "Signature": "x"}, "no account for access key ?"),
        ({"AccessKey": ORDERS.access_key, "Signature": "!!! not base64 !!!"}, "signature check"),
        ({"AccessKey": ORDERS.access_key, "Signature": "é" * 70_000}, "signature check"),
        ({"AccessKey": ORDERS.access_key, "Signature": ""}, "signature check"),
        ({"AccessKey": "", "Signature": "x"}, "carries no AccessKey"),
    ],
    ids=["huge-key", "control-chars", "not-base64", "huge-signature", "empty-signature", "no-key"],
)
def test_malformed_signature_fields_are_refused_and_the_broker_keeps_serving(
    servers: Servers, fields: dict[str, str], remark: str
) -> None:
    async def scenario() -> tuple[RemotingCommand, RemotingCommand]:
        raw = RemotingClient(signer=None)
        signed = RemotingClient(signer=ORDERS.sign)
        try:
            refused = await raw.invoke(
                servers.broker.address, _raw(RequestCode.SEND_MESSAGE_V2, fields), 5
            )
            served = await signed.invoke(
                servers.broker.address, _broker_sample(RequestCode.SEND_MESSAGE_V2)(), 5
            )
            return refused, served
        finally:
            await raw.close()
            await signed.close()

    refused, served = asyncio.run(scenario())
    assert refused.code == ResponseCode.NO_PERMISSION
    assert remark in (refused.remark or "")
    assert len(refused.remark or "") < 200  # nothing of the huge fields echoed
    assert served.code == ResponseCode.SUCCESS, served.remark


def test_a_flood_of_refused_requests_leaves_signed_clients_served(servers: Servers) -> None:
    """2,000 unsigned sends pipelined on one connection while a signed client sends 200: every
    signed send is stored, every unsigned one refused, one log line for the flood."""
    earlier = len(servers.broker.output)

    async def flood() -> list[int]:
        client = RemotingClient(signer=None)
        try:
            answers = await asyncio.gather(
                *(
                    client.invoke(
                        servers.broker.address, _broker_sample(RequestCode.SEND_MESSAGE_V2)(), 30
                    )
                    for _ in range(2_000)
                )
            )
            return [answer.code for answer in answers]
        finally:
            await client.close()

    async def signed() -> list[int]:
        client = RemotingClient(signer=ORDERS.sign)
        codes = []
        try:
            for _ in range(200):
                request = _broker_sample(RequestCode.SEND_MESSAGE_V2)()
                codes.append((await client.invoke(servers.broker.address, request, 30)).code)
        finally:
            await client.close()
        return codes

    async def both() -> tuple[list[int], list[int]]:
        return await asyncio.gather(flood(), signed())

    refused, stored = asyncio.run(both())
    assert set(refused) == {ResponseCode.NO_PERMISSION}
    assert stored == [ResponseCode.SUCCESS] * 200
    # At most one line: none when an earlier test's unsigned send was logged already.
    unsigned = [line for line in servers.broker.output[earlier:] if "carries no AccessKey" in line]
    assert len(unsigned) <= 1, unsigned


# ------------------------------------------------------------------ rotation under load
def _mount(root: Path, version: str, credentials: Credentials) -> None:
    """Credential files as a Secret volume holds them; a new version swaps ``..data``."""
    data = root / f"..{version}"
    data.mkdir()
    (data / "accessKey").write_text(credentials.access_key)
    (data / "secretKey").write_text(credentials.secret_key)
    link = root / "..data_tmp"
    link.symlink_to(data.name)
    link.replace(root / "..data")
    for name in ("accessKey", "secretKey"):
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"..data/{name}")


def _swap_acl(servers: Servers, text: str) -> None:
    staged = servers.acl_file.with_suffix(".new")
    staged.write_text(text)
    staged.replace(servers.acl_file)


def test_a_key_rotated_under_load_fails_no_request_and_loses_nothing(
    servers: Servers, tmp_path: Path
) -> None:
    """The rotation procedure of docs/security.md: the new key added beside the old one, the
    client's credential files swapped (it picks the new key up by itself), the old key
    removed; a producer sends all along, every send succeeds and every message is stored."""
    rotated = Credentials("orders-team-2", "orders-secret-rotated-42")
    both = ACL + (
        f'\n[[accounts]]\naccess_key = "{rotated.access_key}"\n'
        f'secret_key = "{rotated.secret_key}"\ntopic_perms = {{ orders = "PUB|SUB" }}\n'
        'group_perms = { cg = "SUB" }\n'
    )
    only_new = both.replace(ORDERS.access_key + '"', "retired-orders-team" + '"', 1)
    credentials_dir = tmp_path / "credentials"
    credentials_dir.mkdir()
    _mount(credentials_dir, "1", ORDERS)
    files = CredentialFiles(credentials_dir, check_interval_s=0.1)
    codes: list[int] = []
    bodies: list[bytes] = []

    async def produce(done: asyncio.Event) -> None:
        client = RemotingClient(signer=files.sign)
        try:
            while not done.is_set():
                body = f"rotation-{len(codes)}".encode()
                request = _broker_sample(RequestCode.SEND_MESSAGE_V2)()
                request.body = body
                request.ext_fields["topic"] = request.ext_fields.get("topic", "orders")
                codes.append((await client.invoke(servers.broker.address, request, 5)).code)
                bodies.append(body)
        finally:
            await client.close()

    async def accepted(credentials: Credentials) -> bool:
        pull = _broker_sample(RequestCode.PULL_MESSAGE)()
        answer = await _invoke(servers.broker.address, pull, credentials)
        return answer.code != ResponseCode.NO_PERMISSION

    async def refused(credentials: Credentials) -> bool:
        return not await accepted(credentials)

    async def rotate(done: asyncio.Event) -> None:
        try:
            await eventually_async(lambda: len(codes) >= 50, 10, "sends before the rotation")
            _swap_acl(servers, both)
            await eventually_async(lambda: accepted(rotated), 5, "the new key valid")
            _mount(credentials_dir, "2", rotated)
            await eventually_async(lambda: files.credentials == rotated, 5, "the new key used")
            mark = len(codes)
            _swap_acl(servers, only_new)
            await eventually_async(lambda: refused(ORDERS), 5, "the old key revoked")
            await eventually_async(lambda: len(codes) >= mark + 50, 10, "sends afterwards")
        finally:
            done.set()

    async def run() -> None:
        done = asyncio.Event()
        await asyncio.gather(produce(done), rotate(done))

    try:
        asyncio.run(run())
    finally:
        _swap_acl(servers, ACL)
        pull = _broker_sample(RequestCode.PULL_MESSAGE)
        eventually(
            lambda: _answer(servers.broker.address, pull, ORDERS) != ResponseCode.NO_PERMISSION,
            5,
            "the original ACL back",
        )
    assert codes, "nothing sent"
    assert set(codes) == {ResponseCode.SUCCESS}, [c for c in codes if c != ResponseCode.SUCCESS]
    assert files.reloads == 1
    stored = asyncio.run(_stored_bodies(servers))
    assert set(bodies) <= stored


async def _stored_bodies(servers: Servers) -> set[bytes]:
    client = BrokerClient()
    client.remoting.signer = ADMIN_KEY.sign
    try:
        bodies: set[bytes] = set()
        for queue_id in range(2):
            for message in await read_queue(client, servers.broker.address, "orders", queue_id):
                bodies.add(message.body)
        return bodies
    finally:
        await client.close()


# ------------------------------------------------------------------ send-back by offset
def test_a_send_back_cannot_copy_a_message_of_another_topic_into_the_groups_retries(
    servers: Servers,
) -> None:
    """A send-back names a commit-log offset: an account with SUB on its group but not on a
    topic cannot copy that topic's messages into its retry topic; a consumer's own send-back
    (the origin topic it reads) goes through."""

    async def scenario() -> tuple[RemotingCommand, RemotingCommand, RemotingCommand]:
        admin = BrokerClient()
        admin.remoting.signer = ADMIN_KEY.sign
        team = BrokerClient()
        team.remoting.signer = ORDERS.sign
        try:
            address = servers.broker.address
            assert (await admin.create_topic(address, "payroll", 1)).code == ResponseCode.SUCCESS
            secret = await admin.send(address, "payroll", b"salary")
            own = await team.send(address, "orders", b"an order")
            assert own.code == ResponseCode.SUCCESS, own.remark
            secret_offset = parse_offset_msg_id(secret.ext_fields["msgId"])[1]
            own_offset = parse_offset_msg_id(own.ext_fields["msgId"])[1]
            return (
                await team.send_back(address, "cg", secret_offset, origin_topic="orders"),
                await team.send_back(address, "cg", secret_offset, origin_topic="payroll"),
                await team.send_back(address, "cg", own_offset, origin_topic="orders"),
            )
        finally:
            await admin.close()
            await team.close()

    disguised, named, own = asyncio.run(scenario())
    assert disguised.code == ResponseCode.NO_PERMISSION
    assert "is in topic payroll, neither the request's origin topic" in (disguised.remark or "")
    assert named.code == ResponseCode.NO_PERMISSION
    assert "has no SUB on topic payroll" in (named.remark or "")
    assert own.code == ResponseCode.SUCCESS, own.remark


# ------------------------------------------------------------------ dead-letter jobs
def _offset_requests(group: str, topic: str) -> list[Callable[[], RemotingCommand]]:
    update = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, commit_offset=0
    )
    query = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=0)
    return [
        lambda: command(RequestCode.UPDATE_CONSUMER_OFFSET, update.to_ext_fields()),
        lambda: command(RequestCode.QUERY_CONSUMER_OFFSET, query.to_ext_fields()),
    ]


def test_the_dead_letter_job_group_has_its_groups_permission(servers: Servers) -> None:
    """Dead-letter jobs commit offsets as the group %DLQ%cg, which no ACL file can name: SUB
    on cg covers it; an account without is refused, the group named."""
    address = servers.broker.address
    topic, job_group = dead_letter_topic("cg"), dead_letter_job_group("cg")
    created = asyncio.run(_invoke(address, _create_topic(topic), ADMIN_KEY))
    assert created.code == ResponseCode.SUCCESS, created.remark
    for make in _offset_requests(job_group, topic):
        assert _answer(address, make, ORDERS) == ResponseCode.SUCCESS
        refusal = asyncio.run(_invoke(address, make(), OUTSIDER))
        assert refusal.code == ResponseCode.NO_PERMISSION
        assert refusal.remark == (
            "account outsider has no SUB on group %DLQ%cg (its default_group_perm is DENY)"
        )


def test_a_dead_letter_job_runs_with_an_account_limited_to_its_group(servers: Servers) -> None:
    """What a run does at the brokers, signed by DEAD_LETTERS: the plan (creating the ledger
    topic only where it is missing: an admin request, refused), a dead letter kept (sent back),
    a ledger entry written and read back, the offsets moved."""
    address = servers.broker.address
    topic, job_group = dead_letter_topic("cg"), dead_letter_job_group("cg")

    async def scenario() -> None:
        created = await _invoke(address, _create_topic(topic), ADMIN_KEY)
        assert created.code == ResponseCode.SUCCESS, created.remark
        async with (
            AdminClient([servers.namesrv.address], credentials=DEAD_LETTERS) as job,
            Producer([servers.namesrv.address], "dlq-jobs", credentials=DEAD_LETTERS) as producer,
        ):
            for index in range(3):
                await producer.send(Message(topic, f"dead letter {index}".encode()))
            refused = r"cg-dead-letters is not an admin: request code 17 \(UPDATE_AND_CREATE_TOPIC"
            with pytest.raises(NoPermissionError, match=refused):
                await plan(job, "cg", max_messages=None, prepare_ledger=True)
            # Created beforehand, as the operator does where access control is on.
            ledger_topic = _create_topic(ledger.LEDGER_TOPIC, queues=1)
            created = await _invoke(address, ledger_topic, ADMIN_KEY)
            assert created.code == ResponseCode.SUCCESS, created.remark
            scope = await plan(job, "cg", max_messages=None, prepare_ledger=True)
            assert scope.size == 3
            assert [(name, at) for name, at, _ in scope.ledger_start] == [("broker-a", address)]
            entry = ledger.Entry("cg-job", ledger.STARTED, QueueKey("broker-a", 0), 0, 0)
            await ledger.append(producer, address, "broker-a", entry)
            assert await ledger_entries(job, scope) == [entry]
            # A filtered run's acknowledgement is the group's to make, as its offsets are.
            await acknowledge(job, scope, {scope.queues[0].key: [(1, 2)]})
            held = await plan(job, "cg", max_messages=None, prepare_ledger=True)
            assert (held.size, held.queues[0].acked) == (2, ((1, 2),))
            await mark_handled(job, scope)
            for queue in scope.queues:
                mq = MessageQueue(topic, queue.key.broker, queue.key.queue_id)
                assert await job.committed_offset_at(address, job_group, mq) == queue.end
            ledger_queue = MessageQueue(ledger.LEDGER_TOPIC, "broker-a", 0)
            assert await job.committed_offset_at(address, job_group, ledger_queue) == 1
            again = await plan(job, "cg", max_messages=None, prepare_ledger=True)
            assert again.size == 0

    asyncio.run(scenario())
