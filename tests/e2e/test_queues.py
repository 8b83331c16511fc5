"""Queues end to end: a real hub process, real simulated member agents, fuyaoctl as a user.

Two teams' queues with weights 2:1 share a pool under contention (GPU-time measured from the
task timelines), a preemption whose victims go back to their queue and finish later, and a
gang-sized task that waits for its cluster while small tasks backfill elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from fuyao.spec import TaskView
from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import FAST_TIMINGS, gpu_pool, write_fleet
from tests.e2e.test_cli import ctl, ctl_json

pytestmark = pytest.mark.slow

A100 = "NVIDIA-A100-SXM4-80GB"
V100 = "Tesla-V100-SXM2-32GB"


@pytest.fixture
def qstack(tmp_path: Path) -> Iterator[LocalStack]:
    """A hub whose blocked queue heads hold their queue one cycle, with a 1 s eviction grace."""
    config = tmp_path / "hub.yaml"
    config.write_text(yaml.safe_dump({**FAST_TIMINGS, "queueing": {
        "hold_cycles": 1, "grace_seconds": 1}}))
    s = LocalStack(home=tmp_path / "stack", hub_args=["--config", str(config)],
                   agent_args=["--heartbeat-interval", "0.5"])
    try:
        yield s
    finally:
        s.close()


def member(stack: LocalStack, tmp: Path, name: str, product: str, gpus: int) -> None:
    fleet = write_fleet(tmp / f"{name}.yaml", [gpu_pool(name, product, gpus, count=1)])
    stack.join(name, headroom=0.0)
    stack.start_agent(name, fleet)


def until(check: Callable[[], Any], timeout: float = 90.0, every: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every)


def event_at(view: TaskView, kind: str, nth: int = 0) -> datetime:
    return [e.at for e in view.events if e.kind == kind][nth]


def test_two_teams_share_gpu_time_by_weight(qstack: LocalStack, tmp_path: Path) -> None:
    qstack.start_hub()
    member(qstack, tmp_path, "pool", A100, 6)
    qstack.wait_ready(["pool"])
    ctl(qstack, "queue", "create", "team-a", "--weight", "2", "--quota", "gpu=8",
        "--quota", "cpu=64")
    ctl(qstack, "queue", "create", "team-b", "--weight", "1", "--quota", "gpu=4",
        "--borrow", "gpu=4")
    with qstack.client() as client:
        client.submit_tasks([{"name": f"{team}-{i}", "queue": f"team-{team}", "gpu": 1,
                              "duration": "2s"} for i in range(30) for team in "ab"])
        for i in range(30):
            for team in "ab":
                client.wait_for_task(f"{team}-{i}", ["Succeeded"], timeout=240, interval=1)
        tasks = [client.get_task(f"{team}-{i}") for i in range(30) for team in "ab"]
    # GPU-time each team got while both still had tasks waiting (contention): until the
    # last task of the team that ran out of work first started.
    window_end = min(max(event_at(t, "Running") for t in tasks if t.queue == f"team-{team}")
                     for team in "ab")
    gpu_seconds = {"a": 0.0, "b": 0.0}
    for t in tasks:
        start, end = event_at(t, "Running"), min(event_at(t, "Succeeded"), window_end)
        if end > start:
            gpu_seconds[t.name[0]] += (end - start).total_seconds()
    ratio = gpu_seconds["a"] / gpu_seconds["b"]
    assert 1.8 <= ratio <= 2.2, (ratio, gpu_seconds)
    described = ctl_json(qstack, "queue", "describe", "team-a")
    assert described["weight"] == 2 and described["quotas"] == {"gpu": "8", "cpu": "64"}
    assert {"usage", "dominant_share", "fair_share"} <= set(described)


def test_preemption_requeues_the_victims_and_they_finish_later(
        qstack: LocalStack, tmp_path: Path) -> None:
    qstack.start_hub()
    member(qstack, tmp_path, "east", A100, 4)
    qstack.wait_ready(["east"])
    with qstack.client() as client:
        client.submit_tasks([{"name": f"low-{i}", "gpu": 1, "duration": "12s",
                              "preemptible": i != 0} for i in range(4)])
        until(lambda: all(client.get_task(f"low-{i}").state == "Running" for i in range(4)))
        ctl(qstack, "task", "submit", "--name", "urgent", "--gpu", "2", "--priority", "100",
            "--duration", "2s")
        client.wait_for_task("urgent", ["Succeeded"], timeout=60, interval=0.3)
        for i in range(4):
            client.wait_for_task(f"low-{i}", ["Succeeded"], timeout=90, interval=0.5)
        urgent = client.get_task("urgent")
        lows = [client.get_task(f"low-{i}") for i in range(4)]
    victims = [v for v in lows if any(e.kind == "Preempted" for e in v.events)]
    assert sorted(v.name for v in victims) == ["low-2", "low-3"]    # fewest, newest
    for victim in victims:
        kinds = [e.kind for e in victim.events]
        assert kinds.count("Preempted") == 1 and kinds.count("Succeeded") == 1
        assert kinds.index("Preempted") < kinds.index("Succeeded")
        assert victim.generation == 2
        preempted = event_at(victim, "Preempted")
        # Placed only once the member confirmed the victims gone (after their grace).
        assert (event_at(urgent, "Placed") - preempted).total_seconds() >= 0.9
        assert event_at(victim, "Placed", 1) > event_at(urgent, "Placed")
    audit = ctl_json(qstack, "audit")
    assert sorted(a["target"] for a in audit if a["action"] == "task.preempt"
                  and a["actor"] == "system") == ["low-2", "low-3"]


def test_a_gang_waits_for_its_cluster_while_small_tasks_backfill(
        qstack: LocalStack, tmp_path: Path) -> None:
    qstack.start_hub()
    member(qstack, tmp_path, "east", A100, 8)
    member(qstack, tmp_path, "west", V100, 4)
    qstack.wait_ready(["east", "west"])
    with qstack.client() as client:
        client.submit_task({"name": "filler", "gpu": 2, "gpu_model": "A100",
                            "duration": "6s"})
        client.wait_for_task("filler", ["Running"], timeout=30, interval=0.3)
        client.submit_tasks([{"name": "gang", "gpu": 8, "duration": "2s"},
                             *({"name": f"small-{i}", "gpu": 1, "duration": "2s"}
                               for i in range(6))])
        for name in ["gang", *(f"small-{i}" for i in range(6))]:
            client.wait_for_task(name, ["Succeeded"], timeout=90, interval=0.5)
        gang = client.get_task("gang")
        smalls = [client.get_task(f"small-{i}") for i in range(6)]
        filler = client.get_task("filler")
    gang_placed = event_at(gang, "Placed")
    assert gang.cluster == "east" and gang_placed >= event_at(filler, "Succeeded")
    backfilled = [s for s in smalls if event_at(s, "Running") < gang_placed]
    assert backfilled, "small tasks ran while the gang waited"
    for small in smalls:      # never on the cluster kept for the gang before it was placed
        if event_at(small, "Placed") < gang_placed:
            assert small.cluster == "west", small.name
