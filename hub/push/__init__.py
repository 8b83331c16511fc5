"""Push-mode members: clusters joined with their API credentials, run by the hub itself.

``fuyaoctl cluster join NAME --server URL --token T --certificate-authority CA`` (or
``--kubeconfig FILE --context C``) sends a flattened kubeconfig. ``verify`` checks it can
list nodes (and names the missing RBAC verb if not), ``vault`` keeps it encrypted at rest
with a key file outside the database (``--secrets-key-file``), ``supervisor`` runs that
cluster's agent: the same ``fuyao-agent`` program as a pull member, as a child process of
the hub, handed the kubeconfig on its stdin. ``hub/`` never imports ``member_agent/``: the
two meet only at the agent's command line and its gRPC channel, as in pull mode.
Composed in ``hub.server``; REST in ``hub.api.push``.
"""
