"""The demo's manifests: written to ``<dir>/manifests`` and applied by embedded mode, so they
are the same YAML a user would ``kubectl apply``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "reconsume.io/v1alpha1"
CLUSTER = "demo"
TOPIC = "orders"
GROUP_RESOURCE = "order-payments"
GROUP = "GID_order_payments"


@dataclass(frozen=True, slots=True)
class Plan:
    """How big the demo is."""

    orders: int
    legacy: int
    """Orders from the retired legacy checkout: no payment will ever accept them."""
    brokers: int
    delay_levels: str
    """The cluster's delay levels, shortened from RocketMQ's 1s 5s 10s 30s 1m ... 2h; a retry
    after ``n`` failures waits level ``3 + n`` (the default DelayLevels policy)."""
    max_times: int
    produce_over_s: float
    rate_per_second: int

    @property
    def delays(self) -> tuple[str, ...]:
        """The waits before each retry: levels 3 .. 2 + max_times."""
        levels = self.delay_levels.split()
        return tuple(levels[2 : 2 + self.max_times])


FULL = Plan(
    orders=60, legacy=6, brokers=2, max_times=3, produce_over_s=4.0, rate_per_second=20,
    delay_levels="500ms 1s 2s 4s 8s 16s 32s 1m 2m 4m 8m 16m 32m 1h 2h 4h 8h 16h",
)  # fmt: skip
FAST = Plan(
    orders=16, legacy=3, brokers=1, max_times=2, produce_over_s=1.0, rate_per_second=50,
    delay_levels="250ms 500ms 1s 2s 4s 8s 16s 32s 1m 2m 4m 8m 16m 32m 1h 2h 4h 8h",
)  # fmt: skip


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def topology(plan: Plan) -> dict[str, dict[str, Any]]:
    """File name → object: the cluster, the topic and the consumer group."""
    return {
        "brokercluster.yaml": _object(
            "BrokerCluster", CLUSTER, {"brokers": plan.brokers, "delayLevels": plan.delay_levels}
        ),
        "topic.yaml": _object("Topic", TOPIC, {"cluster": CLUSTER, "queues": 4}),
        "consumergroup.yaml": _object(
            "ConsumerGroup",
            GROUP_RESOURCE,
            {
                "cluster": CLUSTER,
                "groupName": GROUP,
                "retry": {
                    "queueNums": 1,
                    "maxTimes": plan.max_times,
                    "policy": {"type": "DelayLevels"},
                },
                "subscriptions": [{"topic": TOPIC}],
                "deletionPolicy": "Delete",
            },
        ),
    }


SPARK = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2",
                                        "spark.ui.enabled": "false"}}  # fmt: skip


def drain(archive: Path) -> tuple[str, dict[str, Any]]:
    """Archive the legacy-checkout orders (no payment will take them) for a person to follow up."""
    spec = {
        "consumerGroup": GROUP_RESOURCE,
        "action": "Drain",
        "filter": "tags = 'legacy'",
        "sink": {"format": "parquet", "path": str(archive)},
        "spark": SPARK,
    }
    return "deadletterjob-drain.yaml", _object("DeadLetterJob", "legacy-orders-archive", spec)


def reprocess(plan: Plan) -> tuple[str, dict[str, Any]]:
    """Send the other dead letters back to ``orders`` once payment works again."""
    spec = {
        "consumerGroup": GROUP_RESOURCE,
        "action": "Reprocess",
        "target": {"topic": TOPIC},
        "ratePerSecond": plan.rate_per_second,
        "spark": SPARK,
    }
    return "deadletterjob-reprocess.yaml", _object("DeadLetterJob", "orders-replay", spec)


def write(directory: Path, name: str, document: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
