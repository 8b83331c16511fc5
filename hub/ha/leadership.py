"""Leader election for one hub process, and the registry of replicas.

``Hub`` creates one ``Leadership``. ``Hub.start`` calls ``open`` (the first try: on SQLite it
always wins) and runs ``run(on_elected)``: a leader checks every ``interval`` seconds that
its lease still stands, a standby tries to take it and calls ``on_elected`` (``Hub.lead``:
load the state, start placing) when it wins. Each replica records itself in ``ha_replicas``
every ``HEARTBEAT`` seconds, which is what ``status`` (``fuyaoctl hub status``) lists.

A leader that learns another hub leads (its lease check finds a newer epoch, or a write was
fenced) calls ``on_lost``: the server shuts down and exits non-zero, as Kubernetes' own
controllers do when they lose their lease; its supervisor starts it again as a standby.
Its in-memory state is stale by then, and its writes are already refused by the fence.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from prometheus_client import Gauge
from sqlalchemy.exc import SQLAlchemyError

from fuyao.errors import Transient
from hub.config import HubConfig
from hub.ha.lease import EpochFence, LeaderInfo, Lease, NotLeader, Replica
from hub.ha.readcache import ReadCache
from hub.ha.tables import REPLICAS
from hub.metrics import Metrics
from hub.store.engine import WRITE_OPTION

log = logging.getLogger(__name__)

INTERVAL = 1.0          # lease check (leader) / lease attempt (standby), seconds
CHECK_TIMEOUT = 5.0     # a lease check taking longer is undecided
HEARTBEAT = 2.0         # replica registry refresh
SEEN_WITHIN = 15.0      # a replica not seen for this long is not listed
FORGET_AFTER = timedelta(hours=1)


def _reachable(host: str, port: int) -> str:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"{host}:{port}"


class Leadership:
    """Whether this hub leads, the election loop, and the replica registry."""

    def __init__(self, config: HubConfig, metrics: Metrics, reads: ReadCache) -> None:
        self.replica = Replica(uuid.uuid4().hex[:12], _reachable(config.host, config.api_port),
                               config.agent_address,
                               _reachable(config.host, config.health_port))
        self.url = config.store_url
        self.reads = reads
        self.leading = False
        self.rebuilt = False      # set by ``Hub.lead`` once its view is rebuilt from the store
        self.lease: Lease | None = None
        self.leader: LeaderInfo | None = None     # last seen leader row
        self.on_lost: Callable[[str], None] = lambda reason: None
        self.lost: str | None = None
        self.interval = INTERVAL
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ha-lease")
        self._checking: Future[bool] | None = None
        self._beat_at = 0.0
        self._leader_gauge = Gauge("fuyao_ha_leader", "1 while this hub leads, else 0",
                                   registry=metrics.registry)
        self._epoch_gauge = Gauge("fuyao_ha_epoch", "The fencing epoch this hub last saw",
                                  registry=metrics.registry)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> bool:
        """Connect and try the lease once; True if this hub leads now."""
        self._loop = asyncio.get_running_loop()
        self.lease = Lease(self.url, self.replica)
        epoch = await asyncio.to_thread(self.lease.try_acquire)
        if epoch is not None:
            self._won(epoch)
        else:
            await self._see_leader()
        await self._heartbeat()
        return self.leading

    async def run(self, on_elected: Callable[[], Awaitable[None]]) -> None:
        """Hold or seek the lease until cancelled or deposed."""
        while self.lost is None:
            await asyncio.sleep(self.interval)
            try:
                if self.leading:
                    await self._check()
                elif await self._try():
                    await on_elected()
                if time.monotonic() - self._beat_at >= HEARTBEAT:
                    await self._heartbeat()
            except Transient as exc:
                log.warning("leader election: %s", exc.message)

    async def close(self) -> None:
        """Give up the lease and leave the registry (clean shutdown)."""
        lease, self.lease = self.lease, None
        self.leading = False
        if lease is not None:
            await asyncio.to_thread(_leave, lease)
        self._checker.shutdown(wait=False, cancel_futures=True)

    # -- what others ask -------------------------------------------------------------------

    def fence(self) -> EpochFence:
        """The store's write check for the epoch this hub won."""
        assert self.lease is not None and self.lease.epoch is not None
        return EpochFence(self.lease.epoch, self._stale_write)

    @property
    def epoch(self) -> int | None:
        """This hub's epoch while it leads."""
        return self.lease.epoch if self.leading and self.lease is not None else None

    @property
    def serving(self) -> bool:
        """True once this hub leads *and* has rebuilt its view: between winning the lease
        and that, agents and writes are refused as by a standby (retry shortly), so an agent
        is never judged against a half-loaded cluster list."""
        return self.leading and self.rebuilt

    def refusal(self, what: str) -> NotLeader:
        """The 503 a standby answers a write (or an agent) with: who leads, at which epoch."""
        leader = self.leader
        if self.leading:
            return NotLeader(f"this hub is taking over (epoch {self.epoch}) and rebuilding "
                             f"its view; it does not {what} yet: retry shortly", leader)
        if leader is None or leader.api_address is None:
            where = "no leader is known yet; retry shortly"
        else:
            where = (f"the leader (epoch {leader.epoch}) serves REST at {leader.api_address} "
                     f"and agents at {leader.agent_address}")
        return NotLeader(f"this hub is a standby and does not {what}: {where}", leader)

    async def status(self) -> dict[str, Any]:
        """``{"leader", "epoch", "replicas": [...]}`` as ``fuyaoctl hub status`` shows it."""
        if self.lease is None:
            raise Transient("the hub is starting")
        return await asyncio.to_thread(_status, self.lease)

    # -- internals -------------------------------------------------------------------------

    def _won(self, epoch: int) -> None:
        self.leading = True
        self._leader_gauge.set(1)
        self._epoch_gauge.set(epoch)
        assert self.lease is not None
        self.leader = LeaderInfo(epoch, self.replica.id, self.replica.api_address,
                                 self.replica.agent_address, datetime.now(UTC))
        log.warning("this hub leads: epoch %d", epoch)

    async def _try(self) -> bool:
        assert self.lease is not None
        epoch = await asyncio.to_thread(self.lease.try_acquire)
        if epoch is None:
            await self._see_leader()
            return False
        self._won(epoch)
        return True

    async def _see_leader(self) -> None:
        assert self.lease is not None
        self.leader = await asyncio.to_thread(self.lease.leader)
        self._epoch_gauge.set(self.leader.epoch)

    async def _check(self) -> None:
        """One lease check, never two at once (a hung connection must not pile them up)."""
        assert self.lease is not None
        if self._checking is None or self._checking.done():
            self._checking = self._checker.submit(self.lease.check)
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                held = await asyncio.shield(asyncio.wrap_future(self._checking))
        except TimeoutError:
            raise Transient(f"lease check took over {CHECK_TIMEOUT:g}s") from None
        if not held:
            self._deposed("the lease check found that another hub leads now")

    def _stale_write(self, current: int) -> None:
        """From the store's writer thread: a write found a newer epoch."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(
                self._deposed, f"a write was refused: epoch {current} is current")

    def _deposed(self, reason: str) -> None:
        if self.lost is not None:
            return
        self.lost = reason
        self.leading = False
        self._leader_gauge.set(0)
        log.error("lost the leadership: %s; stopping (a supervisor restarts this hub as a "
                  "standby)", reason)
        self.on_lost(reason)

    async def _heartbeat(self) -> None:
        assert self.lease is not None
        self._beat_at = time.monotonic()
        role = "leader" if self.leading else "standby"
        epoch = (self.lease.epoch if self.leading else None) or (
            self.leader.epoch if self.leader else 0)
        try:
            await asyncio.to_thread(_register, self.lease, role, epoch or 0, self.leading)
        except SQLAlchemyError as exc:
            raise Transient(f"cannot update the replica registry: {exc}") from exc


def _register(lease: Lease, role: str, epoch: int, prune: bool) -> None:
    """Upsert this replica's row; the leader also forgets replicas long gone."""
    now = datetime.now(UTC)
    r = lease.replica
    values = {"api_address": r.api_address, "agent_address": r.agent_address,
              "health_address": r.health_address, "role": role, "epoch": epoch, "seen_at": now}
    with lease.engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            done = conn.execute(sa.update(REPLICAS).where(REPLICAS.c.id == r.id).values(**values))
            if done.rowcount == 0:
                conn.execute(sa.insert(REPLICAS).values(id=r.id, started_at=now, **values))
            if prune:
                conn.execute(sa.delete(REPLICAS).where(REPLICAS.c.seen_at < now - FORGET_AFTER))


