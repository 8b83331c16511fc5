"""Quota rules, one table per rule, asserting the exact reason a user sees."""

from __future__ import annotations

import pytest

from fuyao.errors import InvalidInput
from fuyao.queues import QueueSpec, parse_resource
from fuyao.spec import TaskRequests
from hub.queueing.quota import (
    QueueState,
    Usage,
    cluster_holds,
    demand,
    dominant_share,
    quota_hold,
)

GPU = 1000


def usage(**per_queue: dict[str, int]) -> Usage:
    u = Usage()
    for queue, vec in per_queue.items():
        u.charge(queue.replace("_", "-"), None, vec)
    return u


A = QueueState("team-a", weight=2, limits={"gpu": 8 * GPU, "cpu": 64_000})
B = QueueState("team-b", limits={"gpu": 4 * GPU}, borrow={"gpu": 4 * GPU})
M = QueueState("team-m", limits={"gpu.A100": 16 * GPU})
FREE = QueueState("default")


@pytest.mark.parametrize(("name", "queue", "used", "need", "want"), [
    ("no quota: unlimited", FREE, {}, {"gpu": 100 * GPU}, None),
    ("within quota", A, {"team_a": {"gpu": 4 * GPU}}, {"gpu": 4 * GPU}, None),
    ("at quota", A, {"team_a": {"gpu": 8 * GPU}}, {"gpu": 1 * GPU},
     "queue team-a: gpu quota 8, in use 8"),
    ("cpu quota", A, {"team_a": {"cpu": 60_000}}, {"cpu": 8_000},
     "queue team-a: cpu quota 64, in use 60"),
    ("borrow within limit and idle", B, {"team_b": {"gpu": 4 * GPU}}, {"gpu": 4 * GPU}, None),
    ("borrow beyond limit", B, {"team_b": {"gpu": 6 * GPU}}, {"gpu": 3 * GPU},
     "queue team-b: gpu quota 4, in use 6 (+4 borrowable)"),
    ("borrow with no idle quota", B, {"team_b": {"gpu": 4 * GPU}, "team_a": {"gpu": 6 * GPU}},
     {"gpu": 3 * GPU}, "queue team-b: gpu quota 4, in use 4; no idle quota to borrow"),
    ("asks more than quota alone", A, {}, {"gpu": 16 * GPU},
     "queue team-a: gpu quota 8, in use 0; the task asks 16, more than the quota allows"),
    ("asks more than quota and borrow", B, {}, {"gpu": 9 * GPU},
     "queue team-b: gpu quota 4, in use 0 (+4 borrowable); the task asks 9, more than the "
     "quota and borrow limit allow"),
    ("per-model quota", M, {"team_m": {"gpu.A100": 16 * GPU}}, {"gpu.A100": GPU},
     "queue team-m: gpu A100 quota 16, in use 16"),
    ("per-model quota, other model", M, {"team_m": {"gpu.A100": 16 * GPU}},
     {"gpu.H100": GPU}, None),
])
def test_quota_hold(name: str, queue: QueueState, used: dict[str, dict[str, int]],
                    need: dict[str, int], want: str | None) -> None:
    assert quota_hold(queue, [A, B, M, FREE], usage(**used), need) == want, name


def test_per_cluster_quota_names_the_cluster() -> None:
    q = QueueState("team-c", cluster_limits={"east": {"gpu": 2 * GPU}})
    u = Usage()
    u.charge("team-c", "east", {"gpu": 2 * GPU})
    assert cluster_holds(q, u, {"gpu": GPU}, ["east", "west"]) == {
        "east": "queue team-c: gpu quota on east 2, in use 2"}
    assert cluster_holds(q, u, {"cpu": 1000}, ["east", "west"]) == {}


@pytest.mark.parametrize(("req", "model", "want"), [
    (TaskRequests(1000, 1024, 0, 0, 1), None, {"cpu": 1000, "memory": 1024}),
    (TaskRequests(1000, 1024, 2000, 0, 2), "A100",
     {"cpu": 2000, "memory": 2048, "gpu": 4000, "gpu.A100": 4000}),
    (TaskRequests(0, 0, 2000, 40960, 1), None,
     {"cpu": 0, "memory": 0, "gpu": 2000, "gpu-memory": 81920}),
    (TaskRequests(1000, 1024, 0, 0, 2, gpu_mem_mib=8192), None,      # memory sharing
     {"cpu": 2000, "memory": 2048, "gpu-memory": 16384}),
    (TaskRequests(1000, 1024, 250, 40960, 1, gpu_mem_mib=8192), "A100",
     {"cpu": 1000, "memory": 1024, "gpu": 250, "gpu.A100": 250, "gpu-memory": 8192}),
])
def test_demand_counts_every_replica(req: TaskRequests, model: str | None,
                                     want: dict[str, int]) -> None:
    assert demand(req, model) == want


def test_dominant_share_is_the_largest_fraction() -> None:
    assert dominant_share({"gpu": 4000, "cpu": 1000}, {"gpu": 16000, "cpu": 100_000}) == 0.25
    assert dominant_share({}, {"gpu": 0}) == 0.0


@pytest.mark.parametrize(("field", "value", "want"), [
    ("quotas", {"gpu": "-1"}, "gpu quantity '-1' must not be negative"),
    ("quotas", {"tpu": "1"}, "unknown resource 'tpu'"),
    ("borrow", {"cpu": "lots"}, "cpu:"),
    ("cluster_quotas", {"East": {"gpu": "1"}}, "cluster name 'East'"),
])
def test_bad_queue_specs_say_what_is_wrong(field: str, value: object, want: str) -> None:
    with pytest.raises(ValueError, match=want.replace("(", r"\(")):
        QueueSpec.model_validate({"name": "q", field: value})


def test_resource_units() -> None:
    assert parse_resource("gpu", "8") == 8000
    assert parse_resource("memory", "2Gi") == 2048
    assert parse_resource("gpu.A100", 0.5) == 500
    with pytest.raises(InvalidInput, match="unknown resource"):
        parse_resource("gpu.", 1)
