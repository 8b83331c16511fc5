"""Push credentials encrypted at rest: AES-256-GCM under a key file outside the database.

Called by ``hub.push.supervisor``. The key file (``--secrets-key-file``, e.g. a Kubernetes
Secret mounted read-only; at least 32 bytes, e.g. ``openssl rand -base64 32``) is never in
the store or the home directory's backups; the AES key is SHA-256 of its bytes. Each
cluster's kubeconfig is one file ``<home>/push/<name>.kubeconfig.enc`` (0600): a random
96-bit nonce, then the ciphertext, authenticated with the cluster name, so a file copied to
another name does not open. No API ever returns the plaintext.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fuyao.errors import FuyaoError, InvalidInput

MIN_KEY_BYTES = 32
SUFFIX = ".kubeconfig.enc"


def load_key(path: Path) -> bytes:
    """The AES key from a key file; refused when the file is short or unreadable."""
    try:
        raw = path.read_bytes().strip()
    except OSError as exc:
        raise InvalidInput(f"--secrets-key-file {path}: {exc.strerror}") from exc
    if len(raw) < MIN_KEY_BYTES:
        raise InvalidInput(f"--secrets-key-file {path} holds {len(raw)} bytes; use at least "
                           f"{MIN_KEY_BYTES} random ones (openssl rand -base64 32)")
    return hashlib.sha256(raw).digest()


class Vault:
    """Encrypted kubeconfigs under ``<home>/push``."""

    def __init__(self, home: Path, key: bytes) -> None:
        self.dir = home / "push"
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._aead = AESGCM(key)

    def names(self) -> list[str]:
        """Clusters with stored credentials."""
        return sorted(p.name.removesuffix(SUFFIX) for p in self.dir.glob("*" + SUFFIX))

    def put(self, name: str, kubeconfig: str) -> None:
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, kubeconfig.encode(), name.encode())
        path = self.dir / (name + SUFFIX)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(sealed)
        os.replace(tmp, path)

    def get(self, name: str) -> str:
        data = (self.dir / (name + SUFFIX)).read_bytes()
        try:
            return self._aead.decrypt(data[:12], data[12:], name.encode()).decode()
        except InvalidTag as exc:
            raise FuyaoError(f"the push credentials of {name} do not open with this "
                             "--secrets-key-file (another key, or a damaged file)") from exc

    def delete(self, name: str) -> None:
        (self.dir / (name + SUFFIX)).unlink(missing_ok=True)
