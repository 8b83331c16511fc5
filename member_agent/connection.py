"""The agent's side of the hub channel: register, stream, reconnect.

``Agent.run`` is called by ``member_agent.cli``. Against a TLS hub (``--ca-cert``) it enrolls
once for a client certificate (``member_agent.enroll``: join token + CSR on the hub's
registration listener, key and certificate saved in the state directory), then keeps one
``Connect`` stream open over mutual TLS and renews the certificate during it. Against a hub
without TLS (``--agent-insecure``) it registers once for a bearer credential and sends it as
``authorization: Bearer <credential>`` metadata. On every (re)connect it
sends ``Hello`` and a full ``Inventory``; then it forwards the backend's events in order
(``InventoryDelta`` with seq = previous + 1, ``TaskReport``), a ``Heartbeat`` every interval,
and turns hub commands into backend calls. A ``ResyncRequest`` gets a fresh full inventory.

Transient failures (hub down, stream lost) are retried with exponential backoff and jitter
(tenacity, unbounded); a session that stayed up for a while resets the backoff. The hub
refusing the token or the credential raises ``Unauthenticated`` / ``Conflict``: the CLI exits
non-zero instead of looping. Cancelling the task running ``Agent.run`` shuts down cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_never,
    wait_exponential_jitter,
)

import member_agent
from fuyao.errors import (
    Conflict,
    FuyaoError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Transient,
    Unauthenticated,
)
from fuyao.labelsets import FEATURE_LABEL_SETS, encode
from fuyao.wire.v1 import agent_pb2 as pb
from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from member_agent.backends.base import (
    Backend,
    BackendEvent,
    NodesChanged,
    Phase,
    TaskChanged,
    TaskStatus,
    now_ms,
)
from member_agent.enroll import Enrollment, register_addresses
from member_agent.faults import MessageFaults
from member_agent.hubs import HubList, leader_hint, parse_hubs
from member_agent.lease import (
    HeartbeatClock,
    LeaseHolder,
    features_from_metadata,
    lease_from_metadata,
)
from member_agent.state import CredentialStore, read_token

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)
_FATAL: dict[grpc.StatusCode, type[FuyaoError]] = {
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.ALREADY_EXISTS: Conflict,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
}
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
FEATURE_BATCH = "batch"     # AgentBatch / HubBatch, when the hub announces it too
FEATURE_COLUMNS = "device-columns"   # a node's devices as DeviceColumns, if the hub reads them
MAX_BATCH = 500             # messages per AgentBatch (the hub takes up to 1,000)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything the connection needs besides the backend."""

    hub: str
    cluster: str
    state_dir: Path
    token_file: Path | None = None
    heartbeat_interval: float = 2.0
    ca_cert: Path | None = None
    register: str | None = None     # registration listener(s); default :8850 on each hub
    cluster_labels: tuple[tuple[str, str], ...] = ()
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    healthy_after: float = 10.0


class _Marker:
    """A control item in the outbox (heartbeat tick, resync request)."""

    def __init__(self, name: str) -> None:
        self.name = name


_BEAT = _Marker("heartbeat")
_RESYNC = _Marker("resync")
_Outbound = BackendEvent | _Marker


TLS_HINT = ("; the hub serves TLS on its agent port: pass --ca-cert <cluster>-ca.crt (the "
            "ca_cert that `fuyaoctl cluster join` printed)")


def with_tls_hint(error: FuyaoError, ca_cert: Path | None) -> FuyaoError:
    """A plaintext agent dialing a TLS hub sees only "Socket closed": say why."""
    if ca_cert is None and isinstance(error, Transient) and any(
            s in error.message for s in ("Socket closed", "Connection reset", "handshake")):
        return Transient(error.message + TLS_HINT)
    return error


def rpc_error(exc: grpc.aio.AioRpcError, doing: str) -> FuyaoError:
    """Our error for a gRPC failure: transient codes -> ``Transient``, others by kind."""
    code, details = exc.code(), exc.details() or ""
    message = f"{doing}: {code.name}: {details}".rstrip(": ")
    if code in TRANSIENT_CODES:
        return Transient(message)
    return _FATAL.get(code, FuyaoError)(message)


