"""The leader lease and its fencing epoch, kept in the hub's own database.

Called by ``hub.ha.leadership.Leadership`` (from worker threads: every method blocks).

On PostgreSQL the lease is a session-level advisory lock (``pg_try_advisory_lock``) held on
one dedicated connection: PostgreSQL releases it the moment that session ends, so a leader
killed with SIGKILL frees it at once (its socket closes), and a standby polling for it wins.
On SQLite the lease is local: one hub per home is enforced by the home lock, so acquiring
always succeeds; the rest of the code path is the same.

Winning the lease increments ``ha_leader.epoch`` (one statement, while holding the lock).
The winner's ``EpochFence`` runs at the start of every write transaction of the store and
refuses the write unless the row still holds its epoch. On PostgreSQL it reads the row
``FOR SHARE``: a takeover's increment waits for writes already checked to commit, and a
write checked after the increment sees the new epoch. A deposed leader therefore cannot
write after its successor's epoch exists (fencing, not timing); on SQLite the write
transaction's exclusive lock gives the same order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from fuyao.errors import FuyaoError, Transient
from hub.ha.tables import LEADER, LEADER_ROW
from hub.store.engine import WRITE_OPTION, create_engine, parse_url

log = logging.getLogger(__name__)

LOCK_KEY = 0x66796C64   # "fyld": the leader lease's advisory lock (migrations use another)
_KEEPALIVE = (("tcp_keepalives_idle", 5), ("tcp_keepalives_interval", 2),
              ("tcp_keepalives_count", 3), ("tcp_user_timeout", 10_000))


class NotLeader(Transient):
    """This hub is a standby: the request must go to the leader (503, with its address)."""

    def __init__(self, message: str, leader: LeaderInfo | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class Deposed(FuyaoError):
    """The hub stopped because another hub took the lease (exit code 4)."""

    exit_code = 4


class Fenced(Transient):
    """A write by a leader whose epoch is no longer current: refused, nothing written."""


@dataclass(frozen=True, slots=True)
class Replica:
    """How one hub process is reached; ``id`` is fresh for every process start."""

    id: str
    api_address: str
    agent_address: str
    health_address: str


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """The ``ha_leader`` row: the current epoch and who won it."""

    epoch: int
    holder: str | None
    api_address: str | None
    agent_address: str | None
    acquired_at: datetime | None


# The fence's query as each dialect's SQL, compiled once: it runs at the start of every write
# transaction, where building and compiling it anew cost ~0.1 ms of the writer's CPU.
_FENCE_SQL: dict[str, str] = {}


class EpochFence:
    """The store's write check (``Store.fence``) for a leader of ``epoch``."""

    def __init__(self, epoch: int, on_stale: Callable[[int], None]) -> None:
        self.epoch = epoch
        self.on_stale = on_stale    # told once a write finds a newer epoch (any thread)

    def __call__(self, conn: Connection) -> None:
        sql = _FENCE_SQL.get(conn.dialect.name)
        if sql is None:
            query = sa.select(LEADER.c.epoch).where(LEADER.c.id == LEADER_ROW)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update(read=True)
            sql = _FENCE_SQL[conn.dialect.name] = str(query.compile(
                dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        current = int(conn.exec_driver_sql(sql).scalar_one())
        if current != self.epoch:
            self.on_stale(current)
            raise Fenced(f"write refused: this hub led epoch {self.epoch}, but epoch {current} "
                         "is current (another hub leads now)")


def read_leader(conn: Connection) -> LeaderInfo:
    """The ``ha_leader`` row."""
    row = conn.execute(sa.select(LEADER).where(LEADER.c.id == LEADER_ROW)).one()
    return LeaderInfo(int(row.epoch), row.holder, row.api_address, row.agent_address,
                      row.acquired_at)


class Lease:
    """The leader lease of one hub process on the store at ``url``."""

    def __init__(self, url: str, replica: Replica) -> None:
        parsed = parse_url(url)
        self.shared = parsed.get_backend_name() == "postgresql"
        self.engine: Engine = create_engine(parsed)
        self.replica = replica
        self.epoch: int | None = None       # the epoch this process won, while it leads
        self._lock_conn: Connection | None = None

    def try_acquire(self) -> int | None:
        """Take the lease if it is free and start a new epoch; None if another hub holds it."""
        with _wrap("acquire the leader lease"):
            if self.shared and not self._lock():
                return None
            try:
                with self.engine.connect() as conn:
                    conn.execution_options(**{WRITE_OPTION: True})
                    with conn.begin():
                        mine = {"holder": self.replica.id, "acquired_at": datetime.now(UTC),
                                "api_address": self.replica.api_address,
                                "agent_address": self.replica.agent_address}
                        bumped = conn.execute(sa.update(LEADER).where(
                            LEADER.c.id == LEADER_ROW).values(epoch=LEADER.c.epoch + 1, **mine))
                        if bumped.rowcount == 0:    # migration 3 inserts it; never gone twice
                            conn.execute(sa.insert(LEADER).values(id=LEADER_ROW, epoch=1, **mine))
                        epoch = read_leader(conn).epoch
            except SQLAlchemyError:
                self.forget_lock_connection()
                raise
            self.epoch = epoch
            return epoch

    def check(self) -> bool:
        """While leading: True if the lease is still ours, False if another hub took it.

        After losing the lock's connection (a database restart) the lock is taken again:
        if no other hub led meanwhile (the epoch did not move) this hub still leads.
        Raises ``Transient`` when the database cannot be asked (undecided: ask again).
        """
        with _wrap("check the leader lease"):
            if self.shared and self._lock_conn is None and not self._lock():
                with self.engine.connect() as conn:
                    current = read_leader(conn).epoch
                if current != self.epoch:
                    return False
                # Nobody led since: the lock is still held by this hub's own old session,
                # which PostgreSQL has not ended yet. Undecided: ask again.
                raise Transient("the leader lease is still held by this hub's previous "
                                "database session; checking again")
            try:
                if self._lock_conn is not None:
                    current = read_leader(self._lock_conn).epoch
                else:
                    with self.engine.connect() as conn:
                        current = read_leader(conn).epoch
            except SQLAlchemyError:
                self.forget_lock_connection()
                raise
            return current == self.epoch

    def leader(self) -> LeaderInfo:
        """The current ``ha_leader`` row."""
        with _wrap("read the leader"), self.engine.connect() as conn:
            return read_leader(conn)

    def release(self) -> None:
        """Give the lease up (clean shutdown): a standby may take it at once."""
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            try:
                conn.execute(sa.select(sa.func.pg_advisory_unlock(LOCK_KEY)))
                conn.close()
            except SQLAlchemyError:
                conn.invalidate()
        self.epoch = None

    def close(self) -> None:
        """Release and close every connection."""
        self.release()
        self.engine.dispose()

    def _lock(self) -> bool:
        """``pg_try_advisory_lock`` on a fresh dedicated connection; kept if it succeeds."""
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            # A leader cut off by the network must lose its session (and the lock) in
            # seconds, not after the kernel's two-hour keepalive default.
            for setting, value in _KEEPALIVE:
                conn.execute(sa.text(f"SET {setting} = {value}"))
            got = bool(conn.execute(sa.select(sa.func.pg_try_advisory_lock(LOCK_KEY))).scalar())
        except SQLAlchemyError:
            conn.invalidate()
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._lock_conn = conn
        return True

    def forget_lock_connection(self) -> None:
        """The lock's connection failed: drop it (PostgreSQL ends its session and lock)."""
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except SQLAlchemyError:
                pass


@contextmanager
def _wrap(what: str) -> Iterator[None]:
    """Turn database errors into ``Transient`` (the lease question stays open)."""
    try:
        yield
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise Transient(f"cannot {what}: {first[0] if first else type(exc).__name__}") from exc
