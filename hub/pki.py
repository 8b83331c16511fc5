"""The hub's own certificate authority for the agent channel.

On start, ``ensure_pki(home, hosts)`` loads or creates ``<home>/pki/ca.{crt,key}`` (EC P-256,
ten years) and a serving certificate for the agent port signed by it, with every name and
address agents may dial as SANs. The serving certificate is re-issued when those names
change or it is within 30 days of expiry. A join hands the CA certificate to the operator
(``JoinResponse.ca_cert``) and the agent verifies the hub against it (``--ca-cert``), so the
channel is encrypted and the hub authenticated from the first byte. The same CA signs the
agents' client certificates (``hub.agentpki``), which the agent port requires. Keys are
written 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVER_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class HubPKI:
    """PEM bytes the gRPC server and joins need."""

    ca_cert: bytes
    server_cert: bytes
    server_key: bytes
    ca_key: bytes = b""      # signs agent client certificates (``hub.agentpki``)


def default_hosts(host: str, advertise: str | None) -> list[str]:
    """Names and addresses agents may dial: loopback, this machine, --host, --advertise."""
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname()]
    if host not in ("", "0.0.0.0", "::"):
        hosts.append(host)
    if advertise:
        hosts.append(advertise.rsplit(":", 1)[0].strip("[]"))
    return sorted(set(hosts))


def ensure_pki(home: Path, hosts: Iterable[str]) -> HubPKI:
    """Load or create the CA and a current serving certificate for ``hosts``."""
    pki = home / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = load_or_create_ca(pki)
    wanted = sorted(set(hosts))
    server_key_path, server_crt_path, names_path = (pki / "agent-server.key",
                                                    pki / "agent-server.crt",
                                                    pki / "agent-server.names.json")
    if not _server_current(server_crt_path, names_path, wanted):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _sign(ca_key, ca_cert, key.public_key(), "fuyao-hub agent channel", wanted,
                     SERVER_DAYS, is_ca=False)
        _write_key(server_key_path, key)
        server_crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        names_path.write_text(json.dumps(wanted))
    return HubPKI(
        ca_cert=ca_cert.public_bytes(serialization.Encoding.PEM),
        server_cert=server_crt_path.read_bytes(),
        server_key=server_key_path.read_bytes(),
        ca_key=(pki / "ca.key").read_bytes(),
    )


def load_or_create_ca(pki: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The CA in directory ``pki`` (``ca.key``, ``ca.crt``), created if absent."""
    key_path, crt_path = pki / "ca.key", pki / "ca.crt"
    if key_path.exists() and crt_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key, x509.load_pem_x509_certificate(crt_path.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuyao-hub CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def _sign(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate,
          public_key: ec.EllipticCurvePublicKey, common_name: str, hosts: list[str],
          days: int, *, is_ca: bool) -> x509.Certificate:
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject).public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _server_current(crt: Path, names: Path, wanted: list[str]) -> bool:
    if not (crt.exists() and names.exists()):
        return False
    try:
        if json.loads(names.read_text()) != wanted:
            return False
        cert = x509.load_pem_x509_certificate(crt.read_bytes())
    except (ValueError, OSError):
        return False
    return cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > RENEW_BEFORE


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    write_private(path, data)


def write_private(path: Path, data: bytes) -> None:
    """Write a private key file readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
