"""A throwaway PostgreSQL server for tests, or the one CI names in ``FUYAO_TEST_PG_URL``.

Used by the ``pg_url`` fixture (``tests/store/conftest.py``). ``start_postgres`` runs
``initdb`` and ``pg_ctl`` from PATH (or /usr/local/bin) into a temporary directory, as an
unprivileged user when we are root (PostgreSQL refuses to run as root), listening on
127.0.0.1 and a free port; ``stop`` shuts it down and removes the directory. Anything that
goes wrong raises ``PostgresUnavailable`` with the server's own output, so a test that needs
PostgreSQL errors with the reason instead of being skipped.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

ENV_URL = "FUYAO_TEST_PG_URL"
_UNPRIVILEGED_USERS = ("postgres", "nobody")
# Debian keeps server binaries per major version, newest first.
_SEARCH_PATH = ":".join(["/usr/local/bin", *sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                                    reverse=True)])


class PostgresUnavailable(RuntimeError):
    """The test PostgreSQL server could not be started or reached."""


@dataclass
class PostgresServer:
    """A running server: ``url`` (SQLAlchemy, psycopg driver) names its test database."""

    url: str
    datadir: Path | None = None       # None: an external server we did not start
    user: str | None = None
    options: str = ""                 # pg_ctl -o, to start it again after ``halt``

    def halt(self) -> None:
        """Stop the server abruptly (``-m immediate``: a crash); ``resume`` starts it again."""
        assert self.datadir is not None, "only a server we started can be halted"
        _run(_as_user(self.user, [_tool("pg_ctl"), "-D", str(self.datadir / "data"),
                                  "-m", "immediate", "-w", "stop"]))

    def resume(self) -> None:
        """Start a halted server again, on the same port."""
        assert self.datadir is not None
        log = self.datadir / "server.log"
        _run(_as_user(self.user, [_tool("pg_ctl"), "-D", str(self.datadir / "data"), "-o",
                                  self.options, "-l", str(log), "-w", "-t", "30", "start"]),
             log=log)

    def stop(self) -> None:
        """Stop the server we started and remove its files (no-op for an external one)."""
        if self.datadir is None:
            return
        _run(_as_user(self.user, [_tool("pg_ctl"), "-D", str(self.datadir / "data"),
                                  "-m", "immediate", "-w", "stop"]), check=False)
        shutil.rmtree(self.datadir, ignore_errors=True)


def start_postgres(*, durable: bool = False) -> PostgresServer:
    """``FUYAO_TEST_PG_URL`` if set, else a fresh local server with database ``fuyao_test``.

    The local server trades durability for speed (``fsync``, ``synchronous_commit`` and
    ``full_page_writes`` off): a halt (``-m immediate``, a crash) may then lose the last
    commits it acknowledged. ``durable``: a careful database's settings instead (the
    defaults, all on), for a test that crashes the server and counts what was lost."""
    external = os.environ.get(ENV_URL)
    if external:
        _check_reachable(external)
        return PostgresServer(url=_sqlalchemy_url(external))
    user = _unprivileged_user() if os.geteuid() == 0 else None
    tmp = Path(tempfile.mkdtemp(prefix="fuyao-pg-"))
    server = PostgresServer(url="", datadir=tmp, user=user)
    try:
        if user is not None:
            pw = pwd.getpwnam(user)
            os.chown(tmp, pw.pw_uid, pw.pw_gid)
        _run(_as_user(user, [_tool("initdb"), "-D", str(tmp / "data"), "--auth=trust",
                             "-U", "postgres", "-E", "UTF8", "--no-sync"]))
        port = free_port()
        options = f"-k {tmp} -p {port} -c listen_addresses=127.0.0.1"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        server.options = options
        _run(_as_user(user, [_tool("pg_ctl"), "-D", str(tmp / "data"), "-o", options,
                             "-l", str(tmp / "server.log"), "-w", "-t", "30", "start"]),
             log=tmp / "server.log")
        base = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        server.url = create_database(base, "fuyao_test")
        return server
    except BaseException:
        server.stop()
        raise


def create_database(url: str, name: str | None = None) -> str:
    """Create a new empty database on the server of ``url``; returns its URL."""
    name = name or f"fuyao_{uuid.uuid4().hex[:12]}"
    with _admin(url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop the database ``url`` names, closing its other connections first."""
    name = make_url(url).database
    with _admin(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """A new empty database on ``url``'s server for one test, dropped afterwards."""
    db_url = create_database(url)
    try:
        yield db_url
    finally:
        drop_database(db_url)


@contextmanager
def _admin(url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    target = make_url(url).set(drivername="postgresql", database="postgres")
    try:
        conn = psycopg.connect(target.render_as_string(hide_password=False), autocommit=True,
                               connect_timeout=10)
    except psycopg.Error as exc:
        raise PostgresUnavailable(f"cannot connect to PostgreSQL at {target!r}: {exc}") from exc
    with conn:
        yield conn


def _sqlalchemy_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _check_reachable(url: str) -> None:
    with _admin(url):
        pass


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=_SEARCH_PATH)
    if found is None:
        raise PostgresUnavailable(f"{name} not found on PATH or in {_SEARCH_PATH}: install "
                                  f"PostgreSQL or set {ENV_URL}")
    return found


def _unprivileged_user() -> str:
    for name in _UNPRIVILEGED_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresUnavailable(f"running as root and none of the users {_UNPRIVILEGED_USERS} "
                              f"exists to run PostgreSQL; create one or set {ENV_URL}")


def _as_user(user: str | None, argv: list[str]) -> list[str]:
    return argv if user is None else ["runuser", "-u", user, "--", *argv]


def _run(argv: list[str], *, check: bool = True, log: Path | None = None) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          cwd="/")
    if check and done.returncode != 0:
        tail = ""
        if log is not None and log.exists():
            tail = "\n--- server log ---\n" + log.read_text()[-2000:]
        raise PostgresUnavailable(
            f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{tail}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
