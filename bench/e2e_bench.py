"""End-to-end benchmark: placements per second and submit-to-running latency, real processes.

Starts a hub (SQLite) and N simulated member clusters as processes through the real join
flow, submits tasks in batches over REST, and measures

- placement throughput: tasks leaving Queued per second, from the first submit until every
  task has been placed;
- submit-to-running latency (p50, p99): from the ``Submitted`` to the ``Running`` event of
  each task, both stamped by the hub.

Every figure is also given as a ratio to a baseline measured in the same run on the same
hub, because the machines are shared and noisy: throughput against the rate the REST API
stores submitted tasks (a batch submit, nothing placed), latency against one REST round
trip (``GET /healthz``). ``--quick`` is the CI size. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from fuyaoctl.client import Client
from fuyaoctl.localstack import LocalStack

MODELS = [("NVIDIA-H100-80GB-HBM3", 8), ("NVIDIA-A100-SXM4-80GB", 8),
          ("Tesla-V100-SXM2-32GB", 8), ("Tesla-T4", 4)]


def fleet_file(path: Path, index: int, nodes: int) -> Path:
    """A cluster of ``nodes`` GPU nodes; models rotate between clusters."""
    product, gpus = MODELS[index % len(MODELS)]
    pools = [{"name": f"n{index}", "count": nodes,
              "labels": {"kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": product},
              "allocatable": {"cpu": "128", "memory": "1Ti", "pods": "256",
                              "nvidia.com/gpu": str(gpus)}}]
    path.write_text(yaml.safe_dump({"nodePools": pools}))
    return path


def trace_slices(path: Path, clusters: int) -> list[str]:
    """Split a trace node list (``openb_node_list_*.csv``) into ``clusters`` contiguous
    slices, one per member, as ``FILE.csv:START:COUNT`` fleet specs."""
    rows = sum(1 for _ in path.open()) - 1
    size = -(-rows // clusters)
    return [f"{path}:{i * size}:{min(size, rows - i * size)}" for i in range(clusters)
            if i * size < rows]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def baseline_rtt(client: Client, n: int = 50) -> float:
    """Median seconds of one REST round trip."""
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        client.health()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def submit_rate(client: Client, tasks: int, batch: int, prefix: str,
                spec: dict[str, Any]) -> float:
    """Tasks stored per second through batch submits."""
    started = time.perf_counter()
    for i in range(0, tasks, batch):
        client.submit_tasks([{**spec, "name": f"{prefix}-{j}"}
                             for j in range(i, min(tasks, i + batch))])
    return tasks / (time.perf_counter() - started)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    home = Path(tempfile.mkdtemp(prefix="fuyao-bench-"))
    with LocalStack(home=home, agent_args=["--heartbeat-interval", "1"]) as stack:
        stack.start_hub()
        names = [f"c{i:02d}" for i in range(args.clusters)]
        fleets: list[Path | str] = (
            list(trace_slices(args.trace, args.clusters)) if args.trace else
            [fleet_file(home / f"{n}.yaml", i, args.nodes) for i, n in enumerate(names)])
        for name, fleet in zip(names, fleets, strict=True):
            stack.join_and_start(name, fleet)
        stack.wait_ready(names, timeout=120)
        with stack.client() as client:
            rtt = baseline_rtt(client)
            # Baseline: store tasks the placement loop can never place (no such model).
            stored_rate = submit_rate(client, args.tasks, args.batch, "base",
                                      {"gpu": 1, "gpu_model": "B200"})
            for i in range(args.tasks):        # out of the queue before the real run
                client.cancel_task(f"base-{i}")
            started = time.perf_counter()
            submit_rate(client, args.tasks, args.batch, "job",
                        {"gpu": 1, "duration": "10m"})
            # Poll cheaply (only the still-queued tasks come back): the poller shares the
            # machine with the hub it measures.
            while queued := len(client.list_tasks(state="Queued")):
                if time.perf_counter() - started > args.timeout:
                    raise SystemExit(f"{queued}/{args.tasks} still queued after {args.timeout}s")
                time.sleep(0.1)
            placed_rate = args.tasks / (time.perf_counter() - started)
            deadline = time.perf_counter() + args.timeout
            while len(client.list_tasks(state="Running")) < args.tasks:
                if time.perf_counter() > deadline:
                    raise SystemExit("tasks did not all reach Running in time")
                time.sleep(0.1)
            latencies = []
            for i in range(0, args.tasks, max(1, args.tasks // args.sample)):
                events = {e.kind: e.at for e in client.get_task(f"job-{i}").events}
                latencies.append((events["Running"] - events["Submitted"]).total_seconds())
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    return {
        "clusters": args.clusters, "tasks": args.tasks,
        "fleet": str(args.trace) if args.trace else f"{args.nodes} synthetic nodes/cluster",
        "placements_per_s": round(placed_rate, 1),
        "baseline_stored_per_s": round(stored_rate, 1),
        "placement_vs_store_ratio": round(placed_rate / stored_rate, 3),
        "submit_to_running_p50_ms": round(p50 * 1000, 1),
        "submit_to_running_p99_ms": round(p99 * 1000, 1),
        "baseline_rest_rtt_ms": round(rtt * 1000, 2),
        "p50_latency_in_rtts": round(p50 / rtt, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=50, help="nodes per cluster")
    parser.add_argument("--trace", type=Path, default=None,
                        help="split this trace node list (openb_node_list_*.csv) among the "
                             "clusters instead of synthetic fleets")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--sample", type=int, default=200, help="tasks sampled for latency")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--quick", action="store_true", help="CI size: 10 clusters, 200 tasks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.tasks, args.batch, args.sample = 5, 200, 100, 50
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
