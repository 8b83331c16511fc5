"""End-to-end benchmark: REST batch submit -> Running through real processes, and where the
time went.

Starts a hub (SQLite, REST rate limit off) and N simulated member clusters as processes
through the real join flow, then

1. **burst**: submits ``--tasks`` one-GPU tasks in batches of ``--batch`` as fast as the REST
   API takes them; placement throughput is tasks leaving Queued per second from the first
   submit until every task is placed, ``running_per_s`` until every one runs;
2. **half load** (``--half-load``, on by default): once the burst's tasks have ended, submits
   tasks at half the burst's placement rate (or ``--rate``) for ``--half-seconds``, each
   running ``--half-duration``; the figure is submit-to-running latency at that load;
3. **baselines, same run, same machine**: a bare grpc.aio stream echo between two processes
   (``bench/grpc_echo.py``, PlaceTask-sized messages), the rate the REST API stores tasks
   (a batch submit of tasks nothing can place), one REST round trip.

With ``--backlog N``, N tasks that no member can run (a GPU model none has, priority -1) are
queued before the burst and wait through every phase, as an over-subscribed fleet's queue
does; a hub that parks them (``fuyao_tasks_parked``, ``hub.queueing.parking``) has them all
parked before the burst starts (``backlog_parked_s``: from their first submit).

Latency is from the ``Submitted`` to the ``Running`` event of each sampled task (both stamped
by the hub). The breakdown of each phase comes from the hub's ``fuyao_task_stage_seconds``
histogram (``hub/stages.py``: store, queue, decide, commit, send, member, report, apply;
means and histogram medians), read from ``/metrics`` before and after the phase.

    python bench/e2e_bench.py                        # 10 members x 50 nodes, markdown
    python bench/e2e_bench.py --clusters 100 --json  # one JSON object
    python bench/e2e_bench.py --quick                # CI size
    python bench/e2e_bench.py --backlog 20000        # with 20,000 tasks waiting throughout
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc_echo  # beside this file
import httpx
import yaml
from flags import check_bounds  # beside this file
from prometheus_client.parser import text_string_to_metric_families

from fuyaoctl.client import Client
from fuyaoctl.localstack import LocalStack, save_join
from hub import native
from hub.stages import STAGES

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


class HubMetrics:
    """Reads the hub's ``/metrics``: task counts by state and the stage histogram."""

    def __init__(self, port: int) -> None:
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def scrape(self) -> dict[str, Any]:
        """{"tasks": {state: n}, "stages": {stage: {"count", "sum", "buckets": [(le, n)]}},
        "counts": {"cycles" (that decided), "decisions", "<kind> messages" (from agents)}}"""
        text = self.http.get("/metrics").text
        tasks: dict[str, float] = {}
        counts: dict[str, float] = {"cycles": 0.0, "decisions": 0.0}
        stages: dict[str, dict[str, Any]] = {s: {"count": 0.0, "sum": 0.0, "buckets": []}
                                             for s in STAGES}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "fuyao_tasks":
                    tasks[sample.labels["state"]] = sample.value
                elif sample.name == "fuyao_placement_cycle_decide_seconds_count":
                    counts["cycles"] = sample.value
                elif sample.name == "fuyao_placement_decisions_total":
                    counts["decisions"] = sample.value
                elif sample.name == "fuyao_agent_messages_total":
                    counts[f"{sample.labels['kind']} messages"] = sample.value
                elif sample.name == "fuyao_tasks_parked":
                    tasks["parked"] = sample.value
                elif sample.name.startswith("fuyao_task_stage_seconds"):
                    stage = stages.get(sample.labels.get("stage", ""))
                    if stage is None:
                        continue
                    if sample.name.endswith("_bucket"):
                        stage["buckets"].append((float(sample.labels["le"]), sample.value))
                    elif sample.name.endswith("_count"):
                        stage["count"] = sample.value
                    elif sample.name.endswith("_sum"):
                        stage["sum"] = sample.value
        return {"tasks": tasks, "stages": stages, "counts": counts}

    def count(self, state: str) -> int:
        """Active tasks in ``state`` (``parked``: the queued tasks set aside, -1 for a hub
        that does not park)."""
        return int(self.scrape()["tasks"].get(state, -1 if state == "parked" else 0))


