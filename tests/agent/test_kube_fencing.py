"""Fencing for Kubernetes members: the agent's Lease and the watchdog that deletes the
restartable task pods once it has expired (real ``kubernetes`` client, API stand-in)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from fuyao.selector import parse_selector
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.kube.manifest import FAILOVER_LABEL, pod_manifests
from member_agent.kubelease import KubeLease, expired, lease_deadline
from member_agent.watchdog import sweep
from tests.agent.kubestandin import KubeStandIn

NS = "fuyao-tasks"
MANAGED = {"app.kubernetes.io/managed-by": "fuyao-agent"}


@pytest.fixture
def api() -> Iterator[tuple[KubeStandIn, client.ApiClient]]:
    standin = KubeStandIn(namespaces=("default", NS)).start()
    try:
        yield standin, client.ApiClient(client.Configuration(host=standin.url))
    finally:
        standin.close()


def task_pod(standin: KubeStandIn, name: str, labels: dict[str, str]) -> str:
    standin.add_pod(NS, name, "n1", {"cpu": "100m"})
    with standin.cond:
        standin.pods[(NS, name)]["metadata"]["labels"] = dict(labels)
    return name


def live(standin: KubeStandIn) -> list[str]:
    """Pods neither deleted nor being deleted."""
    with standin.cond:
        return sorted(n for (ns, n), p in standin.pods.items()
                      if ns == NS and p["metadata"].get("deletionTimestamp") is None)


@pytest.mark.parametrize(("failover", "label"), [("", "restart-elsewhere"),
                                                 ("restart-elsewhere", "restart-elsewhere"),
                                                 ("never", "never")])
def test_task_pods_carry_their_failover_policy(failover: str, label: str) -> None:
    workload = pb.TaskWorkload(cpu_milli=100, memory_mib=64, replicas=2, failover=failover)
    command = pb.PlaceTask(task_id="t-1", generation=1, name="t", workload=workload)
    pods = pod_manifests(command, NS, selector=parse_selector(""))
    assert [p["metadata"]["labels"][FAILOVER_LABEL] for p in pods] == [label, label]


async def test_agent_lease_is_created_renewed_and_never_moved_back(
        api: tuple[KubeStandIn, client.ApiClient]) -> None:
    _, apic = api
    lease = KubeLease(apic, NS)
    read = client.CoordinationV1Api(apic).read_namespaced_lease
    await lease.renew_lease(time.monotonic(), 30.9)
    first = read("fuyao-agent", NS)
    assert first.spec.lease_duration_seconds == 30          # rounded down: never longer
    deadline = lease_deadline(first)
    assert deadline is not None
    assert abs((deadline - datetime.now(UTC)).total_seconds() - 30) < 5
    await lease.renew_lease(time.monotonic() - 20, 30)      # late: it would shorten it
    assert lease_deadline(read("fuyao-agent", NS)) == deadline
    await lease.renew_lease(time.monotonic() + 5, 30)
    later = lease_deadline(read("fuyao-agent", NS))
    assert later is not None and later > deadline


def test_watchdog_deletes_restartable_pods_only_once_the_lease_expired(
        api: tuple[KubeStandIn, client.ApiClient]) -> None:
    standin, apic = api
    task_pod(standin, "movable", MANAGED | {FAILOVER_LABEL: "restart-elsewhere"})
    task_pod(standin, "unlabelled", MANAGED)            # from before the label: restartable
    task_pod(standin, "pinned", MANAGED | {FAILOVER_LABEL: "never"})
    task_pod(standin, "not-ours", {FAILOVER_LABEL: "restart-elsewhere"})
    renewed = datetime.now(UTC)
    client.CoordinationV1Api(apic).create_namespaced_lease(NS, client.V1Lease(
        metadata=client.V1ObjectMeta(name="fuyao-agent"),
        spec=client.V1LeaseSpec(renew_time=renewed, lease_duration_seconds=10)))
    assert sweep(apic, NS, "fuyao-agent", now=renewed + timedelta(seconds=9)) == []
    assert live(standin) == ["movable", "not-ours", "pinned", "unlabelled"]
    assert sorted(sweep(apic, NS, "fuyao-agent", now=renewed + timedelta(seconds=10))) == [
        "movable", "unlabelled"]
    assert live(standin) == ["not-ours", "pinned"]


def test_watchdog_fences_when_there_is_no_lease(
        api: tuple[KubeStandIn, client.ApiClient]) -> None:
    standin, apic = api
    task_pod(standin, "movable", MANAGED | {FAILOVER_LABEL: "restart-elsewhere"})
    assert sweep(apic, NS, "fuyao-agent") == ["movable"]


@pytest.mark.parametrize(("renew", "duration", "at", "want"), [
    (None, 10, 0, True),          # never renewed
    (0, 10, 9.9, False),
    (0, 10, 10, True),
    (0, 0, 1, True),              # no duration: not a lease
])
def test_expiry_rule(renew: float | None, duration: int, at: float, want: bool) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    spec = client.V1LeaseSpec(
        renew_time=None if renew is None else base + timedelta(seconds=renew),
        lease_duration_seconds=duration)
    assert expired(client.V1Lease(spec=spec), base + timedelta(seconds=at)) is want
    assert expired(None, base) is True
