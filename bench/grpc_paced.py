"""A paced grpc.aio stream per client process: the CPU a message costs an agent-like client
under each of gRPC core's experiment settings, measured in the same run.

An agent of a 100-member fleet gets a few to tens of messages a second on its one stream,
not the flood ``grpc_echo.py`` measures; at that pace what a message costs is mostly its
wake-ups and thread hops. This starts a grpc.aio server (``serve``) whose one stream method
writes a PlaceTask-sized message (``grpc_echo.payload``) to each open stream every
``--period`` seconds on a fixed schedule and counts the replies, and ``--clients`` client
processes (``client``) that answer each message with its first 40 bytes, as an agent
answers a placement with a report. For each setting of ``--experiments`` (the value given to
the clients' ``GRPC_EXPERIMENTS``; ``""`` is gRPC's defaults, ``-event_engine_client`` is
what ``fuyao-agent`` runs with, ``member_agent.launch``), alternated ``--rounds`` times, it
waits until every client has answered, then ``--warm`` seconds, and measures over
``--seconds``: the replies the server counted, the clients' CPU (every thread, ``/proc``)
in microseconds a message, and the server's. The server runs on gRPC's defaults unless
``--server-experiments`` says otherwise.

    python bench/grpc_paced.py                          # 20 clients, 50 messages/s each
    python bench/grpc_paced.py --period 0.1 --rounds 5 --json
    python bench/grpc_paced.py --experiments "" -event_engine_client --server-experiments \
        -event_engine_listener
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc
from e2e_bench import cpu_seconds  # beside this file
from flags import bench_main, check_bounds  # beside this file
from grpc_echo import _identity, payload  # beside this file

from member_agent.launch import AGENT_GRPC_EXPERIMENTS

METHOD = "/bench.Paced/Push"
REPLY_BYTES = 40
CONNECT_TIMEOUT = 120.0
BOUNDS = {"clients": (1, 200), "period": (0.001, 10), "seconds": (0.5, 600),
          "warm": (0, 60), "rounds": (1, 20)}


async def serve(period: float) -> None:
    """Serve the paced method on 127.0.0.1 (the port printed first) until stdin closes;
    each line read from stdin is answered with the replies counted so far and the streams
    that have answered at least once."""
    body = payload()
    replies = 0
    answered = 0

    async def push(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async def count() -> None:
            nonlocal replies, answered
            first = True
            async for _ in requests:
                replies += 1
                if first:
                    answered, first = answered + 1, False

        counting = asyncio.create_task(count())
        loop = asyncio.get_running_loop()
        due = loop.time()
        try:
            while True:
                yield body
                due += period
                await asyncio.sleep(max(0.0, due - loop.time()))
        finally:
            counting.cancel()

    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler("bench.Paced", {
        "Push": grpc.stream_stream_rpc_method_handler(
            push, request_deserializer=_identity, response_serializer=_identity)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        print(replies, answered, flush=True)
    await server.stop(None)


async def client(port: int) -> None:
    """Answer every message of one stream with its first bytes, until the stream ends."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(METHOD, request_serializer=_identity,
                                     response_deserializer=_identity)()
        while (message := await call.read()) is not grpc.aio.EOF:  # type: ignore[attr-defined]
            await call.write(message[:REPLY_BYTES])


def _cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid, children=False).get("total", 0.0) for pid in pids)


