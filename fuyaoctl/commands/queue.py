"""``fuyaoctl queue``: create, list, describe, update, delete task queues.

Registered with one line in ``fuyaoctl.cli``. Quotas are ``--quota RESOURCE=QUANTITY``
(repeatable: ``cpu``, ``memory``, ``gpu``, ``gpu.<MODEL>``, ``gpu-memory``), per cluster
``--cluster-quota CLUSTER:RESOURCE=QUANTITY``, borrow limits ``--borrow RESOURCE=QUANTITY``.
"""

from __future__ import annotations

from typing import Any

import click

from fuyaoctl.context import AppContext, output_option, pairs


def _cluster_pairs(ctx: click.Context, param: click.Parameter,
                   values: tuple[str, ...]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for item in values:
        cluster, sep, rest = item.partition(":")
        if not sep or not cluster:
            raise click.BadParameter(f"{item!r} is not CLUSTER:RESOURCE=QUANTITY", param=param)
        out.setdefault(cluster, {}).update(pairs(ctx, param, (rest,)))
    return out


def _settings(func: Any) -> Any:
    for option in reversed([
        click.option("--priority", type=int, help="Priority level: higher levels go first."),
        click.option("--weight", type=int, help="Fair-share weight within its level."),
        click.option("--quota", "quotas", multiple=True, metavar="RESOURCE=QTY",
                     callback=pairs, help="Fleet-wide quota (cpu, memory, gpu, gpu.A100, "
                                          "gpu-memory); repeatable."),
        click.option("--cluster-quota", "cluster_quotas", multiple=True,
                     metavar="CLUSTER:RESOURCE=QTY", callback=_cluster_pairs,
                     help="Quota on one cluster; repeatable."),
        click.option("--borrow", multiple=True, metavar="RESOURCE=QTY", callback=pairs,
                     help="May use this much of other queues' idle quota; repeatable."),
    ]):
        func = option(func)
    return func


@click.group()
@output_option
def queue() -> None:
    """Task queues: priority levels, fair-share weights, quotas, borrowing."""


@queue.command("create")
@click.argument("name")
@_settings
@output_option
@click.pass_obj
def queue_create(app: AppContext, name: str, priority: int | None, weight: int | None,
                 quotas: dict[str, str], cluster_quotas: dict[str, dict[str, str]],
                 borrow: dict[str, str]) -> None:
    """Create queue NAME."""
    view = app.client().create_queue(
        name, priority=priority or 0, weight=1 if weight is None else weight, quotas=quotas,
        cluster_quotas=cluster_quotas, borrow=borrow)
    app.render().queue(view)


@queue.command("list")
@output_option
@click.pass_obj
def queue_list(app: AppContext) -> None:
    """List queues with their use and shares now."""
    app.render().queues(app.client().list_queues())


@queue.command("describe")
@click.argument("name")
@output_option
@click.pass_obj
def queue_describe(app: AppContext, name: str) -> None:
    """Show a queue: use against quota, dominant share and fair share now."""
    app.render().queue(app.client().get_queue(name))


@queue.command("update")
@click.argument("name")
@_settings
@output_option
@click.pass_obj
def queue_update(app: AppContext, /, name: str, **flags: Any) -> None:
    """Change queue NAME; each map given (--quota, --borrow, ...) replaces the old one."""
    changes = {k: v for k, v in flags.items() if v not in (None, {})}
    if not changes:
        raise click.UsageError("nothing to change: give --priority, --weight, --quota, "
                               "--cluster-quota or --borrow")
    app.render().queue(app.client().update_queue(name, **changes))


@queue.command("delete")
@click.argument("name")
@output_option
@click.pass_obj
def queue_delete(app: AppContext, name: str) -> None:
    """Delete queue NAME (refused while it has tasks that have not ended)."""
    app.render().queue_deleted(app.client().delete_queue(name))
