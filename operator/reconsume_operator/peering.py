"""The peering object the replicas of the operator find each other through.

Kopf neither defines the peering resources nor creates the peering object; with mandatory
peering and no object it waits, silently and for ever. So the operator creates its object at
startup when it is missing: a ClusterKopfPeering when it watches the whole cluster, else a
KopfPeering in every watched namespace named exactly (a glob pattern names no namespace to
create one in). The definitions themselves (``crds/kopf/peering.yaml``) stay the installer's.

An object it may not create (the chart grants only ``get``: the chart creates it) it waits for,
for up to :data:`WAIT_FOR_INSTALLER_S`, before Kopf's peering starts. ``helm install`` creates
custom resources after Deployments, so the operator's pods can start before their peering
object exists; Kopf then sends its first keep-alive into nothing (it ignores a missing object)
and the next one a lifetime later, while each replica, seeing no other in the object that
appeared meanwhile, acts: two replicas acted together for a minute after every install.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from reconsume_operator.kube import ChildWriter, KubeError

PEERING_API_VERSION = "kopf.dev/v1"
WAIT_FOR_INSTALLER_S = 30.0
"""How long startup waits for a peering object it could not create itself."""
LABELS = {"app.kubernetes.io/managed-by": "reconsume-operator"}
"""The labels of the peering objects the operator creates: not Helm's (a ``helm install`` after
the operator created the object leaves it alone, docs/install.md)."""
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def peering_objects(
    name: str, *, clusterwide: bool, namespaces: Iterable[str]
) -> list[dict[str, Any]]:
    """The peering objects the operator needs: one cluster-wide, or one per namespace named
    plainly in ``namespaces`` (Kopf's comma-separated lists are split; globs and exclusions
    are skipped)."""
    if clusterwide:
        return [{"apiVersion": PEERING_API_VERSION, "kind": "ClusterKopfPeering",
                 "metadata": {"name": name, "labels": dict(LABELS)}}]  # fmt: skip
    found: list[dict[str, Any]] = []
    for pattern in namespaces:
        for namespace in (part.strip() for part in pattern.split(",")):
            if not _NAMESPACE.match(namespace):
                continue
            obj = {
                "apiVersion": PEERING_API_VERSION,
                "kind": "KopfPeering",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
            }
            if obj not in found:
                found.append(obj)
    return found


def ensure_peering(
    writer: ChildWriter,
    name: str,
    *,
    clusterwide: bool,
    namespaces: Iterable[str],
    logger: logging.Logger | logging.LoggerAdapter[Any],
    wait_s: float = WAIT_FOR_INSTALLER_S,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Create the peering objects that are missing. One that cannot be created (no peering
    definitions, no permission) is waited for up to ``wait_s`` (its installer may be about to
    create it), then logged: the operator then waits until someone creates it."""
    for obj in peering_objects(name, clusterwide=clusterwide, namespaces=namespaces):
        where = obj["metadata"].get("namespace") or "the cluster"
        what = f"{obj['kind']} {name} in {where}"
        try:
            if writer.create_missing(obj):
                logger.info(f"created the peering object {what}")
        except KubeError as exc:
            if _appears(writer, obj, wait_s, sleep):
                logger.info(f"the peering object {what} exists (created by its installer)")
                continue
            logger.warning(
                f"cannot create the peering object {what} (apply crds/kopf/peering.yaml and "
                f"allow the operator to create it): {exc}; not reconciling until it exists"
            )


def _appears(
    writer: ChildWriter, obj: dict[str, Any], wait_s: float, sleep: Callable[[float], None]
) -> bool:
    """Whether ``obj`` exists within ``wait_s`` (looked for every second)."""
    metadata = obj["metadata"]
    for _ in range(max(1, int(wait_s))):
        try:
            if writer.get(
                obj["apiVersion"], obj["kind"], metadata.get("namespace") or "", metadata["name"]
            ):
                return True
        except KubeError:
            pass  # no definitions yet, no permission: as absent
        sleep(1.0)
    return False
