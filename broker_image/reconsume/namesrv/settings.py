"""Settings of the name server.

A field with a ``flag`` in its metadata is also a flag of ``reconsume namesrv``
(:mod:`reconsume.flags`), whose help shows the default given here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconsume.errors import InvalidArgumentError
from reconsume.flags import flag
from reconsume.wire.listen import listen_flag
from reconsume.wire.tls import TLS_FLAGS, ClientAuth, TlsMode, TlsServerConfig


@dataclass(frozen=True, slots=True)
class NamesrvSettings:
    listen_host: str = field(
        default="127.0.0.1",
        metadata=listen_flag(),
    )
    """Address to listen on."""
    listen_port: int = 9876
    """TCP port (0 picks a free one)."""
    broker_expiry_s: float = field(
        default=120.0,
        metadata=flag("--broker-expiry-s", "drop a broker not heard from for this many seconds"),
    )
    """A broker not heard from for this many seconds is dropped from routes."""
    scan_interval_s: float = field(
        default=10.0, metadata=flag("--scan-interval-s", "seconds between expiry scans")
    )
    """Seconds between scans for expired brokers."""
    acl_file: str | None = field(
        default=None,
        metadata=flag(
            "--acl-file",
            "ACL file (TOML): registrations and other changes need an admin account",
            empty="none: no access control",
        ),
    )
    """Access control (:mod:`reconsume.namesrv.access`): the brokers' ACL file format, read
    again when it changes."""
    tls_mode: TlsMode = field(default=TlsMode.DISABLED, metadata=TLS_FLAGS.mode)
    tls_cert_file: str | None = field(default=None, metadata=TLS_FLAGS.cert_file)
    tls_key_file: str | None = field(default=None, metadata=TLS_FLAGS.key_file)
    tls_ca_file: str | None = field(default=None, metadata=TLS_FLAGS.ca_file)
    tls_client_auth: ClientAuth = field(default=ClientAuth.NONE, metadata=TLS_FLAGS.client_auth)
    """TLS on the port (:mod:`reconsume.wire.tls`)."""

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise InvalidArgumentError(f"listen port {self.listen_port} is not 0-65535")
        if self.broker_expiry_s <= 0:
            raise InvalidArgumentError("broker expiry must be positive seconds")
        if self.scan_interval_s <= 0:
            raise InvalidArgumentError("scan interval must be positive seconds")
        if (tls_problem := self.tls().problem()) is not None:
            setting, problem = tls_problem
            raise InvalidArgumentError(f"setting {setting}: {problem}")

    def tls(self) -> TlsServerConfig:
        return TlsServerConfig(
            self.tls_mode, self.tls_cert_file, self.tls_key_file, self.tls_ca_file,
            self.tls_client_auth,
        )  # fmt: skip
