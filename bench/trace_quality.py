"""Placement quality on the public Alibaba GPU trace: every policy, K clusters, vs FGD's pool.

The FGD paper (ATC'23) replays the "openb" trace on one pool of 1,523 nodes and reports the
GPU allocation ratio once arrived GPU demand reaches 100% of capacity (tasks only arrive).
This bench runs ``fuyaoctl simulate``'s engine (``hub.planning.simulate``: the real hub
placement and member scheduler; one implementation, its JSON reports are what is summed
here) with the nodes split into K member clusters, for every policy: ``default``, ``fgd``
(fragmentation-aware cluster choice + FGD members), and the baselines ``random``,
``static-weight`` and ``dynamic-weight`` (best-fit members). K=1 runs once per member
policy (nothing to choose between clusters). It prints the allocation at 50/80/90/100%
arrived, mean over seeds, beside the FGD authors' figures for the same pod list, and each
run's ratio to their BestFit and FGD. ``--save`` appends every run to a JSON-lines file as
it ends (a sweep cut off keeps its runs); ``--load`` summarizes such files without running.

    .venv/bin/python bench/trace_quality.py                      # K=1,2,4,8, seeds 42-51
    .venv/bin/python bench/trace_quality.py --pods-all --seeds 42-44 --plot docs/x.png
    .venv/bin/python bench/trace_quality.py --quick --json       # CI size
    .venv/bin/python bench/trace_quality.py --seeds 42 --save runs.jsonl   # each run kept
    .venv/bin/python bench/trace_quality.py --load runs.jsonl --markdown --plot docs/x.png

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.fleetfile import load_fleet
from fuyao.fragmentation import STARVED_WEIGHT
from hub.planning.simulate import (
    POLICY_NAMES,
    Split,
    arrival_order,
    gpu_milli_of,
    load_nodes,
    load_pod_list,
    policy,
    simulate,
    split_nodes,
    workload_mix,
)
from hub.planning.simulate.workload import check_constraints

# shared/ sits beside the repository (as on the developers' machines and in CI).
TRACES = Path(os.environ.get("FUYAO_TRACES")
              or Path(__file__).resolve().parents[2] / "shared" / "traces")
NODES = "alibaba-gpu-v2023/openb_node_list_all_node.csv"
PODS = "alibaba-gpu-v2023/openb_pod_list_default.csv"
FGD = "fgd-results/analysis_allo_discrete.csv"
QUICK_NODES = 400   # --quick: the first 400 rows of the node list (1,002 GPUs)


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
        name = (row.get("sc_policy") or "").split("-", 1)[-1]
        for p in points:
            value = (row.get(str(p)) or "").strip()
            if value:
                sums[name][p].append(float(value))
    return {name: {p: statistics.fmean(v) for p, v in by_point.items()}
            for name, by_point in sorted(sums.items())}


@dataclass(frozen=True, slots=True)
class Case:
    """One federation setting, replayed once per seed."""

    clusters: int
    policy: str
    headroom: float
    split: str


def cases_for(args: argparse.Namespace) -> list[Case]:
    """Every (split, headroom, K, policy); K=1 once per member policy."""
    out: list[Case] = []
    for s in args.split:
        for h in args.headroom:
            for k in args.clusters:
                seen: set[str] = set()
                for name in args.policies:
                    member = policy(name).member.value
                    if k == 1 and member in seen:
                        continue
                    seen.add(member)
                    out.append(Case(k, name, h, s))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every case over every seed (or the runs ``--load`` names); the summary the CLI prints."""
    started = time.monotonic()
    if args.load:
        return summarize(args, load_runs(args.load), started)
    nodes = load_nodes(args.nodes)
    raw_models = {n.name: n.labels.get("nvidia.com/gpu.product", "")
                  for n in load_fleet(args.nodes).nodes}
    tasks = load_pod_list(Path(args.pods))
    capacity = gpu_milli_of(nodes)
    mix = workload_mix(tasks, args.starved_weight)
    cases = cases_for(args)
    per_case: dict[Case, list[dict[str, Any]]] = {c: [] for c in cases}
    mismatched = 0
    for seed in args.seeds:
        order = arrival_order(tasks, seed, capacity)
        mismatched = max(mismatched, check_constraints(order, nodes, raw_models))
        for case in cases:
            clusters = [replace(c, headroom=case.headroom)
                        for c in split_nodes(nodes, case.clusters, Split(case.split))]
            report = simulate(clusters, tasks, policy(case.policy), seed=seed,
                              arrival=args.until / 100.0, order=order, mix=mix)
            per_case[case].append(report)
            if args.save:
                save_run(Path(args.save), case, Path(args.pods).stem, len(nodes), capacity,
                         len(tasks), mismatched, report)
            if not args.json:
                print(f"  seed {seed} K={case.clusters} {case.policy} h={case.headroom:g} "
                      f"{case.split}: {report['gpu_allocation_pct']:.2f}% at {args.until:g}% "
                      f"({report['seconds']:.1f} s)", file=sys.stderr)
    meta = {"pods": Path(args.pods).stem, "nodes": len(nodes), "gpus": capacity // 1000,
            "tasks_in_trace": len(tasks), "gpu_spec_mismatched_tasks": mismatched}
    return summarize(args, Saved(meta, per_case), started)


