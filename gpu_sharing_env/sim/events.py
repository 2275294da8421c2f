"""The event queue: a heap of (time, priority, sequence, kind, payload).

As in SimPy, the sequence number makes ties deterministic: two events at the same time and
priority pop in the order they were pushed.
"""

from __future__ import annotations

import enum
from heapq import heapify
from typing import Any

import numpy as np

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


#: A plain event's kind and sequence number share one int64: ``kind << _SEQ_BITS | seq``
#: (kinds ``0 <= kind < _KIND_LIMIT``, sequence numbers below ``1 << _SEQ_BITS``), so that
#: comparing the two words compares ``(kind, seq)`` as the tuples do.
#: (Literals: compiled, these are C ``long long``s, ``events.pxd``, and ``1 << 55`` would be a
#: shift of a C ``int``.)
_SEQ_BITS = 55
_KIND_LIMIT = 128
_SEQ_MASK = 0x7F_FFFF_FFFF_FFFF  # (1 << 55) - 1
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


def _zeros(n: int, code: str) -> Any:
    """``n`` zeros of C type ``code`` (``d``: double, ``q``: int64, ``B``: uint8): a numpy array
    compiled (a typed memoryview's buffer), a list interpreted (cheaper to index there)."""
    if cython.compiled:
        return np.zeros(n, dtype={"d": np.float64, "q": np.int64, "B": np.uint8}[code])
    return [0.0 if code == "d" else 0] * n


