"""A new user's first cluster that never comes up, with the real kubectl: ``kubectl apply -f
examples/`` in a namespace whose quota admits no pods (as on a cluster without storage or
images), what ``kubectl get`` and ``kubectl describe`` show meanwhile, and the documented
deletion order finishing regardless."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import pytest

from .node import Node
from .support import EXAMPLES, RESTRICTED, condition, describe, get, items, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

JOURNEY = "journey"


def events(node: Node, kind: str, name: str, reason: str) -> list[dict[str, object]]:
    """The Events of ``reason`` on the ``kind`` object ``name`` in the journey namespace."""
    return [
        e
        for e in items(node, "events", JOURNEY)
        if (e["involvedObject"].get("kind"), e["involvedObject"]["name"]) == (kind, name)
        and e.get("reason") == reason
    ]


def retries(body: dict[str, Any] | None) -> int:
    """How often the operator has retried the object's create handler (Kopf's progress)."""
    annotations = ((body or {}).get("metadata") or {}).get("annotations") or {}
    progress = annotations.get("operator.reconsume.io/reconcile-create")
    return int(json.loads(progress).get("retries") or 0) if progress else 0


def waiting_for_group(node: Node, job: str) -> dict[str, Any] | None:
    found = get(node, "dlj", job, JOURNEY)
    return found if condition(found).get("reason") == "WaitingForConsumerGroup" else None


def printed(node: Node, kind: str) -> list[list[str]]:
    """``kubectl get <kind>`` as rows of columns, the header first."""
    text = node.kubectl("-n", JOURNEY, "get", kind).stdout
    return [line.split() for line in text.splitlines()]


def test_a_cluster_that_never_comes_up_shows_why_and_is_deleted_in_the_documented_order(
    installed: Node,
) -> None:
    node = installed
    node.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": JOURNEY, "labels": RESTRICTED}},
            {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "no-pods", "namespace": JOURNEY},
             "spec": {"hard": {"pods": "0"}}},
        ]
    )  # fmt: skip
    try:
        node.kubectl("-n", JOURNEY, "apply", "-f", str(EXAMPLES))
        # Printer columns come from the spec: no waiting for a first reconcile.
        groups = printed(node, "rcg")
        assert groups[1][:3] == ["orders-consumer", "GID_orders", "orders"], groups
        topics = printed(node, "rtopic")
        assert topics[1][:3] == ["orders", "orders", "orders"], topics

        wait_for(
            lambda: (
                condition(get(node, "rbc", "orders", JOURNEY)).get("reason")
                == "NameServerUnreachable"
            ),
            120,
            "BrokerCluster orders NameServerUnreachable",
            node,
        )
        node.kubectl(
            "-n", JOURNEY, "wait", "--for=condition=Ready=False", "rcg/orders-consumer",
            "--timeout=60s", timeout_s=70,
        )  # fmt: skip
        # The examples' DeadLetterJobs wait for their group instead of failing at once.
        for job in ("orders-dlq-archive", "orders-dlq-purge", "orders-dlq-replay"):
            found = wait_for(
                functools.partial(waiting_for_group, node, job),
                60,
                f"DeadLetterJob {job} waiting for its group",
                node,
            )
            assert found["status"]["phase"] == "Pending"
        assert items(node, "jobs", JOURNEY) == []

        # An external cluster's BROKERS column counts registered brokers, and it has no
        # storage it does not use.
        clusters = {row[0]: row for row in printed(node, "rbc")}
        header = printed(node, "rbc")[0]
        legacy = get(node, "rbc", "legacy", JOURNEY)
        assert legacy is not None
        assert "storage" not in legacy["spec"], legacy["spec"]
        assert header[:4] == ["NAME", "READY", "PHASE", "BROKERS"], header
        assert clusters["legacy"][3] != "2", clusters

        # The name servers' Deployment asks for resources.
        deployment = get(node, "deployment", "orders-namesrv", JOURNEY)
        assert deployment is not None
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["requests"], container

        # A storage size change is refused by the API server, naming the field.
        patch = json.dumps({"spec": {"storage": {"size": "20Gi"}}})
        refused = node.kubectl(
            "-n", JOURNEY, "patch", "rbc", "orders", "--type=merge", "-p", patch, check=False
        )
        assert refused.returncode != 0
        assert "spec.storage.size" in refused.stderr, refused.stderr

        # kubectl explain shows defaults.
        explained = node.kubectl("explain", "brokerclusters.spec.brokers").stdout
        assert "Default" in explained, explained

        # kubectl describe shows each failure reason once, however often it was retried.
        described = node.kubectl("-n", JOURNEY, "describe", "rbc", "orders").stdout
        assert "NameServerUnreachable" in described, described
        described = node.kubectl("-n", JOURNEY, "describe", "rcg", "orders-consumer").stdout
        assert "NameServerUnreachable" in described, described
        wait_for(
            lambda: retries(get(node, "rcg", "orders-consumer", JOURNEY)) >= 3,
            60,
            "three retries of the group's reconcile",
            node,
        )
        warnings = events(node, "ConsumerGroup", "orders-consumer", "NameServerUnreachable")
        assert len(warnings) == 1, warnings
        assert warnings[0].get("count", 1) == 1, warnings
        assert len(events(node, "BrokerCluster", "orders", "NameServerUnreachable")) == 1

        # The documented order (docs/install.md, Uninstalling) finishes.
        started = time.monotonic()
        for kinds in ("dlj", "rcg,rtopic,ruser", "rbc"):
            deleted = node.kubectl(
                "-n", JOURNEY, "delete", kinds, "--all", "--timeout=60s", timeout_s=70,
                check=False,
            )  # fmt: skip
            assert deleted.returncode == 0, (
                f"kubectl delete {kinds}: {deleted.stdout}{deleted.stderr}\n"
                + node.kubectl("-n", JOURNEY, "get", kinds, "-o", "yaml", check=False).stdout
                + describe(node)
            )
        assert time.monotonic() - started < 60
        left = events(node, "ConsumerGroup", "orders-consumer", "LeftOnBrokers")
        assert left, "no LeftOnBrokers event"
        assert "never became Ready" in str(left[0]["message"]), left
    finally:
        node.kubectl(
            "delete", "namespace", JOURNEY, "--ignore-not-found", "--timeout=120s",
            timeout_s=130,
        )  # fmt: skip
