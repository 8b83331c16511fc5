"""The SDK's capacity-planning methods, mixed into ``fuyaoctl.client.Client``.

::

    with Client("hub:8848") as hub:
        hub.capacity_fit(gpu=8, cpu=1, memory="1Gi").total
        hub.capacity_n_minus_one().safe
        hub.capacity_report(by="model").fleet
        hub.capacity_history(since="1h", model="H100")

Bodies are validated with the ``fuyao.capacity`` models before anything is sent (an
``InvalidInput`` names each bad field); answers come back as those models. See
docs/capacity.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import TypeAdapter

from fuyao.capacity import (
    CapacityPoint,
    CapacityReport,
    FitAnswer,
    FitRequest,
    GroupBy,
    NMinusOne,
    ReportRequest,
    Shape,
)
from fuyaoctl.validation import validate_model

T = TypeVar("T")
_FIT = TypeAdapter(FitAnswer)
_N1 = TypeAdapter(NMinusOne)
_REPORT = TypeAdapter(CapacityReport)
_POINTS = TypeAdapter(list[CapacityPoint])


class CapacityApi:
    """``capacity_fit``, ``capacity_n_minus_one``, ``capacity_report``, ``capacity_history``."""

    def _call(self, method: str, path: str, *, body: Any = None,
              params: Mapping[str, str] | None = None, api: bool = True) -> Any:
        raise NotImplementedError   # the Client's transport

    @staticmethod
    def _parse(adapter: TypeAdapter[T], data: Any) -> T:
        raise NotImplementedError   # the Client's answer parser

    def capacity_fit(self, request: FitRequest | Mapping[str, Any] | None = None,
                     **fields: Any) -> FitAnswer:
        """How many more tasks of a shape fit now: ``capacity_fit(gpu=8, gpu_model="H100")``."""
        req = validate_model(FitRequest, request if request is not None else fields,
                             what="capacity fit")
        body = req.model_dump(mode="json", include=req.model_fields_set)
        return self._parse(_FIT, self._call("POST", "/capacity/fit", body=body))

    def capacity_n_minus_one(self) -> NMinusOne:
        """For each cluster: could the others take its tasks if it died now?"""
        return self._parse(_N1, self._call("GET", "/capacity/n-1"))

    def capacity_report(self, by: GroupBy = "cluster", cluster: str | None = None,
                        shapes: Sequence[Shape | Mapping[str, Any]] | None = None,
                        ) -> CapacityReport:
        """Capacity by cluster, model, site or queue, with fragmentation (against ``shapes``
        if given, else the hub's task mix) and fleet totals per model."""
        if shapes is not None:
            req = validate_model(ReportRequest, {"by": by, "cluster": cluster,
                                                 "shapes": list(shapes)}, what="shapes")
            body = req.model_dump(mode="json", exclude_none=True)
            return self._parse(_REPORT, self._call("POST", "/capacity/report", body=body))
        params = {"by": by} if cluster is None else {"by": by, "cluster": cluster}
        return self._parse(_REPORT, self._call("GET", "/capacity/report", params=params))

    def capacity_history(self, since: str = "24h", *, model: str | None = None,
                         cluster: str | None = None) -> list[CapacityPoint]:
        """Capacity samples from ``since`` ago (``1h``, ``24h``, ``7d``), oldest first."""
        params = {"since": since}
        if model is not None:
            params["model"] = model
        if cluster is not None:
            params["cluster"] = cluster
        return self._parse(_POINTS, self._call("GET", "/capacity/history", params=params))
