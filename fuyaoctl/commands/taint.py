"""``fuyaoctl cluster taint NAME key=value:NoSchedule [key:PreferNoSchedule-] ...``."""

from __future__ import annotations

import click

from fuyao.errors import InvalidInput
from fuyao.taints import parse_taint
from fuyaoctl.context import AppContext, output_option


@click.command("taint")
@click.argument("name")
@click.argument("taints", nargs=-1, required=True, metavar="KEY[=VALUE]:EFFECT[-]...")
@output_option
@click.pass_obj
def cluster_taint(app: AppContext, name: str, taints: tuple[str, ...]) -> None:
    """Add taints to cluster NAME (NoSchedule: only tolerating tasks are placed there;
    PreferNoSchedule: others only when nothing better fits); a trailing '-' removes one."""
    try:
        changes = [parse_taint(t) for t in taints]
    except InvalidInput as exc:
        raise click.BadParameter(exc.message, param_hint="TAINTS") from exc
    client = app.client()
    current = list(client.get_cluster(name).taints)
    for taint, remove in changes:
        same = [t for t in current if (t.key, t.effect) == (taint.key, taint.effect)]
        for old in same:
            current.remove(old)
        if not remove:
            current.append(taint)
    view = client.set_taints(name, current)
    app.render().cluster_changed(view, "tainted: " + (", ".join(map(str, view.taints)) or
                                                      "no taints"))
