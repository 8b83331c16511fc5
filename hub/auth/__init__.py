"""Who may do what on the hub's REST API: tokens, roles, the access policy and its checks.

``hub.auth.actor`` (the identity of the request being served), ``hub.auth.tokens`` (bearer
tokens: create, verify, revoke), ``hub.auth.policy`` (the one table of route -> access),
``hub.auth.guard`` (the FastAPI dependency every route runs), ``hub.auth.ratelimit``.
"""
