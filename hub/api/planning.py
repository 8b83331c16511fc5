"""REST: capacity planning under ``/api/v1/capacity/...`` - fit, N-1, report, history.

Each route hands its validated input to ``hub.planning.Planner`` (or the capacity history)
and returns a ``fuyao.capacity`` model; the CLI's ``fuyaoctl capacity`` commands and the web
view (``/ui``) read exactly these. See docs/capacity.md.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from fuyao.capacity import (
    CapacityPoint,
    CapacityReport,
    FitAnswer,
    FitRequest,
    GroupBy,
    NMinusOne,
    ReportRequest,
)
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1/capacity", tags=["capacity"])


@router.post("/fit", response_model=FitAnswer)
async def fit(req: FitRequest, hub: HubDep) -> FitAnswer:
    """How many more tasks of this shape fit right now, per cluster and in total."""
    return await hub.planning.fit_async(req)


@router.get("/n-1", response_model=NMinusOne)
async def n_minus_one(hub: HubDep) -> NMinusOne:
    """For each cluster: could the others take its tasks if it died now?"""
    return await hub.planning.answer("n-1", lambda p: p.n_minus_one())


@router.get("/report", response_model=CapacityReport)
async def report(hub: HubDep, by: GroupBy = "cluster",
                 cluster: Annotated[str | None, Query(max_length=63)] = None) -> CapacityReport:
    """Capacity by cluster, model, site or queue, with fragmentation against the task mix."""
    return await hub.planning.answer(("report", by, cluster), lambda p: p.report(by, cluster))


@router.post("/report", response_model=CapacityReport)
async def report_with_shapes(req: ReportRequest, hub: HubDep) -> CapacityReport:
    """The same report, fragmentation measured against the shapes given."""
    return await hub.planning.answer(None, lambda p: p.report(req.by, req.cluster, req.shapes))


@router.get("/history", response_model=list[CapacityPoint])
async def history(
    hub: HubDep, since: Annotated[str, Query(max_length=16)] = "24h",
    model: Annotated[str | None, Query(max_length=63)] = None,
    cluster: Annotated[str | None, Query(max_length=63)] = None,
) -> list[CapacityPoint]:
    """Capacity samples since a duration ago (``1h``, ``24h``, ``7d``), oldest first."""
    return await hub.history.points(since, model=model, cluster=cluster)
