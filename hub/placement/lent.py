"""What a placement decision lends out of the scheduler's tables (``hub.placement.cache``):
its statuses as they were when lent, read through a ``Journal`` of the rows changed since.

Kept out of the compiled engine (``hub.native``): lent decisions hold ``Statuses`` and
``Journal`` by weak reference, which a compiled class cannot take, and ``LentStatuses`` is
a ``Mapping`` - mypyc on CPython 3.11 frees a weak reference to a compiled subclass of a
Python class wrongly. A lent decision builds one ``Journal`` and one ``LentStatuses``;
``LentStatuses`` reads the table (its methods) only when the decision's statuses are read.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping

from hub.placement.framework import Status
from hub.placement.result import Row


class Statuses(dict[str, Status]):
    """Every cluster's status for one decision (a dict that a weak reference can follow)."""

    __slots__ = ("__weakref__",)


class Journal:
    """What a lent decision's rows were before the table changed them (first change only):
    the decision reads the table's containers through it, so lending copies nothing."""

    __slots__ = ("__weakref__", "rows")

    def __init__(self) -> None:
        self.rows: dict[int, Row] = {}


class LentStatuses(Mapping[str, Status]):
    """A decision's statuses: the table's, as they were when lent (built on first read)."""

    __slots__ = ("_journal", "_names", "_read", "_statuses")

    def __init__(self, names: list[str], statuses: dict[str, Status], journal: Journal) -> None:
        self._names, self._statuses = names, statuses
        self._journal: Journal | None = journal   # let go once read
        self._read: dict[str, Status] | None = None

    def _all(self) -> dict[str, Status]:
        read = self._read
        if read is None:
            journal = self._journal
            assert journal is not None
            read = self._read = dict(self._statuses)
            names = self._names
            for i, row in journal.rows.items():
                read[names[i]] = row[0]
            self._journal = None
        return read

    def __getitem__(self, key: str) -> Status:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._statuses)

    def items(self) -> ItemsView[str, Status]:
        """The dict's own view (the ``Mapping`` mixin's looks up every key again)."""
        return self._all().items()
