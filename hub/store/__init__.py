"""The hub's store: SQLModel tables on SQLite (default) or PostgreSQL, behind ``Store``.

Callers use ``Store`` and the record types; rows, sessions and SQLAlchemy errors stay inside
this package (errors surface as ``fuyao.errors``). See ``docs/concepts/store.md``.
"""

from hub.store.migrations import LATEST_VERSION, MIGRATIONS, Migration
from hub.store.queue_rows import QueueRecord
from hub.store.records import (
    CLUSTER_UPDATE_FIELDS,
    TASK_UPDATE_FIELDS,
    ClusterRecord,
    EventRecord,
    NewTasks,
    PlacementRecord,
    TaskRecord,
    TaskUpdate,
)
from hub.store.store import Store
from hub.store.tables import TABLES

__all__ = [
    "CLUSTER_UPDATE_FIELDS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "TABLES",
    "TASK_UPDATE_FIELDS",
    "ClusterRecord",
    "EventRecord",
    "Migration",
    "NewTasks",
    "PlacementRecord",
    "QueueRecord",
    "Store",
    "TaskRecord",
    "TaskUpdate",
]
