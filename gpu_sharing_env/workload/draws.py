"""A per-process memo of episode draws: what a scenario's workload (``sim/build.py``
``ScenarioWorkload``) draws from a generator in a given state, kept for the next draw by an
equal workload from the same state.

A training env's episode on seed ``s`` and the paired reward's reference curve on seed ``s``
(``agents/envs.py``) start the same episode on two simulators, one right after the other: the
second start reads the first's draw instead of drawing again (the workload, its pre-episode
history and the duration predictor's warm start: ~1.2 ms of a ~1.7 ms start on `default`,
docs/notes/2026-12-01-cold-training.md). A draw is a pure function of the workload's fields
(compared with ``==``) and the generator's state, so a hit gives the same jobs; the generator
is left in the state the draw leaves it in, and what the simulator changes afterwards (the
list, the duration predictor it feeds finished runs) is a fresh copy at every call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import numpy as np

#: Draws kept: the envs of a vector env reset one after another, and each reference curve
#: starts right after its env's reset, so the last few suffice.
DRAW_MEMO_SIZE = 8


class Drawn(Protocol):
    def fresh(self) -> Any:
        """A copy that shares nothing a simulator changes."""

    def kept(self) -> Any:
        """What the memo keeps of a draw just made: something whose ``fresh()`` is the draw's
        ``fresh()`` (it may share what is never changed, as long as it is never handed out)."""


D = TypeVar("D", bound=Drawn)


def _state_key(rng: np.random.Generator) -> tuple[Any, ...] | None:
    """The generator's state as a hashable value (PCG64, ``np.random.default_rng``'s), or None
    for another bit generator (not memoised)."""
    st = rng.bit_generator.state
    if st.get("bit_generator") != "PCG64":
        return None
    return (st["state"]["state"], st["state"]["inc"], st["has_uint32"], st["uinteger"])


class DrawMemo:
    """The last :data:`DRAW_MEMO_SIZE` draws by (generator state, ``tag``), each with the
    workload that drew it and the generator's state after it."""

    def __init__(self, maxsize: int = DRAW_MEMO_SIZE) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[tuple[Any, ...], tuple[Any, Mapping[str, Any], Any]] = (
            OrderedDict()
        )
        self.hits = self.misses = 0

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def draw(self, workload: Any, rng: np.random.Generator, tag: Any, draw: Callable[[], D]) -> D:
        """``draw()`` (which draws from ``rng``) as ``workload`` would return it, ``.fresh()``;
        from the memo when an equal workload drew from this state with the same ``tag``."""
        state = _state_key(rng)
        if state is None:
            return draw()
        key = (state, tag)
        hit = self._entries.get(key)
        if hit is not None and hit[0] == workload:
            self._entries.move_to_end(key)
            self.hits += 1
            rng.bit_generator.state = hit[1]  # (where the draw left it)
            return hit[2].fresh()  # type: ignore[no-any-return]
        self.misses += 1
        out = draw()
        # (the kept copy is never handed out: nothing changes it)
        self._entries[key] = (workload, rng.bit_generator.state, out.kept())
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return out


#: The process's memo (``ScenarioWorkload``'s draws).
DRAWS = DrawMemo()
