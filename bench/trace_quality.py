"""Placement quality on the public Alibaba GPU trace: federation vs the FGD single pool.

The FGD paper (ATC'23) replays the "openb" trace on one pool of 1,523 nodes and reports the
GPU allocation ratio once arrived GPU demand reaches 100% of capacity (tasks only arrive).
This bench replays the same trace with the nodes split into K member clusters: the real hub
(``FleetView`` + ``Scheduler``, default profile, or a random feasible cluster as the
federation baseline) picks a cluster for every task and each member's best-fit
``LocalScheduler`` binds it (see ``trace_replay``). K=1 is the single pool. It prints the
allocation ratio at 50/80/90/100% arrived, mean over seeds, next to the FGD policies' figures
read from the authors' cached results, and each run's ratio to BestFit and FGD.

    .venv/bin/python bench/trace_quality.py                      # K=1,2,4,8, seeds 42-51
    .venv/bin/python bench/trace_quality.py --headroom 0,0.1 --split contiguous
    .venv/bin/python bench/trace_quality.py --quick --json       # CI size

Headroom defaults to 0: the FGD experiment keeps no failover reserve.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_replay import (
    ClusterChoice,
    Federation,
    Split,
    arrival_order,
    check_constraints,
    gpu_milli_of,
    load_nodes,
    load_tasks,
    replay,
    split_nodes,
)

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.fleetfile import load_fleet

# shared/ sits beside the repository (as on the developers' machines and in CI).
TRACES = Path(os.environ.get("FUYAO_TRACES")
              or Path(__file__).resolve().parents[2] / "shared" / "traces")
NODES = "alibaba-gpu-v2023/openb_node_list_all_node.csv"
PODS = "alibaba-gpu-v2023/openb_pod_list_default.csv"
FGD = "fgd-results/analysis_allo_discrete.csv"
QUICK_NODES = 400   # --quick: the first 400 rows of the node list (1,002 GPUs)


# -- the FGD authors' single-pool figures -----------------------------------------------------


def fgd_baselines(path: Path, workload: str, points: Sequence[int]) -> dict[str, dict[int, float]]:
    """Mean allocation % per FGD policy (``05-BestFit`` -> ``BestFit``) at each point."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read FGD results: {exc.strerror or exc}") from exc
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in csv.DictReader(text.splitlines()):
        if row.get("workload") != workload:
            continue
        policy = (row.get("sc_policy") or "").split("-", 1)[-1]
        for p in points:
            value = (row.get(str(p)) or "").strip()
            if value:
                sums[policy][p].append(float(value))
    return {policy: {p: statistics.fmean(v) for p, v in by_point.items()}
            for policy, by_point in sorted(sums.items())}


