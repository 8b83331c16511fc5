"""``hub.activetask.flagged`` copies a request's fields instead of ``dataclasses.replace``:
for any request (cached texts read or not) and any flags it gives what ``replace`` gave,
the cached selector texts carried over as before - the same fields, the same cached keys,
equal and of equal hash (hypothesis)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fuyao.spec import TaskSpec
from hub.activetask import CACHED_KEYS, flagged, placement_request
from hub.placement.framework import PlacementRequest

SELECTORS = ["", "zone=a", "zone in (a, b), tier!=spot"]


def by_replace(base: PlacementRequest, failover: bool,
               exclude: frozenset[str]) -> PlacementRequest:
    """The path before: ``replace``, then the cached texts carried over."""
    out = replace(base, failover=failover, exclude=exclude)
    for key in CACHED_KEYS:
        if key in base.__dict__:
            out.__dict__[key] = base.__dict__[key]
    return out


@given(selector=st.sampled_from(SELECTORS), cluster_selector=st.sampled_from(SELECTORS),
       priority=st.integers(-5, 5), gpu=st.integers(0, 4),
       failover=st.booleans(), exclude=st.frozensets(st.sampled_from(["c0", "c1", "c2"])),
       was_failover=st.booleans(), read=st.sets(st.sampled_from(CACHED_KEYS)))
def test_flagged_is_replace_with_the_cached_texts_kept(
        selector: str, cluster_selector: str, priority: int, gpu: int, failover: bool,
        exclude: frozenset[str], was_failover: bool, read: set[str]) -> None:
    extra: dict[str, Any] = {"gpu": gpu} if gpu else {}
    spec = TaskSpec(name="t", cpu="500m", memory="1Gi", selector=selector,
                    cluster_selector=cluster_selector, **extra)
    base = placement_request("id-1", spec, priority)
    if was_failover:
        base = by_replace(base, True, frozenset({"c9"}))
    for key in read:
        getattr(base, key)
    got, want = flagged(base, failover, exclude), by_replace(base, failover, exclude)
    assert type(got) is type(want)
    assert got.__dict__ == want.__dict__
    assert got == want and hash(got) == hash(want)
    assert (got.failover, got.exclude) == (failover, exclude)
    assert got.selector_key == want.selector_key and got.cluster_key == want.cluster_key


def test_a_request_has_no_post_init_for_flagged_to_skip() -> None:
    """``flagged`` builds the copy without ``__init__``: a check added to the request's
    ``__post_init__`` would be skipped, so ``flagged`` must go back to ``replace`` then."""
    assert not hasattr(PlacementRequest, "__post_init__")