@dataclass(frozen=True, slots=True)
class Saved:
    """Reports per case (one per seed) and the workload they ran on."""

    meta: dict[str, Any]
    per_case: dict[Case, list[dict[str, Any]]]


def save_run(path: Path, case: Case, pods: str, nodes: int, capacity: int, tasks: int,
             mismatched: int, report: dict[str, Any]) -> None:
    """Append one run as a JSON line, as soon as it ends (a cut-off sweep keeps its runs)."""
    line = {"case": [case.clusters, case.policy, case.headroom, case.split],
            "meta": {"pods": pods, "nodes": nodes, "gpus": capacity // 1000,
                     "tasks_in_trace": tasks, "gpu_spec_mismatched_tasks": mismatched},
            "report": {k: v for k, v in report.items() if k != "clusters"}}
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def load_runs(paths: Sequence[str]) -> Saved:
    """Runs written by ``--save`` (one pod list; a case's seeds in file order, repeats dropped)."""
    meta: dict[str, Any] = {}
    per_case: dict[Case, dict[int, dict[str, Any]]] = defaultdict(dict)
    for name in paths:
        try:
            lines = Path(name).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InvalidInput(f"{name}: cannot read saved runs: {exc.strerror or exc}") from exc
        for number, text in enumerate(lines, 1):
            try:
                line = json.loads(text)
                case = Case(int(line["case"][0]), str(line["case"][1]),
                            float(line["case"][2]), str(line["case"][3]))
                report = line["report"]
                if meta and line["meta"]["pods"] != meta["pods"]:
                    raise InvalidInput(f"{name}:{number}: pod list {line['meta']['pods']} "
                                       f"differs from {meta['pods']}")
                meta = meta or line["meta"]
                per_case[case].setdefault(int(report["seed"]), report)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise InvalidInput(f"{name}:{number}: not a saved run ({exc})") from exc
    if not per_case:
        raise InvalidInput("--load: no saved runs")
    return Saved(meta, {c: [by[s] for s in sorted(by)] for c, by in per_case.items()})


def summarize(args: argparse.Namespace, saved: Saved, started: float) -> dict[str, Any]:
    """The summary of every case's reports beside the FGD figures of the same pod list."""
    seeds = sorted({int(r["seed"]) for rs in saved.per_case.values() for r in rs})
    fgd = fgd_baselines(Path(args.fgd), saved.meta["pods"], args.points)
    out = {
        **saved.meta, "seeds": seeds, "until_pct": args.until, "points": args.points,
        "fgd_single_pool": {p: {str(k): round(v, 2) for k, v in by.items()}
                            for p, by in fgd.items()},
        "runs": [_summary(c, rs, args.points, fgd) for c, rs in sorted(
            saved.per_case.items(), key=lambda item: (item[0].split, item[0].headroom,
                                                      item[0].clusters,
                                                      POLICY_NAMES.index(item[0].policy)
                                                      if item[0].policy in POLICY_NAMES
                                                      else len(POLICY_NAMES)))],
        "seconds": round(time.monotonic() - started, 1),
    }
    if args.plot:
        from hub.planning.simulate.plot import plot_curves

        last = args.points[-1]
        curves = [{"policy": f"K={r['clusters']} {r['policy']}"
                             + (f" {r['split']}" if r["split"] != "round-robin" else "")
                             + (f" h={r['headroom']:g}" if r["headroom"] else "")
                             + (f" (seeds {_seeds(r['seeds'])})" if r["seeds"] != seeds
                                else ""),
                   "curve": r["curve"], "gpu_allocation_pct": r["alloc_pct"][str(last)] or 0.0}
                  for r in out["runs"]]
        paper = fgd_baselines(Path(args.fgd), out["pods"], range(last + 1))
        curves += [{"policy": f"paper {name} (single pool)", "curve": paper[name],
                    "gpu_allocation_pct": paper[name].get(last, 0.0)}
                   for name in ("BestFit", "FGD") if name in paper]
        plot_curves(curves, Path(args.plot), f"{out['pods']}, mean of seeds "
                    f"{_seeds(seeds)} unless the label says")
    return out


