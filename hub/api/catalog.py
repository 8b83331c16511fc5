"""REST: ``GET /api/v1/catalog`` - the hub's accelerator catalog (``fuyaoctl catalog``)."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.insight import CatalogModel, CatalogView

router = APIRouter(prefix="/api/v1", tags=["catalog"])


@router.get("/catalog", response_model=CatalogView)
async def get_catalog() -> CatalogView:
    """Models with vendor, kind, rank and nominal memory, and the alias table, as this hub
    uses them (the built-in catalog plus the operator's ``catalog`` configuration)."""
    aliases = DEFAULT_CATALOG.aliases
    by_model: dict[str, list[str]] = {}
    for raw, model in aliases.items():
        by_model.setdefault(model, []).append(raw)
    models = sorted(DEFAULT_CATALOG.models,
                    key=lambda m: (m.kind, m.rank is None, m.rank or 0, m.name))
    return CatalogView(
        models=[CatalogModel(name=m.name, vendor=m.vendor, kind=m.kind, rank=m.rank,
                             memory_gib=round(m.memory_mib / 1024, 1),
                             aliases=sorted(by_model.get(m.name, [])))
                for m in models],
        aliases=dict(sorted(aliases.items())))
