"""The event queue (``sim/events.py``: compiled, its heap is parallel C arrays, a plain
event's kind and sequence number one int64 word) holds its events where ``heapq``'s list of
the same tuples would and pops them in ``heapq``'s order, each as it was pushed: on random
event streams with tied times, -0.0 and 0.0, ints, numpy floats and NaNs among the times
(events kept as their own tuples and compared as them), numpy and out-of-int64 subjects, kinds
outside 0..127; through pickles, deep copies and ``drop_kind``. Both the compiled module and
its source run interpreted are checked."""

from __future__ import annotations

import ast
import copy
import heapq
import pickle
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env.sim import events as events_mod
from gpu_sharing_env.sim.events import EventKind, EventQueue
from tests.helpers import interpreted

MODULES = {"module": events_mod, "source": interpreted(events_mod)}

_TIMES: tuple[Any, ...] = (0.0, -0.0, 1.0, 1.5, 2.0, 1e-300, 3.0, float("inf"), 7, 0)


def _time(rng: np.random.Generator, odd: bool) -> Any:
    r = rng.random()
    if odd and r < 0.02:
        return float("nan")
    if odd and r < 0.04:
        return np.float64(rng.choice([1.0, 1.5, 2.5]))
    if r < 0.5:  # ties: a few values, ints among them
        return _TIMES[int(rng.integers(len(_TIMES)))]
    return float(rng.uniform(0.0, 10.0))


def _subject(rng: np.random.Generator, odd: bool) -> Any:
    r = rng.random()
    if odd and r < 0.03:
        return np.int64(rng.integers(50))
    if odd and r < 0.05:
        return int(rng.choice([2**70, -(2**64), 2**63 - 1, -(2**63)]))
    return int(rng.integers(50))


def _same(a: Any, b: Any) -> bool:
    """The same value of the same type, bit for bit (``repr``: -0.0 is not 0.0; a NaN is the
    very object)."""
    if isinstance(a, tuple):
        return (
            type(b) is tuple and len(a) == len(b) and all(map(_same, a, b))
        )  # fmt: skip
    return type(a) is type(b) and (a is b or repr(a) == repr(b))


@pytest.mark.parametrize("mode", sorted(MODULES))
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("odd", [False, True])
def test_the_queue_moves_events_as_heapq(mode: str, seed: int, odd: bool) -> None:
    mod: ModuleType = MODULES[mode]
    rng = np.random.default_rng(seed)
    q = mod.EventQueue()
    ref: list[tuple[Any, ...]] = []
    seq = 0
    popped = 0
    for step in range(3000):
        if ref and rng.random() < 0.45:
            t, k, _, subject, stamp = heapq.heappop(ref)
            assert _same(q.pop_raw(), (t, k, subject, stamp))
            popped += 1
        else:
            t = _time(rng, odd)
            kind: Any = EventKind(int(rng.integers(7)))
            if odd and rng.random() < 0.03:
                kind = int(rng.choice([200, -1, 2**60]))
            subject, stamp = _subject(rng, odd), _subject(rng, odd)
            q.push(t, kind, subject, stamp)
            heapq.heappush(ref, (t, int(kind), seq, subject, stamp))
            seq += 1
        assert len(q) == len(ref)
        if step % 50 == 0 or len(ref) < 40:
            assert _same(tuple(q.items()), tuple(ref))
            assert _same(q.peek_time(), ref[0][0] if ref else float("inf"))
        if step % 500 == 250:  # a pickle and a deep copy carry on as the queue does
            # (the source loaded under another name cannot be pickled: no module to import)
            pickled = step % 1000 == 250 and mode == "module"
            q = pickle.loads(pickle.dumps(q)) if pickled else copy.deepcopy(q)
            assert _same(tuple(q.items()), tuple(ref))
    while ref:
        t, k, _, subject, stamp = heapq.heappop(ref)
        assert _same(q.pop_raw(), (t, k, subject, stamp))
        popped += 1
    assert popped > 1000
    with pytest.raises(IndexError):
        q.pop_raw()


@pytest.mark.parametrize("mode", sorted(MODULES))
@pytest.mark.parametrize("seed", range(4))
def test_drop_kind_keeps_heapq_s_list_of_the_others(mode: str, seed: int) -> None:
    """``drop_kind`` is what the simulator did to the list: filter it, ``heapify`` it; the
    next pushes and pops go on as ``heapq``'s."""
    rng = np.random.default_rng(100 + seed)
    q = MODULES[mode].EventQueue()
    ref: list[tuple[Any, ...]] = []
    for seq in range(400):
        t, k, s = _time(rng, True), int(rng.integers(7)), _subject(rng, True)
        q.push(t, k, s)
        heapq.heappush(ref, (t, k, seq, s, 0))
        if seq % 3 == 0:
            heapq.heappop(ref)
            q.pop_raw()
    for kind in (int(EventKind.FAULT), int(EventKind.ARRIVAL)):
        q.drop_kind(kind)
        ref = [e for e in ref if e[1] != kind]
        heapq.heapify(ref)
        assert _same(tuple(q.items()), tuple(ref))
    q.push(0.5, EventKind.TICK, 1)
    heapq.heappush(ref, (0.5, int(EventKind.TICK), 400, 1, 0))
    while ref:
        t, k, _, subject, stamp = heapq.heappop(ref)
        assert _same(q.pop_raw(), (t, k, subject, stamp))


@pytest.mark.parametrize("mode", sorted(MODULES))
def test_plain_events_are_kept_in_the_arrays(mode: str) -> None:
    """Only the events that are not plain are kept as their own tuples (``_odd``): a float
    time, a kind in 0..127, int subject and stamp in int64 are kept in the arrays."""
    q = MODULES[mode].EventQueue()
    q.push(1.5, EventKind.COMPLETE, 2**63 - 1, -(2**63))
    q.push(-0.0, 127, 0)
    q.push(float("inf"), EventKind.ARRIVAL, 3, 4)
    assert q._odd == {}
    q.push(2, EventKind.TICK, 0)  # an int time
    q.push(float("nan"), EventKind.TICK, 0)
    q.push(1.0, 128, 0)  # a kind past 127
    q.push(1.0, EventKind.TICK, 2**63)  # a subject past int64
    q.push(1.0, EventKind.TICK, np.int64(1))
    q.push(np.float64(1.0), EventKind.TICK, 1)
    assert sorted(q._odd) == [3, 4, 5, 6, 7, 8]


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
    q.push(3, EventKind.TICK, 0)  # an int time pops as the int it was
    assert _same(q.pop(), (3, EventKind.TICK, 0, 0))


def test_pxd_declares_the_queue_s_slots() -> None:
    """``events.pxd``'s ``cdef class`` declares exactly the ``__slots__`` of ``events.py``'s."""
    src = Path(events_mod.__file__).with_name("events.py").read_text(encoding="utf-8")
    node = next(
        n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == "EventQueue"
    )
    slots = next(
        ast.literal_eval(s.value)
        for s in node.body
        if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in s.targets)
    )
    pxd = Path(events_mod.__file__).with_name("events.pxd").read_text(encoding="utf-8")
    declared = re.findall(r"^    cdef [\w\[\]:, ]+? (_\w+)$", pxd, re.M)
    assert sorted(declared) == sorted(slots)
