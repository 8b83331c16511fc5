"""Fault hooks for the fault-injection suite (``tests/faults``, ``bench/faults.py``).

Off unless the environment asks; read once at import. ``member_agent.connection`` passes
every message it writes through ``MessageFaults.outgoing``; ``member_agent.backends.base``
adds ``CLOCK_SKEW_MS`` to the agent's wall clock.

- ``FUYAO_AGENT_FAULTS=duplicate,reorder``: ``duplicate`` sends every task report and
  heartbeat twice; ``reorder`` swaps each pair of consecutive task reports (a held report
  goes out, late, with the next heartbeat at the latest).
- ``FUYAO_AGENT_CLOCK_SKEW_SECONDS=600``: the agent's wall clock runs 10 minutes ahead.
"""

from __future__ import annotations

import os

from fuyao.wire.v1 import agent_pb2 as pb

FAULTS_ENV = "FUYAO_AGENT_FAULTS"
SKEW_ENV = "FUYAO_AGENT_CLOCK_SKEW_SECONDS"


def _skew_ms() -> int:
    try:
        return int(float(os.environ.get(SKEW_ENV, "0")) * 1000)
    except ValueError:
        return 0


CLOCK_SKEW_MS = _skew_ms()


class MessageFaults:
    """Duplicates and reorders outgoing agent messages, as configured."""

    def __init__(self, spec: str | None = None) -> None:
        kinds = {k.strip() for k in (spec if spec is not None
                                     else os.environ.get(FAULTS_ENV, "")).split(",")}
        self.duplicate = "duplicate" in kinds
        self.reorder = "reorder" in kinds
        self._held: pb.AgentMessage | None = None

    def outgoing(self, msg: pb.AgentMessage) -> list[pb.AgentMessage]:
        """What to write on the stream instead of ``msg`` (usually just ``msg``)."""
        kind = msg.WhichOneof("msg")
        out = [msg]
        if kind == "task" and self.reorder:
            if self._held is None:
                self._held, out = msg, []
            else:
                out, self._held = [msg, self._held], None
        elif kind == "heartbeat" and self._held is not None:
            out, self._held = [self._held, msg], None
        if self.duplicate and kind in ("task", "heartbeat"):
            out = [m for m in out for _ in (0, 1)]
        return out

    def reset(self) -> None:
        """A new stream: a held report is covered by the next full inventory."""
        self._held = None
