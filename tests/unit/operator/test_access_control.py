"""The ACL file the operator renders, the credentials Secrets it generates and rotates, and what
access control and TLS add to the pods: pure functions, checked against the broker's own ACL
parser."""

from __future__ import annotations

import base64
import tomllib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.access.acl import acl_digest as broker_digest
from reconsume.access.acl import parse_acl
from reconsume.access.perms import Perm
from reconsume.spark import ledger
from reconsume.topology.clusters import cluster_spec
from reconsume.topology.jobs import Source, job_spec
from reconsume_operator.acl_render import (
    AccountEntry,
    acl_digest,
    acl_secret,
    grants,
    render_acl,
    user_entries,
)
from reconsume_operator.children import children
from reconsume_operator.credentials import (
    CredentialsProblem,
    credentials_secret,
    new_key_pair,
    promoted,
    rotated,
    stored_keys,
)
from reconsume_operator.dead_letter_jobs import pod_template
from reconsume_operator.job_access import LEDGER_TOPIC, job_entry
from reconsume_operator.user_handlers import key_fields, secret_patch

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
ADMIN = AccountEntry("orders-admin-0a1b2c3d", "s3cret-admin-key", "admin", admin=True)


def user(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"cluster": "orders", **spec}}


def test_the_rendered_file_is_what_the_broker_reads() -> None:
    shop = user(
        "shop",
        topics=[{"name": "orders", "perm": "PUB"}, {"name": "secret", "perm": "DENY"}],
        groups=[{"name": "shop-consumers", "perm": "SUB"}],
        defaultTopicPerm="SUB",
        allowedAddress="10.0.*",
    )
    topics = [
        {"metadata": {"name": "audit"}, "spec": {"producers": ["shop"], "consumers": ["ops"]}},
        {"metadata": {"name": "s"}, "spec": {"topicName": "secret", "producers": ["shop"]}},
    ]
    groups = [
        {
            "metadata": {"name": "billing"},
            "spec": {"consumers": ["shop"], "subscriptions": [{"topic": "invoices"}]},
        }
    ]
    found = grants(topics, groups)
    entries = [ADMIN, *user_entries(shop, [("shop-1234abcd", "shop-secret-1")], found)]
    text = render_acl(entries, ["192.168.1.*"])
    acl = parse_acl(tomllib.loads(text))
    assert acl.global_white_remote_addresses == ("192.168.1.*",)
    account = acl.accounts["shop-1234abcd"]
    assert account.topic_perms == {
        "orders": Perm.PUB,
        "audit": Perm.PUB,
        "secret": Perm.DENY,  # the User's own DENY wins over the Topic's grant
        "invoices": Perm.SUB,  # a consumer of billing reads what billing subscribes to
    }
    assert account.group_perms == {"shop-consumers": Perm.SUB, "billing": Perm.SUB}
    assert account.default_topic_perm is Perm.SUB
    assert account.default_group_perm is Perm.DENY
    assert account.white_remote_address == "10.0.*"
    assert acl.accounts[ADMIN.access_key].admin
    assert broker_digest(text.encode()) == acl_digest(text)


def test_rendering_is_deterministic_and_the_first_of_a_twice_given_key_wins() -> None:
    a = AccountEntry("aaaaaaaa", "secret-a-1", "A")
    b = AccountEntry("bbbbbbbb", "secret-b-1", "B")
    impostor = AccountEntry(ADMIN.access_key, "another-secret", "User mallory")
    assert render_acl([ADMIN, a, b, impostor]) == render_acl([ADMIN, b, a])
    acl = parse_acl(tomllib.loads(render_acl([ADMIN, impostor])))
    assert acl.accounts[ADMIN.access_key].secret_key == ADMIN.secret_key


@given(st.text(min_size=7, max_size=40), st.text(min_size=7, max_size=40))
def test_any_key_text_survives_the_toml(access_key: str, secret_key: str) -> None:
    text = render_acl([AccountEntry(access_key, secret_key, "fuzz\nowner")])
    account = parse_acl(tomllib.loads(text)).accounts[access_key]
    assert account.secret_key == secret_key


