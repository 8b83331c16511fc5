"""High availability: the leader lease with its fencing epoch, standbys, the shared CA.

Several hubs may run on one PostgreSQL; exactly one leads (places tasks, takes agent
streams, writes). ``Leadership`` (``hub.ha.leadership``) runs the election and tells the
``Hub`` when it wins; ``Lease`` (``hub.ha.lease``) is the advisory-lock lease and the epoch
row; ``EpochFence`` makes the store refuse every write of a deposed leader; ``ReadCache``
lets a standby answer reads from the store; ``share_ca`` gives all replicas one agent CA.
On SQLite the same code path runs with a local lease (one hub per home). See ``docs/ha.md``.
"""

from hub.ha.leadership import Leadership
from hub.ha.lease import Deposed, EpochFence, Fenced, LeaderInfo, Lease, NotLeader
from hub.ha.readcache import ReadCache

__all__ = [
           "Deposed",
           "EpochFence",
           "Fenced",
           "LeaderInfo",
           "Leadership",
           "Lease",
           "NotLeader",
           "ReadCache",
]
