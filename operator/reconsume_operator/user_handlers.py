"""Kopf handlers of Users: an account of one BrokerCluster, its keys in a Secret, its
permissions in the cluster's ACL.

A pass makes sure the Secret holds keys (generating it, owned by the User, when missing;
adopting it as it is otherwise), rotates a generated key when ``spec.rotation.token`` changed,
renders the cluster's ACL again (:mod:`reconsume_operator.access_sync`), and reports in status
which brokers enforce the file that holds the account: Ready once every broker does. Until
then, and while a previous key is still valid, the pass comes back after a few seconds; the
drift timer repeats it.

Deleting a User renders the ACL without it before Kopf's finalizer is released: the account
stops working as soon as the brokers read the file (seconds: the pods are annotated, which
makes the kubelet refresh the mounted Secret at once). A generated Secret goes with the User
(owner reference); an adopted one is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import kopf

from reconsume.errors import ReconsumeError
from reconsume_operator.access_sync import (
    AclState,
    enforced_digests,
    owner_reference,
    sync_cluster,
    whitelist_problem,
)
from reconsume_operator.clusters import operator_address
from reconsume_operator.conditions import READY, Condition, now_text
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.credentials import (
    CredentialsProblem,
    StoredKeys,
    credentials_secret,
    new_key_pair,
    promoted,
    rotated,
    stored_keys,
)
from reconsume_operator.events import Warnings, normal
from reconsume_operator.kube import KubeError
from reconsume_operator.metrics import reconcile_timer
from reconsume_operator.naming import labels
from reconsume_operator.passes import ObjectLocks, deleting
from reconsume_operator.status import status_patch

PLURAL = "users"
LABEL = "User"
USER_LABEL = "reconsume.io/user"
RECHECK_S = 2.0
"""Seconds between passes while brokers have not loaded the ACL or a previous key is valid."""
DEFAULT_WINDOW_S = 600


def secret_name(body: Mapping[str, Any]) -> str:
    return str((body.get("spec") or {}).get("secretName") or body["metadata"]["name"])


def secret_patch(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch turning ``current``'s data and annotations into ``wanted``'s (keys
    ``wanted`` lacks are removed)."""
    have, want = current.get("data") or {}, wanted.get("data") or {}
    patch: dict[str, Any] = {"data": {**{k: None for k in have if k not in want}, **want}}
    have = (current.get("metadata") or {}).get("annotations") or {}
    want = wanted["metadata"].get("annotations") or {}
    ours = {k for k in have if k.startswith("reconsume.io/")}
    patch["metadata"] = {"annotations": {**{k: None for k in ours if k not in want}, **want}}
    return patch


