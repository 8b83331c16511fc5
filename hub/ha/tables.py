"""The HA tables (created by migration 3), as ``hub.ha`` queries them.

``ha_leader`` holds one row (id 1): the fencing epoch and who holds it; ``ha_replicas`` one
row per running hub process; ``ha_pki`` the agent CA the replicas share.
"""

from __future__ import annotations

from hub.store import TABLES

LEADER = TABLES["ha_leader"]
REPLICAS = TABLES["ha_replicas"]
PKI = TABLES["ha_pki"]
LEADER_ROW = 1
