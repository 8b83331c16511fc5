"""Push-join credentials: kubeconfigs built and flattened, and the vault that keeps them."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
import yaml

from fuyao import kubeconfig
from fuyao.errors import FuyaoError, InvalidInput
from hub.push.vault import Vault, load_key

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_build_makes_a_one_context_kubeconfig() -> None:
    doc = kubeconfig.build("east", "https://10.0.0.1:6443", "tok ", PEM)
    assert doc["current-context"] == "east"
    assert doc["users"] == [{"name": "east", "user": {"token": "tok"}}]
    assert base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]) == PEM
    assert kubeconfig.server_of(doc) == "https://10.0.0.1:6443"


@pytest.mark.parametrize(("server", "token", "ca", "message"), [
    ("10.0.0.1:6443", "t", PEM, "must be an https:// URL"),
    ("https://x", " ", PEM, "--token must not be empty"),
    ("https://x", "t", b"not a cert", "is not a PEM certificate"),
])
def test_build_refuses_bad_input(server: str, token: str, ca: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        kubeconfig.build("east", server, token, ca)


def kubefile(tmp_path: Path, user: dict[str, object]) -> str:
    (tmp_path / "ca.crt").write_bytes(PEM)
    return yaml.safe_dump({
        "current-context": "prod",
        "clusters": [{"name": "c1", "cluster": {"server": "https://k:6443",
                                                 "certificate-authority": "ca.crt"}},
                     {"name": "other", "cluster": {"server": "https://o"}}],
        "users": [{"name": "u1", "user": user}],
        "contexts": [{"name": "prod", "context": {"cluster": "c1", "user": "u1"}},
                     {"name": "dev", "context": {"cluster": "other", "user": "u1"}}]})


def test_flatten_keeps_one_context_and_inlines_files(tmp_path: Path) -> None:
    doc = kubeconfig.flatten(kubefile(tmp_path, {"token": "t"}), tmp_path)
    assert [c["name"] for c in doc["clusters"]] == ["c1"]
    cluster = doc["clusters"][0]["cluster"]
    assert "certificate-authority" not in cluster
    assert base64.b64decode(cluster["certificate-authority-data"]) == PEM
    assert kubeconfig.flatten(kubefile(tmp_path, {"token": "t"}), tmp_path,
                              "dev")["clusters"][0]["name"] == "other"


@pytest.mark.parametrize(("user", "context", "message"), [
    ({"exec": {"command": "aws"}}, None, "credential plugin, which cannot run inside the hub"),
    ({"token": "t"}, "nope", "has no context named 'nope'"),
])
def test_flatten_refuses_what_the_hub_cannot_use(
    tmp_path: Path, user: dict[str, object], context: str | None, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        kubeconfig.flatten(kubefile(tmp_path, user), tmp_path, context)


def test_the_vault_keeps_credentials_encrypted_and_bound_to_their_name(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("k" * 40)
    vault = Vault(tmp_path / "home", load_key(key_file))
    vault.put("east", "token: s3cret")
    sealed = tmp_path / "home" / "push" / "east.kubeconfig.enc"
    assert b"s3cret" not in sealed.read_bytes()
    assert stat.S_IMODE(sealed.stat().st_mode) == 0o600
    assert vault.get("east") == "token: s3cret"
    assert vault.names() == ["east"]
    sealed.rename(sealed.with_name("west.kubeconfig.enc"))   # moved to another name
    with pytest.raises(FuyaoError, match="do not open"):
        vault.get("west")
    other = tmp_path / "other"
    other.write_text("o" * 40)
    vault.put("east", "x")
    with pytest.raises(FuyaoError, match="do not open"):
        Vault(tmp_path / "home", load_key(other)).get("east")
    vault.delete("east")
    assert vault.names() == ["west"]


def test_a_short_key_file_is_refused(tmp_path: Path) -> None:
    short = tmp_path / "key"
    short.write_text("abc")
    with pytest.raises(InvalidInput, match="at least 32"):
        load_key(short)
