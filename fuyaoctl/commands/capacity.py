"""``fuyaoctl capacity``: the capacity report, and ``fit``, ``n-1`` and ``history`` under it.

Thin, as every command: parse, one SDK call (``fuyaoctl.capacity_api``), render
(``fuyaoctl.render_capacity``). ``--shapes FILE`` reads a YAML or JSON list of task shapes
(``gpu``, ``gpu_model``, ``cpu``, ``memory``, ``weight``) to measure fragmentation against.
See docs/capacity.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from fuyao.capacity import FIT_LIMIT_DEFAULT, FIT_LIMIT_MAX, MAX_SHAPES
from fuyao.errors import InvalidInput
from fuyaoctl.context import AppContext, output_option
from fuyaoctl.render_capacity import CapacityRenderer

MAX_SHAPES_FILE = 1_000_000   # bytes


def _renderer(app: AppContext) -> CapacityRenderer:
    return CapacityRenderer(app.output)


def read_shapes(path: Path) -> list[dict[str, Any]]:
    """A shapes file: a YAML/JSON list of mappings (or ``{"shapes": [...]}``)."""
    try:
        if path.stat().st_size > MAX_SHAPES_FILE:
            raise InvalidInput(f"shapes file {path}: larger than {MAX_SHAPES_FILE} bytes")
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidInput(f"shapes file {path}: {exc}") from exc
    if isinstance(data, dict) and "shapes" in data:
        data = data["shapes"]
    if not isinstance(data, list) or not data or not all(isinstance(s, dict) for s in data):
        raise InvalidInput(f"shapes file {path}: expected a non-empty list of shapes "
                           f"(mappings with gpu, gpu_model, cpu, memory, weight)")
    if len(data) > MAX_SHAPES:
        raise InvalidInput(f"shapes file {path}: {len(data)} shapes, at most {MAX_SHAPES}")
    return data


@click.group("capacity", invoke_without_command=True)
@click.option("--by", type=click.Choice(["cluster", "model", "site", "queue"]),
              default="cluster", show_default=True, help="Group rows by this.")
@click.option("--cluster", metavar="NAME", help="Only this cluster (with --by cluster).")
@click.option("--shapes", "shapes_file", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML/JSON list of task shapes for fragmentation (default: the task mix).")
@output_option
@click.pass_context
def capacity(ctx: click.Context, by: str, cluster: str | None, shapes_file: Path | None) -> None:
    """Devices, CPU and memory per cluster and GPU model: total, allocated, reserved, free,
    fragmented, queued; fleet totals per model; the N-1 verdict."""
    if ctx.invoked_subcommand is not None:
        return
    app: AppContext = ctx.ensure_object(AppContext)
    shapes = read_shapes(shapes_file) if shapes_file is not None else None
    report = app.client().capacity_report(by, cluster, shapes)  # type: ignore[arg-type]
    _renderer(app).capacity_report(report)


@capacity.command("fit")
@click.option("--profile", metavar="NAME", help="A ComputeProfile; the flags below override it.")
@click.option("--gpu", help="GPUs per replica (0.5: a share). Default 0.")
@click.option("--gpu-model", metavar="EXPR", help="A100, A100|H100 or >=A100.")
@click.option("--gpu-memory", metavar="QTY", help="Minimum memory per device, e.g. 40Gi.")
@click.option("--cpu", help="CPU per replica. Default 1.")
@click.option("--memory", help="Memory per replica. Default 1Gi.")
@click.option("--selector", metavar="EXPR", help="Node selector expression.")
@click.option("--replicas", type=click.IntRange(1, 10_000), help="Replicas per task. Default 1.")
@click.option("--queue", help="Queue whose quota bounds the count. Default: default.")
@click.option("--priority", type=int,
              help="At or above the hub's headroom priority, the reserve may be used.")
@click.option("--limit", type=click.IntRange(1, FIT_LIMIT_MAX), default=FIT_LIMIT_DEFAULT,
              show_default=True, help="Stop counting here.")
@output_option
@click.pass_obj
def fit(app: AppContext, /, limit: int, **given: Any) -> None:
    """How many more such tasks fit right now, per cluster and in total (the flags given
    override the profile's)."""
    fields = {name: value for name, value in given.items() if value is not None}
    _renderer(app).capacity_fit(app.client().capacity_fit({**fields, "limit": limit}))


@capacity.command("n-1")
@output_option
@click.pass_obj
def n_minus_one(app: AppContext) -> None:
    """If any one cluster died now, could the others take its tasks?"""
    _renderer(app).capacity_n1(app.client().capacity_n_minus_one())


@capacity.command("history")
@click.option("--since", default="24h", show_default=True, help="How far back: 1h, 24h, 7d.")
@click.option("--model", metavar="MODEL", help="Only this accelerator model (none: CPU-only).")
@click.option("--cluster", metavar="NAME", help="Only this cluster.")
@output_option
@click.pass_obj
def history(app: AppContext, since: str, model: str | None, cluster: str | None) -> None:
    """How capacity trended: a sparkline per cluster and model."""
    points = app.client().capacity_history(since, model=model, cluster=cluster)
    _renderer(app).capacity_history(points)
