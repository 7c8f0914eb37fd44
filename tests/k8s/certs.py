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
    authority: Authority
    """The CA, for more certificates (a node's components each have their own)."""


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


class Authority:
    """A CA that signs serving and client certificates into ``directory``."""

    def __init__(self, directory: Path, common_name: str = "reconsume-test-ca") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(common_name)
        self.certificate = (
            _builder(subject, subject, self.key)
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
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = _write(
            directory / "ca.crt", self.certificate.public_bytes(serialization.Encoding.PEM)
        )
        self.key_path = _write(directory / "ca.key", _key_pem(self.key))

    def _issue(
        self,
        stem: str,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        names: list[x509.GeneralName],
    ) -> tuple[Path, Path]:
        certificate, key = _leaf(self.certificate, self.key, subject, usage, names)
        pem = serialization.Encoding.PEM
        return (
            _write(self.directory / f"{stem}.crt", certificate.public_bytes(pem)),
            _write(self.directory / f"{stem}.key", _key_pem(key)),
        )

    def server(
        self, stem: str, common_name: str, ips: list[str], dns_names: list[str]
    ) -> tuple[Path, Path]:
        """A serving certificate for those addresses and names: its certificate and key."""
        names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        names += [x509.DNSName(name) for name in dns_names]
        return self._issue(stem, _name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, names)

    def client(self, stem: str, user: str, group: str | None = None) -> tuple[Path, Path]:
        """A client certificate of ``user`` (in ``group``): its certificate and key."""
        return self._issue(stem, _name(user, group), ExtendedKeyUsageOID.CLIENT_AUTH, [])


def make_credentials(
    directory: Path, serving_ips: tuple[str, ...] = (), serving_names: tuple[str, ...] = ()
) -> Credentials:
    """Generate every key and certificate into ``directory`` (created if needed). The serving
    certificate is for 127.0.0.1 and localhost, and ``serving_ips`` and ``serving_names``."""
    authority = Authority(directory)
    serving_cert, serving_key = authority.server(
        "apiserver",
        "kube-apiserver",
        ["127.0.0.1", *serving_ips],
        ["localhost", *serving_names],
    )
    client_cert, client_key = authority.client("client", CLIENT_USER, CLIENT_GROUP)
    pem = serialization.Encoding.PEM
    service_account_key = ec.generate_private_key(ec.SECP256R1())
    service_account_public_key = service_account_key.public_key().public_bytes(
        pem, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Credentials(
        ca_cert=authority.cert_path,
        serving_cert=serving_cert,
        serving_key=serving_key,
        client_cert=client_cert,
        client_key=client_key,
        service_account_key=_write(
            directory / "service-account.key", _key_pem(service_account_key)
        ),
        service_account_public_key=_write(
            directory / "service-account.pub", service_account_public_key
        ),
        authority=authority,
    )
