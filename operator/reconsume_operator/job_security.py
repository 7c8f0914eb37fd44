"""What a DeadLetterJob's run waits for on a cluster with access control: its account's keys,
the account in the ACL every broker enforces, and the ledger topic on every broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconsume.errors import ReconsumeError
from reconsume.topology.clusters import ClusterSpec
from reconsume.topology.jobs import DeadLetterJobSpec
from reconsume_operator.access_sync import brokers_enforce, sync_acl
from reconsume_operator.clusters import operator_address
from reconsume_operator.context import OperatorContext
from reconsume_operator.dead_letter_jobs import owner_reference
from reconsume_operator.job_access import ensure_job_secret, ensure_ledger


async def secure_run(
    ctx: OperatorContext, job: DeadLetterJobSpec, cluster: ClusterSpec, body: Mapping[str, Any]
) -> tuple[str | None, str | None]:
    """``(secret, None)`` once the run may start with the account in ``secret`` (None: the
    cluster has no ACL of its own), else ``(None, what it waits for)``."""
    if cluster.external or not cluster.access_control:
        return None, None
    secret = await ensure_job_secret(ctx, job, cluster.name, owner_reference(job))
    acl = await sync_acl(ctx, cluster, body)
    if acl is None:
        return None, None
    address = operator_address(cluster, ctx.config.name_server_template)
    waiting = await brokers_enforce(ctx, address, cluster.name, acl.digest)
    if waiting is not None:
        return None, waiting
    try:
        await ensure_ledger(ctx, cluster, address)
    except (ReconsumeError, OSError) as exc:
        return None, f"the ledger topic could not be created: {exc}"
    return secret, None
