"""The simulated member cluster as its own process (``fuyao-agent sim-member``).

A real member keeps running its pods while its agent is dead, frozen or cut off; so does
this one. ``SimMember`` owns a ``SimBackend`` (nodes, scheduler, running copies), serves one
agent at a time on a Unix socket, enforces the lease (``member_agent.backends.sim.lease``:
copies of ``restart-elsewhere`` tasks stop once the agent has not renewed it in time) and
appends every copy start and stop to the member log (``CopyLog``), all in this process, so
none of it depends on the agent being alive. The agent side is
``member_agent.backends.sim.remote.MemberBackend``, which starts this process when none runs
for its state directory. It stops on SIGTERM, or after ``orphan_timeout`` seconds without an
agent (0: never).

Protocol (one JSON object per line; nodes and PlaceTask as base64 protobuf):
  agent -> member   {"op": "place", "place": B64}
                    {"op": "cancel", "task_id": ID, "generation": N, "reason": TEXT,
                     "grace_seconds": N}
                    {"op": "lease", "until": CLOCK_MONOTONIC seconds}
  member -> agent   {"kind": "snapshot", "labels": {...}, "nodes": [B64], "tasks": [STATUS]}
                    then, in order: {"kind": "nodes", "upserted": [B64], "removed": [NAME]}
                    and {"kind": "task", "status": STATUS}
A new agent connection replaces the old one and gets a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from fuyao.inventory import node_to_proto
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import BackendEvent, NodesChanged, Phase, TaskChanged, TaskStatus
from member_agent.backends.sim.backend import SimBackend
from member_agent.backends.sim.lease import Lease

log = logging.getLogger(__name__)
MAX_AGENT_BUFFER = 64 * 1024 * 1024   # an agent this far behind (frozen) is dropped
LEASE_CHECK_SECONDS = 0.05   # at the earliest, between two lease checks
IDLE_CHECK_SECONDS = 1.0     # at the latest (orphan timeout; an expired lease acted on)


def member_address(state_dir: Path) -> str:
    """The member's socket: an abstract Unix socket named after the state directory (no
    file to go stale, no path-length limit; it vanishes with the process)."""
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:24]
    return f"\0fuyao-sim-member-{digest}"


def status_to_json(status: TaskStatus) -> dict[str, Any]:
    """A task status as the protocol carries it."""
    return {"task_id": status.task_id, "generation": status.generation,
            "phase": int(status.phase), "node": status.node, "reason": status.reason,
            "at_unix_ms": status.at_unix_ms}


def status_from_json(data: dict[str, Any]) -> TaskStatus:
    """The inverse of ``status_to_json``."""
    return TaskStatus(str(data["task_id"]), int(data["generation"]), Phase(int(data["phase"])),
                      str(data.get("node", "")), str(data.get("reason", "")),
                      int(data.get("at_unix_ms", 0)))


def b64(message: Any) -> str:
    """A protobuf message as base64 text."""
    return base64.b64encode(message.SerializeToString()).decode()


class CopyLog:
    """``--member-log``: one JSON line per copy start and stop, appended by the member."""

    def __init__(self, path: Path, cluster: str) -> None:
        self.cluster = cluster
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8", buffering=1)
        self._running: set[tuple[str, int]] = set()

    def observe(self, status: TaskStatus) -> None:
        """Log a start when a copy begins running, a stop when a running copy ends."""
        key = (status.task_id, status.generation)
        if status.phase is Phase.RUNNING and key not in self._running:
            self._running.add(key)
            self._write(status, "start", "running")
        elif status.phase.terminal and key in self._running:
            self._running.discard(key)
            reason = status.phase.name.lower() + (f": {status.reason}" if status.reason else "")
            self._write(status, "stop", reason)

    def _write(self, status: TaskStatus, event: str, reason: str) -> None:
        line = {"ts": round(time.time(), 3), "cluster": self.cluster, "task": status.task_id,
                "generation": status.generation, "node": status.node, "event": event,
                "reason": reason}
        self._file.write(json.dumps(line) + "\n")

    def close(self) -> None:
        """Flush and close the file."""
        self._file.close()


class SimMember:
    """One simulated member cluster serving its agent over a Unix socket."""

    def __init__(self, backend: SimBackend, address: str, *, copy_log: CopyLog | None = None,
                 orphan_timeout: float = 0.0) -> None:
        self.backend = backend
        self.address = address
        self.copy_log = copy_log
        self.orphan_timeout = orphan_timeout
        self.lease = Lease()
        self._writer: asyncio.StreamWriter | None = None
        self._out: list[bytes] = []                  # lines for the agent, not yet written
        self._out_writer: asyncio.StreamWriter | None = None
        self._flush_due = False
        self._agent_left = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve agents and enforce the lease until ``stop`` is set (or orphaned too long)."""
        await self.backend.start(self._on_event)
        server = await asyncio.start_unix_server(self._serve, path=self.address)
        log.info("sim member serving its agent")
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._next_check()):
                        await stop.wait()
                self._enforce_lease()
                if (self.orphan_timeout > 0 and self._writer is None
                        and time.monotonic() - self._agent_left > self.orphan_timeout):
                    log.warning("no agent for %.0fs: the sim member stops", self.orphan_timeout)
                    break
        finally:
            server.close()
            await self.backend.stop()
            if self.copy_log is not None:
                self.copy_log.close()

    def _next_check(self) -> float:
        """Seconds to the next lease check: at the lease's expiry (never sooner than
        ``LEASE_CHECK_SECONDS``), else in ``IDLE_CHECK_SECONDS``. Polling every 50 ms cost
        an idle member ~2% of a core: 100 members, two cores' worth of wake-ups."""
        wait = IDLE_CHECK_SECONDS
        if self.lease.until is not None and self.lease.valid():
            wait = min(wait, self.lease.until - time.monotonic())
        return max(LEASE_CHECK_SECONDS, wait)

    def _enforce_lease(self) -> None:
        reason = self.lease.newly_expired()
        if reason:
            stopped = self.backend.stop_restartable(reason)
            log.warning("%s: stopped %d restart-elsewhere copies", reason, stopped)

    # --- agent connection -------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._writer is not None:
            log.info("a new agent connection replaces the old one")
            self._writer.close()
        self._writer = writer
        snapshot = {"kind": "snapshot", "labels": self.backend.cluster_labels(),
                    "nodes": [b64(node_to_proto(n)) for n in self.backend.nodes()],
                    "tasks": [status_to_json(t) for t in self.backend.tasks()]}
        self._send(snapshot)
        try:
            while line := await reader.readline():
                await self._handle(json.loads(line))
        except (ConnectionError, ValueError) as exc:
            log.warning("agent connection ended: %s", exc)
        finally:
            if self._writer is writer:
                self._writer = None
                self._agent_left = time.monotonic()
            writer.close()

    async def _handle(self, request: dict[str, Any]) -> None:
        op = request.get("op")
        if op == "lease":
            self.lease.renew(float(request["until"]))
            self._enforce_lease()
        elif op == "place":
            place = pb.PlaceTask.FromString(base64.b64decode(request["place"]))
            self._enforce_lease()
            await self.backend.place(place, fenced=self.lease.refusal())
        elif op == "cancel":
            await self.backend.cancel(str(request["task_id"]), int(request["generation"]),
                                      str(request.get("reason", "")),
                                      int(request.get("grace_seconds", 0)))
        else:
            log.warning("unknown request from the agent: %r", op)

    def _on_event(self, event: BackendEvent) -> None:
        if isinstance(event, TaskChanged):
            if self.copy_log is not None:
                self.copy_log.observe(event.status)
            self._send({"kind": "task", "status": status_to_json(event.status)})
        elif isinstance(event, NodesChanged):
            self._send({"kind": "nodes", "upserted": [b64(node_to_proto(n))
                                                      for n in event.upserted],
                        "removed": list(event.removed)})

    def _send(self, message: dict[str, Any]) -> None:
        """Queue one line for the agent; what queues up in one turn of the event loop goes
        out in one write (a place emits four events: one socket send each had been 28% of
        the member's time with 10,000 copies)."""
        writer = self._writer
        if writer is None or writer.is_closing():
            return
        if writer is not self._out_writer:
            self._out, self._out_writer = [], writer   # a new agent: nothing of the old
        self._out.append(json.dumps(message).encode() + b"\n")
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        lines, writer, self._out = self._out, self._out_writer, []
        if writer is None or writer.is_closing() or not lines:
            return
        if writer.transport.get_write_buffer_size() > MAX_AGENT_BUFFER:
            log.warning("the agent is not reading (frozen?): dropping its connection")
            writer.close()
            return
        writer.write(b"".join(lines))