def register_users(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    passes = ObjectLocks()
    warnings = Warnings()
    template = ctx.config.name_server_template

    async def get_secret(namespace: str, name: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(ctx.writer.get, "v1", "Secret", namespace, name)

    async def user_keys(body: kopf.Body, namespace: str) -> StoredKeys:
        """The User's keys: its Secret generated when missing, rotated when asked."""
        name = secret_name(body)
        user = str(body.meta["name"])
        spec = body.get("spec") or {}
        rotation = spec.get("rotation") or {}
        token = str(rotation.get("token") or "")
        secret_labels = {**labels(str(spec.get("cluster")), "user"), USER_LABEL: user}
        secret = await get_secret(namespace, name)
        if secret is None:
            created = credentials_secret(name, namespace, secret_labels, new_key_pair(user), token)
            created["metadata"]["ownerReferences"] = [owner_reference(body)]
            await asyncio.to_thread(ctx.writer.create_missing, created)
            normal(body, "SecretCreated", f"generated the access key into Secret {name}")
            secret = await get_secret(namespace, name)
            if secret is None:
                raise CredentialsProblem(f"Secret {name} vanished as it was created")
        keys = stored_keys(secret)
        if keys.generated:
            owners = secret["metadata"].get("ownerReferences") or []
            if owners and all(o.get("uid") != body.meta.get("uid") for o in owners):
                raise CredentialsProblem(
                    f"Secret {name} was generated for another owner ({owners[0].get('kind')} "
                    f"{owners[0].get('name')}); name another one in spec.secretName"
                )
        wanted = rotated(keys, namespace, secret_labels, user, token, utc_now())
        if wanted is None:
            return keys
        return await rewrite(namespace, secret, wanted)

    async def rewrite(
        namespace: str, secret: Mapping[str, Any], wanted: Mapping[str, Any]
    ) -> StoredKeys:
        """Patch ``secret`` into ``wanted``; the keys it then holds."""
        name = str(secret["metadata"]["name"])
        patch = secret_patch(secret, wanted)
        await asyncio.to_thread(ctx.writer.merge_patch, "v1", "Secret", namespace, name, patch)
        refreshed = await get_secret(namespace, name)
        if refreshed is None:
            raise CredentialsProblem(f"Secret {name} was deleted while it was rotated")
        return stored_keys(refreshed)

    async def promote(body: kopf.Body, namespace: str, keys: StoredKeys) -> StoredKeys:
        """Step 2 of a rotation (every broker knows the next key): hand it to the clients."""
        rotation = (body.get("spec") or {}).get("rotation") or {}
        window_s = int(rotation.get("windowSeconds", DEFAULT_WINDOW_S))
        secret = await get_secret(namespace, keys.name)
        cluster = str((body.get("spec") or {}).get("cluster"))
        secret_labels = {**labels(cluster, "user"), USER_LABEL: str(body.meta["name"])}
        wanted = promoted(keys, namespace, secret_labels, window_s, utc_now())
        if secret is None or wanted is None:
            return keys
        promoted_keys = await rewrite(namespace, secret, wanted)
        normal(
            body,
            "KeyRotated",
            f"new access key in Secret {keys.name}; the old one stays valid for {window_s} s",
        )
        return promoted_keys

    async def checked_keys(body: kopf.Body, namespace: str) -> StoredKeys:
        """:func:`user_keys`, refused when its whitelist pattern keeps it out of the ACL."""
        keys = await user_keys(body, namespace)
        if (problem := whitelist_problem(body)) is not None:
            raise CredentialsProblem(f"left out of the ACL: {problem}")
        return keys

    async def reconcile_user(body: kopf.Body, patch: kopf.Patch, retry: int = 0, **_: Any) -> None:
        async with passes.hold(body):
            if deleting(body):
                return
            with reconcile_timer(LABEL) as outcome:
                namespace = str(body.meta.get("namespace") or "default")
                cluster = str((body.get("spec") or {}).get("cluster"))
                generation = body.meta.get("generation")
                fields: dict[str, Any] = {"secretName": secret_name(body)}
                try:
                    keys = await checked_keys(body, namespace)
                    fields.update(key_fields(keys, utc_now()))
                    synced = await sync_cluster(ctx, namespace, cluster)
                except (KubeError, CredentialsProblem) as exc:
                    condition = Condition(READY, False, "CredentialsFailed", str(exc))
                    warnings.post(body, condition.reason, condition.message)
                    fields["phase"] = "Failed"
                    patch.status.update(
                        status_patch(body.get("status"), generation, utc_now(), [condition], fields)
                    )
                    outcome.result = "error"
                    raise kopf.TemporaryError(str(exc), delay=ctx.backoff_s(retry)) from exc
                if synced is None:
                    message = (
                        f"BrokerCluster {cluster} does not exist in namespace {namespace}, is "
                        "being deleted, is external or has access control off: the account is "
                        "on no broker"
                    )
                    condition = Condition(READY, False, "ClusterNotSecured", message)
                    fields["phase"] = "Pending"
                    fields["brokers"] = []
                    warnings.post(body, condition.reason, message)
                    patch.status.update(
                        status_patch(body.get("status"), generation, utc_now(), [condition], fields)
                    )
                    outcome.result = "pending"
                    raise kopf.TemporaryError(message, delay=ctx.backoff_s(retry))
                spec, acl = synced
                brokers = await applied(operator_address(spec, template), spec.name, acl)
                fields["appliedDigest"] = acl.digest
                fields["brokers"] = brokers
                missing = [b["name"] for b in brokers if not b["applied"]]
                if not brokers:
                    condition = Condition(READY, False, "NoBrokers", "no broker answered")
                elif missing:
                    message = f"not yet enforced by {', '.join(missing)}"
                    condition = Condition(READY, False, "Applying", message)
                else:
                    message = f"enforced by {len(brokers)} broker(s) of {cluster}"
                    condition = Condition(READY, True, "Applied", message)
                fields["phase"] = "Ready" if condition.status else "Pending"
                if condition.status and keys.next is not None:
                    # Every broker knows the next key (the ACL it enforces holds it).
                    keys = await promote(body, namespace, keys)
                    fields.update(key_fields(keys, utc_now()))
                patch.status.update(
                    status_patch(body.get("status"), generation, utc_now(), [condition], fields)
                )
                if condition.status:
                    if warnings.settled(body, condition.reason):
                        normal(body, condition.reason, condition.message)
                else:
                    outcome.result = "pending"
                    raise kopf.TemporaryError(condition.message, delay=RECHECK_S)
                if keys.previous is not None:
                    outcome.result = "pending"  # back when the previous key expires
                    raise kopf.TemporaryError("previous key still valid", delay=RECHECK_S * 5)
                outcome.result = "ok"

    async def applied(address: str, cluster: str, acl: AclState) -> list[dict[str, Any]]:
        try:
            digests = await enforced_digests(ctx, address, cluster)
        except (ReconsumeError, OSError):
            return []
        return [
            {"name": name, "address": broker, "applied": digest == acl.digest}
            for (name, broker), digest in sorted(digests.items())
        ]

    async def delete_user(body: kopf.Body, retry: int = 0, **_: Any) -> None:
        async with passes.hold(body):
            with reconcile_timer(LABEL) as outcome:
                namespace = str(body.meta.get("namespace") or "default")
                cluster = str((body.get("spec") or {}).get("cluster"))
                user = str(body.meta["name"])
                try:
                    await sync_cluster(ctx, namespace, cluster, without_user=user)
                except (KubeError, CredentialsProblem) as exc:
                    outcome.result = "error"
                    raise kopf.TemporaryError(
                        f"the account is still in the ACL: {exc}", delay=ctx.backoff_s(retry)
                    ) from exc
                outcome.result = "ok"

    for cause, decorator in (
        ("create", kopf.on.create),
        ("update", kopf.on.update),
        ("resume", kopf.on.resume),
    ):
        decorator(GROUP, VERSION, PLURAL, registry=registry, id=f"user-{cause}")(reconcile_user)
    kopf.timer(
        GROUP,
        VERSION,
        PLURAL,
        registry=registry,
        id="user-status",
        interval=ctx.config.drift_interval_s,
        initial_delay=ctx.config.drift_interval_s,
    )(reconcile_user)
    kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry, id="user-delete")(delete_user)


def key_fields(keys: StoredKeys, now: datetime) -> dict[str, Any]:
    """The status fields of a User's keys (access keys only, never a secret)."""
    fields: dict[str, Any] = {"accessKey": keys.access_key, "adopted": not keys.generated}
    valid = keys.previous is not None and not keys.expired(now)
    if valid and keys.previous is not None and keys.previous_expires is not None:
        fields["previousAccessKey"] = keys.previous[0]
        fields["previousExpiresAt"] = now_text(keys.previous_expires)
    else:
        fields["previousAccessKey"] = None
        fields["previousExpiresAt"] = None
    return fields
