"""``fuyaoctl simulate``'s engine: offline what-if runs of the live placement code.

Where it lives, and why: the engine runs the hub's own placement (``hub.fleet`` +
``hub.placement``, every profile) against members running the sim member's own node
scheduler (``fuyao.nodescheduler``, shared ground since both sides use it), so it belongs
to the hub; ``fuyaoctl simulate`` is the one command that runs hub code locally, importing
this package lazily (the CLI never imports ``hub`` at module level). ``bench/trace_quality.py``
reads the same reports, so the benchmark and the command are one implementation.

- ``workload``: pod lists (both layouts), task specs, FGD's arrival order;
- ``fleet``: fleet files, node lists split K ways, live fleets, what-if edits;
- ``policies``: named policies = hub profile + member node policy;
- ``engine``: the federation (hub + members) and the replay;
- ``run``: one run from inputs to the JSON report; ``plot``: allocation-vs-arrival PNGs.
"""

from hub.planning.simulate.engine import Federation, Outcome, Replay, replay
from hub.planning.simulate.fleet import (
    SimCluster,
    Split,
    add_nodes,
    clusters_from_files,
    gpu_milli_of,
    load_nodes,
    remove_cluster,
    split_nodes,
)
from hub.planning.simulate.policies import POLICY_NAMES, SimPolicy, policy
from hub.planning.simulate.run import ordered, simulate, workload_mix
from hub.planning.simulate.workload import (
    SimTask,
    arrival_order,
    gpu_constraint,
    load_pod_list,
    tasks_from_specs,
    timed_order,
)

__all__ = [
    "POLICY_NAMES",
    "Federation",
    "Outcome",
    "Replay",
    "SimCluster",
    "SimPolicy",
    "SimTask",
    "Split",
    "add_nodes",
    "arrival_order",
    "clusters_from_files",
    "gpu_constraint",
    "gpu_milli_of",
    "load_nodes",
    "load_pod_list",
    "ordered",
    "policy",
    "remove_cluster",
    "replay",
    "simulate",
    "split_nodes",
    "tasks_from_specs",
    "timed_order",
    "workload_mix",
]
