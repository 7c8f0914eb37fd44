"""The k8s tier's control plane itself: kube-apiserver is ready and serves our client as an
administrator, stores objects in etcd, and serves a custom resource once its definition is
established."""

from __future__ import annotations

import json
import uuid
from typing import Any

import kubernetes.client
import pytest

from ..polling import eventually
from .control_plane import ControlPlane, kube_version

GROUP = "smoke.reconsume.test"
CRD_NAME = f"widgets.{GROUP}"


def test_api_server_is_ready_and_trusts_our_client(
    control_plane: ControlPlane, api: kubernetes.client.ApiClient
) -> None:
    status, body = control_plane.get("/readyz?verbose")
    assert status == 200, body.decode(errors="replace")
    assert b"[+]etcd ok" in body, body.decode(errors="replace")
    status, body = control_plane.get("/version")
    assert status == 200
    assert json.loads(body)["gitVersion"] == kube_version()

    review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
        kubernetes.client.V1SelfSubjectReview()
    )
    user = review.status.user_info
    assert user.username == "reconsume-test"
    assert "system:masters" in user.groups


def test_namespace_is_created_and_read_back(api: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api)
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    created = core.create_namespace(
        kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name, labels={"tier": "k8s"})
        )
    )
    assert created.metadata.uid

    read = core.read_namespace(name)
    assert read.metadata.uid == created.metadata.uid
    assert read.metadata.labels["tier"] == "k8s"
    assert read.status.phase == "Active"
    assert name in {item.metadata.name for item in core.list_namespace().items}


def widget_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def test_custom_resource_definition_becomes_established_and_serves(
    api: kubernetes.client.ApiClient,
) -> None:
    extensions = kubernetes.client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(widget_crd())

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(CRD_NAME)
        conditions = (crd.status and crd.status.conditions) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    eventually(established, what=f"{CRD_NAME} Established")

    custom = kubernetes.client.CustomObjectsApi(api)
    widget = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "first"},
        "spec": {"size": 3},
    }
    # The definition is established; its REST endpoint may take a moment longer to serve.
    eventually(lambda: _create_if_served(custom, widget), what=f"{CRD_NAME} served for create")
    read = custom.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "first")
    assert read["spec"] == {"size": 3}

    invalid = {**widget, "metadata": {"name": "second"}, "spec": {"size": 0}}
    with pytest.raises(kubernetes.client.ApiException) as refused:  # the schema applies
        custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", invalid)
    assert refused.value.status == 422, refused.value


def _create_if_served(custom: kubernetes.client.CustomObjectsApi, body: dict[str, Any]) -> bool:
    try:
        custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", body)
    except kubernetes.client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True