class Agent:
    """One member agent: a backend plus its connection to the hub."""

    def __init__(self, config: AgentConfig, backend: Backend,
                 lease: LeaseHolder | None = None) -> None:
        self.config = config
        self.backend = backend
        # The member's lease: given (kube: a Lease object) or the backend itself (sim).
        self.lease = lease if lease is not None else (
            backend if isinstance(backend, LeaseHolder) else None)
        self.store = CredentialStore(config.state_dir, config.cluster)
        self.hubs = HubList(parse_hubs(config.hub))
        self.enrollment = None if config.ca_cert is None else Enrollment(
            cluster=config.cluster, state_dir=config.state_dir, token_file=config.token_file,
            ca_cert=config.ca_cert, register=register_addresses(config.register,
                                                                self.hubs.hubs))
        self._leader_hint: str | None = None     # named by a standby that refused us
        self._outbox: asyncio.Queue[_Outbound] = asyncio.Queue()
        self._beat_due = False     # a heartbeat is due: it goes ahead of queued reports
        self._live = False
        self._seq = 0
        self._beats = HeartbeatClock()
        self._faults = MessageFaults()      # off unless FUYAO_AGENT_FAULTS asks (fault suite)
        self._batch = False                 # this stream's hub takes AgentBatch
        self._columns = False               # ... and reads devices as DeviceColumns
        self._label_sets = False            # ... and reads labels sent once per set
        self.sessions = 0

    async def run(self) -> None:
        """Register if needed, then stay connected until cancelled or refused."""
        await self.backend.start(self._on_event)
        try:
            if self.enrollment is not None:
                await self._run_enrolled(self.enrollment)
            credential = await self._retrying(lambda: self._on_hub(self._register))
            while True:
                await self._retrying(
                    lambda: self._on_hub(lambda stub: self._session(stub, credential)))
        finally:
            self._live = False
            await self.backend.stop()

    async def _on_hub(self, attempt: Callable[[pb_grpc.AgentChannelStub], Awaitable[T]]) -> T:
        """Run ``attempt`` on a channel to the current hub; if it fails transiently, the next
        attempt dials the leader a standby named, or the next address of ``--hub``."""
        self._leader_hint = None
        async with self._channel(self.hubs.current) as channel:
            stub = pb_grpc.AgentChannelStub(channel)  # type: ignore[no-untyped-call]
            try:
                return await attempt(stub)
            except Transient:
                self.hubs.failed(self._leader_hint)
                raise

    async def _run_enrolled(self, enrollment: Enrollment) -> None:
        """Enroll if needed, then stream over mutual TLS; a refused certificate (revoked,
        expired) enrolls again when the token file holds a new join token."""
        await self._retrying(enrollment.ensure)
        while True:
            try:
                await self._retrying(lambda: self._on_hub(lambda stub: self._session(stub, "")))
            except Unauthenticated:
                if not await self._retrying(enrollment.recover):
                    raise

    # --- registration ---------------------------------------------------------------

    async def _register(self, stub: pb_grpc.AgentChannelStub) -> str:
        saved = self.store.load()
        if saved is not None:
            return saved
        token = read_token(self.config.token_file)
        request = pb.RegisterRequest(
            cluster=self.config.cluster, token=token, agent_version=member_agent.__version__
        )
        try:
            response: pb.RegisterResponse = await stub.Register(request)
        except grpc.aio.AioRpcError as exc:
            self._leader_hint = leader_hint(exc.trailing_metadata())
            error = with_tls_hint(rpc_error(exc, f"registering cluster {self.config.cluster!r}"),
                                  self.config.ca_cert)
            if isinstance(error, Unauthenticated | Conflict):
                raise type(error)(
                    f"{error.message} (the join token is invalid, expired or already used; "
                    "issue a new one with `fuyaoctl cluster join`)"
                ) from exc
            raise error from exc
        self.store.save(response.credential)
        log.info("registered cluster %s; credential saved in %s", response.cluster, self.store.path)
        return response.credential

    # --- one stream -----------------------------------------------------------------

    async def _session(self, stub: pb_grpc.AgentChannelStub, credential: str) -> None:
        """One Connect stream; returns after a long healthy session, raises otherwise."""
        metadata = (("authorization", f"Bearer {credential}"),) if credential else ()
        started = time.monotonic()    # before the hub hears of it: the lease counts from here
        call = stub.Connect(metadata=metadata)
        accepted: object = None
        # The hub sends initial metadata once it accepts the credential. Write nothing before:
        # a write racing the hub's refusal makes grpc.aio report INTERNAL "Internal error
        # from Core" instead of the hub's UNAUTHENTICATED (grpc/grpc#36066).
        with contextlib.suppress(grpc.aio.AioRpcError):
            accepted = await call.initial_metadata()
        if call.done():
            await self._raise_for_status(call, 0.0)
            return
        tasks: list[asyncio.Task[None]] = []
        self._beats.clear()
        self._faults.reset()
        try:
            await self._renew(started, lease_from_metadata(accepted))
            features = features_from_metadata(accepted)
            self._batch = FEATURE_BATCH in features
            self._columns = FEATURE_COLUMNS in features
            self._label_sets = FEATURE_LABEL_SETS in features
            hello = pb.Hello(
                agent_version=member_agent.__version__,
                backend=self.backend.name,
                cluster_labels=self.backend.cluster_labels() | dict(self.config.cluster_labels),
                features=[FEATURE_BATCH],
            )
            await call.write(pb.AgentMessage(hello=hello))
            self._live = True
            await self._write_inventory(call)
            self.sessions += 1
            log.info("connected to %s as cluster %s", self.hubs.current, self.config.cluster)
            tasks = [
                asyncio.create_task(self._read(call), name="agent-read"),
                asyncio.create_task(self._pump(call), name="agent-pump"),
                asyncio.create_task(self._beat(), name="agent-heartbeat"),
            ]
            if self.enrollment is not None:
                tasks.append(asyncio.create_task(self.enrollment.keep_renewed(stub),
                                                 name="agent-renew"))
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            failure = next((t.exception() for t in done if t.exception() is not None), None)
            if failure is not None and not _is_stream_error(failure):
                raise failure
        except grpc.aio.AioRpcError:
            pass  # the stream's final status, read below, says why
        except (asyncio.InvalidStateError, grpc.aio.UsageError):
            pass
        finally:
            self._live = False
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            call.cancel()
        await self._raise_for_status(call, time.monotonic() - started)

    async def _raise_for_status(self, call: Any, lasted: float) -> None:
        code: grpc.StatusCode = await call.code()
        details: str = await call.details() or ""
        self._leader_hint = leader_hint(await call.trailing_metadata())
        if code is grpc.StatusCode.UNAUTHENTICATED:
            saved = (self.enrollment.store.path if self.enrollment is not None
                     else self.store.path)
            raise Unauthenticated(
                f"the hub refused the credential of cluster {self.config.cluster!r} ({details}); "
                f"the cluster may have been removed or its credential rotated. Write a new join "
                f"token to the token file (`fuyaoctl cluster token create "
                f"{self.config.cluster}`), or join it again and delete {saved}"
            )
        if code in _FATAL:
            raise _FATAL[code](f"hub closed the stream: {code.name}: {details}")
        message = f"stream to {self.hubs.current} lost: {code.name} {details}".strip()
        if lasted >= self.config.healthy_after:
            log.warning("%s; reconnecting", message)
            return  # a fresh backoff series
        raise with_tls_hint(Transient(message), self.config.ca_cert)

    async def _write_inventory(self, call: Any) -> None:
        """Drop queued events (the snapshot covers them), then send the full inventory."""
        while not self._outbox.empty():
            self._outbox.get_nowait()
        self._seq += 1
        nodes, sets = encode(self.backend.nodes(), self._columns, self._label_sets)
        inventory = pb.Inventory(seq=self._seq, nodes=nodes, label_sets=sets,
                                 tasks=[t.to_proto() for t in self.backend.tasks()])
        await call.write(pb.AgentMessage(inventory=inventory))

    async def _pump(self, call: Any) -> None:
        """The only writer after the inventory: events, heartbeats and resyncs in order.
        What queued up meanwhile goes out together, as one AgentBatch if the hub takes it."""
        while True:
            items = [await self._outbox.get()]
            while len(items) < MAX_BATCH and not self._outbox.empty():
                items.append(self._outbox.get_nowait())
            pending: list[pb.AgentMessage] = []
            if self._beat_due:
                # A due heartbeat overtakes the reports queued before it: the member's lease
                # is renewed on its answer, and behind a backlog of 10,000 task reports it
                # came back too late (the lease expired while the session was alive).
                self._beat_due = False
                pending += self._faults.outgoing(self._message(_BEAT))
            for item in items:
                if item is _BEAT:
                    continue    # sent at the front of this batch or an earlier one
                if item is _RESYNC:
                    await self._write(call, pending)
                    await self._write_inventory(call)   # drops what is still queued
                    pending = []
                    break
                pending += self._faults.outgoing(self._message(item))
            await self._write(call, pending)

    def _message(self, item: _Outbound) -> pb.AgentMessage:
        """The wire form of one outbox item (not a resync)."""
        if item is _BEAT:
            beat = pb.Heartbeat(sent_unix_ms=now_ms())
            self._beats.sent(beat.sent_unix_ms)
            return pb.AgentMessage(heartbeat=beat)
        if isinstance(item, NodesChanged):
            self._seq += 1
            # whole maps, even to a hub that reads label sets: it expands a delta's sets
            # node by node (about twice the CPU of reading whole maps; a delta is most often
            # one node, where a set saves no byte) - sets pay for inventories only
            nodes, _ = encode(item.upserted, self._columns, label_sets=False)
            return pb.AgentMessage(delta=pb.InventoryDelta(
                seq=self._seq, upserted=nodes, removed=list(item.removed)))
        if isinstance(item, TaskChanged):
            return pb.AgentMessage(task=item.status.to_proto())
        raise AssertionError(f"unexpected outbox item {item!r}")

    async def _write(self, call: Any, messages: list[pb.AgentMessage]) -> None:
        if self._batch and len(messages) > 1:
            await call.write(pb.AgentMessage(batch=pb.AgentBatch(messages=messages)))
            return
        for msg in messages:
            await call.write(msg)

    async def _read(self, call: Any) -> None:
        """Hub commands -> backend calls, until the hub ends the stream."""
        while True:
            message = await call.read()
            if message is grpc.aio.EOF:  # type: ignore[attr-defined]
                return
            if message.WhichOneof("msg") == "batch":
                for inner in message.batch.messages:
                    await self._command(inner)
            else:
                await self._command(message)

    async def _command(self, message: pb.HubMessage) -> None:
        """Apply one hub command; a failure is logged, the stream goes on."""
        kind = message.WhichOneof("msg")
        try:
            if kind == "place":
                await self._place(message.place)
            elif kind == "cancel":
                c = message.cancel
                await self.backend.cancel(c.task_id, c.generation, c.reason, c.grace_seconds)
            elif kind == "ack":
                sent = self._beats.acked(message.ack.sent_unix_ms)
                if sent is not None:
                    await self._renew(sent, message.ack.lease_seconds)
            elif kind == "resync":
                log.info("hub asked for a resync: %s", message.resync.reason)
                self._outbox.put_nowait(_RESYNC)
        except Exception:
            log.exception("handling %s from the hub failed", kind)

    async def _place(self, place: pb.PlaceTask) -> None:
        """Create the workload; if the backend cannot, tell the hub the copy FAILED (else the
        hub would wait for it forever)."""
        try:
            await self.backend.place(place)
        except Exception as exc:
            log.exception("cannot create the workload of task %s", place.name)
            status = TaskStatus(place.task_id, place.generation, Phase.FAILED,
                                reason=f"the member could not create the workload: {exc}",
                                at_unix_ms=now_ms())
            self._outbox.put_nowait(TaskChanged(status))

    async def _renew(self, sent: float, lease_seconds: float | None) -> None:
        """Renew the member's lease on proof of a live session (see ``member_agent.lease``)."""
        if lease_seconds and self.lease is not None:
            try:
                await self.lease.renew_lease(sent, lease_seconds)
            except Exception as exc:   # not renewed: the member fences, the safe side
                log.warning("could not renew the member's lease: %s", exc)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            self._beat_due = True
            self._outbox.put_nowait(_BEAT)     # wakes the writer if it idles

    def _on_event(self, event: BackendEvent) -> None:
        """Backend sink: queue while connected; otherwise the next full inventory covers it."""
        if self._live:
            self._outbox.put_nowait(event)

    # --- plumbing -------------------------------------------------------------------

    def _channel(self, address: str) -> grpc.aio.Channel:
        # gRPC's own reconnect backoff (up to 120 s by default) must not outlast ours.
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.initial_reconnect_backoff_ms", int(self.config.backoff_initial * 1000)),
            ("grpc.min_reconnect_backoff_ms", int(self.config.backoff_initial * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(self.config.backoff_max * 1000)),
        ]
        if self.config.ca_cert is None:
            return grpc.aio.insecure_channel(address, options=options)
        if self.enrollment is not None and self.enrollment.identity is not None:
            return grpc.aio.secure_channel(address, self.enrollment.credentials(),
                                           options=options)
        try:
            roots = self.config.ca_cert.read_bytes()
        except OSError as exc:
            raise InvalidInput(f"{self.config.ca_cert}: cannot read CA certificate") from exc
        credentials = grpc.ssl_channel_credentials(root_certificates=roots)
        return grpc.aio.secure_channel(address, credentials, options=options)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` until it succeeds or fails with a non-transient error."""
        initial, cap = self.config.backoff_initial, self.config.backoff_max
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Transient),
            wait=wait_exponential_jitter(multiplier=initial, max=cap, jitter=initial),
            stop=stop_never,
            before_sleep=_log_retry,
            reraise=True,
        )
        async for state in retrying:
            with state:
                return await attempt()
        raise AssertionError("unreachable: tenacity retries forever")


def _is_stream_error(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError | asyncio.InvalidStateError | grpc.aio.UsageError)


def _log_retry(state: RetryCallState) -> None:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    delay = state.next_action.sleep if state.next_action is not None else 0.0
    log.warning("%s; retrying in %.1fs (attempt %d)", error, delay, state.attempt_number)
