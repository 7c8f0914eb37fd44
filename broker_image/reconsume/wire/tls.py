"""TLS on the remoting port, as Apache RocketMQ has it (``tls.server.mode``).

A server runs in one of three modes: ``disabled`` (plaintext only), ``permissive`` (one port
takes both, told apart by the connection's first byte, as RocketMQ's ``TlsModeHandler`` does:
a TLS handshake record starts with 0x16, a remoting frame with the high byte of its length,
which is 0 for any frame a server accepts) and ``enforcing`` (a plaintext connection is
closed). Client certificates are checked against a CA file when asked for (``optional``:
verified when one is sent; ``required``: a client without one is refused).

Clients (:class:`~reconsume.wire.endpoints.RemotingClient`) take an :class:`ssl.SSLContext`,
or build one from the environment: ``RECONSUME_TLS=true``, with ``RECONSUME_TLS_CA_FILE``
(the CA that signed the servers' certificates; else the system's trust store) and
``RECONSUME_TLS_CERT_FILE``/``RECONSUME_TLS_KEY_FILE`` (a client certificate). Server
addresses are IP addresses the name server hands out, so a client verifies the chain, not the
host name, as RocketMQ's clients do.

The server side, which sniffs and hands each connection over, is
:mod:`reconsume.wire.tls_server`.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from reconsume.errors import InvalidArgumentError
from reconsume.flags import Flag, flag


class TlsMode(StrEnum):
    """What a server's remoting port accepts (RocketMQ's ``tls.server.mode``)."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(StrEnum):
    """Whether a server asks TLS clients for a certificate (RocketMQ's
    ``tls.server.need.client.auth``)."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRED = "required"


TLS_HANDSHAKE = 0x16
"""The content type of a TLS handshake record: the first byte a TLS client sends."""

Route = Literal["tls", "plaintext", "refuse"]


def route_of(first: bytes, mode: TlsMode) -> Route:
    """Where a connection whose first bytes are ``first`` (at least one) goes under ``mode``:
    TLS when it opens with a handshake record, else plaintext when ``permissive`` allows it,
    else it is refused. Under ``disabled`` nothing is sniffed: everything is plaintext."""
    if mode is TlsMode.DISABLED:
        return "plaintext"
    if first[0] == TLS_HANDSHAKE:
        return "tls"
    return "plaintext" if mode is TlsMode.PERMISSIVE else "refuse"


# ---------------------------------------------------------------------- server settings
@dataclass(frozen=True, slots=True)
class TlsFlags:
    """The flags of a server's TLS settings, the same on the broker and the name server (the
    ``metadata`` of its ``tls_*`` fields)."""

    mode: Mapping[str, Flag] = field(
        default_factory=lambda: flag(
            "--tls-mode",
            "TLS on the remoting port: disabled, permissive (TLS and plaintext on one port, told "
            "apart by the first byte) or enforcing (plaintext connections are closed)",
        )
    )
    cert_file: Mapping[str, Flag] = field(
        default_factory=lambda: flag(
            "--tls-cert-file", "the server's certificate chain, PEM (tls.crt)"
        )
    )
    key_file: Mapping[str, Flag] = field(
        default_factory=lambda: flag("--tls-key-file", "the server's private key, PEM (tls.key)")
    )
    ca_file: Mapping[str, Flag] = field(
        default_factory=lambda: flag(
            "--tls-ca-file", "CA certificates to verify client certificates with, PEM (ca.crt)"
        )
    )
    client_auth: Mapping[str, Flag] = field(
        default_factory=lambda: flag(
            "--tls-client-auth",
            "client certificates, verified against --tls-ca-file: none, optional (verified "
            "when sent) or required (a client without one is refused)",
        )
    )


TLS_FLAGS = TlsFlags()


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    """A server's TLS settings, as its settings dataclass has them."""

    mode: TlsMode = TlsMode.DISABLED
    cert_file: str | None = None
    """The server's certificate chain, PEM (cert-manager's ``tls.crt``)."""
    key_file: str | None = field(default=None, repr=False)
    """Its private key, PEM, unencrypted (``tls.key``)."""
    ca_file: str | None = None
    """CA certificates client certificates must chain to, PEM (``ca.crt``)."""
    client_auth: ClientAuth = ClientAuth.NONE

    @property
    def enabled(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    def problem(self) -> tuple[str, str] | None:
        """``(setting, what is wrong)`` when the combination cannot work, else None."""
        if self.enabled and not self.cert_file:
            return "tls_cert_file", f"required with TLS mode {self.mode.value}"
        if self.enabled and not self.key_file:
            return "tls_key_file", f"required with TLS mode {self.mode.value}"
        if self.client_auth is not ClientAuth.NONE:
            if not self.enabled:
                return "tls_client_auth", "needs a TLS mode other than disabled"
            if not self.ca_file:
                return "tls_ca_file", f"required with client auth {self.client_auth.value}"
        return None


_VERIFY_MODES = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


def server_context(config: TlsServerConfig) -> ssl.SSLContext:
    """The server's context: its certificate and key, TLS 1.2 or later, and the CA to verify
    client certificates with when it asks for them. Unreadable or mismatched files raise
    InvalidArgumentError naming them.

    No TLS 1.3 session tickets: a server sends them after the handshake, and a client that
    writes its requests and closes without reading (oneway frames, a script) then closes a
    socket holding unread data, which Linux turns into a reset that drops what the client had
    not yet sent: measured, up to 7 of 8 frames written right after the handshake never
    reached the server, against none without tickets. Tickets only let a client resume a
    session on its next connection, which the long-lived connections of messaging clients
    seldom need."""
    if config.cert_file is None or config.key_file is None:
        raise InvalidArgumentError("TLS needs a certificate file and a key file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.cert_file, config.key_file)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            f"TLS certificate {config.cert_file} with key {config.key_file}: {_reason(exc)}"
        ) from exc
    context.verify_mode = _VERIFY_MODES[config.client_auth]
    if config.client_auth is not ClientAuth.NONE and config.ca_file:
        try:
            context.load_verify_locations(cafile=config.ca_file)
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"TLS CA file {config.ca_file}: {_reason(exc)}") from exc
    context.num_tickets = 0
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