def _summary(case: Case, reports: list[dict[str, Any]], points: Sequence[int],
             fgd: dict[str, dict[int, float]]) -> dict[str, Any]:
    def at(report: dict[str, Any], p: int) -> float | None:
        value = report["curve"].get(str(p))
        return None if value is None else float(value)

    alloc = {str(p): _mean([at(r, p) for r in reports]) for p in points}
    last = alloc[str(points[-1])]
    top = max(int(k) for r in reports for k in r["curve"])
    curve = {str(p): _mean([at(r, p) for r in reports]) for p in range(top + 1)}
    out: dict[str, Any] = {
        "clusters": case.clusters, "policy": case.policy, "headroom": case.headroom,
        "split": case.split, "seeds": [int(r["seed"]) for r in reports],
        "member_policy": reports[0]["member_policy"], "alloc_pct": alloc,
        f"alloc_{points[-1]}_by_seed": [_round(at(r, points[-1])) for r in reports],
        f"alloc_{points[-1]}_sd": _sd([at(r, points[-1]) for r in reports]),
        "fragmentation_pct": _mean([float(r["fragmentation_pct"]) for r in reports]),
        "seconds_per_run": _mean([float(r["seconds"]) for r in reports]),
        "curve": {k: v for k, v in curve.items() if v is not None},
    }
    for key in reports[0]["unplaced"]:
        out[key] = statistics.fmean(r["unplaced"][key] for r in reports)
    for key in ("member_chose_other_node", "member_chose_other_model"):
        out[key] = statistics.fmean(r[key] for r in reports)
    for name in ("BestFit", "FGD"):
        base = fgd.get(name, {}).get(points[-1])
        out[f"vs_{name}"] = None if base is None or last is None else round(last / base, 4)
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 2) if len(known) == len(values) and known else None


def _sd(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.stdev(known), 2) if len(known) == len(values) > 1 else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def render(out: dict[str, Any]) -> str:
    """Two tables: FGD's single pool, then this run's federation cases."""
    points = out["points"]
    cols = "".join(f"{str(p) + '%':>8}" for p in points)
    lines = [f"{out['pods']}: {out['nodes']} nodes, {out['gpus']} GPUs; seeds "
             f"{_seeds(out['seeds'])}; allocation % of GPU capacity at arrived workload %", "",
             "FGD single pool (authors' simulator, mean of their seeds 42-51)",
             f"{'policy':<16}{cols}"]
    for name, by in out["fgd_single_pool"].items():
        lines.append(f"{name:<16}" + "".join(_cell(by.get(str(p))) for p in points))
    lines += ["", "Federation (hub policy + member node policy)",
              f"{'K':>2} {'policy':<15}{'members':<9}{'headroom':>9} {'split':<12}{cols}"
              f"{'sd':>6}{'frag%':>7}{'no-cluster':>11}{'/BestFit':>9}{'/FGD':>7}"]
    for r in out["runs"]:
        lines.append(
            f"{r['clusters']:>2} {r['policy']:<15}{r['member_policy']:<9}{r['headroom']:>9g} "
            f"{r['split']:<12}" + "".join(_cell(r["alloc_pct"][str(p)]) for p in points)
            + _sd_cell(r[f"alloc_{points[-1]}_sd"]) + _sd_cell(r["fragmentation_pct"], 7)
            + f"{r['no_cluster']:>11.1f}{_ratio(r['vs_BestFit']):>9}{_ratio(r['vs_FGD']):>7}")
    lines += ["", f"sd: standard deviation over seeds at {points[-1]}%; frag%: FGD "
              "fragmentation of the free GPUs at the end; no-cluster: tasks no cluster took "
              "(mean per seed).",
              f"gpu_spec constraints that differ from the trace's meaning: "
              f"{out['gpu_spec_mismatched_tasks']} tasks. {out['seconds']} s."]
    return "\n".join(lines)


