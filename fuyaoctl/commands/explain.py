"""``fuyaoctl task explain NAME``: why a task waits (registered on the ``task`` group)."""

from __future__ import annotations

import click

from fuyaoctl.context import AppContext, output_option
from fuyaoctl.render_insight import InsightRenderer


@click.command("explain")
@click.argument("name")
@output_option
@click.pass_obj
def task_explain(app: AppContext, name: str) -> None:
    """Why NAME waits: reason histogram over clusters, queue state, dependencies, scores of
    the clusters that fit, and the nearest fit (the smallest change that places it now)."""
    InsightRenderer(app.output).explain(app.client().explain_task(name))