@cython.final
@cython.cclass
class EventQueue:
    """Min-heap of events; stale events are skipped by their owners (lazy invalidation).

    An event is the tuple ``(time_s, kind, seq, subject, stamp)`` (``seq`` the queue's count of
    pushes before it) and the heap is ``heapq``'s: the same moves (``_siftdown`` / ``_siftup``)
    on the same comparisons of the same tuples, so the events sit where ``heapq``'s list would
    hold them and pop in its order (``tests/test_events.py``). It is not kept as a list of
    tuples but as parallel arrays (compiled, C arrays through typed memoryviews; interpreted,
    lists): per slot the time as a double, ``kind << 55 | seq`` as one int64 word, the subject
    and the stamp as int64, and a flag. Where both events are plain (a ``float`` time that is
    not NaN, ``int`` kind in 0..127, subject and stamp ``int`` in int64), comparing the two
    times and then the two words is the tuples' comparison (the tuples differ by ``seq`` at
    the latest); an event that is not plain (an int or numpy time, a NaN, a subject or stamp
    that is no ``int`` in int64) keeps its own tuple (``_odd``, by ``seq``) and is compared as
    that tuple, and pops as it was pushed. A popped plain event's time is a new ``float`` of the
    same bits.

    Compiled (``events.pxd``), a level of a sift is a comparison of two C doubles (or words)
    and five C word moves, and ``push`` is a C call from the typed components (``rates``,
    ``lifecycle``, ``jobs``, ``engine``).
    """

    __slots__ = (
        "_flag",
        "_ks",
        "_n",
        "_odd",
        "_popped_stamp",
        "_popped_subject",
        "_seq",
        "_stamp",
        "_subject",
        "_t",
    )

    def __init__(self) -> None:
        #: The subject and stamp of the event :meth:`pop_kind` popped last.
        self._popped_subject: Any = None
        self._popped_stamp: Any = None
        #: How many events are queued (slots ``0 .. _n - 1`` of the arrays, in heap order).
        self._n = 0
        #: The next event's sequence number (pushes so far).
        self._seq = 0
        #: The events that are not plain, by sequence number: their own tuples.
        self._odd: dict[int, tuple[Any, int, int, Any, Any]] = {}
        # Room for 512 events: a ``default`` episode's heap holds up to ~300 (its stale
        # completions wait in it), so it never grows there (growing from 64 was three copies
        # an episode, ~1.4 k instructions a step; 2026-12-02 sim-typed-reads note).
        self._alloc(512)

    def _alloc(self, cap: int) -> None:
        """Arrays of ``cap + 1`` slots holding the current events (the last slot is scratch:
        the item a sift carries): compiled, numpy arrays (the typed memoryviews' buffers);
        interpreted, lists."""
        n = self._n
        new: list[Any] = [_zeros(cap + 1, code) for code in "dqqqB"]
        if n:
            old: list[Any] = [self._t, self._ks, self._subject, self._stamp, self._flag]
            for a, b in zip(new, old, strict=True):
                a[:n] = b[:n]
        self._t: Any = new[0]
        self._ks: Any = new[1]
        self._subject: Any = new[2]
        self._stamp: Any = new[3]
        self._flag: Any = new[4]

    # ------------------------------------------------------------------ slots
    @cython.boundscheck(False)  # (slots below the arrays' length by construction)
    @cython.initializedcheck(False)  # (the arrays exist from ``__init__`` on: ``_alloc``)
    @cython.wraparound(False)
    @cython.locals(
        i=cython.Py_ssize_t, seq=cython.longlong, k=cython.longlong, x=cython.double,
        plain=cython.bint,
    )  # fmt: skip
    def _put(self, i: int, time_s: Any, kind: Any, seq: int, subject: Any, stamp: Any) -> None:
        """Write event ``(time_s, kind, seq, subject, stamp)`` into slot ``i``."""
        plain = False
        if (
            type(time_s) is float
            and type(kind) is int
            and type(subject) is int
            and type(stamp) is int
            and 0 <= seq <= _SEQ_MASK
        ):
            x = time_s
            plain = (
                x == x  # (not NaN)
                and 0 <= kind < _KIND_LIMIT
                and _I64_MIN <= subject <= _I64_MAX
                and _I64_MIN <= stamp <= _I64_MAX
            )
        if plain:
            k = kind
            self._t[i] = x
            self._ks[i] = (k << _SEQ_BITS) | seq
            self._subject[i] = subject
            self._stamp[i] = stamp
            self._flag[i] = 0
        else:
            self._odd[seq] = (time_s, kind, seq, subject, stamp)
            self._ks[i] = seq
            self._flag[i] = 1

    @cython.boundscheck(False)  # (slots below the arrays' length by construction)
    @cython.initializedcheck(False)  # (the arrays exist from ``__init__`` on: ``_alloc``)
    @cython.wraparound(False)
    @cython.locals(i=cython.Py_ssize_t, ks=cython.longlong)
    def _item(self, i: int) -> tuple[Any, int, int, Any, Any]:
        """Slot ``i``'s event as its tuple."""
        ks = self._ks[i]
        if self._flag[i]:
            return self._odd[ks]
        return (
            float(self._t[i]),
            ks >> _SEQ_BITS,
            ks & _SEQ_MASK,
            self._subject[i],
            self._stamp[i],
        )

    @cython.boundscheck(False)  # (slots below the arrays' length by construction)
    @cython.initializedcheck(False)  # (the arrays exist from ``__init__`` on: ``_alloc``)
    @cython.wraparound(False)
    @cython.locals(i=cython.Py_ssize_t, j=cython.Py_ssize_t)
    def _less(self, i: int, j: int) -> bool:
        """Slot ``i``'s event ``<`` slot ``j``'s, as their tuples compare."""
        if self._flag[i] == 0 and self._flag[j] == 0:
            if self._t[i] < self._t[j]:
                return True
            if self._t[j] < self._t[i]:
                return False
            return self._ks[i] < self._ks[j]  # (equal times: kind, then seq)
        return self._item(i) < self._item(j)

    @cython.boundscheck(False)  # (slots below the arrays' length by construction)
    @cython.initializedcheck(False)  # (the arrays exist from ``__init__`` on: ``_alloc``)
    @cython.wraparound(False)
    @cython.locals(dst=cython.Py_ssize_t, src=cython.Py_ssize_t)
    def _move(self, dst: int, src: int) -> None:
        """Slot ``dst`` := slot ``src``."""
        self._t[dst] = self._t[src]
        self._ks[dst] = self._ks[src]
        self._subject[dst] = self._subject[src]
        self._stamp[dst] = self._stamp[src]
        self._flag[dst] = self._flag[src]

    @cython.initializedcheck(False)
    @cython.locals(start=cython.Py_ssize_t, pos=cython.Py_ssize_t, up=cython.Py_ssize_t,
                   tmp=cython.Py_ssize_t)  # fmt: skip
    def _sift_down(self, start: int, pos: int) -> None:
        """``heapq._siftdown`` (the same moves; the item carried in the scratch slot)."""
        tmp = len(self._t) - 1
        self._move(tmp, pos)
        while pos > start:
            up = (pos - 1) >> 1
            if self._less(tmp, up):
                self._move(pos, up)
                pos = up
                continue
            break
        self._move(pos, tmp)

    @cython.initializedcheck(False)
    @cython.locals(
        pos=cython.Py_ssize_t, end=cython.Py_ssize_t, start=cython.Py_ssize_t,
        child=cython.Py_ssize_t, right=cython.Py_ssize_t, tmp=cython.Py_ssize_t,
    )  # fmt: skip
    def _sift_up(self, pos: int) -> None:
        """``heapq._siftup`` (the same moves)."""
        end = self._n
        start = pos
        tmp = len(self._t) - 1
        self._move(tmp, pos)
        child = 2 * pos + 1
        while child < end:
            right = child + 1
            if right < end and not self._less(child, right):
                child = right
            self._move(pos, child)
            pos = child
            child = 2 * pos + 1
        self._move(pos, tmp)
        self._sift_down(start, pos)

    def _load(self, items: list[tuple[Any, int, int, Any, Any]]) -> None:
        """Hold exactly ``items``, in this order (a heap's list), instead of the events."""
        self._n = 0
        self._odd = {}
        self._alloc(max(64, len(items)))
        for i, (t, k, seq, subject, stamp) in enumerate(items):
            self._put(i, t, k, seq, subject, stamp)
        self._n = len(items)

    # ------------------------------------------------------------------ the queue
    @cython.initializedcheck(False)
    @cython.locals(n=cython.Py_ssize_t, seq=cython.longlong)
    def push(self, time_s: Any, kind: Any, subject: Any, stamp: Any = 0) -> None:
        """Schedule ``kind`` (an :class:`EventKind` or its value) for ``subject`` (a job id or
        GPU index) at ``time_s``: ``heapq.heappush`` of ``(time_s, int(kind), seq, subject,
        stamp)``.

        ``stamp`` is compared by the owner when the event pops (an epoch number), so that an
        event made stale by a later change can be ignored without searching the heap.
        """
        n = self._n
        if n + 1 >= len(self._t):  # (the last slot is scratch)
            self._alloc(2 * n)
        seq = self._seq
        self._seq = seq + 1
        self._put(n, time_s, int(kind), seq, subject, stamp)
        self._n = n + 1
        self._sift_down(0, n)

    def pop_raw(self) -> tuple[Any, int, Any, Any]:
        """``heapq.heappop``: the next event as ``(time_s, kind, subject, stamp)``, the kind a
        plain ``int``; IndexError when empty (:meth:`peek_time`'s time, then
        :meth:`pop_kind`)."""
        if self._n == 0:
            raise IndexError("pop from an empty event queue")
        t = self.peek_time()
        kind = self.pop_kind()
        return (t, kind, self._popped_subject, self._popped_stamp)

    @cython.boundscheck(False)  # (slots below the arrays' length by construction)
    @cython.initializedcheck(False)  # (the arrays exist from ``__init__`` on: ``_alloc``)
    @cython.wraparound(False)
    @cython.locals(n=cython.Py_ssize_t, ks=cython.longlong, kind=cython.Py_ssize_t)
    def pop_kind(self) -> int:
        """:meth:`pop_raw` without its tuple (``Simulator.advance``'s loop, which has the time
        from :meth:`peek_time`): the next event popped, its kind returned (compiled, a C
        integer), its subject and stamp left in ``_popped_subject`` and ``_popped_stamp``;
        IndexError when empty."""
        n = self._n
        if n == 0:
            raise IndexError("pop from an empty event queue")
        ks = self._ks[0]
        if self._flag[0]:
            _, k, _, subject, stamp = self._odd.pop(ks)
            kind = k
        else:
            kind = ks >> _SEQ_BITS
            subject = self._subject[0]
            stamp = self._stamp[0]
        self._popped_subject = subject
        self._popped_stamp = stamp
        n -= 1
        self._n = n
        if n:
            self._move(0, n)
            self._sift_up(0)
        return kind

    def pop(self) -> tuple[Any, EventKind, Any, Any]:
        t, k, subject, stamp = self.pop_raw()
        return t, EventKind(k), subject, stamp

    @cython.boundscheck(False)  # (slots below the arrays' length by construction)
    @cython.initializedcheck(False)  # (the arrays exist from ``__init__`` on: ``_alloc``)
    @cython.wraparound(False)
    def peek_time(self) -> Any:
        """The next event's time (``inf`` when empty)."""
        if self._n == 0:
            return float("inf")
        if self._flag[0]:
            return self._odd[self._ks[0]][0]
        return float(self._t[0])

    # (``Simulator.advance``'s tests of the next event's time: compiled, where the next event is
    # plain and the time asked a float, two C doubles compared and no float made; else
    # ``peek_time``'s object compared as before)
    @cython.boundscheck(False)  # (slot 0 exists: ``_n`` checked first)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    @cython.locals(x=cython.double)
    def peek_is(self, t: Any) -> bool:
        """``len(self) > 0 and self.peek_time() == t``."""
        if self._n == 0:
            return False
        if self._flag[0] == 0 and type(t) is float:
            x = t
            return self._t[0] == x
        return bool(self.peek_time() == t)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    @cython.locals(x=cython.double)
    def peek_le(self, t: Any) -> bool:
        """``len(self) > 0 and self.peek_time() <= t``."""
        if self._n == 0:
            return False
        if self._flag[0] == 0 and type(t) is float:
            x = t
            return self._t[0] <= x
        return bool(self.peek_time() <= t)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    @cython.locals(x=cython.double)
    def peek_gt(self, t: Any) -> bool:
        """``len(self) > 0 and self.peek_time() > t``."""
        if self._n == 0:
            return False
        if self._flag[0] == 0 and type(t) is float:
            x = t
            return self._t[0] > x
        return bool(self.peek_time() > t)

    def items(self) -> list[tuple[Any, int, int, Any, Any]]:
        """The events as tuples, in heap order (``heapq``'s list)."""
        return [self._item(i) for i in range(self._n)]

    def drop_kind(self, kind: int) -> None:
        """Drop every event of ``kind``: the list of the others, in heap order, ``heapify``'d."""
        kept = [e for e in self.items() if e[1] != kind]
        heapify(kept)
        self._load(kept)

    def __len__(self) -> int:
        return self._n

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _restore, (self.items(), self._seq)


@cython.locals(q=EventQueue)
def _restore(items: list[tuple[Any, int, int, Any, Any]], seq: int) -> EventQueue:
    """The queue :meth:`EventQueue.__reduce__` describes: ``items`` in heap order, the next
    sequence number ``seq``."""
    q = EventQueue()
    q._load(items)
    q._seq = seq
    return q