def markdown(out: dict[str, Any]) -> str:
    """The run as markdown tables (what docs/benchmarks.md holds)."""
    points = out["points"]
    head = "".join(f" {p}% |" for p in points)
    rule = "---|" * len(points)
    lines = [f"`{out['pods']}`: {out['nodes']} nodes, {out['gpus']} GPUs, seeds "
             f"{_seeds(out['seeds'])}; GPU allocation % at arrived workload %", "",
             f"| | K | policy | members | split | seeds |{head} sd | frag % | no-cluster "
             f"| / BestFit | / FGD |", f"|---|---|---|---|---|---|{rule}---|---|---|---|---|"]
    for name, by in out["fgd_single_pool"].items():
        lines.append(f"| FGD paper | 1 | {name} | - | - | 42-51 |"
                     + "".join(f" {_md(by.get(str(p)))} |" for p in points) + " | | | | |")
    for r in out["runs"]:
        lines.append(
            f"| this | {r['clusters']} | {r['policy']} | {r['member_policy']} | {r['split']}"
            + (f", headroom {r['headroom']:g}" if r["headroom"] else "")
            + f" | {_seeds(r['seeds'])} |"
            + "".join(f" {_md(r['alloc_pct'][str(p)])} |" for p in points)
            + f" {_md(r[f'alloc_{points[-1]}_sd'])} | {_md(r['fragmentation_pct'])} |"
            + f" {r['no_cluster']:.0f} | {_ratio(r['vs_BestFit'])} | {_ratio(r['vs_FGD'])} |")
    return "\n".join(lines)


def _md(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cell(value: float | None) -> str:
    return f"{'-':>8}" if value is None else f"{value:>8.2f}"


def _sd_cell(value: float | None, width: int = 6) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.2f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _seeds(seeds: Sequence[int]) -> str:
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


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


def _names(allowed: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        values = [p.strip() for p in text.split(",")]
        bad = [v for v in values if v not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad[0]!r}: expected {', '.join(allowed)}")
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
    parser.add_argument("--policies", type=_names(POLICY_NAMES), default=None,
                        help=f"policies ({','.join(POLICY_NAMES)}; --quick: default,random)")
    parser.add_argument("--headroom", type=_floats, default=[0.0], help="e.g. 0,0.1")
    parser.add_argument("--split", type=_names([s.value for s in Split]),
                        default=["round-robin"], help="round-robin, contiguous and/or by-model")
    parser.add_argument("--until", type=int, default=100, help="arrived workload %% to stop at")
    parser.add_argument("--starved-weight", type=float, default=STARVED_WEIGHT,
                        help="fgd: weight of the free cards a node's cpu cannot feed, "
                             "spared on models constrained tasks name, and (x16) of the free "
                             "GPU it cannot serve at the workload's cpu per GPU "
                             f"(default {STARVED_WEIGHT:g}, measured best; 0: the FGD paper's)")
    parser.add_argument("--plot", help="write allocation vs arrival (mean curves) to FILE.png")
    parser.add_argument("--quick", action="store_true",
                        help=f"CI size: the first {QUICK_NODES} nodes; seed 42, K=1,4 unless given")
    parser.add_argument("--save", help="append each run to FILE.jsonl as it ends")
    parser.add_argument("--load", nargs="+", metavar="FILE",
                        help="summarize runs saved with --save instead of running")
    parser.add_argument("--json", action="store_true", help="print only a JSON summary")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args(argv)
    args.nodes = args.nodes or str(args.traces / NODES)
    args.pods = args.pods or str(args.traces / PODS)
    args.fgd = args.fgd or str(args.traces / FGD)
    if args.quick and ".csv:" not in args.nodes:
        args.nodes = f"{args.nodes}:0:{QUICK_NODES}"
    args.seeds = args.seeds or ([42] if args.quick else list(range(42, 52)))
    args.clusters = args.clusters or ([1, 4] if args.quick else [1, 2, 4, 8])
    args.policies = args.policies or (["default", "random"] if args.quick
                                      else list(POLICY_NAMES))
    args.points = sorted({p for p in (50, 80, 90) if p < args.until} | {args.until})
    try:
        out = run(args)
    except FuyaoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2) if args.json else markdown(out) if args.markdown
          else render(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
