"""Access control on real servers: a name server and a broker started with ``--acl-file``, every
request code either serves sent unsigned, with a wrong signature, by an account without the
permission and by one with it; the Python client with and without credentials; the broker's
own registration signed with the cluster's admin credential; a changed ACL file in force
within a bound; refusals counted in /metrics and logged once."""

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
from reconsume.errors import RemotingError
from reconsume.message.model import Message
from reconsume.namesrv.access import NAMESRV_ADMIN_CODES, NAMESRV_OPEN_CODES
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.signing import ACCESS_KEY_ENV, SECRET_KEY_ENV, Credentials
from reconsume.wire.transport import RemotingClient

from ..acl_requests import ADMIN, DECISIONS, SIGNATURE_ONLY, command
from ..polling import eventually
from ..scratch import module_dir
from .cluster import SMALL_SEGMENTS
from .processes import ServerProcess, start_server
from .retry_support import http_address, metric, scrape_now

ADMIN_KEY = Credentials("cluster-admin", "admin-secret-0123456789")
ORDERS = Credentials("orders-team", "orders-secret-0123456789")
OUTSIDER = Credentials("outsider", "outsider-secret-0123456789")
FORGER = Credentials("orders-team", "not-the-orders-secret")
EVERY_TOPIC = Credentials("every-topic", "every-secret-0123456789")

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


def _create_topic(topic: str) -> RemotingCommand:
    fields = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
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
        "--cluster", "acl", "--register-interval-s", "1",
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
