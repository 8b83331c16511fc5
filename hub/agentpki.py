"""Agent client certificates: issue them, tell a stream's cluster from one, revoke them.

Called by ``hub.registration`` (``Enroll`` on the registration listener), by
``hub.agent_service`` (``Renew``, and every ``Connect`` on the mutual-TLS agent port) and by
``Hub.remove_cluster`` (revoke). A certificate carries the public key of the agent's CSR (its
private key never leaves the agent), the cluster name as subject CN and as the URI SAN
``fuyao://cluster/<name>``, and clientAuth only; it is signed by the hub's CA. The hub
accepts it for ``agent_cert_lifetime`` (its ``expires_at``, stored with the serial); its
X.509 notAfter is ``agent_cert_grace`` later, so a late agent still completes the TLS
handshake and is refused by the hub with a reason and an audit record, instead of silently
by the TLS layer. Identity checks on every connect and renewal: a certificate the hub issued
(serial known), for that cluster, not revoked, not expired, cluster not removed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fuyao.errors import InvalidInput, Unauthenticated
from hub.pki import HubPKI
from hub.writer import StoreWriter

MAX_CSR_BYTES = 16 * 1024
URI_PREFIX = "fuyao://cluster/"


@dataclass(frozen=True)
class Issued:
    """A certificate just issued."""

    cluster: str
    serial: str
    pem: bytes
    issued_at: dt.datetime
    expires_at: dt.datetime       # the hub refuses it after this
    revoked: int = 0              # older certificates of the cluster revoked by this issue


@dataclass(frozen=True)
class Peer:
    """Who is calling on the mutual-TLS port: the cluster and serial of its certificate."""

    cluster: str
    serial: str


def _public_key(csr_pem: bytes) -> ec.EllipticCurvePublicKey | rsa.RSAPublicKey:
    """The CSR's public key, after checking the CSR is well formed and self-signed."""
    if not csr_pem or len(csr_pem) > MAX_CSR_BYTES:
        raise InvalidInput(f"a CSR (PEM, at most {MAX_CSR_BYTES} bytes) is required")
    try:
        csr = x509.load_pem_x509_csr(csr_pem)
        if not csr.is_signature_valid:
            raise InvalidInput("the CSR's signature does not match its key")
        key = csr.public_key()
    except (ValueError, InvalidSignature) as exc:
        raise InvalidInput(f"not a PEM certificate signing request: {exc}") from exc
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.key_size >= 256:
        return key
    if isinstance(key, rsa.RSAPublicKey) and key.key_size >= 2048:
        return key
    raise InvalidInput("the CSR's key must be EC (P-256 or larger) or RSA (2048 bits or more)")


def serial_hex(cert: x509.Certificate) -> str:
    """How the store keys a certificate: its serial number in lower-case hex."""
    return format(cert.serial_number, "x")


def cluster_of(cert: x509.Certificate) -> str:
    """The cluster a hub-issued certificate names (URI SAN, else the subject CN)."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for uri in sans.get_values_for_type(x509.UniformResourceIdentifier):
            if uri.startswith(URI_PREFIX):
                return uri[len(URI_PREFIX):]
    except x509.ExtensionNotFound:
        pass
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


class AgentCertificates:
    """Issues, checks and revokes the agents' client certificates."""

    def __init__(self, pki: HubPKI, writer: StoreWriter, lifetime: float, grace: float) -> None:
        self.pki = pki
        self.writer = writer
        self.lifetime = dt.timedelta(seconds=lifetime)
        self.grace = dt.timedelta(seconds=grace)
        key = serialization.load_pem_private_key(pki.ca_key, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        self._ca_key = key
        self._ca_cert = x509.load_pem_x509_certificate(pki.ca_cert)

    def sign(self, cluster: str, csr_pem: bytes) -> Issued:
        """A certificate for ``cluster`` with the CSR's key (not yet stored)."""
        public_key = _public_key(csr_pem)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        expires = now + self.lifetime
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cluster)]))
            .issuer_name(self._ca_cert.subject).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(expires + self.grace)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(URI_PREFIX + cluster)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(self._ca_key, hashes.SHA256())
        )
        return Issued(cluster, serial_hex(cert), cert.public_bytes(serialization.Encoding.PEM),
                      now, expires)

    async def record(self, issued: Issued, *, replace: bool) -> Issued:
        """Store the serial; ``replace`` (a new registration): revoke the cluster's older
        certificates and drop its bearer credential in the same transaction."""
        store = self.writer.store
        if replace:
            revoked = await self.writer.call(store.replace_agent_certificates, issued.cluster,
                                             issued.serial, issued.issued_at, issued.expires_at)
            return Issued(issued.cluster, issued.serial, issued.pem, issued.issued_at,
                          issued.expires_at, revoked)
        await self.writer.call(store.add_agent_certificate, issued.serial, issued.cluster,
                               issued.issued_at, issued.expires_at)
        return issued

    async def identify(self, auth_context: Mapping[str, Iterable[bytes]],
                       clusters: Container[str]) -> Peer:
        """The caller's cluster from its TLS client certificate, or Unauthenticated with the
        reason (the TLS layer already checked it chains to the hub's CA)."""
        pems = list(auth_context.get("x509_pem_cert") or ())
        if not pems:
            raise Unauthenticated("no client certificate")
        cert = x509.load_pem_x509_certificate(pems[0])
        cluster, serial = cluster_of(cert), serial_hex(cert)
        rec = await self.writer.read(self.writer.store.agent_certificate, serial)
        if rec is None or rec.cluster != cluster:
            raise Unauthenticated(f"certificate {serial} for cluster {cluster!r} was not "
                                  "issued by this hub")
        if rec.revoked_at is not None:
            raise Unauthenticated(f"certificate {serial} of cluster {cluster} was revoked at "
                                  f"{rec.revoked_at.isoformat()}")
        if rec.expires_at <= dt.datetime.now(dt.UTC):
            raise Unauthenticated(
                f"certificate {serial} of cluster {cluster} expired at "
                f"{rec.expires_at.isoformat()}: register the agent again with a new join "
                f"token (fuyaoctl cluster token create {cluster})")
        if cluster not in clusters:
            raise Unauthenticated(f"cluster {cluster} was removed")
        return Peer(cluster, serial)

    async def revoke(self, cluster: str) -> int:
        """Revoke every unexpired certificate of ``cluster``; returns how many."""
        return await self.writer.call(self.writer.store.revoke_agent_certificates, cluster,
                                      dt.datetime.now(dt.UTC))

    def response_fields(self, issued: Issued) -> dict[str, Any]:
        """The ``CertificateResponse`` fields for ``issued``."""
        return {"cluster": issued.cluster, "certificate": issued.pem,
                "ca_cert": self.pki.ca_cert,
                "issued_unix_ms": int(issued.issued_at.timestamp() * 1000),
                "expires_unix_ms": int(issued.expires_at.timestamp() * 1000)}
