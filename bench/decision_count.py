"""Instructions a placement decision costs, counted by callgrind: cold (a request shape's
first decision) and steady (the rest), optionally against another tree in the same run.

Seconds on a shared 2-core machine move 1.1-1.4x from one hour to the next
(docs/benchmarks.md); an instruction count does not: run twice, the same tree and seed give
the same count to within 0.1% (``PYTHONHASHSEED=0``, the collector off). Each measure is one
run of this script's driver under ``valgrind --tool=callgrind``, collecting only inside the
compiled ``Scheduler.schedule`` (``--toggle-collect`` on its mypyc entry point, found in the
engine's shared library), on ``placement_bench``'s fleet, requests and churn:

- **cold**: the fleet built, then one request of each shape (``placement_bench.shape_of``)
  among the bench's request stream decided, nothing else: each builds its shape's verdicts
  and scores over every cluster, what a hub pays once per new shape. Instructions per first
  decision and per cluster.
- **steady**: the same first decisions, then the bench's loop (a decision, its reserve, the
  oldest reservation beyond ``--live`` released, node reports at ``--delta-rate``) run twice
  to two lengths; the difference of the two counts over the difference of their lengths is
  what a decision costs once every shape is known and the fleet keeps changing.

``--against DIR`` counts a second tree (another checkout, its engine compiled: this script's
driver imports ``hub`` from there through ``PYTHONPATH``) with the same driver and reports
``ratio`` = this tree / DIR for each measure. ``--top N`` lists, per decision, the N
functions with the most instructions of their own (``top_self``: CPython's dict lookups and
attribute reads among them) and the N compiled engine functions with the most including what
they called (``top_engine``: ``scheduler.Scheduler._judge``); for steady, the difference of
the two runs. The engine must be compiled (``./scripts/compile.sh``): the
count has no entry point to toggle on in the Python source. ``valgrind`` comes from Debian
(``apt-get install valgrind``). A full run takes 10-25 minutes on a 2-core machine
(``--jobs 2`` runs two counts at once).

    .venv/bin/python bench/decision_count.py                          # 1,000 clusters x 100
    .venv/bin/python bench/decision_count.py --against /tmp/base --jobs 2 --top 15
    .venv/bin/python bench/decision_count.py --quick --json           # CI size
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flags import bench_main, check_bounds  # beside this file

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENTRY = re.compile(rb"CPyPy_[A-Za-z0-9_]*?___Scheduler___schedule(?=\x00)")
SUMMARY = re.compile(r"^(?:summary|totals): (\d+)", re.M)
LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")
MEASURES = ("cold", "steady")
LIMITS = {"clusters": (1, 2000), "nodes": (1, 2000), "requests": (1, 100_000),
          "live": (1, 100_000), "delta_rate": (0, 10), "top": (0, 100), "jobs": (1, 8),
          "seed": (0, 2**32)}


# -- the driver: what runs under valgrind --------------------------------------------------

def drive(measure: str, clusters: int, nodes: int, loop: int, requests: int, live: int,
          delta_rate: float, seed: int) -> dict[str, object]:
    """Build the bench's fleet and decide what ``measure`` counts; return what was done.

    ``placement_bench`` is imported from beside this script, ``hub`` from ``sys.path``
    (``PYTHONPATH`` names the tree being counted)."""
    import placement_bench as pb

    from hub import native
    from hub.placement import PlacementRequest, Scheduler

    gc.disable()   # its passes would be charged to whichever function allocated when one fell due
    rng = random.Random(seed)
    fleet = pb.build_fleet(rng, clusters, nodes)
    sched = Scheduler(fleet, pb.BENCH_PROFILE)
    reqs = pb.make_requests(rng, requests)
    firsts: dict[tuple[object, ...], PlacementRequest] = {}
    for req in reqs:
        firsts.setdefault(pb.shape_of(req), req)
    for req in firsts.values():
        sched.schedule(req)
    churn = pb.Churn(fleet, rng, live, delta_rate)
    if measure == "steady":
        for i, req in enumerate(reqs[:loop]):
            churn.after(req, sched.schedule(req))
            if i % 100 == 99:
                gc.collect(0)   # outside the counted function: no cycle piles up unswept
    return {"engine": str(native.STATE), "first_decisions": len(firsts), "loop": loop,
            "placed": churn.placed}


# -- the runner: valgrind, its counts, the report ------------------------------------------

@dataclass(frozen=True)
class Count:
    """One callgrind run: the instructions collected and the driver's own account."""

    total: int
    functions: dict[str, int]   # own instructions
    engine: dict[str, int]      # the compiled engine's functions, inclusive
    driven: dict[str, object]


