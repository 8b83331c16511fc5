"""The audit: every acknowledged task judged from the hub's view and the members' copy logs."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .scenario import Scenario
from .stream import TaskStream

Figures = dict[str, Any]


@dataclass
class Copy:
    """One copy of a task in one member, from its copy log."""

    cluster: str
    generation: int
    start: float
    stop: float | None = None
    reason: str = ""


def read_copies(paths: list[Path]) -> dict[str, list[Copy]]:
    """Every copy of every task, by task id, from the members' copy logs."""
    copies: dict[str, list[Copy]] = defaultdict(list)
    open_: dict[tuple[str, str, int], Copy] = {}
    lines = []
    for path in paths:
        if path.exists():
            lines += [json.loads(line) for line in path.read_text().splitlines() if line]
    for e in sorted(lines, key=lambda e: e["ts"]):
        key = (e["cluster"], e["task"], e["generation"])
        if e["event"] == "start":
            copy = Copy(e["cluster"], e["generation"], e["ts"])
            open_[key] = copy
            copies[e["task"]].append(copy)
        elif key in open_:
            copy = open_.pop(key)
            copy.stop, copy.reason = e["ts"], e["reason"]
    return copies


def overlaps(copies: list[Copy]) -> bool:
    """True if two copies ran at the same moment."""
    end = float("-inf")
    for copy in sorted(copies, key=lambda c: c.start):
        if copy.start < end:
            return True
        end = max(end, float("inf") if copy.stop is None else copy.stop)
    return False


def audit(scenario: Scenario, stream: TaskStream, attempts: int = 30) -> Figures:
    """Judge every task the stream got acknowledged (and any uncertain one the hub has).

    The hub's view and the copy logs are read one after the other while tasks keep
    finishing, so a copy that ends between the two reads looks inconsistent: such a
    snapshot is taken again, for up to ``attempts`` seconds (a loaded hub may be seconds
    behind its agents' reports); a real problem stays."""
    for _ in range(attempts - 1):
        result = _audit_once(scenario, stream)
        if not result["problems"]:
            return result
        time.sleep(1.0)
    return _audit_once(scenario, stream)


def _audit_once(scenario: Scenario, stream: TaskStream) -> Figures:
    with scenario.client() as client:
        views = {v.name: v for v in client.list_tasks()}
    copies = read_copies([scenario.stack.copy_log(n) for n in scenario.names])
    names = stream.acked + [n for n in stream.uncertain if n in views]
    counts: dict[str, int] = defaultdict(int)
    problems: list[str] = []
    for name in names:
        view = views.get(name)
        if view is None:
            counts["lost"] += 1
            problems.append(f"{name}: acknowledged but unknown to the hub")
            continue
        mine = copies.get(view.id, [])
        if overlaps(mine):
            counts["run_twice"] += 1
            problems.append(f"{name}: two copies at once: {mine}")
        state = view.state.value
        if state == "Succeeded":
            finished = sum(c.reason == "succeeded" for c in mine)
            if finished == 1:
                counts["finished_once"] += 1
            elif finished > 1:
                # It finished during a partition, unseen, and its replacement finished too
                # before the first one's report arrived: run to completion twice, one after
                # the other (never at once). restart-elsewhere is at-least-once.
                counts["finished_twice"] += 1
            else:
                counts["lost"] += 1
                problems.append(f"{name}: Succeeded but copies {mine}")
        elif state == "Running":
            running = [c for c in mine if c.stop is None]
            ok = [(c.cluster, c.generation) for c in running] == [(view.cluster, view.generation)]
            counts["running_once" if ok else "lost"] += 1
            if not ok:
                problems.append(f"{name}: Running on {view.cluster} g{view.generation} but "
                                f"copies {mine}")
        elif state == "Queued" and view.message:
            counts["queued_with_reason"] += 1
        else:
            counts["lost"] += 1
            problems.append(f"{name}: {state} ({view.message})")
    return {"tasks": len(names), "finished_once": counts["finished_once"],
            "running_once": counts["running_once"],
            "queued_with_reason": counts["queued_with_reason"],
            "finished_twice": counts["finished_twice"], "lost": counts["lost"],
            "run_twice": counts["run_twice"], "problems": problems[:20]}
