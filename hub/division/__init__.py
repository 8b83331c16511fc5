"""Tasks divided across clusters: one part (a task of its own) per cluster.

``PlacementLoop`` (``hub.loops``) owns one ``Division``: in each cycle it hands it the
queued tasks that may be divided (``gang: false``, ``replicas > 1``, and either no single
cluster fits them or ``spread: weighted``); ``hub.division.placer`` measures what each
cluster can take with the real fit code, splits the replicas with
``hub.placement.division.divide`` and reserves one part per cluster; the loop stores the
parts and places them in the cycle's one commit. ``Division.settle`` then adds the parts up
into the divided task's state, ends it when they end and cancels its parts when it ends.
Rules and a worked example: ``docs/concepts/gangs-and-division.md``.
"""

from hub.division.book import Division

__all__ = ["Division"]