# ---------------------------------------------------------------------- clients
TLS_ENV = "RECONSUME_TLS"
TLS_CA_FILE_ENV = "RECONSUME_TLS_CA_FILE"
TLS_CERT_FILE_ENV = "RECONSUME_TLS_CERT_FILE"
TLS_KEY_FILE_ENV = "RECONSUME_TLS_KEY_FILE"
"""The environment a process's clients take TLS from when given no context (a pod: its
``env`` and a mounted Secret)."""

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"", "false", "0", "no", "off"})


def client_context(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext:
    """A client's context: servers' certificates must chain to ``ca_file`` (else to the
    system's trust store), host names are not checked (servers are reached at the IP
    addresses routes name); ``cert_file`` and ``key_file``, both or neither, are this
    client's certificate."""
    if (cert_file is None) != (key_file is None):
        raise InvalidArgumentError("a client certificate needs both its certificate and key file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    try:
        if ca_file is not None:
            context.load_verify_locations(cafile=ca_file)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if cert_file is not None:
            context.load_cert_chain(cert_file, key_file)
    except (OSError, ValueError) as exc:
        files = ", ".join(f for f in (ca_file, cert_file, key_file) if f is not None)
        raise InvalidArgumentError(f"TLS client files ({files}): {_reason(exc)}") from exc
    return context


def _env_file(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def context_of_environment_files(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """:func:`client_context` with the files the environment names (any may be unset)."""
    env = os.environ if environ is None else environ
    return client_context(
        _env_file(env, TLS_CA_FILE_ENV),
        _env_file(env, TLS_CERT_FILE_ENV),
        _env_file(env, TLS_KEY_FILE_ENV),
    )


def tls_from_environment(environ: Mapping[str, str] | None = None) -> ssl.SSLContext | None:
    """The context :data:`TLS_ENV` asks for, or None (plaintext) when it is unset or false."""
    env = os.environ if environ is None else environ
    wanted = env.get(TLS_ENV, "").strip().lower()
    if wanted in _FALSE:
        return None
    if wanted not in _TRUE:
        raise InvalidArgumentError(f"{TLS_ENV} must be true or false, not {env[TLS_ENV]!r}")
    return context_of_environment_files(env)


ClientTls = ssl.SSLContext | Literal["environment"] | None
"""A :class:`~reconsume.wire.endpoints.RemotingClient`'s ``tls``: a context, None for
plaintext, or ``"environment"`` for :func:`tls_from_environment`."""


def tls_or_environment(tls: bool | ssl.SSLContext | None) -> ClientTls:
    """A client's ``tls`` argument as the transport takes it: a context as given; True: TLS
    with the environment's files (:func:`context_of_environment_files`); False: plaintext
    whatever the environment says; None: as the environment says."""
    if tls is None:
        return "environment"
    if isinstance(tls, ssl.SSLContext):
        return tls
    return context_of_environment_files() if tls else None
