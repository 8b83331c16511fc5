"""Lifecycle edge cases found in review, each once a real bug: a stream closing mid-report,
a removal racing the placement loop, a PlaceTask crossing the agent's inventory, a spill-over
with nowhere else to go, a report racing a cancel, store writes that fail or are still
queued at stop, a restart forgetting unbound placements' holds, and cluster bookkeeping.

Same style as test_agent_channel: the real hub on loopback gRPC and a raw protocol agent. A
``Gate`` holds one store call on the writer thread (a slow or stuck database) so a race
happens on purpose instead of by luck.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from fuyao.errors import Transient
from fuyao.inventory import NodeInfo, node_to_proto
from fuyao.spec import TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.store import EventRecord, TaskUpdate
from tests.hub.agentkit import RawAgent, gpu_node
from tests.hub.conftest import HubHarness, start_harness, stop_harness
from tests.hub.test_agent_channel import inventoried

A100 = "NVIDIA-A100-PCIE-40GB"


class Gate:
    """Wraps a store method: calls matching ``when`` wait on the writer thread until released."""

    def __init__(self, fn: Callable[..., Any], when: Callable[..., bool]) -> None:
        self.fn = fn
        self.when = when
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.opened.is_set() and self.when(*args, **kwargs):
            self.entered.set()
            self.opened.wait(10)
        return self.fn(*args, **kwargs)

    def open(self) -> None:
        """Let held and later calls through."""
        self.opened.set()


@pytest.fixture
async def gates(harness: HubHarness) -> AsyncIterator[list[Gate]]:
    """Gates a test installs; all opened before the hub stops, even when the test fails."""
    made: list[Gate] = []
    yield made
    for gate in made:
        gate.open()


def gate(h: HubHarness, gates: list[Gate], method: str, when: Callable[..., bool]) -> Gate:
    g = Gate(getattr(h.hub.store, method), when)
    setattr(h.hub.store, method, g)
    gates.append(g)
    return g


def writes_state(state: str) -> Callable[..., bool]:
    """``Store.apply`` calls that set some task's state to ``state``."""
    def when(updates: Sequence[TaskUpdate] = (), *_: Any, **__: Any) -> bool:
        return any(u.changes.get("state") == state for u in updates)
    return when


def writes_event(kind: str) -> Callable[..., bool]:
    """``Store.apply`` calls that add a timeline event of ``kind``."""
    def when(_: Any = (), events: Sequence[EventRecord] = (), *__: Any) -> bool:
        return any(e.kind == kind for e in events)
    return when