def test_the_acl_secret_holds_the_file_and_its_digest() -> None:
    spec = cluster_spec({"metadata": {"name": "orders", "namespace": "shop"}})
    text = render_acl([ADMIN])
    secret = acl_secret(spec, text)
    assert secret["metadata"]["name"] == "orders-acl"
    assert base64.b64decode(secret["data"]["acl.toml"]).decode() == text
    assert secret["metadata"]["annotations"]["reconsume.io/acl-digest"] == acl_digest(text)
    assert "s3cret-admin-key" not in str(secret["metadata"])


# ------------------------------------------------------------------ credentials
def test_generated_keys_are_readable_random_and_long_enough() -> None:
    first, second = new_key_pair("orders admin"), new_key_pair("orders admin")
    assert first[0].startswith("orders-admin-")
    assert first != second
    assert len(first[1]) >= 40
    long_prefix = new_key_pair("x" * 300)[0]
    assert len(long_prefix) <= 49


def test_a_generated_secret_rotates_in_two_steps_with_a_window() -> None:
    secret = credentials_secret("shop", "ns", {}, ("shop-00000001", "secret-one-1"), "t1")
    keys = stored_keys(secret)
    assert keys.generated
    assert keys.token == "t1"
    assert keys.pairs(NOW) == [("shop-00000001", "secret-one-1")]
    assert rotated(keys, "ns", {}, "shop", "t1", NOW) is None
    assert promoted(keys, "ns", {}, 600, NOW) is None

    # Step 1: the new pair beside the current one, in files no client reads.
    step1 = rotated(keys, "ns", {}, "shop", "t2", NOW)
    assert step1 is not None
    pending = stored_keys(step1)
    assert (pending.access_key, pending.token) == ("shop-00000001", "t1")
    assert pending.next is not None
    assert pending.next_token == "t2"
    assert pending.pairs(NOW) == [("shop-00000001", "secret-one-1"), pending.next]
    assert rotated(pending, "ns", {}, "shop", "t2", NOW) is None  # waits for the brokers

    # Step 2, once every broker knows it: handed to clients, the old pair valid 600 s more.
    step2 = promoted(pending, "ns", {}, 600, NOW)
    assert step2 is not None
    after = stored_keys(step2)
    assert (after.access_key, after.secret_key) == pending.next
    assert after.token == "t2"
    assert after.next is None
    assert after.previous == ("shop-00000001", "secret-one-1")
    assert after.previous_expires == NOW + timedelta(seconds=600)
    later = NOW + timedelta(seconds=601)
    assert after.pairs(later) == [(after.access_key, after.secret_key)]
    dropped = rotated(after, "ns", {}, "shop", "t2", later)
    assert dropped is not None
    assert stored_keys(dropped).previous is None
    assert stored_keys(dropped).access_key == after.access_key
    assert key_fields(after, NOW)["previousAccessKey"] == "shop-00000001"
    assert key_fields(after, later)["previousAccessKey"] is None


def test_a_rotation_without_a_window_drops_the_old_key_at_once() -> None:
    keys = stored_keys(credentials_secret("s", "ns", {}, ("shop-00000001", "secret-one-1")))
    step1 = rotated(keys, "ns", {}, "shop", "now", NOW)
    assert step1 is not None
    step2 = promoted(stored_keys(step1), "ns", {}, 0, NOW)
    assert step2 is not None
    assert stored_keys(step2).previous is None


def test_a_token_changed_again_before_the_brokers_knew_replaces_the_next_key() -> None:
    keys = stored_keys(credentials_secret("s", "ns", {}, ("shop-00000001", "secret-one-1")))
    first = stored_keys(rotated(keys, "ns", {}, "shop", "a", NOW) or {})
    second = stored_keys(rotated(first, "ns", {}, "shop", "b", NOW) or {})
    assert second.next_token == "b"
    assert second.next != first.next
    assert second.access_key == "shop-00000001"


