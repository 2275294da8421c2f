"""The event heap's own ``heappush`` / ``heappop`` (``sim/events.py``: ``heap_push``,
``heap_pop``; compiled, the times compared as C doubles where they differ) leave the heap's list
exactly as ``heapq``'s do, item for item (the same objects in the same places), and pop the
same events: on random event streams with tied times, ints among the times, -0.0 and 0.0, and
NaNs (where the tuples' own comparison decides)."""

from __future__ import annotations

import heapq
import itertools

import numpy as np
import pytest

from gpu_sharing_env.sim.events import EventKind, EventQueue, heap_pop, heap_push

_TIMES = (0.0, -0.0, 1.0, 1.5, 2.0, 1e-300, 3.0, float("inf"), 7, 0)


def _time(rng: np.random.Generator, nan: bool) -> float:
    r = rng.random()
    if nan and r < 0.02:
        return float("nan")
    if r < 0.5:  # ties: a few values, ints among them
        return _TIMES[int(rng.integers(len(_TIMES)))]  # type: ignore[return-value]
    return float(rng.uniform(0.0, 10.0))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("nan", [False, True])
def test_heap_push_and_pop_move_items_as_heapq(seed: int, nan: bool) -> None:
    rng = np.random.default_rng(seed)
    ours: list[tuple[float, int, int, int, int]] = []
    ref: list[tuple[float, int, int, int, int]] = []
    seq = itertools.count()
    popped = 0
    for _ in range(3000):
        if ours and rng.random() < 0.45:
            a, b = heap_pop(ours), heapq.heappop(ref)
            assert a is b
            popped += 1
        else:
            ev = (_time(rng, nan), int(rng.integers(7)), next(seq), int(rng.integers(50)), 0)
            heap_push(ours, ev)
            heapq.heappush(ref, ev)
        assert len(ours) == len(ref)
        assert all(x is y for x, y in zip(ours, ref, strict=True))
    while ref:
        assert heap_pop(ours) is heapq.heappop(ref)
        popped += 1
    assert popped > 1000
    with pytest.raises(IndexError):
        heap_pop(ours)


def test_the_queue_pops_in_time_kind_and_push_order() -> None:
    q = EventQueue()
    q.push(2.0, EventKind.TICK, 1)
    q.push(1.0, EventKind.ARRIVAL, 2)
    q.push(1.0, EventKind.COMPLETE, 3, 4)
    q.push(1.0, EventKind.COMPLETE, 5)
    q.push(0.5, EventKind.READY, 6)
    got = [q.pop_raw() for _ in range(len(q))]
    assert got == [
        (0.5, int(EventKind.READY), 6, 0),
        (1.0, int(EventKind.COMPLETE), 3, 4),
        (1.0, int(EventKind.COMPLETE), 5, 0),
        (1.0, int(EventKind.ARRIVAL), 2, 0),
        (2.0, int(EventKind.TICK), 1, 0),
    ]
