"""A throwaway ``redis-server`` for tests, that a test may stop and start again (faults).

``start_redis()`` runs ``redis-server`` (Debian's package; ``scripts/test.sh`` installs it)
on 127.0.0.1 and a free port, without persistence, and waits until it answers PING.
``stop()`` kills it, ``start()`` runs it again on the same port (an empty stream: Redis
without persistence forgets, like a restarted cache), ``close()`` for good.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from tests.support.postgres import free_port


class RedisUnavailable(RuntimeError):
    """redis-server is missing or did not start."""


@dataclass
class RedisServer:
    """One redis-server process on ``port``."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        """Run the server and wait for PING."""
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        try:
            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--protected-mode", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise RedisUnavailable(f"cannot run redis-server: {exc}") from exc
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RedisUnavailable("redis-server did not start") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """Kill the server (a crash, or a network loss as far as clients can tell)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        """Stop for good."""
        self.stop()


def start_redis() -> RedisServer:
    """A running server on a free port."""
    server = RedisServer()
    server.start()
    return server


def stream_events(server: RedisServer, stream: str = "fuyao:events") -> list[tuple[str, str]]:
    """(name, kind) of every event in the hub's Redis stream, oldest first."""
    client = redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True)
    try:
        entries: Any = client.xrange(stream)
        return [(json.loads(f["event"])["name"], json.loads(f["event"])["kind"])
                for _, f in entries]
    finally:
        client.close()