def test_an_adopted_secret_is_never_rewritten() -> None:
    adopted = {
        "metadata": {"name": "mine"},
        "data": {
            "accessKey": base64.b64encode(b"team-billing").decode(),
            "secretKey": base64.b64encode(b"billing-secret\n").decode(),
        },
    }
    keys = stored_keys(adopted)
    assert not keys.generated
    assert keys.secret_key == "billing-secret"
    assert rotated(keys, "ns", {}, "billing", "new-token", NOW) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "must hold accessKey and secretKey"),
        ({"accessKey": "!!", "secretKey": "c2VjcmV0LWtleQ=="}, "must hold accessKey"),
        (
            {"accessKey": base64.b64encode(b"short").decode(), "secretKey": "c2VjcmV0LWtleQ=="},
            "accessKey must be at least 7 characters",
        ),
    ],
)
def test_a_secret_without_usable_keys_is_named_with_what_it_lacks(
    data: dict[str, str], message: str
) -> None:
    with pytest.raises(CredentialsProblem, match=message) as caught:
        stored_keys({"metadata": {"name": "broken"}, "data": data})
    assert "Secret broken" in str(caught.value)


def test_the_secret_patch_removes_what_the_new_content_lacks() -> None:
    old = credentials_secret(
        "s", "ns", {}, ("a-0000001", "s-0000001"), "t", ("p-0000001", "q-0000001"), NOW
    )
    new = credentials_secret("s", "ns", {}, ("a-0000001", "s-0000001"), "t")
    patch = secret_patch(old, new)
    assert patch["data"]["previousAccessKey"] is None
    assert patch["data"]["previousSecretKey"] is None
    assert patch["metadata"]["annotations"]["reconsume.io/previous-key-expires"] is None
    assert patch["metadata"]["annotations"]["reconsume.io/rotation-token"] == "t"


# ------------------------------------------------------------------ pods
def pods_of(spec_fields: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = cluster_spec({"metadata": {"name": "orders", "namespace": "ns"}, "spec": spec_fields})
    found = {}
    for obj in children(spec):
        if obj["kind"] in ("StatefulSet", "Deployment"):
            found[obj["metadata"]["name"]] = obj["spec"]["template"]["spec"]
    return found


def test_operator_run_clusters_mount_the_acl_and_brokers_sign_with_the_admin_account() -> None:
    pods = pods_of({"brokers": 1, "accessControl": {"enabled": True}})
    broker, namesrv = pods["orders-broker"], pods["orders-namesrv"]
    container = broker["containers"][0]
    assert "--acl-file" in container["args"]
    assert {"name": "RECONSUME_CREDENTIALS_DIR", "value": "/var/run/reconsume/credentials"} in (
        container["env"]
    )
    secrets = {v["name"]: v.get("secret", {}).get("secretName") for v in broker["volumes"]}
    assert secrets["acl"] == "orders-acl"
    assert secrets["credentials"] == "orders-admin"
    assert "--acl-file" in namesrv["containers"][0]["args"]
    assert "credentials" not in {v["name"] for v in namesrv["volumes"]}


def test_access_control_off_and_tls_on() -> None:
    pods = pods_of(
        {
            "brokers": 1,
            "accessControl": {"enabled": False},
            "tls": {"secretName": "orders-tls", "mode": "Permissive", "clientAuth": "Required"},
        }
    )
    container = pods["orders-broker"]["containers"][0]
    args = container["args"]
    assert "--acl-file" not in args
    assert args[args.index("--tls-mode") + 1] == "permissive"
    assert args[args.index("--tls-client-auth") + 1] == "required"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RECONSUME_TLS"] == "true"
    assert env["RECONSUME_TLS_CERT_FILE"] == "/var/run/reconsume/tls/tls.crt"
    assert "RECONSUME_CREDENTIALS_DIR" not in env
    assert {"name": "tls", "secret": {"secretName": "orders-tls"}} in pods["orders-namesrv"][
        "volumes"
    ]


def test_external_clusters_are_off_unless_asked_and_name_their_secret() -> None:
    external = {"metadata": {"name": "ext"}, "spec": {"external": {"nameServer": "h:9876"}}}
    assert not cluster_spec(external).access_control
    assert cluster_spec(external).admin_secret_name is None
    external["spec"]["accessControl"] = {"enabled": True, "adminSecret": "ext-keys"}
    assert cluster_spec(external).admin_secret_name == "ext-keys"
    run = cluster_spec({"metadata": {"name": "orders"}})
    assert run.access_control
    assert run.admin_secret_name == "orders-admin"
    off = {"metadata": {"name": "orders"}, "spec": {"accessControl": {"enabled": False}}}
    assert cluster_spec(off).admin_secret_name is None
    secured = cluster_spec(
        {"metadata": {"name": "orders"}, "spec": {"accessControl": {"enabled": True}}}
    )
    assert secured.admin_secret_name == "orders-admin"


# ------------------------------------------------------------------ dead-letter jobs
def dead_letter_job(action: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "replay", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"consumerGroup": "orders-consumer", "action": action, **spec},
    }


