"""What access control and TLS add to broker and name-server pods: the ACL Secret and the TLS
Secret mounted read-only, the flags that read them, and for brokers the admin account they
sign their own requests with (registrations, replication)."""

from __future__ import annotations

from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume.wire.credential_files import CREDENTIALS_DIR_ENV
from reconsume_operator.acl_render import ACL_FILE, acl_secret_name
from reconsume_operator.naming import ACL_DIR, CREDENTIALS_DIR, TLS_DIR

_TLS_MODES = {"Permissive": "permissive", "Enforcing": "enforcing"}
_CLIENT_AUTH = {"None": "none", "Optional": "optional", "Required": "required"}


def security_args(spec: ClusterSpec) -> list[str]:
    """The server flags of ``spec.accessControl`` and ``spec.tls``."""
    args: list[str] = []
    if spec.access_control:
        args += ["--acl-file", f"{ACL_DIR}/{ACL_FILE}"]
    if spec.tls_secret is not None:
        args += [
            "--tls-mode",
            _TLS_MODES[spec.tls_mode],
            "--tls-cert-file",
            f"{TLS_DIR}/tls.crt",
            "--tls-key-file",
            f"{TLS_DIR}/tls.key",
            "--tls-ca-file",
            f"{TLS_DIR}/ca.crt",
            "--tls-client-auth",
            _CLIENT_AUTH[spec.tls_client_auth],
        ]
    return args


def security_env(spec: ClusterSpec, broker: bool) -> list[dict[str, Any]]:
    """A broker signs with the admin account and, with TLS, connects to its name servers and
    its master with TLS, trusting the cluster's CA."""
    env: list[dict[str, Any]] = []
    if broker and spec.access_control:
        env.append({"name": CREDENTIALS_DIR_ENV, "value": CREDENTIALS_DIR})
    if broker and spec.tls_secret is not None:
        env += [
            {"name": "RECONSUME_TLS", "value": "true"},
            {"name": "RECONSUME_TLS_CA_FILE", "value": f"{TLS_DIR}/ca.crt"},
        ]
        if spec.tls_client_auth != "None":  # its own certificate, where servers ask for one
            env += [
                {"name": "RECONSUME_TLS_CERT_FILE", "value": f"{TLS_DIR}/tls.crt"},
                {"name": "RECONSUME_TLS_KEY_FILE", "value": f"{TLS_DIR}/tls.key"},
            ]
    return env


def security_mounts(spec: ClusterSpec, broker: bool) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = []
    if spec.access_control:
        mounts.append({"name": "acl", "mountPath": ACL_DIR, "readOnly": True})
        if broker:
            mounts.append({"name": "credentials", "mountPath": CREDENTIALS_DIR, "readOnly": True})
    if spec.tls_secret is not None:
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    return mounts


def security_volumes(spec: ClusterSpec, broker: bool) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = []
    if spec.access_control:
        volumes.append({"name": "acl", "secret": {"secretName": acl_secret_name(spec.name)}})
        if broker and spec.admin_secret_name is not None:
            volumes.append(
                {"name": "credentials", "secret": {"secretName": spec.admin_secret_name}}
            )
    if spec.tls_secret is not None:
        volumes.append({"name": "tls", "secret": {"secretName": spec.tls_secret}})
    return volumes