def measure(args: argparse.Namespace, experiments: str) -> dict[str, Any]:
    """One window: a server and ``args.clients`` clients with ``experiments``."""
    server_env = {**os.environ, "GRPC_EXPERIMENTS": args.server_experiments}
    client_env = {**os.environ, "GRPC_EXPERIMENTS": experiments}
    server = subprocess.Popen([sys.executable, __file__, "serve", "--period", str(args.period)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=server_env)
    clients: list[subprocess.Popen[bytes]] = []
    try:
        assert server.stdin is not None and server.stdout is not None
        port = int(server.stdout.readline())

        def replies() -> tuple[int, int]:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write("count\n")
            server.stdin.flush()
            count, answered = server.stdout.readline().split()
            return int(count), int(answered)

        clients = [subprocess.Popen([sys.executable, __file__, "client", "--port", str(port)],
                                    env=client_env, stdin=subprocess.DEVNULL)
                   for _ in range(args.clients)]
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while replies()[1] < args.clients:      # every client started and answering
            if time.monotonic() > deadline or any(c.poll() is not None for c in clients):
                raise RuntimeError("the clients did not all connect")
            time.sleep(0.1)
        time.sleep(args.warm)
        pids = [c.pid for c in clients]
        count0, cpu0, srv0, t0 = replies()[0], _cpu(pids), _cpu([server.pid]), time.perf_counter()
        time.sleep(args.seconds)
        count1, cpu1, srv1, t1 = replies()[0], _cpu(pids), _cpu([server.pid]), time.perf_counter()
    finally:
        for proc in clients:
            proc.kill()
            proc.wait()
        server.kill()
        server.wait()
    messages = count1 - count0
    if messages <= 0:
        raise RuntimeError("no message went round in the window")
    return {"experiments": experiments, "messages": messages,
            "messages_per_s": round(messages / (t1 - t0), 1),
            "client_us_per_message": round((cpu1 - cpu0) / messages * 1e6, 1),
            "client_cores": round((cpu1 - cpu0) / (t1 - t0), 3),
            "server_us_per_message": round((srv1 - srv0) / messages * 1e6, 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting in every round, alternated; medians and ratios to the first setting."""
    windows = [measure(args, setting) for _ in range(args.rounds)
               for setting in args.experiments]
    summary: dict[str, dict[str, float]] = {}
    for setting in args.experiments:
        mine = [w for w in windows if w["experiments"] == setting]
        summary[setting] = {
            key: statistics.median(w[key] for w in mine)
            for key in ("client_us_per_message", "server_us_per_message", "messages_per_s")}
    first = summary[args.experiments[0]]
    for figures in summary.values():
        figures["client_vs_first"] = round(
            figures["client_us_per_message"] / first["client_us_per_message"], 3)
        figures["server_vs_first"] = round(
            figures["server_us_per_message"] / first["server_us_per_message"], 3)
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "grpc": grpc.__version__, "clients": args.clients, "period_s": args.period,
            "seconds": args.seconds, "rounds": args.rounds,
            "server_experiments": args.server_experiments,
            "windows": windows, "medians": summary}


def markdown(result: dict[str, Any]) -> str:
    """The medians as a table."""
    rows = [f"grpcio {result['grpc']}, {result['clients']} clients, a message every "
            f"{result['period_s']:g} s each, {result['rounds']} round(s) of "
            f"{result['seconds']:g} s ({result['date']})", "",
            "| clients' GRPC_EXPERIMENTS | messages/s | client us/message | vs first "
            "| server us/message | vs first |", "|---|---|---|---|---|---|"]
    for setting, m in result["medians"].items():
        rows.append(f"| `{setting or '(defaults)'}` | {m['messages_per_s']:,.0f} | "
                    f"{m['client_us_per_message']:.1f} | {m['client_vs_first']:.3f} | "
                    f"{m['server_us_per_message']:.1f} | {m['server_vs_first']:.3f} |")
    return "\n".join(rows)


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The run's flags (``serve`` and ``client`` are the child processes' modes)."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20, help="client processes")
    parser.add_argument("--period", type=float, default=0.02,
                        help="seconds between two messages to one client")
    parser.add_argument("--seconds", type=float, default=10, help="measured window")
    parser.add_argument("--warm", type=float, default=3, help="seconds before the window")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every setting")
    parser.add_argument("--experiments", nargs="+", default=["", AGENT_GRPC_EXPERIMENTS],
                        help="the clients' GRPC_EXPERIMENTS, one window each per round")
    parser.add_argument("--server-experiments", default="",
                        help="the server's GRPC_EXPERIMENTS (default: gRPC's defaults)")
    parser.add_argument("--quick", action="store_true",
                        help="CI size: 3 clients, 1 s windows, one round")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.warm, args.rounds = 3, 1.0, 1.0, 1
    check_bounds(parser, args, BOUNDS)
    if any(len(s) > 1000 for s in [*args.experiments, args.server_experiments]):
        parser.error("an experiments setting must be at most 1000 characters")
    if len(args.experiments) > 8:
        parser.error("--experiments takes at most 8 settings")
    return args


def main(argv: list[str] | None = None) -> int:
    """``serve --period P``, ``client --port P``, or a run (flags above)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        asyncio.run(serve(float(argv[argv.index("--period") + 1])))
        return 0
    if argv[:1] == ["client"]:
        asyncio.run(client(int(argv[argv.index("--port") + 1])))
        return 0
    return bench_main(parse, run, markdown, argv)


if __name__ == "__main__":
    sys.exit(main())
