"""Member clusters: join, register, health state machine, cordon and removal.

``ClusterManager`` owns the hub's in-memory record of every cluster (persisted through the
store writer on each change) and keeps the fleet view's cluster entries in step. The REST
API calls ``join``/``cordon``/``remove``; the agent channel calls ``register``,
``authenticate``, ``connected``, ``heartbeat`` and ``disconnected``; the monitor calls
``tick``. State machine (DESIGN.md): Joining -> Ready -> Unknown (heartbeats missed) ->
NotReady (grace passed); a heartbeat brings it back to Ready. Cordoning is a flag that
blocks new placements only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from fuyao.errors import Conflict, NotFound, Unauthenticated
from fuyao.spec import ClusterState, ClusterView, JoinRequest, JoinResponse
from fuyao.taints import Taint
from hub.config import HubConfig
from hub.fleet import FleetView
from hub.secrets import hash_secret, new_credential, new_join_token
from hub.store import ClusterRecord
from hub.writer import StoreWriter

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    """Timezone-aware now, as the store keeps it."""
    return datetime.now(UTC)


@dataclass
class ClusterEntry:
    """The hub's live knowledge of one cluster."""

    record: ClusterRecord               # labels: those given at join (stored)
    agent_labels: dict[str, str] = field(default_factory=dict)  # from the agent's Hello
    last_seen: float = 0.0              # monotonic time of the last heartbeat or message
    not_ready_since: float | None = None
    connected: bool = False

    @property
    def state(self) -> ClusterState:
        """Health state as stored (Cordoned is shown by ``view``, not stored)."""
        return ClusterState(self.record.state)

    @property
    def labels(self) -> dict[str, str]:
        """The cluster's labels: the agent's, overridden by those given at join."""
        return {**self.agent_labels, **self.record.labels}


