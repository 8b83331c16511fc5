"""The access policy: ONE table from REST route to who may call it, and the audit action.

Every route of the REST app has an entry, keyed by method and path template exactly as
FastAPI declares it. ``hub.auth.guard`` refuses a route without an entry (deny by default),
and the role x endpoint matrix test (tests/hub/test_access_matrix.py), generated from the
OpenAPI document, fails for it: adding a route means adding its line here.

Access levels, and which roles hold them (``ROLE_ACCESS``)::

    PUBLIC    no token needed (health)
    SELF      any valid token (whoami)
    READ      every role; task reads of a submitter are limited to its queues
    READ_ALL  viewer, operator, admin (the audit log)
    SUBMIT    submitter (own tasks, own queues), admin
    OPERATE   operator, admin (clusters, join tokens, queues, profiles)
    ADMIN     admin (API tokens)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fuyao.identity import Role


class Access(StrEnum):
    """What a route needs."""

    PUBLIC = "public"
    SELF = "self"
    READ = "read"
    READ_ALL = "read-all"
    SUBMIT = "submit"
    OPERATE = "operate"
    ADMIN = "admin"


ROLE_ACCESS: dict[Role, frozenset[Access]] = {
    Role.ADMIN: frozenset(Access),
    Role.OPERATOR: frozenset({Access.SELF, Access.READ, Access.READ_ALL, Access.OPERATE}),
    Role.SUBMITTER: frozenset({Access.SELF, Access.READ, Access.SUBMIT}),
    Role.VIEWER: frozenset({Access.SELF, Access.READ, Access.READ_ALL}),
}


@dataclass(frozen=True)
class Rule:
    """Who may call a route; ``action`` names it in the audit log (mutations only)."""

    access: Access
    action: str = ""


V1 = "/api/v1"
POLICY: dict[tuple[str, str], Rule] = {
    ("GET", "/healthz"): Rule(Access.PUBLIC),
    ("GET", "/ui"): Rule(Access.PUBLIC),                # a static page; its data needs a token
    ("GET", "/ui/static/{name}"): Rule(Access.PUBLIC),
    # identities
    ("GET", f"{V1}/auth/whoami"): Rule(Access.SELF),
    ("GET", f"{V1}/auth/tokens"): Rule(Access.ADMIN),
    ("POST", f"{V1}/auth/tokens"): Rule(Access.ADMIN, "auth.token.create"),
    ("DELETE", f"{V1}/auth/tokens/{{name}}"): Rule(Access.ADMIN, "auth.token.revoke"),
    # clusters
    ("GET", f"{V1}/clusters"): Rule(Access.READ),
    ("POST", f"{V1}/clusters"): Rule(Access.OPERATE, "cluster.join"),
    ("POST", f"{V1}/clusters/push"): Rule(Access.OPERATE, "cluster.join"),
    ("GET", f"{V1}/clusters/{{name}}"): Rule(Access.READ),
    ("DELETE", f"{V1}/clusters/{{name}}"): Rule(Access.OPERATE, "cluster.remove"),
    ("POST", f"{V1}/clusters/{{name}}/cordon"): Rule(Access.OPERATE, "cluster.cordon"),
    ("POST", f"{V1}/clusters/{{name}}/uncordon"): Rule(Access.OPERATE, "cluster.uncordon"),
    ("PUT", f"{V1}/clusters/{{name}}/taints"): Rule(Access.OPERATE, "cluster.taint"),
    ("GET", f"{V1}/catalog"): Rule(Access.READ),
    ("GET", f"{V1}/clusters/{{name}}/nodes"): Rule(Access.READ),
    ("GET", f"{V1}/clusters/{{name}}/tokens"): Rule(Access.OPERATE),
    ("POST", f"{V1}/clusters/{{name}}/tokens"): Rule(Access.OPERATE, "cluster.token.create"),
    ("DELETE", f"{V1}/clusters/{{name}}/tokens/{{token_id}}"):
        Rule(Access.OPERATE, "cluster.token.revoke"),
    # tasks
    ("GET", f"{V1}/tasks"): Rule(Access.READ),
    ("POST", f"{V1}/tasks"): Rule(Access.SUBMIT, "task.submit"),
    ("POST", f"{V1}/tasks:batch"): Rule(Access.SUBMIT, "task.submit"),
    ("GET", f"{V1}/tasks/{{name}}"): Rule(Access.READ),
    ("DELETE", f"{V1}/tasks/{{name}}"): Rule(Access.SUBMIT, "task.delete"),
    ("POST", f"{V1}/tasks/{{name}}/cancel"): Rule(Access.SUBMIT, "task.cancel"),
    ("POST", f"{V1}/tasks:dry-run"): Rule(Access.SUBMIT),       # stores nothing
    ("GET", f"{V1}/tasks/{{name}}/explain"): Rule(Access.READ),
    # queues and profiles
    ("GET", f"{V1}/queues"): Rule(Access.READ),
    ("POST", f"{V1}/queues"): Rule(Access.OPERATE, "queue.create"),
    ("GET", f"{V1}/queues/{{name}}"): Rule(Access.READ),
    ("PATCH", f"{V1}/queues/{{name}}"): Rule(Access.OPERATE, "queue.update"),
    ("DELETE", f"{V1}/queues/{{name}}"): Rule(Access.OPERATE, "queue.delete"),
    ("GET", f"{V1}/profiles"): Rule(Access.READ),
    ("GET", f"{V1}/profiles/{{name}}"): Rule(Access.READ),
    ("PUT", f"{V1}/profiles/{{name}}"): Rule(Access.OPERATE, "profile.apply"),
    ("DELETE", f"{V1}/profiles/{{name}}"): Rule(Access.OPERATE, "profile.delete"),
    # fleet and the hub itself
    ("GET", f"{V1}/capacity"): Rule(Access.READ),
    ("GET", f"{V1}/capacity/history"): Rule(Access.READ),
    ("GET", f"{V1}/capacity/n-1"): Rule(Access.READ),
    ("GET", f"{V1}/capacity/report"): Rule(Access.READ),
    ("POST", f"{V1}/capacity/fit"): Rule(Access.READ),          # computes, changes nothing
    ("POST", f"{V1}/capacity/report"): Rule(Access.READ),
    ("GET", f"{V1}/audit"): Rule(Access.READ_ALL),
    ("GET", f"{V1}/hub/status"): Rule(Access.READ),
    ("GET", f"{V1}/events"): Rule(Access.READ_ALL),      # every task's and cluster's events
}


def allowed(role: Role, rule: Rule) -> bool:
    """True if ``role`` holds the access ``rule`` needs."""
    return rule.access in ROLE_ACCESS[role]
