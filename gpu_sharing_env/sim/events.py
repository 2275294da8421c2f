"""The event queue: a heap of (time, priority, sequence, kind, payload).

As in SimPy, the sequence number makes ties deterministic: two events at the same time and
priority pop in the order they were pushed.
"""

from __future__ import annotations

import enum
import itertools
from heapq import heappop, heappush

try:
    import cython
except ModuleNotFoundError:  # no Cython at run time: the same no-ops
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]


class EventKind(enum.IntEnum):
    """Event kinds; the value is the priority among events at the same instant (low first)."""

    COMPLETE = 0  # an offline job finishes its work
    END = 1  # an online service reaches the end of its lifetime
    FAULT = 2  # a job fails (cause drawn when it fires)
    OOM = 3  # an over-committed job reaches its memory peak
    READY = 4  # a GPU finished reconfiguring
    TICK = 5  # online load update, SLO accounting, SysMonitor
    ARRIVAL = 6  # a job is submitted


@cython.cfunc
@cython.inline
@cython.boundscheck(False)  # (events are 5-tuples)
@cython.locals(a=tuple, b=tuple, x=cython.double, y=cython.double)
@cython.returns(cython.bint)
def _before(a: tuple[float, int, int, int, int], b: tuple[float, int, int, int, int]) -> bool:
    """``a < b`` for two events: their times compared as C doubles where both are floats and
    differ (the tuples' own comparison would find them unequal and answer ``a[0] < b[0]``,
    the same IEEE comparison), else the tuples' own comparison (equal times, a NaN, an int)."""
    p = a[0]
    q = b[0]
    if type(p) is float and type(q) is float:
        x = p
        y = q
        if x < y:
            return True
        if y < x:
            return False
    return a < b


@cython.cfunc  # (C calls only: no bounds checks)
@cython.boundscheck(False)  # (every index is in range: ``0 <= start <= pos < len(heap)``)
@cython.wraparound(False)
@cython.locals(heap=list, item=tuple, parent=tuple, pos=cython.Py_ssize_t, up=cython.Py_ssize_t)
def _sift_down(heap: list[tuple[float, int, int, int, int]], start: int, pos: int) -> None:
    """``heapq._siftdown`` (the same moves; :func:`_before` as its ``<``)."""
    item = heap[pos]
    while pos > start:
        up = (pos - 1) >> 1
        parent = heap[up]
        if _before(item, parent):
            heap[pos] = parent
            pos = up
            continue
        break
    heap[pos] = item


@cython.cfunc  # (C calls only: no bounds checks)
@cython.boundscheck(False)  # (every index is in range: ``pos`` and ``child`` below ``end``)
@cython.wraparound(False)
@cython.locals(
    heap=list, item=tuple, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
    start=cython.Py_ssize_t, child=cython.Py_ssize_t, right=cython.Py_ssize_t,
)  # fmt: skip
def _sift_up(heap: list[tuple[float, int, int, int, int]], pos: int) -> None:
    """``heapq._siftup`` (the same moves; :func:`_before` as its ``<``)."""
    end = len(heap)
    start = pos
    item = heap[pos]
    child = 2 * pos + 1
    while child < end:
        right = child + 1
        if right < end and not _before(heap[child], heap[right]):
            child = right
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    heap[pos] = item
    _sift_down(heap, start, pos)


@cython.ccall
@cython.locals(heap=list)
def heap_push(
    heap: list[tuple[float, int, int, int, int]], event: tuple[float, int, int, int, int]
) -> None:
    """``heapq.heappush(heap, event)`` for the event heap. Compiled, its comparisons are
    :func:`_before` (two C doubles where the times differ; ``heappush``'s were tuple
    comparisons, ~230 instructions each: 475 M over 2.09 M of them in callgrind's count of a
    ``sjf_predicted`` replay, ``docs/notes/2026-11-29-first-fit-by-id.md``), along the same
    path: the heap's list is the one ``heappush`` would leave (``tests/test_events.py``);
    interpreted, ``heappush`` itself."""
    if cython.compiled:
        heap.append(event)
        _sift_down(heap, 0, len(heap) - 1)
    else:
        heappush(heap, event)


@cython.ccall
@cython.locals(heap=list, last=tuple, first=tuple)
def heap_pop(heap: list[tuple[float, int, int, int, int]]) -> tuple[float, int, int, int, int]:
    """``heapq.heappop(heap)`` for the event heap (see :func:`heap_push`)."""
    if not cython.compiled:
        return heappop(heap)
    last = heap.pop()
    if heap:
        first = heap[0]
        heap[0] = last
        _sift_up(heap, 0)
        return first
    return last


class EventQueue:
    """Min-heap of events; stale events are skipped by their owners (lazy invalidation)."""

    __slots__ = ("_counter", "heap")

    def __init__(self) -> None:
        #: The heap itself (``heap[0][0]`` is the next time): read-only outside this class,
        #: except that ``Simulator.advance`` pops it directly (``heap_pop``, as :meth:`pop_raw`).
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._counter = itertools.count()

    def push(self, time_s: float, kind: EventKind | int, subject: int, stamp: int = 0) -> None:
        """Schedule ``kind`` (an :class:`EventKind` or its value) for ``subject`` (a job id or
        GPU index) at ``time_s``.

        ``stamp`` is compared by the owner when the event pops (an epoch number), so that an
        event made stale by a later change can be ignored without searching the heap.
        """
        heap_push(self.heap, (time_s, int(kind), next(self._counter), subject, stamp))

    def pop(self) -> tuple[float, EventKind, int, int]:
        t, k, _, subject, stamp = heap_pop(self.heap)
        return t, EventKind(k), subject, stamp

    def pop_raw(self) -> tuple[float, int, int, int]:
        """:meth:`pop` with the kind as a plain ``int`` (the simulator's hot path)."""
        t, k, _, subject, stamp = heap_pop(self.heap)
        return t, k, subject, stamp

    def peek_time(self) -> float:
        return self.heap[0][0] if self.heap else float("inf")

    def __len__(self) -> int:
        return len(self.heap)
