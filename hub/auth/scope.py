"""What a submitter may touch: tasks in its queues (read), and its own tasks (change).

Called by the task routes (``hub.api.tasks``) after ``hub.auth.guard`` let the request in;
every role but submitter passes. Refusals are ``PermissionDenied`` naming the rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuyao.errors import PermissionDenied
from fuyao.identity import Role
from fuyao.spec import TaskSpec
from hub.auth.actor import Identity


def _who(identity: Identity) -> str:
    return f"token {identity.name} (submitter, queues {', '.join(identity.queues)})"


def check_submit(identity: Identity, specs: Sequence[TaskSpec]) -> None:
    """Every task must be in one of a submitter's queues."""
    outside = sorted({s.queue for s in specs if not identity.may_use_queue(s.queue)})
    if outside:
        raise PermissionDenied(f"{_who(identity)} may not submit to queue(s) "
                               f"{', '.join(outside)} (nothing was stored)")


def readable_queues(identity: Identity) -> list[str] | None:
    """The queues whose tasks the identity may list (None: all)."""
    return list(identity.queues) if identity.role == Role.SUBMITTER else None


def check_read(identity: Identity, queue: str, name: str) -> None:
    """A submitter reads only tasks of its queues."""
    if not identity.may_use_queue(queue):
        raise PermissionDenied(f"{_who(identity)} may not read task {name} in queue {queue}")


def check_change(identity: Identity, owner: str, queue: str, name: str, what: str) -> None:
    """A submitter changes only its own tasks (others' in its queues are read-only)."""
    if identity.role != Role.SUBMITTER:
        return
    if owner != identity.name or not identity.may_use_queue(queue):
        raise PermissionDenied(f"{_who(identity)} may {what} only its own tasks; task {name} "
                               f"was submitted by {owner or 'someone else'}")
