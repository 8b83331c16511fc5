"""``fuyaoctl catalog``: the hub's accelerator models, ranks and aliases."""

from __future__ import annotations

import click

from fuyao.insight import CatalogView
from fuyaoctl.context import AppContext, output_option
from fuyaoctl.render import Renderer, _cells, _num, _table


@click.command("catalog")
@output_option
@click.pass_obj
def catalog(app: AppContext) -> None:
    """Accelerator models (vendor, kind, rank, memory) and the aliases that name them."""
    CatalogRenderer(app.output).catalog(app.client().catalog())


class CatalogRenderer(Renderer):
    """The catalog as a table."""

    def catalog(self, view: CatalogView) -> None:
        """``catalog``: one row per model; ``gpu-model >= X`` means rank >= X's rank."""
        if self._dumped(view):
            return
        table = _table("MODEL", "VENDOR", "KIND", "RANK", "MEMORY-GIB", "ALIASES")
        for m in view.models:
            table.add_row(*_cells(m.name, m.vendor, m.kind, m.rank, _num(m.memory_gib),
                                  ", ".join(m.aliases)))
        self._print(table, "RANK orders models of one kind: gpu-model >= A100 means A100 or "
                           "better; a model without a rank cannot be ordered.")
