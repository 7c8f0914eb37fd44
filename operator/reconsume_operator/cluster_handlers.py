"""Kopf handlers of BrokerClusters: the child objects of an operator-run cluster (owned by the
resource, so Kubernetes deletes them with it), and the status both kinds of cluster report.

The index ``broker_clusters`` tells the ConsumerGroup and Topic handlers where a cluster's
name servers are, without an API request per reconcile.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from reconsume_operator.children import children, cluster_spec
from reconsume_operator.clusters import observe_cluster
from reconsume_operator.conditions import READY, Condition
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.kube import KubeError
from reconsume_operator.metrics import reconcile_timer
from reconsume_operator.reconcile import Target
from reconsume_operator.status import status_patch

PLURAL = "brokerclusters"
LABEL = "BrokerCluster"


def register_clusters(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    @kopf.index(GROUP, VERSION, PLURAL, registry=registry, id="broker_clusters")
    def broker_clusters(body: kopf.Body, **_: Any) -> dict[tuple[str, str], Target]:
        spec = cluster_spec(body, ctx.config.image)
        return {(spec.namespace, spec.name): Target(spec.name_server, spec.rocketmq_cluster)}

    async def reconcile_cluster(
        body: kopf.Body, patch: kopf.Patch, retry: int = 0, **_: Any
    ) -> None:
        with reconcile_timer(LABEL) as outcome:
            spec = cluster_spec(body, ctx.config.image)
            objects = children(spec)
            kopf.adopt(objects, owner=body)
            generation = body.meta.get("generation")
            try:
                for obj in objects:
                    await asyncio.to_thread(ctx.writer.apply, obj)
            except KubeError as exc:
                condition = Condition(READY, False, "ChildrenFailed", str(exc))
                patch.status.update(
                    status_patch(body.get("status"), generation, utc_now(), [condition])
                )
                raise kopf.TemporaryError(str(exc), delay=ctx.backoff_s(retry)) from exc
            observed = await observe_cluster(spec, ctx.admin)
            condition = Condition(READY, observed.ready, observed.reason, observed.message)
            fields = {"phase": observed.phase, **observed.fields}
            patch.status.update(
                status_patch(body.get("status"), generation, utc_now(), [condition], fields)
            )
            outcome.result = "ok" if observed.ready else "pending"

    kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="cluster-create")(
        reconcile_cluster
    )
    kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="cluster-update")(
        reconcile_cluster
    )
    kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="cluster-resume")(
        reconcile_cluster
    )
    kopf.timer(
        GROUP,
        VERSION,
        PLURAL,
        registry=registry,
        id="cluster-status",
        interval=ctx.config.drift_interval_s,
        initial_delay=ctx.config.drift_interval_s,
    )(reconcile_cluster)
