"""The agent channel: gRPC ``AgentChannel`` service on port 8849.

How a stream's cluster is known depends on the listener (``Auth``): on the agent port with
TLS, from the client certificate the TLS layer verified (``hub.agentpki`` checks its serial,
revocation, expiry; ``Renew`` issues the next one there); on an ``--agent-insecure`` port, or
the deprecated bearer listener, from the bearer credential in the ``authorization`` metadata
(``Register`` trades a join token for one there; on the bearer listener each use warns,
is audited and counted). Never from a message field. ``Connect`` is the one long-lived
stream per agent: the agent sends Hello, a full Inventory, then deltas,
heartbeats and task reports; the hub answers with PlaceTask / CancelTask commands and asks
for a resync when a delta's sequence number shows a gap. Messages of one stream are handled
strictly in order, each one whole even if the stream ends meanwhile. Error mapping:
``FuyaoError.grpc_code`` becomes the status of a refused call; a message the hub cannot apply
ends the stream UNAVAILABLE (store outage) or INTERNAL, with the reason, and the agent's
reconnect and full inventory repeat what was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence

import grpc

from fuyao.errors import FuyaoError, InvalidInput, PermissionDenied, Transient, Unauthenticated
from fuyao.labelsets import FEATURE_LABEL_SETS, expand
from fuyao.wire.v1 import agent_pb2 as pb
from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from hub import heap
from hub.agentpki import AgentCertificates
from hub.auth.actor import agent_actor
from hub.core import Hub
from hub.endings import Endings, started
from hub.loops import send_all
from hub.sessions import AgentSession, pack

log = logging.getLogger(__name__)
LEADER_METADATA = "fuyao-leader"   # member_agent.hubs reads it (no import between packages)
FEATURES_METADATA = "fuyao-features"  # what this hub reads beyond the first protocol
FEATURE_BATCH = "batch"            # AgentBatch / HubBatch (member_agent.connection says it too)
FEATURE_COLUMNS = "device-columns"  # a node's devices as DeviceColumns (agents send them then)
# what this hub announces, comma-separated (label-sets: fuyao.labelsets)
FEATURES = f"{FEATURE_BATCH},{FEATURE_COLUMNS},{FEATURE_LABEL_SETS}"
MAX_BATCH = 1000                   # messages per HubBatch, and per AgentBatch accepted


def _bearer(context: grpc.aio.ServicerContext) -> str:  # type: ignore[type-arg]
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer "):]
    raise Unauthenticated("missing 'authorization: Bearer <credential>' metadata")


class Auth(enum.Enum):
    """How a listener's agents prove their cluster."""

    CERTIFICATE = "certificate"      # mutual TLS: the client certificate (the agent port)
    BEARER = "bearer"                # --agent-insecure: no TLS, so the bearer credential
    BEARER_DEPRECATED = "bearer-deprecated"   # the old credential, for one more release


DEPRECATION = ("the bearer agent credential is deprecated and will be refused by the next "
               "release: upgrade the agent, which trades it for a client certificate")


async def abort(context: grpc.aio.ServicerContext, exc: FuyaoError) -> None:  # type: ignore[type-arg]
    await context.abort(getattr(grpc.StatusCode, exc.grpc_code), exc.message)


async def refuse_standby(hub: Hub, context: grpc.aio.ServicerContext) -> None:  # type: ignore[type-arg]
    """A standby (or a new leader still rebuilding its view) takes no agents: UNAVAILABLE,
    naming the leader's agent address in the ``fuyao-leader`` trailing metadata (the agent
    dials it next)."""
    refusal = hub.ha.refusal("take agent streams")
    leader = refusal.leader.agent_address if refusal.leader else None
    await context.abort(grpc.StatusCode.UNAVAILABLE, refusal.message,
                        trailing_metadata=((LEADER_METADATA, leader),) if leader else ())