# -- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One federation setting, replayed once per seed."""

    clusters: int
    choice: str          # a ClusterChoice, or "-" for K=1 (nothing to choose)
    headroom: float
    split: str


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every case over every seed; the summary the CLI prints."""
    started = time.monotonic()
    nodes = load_nodes(args.nodes)
    raw_models = {n.name: n.labels.get("nvidia.com/gpu.product", "")
                  for n in load_fleet(args.nodes).nodes}
    tasks = load_tasks(Path(args.pods))
    capacity = gpu_milli_of(nodes)
    cases = [Case(k, "-" if k == 1 else c, h, s)
             for s in args.split for h in args.headroom for k in args.clusters
             for c in (args.choices[:1] if k == 1 else args.choices)]
    per_case: dict[Case, list[Any]] = {c: [] for c in cases}
    mismatched = 0
    for seed in args.seeds:
        order = arrival_order(tasks, seed, capacity)
        mismatched = max(mismatched, check_constraints(order, nodes, raw_models))
        for case in cases:
            members = split_nodes(nodes, case.clusters, Split(case.split))
            choice = ClusterChoice.DEFAULT if case.choice == "-" else ClusterChoice(case.choice)
            fed = Federation(members, choice=choice, headroom=case.headroom, seed=seed)
            per_case[case].append(replay(fed, order, args.until))
            if not args.json:
                r = per_case[case][-1]
                print(f"  seed {seed} K={case.clusters} {case.choice} h={case.headroom:g} "
                      f"{case.split}: {r.at(args.until) or 0:.2f}% at {args.until:g}%",
                      file=sys.stderr)
    fgd = fgd_baselines(Path(args.fgd), Path(args.pods).stem, args.points)
    return {
        "nodes": len(nodes), "gpus": capacity // 1000, "tasks_in_trace": len(tasks),
        "seeds": args.seeds, "until_pct": args.until, "points": args.points,
        "member_policy": "best-fit", "gpu_spec_mismatched_tasks": mismatched,
        "fgd_single_pool": {p: {str(k): round(v, 2) for k, v in by.items()}
                            for p, by in fgd.items()},
        "runs": [_summary(c, per_case[c], args.points, fgd) for c in cases],
        "seconds": round(time.monotonic() - started, 1),
    }


def _summary(case: Case, runs: list[Any], points: Sequence[int],
             fgd: dict[str, dict[int, float]]) -> dict[str, Any]:
    alloc = {str(p): _mean([r.at(p) for r in runs]) for p in points}
    last = alloc[str(points[-1])]
    out: dict[str, Any] = {
        "clusters": case.clusters, "choice": case.choice, "headroom": case.headroom,
        "split": case.split, "alloc_pct": alloc,
        f"alloc_{points[-1]}_by_seed": [_round(r.at(points[-1])) for r in runs],
        f"alloc_{points[-1]}_sd": _sd([r.at(points[-1]) for r in runs]),
    }
    for key in runs[0].outcomes:
        out[key] = statistics.fmean(r.outcomes[key] for r in runs)
    for key in runs[0].counters:
        out[key] = statistics.fmean(r.counters[key] for r in runs)
    for policy in ("BestFit", "FGD"):
        base = fgd.get(policy, {}).get(points[-1])
        out[f"vs_{policy}"] = None if base is None or last is None else round(last / base, 4)
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 2) if len(known) == len(values) and known else None


def _sd(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.stdev(known), 2) if len(known) == len(values) > 1 else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# -- output -----------------------------------------------------------------------------------


def render(out: dict[str, Any]) -> str:
    """The two tables: FGD's single pool, then this run's federation cases."""
    points = out["points"]
    cols = "".join(f"{str(p) + '%':>8}" for p in points)
    lines = [f"{out['nodes']} nodes, {out['gpus']} GPUs; seeds {_seeds(out['seeds'])}; "
             f"allocation % of GPU capacity at arrived workload %", "",
             "FGD single pool (authors' simulator, mean of their seeds 42-51)",
             f"{'policy':<16}{cols}"]
    for policy, by in out["fgd_single_pool"].items():
        lines.append(f"{policy:<16}" + "".join(_cell(by.get(str(p))) for p in points))
    lines += ["", "Federation (hub cluster choice + best-fit member schedulers)",
              f"{'K':>2} {'choice':<8}{'headroom':>9} {'split':<12}{cols}{'sd':>6}"
              f"{'no-cluster':>11}{'other-model':>12}{'/BestFit':>9}{'/FGD':>7}"]
    for r in out["runs"]:
        lines.append(
            f"{r['clusters']:>2} {r['choice']:<8}{r['headroom']:>9g} {r['split']:<12}"
            + "".join(_cell(r["alloc_pct"][str(p)]) for p in points)
            + _sd_cell(r[f"alloc_{points[-1]}_sd"])
            + f"{r['no_cluster']:>11.1f}{r['member_chose_other_model']:>12.1f}"
            + f"{_ratio(r['vs_BestFit']):>9}{_ratio(r['vs_FGD']):>7}")
    lines += ["", f"sd: standard deviation over seeds at {points[-1]}%; no-cluster: tasks the hub "
              "found no cluster for (mean per seed);",
              "other-model: GPU tasks the member bound to another GPU model than the hub's fit "
              "expected (mean per seed).",
              f"gpu_spec constraints that differ from the trace's meaning: "
              f"{out['gpu_spec_mismatched_tasks']} tasks. {out['seconds']} s."]
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return f"{'-':>8}" if value is None else f"{value:>8.2f}"


def _sd_cell(value: float | None) -> str:
    return f"{'-':>6}" if value is None else f"{value:>6.2f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _seeds(seeds: Sequence[int]) -> str:
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


# -- command line -----------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            out += list(range(int(low), int(high) + 1)) if high else [int(low)]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 1,2,4 or 42-51") \
                from exc
    return out


def _floats(text: str) -> list[float]:
    try:
        return [float(p) for p in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 0,0.1") from exc


def _names(allowed: type[ClusterChoice] | type[Split]) -> Any:
    def parse(text: str) -> list[str]:
        values = [p.strip() for p in text.split(",")]
        bad = [v for v in values if v not in {a.value for a in allowed}]
        if bad:
            raise argparse.ArgumentTypeError(
                f"{bad[0]!r}: expected {', '.join(a.value for a in allowed)}")
        return values
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="the shared traces folder")
    parser.add_argument("--nodes", help=f"node list, FILE.csv[:START[:COUNT]] (<traces>/{NODES})")
    parser.add_argument("--pods", help=f"pod list (<traces>/{PODS})")
    parser.add_argument("--fgd", help=f"FGD results CSV (<traces>/{FGD})")
    parser.add_argument("--clusters", type=_ints, help="K values (1,2,4,8)")
    parser.add_argument("--seeds", type=_ints, help="arrival-order seeds (42-51)")
    parser.add_argument("--choices", type=_names(ClusterChoice), default=["default", "random"],
                        help="hub cluster choice: default,random")
    parser.add_argument("--headroom", type=_floats, default=[0.0], help="e.g. 0,0.1")
    parser.add_argument("--split", type=_names(Split), default=["round-robin"],
                        help="round-robin (node i -> cluster i mod K) and/or contiguous")
    parser.add_argument("--until", type=int, default=100, help="arrived workload %% to stop at")
    parser.add_argument("--quick", action="store_true",
                        help=f"CI size: the first {QUICK_NODES} nodes; seed 42, K=1,4 unless given")
    parser.add_argument("--json", action="store_true", help="print only a JSON summary")
    args = parser.parse_args(argv)
    args.nodes = args.nodes or str(args.traces / NODES)
    args.pods = args.pods or str(args.traces / PODS)
    args.fgd = args.fgd or str(args.traces / FGD)
    if args.quick and ".csv:" not in args.nodes:
        args.nodes = f"{args.nodes}:0:{QUICK_NODES}"
    args.seeds = args.seeds or ([42] if args.quick else list(range(42, 52)))
    args.clusters = args.clusters or ([1, 4] if args.quick else [1, 2, 4, 8])
    args.points = sorted({p for p in (50, 80, 90) if p < args.until} | {args.until})
    try:
        out = run(args)
    except FuyaoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2) if args.json else render(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
