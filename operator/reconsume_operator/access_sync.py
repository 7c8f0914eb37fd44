"""Access control of a BrokerCluster on the API server and on its brokers: the admin account's
Secret, the ACL Secret rendered from the cluster's Users, Topics and ConsumerGroups, and what
each broker reports it enforces.

The ACL Secret is mounted into every broker and name-server pod, which read the file again
within a second of a change. The kubelet refreshes a mounted Secret on its periodic sync of the
pod (about a minute by default); a change of the pod object makes it sync at once, so after
writing a new ACL the operator sets :data:`DIGEST_ANNOTATION` on the cluster's pods: a
revocation reaches the brokers in seconds, not at the next periodic sync.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconsume.access.acl import parse_acl
from reconsume.access.addresses import parse_address_pattern
from reconsume.errors import InvalidArgumentError, ReconsumeError
from reconsume.topology.clusters import ClusterSpec, cluster_spec
from reconsume.wire.signing import Credentials
from reconsume_operator.acl_render import (
    ACL_FILE,
    AccountEntry,
    acl_digest,
    acl_secret,
    acl_secret_name,
    grants,
    render_acl,
    user_entries,
)
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.credentials import (
    CredentialsProblem,
    StoredKeys,
    credentials_secret,
    new_key_pair,
    stored_keys,
)
from reconsume_operator.job_access import job_entry, job_secret_name
from reconsume_operator.naming import labels
from reconsume_operator.tls_files import tls_context

log = logging.getLogger(__name__)

API_VERSION = f"{GROUP}/{VERSION}"
DIGEST_ANNOTATION = "reconsume.io/acl-digest"
"""On the ACL Secret and the cluster's pods: the digest of the ACL file written."""


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An owner reference to ``owner`` (a custom resource), so its children go with it."""
    metadata = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", API_VERSION),
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def _get(ctx: OperatorContext, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    api_version = "v1" if kind in ("Secret", "Pod") else API_VERSION
    return await asyncio.to_thread(ctx.writer.get, api_version, kind, namespace, name)


async def _list(ctx: OperatorContext, kind: str, namespace: str, selector: str = "") -> list[Any]:
    api_version = "v1" if kind == "Pod" else API_VERSION
    return await asyncio.to_thread(ctx.writer.list, api_version, kind, namespace, selector)


async def admin_keys(
    ctx: OperatorContext, spec: ClusterSpec, owner: Mapping[str, Any] | None = None
) -> StoredKeys | None:
    """The cluster's admin account (None: access control off), generated into its Secret
    (owned by ``owner``, the BrokerCluster) when an operator-run cluster has none; registered
    as what the operator signs with at the cluster's name servers. Raises CredentialsProblem
    when the Secret is missing (an external cluster's) or does not hold keys."""
    name = spec.admin_secret_name
    if name is None:
        return None
    secret = await _get(ctx, "Secret", spec.namespace, name)
    if secret is None:
        if spec.external or owner is None:
            raise CredentialsProblem(f"Secret {name} (spec.accessControl.adminSecret) not found")
        created = credentials_secret(
            name, spec.namespace, labels(spec.name, "admin"), new_key_pair(f"{spec.name}-admin")
        )
        created["metadata"]["ownerReferences"] = [owner_reference(owner)]
        await asyncio.to_thread(ctx.writer.create_missing, created)
        secret = await _get(ctx, "Secret", spec.namespace, name)
        if secret is None:
            raise CredentialsProblem(f"Secret {name} vanished as it was created")
    return stored_keys(secret)


def remember_credentials(ctx: OperatorContext, address: str, keys: StoredKeys | None) -> None:
    """Sign requests to the cluster at ``address`` with ``keys`` (None: unsigned)."""
    if keys is None:
        ctx.credentials.pop(address, None)
    else:
        ctx.credentials[address] = Credentials(keys.access_key, keys.secret_key)


@dataclass(frozen=True, slots=True)
class AclState:
    """What was written: the file's digest and its number of accounts."""

    digest: str
    accounts: int
    changed: bool


def _of_cluster(objects: list[Any], cluster: str, without: str | None = None) -> list[Any]:
    return [
        obj
        for obj in objects
        if (obj.get("spec") or {}).get("cluster") == cluster
        and not obj["metadata"].get("deletionTimestamp")
        and obj["metadata"]["name"] != without
    ]


async def render_cluster_acl(
    ctx: OperatorContext, spec: ClusterSpec, admin: StoredKeys, without_user: str | None = None
) -> tuple[str, int]:
    """The cluster's ACL file and its number of accounts: the admin account, and each User of
    the cluster (but ``without_user``, being deleted) whose Secret holds keys."""
    users = _of_cluster(await _list(ctx, "User", spec.namespace), spec.name, without_user)
    topics = _of_cluster(await _list(ctx, "Topic", spec.namespace), spec.name)
    groups = _of_cluster(await _list(ctx, "ConsumerGroup", spec.namespace), spec.name)
    found = grants(topics, groups)
    now = utc_now()
    entries = [
        AccountEntry(admin.access_key, admin.secret_key, "the cluster's admin account", admin=True)
    ]
    for user in users:
        user_name = user["metadata"]["name"]
        secret_name = (user.get("spec") or {}).get("secretName") or user_name
        secret = await _get(ctx, "Secret", spec.namespace, secret_name)
        if secret is None:
            continue  # its handler creates it, then renders again
        try:
            keys = stored_keys(secret)
            user_problem = whitelist_problem(user)
        except CredentialsProblem as exc:
            log.warning("User %s/%s left out of the ACL: %s", spec.namespace, user_name, exc)
            continue
        if user_problem is not None:
            log.warning(
                "User %s/%s left out of the ACL: %s", spec.namespace, user_name, user_problem
            )
            continue
        entries += user_entries(user, keys.pairs(now), found)
    entries += await job_entries(ctx, spec, groups, now)
    for pattern in spec.allowed_addresses:
        try:
            parse_address_pattern(pattern, "spec.accessControl.allowedAddresses")
        except InvalidArgumentError as exc:
            raise CredentialsProblem(str(exc)) from None
    text = render_acl(entries, spec.allowed_addresses)
    try:  # what every server will read: never write a file they would refuse
        parse_acl(tomllib.loads(text), f"the ACL of BrokerCluster {spec.name}")
    except (InvalidArgumentError, tomllib.TOMLDecodeError) as exc:
        raise CredentialsProblem(str(exc)) from None
    return text, len({entry.access_key for entry in entries})


async def job_entries(
    ctx: OperatorContext, spec: ClusterSpec, groups: list[Any], now: datetime
) -> list[AccountEntry]:
    """The accounts of the DeadLetterJobs of the cluster's ConsumerGroups that have keys."""
    by_name = {group["metadata"]["name"]: group for group in groups}
    entries: list[AccountEntry] = []
    for job in await _list(ctx, "DeadLetterJob", spec.namespace):
        group = by_name.get((job.get("spec") or {}).get("consumerGroup"))
        if group is None or job["metadata"].get("deletionTimestamp"):
            continue
        secret = await _get(ctx, "Secret", spec.namespace, job_secret_name(job["metadata"]["name"]))
        if secret is None:
            continue
        try:
            keys = stored_keys(secret)
        except CredentialsProblem:
            continue
        entries += job_entry(job, group, keys.pairs(now))
    return entries


def whitelist_problem(user: Mapping[str, Any]) -> str | None:
    """Why a User's ``spec.allowedAddress`` is no whitelist pattern the servers read (the CRD
    checks its characters only), or None."""
    pattern = (user.get("spec") or {}).get("allowedAddress")
    if not pattern:
        return None
    try:
        parse_address_pattern(str(pattern), "spec.allowedAddress")
    except InvalidArgumentError as exc:
        return str(exc)
    return None


async def sync_acl(
    ctx: OperatorContext,
    spec: ClusterSpec,
    owner: Mapping[str, Any],
    without_user: str | None = None,
) -> AclState | None:
    """Write the cluster's ACL Secret if its content changed, and have the kubelet refresh it
    in the cluster's pods; None when access control is off or the cluster is external."""
    if spec.external or not spec.access_control:
        return None
    async with ctx.acl_lock(spec.namespace, spec.name):
        admin = await admin_keys(ctx, spec, owner)
        assert admin is not None
        text, accounts = await render_cluster_acl(ctx, spec, admin, without_user)
        digest = acl_digest(text)
        current = await _get(ctx, "Secret", spec.namespace, acl_secret_name(spec.name))
        changed = written_digest(current) != digest
        if changed:
            secret = acl_secret(spec, text)
            secret["metadata"]["ownerReferences"] = [owner_reference(owner)]
            await asyncio.to_thread(ctx.writer.apply, secret)
        await refresh_pods(ctx, spec, digest)
        return AclState(digest, accounts, changed)


def written_digest(secret: Mapping[str, Any] | None) -> str | None:
    """The digest of the ACL file a Secret holds (None: no readable file), from its content:
    an edit by hand is seen and overwritten."""
    encoded = ((secret or {}).get("data") or {}).get(ACL_FILE)
    if not isinstance(encoded, str):
        return None
    try:
        return acl_digest(base64.b64decode(encoded, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError):
        return None


async def refresh_pods(ctx: OperatorContext, spec: ClusterSpec, digest: str) -> None:
    """Annotate the cluster's broker and name-server pods with ``digest``, which makes the
    kubelet sync them (and the mounted ACL) now."""
    selector = (
        f"app.kubernetes.io/instance={spec.name},app.kubernetes.io/component in (broker,namesrv)"
    )
    for pod in await _list(ctx, "Pod", spec.namespace, selector):
        annotations = pod["metadata"].get("annotations") or {}
        if annotations.get(DIGEST_ANNOTATION) == digest:
            continue
        patch = {"metadata": {"annotations": {DIGEST_ANNOTATION: digest}}}
        await asyncio.to_thread(
            ctx.writer.merge_patch, "v1", "Pod", spec.namespace, pod["metadata"]["name"], patch
        )


async def enforced_digests(
    ctx: OperatorContext, address: str, cluster: str | None
) -> dict[tuple[str, str], str]:
    """The ACL digest each broker of the cluster at ``address`` reports, by broker name (with
    ``#<id>`` for a replica) and address (``""``: access control off on it; brokers that do
    not answer are left out)."""
    found: dict[tuple[str, str], str] = {}
    async with ctx.admin(address) as admin:
        for broker in await admin.brokers(cluster):
            for broker_id, broker_address in sorted(broker.addresses.items()):
                try:
                    info = await admin.broker_api.runtime_info(broker_address)
                except (ReconsumeError, OSError):
                    continue
                name = broker.name if broker_id == 0 else f"{broker.name}#{broker_id}"
                found[(name, broker_address)] = info.get("aclDigest", "")
    return found


async def remember_tls(ctx: OperatorContext, spec: ClusterSpec, address: str) -> None:
    """Connect to the cluster at ``address`` with TLS when ``spec.tls`` asks for it, trusting
    its Secret's ``ca.crt`` (and presenting its certificate, where the servers ask for one)."""
    if spec.tls_secret is None:
        ctx.tls.pop(address, None)
        return
    secret = await _get(ctx, "Secret", spec.namespace, spec.tls_secret)
    if secret is None:
        raise CredentialsProblem(f"Secret {spec.tls_secret} (spec.tls.secretName) not found")
    ctx.tls[address] = tls_context(secret, with_certificate=spec.tls_client_auth != "None")


async def prepare_cluster(
    ctx: OperatorContext, spec: ClusterSpec, owner: Mapping[str, Any], address: str
) -> AclState | None:
    """What a cluster pass does first: the credentials and TLS the operator reaches the
    cluster with, and (operator-run) the ACL Secret its pods mount."""
    keys = await admin_keys(ctx, spec, None if spec.external else owner)
    remember_credentials(ctx, address, keys)
    await remember_tls(ctx, spec, address)
    return await sync_acl(ctx, spec, owner)


async def ensure_credentials(ctx: OperatorContext, spec: ClusterSpec, address: str) -> None:
    """Load the cluster's admin account and TLS settings unless a cluster pass already did (a
    Topic's or ConsumerGroup's handler may run first after the operator starts)."""
    if spec.admin_secret_name is not None and address not in ctx.credentials:
        # An operator-run cluster's admin Secret is made here if its own pass has not yet: both
        # create it only if missing, then read the one that exists.
        owner = (
            None if spec.external else await _get(ctx, "BrokerCluster", spec.namespace, spec.name)
        )
        remember_credentials(ctx, address, await admin_keys(ctx, spec, owner))
    if spec.tls_secret is not None and address not in ctx.tls:
        await remember_tls(ctx, spec, address)


def access_status(spec: ClusterSpec, acl: AclState | None) -> dict[str, Any]:
    """``status.accessControl`` of a BrokerCluster."""
    status: dict[str, Any] = {"enabled": spec.access_control}
    if spec.admin_secret_name is not None:
        status["adminSecret"] = spec.admin_secret_name
    if acl is not None:
        status.update(
            aclSecret=acl_secret_name(spec.name), accounts=acl.accounts, digest=acl.digest
        )
    return status


async def sync_cluster(
    ctx: OperatorContext, namespace: str, cluster: str, without_user: str | None = None
) -> tuple[ClusterSpec, AclState] | None:
    """:func:`sync_acl` of the BrokerCluster ``cluster``, with its spec (None: it does not
    exist, is being deleted, or has no ACL of its own)."""
    body = await _get(ctx, "BrokerCluster", namespace, cluster)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return None
    spec = cluster_spec(body, ctx.config.image)
    state = await sync_acl(ctx, spec, body, without_user)
    return None if state is None else (spec, state)


def names_users(spec: Mapping[str, Any] | None) -> bool:
    """Whether a Topic's or ConsumerGroup's spec grants anything to Users."""
    return bool(spec and (spec.get("producers") or spec.get("consumers")))


async def brokers_enforce(
    ctx: OperatorContext, address: str, cluster: str, digest: str
) -> str | None:
    """None when every broker of the cluster enforces the ACL ``digest``; else what waits."""
    try:
        digests = await enforced_digests(ctx, address, cluster)
    except (ReconsumeError, OSError) as exc:
        return f"the brokers of BrokerCluster {cluster} do not answer: {exc}"
    behind = sorted(name for (name, _), found in digests.items() if found != digest)
    if not digests:
        return f"no broker of BrokerCluster {cluster} answered"
    if behind:
        return f"waiting for {', '.join(behind)} to enforce the run's account"
    return None