GROUP_OBJECT = {
    "metadata": {"name": "orders-consumer"},
    "spec": {
        "groupName": "GID_orders",
        "subscriptions": [{"topic": "orders"}, {"topic": "refunds"}],
    },
}


@pytest.mark.parametrize(
    ("action", "spec", "topics"),
    [
        ("Reprocess", {}, {"orders": Perm.PUB | Perm.SUB, "refunds": Perm.PUB | Perm.SUB}),
        ("Reprocess", {"target": {"topic": "replays"}}, {"replays": Perm.PUB | Perm.SUB}),
        ("Drain", {"sink": {"path": "/out"}}, {}),
        ("Purge", {}, {}),
    ],
)
def test_a_dead_letter_job_holds_its_group_the_ledger_and_where_it_sends(
    action: str, spec: dict[str, Any], topics: dict[str, Perm]
) -> None:
    (entry,) = job_entry(
        dead_letter_job(action, **spec), GROUP_OBJECT, [("dlj-1234567", "s-12345678")]
    )
    assert not entry.admin
    assert dict(entry.group_perms) == {"GID_orders": Perm.SUB}
    assert dict(entry.topic_perms) == {"RECONSUME_DLQ_LEDGER": Perm.PUB | Perm.SUB, **topics}
    assert entry.default_topic_perm is Perm.DENY
    acl = parse_acl(tomllib.loads(render_acl([entry])))
    assert acl.accounts["dlj-1234567"].group_perms == {"GID_orders": Perm.SUB}


def test_a_run_mounts_its_account_and_spark_on_kubernetes_passes_it_to_executors() -> None:
    spec = job_spec(dead_letter_job("Purge"))
    source = Source("orders-namesrv.ns.svc:9876", "GID_orders", "replay-credentials")
    pod = pod_template(spec, source, "img")["spec"]
    assert pod["volumes"] == [
        {"name": "credentials", "secret": {"secretName": "replay-credentials"}}
    ]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RECONSUME_CREDENTIALS_DIR"] == "/var/run/reconsume/credentials"
    assert "--conf" not in " ".join(a for a in pod["containers"][0]["command"] if "secrets" in a)
    k8s = job_spec(
        dead_letter_job("Purge", spark={"master": "k8s://https://kubernetes.default.svc"})
    )
    command = pod_template(k8s, source, "img")["spec"]["containers"][0]["command"]
    assert (
        "spark.kubernetes.executor.secrets.replay-credentials=/var/run/reconsume/credentials"
        in command
    )
    assert "spark.executorEnv.RECONSUME_CREDENTIALS_DIR=/var/run/reconsume/credentials" in command
    plain = pod_template(spec, Source("n:9876", "GID_orders"), "img")["spec"]
    assert "volumes" not in plain


def test_a_run_on_a_tls_cluster_trusts_its_ca_and_never_sees_its_key_unless_asked() -> None:
    spec = job_spec(dead_letter_job("Purge"))
    source = Source("n:9876", "GID_orders", None, "orders-tls")
    pod = pod_template(spec, source, "img")["spec"]
    (volume,) = pod["volumes"]
    assert volume["secret"] == {
        "secretName": "orders-tls",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RECONSUME_TLS"] == "true"
    assert env["RECONSUME_TLS_CA_FILE"] == "/var/run/reconsume/tls/ca.crt"
    assert "RECONSUME_TLS_KEY_FILE" not in env
    mutual = pod_template(spec, Source("n:9876", "GID_orders", None, "orders-tls", True), "img")
    (volume,) = mutual["spec"]["volumes"]
    assert [item["key"] for item in volume["secret"]["items"]] == ["ca.crt", "tls.crt", "tls.key"]


def test_the_operator_grants_the_ledger_the_jobs_write() -> None:
    assert LEDGER_TOPIC == ledger.LEDGER_TOPIC
