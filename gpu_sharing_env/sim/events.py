"""The event queue: a heap of (time, priority, sequence, kind, payload).

As in SimPy, the sequence number makes ties deterministic: two events at the same time and
priority pop in the order they were pushed.
"""

from __future__ import annotations

import enum
import itertools
from heapq import heappop, heappush


class EventKind(enum.IntEnum):
    """Event kinds; the value is the priority among events at the same instant (low first)."""

    COMPLETE = 0  # an offline job finishes its work
    END = 1  # an online service reaches the end of its lifetime
    FAULT = 2  # a job fails (cause drawn when it fires)
    OOM = 3  # an over-committed job reaches its memory peak
    READY = 4  # a GPU finished reconfiguring
    TICK = 5  # online load update, SLO accounting, SysMonitor
    ARRIVAL = 6  # a job is submitted


class EventQueue:
    """Min-heap of events; stale events are skipped by their owners (lazy invalidation)."""

    __slots__ = ("_counter", "heap")

    def __init__(self) -> None:
        #: The heap itself (``heap[0][0]`` is the next time): read-only outside this class,
        #: except that ``Simulator.advance`` pops it directly (``heappop``, as :meth:`pop_raw`).
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._counter = itertools.count()

    def push(self, time_s: float, kind: EventKind | int, subject: int, stamp: int = 0) -> None:
        """Schedule ``kind`` (an :class:`EventKind` or its value) for ``subject`` (a job id or
        GPU index) at ``time_s``.

        ``stamp`` is compared by the owner when the event pops (an epoch number), so that an
        event made stale by a later change can be ignored without searching the heap.
        """
        heappush(self.heap, (time_s, int(kind), next(self._counter), subject, stamp))

    def pop(self) -> tuple[float, EventKind, int, int]:
        t, k, _, subject, stamp = heappop(self.heap)
        return t, EventKind(k), subject, stamp

    def pop_raw(self) -> tuple[float, int, int, int]:
        """:meth:`pop` with the kind as a plain ``int`` (the simulator's hot path)."""
        t, k, _, subject, stamp = heappop(self.heap)
        return t, k, subject, stamp

    def peek_time(self) -> float:
        return self.heap[0][0] if self.heap else float("inf")

    def __len__(self) -> int:
        return len(self.heap)