async def until(cond: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def drained(h: HubHarness) -> None:
    """Every write queued so far is done (an empty batch commits after all before it)."""
    await h.hub.writer.apply()


async def join(h: HubHarness, name: str, **extra: Any) -> str:
    r = await h.api.post("/api/v1/clusters", json={"name": name, **extra})
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


async def ready_agent(h: HubHarness, name: str, nodes: list[NodeInfo],
                      **extra: Any) -> RawAgent:
    agent = RawAgent(h.agent_address, name)
    await agent.register(await join(h, name, **extra))
    await agent.connect(nodes)
    await until(lambda: inventoried(h, name, len(nodes)))
    return agent


async def running(h: HubHarness, agent: RawAgent, name: str, node: str,
                  **spec: Any) -> pb.PlaceTask:
    """Submit ``name``; ``agent`` gets it and reports it running on ``node``."""
    r = await h.api.post("/api/v1/tasks", json={"name": name, **spec})
    assert r.status_code == 201, r.text
    place = (await agent.expect("place")).place
    agent.report(place.task_id, place.generation, pb.TASK_PHASE_RUNNING, node=node)
    await until(lambda: h.hub.tasks.by_name(name).state == TaskState.RUNNING)
    return place


async def view(h: HubHarness, name: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.api.get(f"/api/v1/tasks/{name}")).json()
    return body


class SplitAgent(RawAgent):
    """A raw agent whose Hello and full Inventory go out separately, as a real agent's do
    when the hub's first commands cross its inventory on the wire."""

    async def hello(self, labels: dict[str, str] | None = None) -> None:
        """Open the stream with Hello only (carrying ``labels`` as the cluster's)."""
        cred = self.credential
        self.call = self.stub.Connect(self._messages(),
                                      metadata=(("authorization", f"Bearer {cred}"),))
        self._reader = asyncio.create_task(self._read())
        self._beat = asyncio.create_task(self._heartbeats())
        self.send(pb.AgentMessage(hello=pb.Hello(agent_version="test", backend="raw",
                                                 cluster_labels=labels or {})))

    def inventory(self, nodes: list[NodeInfo], tasks: list[pb.TaskReport]) -> None:
        """The full inventory, sequence 1."""
        self.seq = 1
        self.send(pb.AgentMessage(inventory=pb.Inventory(
            seq=1, nodes=[node_to_proto(n) for n in nodes], tasks=tasks)))


# -- a stream that ends while its last message is being applied -----------------------------


async def test_stream_closing_mid_report_still_ends_the_task(
        harness: HubHarness, gates: list[Gate]) -> None:
    """The agent reports Succeeded and goes away while the store is slow. The hub must still
    finish the task: before the fix the stream's close cancelled the half-applied report,
    the task stayed active, and removing the cluster re-queued (re-ran) a finished task."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    place = await running(h, east, "done", "a-0", gpu=1)
    slow = gate(h, gates, "apply", writes_state("Succeeded"))
    east.report(place.task_id, 1, pb.TASK_PHASE_SUCCEEDED)
    await until(slow.entered.is_set)
    await east.close()                            # the agent leaves mid-write
    await until(lambda: h.hub.sessions.get("east") is None)
    slow.open()
    await until(lambda: h.hub.tasks.by_name("done") is None)
    await drained(h)
    assert (await view(h, "done"))["state"] == "Succeeded"
    removed = (await h.api.delete("/api/v1/clusters/east")).json()
    assert removed == {"removed": "east", "requeued": 0}
    assert (await view(h, "done"))["state"] == "Succeeded"


# -- removal racing the placement loop ----------------------------------------------------------


async def test_tasks_requeued_by_a_removal_are_not_placed_back_on_that_cluster(
        harness: HubHarness, gates: list[Gate]) -> None:
    """Removal re-queues a cluster's tasks, then deletes it. A placement cycle in between put
    them straight back on the cluster being removed: Placed on a cluster that no longer
    exists, never evicted, never re-placed."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    await h.api.post("/api/v1/tasks", json={"name": "orphan", "gpu": 1})
    await east.expect("place")
    seen: list[str] = []
    stage = h.hub.tasks.stage     # what a placement cycle hands its decisions to

    def watched(placed: Any, waiting: Any, held: Any = ()) -> Any:
        seen.extend(f"{t.name}->{r.cluster}" for t, r in [*placed, *waiting])
        return stage(placed, waiting, held)

    h.hub.tasks.stage = watched  # type: ignore[method-assign]
    deleting = gate(h, gates, "delete_cluster", lambda *_: True)
    removal = asyncio.create_task(h.api.delete("/api/v1/clusters/east"))
    await until(deleting.entered.is_set)
    await until(lambda: any(s.startswith("orphan->") for s in seen))  # a cycle saw it queued
    deleting.open()
    assert (await removal).json() == {"removed": "east", "requeued": 1}
    await drained(h)
    after = await view(h, "orphan")
    assert (after["state"], after["cluster"]) == ("Queued", None), seen
    await east.close()


# -- a PlaceTask that crosses the agent's inventory ----------------------------------------------


async def test_place_sent_before_the_inventory_arrives_is_not_requeued(
        harness: HubHarness) -> None:
    """A reconnecting agent writes Hello and its inventory before it reads any command. A
    task placed on it in between is missing from that inventory only because the two
    crossed: it must not be re-queued (and its copy cancelled) as if the member lost it."""
    h = harness
    node = gpu_node("a-0", A100, 8)
    east = await ready_agent(h, "east", [node])
    await east.close()
    await until(lambda: h.hub.clusters.entries["east"].record.state == "Unknown")
    await h.api.post("/api/v1/tasks", json={"name": "crossed", "gpu": 1})
    await until(lambda: h.hub.tasks.by_name("crossed").message.startswith("0/1"))
    back = SplitAgent(h.agent_address, "east")
    back.credential = east.credential
    await back.hello()                            # Ready again: the task is placed at once
    place = (await back.expect("place")).place
    back.inventory([node], tasks=[])              # written before the agent read the place
    back.report(place.task_id, place.generation, pb.TASK_PHASE_ACCEPTED)
    back.delta([node], seq=2)                     # handled after both: a marker
    await until(lambda: getattr(h.hub.sessions.get("east"), "seq", None) == 2)
    task = h.hub.tasks.by_name("crossed")
    assert (task.state, task.cluster, task.generation) == (TaskState.PLACED, "east", 1)
    await drained(h)
    kinds = [e["kind"] for e in (await view(h, "crossed"))["events"]]
    assert kinds == ["Submitted", "Pending", "Placed", "Accepted"]
    await back.close()


# -- spill-over with nowhere else to go -----------------------------------------------------------


async def test_spill_over_with_no_other_cluster_places_the_task_again(
        harness: HubHarness) -> None:
    """A task the only cluster could not schedule for a while is pulled back to try another
    cluster. There is none: it must be placed again where it fits, not wait forever with
    "cluster excluded" while that cluster has room."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    await h.api.post("/api/v1/tasks", json={"name": "lonely", "gpu": 1})
    first = (await east.expect("place")).place
    east.report(first.task_id, 1, pb.TASK_PHASE_UNSCHEDULABLE, reason="node a-0 is draining")
    cancel = (await east.expect("cancel", timeout=10)).cancel
    assert (cancel.task_id, cancel.generation) == (first.task_id, 1)
    again = (await east.expect("place", timeout=5)).place
    assert (again.task_id, again.generation) == (first.task_id, 2)
    await east.close()


# -- store writes that fail ------------------------------------------------------------------------


class Outage:
    """While on, ``Store.apply`` calls matching ``when`` fail as an unavailable database's do
    (retries included); counts the failures."""

    def __init__(self, h: HubHarness, when: Callable[..., bool]) -> None:
        self.apply = h.hub.store.apply
        self.when = when
        self.on = True
        self.failures = 0
        h.hub.store.apply = self  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.on and self.when(*args, **kwargs):
            self.failures += 1
            raise Transient("store unavailable (test): database is locked")
        self.apply(*args, **kwargs)


async def test_cancel_whose_write_fails_changes_nothing(harness: HubHarness) -> None:
    """A cancel the store could not record answers 503 and leaves the task as it was; it
    showed as Cancelled while its copy kept running and the store still said Running."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    place = await running(h, east, "keep", "a-0", gpu=1)
    outage = Outage(h, writes_state("Cancelled"))
    r = await h.api.post("/api/v1/tasks/keep/cancel")
    assert r.status_code == 503 and outage.failures > 0
    outage.on = False
    assert (await view(h, "keep"))["state"] == "Running"
    assert h.hub.tasks.by_name("keep").state == TaskState.RUNNING
    r = await h.api.post("/api/v1/tasks/keep/cancel")        # the retry works
    assert r.status_code == 200 and r.json()["state"] == "Cancelled"
    cancel = (await east.expect("cancel")).cancel
    assert (cancel.task_id, cancel.generation) == (place.task_id, 1)
    await east.close()


async def test_requeue_whose_write_fails_leaves_the_task_running_where_it_is(
        harness: HubHarness) -> None:
    """Removing a cluster whose re-queue write fails must leave its task Running there. It
    was Queued in memory (store: Running on east), so the next cycle placed it on west while
    east's copy, never told to stop, ran on: the task ran twice."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)], weight=10)
    west = await ready_agent(h, "west", [gpu_node("b-0", A100, 8)], weight=1)
    await running(h, east, "twice", "a-0", gpu=1)
    outage = Outage(h, writes_state("Queued"))
    r = await h.api.delete("/api/v1/clusters/east")
    assert r.status_code == 503 and outage.failures > 0
    outage.on = False
    after = await view(h, "twice")
    assert (after["state"], after["cluster"], after["generation"]) == ("Running", "east", 1)
    task = h.hub.tasks.by_name("twice")
    assert (task.state, task.cluster) == (TaskState.RUNNING, "east")
    assert h.hub.fleet.reservation(task.id) is None
    await east.close()
    await west.close()


async def test_running_report_racing_a_cancel_does_not_revive_the_task(
        harness: HubHarness, gates: list[Gate]) -> None:
    """The member reports Running while the user's cancel is being written. The report used
    to flip the ending task back to Running and write that after the cancel: the store then
    said Running for a cancelled task, which a hub restart would load and run again."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    await h.api.post("/api/v1/tasks", json={"name": "raced", "gpu": 1})
    place = (await east.expect("place")).place
    slow = gate(h, gates, "apply", writes_state("Cancelled"))
    cancelling = asyncio.create_task(h.api.post("/api/v1/tasks/raced/cancel"))
    await until(slow.entered.is_set)
    east.report(place.task_id, 1, pb.TASK_PHASE_RUNNING, node="a-0")
    east.delta([gpu_node("a-0", A100, 8)])        # handled after the report: a marker
    await until(lambda: getattr(h.hub.sessions.get("east"), "seq", None) == 2)
    slow.open()
    assert (await cancelling).json()["state"] == "Cancelled"
    await drained(h)
    assert (await view(h, "raced"))["state"] == "Cancelled"
    assert h.hub.tasks.by_name("raced") is None
    cancels = [(await east.expect("cancel")).cancel for _ in range(2)]
    assert {(c.task_id, c.generation) for c in cancels} == {(place.task_id, 1)}
    await east.close()


async def test_store_outage_mid_stream_ends_it_unavailable_and_the_resync_recovers(
        harness: HubHarness) -> None:
    """A report the hub cannot record ends the stream with UNAVAILABLE and the reason (it
    ended with OK and no reason, which the agent logs as a clean close); the agent's next
    full inventory repeats the report and the task ends."""
    h = harness
    node = gpu_node("a-0", A100, 8)
    east = await ready_agent(h, "east", [node])
    place = await running(h, east, "flaky", "a-0", gpu=1)
    outage = Outage(h, writes_state("Succeeded"))
    east.report(place.task_id, 1, pb.TASK_PHASE_SUCCEEDED)
    assert await east.status() == grpc.StatusCode.UNAVAILABLE
    assert "store unavailable" in (await east.call.details() or "")  # type: ignore[union-attr]
    assert h.hub.tasks.by_name("flaky").state == TaskState.RUNNING
    outage.on = False
    await east.close()
    back = RawAgent(h.agent_address, "east")
    back.credential = east.credential
    await back.connect([node], tasks=[pb.TaskReport(
        task_id=place.task_id, generation=1, phase=pb.TASK_PHASE_SUCCEEDED, node="a-0")])
    await until(lambda: h.hub.tasks.by_name("flaky") is None)
    assert (await view(h, "flaky"))["state"] == "Succeeded"
    await back.close()


# -- cluster bookkeeping ------------------------------------------------------------------------


async def test_join_while_heartbeats_are_saved_does_not_break_the_save(
        harness: HubHarness, gates: list[Gate]) -> None:
    """The monitor saves every connected cluster's last heartbeat (one write for all of
    them); a cluster joined while that write waits must not break the save (it once failed
    with "dictionary changed size during iteration")."""
    h = harness
    east = await ready_agent(h, "east", [gpu_node("a-0", A100, 8)])
    west = await ready_agent(h, "west", [gpu_node("b-0", A100, 8)])
    calls: list[str] = []
    call = h.hub.writer.call

    async def recorded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(fn, "__name__", "?"))
        return await call(fn, *args, **kwargs)

    h.hub.writer.call = recorded  # type: ignore[method-assign]
    slow = gate(h, gates, "touch_clusters", lambda names, *_: "east" in names)
    saving = asyncio.create_task(h.hub.clusters.save_heartbeats())
    await until(slow.entered.is_set)
    joining = asyncio.create_task(join(h, "north"))
    await until(lambda: "create" in calls)         # the join's write waits behind east's
    slow.open()
    await joining
    await saving                                   # raised RuntimeError before the fix
    assert h.hub.clusters.entries["west"].record.last_heartbeat is not None
    assert h.hub.clusters.entries["east"].record.last_heartbeat is not None
    assert "north" in h.hub.clusters.entries
    await east.close()
    await west.close()


