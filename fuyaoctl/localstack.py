"""Run a hub and simulated member agents as local processes.

Used by the demo (``examples/demo.py``), the end-to-end tests and the end-to-end benchmark:
one place that knows how to start ``fuyao-hub serve`` on free ports, join clusters through
the real join flow (REST join -> token file -> ``fuyao-agent`` registers over gRPC), and
stop or kill any of them. Every process writes its log under ``<home>/logs``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from fuyao.errors import FuyaoError, Transient
from fuyaoctl.client import Client


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Every port this process handed to a stack: stacks built before their hubs listen (the
# HA tests' two hubs on one database) must not get each other's ports, and the kernel may
# hand a just-closed port out again. Four a stack, so it stays small.
_HANDED_OUT: set[int] = set()


def _distinct_port(taken: set[int]) -> int:
    """A free port not in ``taken`` nor handed to another stack of this process (added to
    both): the hub refuses equal ports, and a second hub cannot listen on the first's."""
    for _ in range(100):
        port = free_port()
        if port not in taken and port not in _HANDED_OUT:
            taken.add(port)
            _HANDED_OUT.add(port)
            return port
    raise FuyaoError("no free distinct TCP port on 127.0.0.1")


def port_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:``port``."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _command(script: str, module: str) -> list[str]:
    """The console script beside this interpreter, or the module run with ``-c``."""
    path = Path(sys.executable).parent / script
    if path.exists():
        return [str(path)]
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


