"""What a refusal of the API server becomes in a condition: ``<Kind> <name>: <status> <reason>:
<the Status object's message>``, never a Python repr of the response body."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from reconsume_operator.job_kube import JobKube
from reconsume_operator.kube import BODY_TEXT_LIMIT, ChildWriter, KubeError, status_message

STS_MESSAGE = (
    'StatefulSet.apps "orders-broker" is invalid: spec: Forbidden: updates to statefulset spec '
    "for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
    "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
)
STATUS = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": STS_MESSAGE,
    "reason": "Invalid",
    "details": {"name": "orders-broker", "group": "apps", "kind": "StatefulSet"},
    "code": 422,
}


def refusal(body: object, status: int = 422, reason: str = "Unprocessable Entity") -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = body
    return exc


class Refusing:
    """The dynamic client's part the writers use, refusing every request with ``exc``."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.resources = SimpleNamespace(get=lambda **_: SimpleNamespace(status="status"))

    def refuse(self, *_: Any, **__: Any) -> Any:
        raise self.exc

    get = server_side_apply = create = delete = patch = refuse


def refusing_writer(cls: type[ChildWriter], exc: Exception) -> Any:
    writer = cls()
    writer._client = lambda: Refusing(exc)  # type: ignore[method-assign]
    return writer


STATEFULSET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "orders-broker", "namespace": "shop"},
}


@pytest.mark.parametrize("encode", [lambda t: t.encode(), lambda t: t], ids=["bytes", "str"])
def test_a_status_body_gives_its_message(encode: Any) -> None:
    assert status_message(encode(json.dumps(STATUS))) == STS_MESSAGE


def test_an_apply_refusal_names_kind_name_status_reason_and_the_message() -> None:
    writer = refusing_writer(ChildWriter, refusal(json.dumps(STATUS).encode()))
    with pytest.raises(KubeError) as raised:
        writer.apply(STATEFULSET)
    text = str(raised.value)
    assert text == f"StatefulSet orders-broker: 422 Unprocessable Entity: {STS_MESSAGE}"
    assert "b'" not in text
    assert '"kind"' not in text


def test_get_and_create_refusals_read_the_message_too() -> None:
    forbidden = {**STATUS, "code": 403, "message": 'statefulsets.apps "x" is forbidden: no'}
    writer = refusing_writer(ChildWriter, refusal(json.dumps(forbidden).encode(), 403, "Forbidden"))
    with pytest.raises(KubeError, match=r'^StatefulSet x: 403 Forbidden: statefulsets.apps "x"'):
        writer.get("apps/v1", "StatefulSet", "shop", "x")
    with pytest.raises(KubeError, match=r"^StatefulSet orders-broker: 403 Forbidden: stateful"):
        writer.create_missing(STATEFULSET)


def test_a_body_that_is_no_status_is_cut_text_not_a_bytes_repr() -> None:
    html = ("<html><body>" + "bad gateway " * 200 + "</body></html>").encode()
    message = status_message(html)
    assert message.startswith("<html><body>bad gateway")
    assert len(message) == BODY_TEXT_LIMIT
    assert message.endswith("…")
    assert "b'" not in message
    assert status_message(b'{"kind": "Status", "message": ""}') == (
        '{"kind": "Status", "message": ""}'
    )
    assert status_message(b"\xff\xfeoops\n  twice") == "\ufffd\ufffdoops twice"


def test_no_body_leaves_status_and_reason() -> None:
    writer = refusing_writer(ChildWriter, refusal(None, 0, "Connection refused"))
    with pytest.raises(KubeError) as raised:
        writer.apply(STATEFULSET)
    assert str(raised.value) == "StatefulSet orders-broker: 0 Connection refused"
    assert status_message(None) == status_message(b"") == ""


def test_the_job_api_formats_its_refusals_alike() -> None:
    conflict = {**STATUS, "code": 409, "message": 'Operation cannot be fulfilled: "drain-1"'}
    kube = refusing_writer(JobKube, refusal(json.dumps(conflict), 409, "Conflict"))
    with pytest.raises(KubeError) as raised:
        kube.patch_status("reconsume.io/v1alpha1", "DeadLetterJob", "shop", "drain", {})
    assert str(raised.value) == (
        'DeadLetterJob drain status: 409 Conflict: Operation cannot be fulfilled: "drain-1"'
    )
    with pytest.raises(KubeError, match=r"^Job drain-1: 409 Conflict: Operation cannot"):
        kube.delete("batch/v1", "Job", "shop", "drain-1")
