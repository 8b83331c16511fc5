"""A task's scheduler request: built once from its spec, with the per-attempt flags
(failover, clusters to avoid) applied; whatever the request caches reads the same as on a
request built fresh with those flags."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask, placement_request

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CACHED = ["selector_key", "cluster_key"]   # the texts a request renders once and keeps


def active(spec: TaskSpec) -> ActiveTask:
    return ActiveTask(id="t", name=spec.name, spec=spec, state=TaskState.QUEUED,
                      queue="default", priority=0, seq=1, created_at=NOW, updated_at=NOW)


@given(st.booleans(), st.sets(st.sampled_from(["east", "west"])),
       st.sampled_from(["", "zone=a", "zone in (a, b)"]),
       st.sampled_from([None, "region=eu"]))
def test_a_failed_over_task_asks_what_a_fresh_request_with_its_flags_asks(
        failover: bool, avoid: set[str], selector: str, clusters: str | None) -> None:
    spec = TaskSpec(name="t", cpu="2", gpu=1, selector=selector, cluster_selector=clusters)
    task = active(spec)
    first = task.request()
    for name in CACHED:
        getattr(first, name)          # cached before the flags change
    task.failover, task.avoid = failover, set(avoid)
    asked = task.request()
    fresh = replace(placement_request("t", spec, 0), failover=failover,
                    exclude=frozenset(avoid))
    assert asked == fresh
    assert CACHED and all(getattr(asked, n) == getattr(fresh, n) for n in CACHED)
    assert task.requests() == spec.requests()
