"""Throwaway credentials for the test control plane: a CA, the API server's serving certificate
(127.0.0.1 and localhost), a client certificate in group ``system:masters`` and a
service-account signing key, all ECDSA P-256 (quick to generate), written as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)
"""Longer than any test session; the certificates are made anew for each."""

CLIENT_USER = "reconsume-test"
CLIENT_GROUP = "system:masters"
"""RBAC's superuser group: the client may do anything, as envtest's admin user may."""


@dataclass(frozen=True)
class Credentials:
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    client_cert: Path
    client_key: Path
    service_account_key: Path
    """The service-account token signing key (private)."""
    service_account_public_key: Path
    """Its public half, which verifies the tokens."""


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    names: list[x509.GeneralName],
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        _builder(subject, ca.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_credentials(directory: Path) -> Credentials:
    """Generate every key and certificate into ``directory`` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = _name("reconsume-test-ca")
    ca = (
        _builder(ca_subject, ca_subject, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .sign(ca_key, hashes.SHA256())
    )
    serving, serving_key = _leaf(
        ca,
        ca_key,
        _name("kube-apiserver"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        [
            x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
            x509.DNSName("localhost"),
        ],
    )
    client, client_key = _leaf(
        ca, ca_key, _name(CLIENT_USER, CLIENT_GROUP), ExtendedKeyUsageOID.CLIENT_AUTH, []
    )
    pem = serialization.Encoding.PEM
    service_account_key = ec.generate_private_key(ec.SECP256R1())
    service_account_public_key = service_account_key.public_key().public_bytes(
        pem, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Credentials(
        ca_cert=_write(directory / "ca.crt", ca.public_bytes(pem)),
        serving_cert=_write(directory / "apiserver.crt", serving.public_bytes(pem)),
        serving_key=_write(directory / "apiserver.key", _key_pem(serving_key)),
        client_cert=_write(directory / "client.crt", client.public_bytes(pem)),
        client_key=_write(directory / "client.key", _key_pem(client_key)),
        service_account_key=_write(
            directory / "service-account.key", _key_pem(service_account_key)
        ),
        service_account_public_key=_write(
            directory / "service-account.pub", service_account_public_key
        ),
    )
