"""``Hub``: the composition root of one hub process, and the operations the REST API calls.

``hub.server`` builds one ``Hub`` from a ``HubConfig``, calls ``start()`` (open and migrate
the store, rebuild clusters and active tasks, start the loops) and serves it over REST and
gRPC. Views for the API combine the store (history, terminal tasks) with the in-memory state
of active tasks, which is always at least as fresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator

from fuyao.aio import cancel_and_wait
from fuyao.errors import FuyaoError
from fuyao.spec import (
    CapacityRow,
    ClusterScore,
    ClusterView,
    JoinRequest,
    JoinResponse,
    TaskEvent,
    TaskSpec,
    TaskState,
    TaskView,
)
from hub.activetask import ActiveTask
from hub.agentpki import AgentCertificates
from hub.auth.actor import CURRENT, Actor, AuditNotes
from hub.auth.service import AuthService
from hub.catalogs import OperatedCatalog
from hub.clusters import ClusterManager
from hub.config import HubConfig, prepare_home
from hub.dag import Dependencies
from hub.events import EventHub
from hub.explain import Explainer
from hub.fleet import FleetView
from hub.ha import Leadership, ReadCache
from hub.ha.sharedca import share_ca
from hub.loops import Monitor, PlacementLoop, send_all
from hub.metrics import Metrics
from hub.pki import HubPKI, default_hosts, ensure_pki
from hub.placement.profile import DEFAULT_PROFILE, Profile
from hub.placement.variants import Schedulers
from hub.planning.history import CapacityHistory
from hub.planning.planner import Planner
from hub.planning.quota import queue_quota
from hub.profiles import ProfileBook
from hub.queueing import Queueing, QueueingConfig
from hub.retention import Retention
from hub.scorerows import expand as expand_scores
from hub.sessions import Sessions
from hub.store import Store, TaskRecord
from hub.store.records import AuditRecord
from hub.taskbook import TaskBook
from hub.writer import StoreWriter

log = logging.getLogger(__name__)


class Hub:
    """One hub: store, fleet view, clusters, tasks, loops."""

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self.store = Store(config.store_url)
        self.writer = StoreWriter(self.store)
        self.catalog = OperatedCatalog(config.catalog)
        self.catalog.install()
        self.fleet = FleetView()
        profile = Profile.from_config(config.profile) if config.profile else DEFAULT_PROFILE
        self.schedulers = Schedulers(self.fleet, profile,
                                     headroom_priority=config.headroom_priority)
        self.scheduler = self.schedulers.base
        self.metrics = Metrics()
        self.sessions = Sessions()
        self.clusters = ClusterManager(config, self.writer, self.fleet)
        self.tasks = TaskBook(self.writer, self.fleet)
        self.deps = Dependencies(self.tasks)
        self.profiles = ProfileBook(self.writer, self.tasks)
        self.queueing = Queueing(self.tasks, self.fleet, profile,
                                 headroom_priority=config.headroom_priority,
                                 config=QueueingConfig.from_mapping(config.queueing))
        self.explainer = Explainer(self.schedulers, self.tasks, self.deps, self.queueing)
        self.placement = PlacementLoop(self.tasks, self.scheduler, self.sessions, self.metrics,
                                       config.timings.placement_interval, self.deps,
                                       self.queueing, self.schedulers.for_weights)
        self.monitor = Monitor(self.clusters, self.tasks, self.sessions, self.placement,
                               config.timings, self.audit)
        self.auth = AuthService(self.writer, config.auth, config.api_rate_limit,
                                config.api_rate_burst, self.write_audit)
        self.retention = Retention(self.writer, self.tasks, config.retain_ended, self.audit)
        self.planning = Planner(self.fleet, profile, self.tasks.active,
                                headroom_priority=config.headroom_priority)
        self.planning.profiles = self.profiles.resolve
        self.planning.quota = queue_quota(self.queueing)
        self.history = CapacityHistory(self.planning, self.writer, config.timings)
        self._loops: list[asyncio.Task[None]] = []
        self.pki: HubPKI | None = None
        self.agent_certs: AgentCertificates | None = None   # with TLS: agents' certificates
        self.started = False
        self.metrics.on_scrape(self._refresh_gauges)
        self.ha = Leadership(config, self.metrics,
                             ReadCache(self.clusters, self.tasks, self.profiles.load))
        self.events = EventHub(config.redis_url, self.metrics, self.tasks, self.ha.reads.invalidate)
        self.events.attach(self.store, self.clusters)

    async def start(self) -> None:
        """Migrate the store, share the agent CA, then lead at once or wait as a standby."""
        prepare_home(self.config)
        self.events.start()
        version = await self.writer.call(self.store.migrate)
        leading = await self.ha.open()
        if self.config.agent_tls:
            assert self.ha.lease is not None
            await asyncio.to_thread(share_ca, self.ha.lease.engine, self.config.home)
            hosts = default_hosts(self.config.host, self.config.advertise)
            self.pki = await asyncio.to_thread(ensure_pki, self.config.home, hosts)
            self.clusters.ca_cert = self.pki.ca_cert.decode()
            self.agent_certs = AgentCertificates(self.pki, self.writer,
                                                 self.config.agent_cert_lifetime,
                                                 self.config.agent_cert_grace)
        log.info("store at schema version %d; this hub is %s", version,
                 "the leader" if leading else "a standby")
        if leading:
            await self.lead()
        self._loops.append(asyncio.create_task(self.ha.run(self.lead), name="leadership"))

    async def lead(self) -> None:
        """Won the lease: fence every write with the epoch, rebuild the state, place."""
        self.store.fence = self.ha.fence()
        async with self.ha.reads.lock:
            self.tasks.reset()
            await self.clusters.load()
            await self.queueing.load()
            count = await self.tasks.load()
            await self.placement.division.load()
            await self.deps.load()
            await self.profiles.load()
        self.ha.rebuilt = True          # agents and writes are taken from here on
        await self.auth.start(self.config.home)
        log.info("leading epoch %s: %d clusters, %d active tasks", self.ha.epoch,
                 len(self.clusters.entries), count)
        self._loops += [asyncio.create_task(self.placement.run(), name="placement"),
                        asyncio.create_task(self.monitor.run(), name="monitor"),
                        asyncio.create_task(self.history.run(), name="capacity-history"),
                        asyncio.create_task(self.retention.run(), name="retention")]
        self.started = True

    async def stop(self) -> None:
        """Stop the loops and close the store (queued writes finish first)."""
        await cancel_and_wait(self._loops)
        for name in list(self.clusters.entries):
            self.sessions.close_cluster(name)
        try:
            await self.writer.apply()   # commits after every write queued before it
        except Exception:
            log.exception("writes queued at stop could not be committed")
        await self.ha.close()
        await self.events.close()
        self.writer.close()
        self.store.close()

    # -- clusters -----------------------------------------------------------------------------

    async def join_cluster(self, req: JoinRequest) -> JoinResponse:
        """Create a cluster and its join token."""
        async with self.audited("cluster.join", req.name):
            return await self.clusters.join(req)

    def cluster_views(self) -> list[ClusterView]:
        """Every cluster, by name."""
        counts = Counter(t.cluster for t in self.tasks.active.values() if t.cluster)
        return [self.clusters.view(n, counts[n]) for n in sorted(self.clusters.entries)]

    def cluster_view(self, name: str) -> ClusterView:
        """One cluster (NotFound if unknown)."""
        return self.clusters.view(name, len(self.tasks.on_cluster(name)))

    async def set_cordoned(self, name: str, cordoned: bool) -> ClusterView:
        """Cordon or uncordon; uncordoning may let queued tasks in."""
        async with self.audited("cluster.cordon" if cordoned else "cluster.uncordon", name):
            await self.clusters.set_cordoned(name, cordoned)
        if not cordoned:
            self.placement.poke()
        return self.cluster_view(name)

    async def remove_cluster(self, name: str) -> dict[str, object]:
        """Remove a cluster; its tasks go back to the queue, never lost."""
        async with self.audited("cluster.remove", name) as outcome:
            # Cordoned first: a placement cycle while its tasks are re-queued must not put
            # them (or others) back on it, leaving them Placed on a cluster that is gone.
            await self.clusters.set_cordoned(name, True)
            commands = await self.tasks.requeue_cluster(name, f"cluster {name} was removed")
            send_all(self.sessions, commands)
            revoked = await self.agent_certs.revoke(name) if self.agent_certs else 0
            await self.clusters.remove(name)
            self.sessions.close_cluster(name)    # after removal: its stream ends UNAUTHENTICATED
            outcome.append(f"{len(commands)} tasks requeued")
            if revoked:
                outcome.append(f"{revoked} agent certificate(s) revoked")
        self.placement.poke()
        return {"removed": name, "requeued": len(commands)}

    def capacity(self, cluster: str | None = None) -> list[CapacityRow]:
        """Capacity rows, per cluster and accelerator model."""
        if cluster is not None:
            self.clusters.get(cluster)
        return self.fleet.capacity(cluster)

    # -- tasks ----------------------------------------------------------------------------------

    async def submit(self, specs: list[TaskSpec]) -> list[TaskView]:
        """Store tasks as Queued (all or none), then wake the placement loop."""
        names = ",".join(s.name for s in specs[:20]) + ("..." if len(specs) > 20 else "")
        async with self.audited("task.submit", names) as audit:
            specs = [self.resolve(s) for s in specs]
            await self.deps.check(specs)
            self.queueing.check_submit(specs)
            records = await self.tasks.submit(specs, owner=CURRENT.get().name,
                                              audit=audit.claim())
        self.placement.poke(settle=False)
        return [self._view(self.tasks.active.get(r.id), r) for r in records]

    def resolve(self, spec: TaskSpec) -> TaskSpec:
        """The spec as it will be stored (its ComputeProfile applied), or InvalidInput."""
        resolved = self.profiles.resolve(spec)
        self.schedulers.check(resolved.score_weights)
        return resolved

    async def list_tasks(self, state: str | None = None, cluster: str | None = None, *,
                         queues: list[str] | None = None, after: int = 0,
                         limit: int | None = None) -> tuple[list[TaskView], int | None]:
        """A page of tasks in submission order (active ones as the hub knows them now) and
        the ``seq`` to continue after, None on the last page. ``queues``: only those.

        Memory is the truth for tasks that have not ended (the store may lag it by a queued
        write), so a filter on an active state is answered from memory alone.
        """
        if state is not None and not TaskState(state).terminal:
            active = sorted(self.tasks.active.values(), key=lambda t: t.seq)
            chosen = [t for t in active if t.state == state and t.seq > after
                      and (cluster is None or t.cluster == cluster)
                      and (queues is None or t.queue in queues)]
            page = chosen if limit is None else chosen[:limit]
            more = limit is not None and len(chosen) > limit
            return [self._view(t, t.to_record()) for t in page], page[-1].seq if more else None
        records = await self.writer.read(self.store.list_tasks, state=state, cluster=cluster,
                                         queues=queues, after_seq=after, limit=limit)
        views = []
        for rec in records:
            task = self.tasks.active.get(rec.id)
            view = self._view(task, rec)
            if (state is None or view.state == state) and (cluster is None
                                                           or view.cluster == cluster):
                views.append(view)
        full = limit is not None and len(records) == limit
        return views, records[-1].seq if full else None

    async def describe_task(self, name: str) -> TaskView:
        """One task with its event timeline, placement scores and rejection reasons."""
        rec = await self.writer.read(self.store.get_task, name)
        events = await self.writer.read(self.store.task_events, rec.id)
        view = self._view(self.tasks.active.get(rec.id), rec)
        view.parts = await self.placement.division.stored_views(rec)
        view.events = [TaskEvent(at=e.at, kind=e.kind, message=e.message, cluster=e.cluster,
                                 generation=e.generation) for e in events]
        return view

    async def cancel_task(self, name: str) -> TaskView:
        """Cancel a task; its member copy is told to stop."""
        async with self.audited("task.cancel", name):
            record, commands = await self.tasks.cancel(name)
        send_all(self.sessions, commands)
        self.placement.poke()
        return self._view(None, record)

    def _view(self, task: ActiveTask | None, rec: TaskRecord) -> TaskView:
        """An active task as the hub knows it now (read off the task itself: no spec dumped
        and parsed again), else the stored record."""
        src: ActiveTask | TaskRecord = task if task is not None else rec
        spec = task.spec if task is not None else TaskSpec.model_validate(rec.spec)
        place = self.queueing.place_of(task) if task is not None else None
        return TaskView(
            id=src.id, name=src.name, state=TaskState(src.state), cluster=src.cluster,
            node=src.node, generation=src.generation, queue=src.queue, priority=src.priority,
            message=src.message, spec=spec, owner=src.owner,
            created_at=src.created_at, updated_at=src.updated_at, reasons=dict(src.reasons),
            scores=[ClusterScore.model_validate(s) for s in expand_scores(src.scores)],
            eviction_rate=self.config.timings.eviction_rate,
            queue_position=place[0] if place else None,
            held_by=place[1] if place else None,
            parts=self.placement.division.views(src.id),
            parent=src.name.rsplit(".", 1)[0] if src.parent else None,
        )

    # -- misc -----------------------------------------------------------------------------------

    async def write_audit(self, record: AuditRecord) -> None:
        """Append one record to the audit log."""
        await self.writer.call(self.store.audit, record)

    async def audit(self, action: str, target: str, result: str,
                    actor: Actor | None = None) -> None:
        """Record a mutation in the audit log, by ``actor`` or the request's own
        (``system`` outside a request)."""
        await self.write_audit((actor or CURRENT.get()).record(action, target, result))

    @contextlib.asynccontextmanager
    async def audited(self, action: str, target: str,
                      actor: Actor | None = None) -> AsyncIterator[AuditNotes]:
        """Audit the mutation in the block: ``ok`` (plus any notes the block appends to the
        yielded list; written by the block's own store call if it ``claim``s it) or
        ``refused: <message>`` when it raises."""
        notes = AuditNotes(actor or CURRENT.get(), action, target)
        try:
            yield notes
        except Exception as exc:
            result = (f"refused: {exc.message}" if isinstance(exc, FuyaoError)
                      else f"error: {type(exc).__name__}")
            try:
                await self.audit(action, target, result, actor)
            except Exception:   # the store may be what failed: keep the original error
                log.exception("could not audit %s %s: %s", action, target, result)
            raise
        if not notes.claimed:
            await self.write_audit(notes.success())

    def _refresh_gauges(self) -> None:
        self.metrics.tasks.clear()
        for state, n in self.tasks.active.states().items():   # kept as tasks change: no scan
            self.metrics.tasks.labels(state=state.value).set(n)
        self.metrics.parked.set(len(self.queueing.parking))
        self.metrics.clusters.clear()
        for name in sorted(self.clusters.entries):   # states only: no task counts (a scan)
            self.metrics.clusters.labels(state=self.clusters.view(name).state.value).inc()
