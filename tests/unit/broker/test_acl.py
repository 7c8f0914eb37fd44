"""Access control: what each request code the broker serves needs (a deliberate decision for
every one), the ACL file and its validation, and the decision for one request in RocketMQ's
order. Details of the requirements are in test_acl_resources.py, whitelist patterns in
test_acl_addresses.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reconsume.access.acl import Acl, Perm, Refusal, load_acl, parse_acl
from reconsume.broker.acl_resources import (
    ADMIN_CODES,
    BROKER_RULES,
    RESOURCE_CODES,
    SIGNATURE_ONLY_CODES,
    required,
)
from reconsume.broker.context import BrokerContext
from reconsume.broker.handlers import base_handlers
from reconsume.broker.roles import MasterRole, ReplicaRole
from reconsume.broker.runtime_info import Throughput
from reconsume.broker.settings import BrokerSettings
from reconsume.engine.delays import DelayLevels
from reconsume.errors import InvalidArgumentError
from reconsume.message.address import HostAddress
from reconsume.message.names import dead_letter_job_group, dead_letter_topic
from reconsume.store import FlushMode, MessageStore, StoreSettings
from reconsume.wire.broker_headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.signing import ACCESS_KEY, SIGNATURE, sign
from tests.acl_requests import (
    ADMIN,
    DECISIONS,
    PUB,
    SIGNATURE_ONLY,
    SUB,
    command,
    heartbeat,
    pull,
    send_v1,
    send_v2,
)

HOST = HostAddress.parse("127.0.0.1:10911")


# ------------------------------------------------------------------ every served code
@pytest.fixture(scope="module")
def served_codes(tmp_path_factory: pytest.TempPathFactory) -> set[int]:
    """The codes a broker registers handlers for, in either role: its handler table and
    each role's own handlers."""
    directory = tmp_path_factory.mktemp("store")
    store_settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    settings = BrokerSettings(
        store_dir=str(directory), store=store_settings, broker_name="broker-x",
        cluster_name="c1", namesrv_addresses=("127.0.0.1:9876",), flush_mode=FlushMode.SYNC,
        delay_levels="1s 5s",
    )  # fmt: skip
    with MessageStore(directory, store_settings, store_host=HOST, background=False) as store:
        context = BrokerContext(settings, store, HOST, lambda: None)
        throughput = Throughput(context.stats, 0.0)
        codes = set(base_handlers(context, throughput, lambda: None, lambda: None))
        codes |= set(MasterRole(context, settings, DelayLevels.parse("1s 5s")).handlers())
        codes |= set(ReplicaRole(context, "broker-x-1", None).handlers())
    return codes


def test_every_served_code_has_a_decision(served_codes: set[int]) -> None:
    undecided = sorted(RequestCode(code).name for code in served_codes - set(DECISIONS))
    assert not undecided, f"served without an access decision: {undecided}"
    assert served_codes <= ADMIN_CODES | RESOURCE_CODES | SIGNATURE_ONLY_CODES


def test_code_sets_are_disjoint() -> None:
    assert not ADMIN_CODES & RESOURCE_CODES
    assert not ADMIN_CODES & SIGNATURE_ONLY_CODES
    assert not RESOURCE_CODES & SIGNATURE_ONLY_CODES


def test_rocketmq_admin_codes_are_admin() -> None:
    assert {17, 25, 200, 207, 215} <= ADMIN_CODES


@pytest.mark.parametrize(
    ("code", "decision"), DECISIONS.items(), ids=[RequestCode(c).name for c in DECISIONS]
)
def test_decision(code: int, decision: tuple[Callable[[], RemotingCommand], object] | str) -> None:
    if decision == ADMIN:
        assert code in ADMIN_CODES
        assert required(command(code)) == []
    elif decision == SIGNATURE_ONLY:
        assert code in SIGNATURE_ONLY_CODES
        assert required(command(code)) == []
    else:
        assert isinstance(decision, tuple)
        make, needs = decision
        assert code in RESOURCE_CODES
        assert required(make()) == needs


