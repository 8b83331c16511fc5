"""Self-contained kubeconfig documents for push joins (``fuyaoctl cluster join --server``).

Called by the CLI (``fuyaoctl cluster join NAME --server URL --token T
--certificate-authority CA`` builds one; ``--kubeconfig FILE --context C`` flattens one) and
by the hub (``hub.push``) to check what it was sent. Flattening keeps only the chosen
context, its cluster and its user, and inlines every file the kubeconfig points to
(``certificate-authority`` -> ``certificate-authority-data`` ...), so the hub needs nothing
from the operator's disk. Credential plugins (``exec``, ``auth-provider``) run programs on
the operator's machine and cannot work inside the hub: they are refused with the fix.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from fuyao.errors import InvalidInput

MAX_KUBECONFIG_BYTES = 64 * 1024
_FILE_FIELDS = {"certificate-authority": "certificate-authority-data",
                "client-certificate": "client-certificate-data",
                "client-key": "client-key-data"}


def build(name: str, server: str, token: str, ca_pem: bytes) -> dict[str, Any]:
    """A kubeconfig for one API server, a bearer token and the server's CA."""
    if not server.startswith(("https://", "http://")):
        raise InvalidInput(f"--server {server!r} must be an https:// URL")
    if not token.strip():
        raise InvalidInput("--token must not be empty")
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        if b"BEGIN CERTIFICATE" not in ca_pem:
            raise InvalidInput("--certificate-authority is not a PEM certificate")
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {"apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": {"token": token.strip()}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}


def flatten(text: str, base_dir: Path, context: str | None = None) -> dict[str, Any]:
    """One context of a kubeconfig file, with the files it names inlined."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"the kubeconfig is not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidInput("the kubeconfig is not a mapping")
    chosen = context or doc.get("current-context")
    if not chosen:
        raise InvalidInput("the kubeconfig has no current-context: pass --context")
    ctx = _named(doc, "contexts", chosen, "context")
    cluster = dict(_named(doc, "clusters", ctx.get("cluster", ""), "cluster"))
    user = dict(_named(doc, "users", ctx.get("user", ""), "user"))
    if "exec" in user or "auth-provider" in user:
        raise InvalidInput(
            f"user {ctx.get('user')!r} authenticates with a credential plugin, which cannot "
            "run inside the hub; join with a ServiceAccount token (--server --token "
            "--certificate-authority) or a kubeconfig with a token or client certificate")
    for part in (cluster, user):
        for field, data_field in _FILE_FIELDS.items():
            if field in part:
                path = Path(str(part.pop(field))).expanduser()
                path = path if path.is_absolute() else base_dir / path
                try:
                    part[data_field] = base64.b64encode(path.read_bytes()).decode()
                except OSError as exc:
                    raise InvalidInput(f"kubeconfig {field} {path}: {exc.strerror}") from exc
    if "tokenFile" in user:
        try:
            user["token"] = Path(str(user.pop("tokenFile"))).expanduser().read_text().strip()
        except OSError as exc:
            raise InvalidInput(f"kubeconfig tokenFile: {exc.strerror}") from exc
    return {"apiVersion": "v1", "kind": "Config", "current-context": chosen,
            "clusters": [{"name": ctx["cluster"], "cluster": cluster}],
            "users": [{"name": ctx["user"], "user": user}],
            "contexts": [{"name": chosen, "context": {"cluster": ctx["cluster"],
                                                      "user": ctx["user"]}}]}


def dumps(doc: dict[str, Any]) -> str:
    """The document as YAML text, refused when it is larger than the hub accepts."""
    text = yaml.safe_dump(doc, sort_keys=True)
    if len(text.encode()) > MAX_KUBECONFIG_BYTES:
        raise InvalidInput(f"the kubeconfig is larger than {MAX_KUBECONFIG_BYTES} bytes")
    return text


def server_of(doc: dict[str, Any]) -> str:
    """The API server URL of a flattened kubeconfig."""
    try:
        return str(doc["clusters"][0]["cluster"]["server"])
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidInput("the kubeconfig names no cluster server") from exc


def _named(doc: dict[str, Any], section: str, name: str, inner: str) -> dict[str, Any]:
    for item in doc.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(inner) or {}
            if isinstance(value, dict):
                return value
    raise InvalidInput(f"the kubeconfig has no {section[:-1]} named {name!r}")
