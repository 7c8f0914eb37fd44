"""What the DeadLetterJob handlers need of the API server beyond applying and getting objects:
listing by label, deleting, writing a custom resource's status, and whether a CRD is served.
One :class:`JobKube` is the operator's :class:`~reconsume_operator.kube.ChildWriter` (one API
client per process). Blocking, like the writer: call it in a thread."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from reconsume_operator.kube import MERGE_PATCH, ChildWriter, KubeError, api_error


class JobKube(ChildWriter):
    def _fail(self, what: str, exc: Exception) -> KubeError:
        if isinstance(exc, ApiException):
            return api_error(what, exc)
        return KubeError(f"{what}: {exc}")

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        """Merge ``status`` into the object's status (None removes a field)."""
        try:
            client = self._client()
            resource = client.resources.get(api_version=api_version, kind=kind)
            client.patch(
                resource.status,
                body={"status": status},
                name=name,
                namespace=namespace,
                content_type=MERGE_PATCH,
            )
        except (ApiException, OSError, ConfigException, ResourceNotFoundError) as exc:
            raise self._fail(f"{kind} {name} status", exc) from exc

    def serves(self, crd: str, version: str) -> bool:
        """Whether the CustomResourceDefinition ``crd`` exists and serves ``version``."""
        found = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd)
        if found is None:
            return False
        versions = (found.get("spec") or {}).get("versions") or ()
        return any(v.get("name") == version and v.get("served") for v in versions)
