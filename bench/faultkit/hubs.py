"""Faults of the hub's own footing (3, 8, 9): the leading hub, its database, Redis.

Each ``(scenario, stream) -> figures`` runs while the task stream flows, and returns, with
its figures, ``checks``: what the fault must show besides lost 0 and run-twice 0 (which the
audit counts), each a named bool that ``tests/faults`` asserts and ``bench/faults.py``
prints. Listed in ``faultkit.FAULTS`` with the scenario each needs (a standby hub on
PostgreSQL; a PostgreSQL server of its own; a redis-server of its own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from fuyao.errors import FuyaoError, NotFound
from fuyaoctl.client import Client

from .scenario import Scenario, wait_until
from .stream import TaskStream

Figures = dict[str, Any]
DB_DOWN_S = 5.0


def leader_kill(s: Scenario, stream: TaskStream) -> Figures:
    """3. kill -9 the leading hub mid-batch, with a second hub waiting: the standby leads
    within 10 s under a new epoch, the agents follow it, the stream goes on through it."""
    assert s.second is not None, "fault 3 needs the standby (Scenario(standby=True))"
    before = s.wait_leader(s.stack)
    killed = time.monotonic()
    s.stack.stop_hub(kill=True)
    after = s.wait_leader(s.second)
    led = time.monotonic() - killed
    s.api = s.second
    s.second.wait_ready(s.names, timeout=60)
    roles = {r["address"]: r["role"] for r in after["replicas"]}
    return {"took_over_s": round(led, 2), "epoch": f"{before['epoch']} -> {after['epoch']}",
            "checks": {
                "standby led within 10 s": led < 10.0,
                "a new epoch": after["epoch"] == before["epoch"] + 1,
                "the killed hub is not the leader": roles.get(
                    f"127.0.0.1:{s.stack.api_port}") != "leader"}}


def post_task(s: Scenario, stream: TaskStream, name: str) -> int:
    """Submit one task over plain HTTP; returns the status code (the fault checks 503) and
    books it with the stream, acknowledged or uncertain, so the audit judges it."""
    spec = {"name": name, "cpu": "1", "memory": "1Gi", "duration": "6s"}
    try:
        code = httpx.post(f"{s.api.url}/api/v1/tasks", json=spec, timeout=10.0,
                          headers={"Authorization": f"Bearer {s.stack.token}"}).status_code
    except httpx.HTTPError:
        code = 0
    (stream.acked if code in (200, 201) else stream.uncertain).append(name)
    return code


def postgres_down(s: Scenario, stream: TaskStream) -> Figures:
    """8. PostgreSQL unreachable for 5 s (halted, started again): writes answer 503 and
    store nothing, the view is kept (clusters and active tasks answer from memory), nothing
    acknowledged is lost, and the same leader goes on under the same epoch."""
    assert s.pg is not None and s.pg.datadir is not None, (
        "fault 8 halts PostgreSQL: it needs a server of its own, not FUYAO_TEST_PG_URL")
    before = s.wait_leader(s.stack)
    with s.client() as client:
        known = active_tasks(client)
    s.pg.halt()
    down = time.monotonic()
    codes: list[int] = []
    kept = True
    with s.client() as client:
        while time.monotonic() - down < DB_DOWN_S:
            codes.append(post_task(s, stream, f"refused-{len(codes)}"))
            try:     # the view: the clusters and the active tasks, answered from memory
                kept = (kept and client.get_cluster("c0").name == "c0"
                        and known <= active_tasks(client))
            except FuyaoError:
                kept = False
            time.sleep(max(0.0, min(1.0, DB_DOWN_S - (time.monotonic() - down))))
        s.pg.resume()
        tries = iter(range(1000))
        back = within(lambda: post_task(s, stream, f"after-{next(tries)}") in (200, 201), 60)
        stored = 0
        for i in range(len(codes)):
            try:
                client.get_task(f"refused-{i}")
                stored += 1
            except NotFound:
                pass
    after = s.wait_leader(s.stack)
    return {"down_s": DB_DOWN_S, "writes_refused": f"{codes.count(503)}/{len(codes)}",
            "writes_back_s": None if back is None else round(back - down - DB_DOWN_S, 2),
            "checks": {
                "writes accepted again": back is not None,
                "writes during the outage answered 503": bool(codes) and set(codes) == {503},
                "a refused write stored nothing": stored == 0,
                "the view was kept": kept,
                "the same leader, the same epoch": after["epoch"] == before["epoch"]}}


def active_tasks(client: Client) -> set[str]:
    """Names of the tasks not ended (the hub answers those filters from memory)."""
    return {v.name for state in ("Queued", "Placed", "Running")
            for v in client.list_tasks(state=state)}


class Watcher:
    """``Client.watch`` in a thread (what ``fuyaoctl task watch`` does): every task event
    it sees, as (name, kind), with when it saw it."""

    def __init__(self, url: str, token: str | None) -> None:
        self.seen: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        with Client(url, token=token) as client:
            cursor = client.events(type="task", timeout=0)["next"]
        self._thread = threading.Thread(target=self._run, args=(url, token, cursor),
                                        daemon=True)
        self._thread.start()

    def _run(self, url: str, token: str | None, cursor: str) -> None:
        with Client(url, token=token) as client:
            for event in client.watch(type="task", since=cursor, poll=1.0):
                self.seen.append((time.monotonic(), event["name"], event["kind"]))
                if self._stop.is_set():
                    return

    def saw(self, names: set[str], kind: str, after: float = 0.0) -> bool:
        """True once an event of ``kind`` was seen for every name, after ``after``."""
        return names <= {n for at, n, k in list(self.seen) if k == kind and at >= after}

    def stop(self) -> None:
        """Stop following (at the next event or empty poll)."""
        self._stop.set()
        self._thread.join(5)


def redis_down(s: Scenario, stream: TaskStream) -> Figures:
    """9. Redis down for ``s.redis_down_s``: the hub keeps placing, ``/readyz`` stays 200
    and says degraded, ``fuyao_redis_up`` is 0; when Redis returns the stream catches up
    with every event of the outage and a watcher started before it resumes."""
    from tests.support.redis import stream_events
    assert s.redis_server is not None, "fault 9 needs the scenario's own redis-server"
    health = f"http://127.0.0.1:{s.api.health_port}"
    watcher = Watcher(s.api.url, s.stack.token)
    s.redis_server.stop()
    down = time.monotonic()
    during: list[str] = []
    ready_200, degraded, metric_0 = True, False, False
    while time.monotonic() - down < s.redis_down_s:
        name = f"during-{len(during)}"
        if post_task(s, stream, name) in (200, 201):
            during.append(name)
        ready = httpx.get(f"{health}/readyz", timeout=10.0)
        ready_200 = ready_200 and ready.status_code == 200
        degraded = degraded or ready.json().get("degraded") is True
        metric_0 = metric_0 or "fuyao_redis_up 0.0" in httpx.get(f"{health}/metrics").text
        time.sleep(max(0.0, min(1.0, s.redis_down_s - (time.monotonic() - down))))
    with s.client() as client:
        views = {v.name: v.state.value for v in client.list_tasks()}
    placed = sum(views.get(n) not in (None, "Queued") for n in during)
    s.redis_server.start()
    up = time.monotonic()
    wanted = set(during)
    caught = within(lambda: wanted <= {n for n, k in stream_events(s.redis_server)
                                       if k == "Submitted"}, 60)
    resumed = within(lambda: watcher.saw(wanted, "Submitted", after=up), 60)
    watcher.stop()
    healthy = "degraded" not in httpx.get(f"{health}/readyz", timeout=10.0).json()
    return {"down_s": s.redis_down_s, "placed_during": f"{placed}/{len(during)}",
            "caught_up_s": None if caught is None else round(caught - up, 2),
            "watcher_resumed_s": None if resumed is None else round(resumed - up, 2),
            "checks": {
                "kept placing": bool(during) and placed > 0,
                "readyz 200 and degraded": ready_200 and degraded,
                "fuyao_redis_up 0": metric_0,
                "stream caught up": caught is not None,
                "watcher resumed": resumed is not None,
                "readyz healthy again": healthy}}


def within(check: Callable[[], bool], timeout: float) -> float | None:
    """``wait_until``, or None if it did not happen in time (a failed check, not a crash)."""
    try:
        return wait_until(check, timeout, step=0.2)
    except TimeoutError:
        return None
