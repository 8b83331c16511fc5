"""Capacity planning on a copy of the fleet view: fit, N-1, fragmentation, history.

``Planner`` (``planner``) is what the hub wires in and the REST router calls; it answers
every question with the hub's own scheduler and fit code on a copy of the live fleet view
(``snapshot.copy_fleet``). ``fit`` counts how many more tasks of a shape fit; ``failover``
judges N-1; ``fragmentation`` measures FGD fragmentation against a shape distribution;
``report`` groups capacity rows; ``history`` samples capacity into the store.
See docs/capacity.md. ``simulate`` is ``fuyaoctl simulate``'s offline engine (docs/simulate.md).
"""
