"""The cyclic garbage collector in a command's own process.

What a command builds before and during an episode (its modules, the fleet, the trace's jobs, an
episode's runtime state) lives until the command is done or the next episode's reset and holds
almost no reference cycles: a 20,000-job PAI replay (the side-by-side's, ``../shared/bench/
side_by_side.sh``) leaves 393 unreachable objects from its imports and set-up and 327 from its
episode, among ~97,000 and ~236,000 that the collector tracks (``gc.collect`` and ``gc.get_count``
after each part run with the collector paused, 2026-11-29). Python's collector nevertheless scans
each such object twice as it survives a young and then a middle-generation pass: ~25 ms of the
set-up's ~100 ms and ~55 ms of the episode's ~1.4 s of CPU (``gc.callbacks``,
``docs/notes/2026-11-29-replay-process.md``).

:func:`deferred` runs a block with the young generation's threshold raised to :data:`YOUNG`
container allocations (Python's default: 700), so a replay of that size makes no pass at all and
a longer block still makes one every :data:`YOUNG` allocations (unreachable cycles are still
collected, in passes 1,400x rarer than Python's: that bounds how many objects they hold, not
their bytes; a policy that left large buffers in cycles at every decision would want a smaller
``young``); then it freezes what the block left
(``gc.freeze``: no later pass scans it again; it is freed by reference counting as before, and
a cycle among it is left to the end of the process) and restores the thresholds. Only the
command line uses it, in its own process (``gsg``'s dispatch around a command module's import,
``gsg evaluate`` around its set-up and each episode); a library caller's collector is never
touched.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: The young generation's threshold inside :func:`deferred`: ~4x the ~236,000 tracked objects a
#: 20,000-job PAI replay keeps (module docstring), so such a replay makes no pass.
YOUNG = 1_000_000


@contextmanager
def deferred(young: int = YOUNG) -> Iterator[None]:
    """Run the block with the collector's young threshold at ``young``, then ``gc.freeze()``
    what it left and restore the thresholds (also when the block raises). Whether the collector
    is enabled is left as it is."""
    old = gc.get_threshold()
    gc.set_threshold(young, *old[1:])
    try:
        yield
    finally:
        gc.freeze()
        gc.set_threshold(*old)
