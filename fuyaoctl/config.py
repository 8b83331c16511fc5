"""``~/.config/fuyao/config.yaml``: named contexts (hub address + token), like kubeconfig.

::

    current-context: prod
    contexts:
      - name: prod
        hub: https://hub.example:8848
        token-file: ~/.fuyao/prod.token      # or  token: fyt_...
      - name: laptop
        hub: http://127.0.0.1:8848
        token-file: ~/.fuyao/admin.token

The CLI takes the hub and token from ``--hub``/``--token``, then ``FUYAO_HUB``/
``FUYAO_TOKEN``, then the current context (``--context`` or ``FUYAO_CONTEXT`` picks another).
``FUYAO_CONFIG`` names another file. Called by ``fuyaoctl.cli`` (root options) and
``fuyaoctl.commands.config`` (``config use-context`` and friends). The file is written 0600.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fuyao.errors import InvalidInput, NotFound

CONFIG_ENV = "FUYAO_CONFIG"
CONTEXT_ENV = "FUYAO_CONTEXT"
MAX_CONFIG_BYTES = 1024 * 1024


def config_path() -> Path:
    """``$FUYAO_CONFIG`` or ``~/.config/fuyao/config.yaml`` (XDG_CONFIG_HOME honoured)."""
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fuyao" / "config.yaml"


@dataclass
class Context:
    """One named hub + credential."""

    name: str
    hub: str | None = None
    token: str | None = None
    token_file: str | None = None

    def read_token(self) -> str | None:
        """The token, from ``token`` or ``token-file``."""
        if self.token:
            return self.token
        if self.token_file:
            path = Path(self.token_file).expanduser()
            try:
                return path.read_text().strip() or None
            except OSError as exc:
                raise InvalidInput(f"context {self.name}: cannot read token-file {path}: "
                                   f"{exc.strerror}") from exc
        return None

    def to_dict(self) -> dict[str, Any]:
        """As written in the file."""
        out: dict[str, Any] = {"name": self.name}
        for key, value in (("hub", self.hub), ("token", self.token),
                           ("token-file", self.token_file)):
            if value:
                out[key] = value
        return out


@dataclass
class Config:
    """The whole file."""

    path: Path
    current: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None) -> Config:
        """Read the file (an absent file is an empty config); InvalidInput if malformed."""
        path = path or config_path()
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                raise InvalidInput(f"config file {path} is larger than 1 MiB")
            data = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            return cls(path)
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidInput(f"config file {path} cannot be read: "
                               f"{type(exc).__name__}") from exc
        if data is None:
            return cls(path)
        if not isinstance(data, dict) or not isinstance(data.get("contexts", []), list):
            raise InvalidInput(f"config file {path}: expected 'current-context' and a list "
                               "of 'contexts'")
        config = cls(path, current=data.get("current-context"))
        for item in data.get("contexts") or []:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise InvalidInput(f"config file {path}: every context needs a name")
            config.contexts[item["name"]] = Context(
                item["name"], item.get("hub"), item.get("token"), item.get("token-file"))
        return config

    def context(self, name: str | None = None) -> Context | None:
        """The named context, or the current one (None if no context is chosen)."""
        name = name or os.environ.get(CONTEXT_ENV) or self.current
        if not name:
            return None
        if name not in self.contexts:
            raise NotFound(f"context {name} is not in {self.path} (fuyaoctl config "
                           "get-contexts lists them)")
        return self.contexts[name]

    def save(self) -> None:
        """Write the file, readable only by its owner."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"current-context": self.current,
                                "contexts": [c.to_dict() for c in self.contexts.values()]}
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(data, out, sort_keys=False)
        os.chmod(self.path, 0o600)