# ------------------------------------------------------------------ the ACL file
ACL_TOML = """
global_white_remote_addresses = ["10.10.103.*"]

[[accounts]]
access_key = "orders-team"
secret_key = "orders-secret"
admin = false
default_topic_perm = "DENY"
default_group_perm = "SUB"
topic_perms = { orders = "PUB|SUB", audit = "SUB", events = "PUB" }
group_perms = { "orders-consumers" = "SUB", billing = "DENY" }

[[accounts]]
access_key = "readonly-team"
secret_key = "readonly-secret"
default_topic_perm = "SUB"
default_group_perm = "SUB"
topic_perms = { payroll = "DENY" }

[[accounts]]
access_key = "producers-only"
secret_key = "producers-secret"
default_topic_perm = "PUB"

[[accounts]]
access_key = "rocketmq2"
secret_key = "admin-secret"
admin = true

[[accounts]]
access_key = "office-team"
secret_key = "office-secret"
white_remote_address = "192.168.1.*"
"""
SECRETS = ["orders-secret", "readonly-secret", "producers-secret", "admin-secret", "office-secret"]
SECRET_OF = {
    "orders-team": "orders-secret",
    "readonly-team": "readonly-secret",
    "producers-only": "producers-secret",
    "rocketmq2": "admin-secret",
    "office-team": "office-secret",
}
CLIENT = "127.0.0.1"


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> Acl:
    path = tmp_path_factory.mktemp("acl") / "acl.toml"
    path.write_text(ACL_TOML)
    return load_acl(path)


def test_loaded_accounts(acl: Acl) -> None:
    orders = acl.accounts["orders-team"]
    assert orders.secret_key == "orders-secret"
    assert not orders.admin
    assert orders.default_topic_perm == Perm.DENY
    assert orders.default_group_perm == SUB
    assert orders.topic_perms == {"orders": PUB | SUB, "audit": SUB, "events": PUB}
    assert orders.group_perms == {"orders-consumers": SUB, "billing": Perm.DENY}
    producers = acl.accounts["producers-only"]
    assert producers.default_group_perm == Perm.DENY  # missing means DENY
    assert acl.accounts["rocketmq2"].admin
    assert acl.accounts["office-team"].white_remote_address == "192.168.1.*"
    assert acl.global_white_remote_addresses == ("10.10.103.*",)


def test_secrets_are_not_in_repr(acl: Acl) -> None:
    text = repr(acl) + "".join(repr(account) for account in acl.accounts.values())
    assert "orders-team" in text
    for secret in SECRETS:
        assert secret not in text


