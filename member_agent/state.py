"""The agent's state directory: where the cluster credential from ``Register`` is kept.

Called by ``member_agent.connection`` (load before connecting, save after registering) and
by the CLI (choosing the directory). Default directory: ``<token-file>.d/`` next to the
join token file, else ``$FUYAO_HOME/agent-<cluster>/`` (``FUYAO_HOME`` defaults to
``~/.fuyao``). The credential file is written atomically with mode 0600.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fuyao.errors import InvalidInput

CREDENTIAL_FILE = "credential.json"


def default_state_dir(cluster: str, token_file: Path | None) -> Path:
    """``<token-file>.d/`` if a token file is given, else ``$FUYAO_HOME/agent-<cluster>/``."""
    if token_file is not None:
        return token_file.with_name(token_file.name + ".d")
    home = Path(os.environ.get("FUYAO_HOME") or Path.home() / ".fuyao")
    return home / f"agent-{cluster}"


def read_token(token_file: Path | None) -> str:
    """The join token, whitespace stripped."""
    if token_file is None:
        raise InvalidInput("no saved credential and no --token-file to register with")
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidInput(f"{token_file}: cannot read join token: {exc.strerror or exc}") from exc
    if not token:
        raise InvalidInput(f"{token_file}: the join token file is empty")
    return token


class CredentialStore:
    """The saved credential of one cluster in one state directory."""

    def __init__(self, directory: Path, cluster: str) -> None:
        self.directory = directory
        self.cluster = cluster
        self.path = directory / CREDENTIAL_FILE

    def load(self) -> str | None:
        """The saved credential, or None if this agent never registered."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"{self.path}: unreadable credential file: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("credential"), str):
            raise InvalidInput(f"{self.path}: not a credential file")
        if data.get("cluster") != self.cluster:
            raise InvalidInput(
                f"{self.path}: holds the credential of cluster {data.get('cluster')!r}, "
                f"not {self.cluster!r}; use another --state-dir"
            )
        credential: str = data["credential"]
        return credential

    def save(self, credential: str) -> None:
        """Write the credential atomically, readable by the owner only."""
        write_private_json(self.path, {"cluster": self.cluster, "credential": credential})


def write_private_json(path: Path, data: object) -> None:
    """Write ``data`` as JSON to ``path`` atomically, mode 0600 (its directory 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