async def test_cluster_labels_an_agent_changes_are_updated(harness: HubHarness) -> None:
    """Labels given at join win over the agent's, and a relabelled member is updated: the
    store keeps only the join's labels, the agent's come with every Hello."""
    h = harness
    token = await join(h, "east", labels={"fuyao.io/region": "eu"})
    first = SplitAgent(h.agent_address, "east")
    await first.register(token)
    await first.hello(labels={"fuyao.io/site": "a"})
    await until(lambda: h.hub.clusters.entries["east"].record.state == "Ready")
    await first.close()
    await until(lambda: h.hub.clusters.entries["east"].record.state == "Unknown")
    second = SplitAgent(h.agent_address, "east")
    second.credential = first.credential
    await second.hello(labels={"fuyao.io/site": "b"})
    await until(lambda: h.hub.clusters.entries["east"].record.state == "Ready")
    labels = (await h.api.get("/api/v1/clusters/east")).json()["labels"]
    await second.close()
    assert labels == {"fuyao.io/region": "eu", "fuyao.io/site": "b"}


# -- a graceful stop ------------------------------------------------------------------------------


async def test_stop_writes_what_is_still_queued(tmp_path: Path) -> None:
    """Agent reports are written without waiting; a graceful stop must still write the ones
    queued behind a slow commit instead of dropping them."""
    first = await start_harness(tmp_path / "hub")
    held: list[Gate] = []
    try:
        east = await ready_agent(first, "east", [gpu_node("a-0", A100, 8)])
        await first.api.post("/api/v1/tasks", json={"name": "late", "gpu": 1})
        place = (await east.expect("place")).place
        slow = gate(first, held, "apply", writes_event("Accepted"))
        east.report(place.task_id, 1, pb.TASK_PHASE_ACCEPTED)
        await until(slow.entered.is_set)
        east.report(place.task_id, 1, pb.TASK_PHASE_RUNNING, node="a-0")
        await until(lambda: first.hub.tasks.by_name("late").state == TaskState.RUNNING)
        await east.close()
        close_cluster = first.hub.sessions.close_cluster

        def closing(name: str) -> None:   # the slow commit ends once the stop has begun
            slow.open()
            close_cluster(name)

        first.hub.sessions.close_cluster = closing  # type: ignore[method-assign]
    except BaseException:
        for g in held:
            g.open()
        await stop_harness(first)
        raise
    await stop_harness(first)
    second = await start_harness(tmp_path / "hub")
    try:
        after = await view(second, "late")
        assert after["state"] == "Running"
        # A "Pending" wait may come first when a loaded machine delays east's heartbeats;
        # what this test guards is that the reports queued behind the slow commit are kept.
        assert [e["kind"] for e in after["events"] if e["kind"] != "Pending"] == [
            "Submitted", "Placed", "Accepted", "Running"]
    finally:
        await stop_harness(second)


