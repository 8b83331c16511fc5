"""A burst beyond the fleet: the queued tasks of one shape are decided once per fleet change
(``hub.placement.misses``), and a task that fits is still placed in the cycle it fits in."""

from __future__ import annotations

from tests.hub.conftest import HubHarness
from tests.queueing.conftest import add_cluster, finish, placed, submit, task


async def test_a_full_fleet_decides_a_shape_once_and_places_the_next_task_when_room_frees(
        quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=2)
    await submit(quiet, *({"name": f"t{i}", "gpu": 1} for i in range(6)),
                 {"name": "big", "gpu": 2})
    loop = quiet.hub.placement
    await loop.cycle()
    assert sorted(placed(quiet)) == ["t0", "t1"]
    # t2 found no room and was decided; t3..t5 got its answer; "big" is a shape of its own
    assert (loop.misses.decided, loop.misses.answered) == (4, 3)
    assert task(quiet, "t5").message == task(quiet, "t2").message
    await loop.cycle()            # nothing changed: the blocked head answered again
    assert (loop.misses.decided, loop.misses.answered) == (4, 4)
    await finish(quiet, "t0")     # one GPU frees: the first in line is placed this cycle
    await loop.cycle()
    assert sorted(placed(quiet)) == ["t1", "t2"]
    # t2 decided (placed), t3 decided again after that reservation, t4, t5 answered, and
    # "big" decided again: the fleet changed since its miss
    assert (loop.misses.decided, loop.misses.answered) == (7, 6)
