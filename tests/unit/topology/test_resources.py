"""One reconcile and one deletion of a resource against an in-memory cluster behind the admin
protocol: statuses fit the CRDs, failures become reasons, deletion policies hold."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reconsume.errors import RemotingConnectError
from reconsume.topology import Kind, SpecError
from reconsume.topology.fake_admin import FakeAdmin, FakeBroker
from reconsume.topology.resources import Result, Target, annotated, object_name, reconcile, remove

from ..crds.schema import load_crds, root_schema, validate

CRDS = load_crds()
TARGET = Target("127.0.0.1:9876", None)
DLQ = "%DLQ%GID_orders"


class Session:
    """What ``AdminClient(...)`` is to the reconcile: an async context manager."""

    def __init__(self, admin: FakeAdmin, reachable: bool = True) -> None:
        self.admin = admin
        self.reachable = reachable
        self.addresses: list[str] = []

    def __call__(self, address: str) -> Session:
        self.addresses.append(address)
        return self

    async def __aenter__(self) -> FakeAdmin:
        if not self.reachable:
            raise RemotingConnectError("connect to 127.0.0.1:9876 failed")
        return self.admin

    async def __aexit__(self, *exc: object) -> None:
        return None


def fake() -> FakeAdmin:
    return FakeAdmin([FakeBroker("broker-a", "127.0.0.1:1"), FakeBroker("broker-b", "127.0.0.1:2")])


def group(**spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "orders-consumer", "annotations": {}}
    return {"metadata": metadata, "spec": {"cluster": "orders", "groupName": "GID_orders", **spec}}


def run(coroutine: Any) -> Result:
    result: Result = asyncio.run(coroutine)
    return result


def test_a_group_is_configured_on_every_broker_and_reported_ready() -> None:
    admin = fake()
    result = run(reconcile(Kind.GROUP, group(retry={"maxTimes": 3}), TARGET, Session(admin)))
    assert result.ready, result
    assert result.reason == "Reconciled"
    assert len(result.changes) == 6  # group, retry and DLQ topic on two brokers
    for broker in admin.brokers_:
        assert broker.groups["GID_orders"].retry_max_times == 3
        assert {"%RETRY%GID_orders", DLQ} <= set(broker.topics)
    schema = root_schema(CRDS["ConsumerGroup"])["properties"]["status"]
    assert validate(schema, dict(result.status)) == []
    again = run(reconcile(Kind.GROUP, group(retry={"maxTimes": 3}), TARGET, Session(admin)))
    assert again.ready
    assert again.changes == ()


def test_a_topic_is_configured_and_its_status_fits_the_crd() -> None:
    admin = fake()
    body = {"metadata": {"name": "orders"}, "spec": {"cluster": "orders", "queues": 4}}
    result = run(reconcile(Kind.TOPIC, body, TARGET, Session(admin)))
    assert result.ready
    assert admin.brokers_[0].topics["orders"].write_queue_nums == 4
    schema = root_schema(CRDS["Topic"])["properties"]["status"]
    assert validate(schema, dict(result.status)) == []


def test_a_broker_down_is_not_ready_with_its_error() -> None:
    admin = fake()
    admin.brokers_[1].down = True
    result = run(reconcile(Kind.GROUP, group(), TARGET, Session(admin)))
    assert not result.ready
    assert result.reason == "BrokerUnreachable"
    assert "broker-b" in result.message
    assert "GID_orders" in admin.brokers_[0].groups


def test_name_servers_that_do_not_answer_are_reported() -> None:
    result = run(reconcile(Kind.GROUP, group(), TARGET, Session(fake(), reachable=False)))
    assert (result.ready, result.reason) == (False, "NameServerUnreachable")
    assert "127.0.0.1:9876" in result.message


def test_an_invalid_spec_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"spec\.retry\.maxTimes"):
        run(reconcile(Kind.GROUP, group(retry={"maxTimes": -5}), TARGET, Session(fake())))


def test_retain_leaves_everything_on_the_brokers() -> None:
    admin = fake()
    run(reconcile(Kind.GROUP, group(), TARGET, Session(admin)))
    admin.requests.clear()
    result = run(remove(Kind.GROUP, group(), TARGET, Session(admin)))
    assert (result.ready, result.reason) == (True, "Retained")
    assert admin.requests == []


def test_delete_is_refused_while_dead_letters_are_kept_unless_forced() -> None:
    admin = fake()
    body = group(deletionPolicy="Delete")
    run(reconcile(Kind.GROUP, body, TARGET, Session(admin)))
    admin.brokers_[0].stored[DLQ] = 7
    refused = run(remove(Kind.GROUP, body, TARGET, Session(admin)))
    assert (refused.ready, refused.reason) == (False, "DeletionRefused")
    assert "7 on broker-a" in refused.message
    assert "GID_orders" in admin.brokers_[0].groups

    body["metadata"]["annotations"]["reconsume.io/force-delete"] = "true"
    deleted = run(remove(Kind.GROUP, body, TARGET, Session(admin)))
    assert (deleted.ready, deleted.reason) == (True, "Deleted")
    for broker in admin.brokers_:
        assert "GID_orders" not in broker.groups
        assert not {"%RETRY%GID_orders", DLQ} & set(broker.topics)


def test_delete_of_an_empty_group_needs_no_force() -> None:
    admin = fake()
    body = group(deletionPolicy="Delete")
    run(reconcile(Kind.GROUP, body, TARGET, Session(admin)))
    result = run(remove(Kind.GROUP, body, TARGET, Session(admin)))
    assert result.ready
    assert all(not b.groups for b in admin.brokers_)


def test_annotations_and_names() -> None:
    body = {"metadata": {"name": "x", "annotations": {"reconsume.io/paused": "True"}}, "spec": {}}
    assert annotated(body, "reconsume.io/paused")
    assert not annotated(body, "reconsume.io/force-delete")
    assert object_name(Kind.GROUP, body) == "x"
    assert object_name(Kind.TOPIC, {"metadata": {"name": "x"}, "spec": {"topicName": "t"}}) == "t"
