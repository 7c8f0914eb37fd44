"""TLS settings without a network: which way a connection goes by its first byte, which
setting combinations are refused, the server's and the clients' contexts from their files,
and what a client takes from the environment."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from reconsume.errors import InvalidArgumentError
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.frame import MAX_FRAME_BYTES, encode_frame
from reconsume.wire.tls import (
    TLS_CA_FILE_ENV,
    TLS_CERT_FILE_ENV,
    TLS_ENV,
    TLS_HANDSHAKE,
    TLS_KEY_FILE_ENV,
    ClientAuth,
    TlsMode,
    TlsServerConfig,
    client_context,
    route_of,
    server_context,
    tls_from_environment,
    tls_or_environment,
)
from tests.tls_certs import CertAuthority, make_ca

CLIENT_HELLO_START = bytes([TLS_HANDSHAKE, 0x03, 0x01, 0x02, 0x00])


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (TLS_ENV, TLS_CA_FILE_ENV, TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# ---------------------------------------------------------------------- the first byte
@pytest.mark.parametrize(
    ("first", "mode", "route"),
    [
        (CLIENT_HELLO_START, TlsMode.PERMISSIVE, "tls"),
        (CLIENT_HELLO_START, TlsMode.ENFORCING, "tls"),
        (b"\x00\x00\x00\x1c", TlsMode.PERMISSIVE, "plaintext"),
        (b"\x00\x00\x00\x1c", TlsMode.ENFORCING, "refuse"),
        (b"GET / HTTP/1.1", TlsMode.PERMISSIVE, "plaintext"),
        (b"GET / HTTP/1.1", TlsMode.ENFORCING, "refuse"),
        (b"\x15", TlsMode.ENFORCING, "refuse"),  # a TLS alert is no handshake
        (CLIENT_HELLO_START, TlsMode.DISABLED, "plaintext"),
    ],
)
def test_a_connection_goes_by_its_first_byte(first: bytes, mode: TlsMode, route: str) -> None:
    assert route_of(first, mode) == route


def test_no_accepted_plaintext_frame_starts_like_a_handshake() -> None:
    # A frame opens with its length, big-endian: its first byte is 0 below 16 MiB, and a
    # frame long enough to open with 0x16 would be refused anyway.
    assert MAX_FRAME_BYTES < TLS_HANDSHAKE << 24
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v"}, b"x" * 70_000)
    assert encode_frame(request)[0] == 0
    assert route_of(encode_frame(request), TlsMode.PERMISSIVE) == "plaintext"


# ---------------------------------------------------------------------- server settings
@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (TlsServerConfig(), None),
        (TlsServerConfig(TlsMode.DISABLED, "c.pem"), None),
        (TlsServerConfig(TlsMode.ENFORCING, "c.pem", "k.pem"), None),
        (
            TlsServerConfig(TlsMode.PERMISSIVE, key_file="k.pem"),
            ("tls_cert_file", "required with TLS mode permissive"),
        ),
        (
            TlsServerConfig(TlsMode.ENFORCING, "c.pem"),
            ("tls_key_file", "required with TLS mode enforcing"),
        ),
        (
            TlsServerConfig(client_auth=ClientAuth.OPTIONAL, ca_file="ca.pem"),
            ("tls_client_auth", "needs a TLS mode other than disabled"),
        ),
        (
            TlsServerConfig(TlsMode.ENFORCING, "c.pem", "k.pem", client_auth=ClientAuth.REQUIRED),
            ("tls_ca_file", "required with client auth required"),
        ),
    ],
)
def test_setting_combinations_that_cannot_work_are_named(
    config: TlsServerConfig, problem: tuple[str, str] | None
) -> None:
    assert config.problem() == problem


@pytest.mark.parametrize(
    ("auth", "verify"),
    [
        (ClientAuth.NONE, ssl.CERT_NONE),
        (ClientAuth.OPTIONAL, ssl.CERT_OPTIONAL),
        (ClientAuth.REQUIRED, ssl.CERT_REQUIRED),
    ],
)
def test_the_server_context_asks_for_client_certificates_as_told(
    ca: CertAuthority, auth: ClientAuth, verify: ssl.VerifyMode
) -> None:
    config = TlsServerConfig(
        TlsMode.ENFORCING,
        str(ca.server.cert_file),
        str(ca.server.key_file),
        str(ca.ca_file),
        auth,
    )
    context = server_context(config)
    assert context.verify_mode == verify
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    # Only the given CA vouches for clients, not the system's store.
    expected = 1 if auth is not ClientAuth.NONE else 0
    assert len(context.get_ca_certs()) == expected


def test_a_key_that_does_not_match_the_certificate_is_refused_naming_the_files(
    ca: CertAuthority,
) -> None:
    config = TlsServerConfig(TlsMode.ENFORCING, str(ca.server.cert_file), str(ca.client.key_file))
    with pytest.raises(InvalidArgumentError) as refused:
        server_context(config)
    assert str(ca.server.cert_file) in str(refused.value)
    assert str(ca.client.key_file) in str(refused.value)


def test_a_missing_certificate_file_is_refused(tmp_path: Path) -> None:
    config = TlsServerConfig(TlsMode.ENFORCING, str(tmp_path / "no.crt"), str(tmp_path / "no.key"))
    with pytest.raises(InvalidArgumentError, match="No such file"):
        server_context(config)


# ---------------------------------------------------------------------- clients
def test_a_client_context_trusts_the_ca_given_and_checks_no_host_name(ca: CertAuthority) -> None:
    context = client_context(str(ca.ca_file))
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert not context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "reconsume test CA"),),)
    ]


def test_a_client_certificate_needs_both_files(ca: CertAuthority) -> None:
    with pytest.raises(InvalidArgumentError, match="both"):
        client_context(str(ca.ca_file), cert_file=str(ca.client.cert_file))
    context = client_context(str(ca.ca_file), str(ca.client.cert_file), str(ca.client.key_file))
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_without_the_environment_a_client_is_plaintext(clean_env: pytest.MonkeyPatch) -> None:
    assert tls_from_environment() is None
    clean_env.setenv(TLS_ENV, "false")
    clean_env.setenv(TLS_CA_FILE_ENV, "/nowhere/ca.crt")  # not read: TLS is off
    assert tls_from_environment() is None
    assert RemotingClient().tls is None


def test_the_environment_turns_tls_on_with_its_files(
    clean_env: pytest.MonkeyPatch, ca: CertAuthority
) -> None:
    clean_env.setenv(TLS_ENV, "TRUE")
    clean_env.setenv(TLS_CA_FILE_ENV, str(ca.ca_file))
    clean_env.setenv(TLS_CERT_FILE_ENV, str(ca.client.cert_file))
    clean_env.setenv(TLS_KEY_FILE_ENV, str(ca.client.key_file))
    context = tls_from_environment()
    assert context is not None
    assert len(context.get_ca_certs()) == 1
    client = RemotingClient()
    assert client.tls is not None
    assert RemotingClient(tls=None).tls is None


@pytest.mark.parametrize("value", ["maybe", "enabled"])
def test_a_garbled_switch_is_refused(clean_env: pytest.MonkeyPatch, value: str) -> None:
    clean_env.setenv(TLS_ENV, value)
    with pytest.raises(InvalidArgumentError, match=f"{TLS_ENV} must be true or false"):
        tls_from_environment()


def test_a_missing_ca_file_is_refused_naming_it(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(TLS_ENV, "true")
    clean_env.setenv(TLS_CA_FILE_ENV, "/nowhere/ca.crt")
    with pytest.raises(InvalidArgumentError, match=re.escape("/nowhere/ca.crt")):
        tls_from_environment()


def test_a_clients_tls_argument(clean_env: pytest.MonkeyPatch, ca: CertAuthority) -> None:
    clean_env.setenv(TLS_ENV, "true")
    clean_env.setenv(TLS_CA_FILE_ENV, str(ca.ca_file))
    assert tls_or_environment(None) == "environment"
    assert tls_or_environment(False) is None  # plaintext, whatever the environment says
    given = client_context()
    assert tls_or_environment(given) is given
    made = tls_or_environment(True)
    assert isinstance(made, ssl.SSLContext)
    assert len(made.get_ca_certs()) == 1
