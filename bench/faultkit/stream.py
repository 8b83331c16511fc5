"""``TaskStream``: batches of tasks submitted over REST in a thread while a fault happens;
it remembers what the hub acknowledged and what is uncertain (for the audit)."""

from __future__ import annotations

import threading
from typing import Any

from fuyao.errors import FuyaoError
from fuyaoctl.client import Client


class TaskStream:
    """Submits ``batch`` tasks every ``every`` seconds until stopped, in a thread."""

    def __init__(self, urls: list[str], *, batch: int, every: float,
                 durations: tuple[float, ...], prefix: str = "t", limit: int | None = None,
                 failover: str | None = None, token: str | None = None) -> None:
        self.urls = urls              # hub replicas: on an error the next batch tries the next
        self.token = token
        self.batch, self.every, self.durations = batch, every, durations
        self.prefix, self.limit, self.failover = prefix, limit, failover
        self.acked: list[str] = []
        self.uncertain: list[str] = []     # the hub may or may not have stored them
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._n = 0

    def start(self) -> TaskStream:
        self._thread.start()
        return self

    def _spec(self) -> dict[str, Any]:
        self._n += 1
        spec: dict[str, Any] = {"name": f"{self.prefix}-{self._n}", "cpu": "1", "memory": "1Gi",
                                "duration": f"{self.durations[self._n % len(self.durations)]}s"}
        if self.failover:
            spec["failover"] = self.failover
        return spec

    def _run(self) -> None:
        turn = 0
        while not self._stop.is_set():
            if self.limit is not None and self._n >= self.limit:
                return
            with Client(self.urls[turn % len(self.urls)], token=self.token,
                        timeout=5.0) as client:
                if not self.submit(client, [self._spec() for _ in range(self.batch)]):
                    turn += 1         # that hub is down or a standby: try the next one
            self._stop.wait(self.every)

    def submit(self, client: Client, specs: list[dict[str, Any]]) -> bool:
        """Submit one batch and book it as acknowledged or uncertain; True if acknowledged.
        (Faults that submit their own tasks use it too, so the audit judges those.)"""
        try:
            client.submit_tasks(specs)
        except FuyaoError:
            self.uncertain.extend(s["name"] for s in specs)
            return False
        self.acked.extend(s["name"] for s in specs)
        return True

    def stop(self) -> None:
        """Stop submitting (waits for the batch in flight)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(30)

    def wait_done(self, timeout: float = 120.0) -> None:
        """Wait until a stream with a ``limit`` has submitted everything."""
        self._thread.join(timeout)
