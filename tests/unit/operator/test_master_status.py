"""The status fields the Lease watch writes (:mod:`reconsume_operator.master_status`): the
changed broker's entry and the MASTERS column, nothing when nothing a pass wrote changes."""

from __future__ import annotations

from typing import Any

from reconsume_operator.master_status import lease_state, owner_uid, updated_status
from reconsume_operator.masters import IN_SYNC_ANNOTATION, BrokerLease, broker_lease

from .test_children import resource

IMAGE = "img:1"


def cluster(**status: Any) -> dict[str, Any]:
    body = resource(replicas=2, brokers=2)
    body["status"] = status
    return body


ENTRIES = [
    {"name": "orders-broker-0", "address": "10.96.0.9:10911", "master": "orders-broker-0",
     "epoch": 1, "inSync": ["orders-broker-r1-0"]},
    {"name": "orders-broker-1", "address": "10.96.0.8:10911", "master": "orders-broker-1",
     "epoch": 1, "inSync": ["orders-broker-r1-1"]},
]  # fmt: skip


def test_a_failover_moves_its_brokers_entry_and_the_column() -> None:
    lease = BrokerLease(broker=1, master=1, epoch=2, in_sync=frozenset())
    fields = updated_status(cluster(brokers=ENTRIES), IMAGE, lease)
    assert fields is not None
    assert fields["brokers"][0] == ENTRIES[0]
    assert fields["brokers"][1] == {
        **ENTRIES[1], "master": "orders-broker-r1-1", "epoch": 2, "inSync": [],
    }  # fmt: skip
    assert fields["masters"] == "orders-broker-0,orders-broker-r1-1"


def test_nothing_is_written_when_nothing_shown_changes() -> None:
    same = BrokerLease(broker=0, master=0, epoch=1, in_sync=frozenset({1}))
    assert updated_status(cluster(brokers=ENTRIES), IMAGE, same) is None
    moved = BrokerLease(broker=0, master=1, epoch=2)
    assert updated_status(cluster(), IMAGE, moved) is None  # no pass has written entries yet
    deleting = cluster(brokers=ENTRIES)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    assert updated_status(deleting, IMAGE, moved) is None
    single = resource(brokers=2)
    single["status"] = {"brokers": ENTRIES}
    assert updated_status(single, IMAGE, moved) is None  # no Leases without replicas


def test_a_lease_is_read_as_the_status_shows_it() -> None:
    body = {
        "metadata": {
            "name": "orders-broker-1",
            "annotations": {IN_SYNC_ANNOTATION: "orders-broker-1-0"},
            "ownerReferences": [
                {"kind": "ConfigMap", "uid": "x"},
                {"kind": "BrokerCluster", "uid": "u-1"},
            ],
        },
        "spec": {"holderIdentity": "orders-broker-1-1", "leaseTransitions": 3,
                 "renewTime": "2026-12-07T10:00:00.000000Z"},
    }  # fmt: skip
    lease = broker_lease("orders", body)
    assert lease is not None
    assert lease_state(lease) == (1, 3, frozenset({0}))
    assert owner_uid(body) == "u-1"
    assert owner_uid({"metadata": {}}) is None