BASE = 'access_key = "team-key-1"\nsecret_key = "very-secret-value"\n'


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[[accounts]]\n" + 'access_key = "short"\nsecret_key = "very-secret-value"', "access_key"),
        ("[[accounts]]\n" + 'access_key = "team-key-1"\nsecret_key = "secret"', "secret_key"),
        ("[[accounts]]\n" + 'access_key = "team-key-1"', "secret_key"),
        ("[[accounts]]\n" + 'secret_key = "very-secret-value"', "access_key"),
        ("[[accounts]]\n" + BASE + "[[accounts]]\n" + BASE, "team-key-1 is defined twice"),
        ("[[accounts]]\n" + BASE + "admin = 1", "team-key-1): admin"),
        ("[[accounts]]\n" + BASE + 'default_topic_perm = "READ"', "default_topic_perm"),
        ("[[accounts]]\n" + BASE + 'default_group_perm = "pub"', "default_group_perm"),
        ("[[accounts]]\n" + BASE + 'topic_perms = { t = "ALL" }', "team-key-1): topic_perms.t"),
        ("[[accounts]]\n" + BASE + 'group_perms = { g = "SUB|DENY" }', "group_perms.g"),
        ("[[accounts]]\n" + BASE + 'topic_perms = ["t=PUB"]', "topic_perms must be a table"),
        ("[[accounts]]\n" + BASE + 'topic_perms = { "%RETRY%g" = "SUB" }', "name the group"),
        ("[[accounts]]\n" + BASE + 'group_perms = { "%DLQ%g" = "SUB" }', "name the group"),
        ("[[accounts]]\n" + BASE + 'topic_perms = { "a b" = "SUB" }', "topic_perms.a b"),
        ("[[accounts]]\n" + BASE + 'white_remote_address = "10.*.1.*"', "white_remote_address"),
        ("[[accounts]]\n" + BASE + 'acess_key = "x"', "unknown field acess_key"),
        ("[[accounts]]\n" + BASE + 'secretKey = "x"', "team-key-1): unknown field secretKey"),
        ("globalWhiteRemoteAddresses = []", "unknown field globalWhiteRemoteAddresses"),
        ('global_white_remote_addresses = "10.*"', "global_white_remote_addresses"),
        ('global_white_remote_addresses = ["10.*.1.*"]', "global_white_remote_addresses"),
        ("accounts = 3", "accounts must be"),
        ("accounts = [3]", "account 1 is not a table"),
        ("[[accounts]\n", "is not TOML"),
    ],
)
def test_invalid_acl_files(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "acl.toml"
    path.write_text(toml)
    with pytest.raises(InvalidArgumentError) as caught:
        load_acl(path)
    assert message in str(caught.value)
    assert "very-secret-value" not in str(caught.value)


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "acl.toml"
    path.write_bytes(b'[[accounts]]\naccess_key = "team-key-1"\nsecret_key = "s\xffcret-value"\n')
    with pytest.raises(InvalidArgumentError, match="is not UTF-8"):
        load_acl(path)


def test_a_secret_with_a_bad_type_is_not_shown() -> None:
    document = {"accounts": [{"access_key": "team-key-1", "secret_key": ["hunter2-hunter2"]}]}
    with pytest.raises(InvalidArgumentError) as caught:
        parse_acl(document)
    assert "hunter2" not in str(caught.value)


def test_empty_acl_refuses_unsigned_requests() -> None:
    acl = parse_acl({})
    refusal = acl.check(send_v2("orders"), CLIENT, BROKER_RULES)
    assert refusal is not None
    assert refusal.reason == "unsigned"


# ------------------------------------------------------------------ the decision
def signed(
    request: RemotingCommand, access_key: str, secret_key: str | None = None
) -> RemotingCommand:
    sign(request, access_key, secret_key or SECRET_OF[access_key])
    return request


def refused(acl: Acl, request: RemotingCommand, peer: str = CLIENT) -> Refusal:
    refusal = acl.check(request, peer, BROKER_RULES)
    assert refusal is not None
    for secret in SECRETS:
        assert secret not in refusal.message
    return refusal


def test_unsigned_request_is_refused(acl: Acl) -> None:
    refusal = refused(acl, send_v2("orders"))
    assert (refusal.reason, refusal.code) == ("unsigned", ResponseCode.NO_PERMISSION)
    assert "carries no AccessKey" in refusal.message
    assert refused(acl, heartbeat(("cg", ["orders"]))).reason == "unsigned"


def test_global_whitelist_passes_anything(acl: Acl) -> None:
    assert acl.check(send_v2("payroll"), "10.10.103.7", BROKER_RULES) is None
    assert (
        acl.check(command(RequestCode.UPDATE_AND_CREATE_TOPIC), "10.10.103.7", BROKER_RULES) is None
    )
    assert (
        acl.check(
            signed(send_v2("x"), "nobody-at-all", "whatever"), "::ffff:10.10.103.7", BROKER_RULES
        )
        is None
    )


def test_unknown_access_key(acl: Acl) -> None:
    refusal = refused(acl, signed(send_v2("orders"), "nobody-at-all", "whatever"))
    assert refusal.reason == "unknown_account"
    assert refusal.message == "no account for access key nobody-at-all"
    long_key = "k" * 40 + "\n"
    refusal = refused(acl, signed(send_v2("orders"), long_key, "whatever"))
    assert refusal.message == "no account for access key " + "k" * 32 + "…"


def test_unknown_access_key_is_not_shown_raw(acl: Acl) -> None:
    refusal = refused(acl, signed(send_v2("orders"), "bad\nkey\x1b[31m", "whatever"))
    assert "\n" not in refusal.message
    assert "\x1b" not in refusal.message


def test_wrong_secret(acl: Acl) -> None:
    refusal = refused(acl, signed(send_v2("orders"), "orders-team", "orders-secreT"))
    assert refusal.reason == "bad_signature"
    assert "orders-team" in refusal.message


@pytest.mark.parametrize("field", ["b", ACCESS_KEY, SIGNATURE, "body"])
def test_tampered_request(acl: Acl, field: str) -> None:
    request = signed(send_v2("orders"), "orders-team")
    if field == "body":
        request.body += b"!"
    elif field == ACCESS_KEY:
        request.ext_fields[ACCESS_KEY] = "readonly-team"
    else:
        request.ext_fields[field] = "audit" if field == "b" else request.ext_fields[field][1:]
    assert refused(acl, request).reason == "bad_signature"


def test_missing_signature(acl: Acl) -> None:
    request = send_v2("orders")
    request.ext_fields[ACCESS_KEY] = "orders-team"
    assert refused(acl, request).reason == "bad_signature"


def test_right_permissions_pass(acl: Acl) -> None:
    for request in (
        send_v2("orders"),
        send_v1("events"),
        pull("orders", "orders-consumers"),
        pull("audit", "any-group"),  # the default group permission is SUB
        heartbeat(("orders-consumers", ["orders", "audit", "%RETRY%orders-consumers"])),
    ):
        assert acl.check(signed(request, "orders-team"), CLIENT, BROKER_RULES) is None


def test_wrong_permission(acl: Acl) -> None:
    refusal = refused(acl, signed(send_v2("audit"), "orders-team"))
    assert (refusal.reason, refusal.code) == ("no_permission", ResponseCode.NO_PERMISSION)
    assert refusal.message == (
        "account orders-team has no PUB on topic audit (its topic_perms entry is SUB)"
    )
    refusal = refused(acl, signed(pull("events", "orders-consumers"), "orders-team"))
    assert refusal.message.startswith("account orders-team has no SUB on topic events")


def test_default_topic_permission(acl: Acl) -> None:
    refusal = refused(acl, signed(send_v2("unlisted"), "orders-team"))
    assert refusal.message == (
        "account orders-team has no PUB on topic unlisted (its default_topic_perm is DENY)"
    )


def test_deny_overrides_the_defaults(acl: Acl) -> None:
    refusal = refused(acl, signed(pull("orders", "billing"), "orders-team"))
    assert refusal.message == (
        "account orders-team has no SUB on group billing (its group_perms entry is DENY)"
    )
    assert (
        acl.check(signed(pull("reports", "analytics"), "readonly-team"), CLIENT, BROKER_RULES)
        is None
    )
    refusal = refused(acl, signed(pull("payroll", "analytics"), "readonly-team"))
    assert refusal.message.startswith("account readonly-team has no SUB on topic payroll")
    assert "DENY" in refusal.message


def test_every_needed_permission_is_checked(acl: Acl) -> None:
    request = heartbeat(("orders-consumers", ["orders"]), ("billing", ["orders"]))
    assert "group billing" in refused(acl, signed(request, "orders-team")).message


def test_retry_topic_send_needs_sub_on_the_group(acl: Acl) -> None:
    assert (
        acl.check(signed(send_v2("%RETRY%orders-consumers"), "orders-team"), CLIENT, BROKER_RULES)
        is None
    )
    refusal = refused(acl, signed(send_v1("%RETRY%billing"), "orders-team"))
    assert refusal.message.startswith("account orders-team has no SUB on group billing")
    # PUB on every topic is not enough: the retry topic is the group's.
    assert acl.check(signed(send_v2("anything"), "producers-only"), CLIENT, BROKER_RULES) is None
    refusal = refused(acl, signed(send_v2("%RETRY%cg"), "producers-only"))
    assert refusal.message == (
        "account producers-only has no SUB on group cg (its default_group_perm is DENY)"
    )


def test_dead_letter_topic_is_the_group(acl: Acl) -> None:
    assert (
        acl.check(signed(pull("%DLQ%orders-consumers", "dlq"), "orders-team"), CLIENT, BROKER_RULES)
        is None
    )
    refusal = refused(acl, signed(pull("%DLQ%billing", "dlq"), "orders-team"))
    assert "group billing" in refusal.message


def _offset_requests(group: str, topic: str) -> list[RemotingCommand]:
    """An offset commit and an offset query of ``group`` on queue 0 of ``topic``."""
    update = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, commit_offset=5
    )
    query = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=0)
    return [
        command(RequestCode.UPDATE_CONSUMER_OFFSET, update.to_ext_fields()),
        command(RequestCode.QUERY_CONSUMER_OFFSET, query.to_ext_fields()),
    ]


