"""Writing child objects to the API server: server-side apply through the ``kubernetes``
package's dynamic client (blocking, so run in a thread), with the operator's field manager.

A refusal becomes a :class:`KubeError` whose text is what a condition shows:
``<Kind> <name>: <status> <reason>: <the API server's message>`` (see :func:`api_error`)."""

from __future__ import annotations

import json
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
MERGE_PATCH = "application/merge-patch+json"


BODY_TEXT_LIMIT = 512
"""Characters kept of a response body that is not a Status object."""


class KubeError(Exception):
    """The API server refused or did not answer a write of a child object."""


def status_message(body: object) -> str:
    """The ``message`` of the Status object in ``body`` (bytes or text, as ``ApiException``
    holds it); else the body's text on one line, cut to :data:`BODY_TEXT_LIMIT` characters;
    "" when there is none."""
    if isinstance(body, bytes | bytearray):
        text = bytes(body).decode("utf-8", errors="replace")
    else:
        text = "" if body is None else str(body)
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        message = document.get("message")
        if isinstance(message, str) and message.strip():
            return message.strip()
    flat = " ".join(text.split())
    return flat if len(flat) <= BODY_TEXT_LIMIT else flat[: BODY_TEXT_LIMIT - 1] + "…"


def api_error(what: str, exc: ApiException) -> KubeError:
    """``exc`` as ``<what>: <status> <reason>: <message>`` (``what`` is ``<Kind> <name>``)."""
    head = f"{what}: {exc.status} {exc.reason}"
    message = status_message(exc.body)
    return KubeError(f"{head}: {message}" if message else head)


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

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or update ``obj`` (server-side apply, taking over conflicting fields); the
        object as the API server has it then."""
        try:
            client = self._client()
            resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            applied = client.server_side_apply(
                resource,
                body=dict(obj),
                namespace=obj["metadata"].get("namespace"),
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
        except ApiException as exc:
            raise api_error(f"{obj['kind']} {obj['metadata']['name']}", exc) from exc
        except (OSError, ConfigException) as exc:
            raise KubeError(f"{obj['kind']} {obj['metadata']['name']}: {exc}") from exc
        document: dict[str, Any] = applied.to_dict()
        return document

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
            raise api_error(f"{obj['kind']} {obj['metadata']['name']}", exc) from exc
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
            raise api_error(f"{kind} {name}", exc) from exc
        except (OSError, ConfigException, ResourceNotFoundError) as exc:
            raise KubeError(f"{kind} {name}: {exc}") from exc
        document: dict[str, Any] = found.to_dict()
        return document

    def list(
        self, api_version: str, kind: str, namespace: str, label_selector: str
    ) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` whose labels match ``label_selector``."""
        try:
            client = self._client()
            resource = client.resources.get(api_version=api_version, kind=kind)
            found = client.get(resource, namespace=namespace, label_selector=label_selector)
        except ApiException as exc:
            raise api_error(f"{kind} list", exc) from exc
        except (OSError, ConfigException, ResourceNotFoundError) as exc:
            raise KubeError(f"{kind} list: {exc}") from exc
        items: list[dict[str, Any]] = found.to_dict().get("items") or []
        return items

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, uid: str | None = None
    ) -> bool:
        """Delete the object, its dependents in the background (only if its uid is still
        ``uid``, when given); whether it was there to delete."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        try:
            client = self._client()
            resource = client.resources.get(api_version=api_version, kind=kind)
            client.delete(resource, name=name, namespace=namespace, body=body)
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and uid is not None):
                return False  # gone, or replaced by a new object of that name
            raise api_error(f"{kind} {name}", exc) from exc
        except (OSError, ConfigException, ResourceNotFoundError) as exc:
            raise KubeError(f"{kind} {name}: {exc}") from exc
        return True

    def merge_patch(
        self, api_version: str, kind: str, namespace: str, name: str, body: dict[str, Any]
    ) -> None:
        """A JSON merge patch of the object (``None`` values remove fields)."""
        self._send_merge_patch(api_version, kind, namespace, name, body)

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        """Merge ``status`` into the object's status (None removes a field)."""
        self._send_merge_patch(
            api_version, kind, namespace, name, {"status": status}, of_status=True
        )

    def _send_merge_patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        *,
        of_status: bool = False,
    ) -> None:
        """Send ``body`` as a JSON merge patch of the object, or with ``of_status`` of its status
        subresource (a refusal then names ``<Kind> <name> status``)."""
        what = f"{kind} {name} status" if of_status else f"{kind} {name}"
        try:
            client = self._client()
            resource = client.resources.get(api_version=api_version, kind=kind)
            client.patch(
                resource.status if of_status else resource,
                body=body,
                name=name,
                namespace=namespace,
                content_type=MERGE_PATCH,
            )
        except ApiException as exc:
            raise api_error(what, exc) from exc
        except (OSError, ConfigException, ResourceNotFoundError) as exc:
            raise KubeError(f"{what}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._api is not None:
                self._api.close()
                self._api.rest_client.pool_manager.clear()
            self._api = None
            self._dynamic = None