def _leave(lease: Lease) -> None:
    try:
        with lease.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                conn.execute(sa.delete(REPLICAS).where(REPLICAS.c.id == lease.replica.id))
    except SQLAlchemyError as exc:
        log.warning("could not leave the replica registry: %s", exc)
    lease.close()


def _status(lease: Lease) -> dict[str, Any]:
    leader = lease.leader()
    since = datetime.now(UTC) - timedelta(seconds=SEEN_WITHIN)
    try:
        with lease.engine.connect() as conn:
            rows = conn.execute(sa.select(REPLICAS).where(REPLICAS.c.seen_at >= since)
                                .order_by(REPLICAS.c.api_address)).all()
    except SQLAlchemyError as exc:
        raise Transient(f"cannot read the replica registry: {exc}") from exc
    replicas = [{
        "id": row.id, "address": row.api_address, "agent_address": row.agent_address,
        "health_address": row.health_address,
        "role": "leader" if row.id == leader.holder else "standby",
        "epoch": int(row.epoch), "started_at": _iso(row.started_at),
        "last_seen": _iso(row.seen_at),
    } for row in rows]
    alive = any(r["role"] == "leader" for r in replicas)
    return {
        "leader": leader.api_address if alive else None,
        "leader_agent_address": leader.agent_address if alive else None,
        "epoch": leader.epoch,
        "since": _iso(leader.acquired_at) if leader.acquired_at else None,
        "replicas": replicas,
    }


def _iso(moment: datetime) -> str:
    """ISO 8601 in UTC (SQLite hands times back without their zone)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()
