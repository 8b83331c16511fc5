"""The leader lease and its fencing epoch on a real PostgreSQL (and the local SQLite lease).

A deposed leader's writes must be refused by the store because its epoch is stale, not
because of timing: these tests take the lease away while the old leader's store is still
open and prove its next write changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuyao.errors import Transient
from hub.ha import EpochFence, Fenced, Lease
from hub.ha.lease import Replica
from hub.store import Store
from tests.store.make import task
from tests.support.postgres import fresh_database


def replica(name: str) -> Replica:
    return Replica(name, f"{name}:8848", f"{name}:8849", f"{name}:8851")


def acquire_soon(lease: Lease, timeout: float = 10.0) -> int | None:
    """Poll for the lease as a standby does: PostgreSQL frees the lock once the old
    session's backend has exited, a moment after its client went away."""
    deadline = time.monotonic() + timeout
    while True:
        epoch = lease.try_acquire()
        if epoch is not None or time.monotonic() > deadline:
            return epoch
        time.sleep(0.05)


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    with fresh_database(pg_url) as url:
        Store(url).migrate()
        yield url


def test_one_hub_holds_the_lease_and_a_standby_takes_it_when_the_session_ends(
        pg_db: str) -> None:
    a, b = Lease(pg_db, replica("a")), Lease(pg_db, replica("b"))
    try:
        first = a.try_acquire()
        assert first == 1
        assert b.try_acquire() is None          # held: the standby waits
        assert a.check() is True
        leader = b.leader()
        assert (leader.epoch, leader.holder, leader.api_address) == (1, "a", "a:8848")
        a.forget_lock_connection()              # the leader's session ends (kill -9, crash)
        assert acquire_soon(b) == 2             # a new epoch, strictly greater
        assert b.leader().holder == "b"
        assert a.check() is False               # a reconnects: the epoch moved, it is deposed
    finally:
        a.close()
        b.close()


def test_a_deposed_leaders_write_is_refused_by_its_stale_epoch(pg_db: str) -> None:
    a, b = Lease(pg_db, replica("a")), Lease(pg_db, replica("b"))
    store = Store(pg_db)
    seen: list[int] = []
    try:
        epoch = a.try_acquire()
        assert epoch is not None
        store.fence = EpochFence(epoch, seen.append)
        store.add_tasks([task("before")], [])                 # the leader writes
        a.forget_lock_connection()
        assert acquire_soon(b) == epoch + 1
        with pytest.raises(Fenced, match=f"led epoch {epoch}, but epoch {epoch + 1}"):
            store.add_tasks([task("after")], [])
        assert seen == [epoch + 1]                            # the hub learns it was deposed
        assert [t.name for t in store.list_tasks()] == ["before"]   # nothing written
    finally:
        store.close()
        a.close()
        b.close()


def test_a_leader_whose_database_restarted_keeps_leading_if_no_one_else_did(
        pg_db: str) -> None:
    a = Lease(pg_db, replica("a"))
    try:
        assert a.try_acquire() == 1
        a.forget_lock_connection()              # the connection broke, nobody took over
        deadline = time.monotonic() + 10
        while True:                             # until PostgreSQL ended the old session
            try:
                held = a.check()
                break
            except Transient:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert held is True                     # the lock is taken again, epoch unchanged
        assert a.leader().epoch == 1
    finally:
        a.close()


def test_on_sqlite_the_lease_is_local_and_every_start_is_a_new_epoch(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fuyao.db'}"
    Store(url).migrate()
    first = Lease(url, replica("a"))
    assert first.try_acquire() == 1
    first.close()
    second = Lease(url, replica("b"))
    assert second.try_acquire() == 2
    store = Store(url)
    store.fence = EpochFence(1, lambda _: None)             # the first start's epoch: stale
    with pytest.raises(Fenced):
        store.add_tasks([task("late")], [])
    store.fence = EpochFence(2, lambda _: None)
    store.add_tasks([task("current")], [])
    assert [t.name for t in store.list_tasks()] == ["current"]
    store.close()
    second.close()