def entry_point(tree: Path) -> str:
    """The mypyc entry point of ``Scheduler.schedule`` in ``tree``'s compiled engine."""
    libs = sorted((tree / "hub").glob("native_engine__mypyc*.so"))
    for lib in libs:
        found = ENTRY.search(lib.read_bytes())
        if found:
            return found.group().decode()
    raise SystemExit(f"{tree}: the placement engine is not compiled (no "
                     "hub/native_engine__mypyc*.so naming Scheduler.schedule): run "
                     "./scripts/compile.sh there")


def costs(path: Path, inclusive: bool) -> dict[str, int]:
    """Each function's instructions in a callgrind output, from callgrind_annotate's table:
    its own (a function listed under two source files, an inlined header's, or recursing,
    is summed), or with ``inclusive`` those of the engine's compiled functions and what they
    called (mypyc's ``CPyDef_module___Class___method`` shown as ``module.Class.method``)."""
    done = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                           "--threshold=100", "--auto=no", str(path)],
                          capture_output=True, text=True, check=True)
    found: dict[str, int] = {}
    for line in done.stdout.split("file:function", 1)[-1].split("\n")[2:]:
        m = LINE.match(line)
        if not m:
            continue
        name = m.group(2).split(" [", 1)[0].rsplit(":", 1)[-1].split("'", 1)[0]
        if inclusive:
            if not name.startswith("CPyDef_"):
                continue
            name = ".".join(name.removeprefix("CPyDef_").split("___"))
            found[name] = max(found.get(name, 0), int(m.group(1).replace(",", "")))
        else:
            found[name] = found.get(name, 0) + int(m.group(1).replace(",", ""))
    return found


def count(tree: Path, label: str, measure: str, loop: int, args: argparse.Namespace,
          keep: Path) -> Count:
    """Run the driver under callgrind against ``tree``; ``keep`` holds the output file
    (``callgrind.LABEL.MEASURE.LOOP``)."""
    out = keep / f"callgrind.{label}.{measure}.{loop}"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)}
    env.pop("FUYAO_PURE", None)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           f"--toggle-collect={entry_point(tree)}", sys.executable, str(Path(__file__)),
           "--driver", measure, "--clusters", str(args.clusters), "--nodes", str(args.nodes),
           "--loop", str(loop), "--requests", str(args.requests), "--live", str(args.live),
           "--steady", *map(str, args.steady),
           "--delta-rate", str(args.delta_rate), "--seed", str(args.seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"the driver failed under valgrind ({tree}, {measure}):\n"
                         + done.stderr[-3000:])
    driven: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(driven["engine"]).startswith("compiled"):
        raise SystemExit(f"{tree}: the engine ran from source ({driven['engine']}): "
                         "run ./scripts/compile.sh there")
    total = SUMMARY.search(out.read_text(errors="replace"))
    if total is None or int(total.group(1)) == 0:
        raise SystemExit(f"{out}: callgrind collected nothing inside Scheduler.schedule")
    return Count(int(total.group(1)), costs(out, False) if args.top else {},
                 costs(out, True) if args.top else {}, driven)


def top(costs: dict[str, int], per: float, n: int) -> list[dict[str, object]]:
    """The ``n`` functions with the largest own instructions, each divided by ``per``."""
    ranked = sorted(costs.items(), key=lambda kv: -abs(kv[1]))[:n]
    return [{"function": name, "instructions": round(value / per)} for name, value in ranked]


def submit(tree: Path, label: str, args: argparse.Namespace, keep: Path,
           pool: ThreadPoolExecutor) -> dict[str, Future[Count]]:
    """Start one tree's runs: the cold run and, unless ``--cold-only``, the two steady."""
    runs = {"cold": pool.submit(count, tree, label, "cold", 0, args, keep)}
    if not args.cold_only:
        for loop in args.steady:
            runs[f"steady{loop}"] = pool.submit(count, tree, label, "steady", loop, args, keep)
    return runs


def figures(runs: dict[str, Future[Count]], args: argparse.Namespace,
            tree: Path) -> dict[str, Any]:
    """One tree's figures from its finished runs."""
    done = {key: future.result() for key, future in runs.items()}
    cold = done["cold"]
    firsts = int(str(cold.driven["first_decisions"]))
    out: dict[str, Any] = {
        "tree": str(tree), "engine": cold.driven["engine"], "first_decisions": firsts,
        "cold": {"instructions": cold.total, "per_decision": round(cold.total / firsts),
                 "per_cluster": round(cold.total / firsts / args.clusters)}}
    if args.top:
        out["cold"]["top_self"] = top(cold.functions, firsts, args.top)
        out["cold"]["top_engine"] = top(cold.engine, firsts, args.top)
    if not args.cold_only:
        short, long = (done[f"steady{loop}"] for loop in args.steady)
        span = args.steady[1] - args.steady[0]
        steady: dict[str, Any] = {
            "loops": list(args.steady), "instructions": [short.total, long.total],
            "per_decision": round((long.total - short.total) / span),
            "placed": [short.driven["placed"], long.driven["placed"]]}
        if args.top:
            for key, field in (("top_self", "functions"), ("top_engine", "engine")):
                a, b = getattr(short, field), getattr(long, field)
                steady[key] = top({k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)},
                                  span, args.top)
        out["steady"] = steady
    return out


