"""``fuyaoctl simulate``: offline what-if runs of the hub's placement and the members' scheduler.

The one command that runs hub code locally: it imports ``hub.planning.simulate`` lazily,
inside the command, so ``fuyaoctl`` keeps standing only on ``fuyao/`` at module level and
needs the hub package only when simulating (it ships in the same distribution). Nothing here
talks to a hub unless ``--from-hub`` / ``--queue`` asks for the live fleet or queue.
See docs/simulate.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from fuyao.errors import InvalidInput
from fuyaoctl.context import AppContext, output_option
from fuyaoctl.taskfile import read_task_file

if TYPE_CHECKING:
    from hub.planning.simulate import SimCluster, SimTask

MAX_SEED = 2**63 - 1


@click.command("simulate")
@click.option("--nodes", metavar="FILE", help="Trace node list FILE.csv[:START[:COUNT]] or a "
              "YAML fleet file, split into --clusters K clusters.")
@click.option("--fleet", "fleets", multiple=True, metavar="[NAME=]FILE",
              help="A fleet file per cluster (repeat; the name defaults to the file's stem).")
@click.option("--from-hub", is_flag=True, help="Start from the live fleet (needs a hub).")
@click.option("--clusters", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="With --nodes: how many member clusters.")
@click.option("--split", type=click.Choice(["round-robin", "by-model", "contiguous"]),
              default="round-robin", show_default=True, help="With --nodes: how to split.")
@click.option("--add-nodes", "additions", multiple=True,
              metavar="cluster=B,model=H100,count=8", help="Add a pool of empty nodes (repeat; "
              "also gpus=, cpu=, memory=, name=).")
@click.option("--remove-cluster", "removals", multiple=True, metavar="NAME",
              help="Leave a cluster out (repeat).")
@click.option("--pods", type=click.Path(dir_okay=False, path_type=Path),
              help="Trace pod list (openb_pod_list_*.csv, either layout).")
@click.option("--tasks", "task_files", multiple=True, metavar="FILE",
              help="Task YAML file(s), as for 'task submit -f' (repeat).")
@click.option("--queue", is_flag=True, help="The live queue's pending tasks (needs a hub).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="default, fgd, random, static-weight, dynamic-weight (repeat or comma-"
              "separate to compare; default: default).")
@click.option("--member-policy", type=click.Choice(["best-fit", "spread", "fgd"]),
              help="Override the members' node policy.")
@click.option("--profile-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also run this placement profile (YAML, as in the hub config).")
@click.option("--headroom", type=click.FloatRange(0.0, 0.9), default=None,
              help="Headroom of every cluster (default 0; live clusters keep theirs).")
@click.option("--arrival", type=click.FloatRange(0.0, 10.0, min_open=True), default=1.0,
              show_default=True, help="Stop when arrived GPU demand reaches this share of "
              "capacity.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=42, show_default=True,
              help="Seeds the arrival order and random choices.")
@click.option("--durations", is_flag=True,
              help="Tasks leave after their duration (simulated clock, trace arrival times).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path),
              help="Write allocation vs arrival for every policy to FILE.png.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
@output_option
@click.pass_obj
def simulate(app: AppContext, nodes: str | None, fleets: tuple[str, ...], from_hub: bool,
             clusters: int, split: str, additions: tuple[str, ...], removals: tuple[str, ...],
             pods: Path | None, task_files: tuple[str, ...], queue: bool,
             policies: tuple[str, ...], member_policy: str | None, profile_file: Path | None,
             headroom: float | None, arrival: float, seed: int, durations: bool,
             plot: Path | None, progress: bool | None) -> None:
    """Replay a workload on a fleet with the hub's placement code, offline.

    \b
    fuyaoctl simulate --nodes openb_node_list_all_node.csv \\
        --pods openb_pod_list_default.csv --clusters 4 --split round-robin \\
        --arrival 1.0 --seed 42 -o json
    """
    import hub.planning.simulate as sim  # lazy: the one place fuyaoctl runs hub code
    from hub.placement import Profile

    if sum(map(bool, (nodes, fleets, from_hub))) != 1:
        raise InvalidInput("give the fleet as exactly one of --nodes, --fleet or --from-hub")
    if sum(map(bool, (pods, task_files, queue))) != 1:
        raise InvalidInput("give the workload as exactly one of --pods, --tasks or --queue")
    if clusters > 1 and not nodes:
        raise InvalidInput("--clusters splits a --nodes list; fleet files are one cluster each")
    fleet = _fleet(app, sim, nodes, fleets, from_hub, clusters, split, headroom)
    for text in additions:
        fleet = sim.add_nodes(fleet, text)
    for name in removals:
        fleet = sim.remove_cluster(fleet, name)
    tasks = _workload(app, sim, pods, task_files, queue)
    names = [n.strip() for p in policies for n in p.split(",") if n.strip()] or (
        [] if profile_file else ["default"])
    chosen = [sim.policy(n, member_policy) for n in dict.fromkeys(names)]
    if profile_file is not None:
        try:
            text = profile_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"--profile-file {profile_file}: cannot read: {exc}") from exc
        chosen.append(sim.policy(profile_file.stem, member_policy, Profile.from_yaml(text)))
    show = sys.stderr.isatty() if progress is None else progress
    capacity = sum(c.gpu_milli for c in fleet)
    if capacity <= 0:
        raise InvalidInput("the fleet has no GPUs: the allocation ratio is undefined")
    order = sim.ordered(tasks, seed, capacity, arrival, durations, trace=pods is not None)
    mix = sim.workload_mix(tasks)
    reports = []
    for i, p in enumerate(chosen):
        bar = _bar(f"[{i + 1}/{len(chosen)}] {p.name}") if show else None
        reports.append(sim.simulate(fleet, tasks, p, seed=seed, arrival=arrival,
                                    durations=durations, progress=bar, order=order, mix=mix))
        if show:
            click.echo(file=sys.stderr)
    if plot is not None:
        from hub.planning.simulate.plot import plot_curves

        plot_curves(reports, plot, f"{len(fleet)} cluster(s), seed {seed}")
    _print(app, reports)


def _fleet(app: AppContext, sim: Any, nodes: str | None, fleets: tuple[str, ...],
           from_hub: bool, clusters: int, split: str,
           headroom: float | None) -> list[SimCluster]:
    from dataclasses import replace

    if nodes:
        out = sim.split_nodes(sim.load_nodes(nodes), clusters, sim.Split(split))
    elif fleets:
        out = sim.clusters_from_files(list(fleets))
    else:
        from hub.planning.simulate.live import live_fleet

        out = live_fleet(app.client())
    if headroom is not None:
        out = [replace(c, headroom=headroom) for c in out]
    return list(out)


def _workload(app: AppContext, sim: Any, pods: Path | None, task_files: tuple[str, ...],
              queue: bool) -> list[SimTask]:
    if pods is not None:
        return list(sim.load_pod_list(pods))
    if task_files:
        specs = [s for f in task_files for s in read_task_file(f).specs]
        return list(sim.tasks_from_specs(specs, ", ".join(task_files)))
    from hub.planning.simulate.live import live_queue

    return list(live_queue(app.client()))


def _bar(label: str) -> Callable[[float], None]:
    width = 30

    def show(done: float) -> None:
        filled = int(width * done)
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{100 * done:5.1f}%")
        sys.stderr.flush()
    return show


def _print(app: AppContext, reports: list[dict[str, Any]]) -> None:
    if app.output in ("json", "yaml"):
        data = reports[0] if len(reports) == 1 else {"runs": reports}
        if app.output == "json":
            click.echo(json.dumps(data, indent=2))
        else:
            click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)
        return
    for r in reports:
        click.echo(f"policy {r['policy']} (members: {r['member_policy']}), seed {r['seed']}: "
                   f"{r['gpu_allocation_pct']:.2f}% of {r['gpus_total']} GPUs allocated at "
                   f"{r['arrival_pct']:g}% arrived; {r['tasks_placed']} of "
                   f"{r['tasks_arrived']} tasks placed, {r['tasks_unplaced']} unplaced; "
                   f"fragmentation {r['fragmentation_pct']:.2f}% of free GPU; "
                   f"{r['seconds']:.1f} s")
        click.echo(f"  {'cluster':<14}{'nodes':>7}{'GPUs':>7}{'tasks':>8}{'GPU %':>8}"
                   f"{'CPU %':>8}{'frag %':>8}")
        for name, c in r["clusters"].items():
            click.echo(f"  {name:<14}{c['nodes']:>7}{c['gpus']:>7}{c['tasks_placed']:>8}"
                       f"{c['gpu_allocation_pct']:>8.2f}{c['cpu_allocation_pct']:>8.2f}"
                       f"{c['fragmentation_pct']:>8.2f}")
