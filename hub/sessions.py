"""Live agent streams: one ``AgentSession`` per connected cluster.

The agent channel (``hub.agent_service``) opens a session when a stream authenticates and
closes it when the stream ends; everything else sends commands through ``Sessions.send``,
which never blocks: a command for a cluster with no stream is dropped, because the
reconciliation after the agent's next full inventory re-derives it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from fuyao.wire.v1 import agent_pb2 as pb

log = logging.getLogger(__name__)


@dataclass(eq=False)
class AgentSession:
    """One agent's open Connect stream."""

    cluster: str
    outbox: asyncio.Queue[pb.HubMessage | None] = field(default_factory=asyncio.Queue)
    seq: int | None = None          # last inventory sequence applied; None until a full inventory
    connected_at: float = field(default_factory=time.time)
    opened: float = field(default_factory=time.monotonic)   # to compare with task dispatch
    awaiting_resync: bool = False   # a ResyncRequest is out; deltas are dropped until then
    batches: bool = False           # the agent reads HubBatch (its Hello said "batch")
    closed: bool = False

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

    def open(self, cluster: str) -> AgentSession:
        """Register a new stream for ``cluster``, closing any previous one."""
        old = self._by_cluster.get(cluster)
        if old is not None:
            log.info("cluster %s: new agent stream replaces the old one", cluster)
            old.close()
        session = AgentSession(cluster)
        self._by_cluster[cluster] = session
        return session

    def close(self, session: AgentSession) -> bool:
        """Forget ``session``; True if it was still the cluster's current stream."""
        session.close()
        if self._by_cluster.get(session.cluster) is session:
            del self._by_cluster[session.cluster]
            return True
        return False

    def close_cluster(self, cluster: str) -> None:
        """End the cluster's stream, if any (cluster removed)."""
        session = self._by_cluster.pop(cluster, None)
        if session is not None:
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