DEAD_LETTER_OWNERS = {
    "accounts": [
        {
            "access_key": "orders-owner",
            "secret_key": "owner-secret",
            "group_perms": {"orders": "SUB"},
        },
        {
            "access_key": "billing-owner",
            "secret_key": "billing-secret",
            "group_perms": {"billing": "SUB"},
        },
    ]
}


def test_the_dead_letter_job_group_has_its_groups_permission() -> None:
    """Dead-letter jobs commit offsets as ``%DLQ%<group>`` (dead_letter_job_group), a group no
    ACL file can name: it has ``<group>``'s permission."""
    owners = parse_acl(DEAD_LETTER_OWNERS)
    job_group, topic = dead_letter_job_group("orders"), dead_letter_topic("orders")
    assert (job_group, topic) == ("%DLQ%orders", "%DLQ%orders")
    account = owners.accounts["orders-owner"]
    assert account.granted("%RETRY%%DLQ%orders") == (SUB, "group_perms entry of group orders")
    assert account.granted("%RETRY%%DLQ%billing") == (Perm.DENY, "default_group_perm")
    for request in _offset_requests(job_group, topic):
        request = signed(request, "orders-owner", "owner-secret")
        assert owners.check(request, CLIENT, BROKER_RULES) is None
    for request in _offset_requests(job_group, topic):
        refusal = refused(owners, signed(request, "billing-owner", "billing-secret"))
        assert (refusal.reason, refusal.code) == ("no_permission", ResponseCode.NO_PERMISSION)
        assert refusal.message == (
            "account billing-owner has no SUB on group %DLQ%orders (its default_group_perm is DENY)"
        )


