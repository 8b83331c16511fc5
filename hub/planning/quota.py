"""The queue-quota bound of ``capacity fit``: how many more tasks a queue's quota admits.

``queue_quota(queueing)`` builds the ``QuotaProbe`` ``Planner.quota`` calls
(``hub.planning.fit``). It asks the queueing layer's own rule (``quota_hold``, borrowing
included) one task at a time on a copy of the queues' current use: the count is how many
more tasks of the shape the queue admits before a quota holds it. Fleet-wide quotas on
``cpu``, ``memory``, ``gpu`` and ``gpu-memory`` count; a per-model quota (``gpu.H100``) and
per-cluster quotas are not known before placement and do not bound the count here.
"""

from __future__ import annotations

import copy

from fuyao.capacity import FIT_LIMIT_MAX
from fuyao.errors import NotFound
from fuyao.spec import TaskSpec
from hub.planning.fit import QuotaProbe
from hub.queueing import Queueing
from hub.queueing.quota import demand, quota_hold


def queue_quota(queueing: Queueing) -> QuotaProbe:
    """A probe over the live queues (NotFound for a queue that does not exist)."""

    def probe(queue: str, spec: TaskSpec) -> int | None:
        states = {q.name: q for q in queueing.states()}
        state = states.get(queue)
        if state is None:
            raise NotFound(f"queue {queue!r} not found (queues: {', '.join(sorted(states))})")
        need = demand(spec.requests())
        if not any(need.get(resource) for resource in state.limits):
            return None
        usage = copy.deepcopy(queueing._usage())   # the same use the cycle admits against
        admitted = 0
        while admitted < FIT_LIMIT_MAX and quota_hold(state, states.values(), usage,
                                                      need) is None:
            usage.charge(queue, None, need)
            admitted += 1
        return admitted

    return probe
