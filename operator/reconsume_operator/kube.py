"""Writing child objects to the API server: server-side apply through the ``kubernetes``
package's dynamic client (blocking, so run in a thread), with the operator's field manager."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import kubernetes.client
import kubernetes.config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

FIELD_MANAGER = "reconsume-operator"


class KubeError(Exception):
    """The API server refused or did not answer a write of a child object."""


def load_configuration() -> kubernetes.client.Configuration:
    """In a pod: its service account; elsewhere: ``$KUBECONFIG`` or ``~/.kube/config`` (the
    same credentials Kopf logs in with)."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except ConfigException:
        kubernetes.config.load_kube_config(client_configuration=configuration)
    return configuration


class ChildWriter:
    """Applies objects; one API client and one discovery per operator process."""

    def __init__(self, configuration: kubernetes.client.Configuration | None = None) -> None:
        self._configuration = configuration
        self._lock = threading.Lock()
        self._api: kubernetes.client.ApiClient | None = None
        self._dynamic: DynamicClient | None = None

    def _client(self) -> DynamicClient:
        with self._lock:
            if self._dynamic is None:
                configuration = self._configuration or load_configuration()
                self._api = kubernetes.client.ApiClient(configuration)
                self._dynamic = DynamicClient(self._api)
            return self._dynamic

    def apply(self, obj: Mapping[str, Any]) -> None:
        """Create or update ``obj`` (server-side apply, taking over conflicting fields)."""
        try:
            client = self._client()
            resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            client.server_side_apply(
                resource,
                body=dict(obj),
                namespace=obj["metadata"].get("namespace"),
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
        except ApiException as exc:
            what = f"{obj['kind']} {obj['metadata']['name']}"
            raise KubeError(f"{what}: {exc.status} {exc.reason}: {exc.body!r}") from exc
        except (OSError, ConfigException) as exc:
            raise KubeError(f"{obj['kind']} {obj['metadata']['name']}: {exc}") from exc

    def create_missing(self, obj: Mapping[str, Any]) -> bool:
        """Create ``obj`` unless an object of its kind and name exists; whether it was created.

        Looks first, so that an installer that created the object (the Helm chart creates the
        peering objects) need not grant ``create`` as well."""
        metadata = obj["metadata"]
        if self.get(
            obj["apiVersion"], obj["kind"], metadata.get("namespace") or "", metadata["name"]
        ):
            return False
        try:
            client = self._client()
            resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            client.create(resource, body=dict(obj), namespace=obj["metadata"].get("namespace"))
        except ApiException as exc:
            if exc.status == 409:  # AlreadyExists
                return False
            what = f"{obj['kind']} {obj['metadata']['name']}"
            raise KubeError(f"{what}: {exc.status} {exc.reason}: {exc.body!r}") from exc
        except (OSError, ConfigException, ResourceNotFoundError) as exc:
            raise KubeError(f"{obj['kind']} {obj['metadata']['name']}: {exc}") from exc
        return True

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            client = self._client()
            resource = client.resources.get(api_version=api_version, kind=kind)
            found = client.get(resource, name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError(f"{kind} {name}: {exc.status} {exc.reason}: {exc.body!r}") from exc
        except (OSError, ConfigException, ResourceNotFoundError) as exc:
            raise KubeError(f"{kind} {name}: {exc}") from exc
        document: dict[str, Any] = found.to_dict()
        return document

    def close(self) -> None:
        with self._lock:
            if self._api is not None:
                self._api.close()
                self._api.rest_client.pool_manager.clear()
            self._api = None
            self._dynamic = None
