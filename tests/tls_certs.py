"""A throwaway certificate authority for TLS tests: a self-signed CA, a server certificate for
127.0.0.1/localhost and client certificates, written as PEM files the way cert-manager's
Secrets hold them (``ca.crt``, ``tls.crt``, ``tls.key``; keys in PKCS#8, which Java's Netty
reads)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


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


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    directory: Path,
    common_name: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    server: bool,
) -> KeyPair:
    ca_cert, ca_key = issuer
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    directory.mkdir(parents=True, exist_ok=True)
    pair = KeyPair(directory / "tls.crt", directory / "tls.key")
    pair.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pair.key_file)
    return pair


def make_ca(root: Path) -> CertAuthority:
    """A CA under ``root`` with a server, a client and a stranger's client certificate."""
    root.mkdir(parents=True, exist_ok=True)
    ca = _ca("reconsume test CA")
    ca_file = root / "ca.crt"
    ca_file.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    return CertAuthority(
        ca_file=ca_file,
        server=_leaf(root / "server", "reconsume-server", ca, server=True),
        client=_leaf(root / "client", "reconsume-client", ca, server=False),
        stranger=_leaf(root / "stranger", "stranger", _ca("another CA"), server=False),
    )
