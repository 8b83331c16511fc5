"""The agent's side of a simulated member that runs as its own process.

``MemberBackend`` is the ``Backend`` the agent uses for ``--backend sim``: it connects to the
member process of its state directory (``member_agent.backends.sim.member``), starting one
when none answers, keeps a copy of the member's nodes and task copies from its snapshot
and events (so ``nodes()`` / ``tasks()`` answer at once), forwards PlaceTask / CancelTask
and renews the member's lease. A restarted agent finds the member still running its
copies and adopts them: its first inventory reports them to the hub. If the member process
itself goes away (a lost cluster), the agent starts a new one, as empty as a rebuilt
cluster, and reports the difference.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fuyao.aio import cancel_and_wait
from fuyao.errors import Transient
from fuyao.inventory import NodeInfo, node_from_proto
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import EventSink, NodesChanged, TaskChanged, TaskStatus
from member_agent.backends.sim.member import b64, member_address, status_from_json

log = logging.getLogger(__name__)
SPAWN_TIMEOUT = 60.0
LINE_LIMIT = 256 * 1024 * 1024


class MemberBackend:
    """A ``Backend`` talking to the sim member process over its Unix socket."""

    name = "sim"

    def __init__(self, state_dir: Path, member_argv: Sequence[str]) -> None:
        self.state_dir = state_dir
        self.address = member_address(state_dir)
        self._argv = list(member_argv)   # the sim-member command line, to start one
        self._labels: dict[str, str] = {}
        self._nodes: dict[str, NodeInfo] = {}
        self._tasks: dict[tuple[str, int], TaskStatus] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._sink: EventSink = lambda event: None

    def cluster_labels(self) -> dict[str, str]:
        """The member's cluster labels (from its fleet file)."""
        return dict(self._labels)

    async def start(self, sink: EventSink) -> None:
        """Connect to the member (starting it if needed) and follow its events."""
        self._sink = sink
        reader = await self._connect()
        self._reader_task = asyncio.create_task(self._follow(reader), name="sim-member")

    async def stop(self) -> None:
        """Disconnect; the member and its copies keep running."""
        if self._reader_task is not None:
            await cancel_and_wait([self._reader_task])
        if self._writer is not None:
            self._writer.close()

    def nodes(self) -> list[NodeInfo]:
        """The member's nodes as last reported."""
        return [self._nodes[n] for n in sorted(self._nodes)]

    def tasks(self) -> list[TaskStatus]:
        """The member's task copies as last reported."""
        return list(self._tasks.values())

    async def place(self, command: pb.PlaceTask) -> None:
        """Ask the member to create the copy."""
        await self._request({"op": "place", "place": b64(command)})

    async def cancel(self, task_id: str, generation: int, reason: str = "",
                     grace_seconds: int = 0) -> None:
        """Ask the member to stop copies up to ``generation`` (within ``grace_seconds``)."""
        await self._request({"op": "cancel", "task_id": task_id, "generation": generation,
                             "reason": reason, "grace_seconds": grace_seconds})

    async def renew_lease(self, sent_monotonic: float, lease_seconds: float) -> None:
        """Extend the member's lease to ``sent_monotonic + lease_seconds``."""
        await self._request({"op": "lease", "until": sent_monotonic + lease_seconds})

    # --- internals -----------------------------------------------------------------

    async def _request(self, message: dict[str, Any]) -> None:
        if self._writer is None or self._writer.is_closing():
            raise Transient("the sim member is not connected")
        self._writer.write(json.dumps(message).encode() + b"\n")
        await self._writer.drain()

    async def _connect(self) -> asyncio.StreamReader:
        """Open the member's socket, starting the member first if nothing answers."""
        deadline = time.monotonic() + SPAWN_TIMEOUT
        spawned = False
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(self.address,
                                                                    limit=LINE_LIMIT)
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if not spawned:
                    self._spawn()
                    spawned = True
                if time.monotonic() > deadline:
                    raise Transient("the sim member process did not start; see "
                                    f"{self.state_dir / 'member.out'}") from None
                await asyncio.sleep(0.1)
        snapshot = json.loads(await reader.readline())
        self._writer = writer
        self._labels = dict(snapshot.get("labels", {}))
        old_nodes = set(self._nodes)
        self._nodes = {n.name: n for n in (node_from_proto(pb.Node.FromString(
            base64.b64decode(raw))) for raw in snapshot["nodes"])}
        self._tasks = {}
        for raw in snapshot["tasks"]:
            status = status_from_json(raw)
            self._tasks[(status.task_id, status.generation)] = status
        if spawned or old_nodes:
            log.info("sim member %s: %d nodes, %d task copies",
                     "started" if spawned else "reconnected", len(self._nodes), len(self._tasks))
        if old_nodes:   # a reconnect: tell the hub everything as it now stands
            self._sink(NodesChanged(upserted=tuple(self.nodes()),
                                    removed=tuple(sorted(old_nodes - set(self._nodes)))))
            for status in self.tasks():
                self._sink(TaskChanged(status))
        return reader

    def _spawn(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        out = (self.state_dir / "member.out").open("ab")
        log.info("starting the sim member process")
        subprocess.Popen([sys.executable, "-m", "member_agent.cli", *self._argv],
                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)   # outlives this agent, like a cluster
        out.close()

    async def _follow(self, reader: asyncio.StreamReader) -> None:
        """Apply the member's events to the local copy and pass them on, in order."""
        while True:
            line = await reader.readline()
            if not line:
                log.warning("the sim member connection closed; reconnecting")
                await asyncio.sleep(0.5)
                reader = await self._connect()
                continue
            message = json.loads(line)
            if message["kind"] == "task":
                status = status_from_json(message["status"])
                self._tasks[(status.task_id, status.generation)] = status
                self._prune(status)
                self._sink(TaskChanged(status))
            elif message["kind"] == "nodes":
                upserted = tuple(node_from_proto(pb.Node.FromString(base64.b64decode(raw)))
                                 for raw in message["upserted"])
                for node in upserted:
                    self._nodes[node.name] = node
                for name in message["removed"]:
                    self._nodes.pop(name, None)
                self._sink(NodesChanged(upserted=upserted, removed=tuple(message["removed"])))

    def _prune(self, status: TaskStatus) -> None:
        """Keep finished copies bounded (the member keeps its own ten-minute history)."""
        if status.phase.terminal and len(self._tasks) > 50_000:
            for key in [k for k, s in self._tasks.items() if s.phase.terminal][:10_000]:
                del self._tasks[key]
