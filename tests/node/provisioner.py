"""A dynamic provisioner for the node's default StorageClass: each claim gets a directory on
the node, served as a ``local`` PersistentVolume pinned to the node, and the directory is
removed when the claim is (reclaim policy Delete). The same contract as the external
provisioners of real clusters (the PV controller annotates a claim of the class with the
provisioner's name and the scheduler with the node it chose; the provisioner creates a PV
bound to the claim; a Released PV of its own is its to delete).

``local`` volumes, not ``hostPath``: the kubelet applies a pod's ``fsGroup`` to a local volume
as it does to a cloud disk, so a non-root pod finds its new volume writable only if its
security context asks for it, as on a real cluster. The directory is made root-owned with mode
0755, as a fresh file system's root is."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import kubernetes.client
from kubernetes.client.rest import ApiException

from .configs import PROVISIONER, STORAGE_CLASS
from .host import NODE_NAME

PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PATH_ANNOTATION = "reconsume.io/test-local-dir"
INTERVAL_S = 0.2


class LocalProvisioner:
    """Runs in a thread until :meth:`stop`; ``errors`` holds what it could not do."""

    def __init__(self, configuration: kubernetes.client.Configuration, directory: Path) -> None:
        self._client = kubernetes.client.ApiClient(configuration)
        self._core = kubernetes.client.CoreV1Api(self._client)
        self._directory = directory
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-provisioner", daemon=True)
        self.errors: list[str] = []
        self.provisioned = 0
        self.deleted = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                self._pass()
            except ApiException as error:
                if error.status not in {409, 404}:  # raced another writer: next pass
                    self.errors.append(f"{error.status} {error.reason}: {error.body}")
            except Exception as error:  # the thread must not die silently
                self.errors.append(repr(error))

    def _pass(self) -> None:
        volumes = self._core.list_persistent_volume().items
        claimed = {
            volume.spec.claim_ref.uid
            for volume in volumes
            if volume.spec.claim_ref is not None and volume.spec.claim_ref.uid
        }
        for claim in self._core.list_persistent_volume_claim_for_all_namespaces().items:
            annotations = claim.metadata.annotations or {}
            if (
                claim.spec.storage_class_name == STORAGE_CLASS
                and claim.status.phase == "Pending"
                and annotations.get(SELECTED_NODE) == NODE_NAME
                and claim.metadata.uid not in claimed
                and claim.metadata.deletion_timestamp is None
            ):
                self._provision(claim)
        for volume in volumes:
            annotations = volume.metadata.annotations or {}
            if (
                annotations.get(PROVISIONED_BY) == PROVISIONER
                and volume.status.phase in {"Released", "Failed"}
                and volume.spec.persistent_volume_reclaim_policy == "Delete"
            ):
                self._delete(volume)

    def _provision(self, claim: Any) -> None:
        name = f"pvc-{claim.metadata.uid}"
        path = self._directory / name
        path.mkdir(mode=0o755, exist_ok=True)
        path.chmod(0o755)
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {PROVISIONED_BY: PROVISIONER, PATH_ANNOTATION: str(path)},
            },
            "spec": {
                "capacity": {"storage": claim.spec.resources.requests["storage"]},
                "accessModes": claim.spec.access_modes,
                "volumeMode": claim.spec.volume_mode or "Filesystem",
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": STORAGE_CLASS,
                "local": {"path": str(path)},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": claim.metadata.namespace,
                    "name": claim.metadata.name,
                    "uid": claim.metadata.uid,
                },
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [NODE_NAME],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
        self._core.create_persistent_volume(body)
        self.provisioned += 1

    def _delete(self, volume: Any) -> None:
        path = Path((volume.metadata.annotations or {})[PATH_ANNOTATION])
        if path.parent == self._directory:
            shutil.rmtree(path, ignore_errors=True)
        try:
            self._core.delete_persistent_volume(volume.metadata.name)
        except ApiException as error:
            if error.status != 404:
                raise
        self.deleted += 1
