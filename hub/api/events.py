"""``GET /api/v1/events``: task and cluster events, long-polled, resumable from an id.

Any replica answers when the hub runs with Redis (the events come from the Redis stream,
with the same ids everywhere); without Redis the leader answers from its in-process bus
and a standby answers 503 naming the leader. ``fuyaoctl task watch`` / ``cluster watch``
call it in a loop, passing the ``next`` id of each answer as ``since``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["events"])
MAX_WAIT = 30.0


@router.get("/events")
async def events(
    hub: HubDep,
    type: Annotated[Literal["task", "cluster"] | None, Query(
        description="Only task or only cluster events.")] = None,
    name: Annotated[str | None, Query(max_length=253,
                                      description="Only events of this task or cluster.")] = None,
    since: Annotated[str | None, Query(max_length=64, description=(
        "Answer events after this id (the `next` of a previous answer). "
        "Omitted: from now on."))] = None,
    timeout: Annotated[float, Query(ge=0, le=MAX_WAIT, description=(
        "Seconds to wait for a matching event before answering an empty page."))] = 20.0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> dict[str, Any]:
    """Events after ``since`` that match, waiting up to ``timeout`` s for the first."""
    if not hub.ha.leading and hub.events.redis is None:
        raise hub.ha.refusal("serve events (no Redis is configured)")
    deadline = time.monotonic() + timeout
    cursor, truncated = since, False
    while True:
        page = await hub.events.read(cursor, max(0.0, deadline - time.monotonic()), limit)
        truncated = truncated or page.truncated
        cursor = page.next
        matched = [e.to_dict() for e in page.events
                   if (type is None or e.type == type) and (name is None or e.name == name)]
        if matched or time.monotonic() >= deadline:
            return {"events": matched, "next": cursor, "truncated": truncated,
                    "source": "redis" if hub.events.redis is not None else "hub"}
