"""The operator's TLS context for a cluster, from the cluster's TLS Secret.

``ssl`` loads certificates and keys from files only: they are written to a directory only the
operator's user can read, one per Secret content, and removed once loaded."""

from __future__ import annotations

import base64
import binascii
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconsume.errors import InvalidArgumentError
from reconsume.wire.tls import client_context
from reconsume_operator.credentials import CredentialsProblem


def _file(data: Mapping[str, Any], key: str, name: str) -> bytes:
    value = data.get(key)
    try:
        content = base64.b64decode(str(value), validate=True) if value else b""
    except binascii.Error:
        content = b""
    if not content:
        raise CredentialsProblem(f"Secret {name} must hold {key} (PEM)")
    return content


def tls_context(secret: Mapping[str, Any], with_certificate: bool) -> ssl.SSLContext:
    """A client context trusting the Secret's ``ca.crt``; with ``with_certificate``, presenting
    its ``tls.crt`` and ``tls.key``."""
    name = str((secret.get("metadata") or {}).get("name"))
    data = secret.get("data") or {}
    keys = ["ca.crt", *(["tls.crt", "tls.key"] if with_certificate else [])]
    contents = {key: _file(data, key, name) for key in keys}
    with tempfile.TemporaryDirectory(prefix="reconsume-tls-") as directory:
        paths = {}
        for key, content in contents.items():
            path = Path(directory) / key
            path.touch(mode=0o600)
            path.write_bytes(content)
            paths[key] = str(path)
        try:
            return client_context(paths["ca.crt"], paths.get("tls.crt"), paths.get("tls.key"))
        except InvalidArgumentError as exc:
            raise CredentialsProblem(f"Secret {name}: not a usable certificate: {exc}") from exc
