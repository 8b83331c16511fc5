"""A TCP proxy in front of the hub's agent port, one per cluster: it can drop every
connection (the agent reconnects) or black-hole them (a partition). Used by ``Scenario``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from fuyaoctl.localstack import free_port


class Proxy:
    """A TCP proxy to the hub's agent port, in its own thread; can drop or black-hole."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target_port = target_port
        self.blackholed = False
        self.drops = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_w}
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer),
                             return_exceptions=True)
        for w in (writer, up_w):
            self._writers.discard(w)
            w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if not self.blackholed:     # a partition: bytes vanish, nobody is told
                    writer.write(data)
                    await writer.drain()
        finally:
            writer.close()

    def _call(self, fn: Callable[[], None]) -> None:
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()
        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    def drop(self) -> None:
        """Close every connection through the proxy (the agent reconnects)."""
        def close_all() -> None:
            for w in list(self._writers):
                w.transport.abort()
        self.drops += 1
        self._call(close_all)

    def blackhole(self, on: bool) -> None:
        """Cut the cluster off (bytes dropped silently); healing drops the broken streams."""
        self.blackholed = on
        if not on:
            self.drop()

    def close(self) -> None:
        """Stop the proxy thread."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