class ClusterManager:
    """Joins, authenticates and tracks the health of member clusters."""

    def __init__(self, config: HubConfig, writer: StoreWriter, fleet: FleetView) -> None:
        self.config = config
        self.writer = writer
        self.fleet = fleet
        self.entries: dict[str, ClusterEntry] = {}
        self.ca_cert: str | None = None       # PEM handed out with joins when TLS is on
        self._credentials: dict[str, str] = {}   # credential hash -> cluster
        # Told of every change worth an event: (cluster, kind, message) (``hub.events``).
        self.on_change: Callable[[str, str, str], None] = lambda name, kind, message: None

    async def load(self, *, persist: bool = True) -> None:
        """Rebuild from the store after a start: joined clusters wait for their agents.
        ``persist=False``: a standby's read-only reload (``hub.ha.readcache``)."""
        now = time.monotonic()
        records = await self.writer.read(self.writer.store.list_clusters)
        self.entries.clear()
        for rec in records:
            self.entries[rec.name] = ClusterEntry(rec, last_seen=now)
            if persist and rec.state not in (ClusterState.JOINING, ClusterState.UNKNOWN):
                # Every agent gets a full grace period to reconnect after a hub restart.
                await self._update(rec.name, state=ClusterState.UNKNOWN.value)
            self._sync_fleet(rec.name)

    # -- REST side -------------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> JoinResponse:
        """Create the cluster in state Joining and issue its one-time join token."""
        if req.name in self.entries:
            raise Conflict(
                f"cluster {req.name!r} already exists; remove it first to join it again"
            )
        token = new_join_token()
        now = utcnow()
        expires = now + timedelta(seconds=req.token_ttl_seconds)
        rec = ClusterRecord(
            name=req.name,
            state=ClusterState.JOINING.value,
            labels=dict(req.labels),
            weight=req.weight,
            headroom=req.headroom,
            cordoned=False,
            created_at=now,
        )
        store = self.writer.store

        def create() -> None:
            store.create_cluster(rec)
            store.add_join_token(rec.name, hash_secret(token), expires)

        await self.writer.call(create)
        self.entries[rec.name] = ClusterEntry(rec, last_seen=time.monotonic())
        self._sync_fleet(rec.name)
        self.on_change(rec.name, "Joined", "joined; waiting for its agent")
        return self._join_response(rec.name, token, expires)

    async def issue_token(self, name: str, ttl_seconds: int) -> JoinResponse:
        """A new one-time join token for an existing cluster (credential rotation): the
        agent that registers with it replaces the old one; no task is touched."""
        self.get(name)
        token = new_join_token()
        expires = utcnow() + timedelta(seconds=ttl_seconds)
        await self.writer.call(self.writer.store.add_join_token, name, hash_secret(token),
                               expires)
        return self._join_response(name, token, expires)

    def _join_response(self, name: str, token: str, expires: datetime) -> JoinResponse:
        command = (
            f"fuyao-agent --hub {self.config.agent_address} --cluster {name} "
            f"--token-file {name}.token"
        )
        if self.ca_cert:
            command += (f" --ca-cert {name}-ca.crt"
                        f" --register {self.config.register_address}")
        return JoinResponse(cluster=name, token=token, expires_at=expires,
                            agent_command=command, ca_cert=self.ca_cert)

    def get(self, name: str) -> ClusterEntry:
        """The entry for ``name`` or NotFound."""
        entry = self.entries.get(name)
        if entry is None:
            raise NotFound(f"cluster {name!r} not found")
        return entry

    async def set_cordoned(self, name: str, cordoned: bool) -> ClusterEntry:
        """Cordon (block new placements) or uncordon a cluster."""
        entry = self.get(name)
        if entry.record.cordoned != cordoned:
            await self._update(name, cordoned=cordoned)
        return entry

    async def remove(self, name: str) -> None:
        """Forget the cluster: its credential stops working at once."""
        self.get(name)
        await self.writer.call(self.writer.store.delete_cluster, name)
        del self.entries[name]
        self._credentials = {h: c for h, c in self._credentials.items() if c != name}
        self.fleet.remove_cluster(name)
        self.on_change(name, "Removed", "removed")

    # -- agent side ------------------------------------------------------------------------

    def get_for_token(self, cluster: str) -> ClusterEntry:
        """The cluster a join token names, or Unauthenticated (no hint that it exists)."""
        entry = self.entries.get(cluster)
        if entry is None:
            raise Unauthenticated(f"join token is not valid for cluster {cluster!r}")
        return entry

    def forget_credentials(self, cluster: str) -> None:
        """Drop the cluster's cached bearer credential (it enrolled for a certificate)."""
        self._credentials = {h: c for h, c in self._credentials.items() if c != cluster}

    async def register(self, cluster: str, token: str) -> str:
        """Trade a join token for a credential (the token works once)."""
        self.get_for_token(cluster)
        credential = new_credential()
        digest = hash_secret(credential)
        store = self.writer.store

        def consume() -> None:
            store.consume_join_token(cluster, hash_secret(token), utcnow())
            store.set_credential(cluster, digest)

        await self.writer.call(consume)
        self._credentials = {h: c for h, c in self._credentials.items() if c != cluster}
        self._credentials[digest] = cluster
        return credential

    async def authenticate(self, credential: str) -> str:
        """The cluster a credential belongs to, or Unauthenticated."""
        digest = hash_secret(credential)
        cluster = self._credentials.get(digest)
        if cluster is None:
            cluster = await self.writer.read(self.writer.store.cluster_for_credential, digest)
            if cluster is not None:
                self._credentials[digest] = cluster
        if cluster is None or cluster not in self.entries:
            raise Unauthenticated("agent credential is not valid (cluster removed or re-joined?)")
        return cluster

    async def connected(self, name: str, backend: str, labels: dict[str, str]) -> None:
        """An agent opened its stream: the cluster is Ready."""
        entry = self.get(name)
        entry.connected = True
        entry.last_seen = time.monotonic()
        entry.not_ready_since = None
        # Only the join's labels are stored; the agent's come with every Hello.
        entry.agent_labels = dict(labels)
        await self._update(name, state=ClusterState.READY.value, backend=backend,
                           last_heartbeat=utcnow())

    async def heartbeat(self, name: str) -> None:
        """Any sign of life from the agent; a lost cluster comes back to Ready."""
        entry = self.entries.get(name)
        if entry is None:
            return
        entry.last_seen = time.monotonic()
        if entry.state in (ClusterState.UNKNOWN, ClusterState.NOT_READY):
            entry.not_ready_since = None
            log.info("cluster %s is back: Ready", name)
            await self._update(name, state=ClusterState.READY.value, last_heartbeat=utcnow())

    async def disconnected(self, name: str) -> None:
        """The stream ended: Unknown at once (NotReady follows when the grace passes)."""
        entry = self.entries.get(name)
        if entry is None:
            return
        entry.connected = False
        if entry.state == ClusterState.READY:
            await self._update(name, state=ClusterState.UNKNOWN.value)

    async def tick(self) -> list[str]:
        """Advance health states by elapsed time; returns clusters due for eviction."""
        now = time.monotonic()
        timings = self.config.timings
        due: list[str] = []
        for name, entry in list(self.entries.items()):
            silent = now - entry.last_seen
            if entry.state == ClusterState.READY and silent > timings.unknown_after:
                log.warning("cluster %s: no heartbeat for %.0fs: Unknown", name, silent)
                await self._update(name, state=ClusterState.UNKNOWN.value)
            if entry.state == ClusterState.UNKNOWN and silent > timings.not_ready_after:
                log.warning("cluster %s: no heartbeat for %.0fs: NotReady", name, silent)
                entry.not_ready_since = now
                await self._update(name, state=ClusterState.NOT_READY.value)
            if (
                entry.state == ClusterState.NOT_READY
                and entry.not_ready_since is not None
                and now - entry.not_ready_since > timings.eviction_timeout
                # Fencing: by now the member has stopped its restartable copies itself.
                and silent > timings.member_lease + timings.failover_margin
            ):
                due.append(name)
        return due

    def next_eviction(self, now: float) -> float | None:
        """The earliest monotonic time from ``now`` on at which a NotReady cluster falls due
        for eviction in ``tick`` (its NotReady time plus the eviction timeout, and its
        silence past lease + margin), or None. The monitor wakes for it (``hub.loops``)."""
        timings = self.config.timings
        due = [max(e.not_ready_since + timings.eviction_timeout,
                   e.last_seen + timings.member_lease + timings.failover_margin)
               for e in self.entries.values()
               if e.state == ClusterState.NOT_READY and e.not_ready_since is not None]
        return min((d for d in due if d >= now), default=None)

    async def save_heartbeats(self) -> None:
        """Persist last-heartbeat times of connected clusters (not on every beat)."""
        now = utcnow()
        names = [n for n, e in self.entries.items() if e.connected]
        await self.writer.call(self.writer.store.touch_clusters, names, now)
        for name in names:
            entry = self.entries.get(name)    # joins and removals go on meanwhile
            if entry is not None:
                entry.record = replace(entry.record, last_heartbeat=now)

    async def set_taints(self, name: str, taints: list[Taint]) -> ClusterEntry:
        """Replace a cluster's taints (new placements only: nothing running moves)."""
        self.get(name)
        await self._update(name, taints=[t.model_dump() for t in taints])
        return self.get(name)

    # -- views -----------------------------------------------------------------------------

    def view(self, name: str, tasks: int = 0) -> ClusterView:
        """The API's view of one cluster."""
        entry = self.get(name)
        rec = entry.record
        state = ClusterState(rec.state)
        if rec.cordoned and state == ClusterState.READY:
            state = ClusterState.CORDONED
        summary = self.fleet.summary(name)
        nodes = summary.pop("nodes", 0)
        return ClusterView(
            name=rec.name, state=state, labels=entry.labels, weight=rec.weight,
            headroom=rec.headroom, cordoned=rec.cordoned, last_heartbeat=rec.last_heartbeat,
            joined_at=rec.created_at, backend=rec.backend, nodes=nodes, gpus=summary,
            gpus_unschedulable=self.fleet.unschedulable_devices(name), tasks=tasks,
            taints=list(taints_of(rec)),
        )

    # -- internals -------------------------------------------------------------------------

    async def _update(self, name: str, **changes: object) -> None:
        rec = await self.writer.call(self.writer.store.update_cluster, name, **changes)
        entry = self.entries.get(name)
        if entry is not None:
            entry.record = rec
            self._sync_fleet(name)
        if "cordoned" in changes:
            self.on_change(name, "Cordoned" if rec.cordoned else "Uncordoned",
                           "new placements blocked" if rec.cordoned else "placements allowed")
        if "state" in changes:
            self.on_change(name, rec.state, f"cluster is {rec.state}")

    def _sync_fleet(self, name: str) -> None:
        entry = self.entries[name]
        rec = entry.record
        self.fleet.upsert_cluster(name, labels=entry.labels, weight=rec.weight,
                                  headroom=rec.headroom, state=ClusterState(rec.state),
                                  cordoned=rec.cordoned, taints=taints_of(rec))


def taints_of(rec: ClusterRecord) -> tuple[Taint, ...]:
    """A stored cluster's taints."""
    return tuple(Taint.model_validate(t) for t in rec.taints)
