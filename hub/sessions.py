"""Live agent streams: one ``AgentSession`` per connected cluster.

The agent channel (``hub.agent_service``) opens a session when a stream authenticates and
closes it when the stream ends; everything else sends commands through ``Sessions.send``,
which never blocks: a command for a cluster with no stream is dropped, because the
reconciliation after the agent's next full inventory re-derives it. ``pack`` turns what a
stream drained into what is written on it: no written message is larger than the hub's
``agent_message_limit`` (HubBatches are split to stay under it), and a PlaceTask too large on
its own is handed back to be failed instead of breaking the agent's stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from fuyao.wire.v1 import agent_pb2 as pb

log = logging.getLogger(__name__)

# What one message costs inside a HubBatch beyond its own encoding (field tag + length varint,
# at most 1 + 5 bytes), and what the batch's own envelope costs in its HubMessage.
BATCH_OVERHEAD = 6


@dataclass(frozen=True)
class Packed:
    """A drained outbox as it goes on the stream."""

    messages: list[pb.HubMessage]           # to write, each within the limit
    sent: list[pb.HubMessage]               # the commands among them (batches unpacked)
    oversized: list[tuple[pb.PlaceTask, int]]   # PlaceTasks over the limit alone, with size


def pack(messages: list[pb.HubMessage], batches: bool, limit: int) -> Packed:
    """``messages`` as written to an agent: one after the other, or (``batches``: the agent
    reads HubBatch) as few HubBatches as keep every written message within ``limit`` bytes
    encoded. A PlaceTask whose own encoding exceeds ``limit`` is left out and returned in
    ``oversized``: the agent could never receive it (its receive limit ends the stream)."""
    fitting: list[tuple[pb.HubMessage, int]] = []
    oversized: list[tuple[pb.PlaceTask, int]] = []
    for msg in messages:
        size = msg.ByteSize()
        if size > limit and msg.HasField("place"):
            oversized.append((msg.place, size))
        else:
            fitting.append((msg, size))
    sent = [msg for msg, _ in fitting]
    if not batches:
        return Packed(sent, sent, oversized)
    out: list[pb.HubMessage] = []
    group: list[pb.HubMessage] = []
    used = BATCH_OVERHEAD
    for msg, size in fitting:
        if group and used + size + BATCH_OVERHEAD > limit:
            out.append(_batch(group))
            group, used = [], BATCH_OVERHEAD
        group.append(msg)
        used += size + BATCH_OVERHEAD
    if group:
        out.append(_batch(group))
    return Packed(out, sent, oversized)


def _batch(group: list[pb.HubMessage]) -> pb.HubMessage:
    return group[0] if len(group) == 1 else pb.HubMessage(batch=pb.HubBatch(messages=group))


@dataclass(eq=False)
class AgentSession:
    """One agent's open Connect stream."""

    cluster: str
    source: str = ""                # the peer address, for audit records
    outbox: asyncio.Queue[pb.HubMessage | None] = field(default_factory=asyncio.Queue)
    seq: int | None = None          # last inventory sequence applied; None until a full inventory
    connected_at: float = field(default_factory=time.time)
    opened: float = field(default_factory=time.monotonic)   # to compare with task dispatch
    awaiting_resync: bool = False   # a ResyncRequest is out; deltas are dropped until then
    batches: bool = False           # the agent reads HubBatch (its Hello said "batch")
    closed: bool = False
    revoked: str | None = None      # why its credential stopped working, if it did

    def send(self, msg: pb.HubMessage) -> None:
        """Queue a command for the agent."""
        if not self.closed:
            self.outbox.put_nowait(msg)

    def drain(self, first: pb.HubMessage | None, limit: int) -> tuple[list[pb.HubMessage], bool]:
        """``first`` and what else is queued now, up to ``limit`` messages; and whether the
        stream is to end after them (the close marker was reached)."""
        if first is None:
            return [], True
        out = [first]
        while len(out) < limit and not self.outbox.empty():
            msg = self.outbox.get_nowait()
            if msg is None:
                return out, True
            out.append(msg)
        return out, False

    def close(self) -> None:
        """End the stream (the Connect handler sees ``None`` and returns)."""
        if not self.closed:
            self.closed = True
            self.outbox.put_nowait(None)


class Sessions:
    """Registry of open sessions by cluster name; a new stream replaces an old one."""

    def __init__(self) -> None:
        self._by_cluster: dict[str, AgentSession] = {}

    def open(self, cluster: str, source: str = "") -> AgentSession:
        """Register a new stream for ``cluster`` from ``source``, closing any previous one."""
        old = self._by_cluster.get(cluster)
        if old is not None:
            log.info("cluster %s: new agent stream replaces the old one", cluster)
            old.close()
        session = AgentSession(cluster, source)
        self._by_cluster[cluster] = session
        return session

    def close(self, session: AgentSession) -> bool:
        """Forget ``session``; True if it was still the cluster's current stream."""
        session.close()
        if self._by_cluster.get(session.cluster) is session:
            del self._by_cluster[session.cluster]
            return True
        return False

    def close_cluster(self, cluster: str, revoked: str | None = None) -> None:
        """End the cluster's stream, if any (cluster removed, or ``revoked``: its credential
        no longer works, which the stream's end says)."""
        session = self._by_cluster.pop(cluster, None)
        if session is not None:
            session.revoked = revoked
            session.close()

    def get(self, cluster: str) -> AgentSession | None:
        """The cluster's current stream, if connected."""
        return self._by_cluster.get(cluster)

    def send(self, cluster: str, msg: pb.HubMessage) -> bool:
        """Queue ``msg`` for the cluster's agent; False if it has no stream."""
        session = self._by_cluster.get(cluster)
        if session is None:
            return False
        session.send(msg)
        return True

    def __len__(self) -> int:
        return len(self._by_cluster)
