"""A minimal client of the Kubernetes API server, for the broker's Lease
(:mod:`reconsume.broker.kube_lease`): JSON over HTTPS with a bearer token, standard library
only, blocking (callers run it in a worker thread).

Credentials are a pod's by default: the API server at ``KUBERNETES_SERVICE_HOST`` /
``KUBERNETES_SERVICE_PORT``, the ServiceAccount token and CA certificate under
:data:`SERVICE_ACCOUNT_DIR`. Each one can be given instead (a broker run outside a pod). The
token file is read again for every request: bound ServiceAccount tokens are rotated by the
kubelet (hourly, by default) and an old one stops being accepted.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconsume.errors import ReconsumeError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where Kubernetes mounts a pod's ServiceAccount token, CA certificate and namespace."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class KubeApiError(ReconsumeError):
    """A request to the API server failed: no answer in time, no connection, or an error
    status. ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class KubeAccessError(KubeApiError):
    """The API server refused the credentials (401) or the request (403)."""


def dns_label_problem(text: str) -> str | None:
    """Why ``text`` is not a DNS-1123 label (a namespace), or None when it is one."""
    if len(text) > 63 or not _DNS_LABEL.fullmatch(text):
        return f"{text!r} is not a DNS label (at most 63 lowercase letters, digits and '-')"
    return None


def dns_subdomain_problem(text: str) -> str | None:
    """Why ``text`` is not a DNS-1123 subdomain (most object names), or None."""
    if len(text) > 253 or not all(_DNS_LABEL.fullmatch(part) for part in text.split(".")):
        return (
            f"{text!r} is not a DNS subdomain "
            "(at most 253 lowercase letters, digits, '-' and '.', starting and ending alphanumeric)"
        )
    return None


@dataclass(frozen=True, slots=True)
class KubeCredentials:
    """Where the API server is and how to authenticate to it."""

    host: str
    port: int
    token_file: Path
    ca_file: Path | None
    """None: the system's trusted certificates."""

    @classmethod
    def resolve(
        cls, api: str | None = None, token_file: str | None = None, ca_file: str | None = None
    ) -> KubeCredentials:
        """The given ``api`` (``https://host:port``), token and CA files, each else the pod's.
        Raises KubeApiError when no API server is given and none is in the environment."""
        if api is None:
            host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
            port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise KubeApiError(
                    "KUBERNETES_SERVICE_HOST is not set (not in a pod): give the API server "
                    "(--kube-api https://HOST:PORT) and its credentials"
                )
            api = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        parsed = parse_api_url(api)
        default_ca = SERVICE_ACCOUNT_DIR / "ca.crt"
        return cls(
            host=parsed[0],
            port=parsed[1],
            token_file=Path(token_file) if token_file else SERVICE_ACCOUNT_DIR / "token",
            ca_file=Path(ca_file) if ca_file else (default_ca if default_ca.is_file() else None),
        )


def parse_api_url(url: str) -> tuple[str, int]:
    """``(host, port)`` of ``https://host[:port]``; ValueError naming what is wrong."""
    parsed = urllib.parse.urlsplit(url)
    try:
        port = parsed.port or 443
    except ValueError:
        raise ValueError(f"{url!r} has an invalid port") from None
    if parsed.scheme != "https" or not parsed.hostname or parsed.path.strip("/"):
        raise ValueError(f"{url!r} is not https://HOST[:PORT]")
    return parsed.hostname, port


class KubeApi:
    """JSON requests to one API server; each on a connection of its own, each bounded by
    ``timeout_s`` (connecting, and every read)."""

    def __init__(self, credentials: KubeCredentials, timeout_s: float) -> None:
        self.credentials = credentials
        self.timeout_s = timeout_s
        self._ssl: ssl.SSLContext | None = None

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """The status and the JSON document answered; an error status is returned, not
        raised. Raises KubeApiError when no answer comes (timeout, connection, TLS) or the
        token cannot be read."""
        credentials = self.credentials
        headers = {
            "Accept": "application/json",
            "Authorization": f"Bearer {self._token()}",
            "User-Agent": "reconsume-broker",
        }
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        where = f"{method} https://{credentials.host}:{credentials.port}{path}"
        connection = http.client.HTTPSConnection(
            credentials.host, credentials.port, timeout=self.timeout_s, context=self._context()
        )
        try:
            connection.request(method, path, payload, headers)
            response = connection.getresponse()
            status, raw = response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise KubeApiError(f"{where}: no answer: {exc or type(exc).__name__}") from exc
        finally:
            connection.close()
        try:
            document = json.loads(raw) if raw else {}
        except ValueError:
            document = {"message": raw[:200].decode(errors="replace")}
        if not isinstance(document, dict):
            raise KubeApiError(f"{where}: answered {status} with a non-object", status)
        return status, document

    def _token(self) -> str:
        path = self.credentials.token_file
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise KubeAccessError(f"cannot read the API token {path}: {exc.strerror}") from exc
        if not token:
            raise KubeAccessError(f"the API token file {path} is empty")
        return token

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            ca_file = self.credentials.ca_file
            try:
                self._ssl = ssl.create_default_context(
                    cafile=None if ca_file is None else str(ca_file)
                )
            except (OSError, ssl.SSLError) as exc:
                raise KubeApiError(f"cannot load the API server's CA {ca_file}: {exc}") from exc
        return self._ssl


def status_error(what: str, status: int, document: dict[str, Any]) -> KubeApiError:
    """The error of an error status, with the API server's own message (a ``Status``)."""
    message = document.get("message") or document.get("reason") or "no message"
    if status in (401, 403):
        return KubeAccessError(f"{what}: refused ({status}): {message}", status)
    return KubeApiError(f"{what}: failed ({status}): {message}", status)
