"""The agent's own key and client certificate, kept in its state directory.

Called by ``member_agent.connection``: before the first stream the agent makes an EC P-256
key here (it never leaves this machine: the hub only sees a CSR), enrolls with the CSR and
its join token on the hub's registration listener, and saves what it got; it renews at 2/3
of the certificate's life with a fresh key. Everything lives in one file,
``<state-dir>/identity.json`` (written atomically, mode 0600): the key and certificate
(PEM), the hub CA, when the hub stops accepting the certificate, and the SHA-256 of the join
token it enrolled with, so that a new token written to the token file (credential rotation:
``fuyaoctl cluster token create``) is noticed and used to enroll again.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fuyao.errors import InvalidInput
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.state import write_private_json

IDENTITY_FILE = "identity.json"
RENEW_AT = 2 / 3        # of the certificate's life, counted from its issue


def new_key() -> tuple[bytes, bytes]:
    """A new private key (PEM) and a CSR for it (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuyao-agent")]))
           .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, csr.public_bytes(serialization.Encoding.PEM)


def token_digest(token: str) -> str:
    """How the state remembers which join token it enrolled with."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class AgentIdentity:
    """A key and the certificate the hub issued for it."""

    cluster: str
    key: str                 # PEM
    certificate: str         # PEM
    ca_cert: str             # PEM
    issued_unix_ms: int
    expires_unix_ms: int     # the hub refuses the certificate after this
    token_sha256: str = ""   # the join token it enrolled with ("" for a traded credential)

    @property
    def renew_at(self) -> float:
        """Unix time at which to renew (2/3 of the life)."""
        life = self.expires_unix_ms - self.issued_unix_ms
        return (self.issued_unix_ms + RENEW_AT * life) / 1000

    def expired(self, now: float | None = None) -> bool:
        """True once the hub no longer accepts the certificate."""
        return (time.time() if now is None else now) * 1000 >= self.expires_unix_ms


class IdentityStore:
    """The saved identity of one cluster in one state directory."""

    def __init__(self, directory: Path, cluster: str) -> None:
        self.directory = directory
        self.cluster = cluster
        self.path = directory / IDENTITY_FILE

    def load(self) -> AgentIdentity | None:
        """The saved identity, or None if this agent never enrolled."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            identity = AgentIdentity(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            raise InvalidInput(f"{self.path}: unreadable identity file: {exc}") from exc
        if identity.cluster != self.cluster:
            raise InvalidInput(f"{self.path}: holds the identity of cluster "
                               f"{identity.cluster!r}, not {self.cluster!r}; use another "
                               "--state-dir")
        return identity

    def save(self, key_pem: bytes, answer: pb.CertificateResponse,
             token_sha256: str) -> AgentIdentity:
        """Write the key and the hub's answer atomically, readable by the owner only."""
        identity = AgentIdentity(
            cluster=self.cluster, key=key_pem.decode(), certificate=answer.certificate.decode(),
            ca_cert=answer.ca_cert.decode(), issued_unix_ms=answer.issued_unix_ms,
            expires_unix_ms=answer.expires_unix_ms, token_sha256=token_sha256)
        write_private_json(self.path, asdict(identity))
        return identity
