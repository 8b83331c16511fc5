"""The agent's fault hook for the fault-injection suite: duplicate and reorder."""

from __future__ import annotations

import pytest

from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.faults import MessageFaults


def report(n: int) -> pb.AgentMessage:
    return pb.AgentMessage(task=pb.TaskReport(task_id=f"t{n}", generation=1))


BEAT = pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_ms=1))
DELTA = pb.AgentMessage(delta=pb.InventoryDelta(seq=2))


def names(messages: list[pb.AgentMessage]) -> list[str]:
    return [m.task.task_id if m.WhichOneof("msg") == "task" else str(m.WhichOneof("msg"))
            for m in messages]


@pytest.mark.parametrize(("spec", "sent", "want"), [
    ("", [report(1), BEAT, report(2)], ["t1", "heartbeat", "t2"]),
    ("duplicate", [report(1), DELTA, BEAT], ["t1", "t1", "delta", "heartbeat", "heartbeat"]),
    ("reorder", [report(1), report(2), report(3), DELTA, BEAT],
     ["t2", "t1", "delta", "t3", "heartbeat"]),
    ("duplicate,reorder", [report(1), report(2)], ["t2", "t2", "t1", "t1"]),
])
def test_outgoing(spec: str, sent: list[pb.AgentMessage], want: list[str]) -> None:
    faults = MessageFaults(spec)
    assert names([out for msg in sent for out in faults.outgoing(msg)]) == want