def breakdown(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per stage between two scrapes: tasks, mean ms, median ms (from the buckets)."""
    out: dict[str, dict[str, float]] = {}
    for stage in STAGES:
        a, b = before["stages"][stage], after["stages"][stage]
        count = b["count"] - a["count"]
        if count <= 0:
            continue
        old = dict(a["buckets"])
        buckets = [(le, n - old.get(le, 0.0)) for le, n in sorted(b["buckets"])]
        out[stage] = {"tasks": count, "mean_ms": round((b["sum"] - a["sum"]) / count * 1000, 2),
                      "p50_ms": round(_median(buckets, count) * 1000, 2)}
    return out


def counts_per_task(before: dict[str, Any], after: dict[str, Any],
                    tasks: int) -> dict[str, float]:
    """Between two scrapes, per task: the placement cycles that decided, the decisions, and
    the agents' messages by kind (what the hub's work a task is made of, counted)."""
    out = {}
    for key, value in after["counts"].items():
        grown = value - before["counts"].get(key, 0.0)
        if grown > 0:
            out[key] = round(grown / tasks, 4)
    return out


def _median(buckets: list[tuple[float, float]], count: float) -> float:
    """Median by linear interpolation inside the histogram's cumulative buckets."""
    lower, below = 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative >= count / 2:
            if le == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((count / 2 - below) / inside if inside else 0.0)
        lower, below = le, cumulative
    return lower


def submit(stack: LocalStack, prefix: str, count: int, batch: int, spec: dict[str, Any],
           rate: float = 0.0, submitters: int = 1) -> float:
    """Submit ``count`` tasks in batches from ``submitters`` clients at once (paced at
    ``rate`` tasks/s overall if given); returns tasks/s."""
    starts = list(range(0, count, batch))
    started = time.perf_counter()

    def one(share: list[int]) -> None:
        with Client(stack.url, token=stack.token, timeout=120) as own:
            for i in share:
                if rate > 0:
                    ahead = started + i / rate - time.perf_counter()
                    if ahead > 0:
                        time.sleep(ahead)
                own.submit_tasks([{**spec, "name": f"{prefix}-{j}"}
                                  for j in range(i, min(count, i + batch))])

    with ThreadPoolExecutor(submitters) as pool:
        for done in [pool.submit(one, starts[k::submitters]) for k in range(submitters)]:
            done.result()
    return count / (time.perf_counter() - started)


def wait_for(check: Any, timeout: float, what: str) -> None:
    """Poll ``check()`` every 50 ms until true."""
    deadline = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def wait_members(stack: LocalStack, names: list[str], timeout: float) -> None:
    """Wait until every member has been Ready at least once, then until all are Ready at
    the same moment (bounded again by ``timeout``). At 100 members on a loaded 2-core
    machine the 200 processes take minutes to start, and a member Ready early may flap to
    Unknown while the rest start; progress goes to stderr."""
    started = time.perf_counter()
    ever: set[str] = set()
    said = -1
    with Client(stack.url, token=stack.token, timeout=300.0) as client:
        while True:
            states = {c.name: c.state.value for c in client.list_clusters()}
            ready = {n for n in names if states.get(n) == "Ready"}
            ever |= ready
            if len(ready) == len(names):
                return
            dead = [n for n in names
                    if (a := stack.agents.get(n)) is not None and not a.alive()]
            if dead:
                raise SystemExit(f"agent {dead[0]} exited:\n{stack.agents[dead[0]].tail()}")
            waited = time.perf_counter() - started
            if len(ever) != said:
                said = len(ever)
                print(f"members: {len(ever)}/{len(names)} have been Ready, {len(ready)} now "
                      f"({waited:.0f}s)", file=sys.stderr, flush=True)
            limit = timeout if len(ever) < len(names) else 2 * timeout
            if waited > limit:
                late = sorted(n for n in names if n not in ready)[:10]
                raise SystemExit(f"members not Ready after {waited:.0f}s: {late} "
                                 f"({ {n: states.get(n) for n in late} })")
            time.sleep(0.5)