def markdown(result: dict[str, Any]) -> str:
    """The figures as a table (with the second tree and the ratio when one was counted),
    then the ``--top`` lists."""
    base = result.get("against")
    head = result["head"]
    rows = ["| instructions | this tree |" + (" against | ratio |" if base else ""),
            "|---|---:|" + ("---:|---:|" if base else "")]
    for measure, key in (("cold", "per_decision"), ("cold", "per_cluster"),
                         ("steady", "per_decision")):
        if measure in head:
            line = f"| {measure}, {key.replace('_', ' ')} | {head[measure][key]:,} |"
            if base:
                line += f" {base[measure][key]:,} | {result['ratio'][measure]:.4f}x |"
            rows.append(line)
    for label in ("head", "against"):
        tree = result.get(label) or {}
        for measure in MEASURES:
            for kind in ("top_self", "top_engine"):
                listed = tree.get(measure, {}).get(kind, [])
                if listed:
                    rows += ["", f"{label}, {measure}, {kind.replace('_', ' ')} "
                             "(instructions a decision):", ""]
                    rows += [f"    {row['instructions']:>12,}  {row['function']}"
                             for row in listed]
    return "\n".join(rows)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Count this tree (and ``--against``), return the JSON summary."""
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed: apt-get install valgrind")
    trees = [ROOT] + ([args.against] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="decision-count-") as scratch, \
            ThreadPoolExecutor(args.jobs) as pool:
        keep = args.keep or Path(scratch)
        keep.mkdir(parents=True, exist_ok=True)
        for tree in trees:
            entry_point(tree)   # refuse before the first slow run
        runs = [submit(tree, label, args, keep, pool)
                for tree, label in zip(trees, ("head", "against"), strict=False)]
        results = [figures(r, args, tree) for r, tree in zip(runs, trees, strict=True)]
    out: dict[str, Any] = {
        "clusters": args.clusters, "nodes_per_cluster": args.nodes, "seed": args.seed,
        "requests": args.requests, "live": args.live, "delta_rate": args.delta_rate,
        "head": results[0]}
    if args.against:
        head, base = results
        out["against"] = base
        out["ratio"] = {m: round(head[m]["per_decision"] / base[m]["per_decision"], 4)
                        for m in MEASURES if m in head}
        if head["first_decisions"] != base["first_decisions"]:
            out["warning"] = "the trees decided a different number of first decisions"
    return out


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100, help="nodes per cluster")
    parser.add_argument("--requests", type=int, default=6500,
                        help="the request stream whose shapes the cold run decides once each")
    parser.add_argument("--steady", type=int, nargs=2, default=(2500, 6500),
                        metavar=("SHORT", "LONG"),
                        help="the two loop lengths whose counts' difference is steady")
    parser.add_argument("--cold-only", action="store_true",
                        help="count the first decisions only (one run a tree, not three)")
    parser.add_argument("--live", type=int, default=5000,
                        help="reservations kept before the oldest is released")
    parser.add_argument("--delta-rate", type=float, default=0.5,
                        help="agent node reports applied per decision")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--against", type=Path, help="another tree to count the same way")
    parser.add_argument("--top", type=int, default=0,
                        help="list the N functions with the most instructions a decision")
    parser.add_argument("--jobs", type=int, default=1, help="counts run at once")
    parser.add_argument("--keep", type=Path, help="keep the callgrind outputs in this directory")
    parser.add_argument("--quick", action="store_true",
                        help="CI size: 10 clusters x 50 nodes, loops of 100 and 300")
    parser.add_argument("--json", action="store_true", help="print only a JSON summary")
    parser.add_argument("--driver", choices=MEASURES, help=argparse.SUPPRESS)
    parser.add_argument("--loop", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.clusters, args.nodes, args.requests, args.steady = 10, 50, 400, (100, 300)
        args.live = min(args.live, 200)
    check_bounds(parser, args, LIMITS)
    short, long = args.steady
    if not 0 <= short < long <= args.requests:
        parser.error(f"--steady needs 0 <= SHORT < LONG <= --requests, not {short} {long}")
    if args.against is not None:
        args.against = args.against.resolve()
        if not (args.against / "hub" / "native.py").exists():
            parser.error(f"--against {args.against}: not a Fuyao tree (no hub/native.py)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.driver:   # under valgrind: decide, say what was decided
        print(json.dumps(drive(args.driver, args.clusters, args.nodes, args.loop, args.requests,
                               args.live, args.delta_rate, args.seed)))
        return 0
    return bench_main(lambda _: args, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
