"""The agent gate alone (``hub.agentgate``): what relaying costs the hub's event loop.

Each measurement starts an ``AgentGate`` in this process, in front of an echo server in a
child process; the child's clients then push bytes through the gate and read them back:
``bulk`` (N connections each echoing M MiB) and ``pings`` (N connections each doing K round
trips of 512 bytes, the size of a gRPC status message). This process does nothing else, so
its main thread's CPU is the event loop's cost of relaying, and its process CPU adds the
relay thread (mode ``splice``). ``busy`` repeats the round trips (``--busy-pings`` each)
while the event loop computes in 5 ms slices, as the hub's placement cycle does: on the
loop every step of a relay waits for a slice to end; on the relay thread it waits for the
GIL (at most the 5 ms switch interval). The modes run interleaved, ``--reps`` times each,
and the medians are reported with the ratio splice / asyncio.

    .venv/bin/python bench/gate_bench.py [--quick] [--json] [--conns N] [--mib M] [--pings K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hub import splice_relay
from hub.agentgate import AgentGate, Mode

PING = 512
BLOCK = 64 * 1024


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(BLOCK):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _bulk_one(port: int, size: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    block = os.urandom(BLOCK)

    async def send() -> None:
        for _ in range(size // BLOCK):
            writer.write(block)
            await writer.drain()

    sender = asyncio.create_task(send())
    await reader.readexactly(size)
    await sender
    writer.close()


async def _pings_one(port: int, count: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    message = os.urandom(PING)
    for _ in range(count):
        writer.write(message)
        await reader.readexactly(PING)
    writer.close()


async def drive(gate_port: int, conns: int, mib: int, pings: int, busy_pings: int) -> None:
    """The child: an echo server (its port on stdout), then on "go" the clients."""
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    jobs: dict[str, Callable[[], Awaitable[None]]] = {
        "bulk": lambda: _bulk_one(gate_port, mib * 1024 * 1024),
        "pings": lambda: _pings_one(gate_port, pings),
        "busy": lambda: _pings_one(gate_port, busy_pings)}
    for phase, job in jobs.items():
        await loop.run_in_executor(None, sys.stdin.readline)   # the parent read its clocks
        started = time.perf_counter()
        await asyncio.gather(*(job() for _ in range(conns)))
        print(json.dumps({phase: time.perf_counter() - started}), flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    server.close()


async def _busy() -> None:
    """Compute in 5 ms slices, yielding between them (the placement cycle's shape)."""
    while True:
        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)


def _clocks() -> tuple[float, float]:
    return time.thread_time(), time.process_time()


async def measure(mode: Mode, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """One run of both phases through a gate in ``mode``: seconds and CPU seconds each."""
    async def refused(_source: str, _skipped: int) -> None:
        return None

    gate = AgentGate(0, refused, mode=mode)
    port = await gate.start(socket.create_server(("127.0.0.1", 0)))
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--drive", str(port), "--conns", str(args.conns),
        "--mib", str(args.mib), "--pings", str(args.pings), "--busy-pings", str(args.busy_pings),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    gate.inner_port = int(await child.stdout.readline())
    figures: dict[str, dict[str, float]] = {}
    for phase in ("bulk", "pings", "busy"):
        busy = asyncio.create_task(_busy()) if phase == "busy" else None
        loop_before, process_before = _clocks()
        child.stdin.write(b"go\n")
        await child.stdin.drain()
        wall = json.loads(await child.stdout.readline())[phase]
        loop_after, process_after = _clocks()
        if busy is not None:
            busy.cancel()
        figures[phase] = {"wall_s": wall, "loop_cpu_s": loop_after - loop_before,
                          "process_cpu_s": process_after - process_before}
    await gate.stop()                 # ends the echo server's connections too
    child.stdin.write(b"done\n")
    await child.wait()
    return figures


def summarize(runs: list[dict[str, dict[str, float]]], args: argparse.Namespace
              ) -> dict[str, float]:
    """Medians over the runs, per MiB relayed (bulk) and per round trip (pings)."""
    def median(phase: str, key: str) -> float:
        return statistics.median(run[phase][key] for run in runs)

    mib = 2 * args.conns * args.mib               # each byte crosses the gate both ways
    trips = args.conns * args.pings
    return {
        "bulk_mib_per_s": mib / median("bulk", "wall_s"),
        "bulk_loop_cpu_ms_per_mib": 1000 * median("bulk", "loop_cpu_s") / mib,
        "bulk_process_cpu_ms_per_mib": 1000 * median("bulk", "process_cpu_s") / mib,
        "pings_per_s": trips / median("pings", "wall_s"),
        "pings_loop_cpu_us_per_trip": 1e6 * median("pings", "loop_cpu_s") / trips,
        "pings_process_cpu_us_per_trip": 1e6 * median("pings", "process_cpu_s") / trips,
        "busy_pings_per_s": args.conns * args.busy_pings / median("busy", "wall_s"),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    modes: list[Mode] = ["asyncio", "splice"] if splice_relay.AVAILABLE else ["asyncio"]
    runs: dict[str, list[dict[str, dict[str, float]]]] = {mode: [] for mode in modes}
    for _ in range(args.reps):
        for mode in modes:
            runs[mode].append(await measure(mode, args))
    result: dict[str, Any] = {"conns": args.conns, "mib": args.mib, "pings": args.pings,
                              "reps": args.reps, "load": os.getloadavg()[0]}
    for mode in modes:
        result[mode] = summarize(runs[mode], args)
    if "splice" in result:
        result["splice_vs_asyncio"] = {key: result["splice"][key] / result["asyncio"][key]
                                       for key in result["asyncio"]}
    return result


def render(result: dict[str, Any]) -> str:
    lines = [f"gate: {result['conns']} connections, {result['mib']} MiB each way and "
             f"{result['pings']} round trips each, median of {result['reps']} "
             f"(load {result['load']:.1f})"]
    keys = list(result["asyncio"])
    columns = [c for c in ("asyncio", "splice", "splice_vs_asyncio") if c in result]
    lines.append(f"{'':32}" + "".join(f"{c:>20}" for c in columns))
    for key in keys:
        lines.append(f"{key:32}" + "".join(f"{result[c][key]:>20.3f}" for c in columns))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="CI size: 4 x 4 MiB, 300 and 30 pings")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--mib", type=int, default=16, help="MiB each connection echoes")
    parser.add_argument("--pings", type=int, default=2000, help="round trips a connection")
    parser.add_argument("--busy-pings", type=int, default=200,
                        help="round trips a connection while the loop is busy")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--drive", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive is not None:
        asyncio.run(drive(args.drive, args.conns, args.mib, args.pings, args.busy_pings))
        return
    if args.quick:
        args.conns, args.mib, args.pings, args.busy_pings, args.reps = 4, 4, 300, 30, 1
    result = asyncio.run(run(args))
    print(json.dumps(result) if args.json else render(result))


if __name__ == "__main__":
    main()
