"""The fault-injection suite, reduced: each fault once, tens of tasks, real hub and agent
processes. Every acknowledged task must end finished exactly once, running exactly once or
queued with a reason; none lost, none ever running twice (from the members' own copy
logs). ``bench/faults.py`` runs the same faults at a larger size."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import faultkit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(280)]


@pytest.mark.parametrize("fault", list(faultkit.FAULTS))
def test_fault_loses_nothing_and_runs_nothing_twice(fault: str, tmp_path: Path) -> None:
    result: dict[str, Any] = faultkit.run_fault(fault, tmp_path, tasks=30, batch=3, every=0.3)
    assert result["tasks"] >= 10, result     # fewer when the fault refuses submissions
    assert result["lost"] == 0, result["problems"]
    assert result["run_twice"] == 0, result["problems"]
    assert (result["finished_once"] + result["finished_twice"] + result["running_once"]
            + result["queued_with_reason"]) == result["tasks"], result
    if "failover_s" in result:          # fault 2: the hub waited out the member's lease
        # Counted from the kill; the hub's clock started at the last heartbeat before it.
        assert result["failover_s"] >= result["grace_s"] - faultkit.Timing().heartbeat, result
    if "not_ready_samples" in result:   # fault 10: a skewed clock never makes it flap
        assert result["not_ready_samples"] == 0, result


def test_copy_overlap_is_detected() -> None:
    """The audit's run-twice check itself: table of copy intervals."""
    copy = faultkit.Copy
    assert not faultkit.overlaps([copy("a", 1, 0.0, 1.0), copy("b", 2, 1.5, None)])
    assert faultkit.overlaps([copy("a", 1, 0.0, 2.0), copy("b", 2, 1.5, 3.0)])
    assert faultkit.overlaps([copy("a", 1, 0.0, None), copy("b", 2, 100.0, None)])
    assert not faultkit.overlaps([copy("a", 1, 0.0, 1.0)])