@contextlib.asynccontextmanager
async def restarted_with_placed(tmp_path: Path, node: NodeInfo, body: dict[str, Any],
                                ) -> AsyncIterator[tuple[HubHarness, pb.PlaceTask]]:
    """A task placed (member: Accepted, not bound) by a hub that then stops; a second hub
    on the same store, its member reconnected and its inventory handled."""
    first = await start_harness(tmp_path / "hub")
    try:
        east = await ready_agent(first, "east", [node], headroom=0.0)
        await first.api.post("/api/v1/tasks", json=body)
        place = (await east.expect("place")).place
        east.report(place.task_id, 1, pb.TASK_PHASE_ACCEPTED)
        await drained(first)
        await east.close()
    finally:
        await stop_harness(first)
    second = await start_harness(tmp_path / "hub")
    try:
        back = RawAgent(second.agent_address, "east")
        back.credential = east.credential
        await back.connect([node], tasks=[pb.TaskReport(
            task_id=place.task_id, generation=1, phase=pb.TASK_PHASE_ACCEPTED)])
        back.delta([node])                        # handled after the inventory: a marker
        await until(lambda: getattr(second.hub.sessions.get("east"), "seq", None) == 2)
        yield second, place
        await back.close()
    finally:
        await stop_harness(second)


async def test_restart_keeps_the_hold_of_a_placed_task_not_yet_bound(tmp_path: Path) -> None:
    """A task placed but not yet bound holds its nodes in the hub's view (the member's own
    accounting does not have it yet). After a hub restart that hold was gone, so the same
    GPUs were handed to the next task as well."""
    async with restarted_with_placed(tmp_path, gpu_node("a-0", A100, 8),
                                     {"name": "big", "gpu": 8}) as (second, place):
        await second.api.post("/api/v1/tasks", json={"name": "next", "gpu": 8})
        await until(lambda: second.hub.tasks.by_name("next").message != "")
        waiting = second.hub.tasks.by_name("next")
        assert waiting.state == TaskState.QUEUED, waiting.message
        big = second.hub.tasks.by_name("big")
        assert (big.state, big.cluster, big.generation) == (TaskState.PLACED, "east", 1)
        assert second.hub.fleet.reservation(place.task_id) is not None


async def test_restart_holds_a_placed_memory_sharing_task_by_its_gpu_memory_too(
        tmp_path: Path) -> None:
    """A GPU-memory-sharing task placed but not bound before a restart holds its share of
    the card again (not CPU and memory only): a second 16 GiB task does not fit the 24 GiB
    card beside the first one's 16 GiB."""
    async with restarted_with_placed(tmp_path, gpu_node("a-0", "NVIDIA-A10", 1),
                                     {"name": "nb", "gpu_mem": "16Gi"}) as (second, place):
        held = second.hub.fleet.reservation(place.task_id)
        assert held is not None and held.requests.gpu_milli > 0
        await second.api.post("/api/v1/tasks", json={"name": "nb2", "gpu_mem": "16Gi"})
        await until(lambda: second.hub.tasks.by_name("nb2").message != "")
        waiting = second.hub.tasks.by_name("nb2")
        assert waiting.state == TaskState.QUEUED, waiting.message