def latencies(client: Client, prefix: str, count: int,
              sample: int) -> tuple[list[float], float, float]:
    """Submit-to-Running seconds of ``sample`` tasks spread over ``count`` (the last one
    included); with the first Submitted and the last Running stamps seen (unix seconds)."""
    out, first, last = [], float("inf"), 0.0
    for i in sorted({*range(0, count, max(1, count // sample)), count - 1}):
        deadline = time.perf_counter() + 120
        while True:     # the Running event is written a moment after the state changes
            events = {e.kind: e.at for e in client.get_task(f"{prefix}-{i}").events}
            if "Running" in events:
                break
            if time.perf_counter() > deadline:
                raise SystemExit(f"{prefix}-{i} did not reach Running: {sorted(events)}")
            time.sleep(0.05)
        out.append((events["Running"] - events["Submitted"]).total_seconds())
        first = min(first, events["Submitted"].timestamp())
        last = max(last, events["Running"].timestamp())
    return out, first, last


class Profiler:
    """``py-spy record`` of the hub process while a phase submits and places (``--profile
    DIR``): collapsed stacks in ``DIR/PHASE.txt``, one line per stack with its sample count,
    only the thread holding the GIL (the process is GIL-bound). A no-op without ``--profile``."""

    def __init__(self, directory: Path | None, pid: int, name: str) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        if directory is None:
            return
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        directory.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--rate", "200", "--nonblocking",
             "--format", "raw", "--threads", "--gil", "-o",
             str(directory / f"{name}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)   # attached before the phase starts

    def stop(self) -> None:
        """Stop recording; py-spy writes its file on SIGINT."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(30)


def cpu_seconds(pid: int, children: bool = True) -> dict[str, float]:
    """CPU seconds (user + system) each thread of process ``pid`` has used, by thread name
    (``/proc``; Linux only, empty elsewhere; the main thread, which runs the event loop and
    so all of the hub's Python but its store threads', as ``main``), and each of its child
    processes as ``child:NAME`` unless ``children`` is False;
    plus ``"total"`` of both: a figure of the hub's own cost per task that the load of other
    processes on the machine hardly moves."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}

    def add(name: str, used: float) -> None:
        out[name] = out.get(name, 0.0) + used
        out["total"] = out.get("total", 0.0) + used

    try:
        kids: list[str] = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            name, used = _stat(f"/proc/{pid}/task/{tid}/stat", tick)
            add("main" if tid == str(pid) else name, used)
            if children:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids += f.read().split()
    except OSError:
        return {}
    for child in kids:
        try:
            name, _ = _stat(f"/proc/{child}/stat", tick)
            for tid in os.listdir(f"/proc/{child}/task"):
                add(f"child:{name}", _stat(f"/proc/{child}/task/{tid}/stat", tick)[1])
        except OSError:
            continue    # ended meanwhile
    return out


def fleet_cpu_seconds(stack: LocalStack) -> dict[str, float]:
    """CPU seconds the stack's agents and their simulated members have used (each process's
    own threads: a member outlives its agent and is read by its own pid), the bench process
    itself (its REST submitters), and the machine's busy and total core seconds
    (``/proc/stat``: every process on it, other users' too). On this 2-core machine the
    members share the cores with the hub; these say whether a phase ran out of machine."""
    out = {"agents": 0.0, "members": 0.0}
    for name, agent in list(stack.agents.items()):
        out["agents"] += cpu_seconds(agent.popen.pid, children=False).get("total", 0.0)
        member = stack.member_pid(name)
        if member is not None:
            out["members"] += cpu_seconds(member, children=False).get("total", 0.0)
    out["bench"] = time.process_time()
    try:
        with open("/proc/stat") as f:
            jiffies = [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return out
    tick = os.sysconf("SC_CLK_TCK")
    idle = jiffies[3] + jiffies[4]            # idle, iowait
    out["machine_total"] = sum(jiffies) / tick
    out["machine_busy"] = (sum(jiffies) - idle) / tick
    return out


def machine_share(before: dict[str, float], after: dict[str, float],
                  tasks: int) -> dict[str, float]:
    """Between two ``fleet_cpu_seconds`` readings: the agents', members' and bench's CPU ms
    per task, and how busy the machine's cores were (0..1)."""
    out = {k: round((after[k] - before[k]) * 1000 / tasks, 3)
           for k in ("agents", "members", "bench")}
    total = after.get("machine_total", 0.0) - before.get("machine_total", 0.0)
    if total > 0:
        out["machine_busy"] = round((after["machine_busy"] - before["machine_busy"]) / total, 3)
    return out


def _stat(path: str, tick: int) -> tuple[str, float]:
    """A ``/proc`` stat file's command name and CPU seconds: the scheduler's own count in
    nanoseconds (``schedstat`` beside it) where the kernel keeps one, else user + system in
    clock ticks - 10 ms apart, so a quiet process over a short phase could read 0 (the CI
    size's members once did)."""
    with open(path) as f:
        stat = f.read()
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    try:
        with open(path.removesuffix("stat") + "schedstat") as f:
            return name, int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        fields = stat[stat.rindex(")") + 2:].split()
        return name, (int(fields[11]) + int(fields[12])) / tick


def cpu_ms_per_task(before: dict[str, float], after: dict[str, float],
                    tasks: int) -> dict[str, float]:
    """Hub CPU milliseconds per task between two ``cpu_seconds`` readings, by thread name
    (the ones that used at least 1%)."""
    spent = {k: after[k] - before.get(k, 0.0) for k in after}
    total = spent.get("total", 0.0)
    return {k: round(v * 1000 / tasks, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])
            if total and v >= 0.01 * total}


def phase(stack: LocalStack, client: Client, metrics: HubMetrics, args: argparse.Namespace,
          prefix: str, count: int, spec: dict[str, Any], rate: float = 0.0,
          batch: int = 0) -> dict[str, Any]:
    """Submit ``count`` tasks in batches of ``batch`` (default ``--batch``), wait until all
    run; throughput, latency, breakdown."""
    before = metrics.scrape()
    assert stack.hub is not None
    pid = stack.hub.popen.pid
    profiler = Profiler(args.profile, pid, prefix)
    cpu_before, fleet_before = cpu_seconds(pid), fleet_cpu_seconds(stack)
    started = time.perf_counter()
    offered = submit(stack, prefix, count, batch or args.batch, spec, rate, args.submitters)
    wait_for(lambda: metrics.count("Queued") <= args.backlog, args.timeout,
             "every task placed")
    placed = count / (time.perf_counter() - started)
    wait_for(lambda: metrics.count("Placed") == 0, args.timeout, "every task running")
    cpu = cpu_ms_per_task(cpu_before, cpu_seconds(pid), count)
    others = machine_share(fleet_before, fleet_cpu_seconds(stack), count)
    profiler.stop()
    lat, first, last = latencies(client, prefix, count, args.sample)
    after = metrics.scrape()
    return {
        "tasks": count, "offered_per_s": round(offered, 1),
        "placements_per_s": round(placed, 1),
        "running_per_s": round(count / max(1e-3, last - first), 1),
        "submit_to_running_p50_ms": round(percentile(lat, 50) * 1000, 1),
        "submit_to_running_p99_ms": round(percentile(lat, 99) * 1000, 1),
        "stages": breakdown(before, after),
        "counts_per_task": counts_per_task(before, after, count),
        "hub_cpu_ms_per_task": cpu,
        "other_cpu_ms_per_task": others,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    home = Path(tempfile.mkdtemp(prefix="fuyao-bench-"))
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {_cpus()} cores, Python {platform.python_version()}",
        "clusters": args.clusters, "tasks": args.tasks, "submitters": args.submitters,
        "fleet": str(args.trace) if args.trace else f"{args.nodes} synthetic nodes/cluster"}
    with LocalStack(home=home, agent_args=["--heartbeat-interval", "1"],
                    hub_args=["--rate-limit", "0"]) as stack:
        stack.start_hub()
        names = [f"c{i:02d}" for i in range(args.clusters)]
        fleets: list[Path | str] = (
            list(trace_slices(args.trace, args.clusters)) if args.trace else
            [fleet_file(home / f"{n}.yaml", i, args.nodes) for i, n in enumerate(names)])
        joined = time.perf_counter()
        # A patient client: at 100 members on a loaded 2-core machine one join has taken
        # more than the SDK's default timeout while the first agents were starting.
        with Client(stack.url, token=stack.token, timeout=300.0) as patient:
            for name, fleet in zip(names, fleets, strict=True):
                resp = patient.join_cluster(name)
                save_join(stack.home, resp.cluster, resp.token, resp.ca_cert)
                stack.start_agent(name, fleet)
        wait_members(stack, names, args.ready_timeout or max(300.0, 6.0 * len(names)))
        result["members_ready_s"] = round(time.perf_counter() - joined, 1)
        metrics = HubMetrics(stack.health_port)
        if args.backlog:
            started = time.perf_counter()
            submit(stack, "waiting", args.backlog, 1000, WAITING, submitters=1)
            result["backlog"] = args.backlog
            result["backlog_stored_s"] = round(time.perf_counter() - started, 1)
            if metrics.count("parked") >= 0:   # a hub that parks: the phases start after
                wait_for(lambda: metrics.count("parked") >= args.backlog, args.timeout,
                         "the backlog to be parked")
                result["backlog_parked_s"] = round(time.perf_counter() - started, 1)
        with stack.client() as client:
            burst = phase(stack, client, metrics, args, "job", args.tasks,
                          {"gpu": 1, "duration": f"{args.burst_duration:g}s"})
            result["burst"] = burst
            if args.half_load:
                wait_for(lambda: metrics.count("Running") + metrics.count("Placed") == 0,
                         args.timeout + args.burst_duration, "the burst's tasks to end")
                rate = args.rate or burst["placements_per_s"] / 2
                result["half_load"] = phase(
                    stack, client, metrics, args, "half", max(1, round(rate * args.half_seconds)),
                    {"gpu": 1, "duration": f"{args.half_duration:g}s"}, rate, args.half_batch)
                result["half_load"]["batch"] = args.half_batch or args.batch
            result["baseline_grpc_echo_per_s"] = round(grpc_echo.echo_rate(args.echo), 1)
            result["baseline_rest_rtt_ms"] = round(_rtt(client) * 1000, 2)
            # Last, so they never sit in the queue of a measured phase: nothing can place them.
            result["baseline_stored_per_s"] = round(
                submit(stack, "base", args.tasks, args.batch, {"gpu": 1, "gpu_model": "B200"},
                       submitters=args.submitters), 1)
    placed = burst["placements_per_s"]
    result["placement_vs_echo"] = round(placed / result["baseline_grpc_echo_per_s"], 3)
    result["placement_vs_store"] = round(placed / result["baseline_stored_per_s"], 3)
    return result


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def _rtt(client: Client, n: int = 50) -> float:
    """Median seconds of one REST round trip (``GET /healthz``)."""
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        client.health()
        samples.append(time.perf_counter() - t)
    return sorted(samples)[n // 2]


def markdown(result: dict[str, Any]) -> str:
    """The figures and the per-stage breakdown as markdown tables."""
    waiting = (f", {result['backlog']:,} tasks waiting throughout"
               if result.get("backlog") else "")
    lines = [f"{result['clusters']} members ({result['fleet']}), {result['submitters']} REST "
             f"submitters{waiting}, {result['date']}, {result['machine']}", "",
             "| phase | tasks | offered/s | placed/s | running/s | P50 ms | P99 ms |",
             "|---|---|---|---|---|---|---|"]
    phases = [(k, result[k]) for k in ("burst", "half_load") if k in result]
    for name, p in phases:
        lines.append(f"| {name} | {p['tasks']} | {p['offered_per_s']:,} | "
                     f"{p['placements_per_s']:,} | {p['running_per_s']:,} | "
                     f"{p['submit_to_running_p50_ms']:,} | {p['submit_to_running_p99_ms']:,} |")
    for name, p in phases:
        cpu = ", ".join(f"{k} {v}" for k, v in p.get("hub_cpu_ms_per_task", {}).items())
        lines.append(f"\nHub CPU ms per task, {name} (submit to Running, by thread): {cpu}")
        other = p.get("other_cpu_ms_per_task", {})
        if other:
            lines.append(f"Other CPU ms per task, {name}: agents {other['agents']}, members "
                         f"{other['members']}, this bench {other['bench']}; machine's cores "
                         f"busy {other.get('machine_busy', 0):.0%}")
        counted = ", ".join(f"{k} {v}" for k, v in p.get("counts_per_task", {}).items())
        if counted:
            lines.append(f"Counted per task, {name}: {counted}")
    lines += ["", f"Baselines, same run: grpc.aio stream echo "
              f"{result['baseline_grpc_echo_per_s']:,} msg/s (burst placements = "
              f"{result['placement_vs_echo']:.0%} of it); REST stores "
              f"{result['baseline_stored_per_s']:,} tasks/s; REST round trip "
              f"{result['baseline_rest_rtt_ms']} ms.", "",
              "| stage | " + " | ".join(f"{n} mean ms | {n} P50 ms" for n, _ in phases) + " |",
              "|---|" + "---|---|" * len(phases)]
    for stage in STAGES:
        cells = []
        for _, p in phases:
            s = p["stages"].get(stage, {"mean_ms": "-", "p50_ms": "-"})
            cells += [str(s["mean_ms"]), str(s["p50_ms"])]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The backlog's tasks (``--backlog``): a GPU model no member has, so they wait throughout;
# at a lower priority, so the phases' tasks are tried before them (at the same priority the
# queue's blocked head would let only ``lookahead`` tasks behind it be tried each cycle).
WAITING: dict[str, Any] = {"gpu": 1, "gpu_model": "B200", "priority": -1}

BOUNDS: dict[str, tuple[float, float]] = {
    "clusters": (1, 1000), "nodes": (1, 100_000), "tasks": (1, 1_000_000),
    "batch": (1, 10_000),      # the REST batch limit (fuyao.spec.TaskBatch)
    "half_batch": (0, 10_000),
    "submitters": (1, 256), "sample": (1, 1_000_000),
    "echo": (1, 10_000_000), "burst_duration": (0, 86_400), "rate": (0, 1_000_000),
    "half_seconds": (0, 3_600), "half_duration": (0, 86_400), "timeout": (1, 86_400),
    "ready_timeout": (0, 86_400), "backlog": (0, 1_000_000),
}
"""Each numeric flag's allowed range (``rate``, ``half_batch`` and ``ready_timeout``: 0 means
the default)."""


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=50, help="nodes per cluster")
    parser.add_argument("--trace", type=Path, default=None,
                        help="split this trace node list (openb_node_list_*.csv) among the "
                             "clusters instead of synthetic fleets")
    parser.add_argument("--tasks", type=int, default=2000, help="tasks in the burst")
    parser.add_argument("--batch", type=int, default=200, help="tasks per REST batch")
    parser.add_argument("--submitters", type=int, default=4,
                        help="REST clients submitting at once (threads)")
    parser.add_argument("--burst-duration", type=float, default=30,
                        help="seconds each burst task runs")
    parser.add_argument("--no-half-load", dest="half_load", action="store_false")
    parser.add_argument("--rate", type=float, default=0,
                        help="half-load rate, tasks/s (default: half the burst's placements/s)")
    parser.add_argument("--half-seconds", type=float, default=4)
    parser.add_argument("--half-batch", type=int, default=0,
                        help="tasks per REST batch in the half load (default: --batch; at "
                             "200 a batch arrives every 200/rate seconds, all at once)")
    parser.add_argument("--half-duration", type=float, default=2,
                        help="seconds each half-load task runs")
    parser.add_argument("--sample", type=int, default=200, help="tasks sampled for latency")
    parser.add_argument("--echo", type=int, default=20_000, help="messages of the echo baseline")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--ready-timeout", type=float, default=0,
                        help="seconds to wait for every member to be Ready "
                             "(default: 6 per member, at least 300)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="record the hub with py-spy while each phase submits and places "
                             "(DIR/job.txt, DIR/half.txt: collapsed stacks)")
    parser.add_argument("--backlog", type=int, default=0,
                        help="tasks queued first that no member can run (a GPU model none "
                             "has): they wait through every phase, as an over-subscribed "
                             "fleet's queue does")
    parser.add_argument("--quick", action="store_true", help="CI size: 10 clusters, 200 tasks")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--output", type=Path, default=None,
                        help="also write the JSON here and the markdown beside it (.md)")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.quick:
        args.nodes, args.tasks, args.batch, args.sample, args.echo = 5, 200, 100, 50, 2000
        args.burst_duration, args.half_seconds, args.half_duration = 5, 1, 0.5
        args.rate = args.rate or 200
    result = run(args)
    result["engine"] = str(native.STATE)   # the hub's too: same tree, same environment
    if args.output is not None:
        args.output.write_text(json.dumps(result, indent=2) + "\n")
        args.output.with_suffix(".md").write_text(markdown(result) + "\n")
    print(json.dumps(result) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