@dataclass
class Proc:
    """One child process and its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        """True while the process runs."""
        return self.popen.poll() is None

    def stop(self, *, kill: bool = False, timeout: float = 15.0) -> int:
        """SIGTERM (or SIGKILL) and wait; returns the exit code."""
        self.signal(kill=kill)
        return self.wait_stopped(timeout)

    def signal(self, *, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL) if it still runs; ``wait_stopped`` waits for it."""
        if self.alive():
            self.popen.send_signal(signal.SIGKILL if kill else signal.SIGTERM)

    def wait_stopped(self, timeout: float = 15.0) -> int:
        """Wait up to ``timeout`` s for a signalled process, SIGKILL it after; the exit code."""
        try:
            self.popen.wait(max(0.0, timeout))
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(15.0)
        return self.popen.returncode

    def tail(self, lines: int = 40) -> str:
        """The end of the process log, for error messages."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class LocalStack:
    """A hub plus simulated agents on this machine."""

    home: Path
    api_port: int = 0
    agent_port: int = 0
    health_port: int = 0
    register_port: int = 0        # agents enroll for their client certificate here
    hub_args: list[str] = field(default_factory=list)
    agent_args: list[str] = field(default_factory=list)
    db_url: str | None = None
    hub: Proc | None = None
    agents: dict[str, Proc] = field(default_factory=dict)
    token: str | None = None      # the hub's first admin token, read once it has started

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        taken = {p for p in (self.api_port, self.agent_port, self.health_port,
                             self.register_port) if p}
        self.api_port = self.api_port or _distinct_port(taken)
        self.agent_port = self.agent_port or _distinct_port(taken)
        self.health_port = self.health_port or _distinct_port(taken)
        self.register_port = self.register_port or _distinct_port(taken)

    @property
    def url(self) -> str:
        """The hub's REST URL."""
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def admin_token_file(self) -> Path:
        """Where the hub writes its first admin token."""
        return self.home / "hub" / "admin.token"

    def client(self, token: str | None = None) -> Client:
        """An SDK client for this hub, with the admin token unless given another."""
        return Client(self.url, token=token or self.token)

    def env(self, token: str | None = None) -> dict[str, str]:
        """Environment for a ``fuyaoctl`` child process: this hub and the admin token."""
        env = {**os.environ, "FUYAO_HUB": self.url}
        if token or self.token:
            env["FUYAO_TOKEN"] = token or self.token or ""
        return env

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        log = self.home / "logs" / f"{name}.log"
        out = log.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 stdin=subprocess.DEVNULL)
        out.close()
        return Proc(name, popen, log)

    def start_hub(self, timeout: float = 30.0) -> Proc:
        """Start ``fuyao-hub serve`` and wait until its API answers."""
        argv = [*_command("fuyao-hub", "hub.cli"), "serve", "--home", str(self.home / "hub"),
                "--api-port", str(self.api_port), "--agent-port", str(self.agent_port),
                "--health-port", str(self.health_port),
                "--register-port", str(self.register_port), *self.hub_args]
        if self.db_url:
            argv += ["--db", self.db_url]
        self.hub = self._spawn("hub", argv)
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                try:
                    client.health()
                    if self.admin_token_file.exists():
                        self.token = self.admin_token_file.read_text().strip()
                    return self.hub
                except Transient:
                    if not self.hub.alive() or time.monotonic() > deadline:
                        raise RuntimeError("hub did not start:\n" + self.hub.tail()) from None
                    time.sleep(0.1)

    def stop_hub(self, *, kill: bool = False) -> None:
        """Stop the hub (SIGKILL with ``kill``: a crash)."""
        if self.hub is not None:
            self.hub.stop(kill=kill)

    def join(self, name: str, *, labels: dict[str, str] | None = None, weight: int = 1,
             headroom: float = 0.10) -> Path:
        """Join a cluster; writes the token file (mode 0600) and the hub's CA certificate
        (``<name>-ca.crt``) where the agent will read them; returns the token file."""
        with self.client() as client:
            resp = client.join_cluster(name, labels=labels, weight=weight, headroom=headroom)
        return save_join(self.home, resp.cluster, resp.token, resp.ca_cert)

    def start_agent(self, name: str, fleet: Path | str, *, token_file: Path | None = None,
                    extra: list[str] | None = None, hub: str | None = None) -> Proc:
        """Start a simulated member agent for an already joined cluster; ``fleet`` is a fleet
        file or a trace node list slice (``FILE.csv:START:COUNT``)."""
        token_file = token_file or self.home / f"{name}.token"
        ca_file = token_file.with_name(f"{name}-ca.crt")
        tls = (["--ca-cert", str(ca_file), "--register", f"127.0.0.1:{self.register_port}"]
               if ca_file.exists() else [])
        argv = [*_command("fuyao-agent", "member_agent.launch"), "--hub",
                hub or f"127.0.0.1:{self.agent_port}", "--cluster", name, "--token-file",
                str(token_file), *tls, "--state-dir", str(self.home / f"agent-{name}"),
                "--backend", "sim", "--fleet", str(fleet), "--member-log",
                str(self.copy_log(name)), "--member-orphan-timeout", "300",
                *self.agent_args, *(extra or [])]
        proc = self._spawn(f"agent-{name}", argv)
        self.agents[name] = proc
        return proc

    def copy_log(self, name: str) -> Path:
        """Where the member of ``name`` logs every copy start and stop (JSON lines)."""
        return self.home / "logs" / f"copies-{name}.jsonl"

    def member_pid(self, name: str) -> int | None:
        """The pid of the sim member process of ``name`` (it outlives its agent), if any."""
        try:
            text = (self.home / f"agent-{name}" / "member.lock").read_text().strip()
            pid = int(text)
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def stop_member(self, name: str, timeout: float = 15.0) -> None:
        """Stop the member cluster itself (SIGTERM), as if the cluster went away."""
        self.stop_members([name], timeout)

    def stop_members(self, names: Iterable[str], timeout: float = 15.0) -> None:
        """Stop these member clusters (SIGTERM to all, then wait up to ``timeout`` s for
        them together)."""
        stopping: dict[str, int] = {}
        for name in names:
            pid = self.member_pid(name)
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
                stopping[name] = pid
        deadline = time.monotonic() + timeout
        while stopping and time.monotonic() < deadline:
            stopping = {n: pid for n, pid in stopping.items() if self.member_pid(n) == pid}
            if stopping:
                time.sleep(0.05)

    def join_and_start(self, name: str, fleet: Path | str, **join: object) -> Proc:
        """Join a cluster and start its agent: the whole join flow."""
        self.join(name, **join)  # type: ignore[arg-type]
        return self.start_agent(name, fleet)

    def wait_ready(self, names: list[str], timeout: float = 30.0) -> None:
        """Wait until every named cluster is Ready."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                states = {c.name: c.state.value for c in client.list_clusters()}
                if all(states.get(n) == "Ready" for n in names):
                    return
                for n in names:
                    agent = self.agents.get(n)
                    if agent is not None and not agent.alive():
                        raise RuntimeError(f"agent {n} exited:\n{agent.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"clusters not Ready after {timeout}s: {states}")
                time.sleep(0.2)

    def close(self, timeout: float = 15.0) -> None:
        """Stop every agent, then every member cluster, then the hub. Each group is signalled
        at once and waited for together (``timeout`` s each), so a fleet of 100 stops in
        about the time one member takes, not one after another."""
        agents = list(self.agents.values())
        for proc in agents:
            proc.signal()
        deadline = time.monotonic() + timeout
        for proc in agents:
            proc.wait_stopped(deadline - time.monotonic())
        self.stop_members(list(self.agents), timeout)
        self.stop_hub()

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def save_join(directory: Path, cluster: str, token: str, ca_cert: str | None) -> Path:
    """Write what ``cluster join`` returned as the agent reads it: ``<cluster>.token``
    (mode 0600) and, when the hub serves TLS, ``<cluster>-ca.crt``; returns the token file."""
    token_file = directory / f"{cluster}.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    if ca_cert:
        (directory / f"{cluster}-ca.crt").write_text(ca_cert)
    return token_file


def remove_tree(path: Path) -> None:
    """Delete a stack's home directory."""
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["FuyaoError", "LocalStack", "Proc", "free_port", "port_free", "remove_tree",
           "save_join"]
