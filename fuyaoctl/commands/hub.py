"""``fuyaoctl hub``: the hub replicas themselves (``hub status``).

Registered with one line in ``fuyaoctl.cli``. Any replica answers ``hub status`` (it reads
the lease and the replica registry from the shared store).
"""

from __future__ import annotations

import click

from fuyaoctl.context import AppContext, output_option


@click.group("hub")
@output_option
def hub() -> None:
    """The hub replicas: which one leads, at which fencing epoch."""


@hub.command("status")
@output_option
@click.pass_obj
def status(app: AppContext) -> None:
    """The leader, its epoch, and every live replica (address, role, agent address)."""
    app.render().hub_status(app.client().hub_status())
