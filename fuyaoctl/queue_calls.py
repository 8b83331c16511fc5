"""The SDK's queue methods (a mixin of ``fuyaoctl.client.Client``)::

    hub.create_queue("team-a", weight=2, quotas={"gpu": 8, "cpu": 64})
    hub.create_queue("team-b", quotas={"gpu": 4}, borrow={"gpu": 4})
    hub.get_queue("team-a").usage           # {"gpu": "8", ...}
    hub.update_queue("team-a", weight=3)
    hub.delete_queue("team-b")              # Conflict while it holds tasks

Bodies are validated with ``fuyao.queues`` models before anything is sent (InvalidInput).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

from fuyao.queues import QueueSpec, QueueUpdate, QueueView
from fuyao.spec import Quantity
from fuyaoctl.validation import validate_model

T = TypeVar("T")
_QUEUE = TypeAdapter(QueueView)
_QUEUES = TypeAdapter(list[QueueView])
_OBJECT = TypeAdapter(dict[str, Any])


class QueueCalls:
    """``/api/v1/queues``: create, list, get, update, delete."""

    def _call(self, method: str, path: str, *, body: Any = None,
              params: Mapping[str, str] | None = None, api: bool = True) -> Any:
        raise NotImplementedError   # provided by Client

    @staticmethod
    def _parse(adapter: TypeAdapter[T], data: Any) -> T:
        raise NotImplementedError   # provided by Client

    def create_queue(
        self, name: str, *, priority: int = 0, weight: int = 1,
        quotas: Mapping[str, Quantity] | None = None,
        cluster_quotas: Mapping[str, Mapping[str, Quantity]] | None = None,
        borrow: Mapping[str, Quantity] | None = None,
    ) -> QueueView:
        """Create a queue with a priority level, a fair-share weight, quotas, borrow limits."""
        spec = validate_model(QueueSpec, {
            "name": name, "priority": priority, "weight": weight,
            "quotas": dict(quotas or {}), "borrow": dict(borrow or {}),
            "cluster_quotas": {c: dict(m) for c, m in (cluster_quotas or {}).items()},
        }, what=f"queue {name}")
        data = self._call("POST", "/queues", body=spec.model_dump(mode="json"))
        return self._parse(_QUEUE, data)

    def list_queues(self) -> list[QueueView]:
        """Every queue with its use and shares now."""
        return self._parse(_QUEUES, self._call("GET", "/queues"))

    def get_queue(self, name: str) -> QueueView:
        """One queue: use against quota, dominant share, fair share; NotFound if absent."""
        return self._parse(_QUEUE, self._call("GET", f"/queues/{quote(name, safe='')}"))

    def update_queue(self, name: str, **changes: Any) -> QueueView:
        """Change ``priority``, ``weight``, ``quotas``, ``cluster_quotas`` or ``borrow``."""
        change = validate_model(QueueUpdate, changes, what=f"queue {name}")
        body = change.model_dump(mode="json", exclude_none=True)
        data = self._call("PATCH", f"/queues/{quote(name, safe='')}", body=body)
        return self._parse(_QUEUE, data)

    def delete_queue(self, name: str) -> dict[str, Any]:
        """Delete a queue; Conflict (naming them) while it has tasks that have not ended."""
        return self._parse(_OBJECT, self._call("DELETE", f"/queues/{quote(name, safe='')}"))