class AgentChannel(pb_grpc.AgentChannelServicer):
    """The hub side of the agent protocol."""

    def __init__(self, hub: Hub, auth: Auth = Auth.BEARER,
                 certificates: AgentCertificates | None = None,
                 origin: Callable[[str], str] = str) -> None:
        self.hub = hub
        self.auth = auth
        self.certificates = certificates
        self.origin = origin      # a relayed peer -> its real address (``hub.agentgate``)
        if auth is Auth.CERTIFICATE and certificates is None:
            raise ValueError("a certificate listener needs the agent certificates")

    async def Register(
        self, request: pb.RegisterRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.RegisterResponse:
        """Trade a join token for a credential."""
        self.origin(context.peer())        # it reached the hub (not a refused handshake)
        if self.auth is Auth.CERTIFICATE:
            await abort(context, PermissionDenied(
                "this port takes agents with a client certificate: enroll on the hub's "
                "registration port (fuyao-agent --register HOST:8850)"))
        if not self.hub.ha.serving:
            await refuse_standby(self.hub, context)
        try:
            credential = await self.hub.clusters.register(request.cluster, request.token)
        except FuyaoError as exc:
            log.warning("register %s refused: %s", request.cluster, exc.message)
            await self.hub.audit("agent.register", request.cluster, f"refused: {exc.message}",
                                 agent_actor("", context.peer()))
            await abort(context, exc)
            raise  # unreachable: abort raises
        await self.hub.audit("agent.register", request.cluster, "ok",
                             agent_actor(request.cluster, context.peer()))
        log.info("cluster %s registered its agent", request.cluster)
        return pb.RegisterResponse(cluster=request.cluster, credential=credential)

    async def Connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage],
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.HubMessage]:
        """Serve one agent stream until it or the hub ends it."""
        source = self.origin(context.peer())
        if not self.hub.ha.serving:
            await refuse_standby(self.hub, context)
        try:
            cluster = await self._identify(context, source)
        except FuyaoError as exc:
            log.warning("agent stream from %s refused: %s", source, exc.message)
            await self.hub.audit("agent.connect", "", f"refused: {exc.message}",
                                 agent_actor("", source))
            await abort(context, exc)
            return
        # Initial metadata tells the agent it was accepted; it writes nothing before it (a
        # write racing a refusal would turn UNAUTHENTICATED into INTERNAL, grpc/grpc#36066).
        # The agent renews its member's lease from when it opened this stream: count that
        # as news, so the hub's failover deadline stays behind the member's lease.
        self.hub.clusters.get(cluster).last_seen = time.monotonic()
        lease = self.hub.config.timings.member_lease
        await context.send_initial_metadata((("fuyao-cluster", cluster),
                                             ("fuyao-lease-seconds", repr(lease)),
                                             (FEATURES_METADATA, FEATURES)))
        session = self.hub.sessions.open(cluster, source)
        log.info("cluster %s: agent stream open", cluster)
        reader = asyncio.create_task(self._read(session, request_iterator))
        failure: FuyaoError | None = None
        try:
            while True:
                getter = asyncio.create_task(session.outbox.get())
                done, _ = await asyncio.wait({getter, reader},
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    break
                # Everything queued meanwhile goes too: one HubBatch to an agent that reads
                # them, else one message after the other without waiting again.
                messages, ending = session.drain(getter.result(), MAX_BATCH)
                packed = pack(messages, session.batches, self.hub.config.agent_message_limit)
                for out in packed.messages:
                    yield out
                self._sent(packed.sent)
                if packed.oversized:
                    await self._unsendable(cluster, packed.oversized)
                if ending:
                    break
        finally:
            reader.cancel()
            current = self.hub.sessions.close(session)
            with contextlib.suppress(asyncio.CancelledError):
                failure = await reader    # the message being applied finishes first
            if current:
                await self.hub.clusters.disconnected(cluster)
            log.info("cluster %s: agent stream closed", cluster)
        if cluster not in self.hub.clusters.entries:
            await abort(context, Unauthenticated(f"cluster {cluster} was removed"))
        if session.revoked is not None:
            await abort(context, Unauthenticated(session.revoked))
        if failure is not None:     # the agent learns why; its next inventory repeats it all
            await abort(context, failure)

    async def _identify(self, context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
                        source: str) -> str:
        """The cluster of the caller, by this listener's kind of proof."""
        if self.auth is Auth.CERTIFICATE:
            assert self.certificates is not None
            try:
                peer = await self.certificates.identify(context.auth_context(),
                                                        self.hub.clusters.entries)
            except FuyaoError:
                self.hub.metrics.agent_auth.labels(method="certificate", result="refused").inc()
                raise
            self.hub.metrics.agent_auth.labels(method="certificate", result="ok").inc()
            return peer.cluster
        method = "bearer"
        try:
            cluster = await self.hub.clusters.authenticate(_bearer(context))
        except FuyaoError:
            self.hub.metrics.agent_auth.labels(method=method, result="refused").inc()
            raise
        self.hub.metrics.agent_auth.labels(method=method, result="ok").inc()
        if self.auth is Auth.BEARER_DEPRECATED:
            log.warning("cluster %s connected with a bearer credential from %s: %s", cluster,
                        source, DEPRECATION)
            await self.hub.audit("agent.connect", cluster, f"ok: {DEPRECATION}",
                                 agent_actor(cluster, source))
        return cluster

    async def Renew(
        self, request: pb.RenewRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.CertificateResponse:
        """The next certificate of the caller's cluster (mutual TLS only)."""
        source = self.origin(context.peer())
        if self.auth is not Auth.CERTIFICATE or self.certificates is None:
            await abort(context, PermissionDenied(
                "certificates are renewed on the mutual-TLS agent port only"))
            raise AssertionError("unreachable: abort raises")
        if not self.hub.ha.serving:
            await refuse_standby(self.hub, context)
        try:
            peer = await self.certificates.identify(context.auth_context(),
                                                    self.hub.clusters.entries)
            issued = await self.certificates.record(
                self.certificates.sign(peer.cluster, request.csr), replace=False)
        except FuyaoError as exc:
            log.warning("certificate renewal from %s refused: %s", source, exc.message)
            await self.hub.audit("agent.renew", "", f"refused: {exc.message}",
                                 agent_actor("", source))
            await abort(context, exc)
            raise   # unreachable: abort raises
        await self.hub.audit("agent.renew", peer.cluster,
                             f"ok: certificate {issued.serial} until "
                             f"{issued.expires_at.isoformat()} (was {peer.serial})",
                             agent_actor(peer.cluster, source))
        return pb.CertificateResponse(**self.certificates.response_fields(issued))

    async def _unsendable(self, cluster: str, places: list[tuple[pb.PlaceTask, int]]) -> None:
        """Fail tasks whose PlaceTask alone exceeds ``agent_message_limit``: sent, it would
        exceed the agent's receive limit and break its stream on every retry."""
        limit = self.hub.config.agent_message_limit
        for place, size in places:
            reason = (f"the hub cannot send this task to {cluster}: its PlaceTask is {size} "
                      f"bytes encoded, over the {limit}-byte limit of one agent-stream "
                      "message (agent_message_limit); make its command, image or selector "
                      "smaller")
            log.warning("task %s: %s", place.name, reason)
            self.hub.metrics.unsendable_tasks.inc()
            report = pb.TaskReport(task_id=place.task_id, generation=place.generation,
                                   phase=pb.TASK_PHASE_FAILED, reason=reason,
                                   at_unix_ms=int(time.time() * 1000))
            send_all(self.hub.sessions, await self.hub.tasks.report(cluster, report))
        self.hub.placement.poke()

    def _sent(self, messages: list[pb.HubMessage]) -> None:
        stages = self.hub.metrics.stages
        for msg in messages:
            if msg.HasField("place"):
                stages.sent(msg.place.task_id)

    async def _read(self, session: AgentSession,
                    messages: AsyncIterator[pb.AgentMessage]) -> FuyaoError | None:
        """Handle the stream's messages in order; the error that ended it, if one did."""
        endings = Endings()     # Succeeded / Failed reports whose commits are in flight
        try:
            try:
                async for msg in messages:
                    # Applied whole even if the stream ends meanwhile: a transition
                    # cancelled after its write but before its in-memory step would leave
                    # them disagreeing (an ending in flight is a task of its own).
                    handling = asyncio.ensure_future(self.handle(session, msg, endings))
                    try:
                        await asyncio.shield(handling)
                    except asyncio.CancelledError:
                        await handling
                        raise
            finally:
                if endings:
                    await asyncio.shield(endings.drain())
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError:
            pass
        except FuyaoError as exc:
            # Not the error's own code: NOT_FOUND or INVALID_ARGUMENT would stop the agent
            # for good, where a reconnect and a fresh inventory is the cure.
            log.warning("cluster %s: ending the stream: %s", session.cluster, exc.message)
            return exc if isinstance(exc, Transient) else FuyaoError(exc.message)
        except Exception as exc:
            log.exception("cluster %s: error handling agent message", session.cluster)
            return FuyaoError(f"hub error handling an agent message: {type(exc).__name__}")
        return None

    async def _forged(self, cluster: str, report: pb.TaskReport, source: str = "") -> bool:
        """True (and audited) for a status of a task this cluster was never given: another
        cluster's task. Changes nothing; a stale copy of a task that moved away is not forged
        (the hub cancels it)."""
        task = self.hub.tasks.active.get(report.task_id)
        if task is None or task.cluster in (None, cluster):
            return False
        placed = await self.hub.writer.read(self.hub.store.placements, report.task_id)
        if any(p.cluster == cluster for p in placed):
            return False
        log.warning("cluster %s reported task %s, which was never placed there: refused",
                    cluster, task.name)
        await self.hub.audit("agent.report", task.name,
                             f"refused: cluster {cluster} reported a status for task "
                             f"{task.name}, which is placed on {task.cluster}",
                             agent_actor(cluster, source))
        return True

    async def handle(self, session: AgentSession, msg: pb.AgentMessage,
                     endings: Endings | None = None) -> None:
        """Apply one agent message (or each message of an ``AgentBatch``), in stream order.

        ``endings``: the stream's endings in flight (``_read``), which may outlast this
        message; without it every ending is durable when this returns.
        """
        own = endings is None
        endings = Endings() if endings is None else endings
        endings.reap()
        kind = msg.WhichOneof("msg") or "empty"
        await self.hub.clusters.heartbeat(session.cluster)
        try:
            if kind != "batch":
                await self._ordered(session, msg, kind, endings)
                return
            if len(msg.batch.messages) > MAX_BATCH:
                raise InvalidInput(f"an AgentBatch carries at most {MAX_BATCH} messages, "
                                   f"not {len(msg.batch.messages)}")
            for inner in msg.batch.messages:
                inner_kind = inner.WhichOneof("msg") or "empty"
                if inner_kind == "batch":
                    raise InvalidInput("an AgentBatch cannot hold another batch")
                await self._ordered(session, inner, inner_kind, endings)
        finally:
            if own:
                await endings.drain()

    async def _ordered(self, session: AgentSession, msg: pb.AgentMessage, kind: str,
                       endings: Endings) -> None:
        """Apply one message in stream order; an ending goes on while the next ones are
        applied (``hub.endings``), what could depend on one in flight waits for them."""
        if kind == "task" and msg.task.task_id not in endings:
            if self._ends(session.cluster, msg.task):
                endings.add(msg.task.task_id, await started(self._apply(session, msg, kind)))
                return
        elif kind not in ("heartbeat", "delta"):
            await endings.drain()
        await self._apply(session, msg, kind)

    def _ends(self, cluster: str, report: pb.TaskReport) -> bool:
        """True for a report that ends an active task of this cluster (Succeeded, Failed):
        up to its commit wait it runs at once (a report of another cluster's task, which
        ``_forged`` looks up in the store first, is applied in turn)."""
        if report.phase not in (pb.TASK_PHASE_SUCCEEDED, pb.TASK_PHASE_FAILED):
            return False
        task = self.hub.tasks.active.get(report.task_id)
        return task is not None and task.cluster == cluster and not task.state.terminal

    async def _apply(self, session: AgentSession, msg: pb.AgentMessage, kind: str) -> None:
        """Apply one message that is not a batch."""
        hub = self.hub
        cluster = session.cluster
        hub.metrics.agent_message(kind)
        if kind == "hello":
            session.batches = FEATURE_BATCH in msg.hello.features
            await hub.clusters.connected(cluster, msg.hello.backend,
                                         dict(msg.hello.cluster_labels))
        elif kind == "inventory":
            # collector paused (a whole inventory makes no cycles); a large one frozen after
            nodes: Sequence[pb.Node] = msg.inventory.nodes
            sets: Sequence[pb.LabelSet] | None = msg.inventory.label_sets
            with heap.inventory(len(nodes)):
                if hub.catalog.active:   # renamed node by node: each with its whole labels
                    nodes, sets = expand(nodes, msg.inventory.label_sets), None
                hub.fleet.replace_nodes(cluster, hub.catalog.reports(nodes), sets)
            session.seq = msg.inventory.seq
            session.awaiting_resync = False
            send_all(hub.sessions, await hub.tasks.reconcile(cluster, msg.inventory.tasks,
                                                             since=session.opened))
            hub.placement.poke()
        elif kind == "delta":
            delta = msg.delta
            if session.seq is None or delta.seq != session.seq + 1:
                if not session.awaiting_resync:
                    reason = f"delta seq {delta.seq} does not follow {session.seq}"
                    log.warning("cluster %s: %s: asking for a resync", cluster, reason)
                    session.awaiting_resync = True
                    session.send(pb.HubMessage(resync=pb.ResyncRequest(reason=reason)))
                session.seq = None
                return
            session.seq = delta.seq
            upserted = expand(delta.upserted, delta.label_sets)
            hub.fleet.apply_delta(cluster, hub.catalog.reports(upserted),
                                  list(delta.removed))
            hub.placement.poke()
        elif kind == "heartbeat":
            session.send(pb.HubMessage(ack=pb.HeartbeatAck(
                sent_unix_ms=msg.heartbeat.sent_unix_ms,
                lease_seconds=hub.config.timings.member_lease)))
        elif kind == "task":
            received = time.time()
            if await self._forged(cluster, msg.task, session.source):
                return
            send_all(hub.sessions, await hub.tasks.report(cluster, msg.task))
            if msg.task.phase == pb.TASK_PHASE_RUNNING:
                hub.metrics.stages.running(msg.task.task_id, msg.task.at_unix_ms, received)
            if msg.task.phase in (pb.TASK_PHASE_SUCCEEDED, pb.TASK_PHASE_FAILED,
                                  pb.TASK_PHASE_CANCELLED, pb.TASK_PHASE_BOUND,
                                  pb.TASK_PHASE_RUNNING):
                hub.placement.poke()
