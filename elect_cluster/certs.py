"""Certificates for tests and quick starts: one CA and a certificate per member (`elect certs make`).

A member's identity is the name in its certificate: the subject's common name and a DNS subject alternative name,
both the member id, so raft:// can check that a peer's certificate names the member the peer claims to be
(and a client dialling member `b` can check it reached `b`). Servers that are dialled by host (etcd, ZooKeeper,
Kafka) also get `localhost` and 127.0.0.1 in their certificate. Keys are EC P-256 (fast to make and to
handshake); certificates last `days`. Production deployments bring their own PKI; this is for tests and demos.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    """Where one certificate and its key were written (PEM)."""

    name: str
    cert: Path
    key: Path

    def public_key_pem(self) -> bytes:
        """The public half of the key, PEM (kube-apiserver verifies service-account tokens with it)."""
        key = serialization.load_pem_private_key(self.key.read_bytes(), password=None)
        return key.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class Authority:
    """A CA on disk: its certificate (what peers trust) and key (to issue more)."""

    cert: Path
    key: Path

    def issue(self, name: str, out: Path, *, hosts: Iterable[str] = (), days: int = 365,
              common_name: bool = True) -> Issued:
        """A certificate for `name` (common name and DNS name), also valid for `hosts` (DNS names or IPs), usable
        as a server's and as a client's (mutual TLS), signed by this CA, written to OUT/NAME.crt and .key.

        `common_name=False`: the name only in the DNS name and the subject's organization, for a client of etcd's
        JSON gateway, which refuses a client certificate with a common name while authentication is on (the common
        name would name an etcd user the gateway cannot pass on; etcd's fix of CVE-2018-16886)."""
        ca_key = serialization.load_pem_private_key(self.key.read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(self.cert.read_bytes())
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        key = ec.generate_private_key(ec.SECP256R1())
        alt: list[x509.GeneralName] = [x509.DNSName(name)]
        for host in hosts:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alt.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME if common_name
                                                            else NameOID.ORGANIZATION_NAME, name)]))
                .issuer_name(ca_cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        return _write(out, name, cert, key)


def make_authority(out: Path, name: str = "elect-ca", days: int = 3650) -> Authority:
    """A new self-signed CA, written to OUT/ca.crt and OUT/ca.key."""
    out.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    issued = _write(out, "ca", cert, key)
    return Authority(issued.cert, issued.key)


def make_certs(out: Path, members: Sequence[str], *, hosts: Iterable[str] = (),
               common_name: bool = True) -> tuple[Authority, list[Issued]]:
    """A CA and one certificate per member in `out` (what `elect certs make` writes)."""
    ca = make_authority(out)
    extra = list(hosts)
    return ca, [ca.issue(m, out, hosts=extra, common_name=common_name) for m in members]


def _write(out: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    out.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out / f"{name}.crt", out / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Issued(name, cert_path, key_path)
