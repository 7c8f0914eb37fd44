"""TLS of the gRPC port: the broker's own certificate files (``--tls-cert-file``,
``--tls-key-file``, ``--tls-ca-file``), read again when they change — a renewed cert-manager
Secret reaches new connections, open ones keep theirs (grpc asks for the configuration at
each handshake; the files are looked at at most once a second).

gRPC cannot tell TLS from plaintext on one port as the remoting port does, so with TLS on
(``permissive`` or ``enforcing``) the gRPC port speaks TLS only. ``--tls-client-auth
required`` makes clients present a certificate chaining to the CA file; ``optional`` lets them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import grpc

from reconsume.wire.tls import ClientAuth, TlsServerConfig

log = logging.getLogger(__name__)

CHECK_S = 1.0


def _read(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def _read_file(path: str) -> bytes:
    return Path(path).read_bytes()


class CertificateFiles:
    """The server certificate configuration, built again when the files change."""

    def __init__(self, config: TlsServerConfig) -> None:
        self._config = config
        self._stamp = self._files_stamp()
        self._checked = time.monotonic()
        self.initial = self._configuration()

    def _files_stamp(self) -> tuple[tuple[int, int] | None, ...]:
        stamps: list[tuple[int, int] | None] = []
        for path in (self._config.cert_file, self._config.key_file, self._config.ca_file):
            try:
                status = os.stat(path) if path else None
            except OSError:
                status = None
            stamps.append(None if status is None else (status.st_mtime_ns, status.st_size))
        return tuple(stamps)

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        config = self._config
        if config.key_file is None or config.cert_file is None:  # problem() refuses it
            raise ValueError("TLS needs a certificate and a key file")
        return grpc.ssl_server_certificate_configuration(
            [(_read_file(config.key_file), _read_file(config.cert_file))],
            root_certificates=_read(config.ca_file),
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """A new configuration when the files changed (None: keep the current one)."""
        now = time.monotonic()
        if now - self._checked < CHECK_S:
            return None
        self._checked = now
        stamp = self._files_stamp()
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        try:
            configuration = self._configuration()
        except OSError as exc:
            log.warning("gRPC TLS files changed but do not read, keeping the previous: %s", exc)
            return None
        log.info("gRPC TLS certificate %s read again", self._config.cert_file)
        return configuration


def server_credentials(config: TlsServerConfig) -> grpc.ServerCredentials:
    files = CertificateFiles(config)
    # grpc takes None from the fetcher as "no change" (its stubs say otherwise).
    fetch = cast(Callable[[], grpc.ServerCertificateConfiguration], files.fetch)
    return grpc.dynamic_ssl_server_credentials(
        files.initial,
        fetch,
        require_client_authentication=config.client_auth is ClientAuth.REQUIRED,
    )
