"""Fresh task ids: random (version 4) UUIDs in their usual text form, a batch at a time.

``str(uuid.uuid4())`` reads the OS's randomness once an id, and each read lets go of the
interpreter's lock: in a 200-task submit beside a busy store writer thread, each of the 200
reads could hand the lock over and wait to get it back (200 ids took 38.6 ms of wall time
beside a busy thread against 0.40 ms alone; ``docs/benchmarks.md``, e2e section, "Twenty-fifth
pass"). ``new_ids`` reads the randomness for a whole batch at once and formats each id from
it: the same 122 random bits an id, the same version and variant bits, the same text.
"""

from __future__ import annotations

import os

_VARIANT = "89ab"   # the RFC 4122 variant: the first hex digit of the fourth group is 10xx


def new_ids(count: int) -> list[str]:
    """``count`` new random UUIDs (version 4), as ``str(uuid.uuid4())`` writes them."""
    digits = os.urandom(16 * count).hex()
    out = []
    for at in range(0, 32 * count, 32):
        h = digits[at:at + 32]
        out.append(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-"
                   f"{h[20:]}")
    return out


def new_id() -> str:
    """One new random UUID (version 4) as text."""
    return new_ids(1)[0]