def test_a_deny_on_the_group_covers_its_dead_letter_job_group(acl: Acl) -> None:
    for request in _offset_requests("%DLQ%billing", "%DLQ%billing"):
        refusal = refused(acl, signed(request, "orders-team"))
        assert refusal.message == (
            "account orders-team has no SUB on group %DLQ%billing (its group_perms entry of "
            "group billing is DENY)"
        )


def test_trace_topic_needs_no_permission(acl: Acl) -> None:
    request = signed(send_v2("RMQ_SYS_TRACE_TOPIC"), "orders-team")
    assert acl.check(request, CLIENT, BROKER_RULES) is None


def test_admin_codes_need_an_admin(acl: Acl) -> None:
    request = signed(command(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}), "orders-team")
    refusal = refused(acl, request)
    assert refusal.reason == "not_admin"
    assert refusal.message == (
        "account orders-team is not an admin: request code 17 (UPDATE_AND_CREATE_TOPIC) needs one"
    )
    request = signed(command(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}), "rocketmq2")
    assert acl.check(request, CLIENT, BROKER_RULES) is None


def test_admin_passes_every_resource_check(acl: Acl) -> None:
    for request in (send_v2("payroll"), pull("%DLQ%billing", "billing"), heartbeat(("x", ["y"]))):
        assert acl.check(signed(request, "rocketmq2"), CLIENT, BROKER_RULES) is None


def test_admin_still_needs_a_signature(acl: Acl) -> None:
    request = signed(command(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "t"}), "rocketmq2", "x")
    assert refused(acl, request).reason == "bad_signature"


def test_signature_only_codes(acl: Acl) -> None:
    request = signed(command(RequestCode.GET_BROKER_RUNTIME_INFO), "producers-only")
    assert acl.check(request, CLIENT, BROKER_RULES) is None
    assert refused(acl, command(RequestCode.GET_BROKER_RUNTIME_INFO)).reason == "unsigned"


def test_account_whitelist_skips_signature_and_permissions(acl: Acl) -> None:
    request = send_v2("payroll")
    request.ext_fields[ACCESS_KEY] = "office-team"
    assert acl.check(request, "192.168.1.20", BROKER_RULES) is None
    refusal = refused(acl, request, "192.168.2.20")
    assert refusal.reason == "bad_signature"
    refusal = refused(acl, signed(send_v2("payroll"), "office-team"), "192.168.2.20")
    assert refusal.reason == "no_permission"


def test_account_whitelist_is_only_that_accounts(acl: Acl) -> None:
    request = send_v2("orders")
    request.ext_fields[ACCESS_KEY] = "orders-team"
    assert refused(acl, request, "192.168.1.20").reason == "bad_signature"


def test_unparsable_request_is_refused_after_the_signature(acl: Acl) -> None:
    request = command(RequestCode.HEART_BEAT, {}, b"{not json")
    assert refused(acl, request).reason == "unsigned"
    refusal = refused(acl, signed(command(RequestCode.HEART_BEAT, {}, b"{not json"), "orders-team"))
    assert (refusal.reason, refusal.code) == ("malformed", ResponseCode.SYSTEM_ERROR)
    assert "HEART_BEAT" in refusal.message
