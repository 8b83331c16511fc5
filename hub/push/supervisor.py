"""Run one ``fuyao-agent`` child process per push-joined member, for as long as the hub runs.

Composed by ``hub.server`` (``PushAgents.start`` after the hub starts, ``stop`` before it
stops) and called by the REST routes in ``hub.api.push`` and ``hub.api.clusters``. A join
checks the credentials (``verify``), registers the cluster like any join (its one-time token
goes to a 0600 file in the child's state directory, where the agent keeps its own key and
client certificate afterwards, 0600, and renews the certificate itself), installs the
member's fencing watchdog (``fencing``), stores the kubeconfig encrypted (``vault``) and
starts the child: ``fuyao-agent --backend kube --kubeconfig -`` with the decrypted
kubeconfig written to its stdin and closed, so the plaintext never touches the disk. A child
that exits is started again with backoff (1 s doubling to 60 s); its output goes to
``<home>/push/<name>.log``. Remove stops the child, removes the watchdog, and deletes the
credentials and the state directory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from fuyao import kubeconfig
from fuyao.aio import cancel_and_wait
from fuyao.errors import Conflict, FuyaoError, InvalidInput
from fuyao.kubefence import DEFAULT_IMAGE
from fuyao.spec import JoinRequest, JoinResponse
from hub.push import fencing, verify
from hub.push.vault import Vault

log = logging.getLogger(__name__)
MAX_BACKOFF = 60.0
TASK_NAMESPACE = "fuyao-tasks"   # the push agent's defaults (fuyao-agent --namespace, --lease-name)
LEASE_NAME = "fuyao-agent"


def agent_program() -> list[str]:
    """The ``fuyao-agent`` console script installed beside this Python (else on PATH)."""
    beside = Path(sys.executable).with_name("fuyao-agent")
    found = str(beside) if beside.exists() else shutil.which("fuyao-agent")
    if found is None:
        raise FuyaoError("fuyao-agent is not installed beside the hub: push joins need it")
    return [found]


class PushAgents:
    """The push members' agents: credentials in a vault, one child process each."""

    def __init__(self, vault: Vault, *, hub_address: str, ca_file: Path | None,
                 home: Path, watchdog_image: str = DEFAULT_IMAGE,
                 register_address: str | None = None) -> None:
        self.vault = vault
        self.register_address = register_address
        self.watchdog_image = watchdog_image
        self.hub_address = hub_address
        self.ca_file = ca_file
        self.home = home
        self._children: dict[str, asyncio.Task[None]] = {}
        self._procs: dict[str, asyncio.subprocess.Process] = {}

    @property
    def names(self) -> list[str]:
        """Push-joined clusters."""
        return self.vault.names()

    async def start(self) -> None:
        """Start the agents of every stored push member."""
        for name in self.vault.names():
            self._spawn(name)

    async def stop(self) -> None:
        """Stop every child (SIGTERM, then SIGKILL after 10 s); credentials stay stored."""
        await asyncio.gather(*(self._halt(name) for name in list(self._children)))

    async def join(self, req: JoinRequest, doc: dict[str, Any],
                   register: Callable[[JoinRequest], Awaitable[JoinResponse]],
                   ) -> tuple[JoinResponse, int]:
        """Verify, fence, register, store, start. ``register`` is ``Hub.join_cluster``.

        The member's watchdog (``fencing``) is installed before anything is stored: a member
        the hub cannot fence is refused, like one whose credentials lack a verb."""
        if req.name in self.vault.names():
            raise Conflict(f"cluster {req.name!r} is already push-joined")
        nodes = await asyncio.to_thread(verify.check, doc)
        await asyncio.to_thread(fencing.install, doc, TASK_NAMESPACE, LEASE_NAME,
                                self.watchdog_image, req.name)
        try:
            answer = await register(req)
        except BaseException:
            await asyncio.to_thread(fencing.uninstall, doc, TASK_NAMESPACE)
            raise
        state = self._state_dir(req.name)
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir(parents=True, mode=0o700)
        token = state / "join.token"
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(answer.token + "\n")
        self.vault.put(req.name, kubeconfig.dumps(doc))
        self._spawn(req.name)
        return answer, nodes

    async def remove(self, name: str) -> bool:
        """Stop the member's agent and delete its credentials; False if not a push member."""
        if name not in self.vault.names():
            return False
        await self._halt(name)
        doc = yaml.safe_load(self.vault.get(name))
        if isinstance(doc, dict):
            await asyncio.to_thread(fencing.uninstall, doc, TASK_NAMESPACE)
        self.vault.delete(name)
        shutil.rmtree(self._state_dir(name), ignore_errors=True)
        return True

    def _state_dir(self, name: str) -> Path:
        return self.vault.dir / name

    def _spawn(self, name: str) -> None:
        if name not in self._children:
            self._children[name] = asyncio.create_task(self._supervise(name),
                                                       name=f"push-agent-{name}")

    async def _halt(self, name: str) -> None:
        task = self._children.pop(name, None)
        proc = self._procs.pop(name, None)
        if task is not None:
            task.cancel()
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(10.0):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        await cancel_and_wait([task])

    async def _supervise(self, name: str) -> None:
        backoff = 1.0
        while True:
            try:
                code = await self._run_once(name)
                log.warning("push agent of %s exited with %s; restarting in %.0fs",
                            name, code, backoff)
            except (FuyaoError, OSError, yaml.YAMLError) as exc:
                log.error("push agent of %s cannot start: %s", name, exc)
            await asyncio.sleep(backoff)
            backoff = min(MAX_BACKOFF, backoff * 2)

    async def _run_once(self, name: str) -> int:
        state = self._state_dir(name)
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        args = [*agent_program(), "--hub", self.hub_address, "--cluster", name,
                "--backend", "kube", "--kubeconfig", "-", "--state-dir", str(state),
                "--namespace", TASK_NAMESPACE, "--lease-name", LEASE_NAME]
        token = state / "join.token"
        if token.exists():
            args += ["--token-file", str(token)]
        if self.ca_file is not None:   # enroll for a client certificate, then mutual TLS
            args += ["--ca-cert", str(self.ca_file)]
            if self.register_address:
                args += ["--register", self.register_address]
        secret = self.vault.get(name)
        with open(self.vault.dir / f"{name}.log", "ab") as logfile:
            proc = await asyncio.create_subprocess_exec(
                *args, stdin=asyncio.subprocess.PIPE, stdout=logfile, stderr=logfile)
            self._procs[name] = proc
            assert proc.stdin is not None
            proc.stdin.write(secret.encode())
            await proc.stdin.drain()
            proc.stdin.close()
            log.info("started the push agent of %s (pid %d)", name, proc.pid)
            return await proc.wait()


def parse_kubeconfig(text: str) -> dict[str, Any]:
    """A pushed kubeconfig: bounded, YAML, one context with inline credentials."""
    if len(text.encode()) > kubeconfig.MAX_KUBECONFIG_BYTES:
        raise InvalidInput(f"the kubeconfig is larger than {kubeconfig.MAX_KUBECONFIG_BYTES}"
                           " bytes")
    doc = kubeconfig.flatten(text, Path("/nonexistent"))
    kubeconfig.server_of(doc)
    return doc
