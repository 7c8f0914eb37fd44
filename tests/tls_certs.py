"""A throwaway certificate authority for TLS tests: a CA, a server certificate for
127.0.0.1/localhost, a client certificate, and a client certificate of another CA, as PEM files
(keys in PKCS#8, which Java's Netty reads), made by the control plane's own
:class:`tests.k8s.certs.Authority`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.k8s.certs import Authority


@dataclass(frozen=True)
class KeyPair:
    cert_file: Path
    key_file: Path


@dataclass(frozen=True)
class CertAuthority:
    ca_file: Path
    server: KeyPair
    client: KeyPair
    """A client certificate signed by the CA."""
    stranger: KeyPair
    """A client certificate signed by another, unknown CA."""


def make_ca(root: Path) -> CertAuthority:
    """A CA under ``root`` with a server, a client and a stranger's client certificate."""
    authority = Authority(root, "reconsume test CA")
    other = Authority(root / "other", "another CA")
    server = authority.server("server", "reconsume-server", ["127.0.0.1"], ["localhost"])
    return CertAuthority(
        ca_file=authority.cert_path,
        server=KeyPair(*server),
        client=KeyPair(*authority.client("client", "reconsume-client")),
        stranger=KeyPair(*other.client("stranger", "stranger")),
    )
