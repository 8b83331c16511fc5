"""The agent gate alone (``hub.agentgate``): what relaying costs the hub's event loop.

Each measurement starts an ``AgentGate`` in this process, in front of an echo server in a
child process; the child's clients then push bytes through the gate and read them back:
``bulk`` (N connections each echoing M MiB) and ``pings`` (N connections each doing K round
trips of 512 bytes, the size of a gRPC status message). This process does nothing else, so
its CPU is the event loop's cost of relaying. ``busy`` repeats the round trips
(``--busy-pings`` each) while the event loop computes in 5 ms slices, as the hub's placement
cycle does. Medians of ``--reps`` runs.

To compare two versions of the gate, run this file with each tree's ``hub`` first on the
path, alternating (``PYTHONPATH=/tmp/base python bench/gate_bench.py --json``). Every phase
is bounded (``--phase-timeout``): a relay that stalls fails the run with the phase named,
it never hangs it.

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

from flags import check_bounds  # beside this file

from hub.agentgate import AgentGate

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


class Stalled(RuntimeError):
    """A phase overran ``--phase-timeout``: the relay stalled (or the machine starved it)."""


async def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """One run of every phase through a gate: seconds and CPU seconds each."""
    async def refused(_source: str, _skipped: int) -> None:
        return None

    gate = AgentGate(0, refused)
    port = await gate.start(socket.create_server(("127.0.0.1", 0)))
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--drive", str(port), "--conns", str(args.conns),
        "--mib", str(args.mib), "--pings", str(args.pings), "--busy-pings", str(args.busy_pings),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    figures: dict[str, dict[str, float]] = {}
    phase = "start"
    busy: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(args.phase_timeout):
            gate.inner_port = int(await child.stdout.readline())
        for phase in ("bulk", "pings", "busy"):
            busy = asyncio.create_task(_busy()) if phase == "busy" else None
            loop_before, process_before = _clocks()
            child.stdin.write(b"go\n")
            await child.stdin.drain()
            async with asyncio.timeout(args.phase_timeout):
                wall = json.loads(await child.stdout.readline())[phase]
            loop_after, process_after = _clocks()
            if busy is not None:
                busy.cancel()
            figures[phase] = {"wall_s": wall, "loop_cpu_s": loop_after - loop_before,
                              "process_cpu_s": process_after - process_before}
        await gate.stop()                 # ends the echo server's connections too
        child.stdin.write(b"done\n")
        async with asyncio.timeout(args.phase_timeout):
            await child.wait()
    except TimeoutError:
        raise Stalled(f"gate_bench: phase {phase!r} took over {args.phase_timeout:.0f} s "
                      f"(relaying {len(gate._relays)} connections)") from None
    finally:
        if busy is not None:
            busy.cancel()
        if child.returncode is None:
            child.kill()
            await child.wait()
        await gate.stop()
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
    load = os.getloadavg()[0]
    runs = [await measure(args) for _ in range(args.reps)]
    return {"conns": args.conns, "mib": args.mib, "pings": args.pings, "reps": args.reps,
            "load": load, "gate": summarize(runs, args)}


def render(result: dict[str, Any]) -> str:
    lines = [f"gate: {result['conns']} connections, {result['mib']} MiB each way and "
             f"{result['pings']} round trips each, median of {result['reps']} "
             f"(load {result['load']:.1f})"]
    for key, value in result["gate"].items():
        lines.append(f"{key:32}{value:>14.3f}")
    return "\n".join(lines)


BOUNDS: dict[str, tuple[float, float]] = {
    "conns": (1, 1024), "mib": (1, 1024), "pings": (1, 1_000_000),
    "busy_pings": (1, 1_000_000), "reps": (1, 100), "phase_timeout": (1, 3_600),
}
"""Each numeric flag's allowed range."""


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--phase-timeout", type=float, default=120.0,
                        help="seconds a phase may take before the run fails as stalled")
    parser.add_argument("--drive", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.drive is not None:
        asyncio.run(drive(args.drive, args.conns, args.mib, args.pings, args.busy_pings))
        return
    if args.quick:
        args.conns, args.mib, args.pings, args.busy_pings, args.reps = 4, 4, 300, 30, 1
    try:
        result = asyncio.run(run(args))
    except Stalled as exc:
        sys.exit(str(exc))
    print(json.dumps(result) if args.json else render(result))


if __name__ == "__main__":
    main()
