"""Everything a hub checks and takes before it writes a byte: ports, home, lock, store.

Called by ``hub.server.serve`` first thing. ``prepare(config)`` validates the ports, binds the
REST and health sockets (held and handed to uvicorn), holds the agent port with a probe
socket until gRPC binds it, checks the home directory, takes the exclusive lock
``<home>/hub.lock`` (``fcntl.flock``: released by the kernel when the process dies, so a
kill -9 never leaves a stale lock) and, for PostgreSQL, connects once. Any failure raises
``CannotStart`` (exit code 3) or ``InvalidInput`` (2) with one line saying what to do, and
nothing has been written: the lock file is the first thing created, and only once every
port is ours. No socket here is opened with SO_REUSEPORT, so a second process can never
share a port with this one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import sqlalchemy as sa

from fuyao.errors import FuyaoError, InvalidInput
from hub.config import HubConfig
from hub.store.engine import parse_url

LOCK_FILE = "hub.lock"


class CannotStart(FuyaoError):
    """The hub cannot start here: a port is taken, the home is locked or unusable, the store
    is unreachable. Nothing was written."""

    exit_code: ClassVar[int] = 3


@dataclass
class Prepared:
    """What ``prepare`` took: the listening sockets and the home lock."""

    api: socket.socket
    health: socket.socket
    agent_probe: socket.socket | None
    lock_fd: int | None = None
    _closed: list[socket.socket] = field(default_factory=list)
    grpc_probes: list[socket.socket] = field(default_factory=list)   # registration, bearer

    def release_agent_port(self) -> None:
        """Let gRPC bind the agent ports (called right before it does)."""
        if self.agent_probe is not None:
            self.agent_probe.close()
            self.agent_probe = None
        for probe in self.grpc_probes:
            probe.close()
        self.grpc_probes.clear()

    def close(self) -> None:
        """Close every socket still held and drop the home lock."""
        self.release_agent_port()
        for sock in (self.api, self.health):
            sock.close()
        if self.lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.lock_fd)
            self.lock_fd = None


def grpc_ports(config: HubConfig) -> dict[str, int]:
    """The agent-facing ports besides --agent-port this configuration listens on."""
    if not config.agent_tls:
        return {}
    ports = {"--register-port": config.register_port}
    if config.agent_bearer_port:
        ports["--agent-bearer-port"] = config.agent_bearer_port
    return ports


def check_ports(config: HubConfig) -> None:
    """Every port in 1..65535 and all distinct."""
    ports = {"--api-port": config.api_port, "--agent-port": config.agent_port,
             "--health-port": config.health_port, **grpc_ports(config)}
    for flag, port in ports.items():
        if not 1 <= port <= 65535:
            raise InvalidInput(f"{flag} {port} is not a TCP port (1-65535)")
    if len(set(ports.values())) != len(ports):
        raise InvalidInput(f"ports must differ: {ports}")


def bind(host: str, port: int, flag: str) -> socket.socket:
    """A listening TCP socket on ``host:port`` (SO_REUSEADDR only, never SO_REUSEPORT)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CannotStart(f"{flag}: cannot resolve --host {host!r}: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # SO_REUSEADDR lets a restarted hub bind past TIME_WAIT; unlike SO_REUSEPORT it
        # never lets two listeners share the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = ("already in use (another hub?)" if exc.errno == errno.EADDRINUSE
               else exc.strerror or str(exc))
        raise CannotStart(f"cannot listen on {host}:{port} ({flag}): {why}") from exc
    sock.setblocking(False)
    return sock


def check_home(home: Path) -> None:
    """The home is a directory we may use, or can be created."""
    if home.exists():
        if not home.is_dir():
            raise CannotStart(f"--home {home} is not a directory")
        if not os.access(home, os.R_OK | os.W_OK | os.X_OK):
            raise CannotStart(f"--home {home} is not readable and writable by this user")
        return
    parent = home.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise CannotStart(f"--home {home} cannot be created ({parent} is not writable)")


def lock_home(home: Path) -> int:
    """Take ``<home>/hub.lock`` exclusively (non-blocking); returns the open descriptor."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise CannotStart(f"cannot open {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise CannotStart(
                f"--home {home} is in use by another hub (pid {holder}, {path}); "
                "stop it or use another --home") from exc
        raise CannotStart(f"cannot lock {path}: {exc.strerror}") from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def check_store(config: HubConfig) -> None:
    """The store URL parses; a PostgreSQL server answers (SQLite is checked via the home)."""
    url = parse_url(config.store_url)
    if url.get_backend_name() != "postgresql":
        return
    engine = sa.create_engine(url, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except sa.exc.SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()
        shown = url.render_as_string(hide_password=True)
        raise CannotStart(f"store {shown} is unreachable: "
                          f"{reason[0] if reason else type(exc).__name__}") from exc
    finally:
        engine.dispose()


def prepare(config: HubConfig) -> Prepared:
    """Check and take everything the hub needs, in an order that writes nothing on failure."""
    check_ports(config)
    parse_url(config.store_url)
    check_home(config.home)
    api = bind(config.host, config.api_port, "--api-port")
    taken = [api]
    try:
        health = bind(config.host, config.health_port, "--health-port")
        taken.append(health)
        probe = bind(config.host, config.agent_port, "--agent-port")
        taken.append(probe)
        extra = []
        for flag, port in grpc_ports(config).items():
            extra.append(bind(config.host, port, flag))
            taken.append(extra[-1])
        check_store(config)
        prepared = Prepared(api, health, probe, grpc_probes=extra)
        prepared.lock_fd = lock_home(config.home)
        return prepared
    except BaseException:
        for sock in taken:
            sock.close()
        raise
