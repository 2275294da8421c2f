"""Progress of a long command: a tqdm bar on a terminal, plain log lines elsewhere.

On a terminal a bar redraws in place; in a log file (CI, ``nohup``, a pipe) tqdm's redraws are
either suppressed or pile up as carriage returns. :func:`progress` returns a tqdm bar when its
stream is a TTY and otherwise a :class:`PlainProgress`, which writes one line every
:data:`DEFAULT_INTERVAL_S` seconds (``GSG_PROGRESS_INTERVAL`` overrides it)::

    evaluate: 3/12 episodes (25%), elapsed 0:01:31, ETA 0:04:33, first_fit seed 2

By default the ETA extrapolates this run's rate. Where tasks differ in cost by orders of
magnitude (a leaderboard's heuristic cells take 0.05 s, the planner's 20 s), the caller passes
``eta``, e.g. a :class:`KindETA`, which estimates each kind of task from the finished tasks of
that kind and says ``?`` for a kind none of whose tasks has finished yet::

    cells: 54/57 cells (95%), elapsed 0:00:10, ETA > 0:00:01 (not yet timed: planner)

Both take the same calls (the subset of tqdm's API the commands use): ``update``, ``n`` plus
``refresh``, ``set_description``, ``set_postfix_str``, ``write``, ``close`` and ``with``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from types import TracebackType
from typing import Any, TextIO, TypeVar

#: Seconds between two plain progress lines.
DEFAULT_INTERVAL_S = 30.0
#: Environment variable that overrides :data:`DEFAULT_INTERVAL_S` (seconds, > 0).
INTERVAL_ENV = "GSG_PROGRESS_INTERVAL"


def interval_s() -> float:
    """Seconds between plain progress lines: ``$GSG_PROGRESS_INTERVAL`` if it is a positive
    number, else :data:`DEFAULT_INTERVAL_S`."""
    try:
        v = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return v if math.isfinite(v) and v > 0 else DEFAULT_INTERVAL_S


def hms(seconds: float) -> str:
    """``3725`` -> ``"1:02:05"``."""
    s = max(0, round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class KindETA:
    """The remaining time of tasks whose cost depends on their kind, from the finished ones.

    Each kind's cost is the mean duration of its finished tasks (``seconds``: the task's own
    run time, e.g. a cell's ``wall_s``, not the time between two completions). Tasks start in
    the order given, ``workers`` at a time, the next one whenever one finishes (a process
    pool's order), so a running task has used some of its cost already: the estimate counts
    down between completions. The work left is shared by the workers, but the wait is never
    less than the dearest task left. A kind none of whose tasks has finished has no
    estimate: :meth:`text` says so rather than print a confident number, and gives what is
    known as a lower bound (``> 0:00:03 (not yet timed: planner)``), or ``?`` when nothing is
    or when the tasks run past their estimate.

    Args:
        pending: The kind of every task still to run, in the order they start (repeats count).
        workers: Tasks that run at the same time.
        timed: Durations already known, e.g. tasks of an earlier, interrupted run:
            ``(kind, seconds)`` pairs. They inform the estimate; they are not pending.
        clock: Seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self,
        pending: Iterable[Hashable],
        workers: int = 1,
        timed: Iterable[tuple[Hashable, float | None]] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kinds = list(pending)
        self.workers = max(1, int(workers))
        self.clock = clock
        self.done = [False] * len(self.kinds)
        # start time of task i (for i < len(starts)): the first ``workers`` at once
        self.starts = [clock()] * min(self.workers, len(self.kinds))
        self._sum: dict[Hashable, float] = {}
        self._n: Counter[Hashable] = Counter()
        for kind, seconds in timed:
            self._record(kind, seconds)

    def _record(self, kind: Hashable, seconds: float | None) -> None:
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            self._sum[kind] = self._sum.get(kind, 0.0) + seconds
            self._n[kind] += 1

    def finished(self, kind: Hashable, seconds: float | None) -> None:
        """A task of ``kind`` finished after running ``seconds`` (None: count it, no timing):
        the earliest started of its kind still open, and the next task starts."""
        i = next((i for i, k in enumerate(self.kinds) if k == kind and not self.done[i]), None)
        if i is not None:
            self.done[i] = True
        if len(self.starts) < len(self.kinds):
            self.starts.append(self.clock())
        self._record(kind, seconds)

    def cost(self, kind: Hashable) -> float | None:
        """Mean seconds of a finished task of ``kind``; None when none has finished."""
        return self._sum[kind] / self._n[kind] if self._n[kind] else None

    def _left(self) -> list[int]:
        return [i for i, d in enumerate(self.done) if not d]

    def untimed(self) -> list[Hashable]:
        """Kinds of the tasks left with no finished task, in order of first appearance."""
        return list(
            dict.fromkeys(self.kinds[i] for i in self._left() if not self._n[self.kinds[i]])
        )

    def seconds(self) -> float | None:
        """Estimated seconds until the timed tasks left are done (None if tasks are left and
        none of them is timed)."""
        now = self.clock()
        rest = []
        for i in self._left():
            c = self.cost(self.kinds[i])
            if c is not None:
                ran = now - self.starts[i] if i < len(self.starts) else 0.0
                rest.append(max(0.0, c - ran))
        if self._left() and len(rest) == 0:
            return None
        return max(sum(rest) / self.workers, max(rest, default=0.0))

    def text(self) -> str:
        """``0:01:30``; ``> 0:00:03 (not yet timed: planner)``; ``? (not yet timed: ...)``;
        ``? (running past the estimate)``."""
        left = self.seconds()
        missing = self.untimed()
        if not missing:
            if left is not None and left < 0.5 and self._left():
                return "? (running past the estimate)"
            return hms(left or 0.0)
        names = ", ".join(map(str, missing[:2])) + (
            f" and {len(missing) - 2} more" if len(missing) > 2 else ""
        )
        bound = "?" if left is None or left < 0.5 else f"> {hms(left)}"  # not "> 0:00:00"
        return f"{bound} (not yet timed: {names})"


_B = TypeVar("_B", bound="_Closing")


class _Closing:
    """``with bar:`` closes the bar at the end (:class:`PlainProgress`, :class:`NullProgress`)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _B) -> _B:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class PlainProgress(_Closing):
    """Periodic one-line progress reports for a stream that is not a terminal.

    A daemon thread writes :meth:`line` every ``interval`` seconds (so a line comes even while
    one long step runs), and :meth:`close` writes the final state if a line was written
    before and the count moved since (short runs stay silent). The ETA is ``eta()`` if given,
    else the rate of this run extrapolated (``initial``, e.g. resumed work, does not count as
    done by it).
    """

    def __init__(
        self,
        total: float | None = None,
        desc: str = "",
        unit: str = "it",
        initial: float = 0,
        file: TextIO | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
        eta: Callable[[], str] | None = None,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.eta = eta
        self.n = self.initial = initial
        self.postfix = ""
        self.disable = False
        self.file = file
        self.interval = interval_s() if interval is None else float(interval)
        self.clock = clock
        self.t0 = clock()
        self.lines = 0
        self._emitted_n: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name="gsg-progress", daemon=True)
            self._thread.start()

    def _out(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.emit()

    def line(self, count: float | None = None) -> str:
        """The progress line as of now (``count``: the count to show, default ``self.n``)."""
        cur = self.n if count is None else count
        elapsed = self.clock() - self.t0
        unit = self.unit if self.unit.endswith("s") else f"{self.unit}s"
        n = f"{cur:g}"
        text = f"{self.desc}: " if self.desc else ""
        if self.total:
            text += f"{n}/{self.total:g} {unit} ({100.0 * cur / self.total:.0f}%)"
        else:
            text += f"{n} {unit}"
        text += f", elapsed {hms(elapsed)}"
        done = cur - self.initial
        if self.eta is not None:
            text += f", ETA {self.eta()}"
        elif self.total and done > 0:
            text += f", ETA {hms(elapsed / done * max(0.0, self.total - cur))}"
        if self.postfix:
            text += f", {self.postfix}"
        return text

    def emit(self) -> None:
        """Write :meth:`line` now."""
        with self._lock:
            # the count read once: the caller's thread may update it while this one writes,
            # and ``close`` must know which count the last line showed
            n = self.n
            out = self._out()
            try:
                out.write(self.line(n) + "\n")
                out.flush()
            except (OSError, ValueError):  # a closed or broken stream: progress is not vital
                return
            self.lines += 1
            self._emitted_n = n

    # ---------------------------------------------------------------- tqdm's API
    def update(self, n: float = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def set_description(self, desc: str = "", refresh: bool = True) -> None:
        self.desc = desc

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def write(self, s: str, file: TextIO | None = None) -> None:
        """Print a line (to stdout by default, as ``tqdm.write``)."""
        with self._lock:
            out = sys.stdout if file is None else file
            out.write(s + "\n")
            out.flush()

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self.lines and self.n != self._emitted_n:  # the last state, unless just written
            self.emit()


class NullProgress(_Closing):
    """No progress report (``--quiet``): the calls of :class:`PlainProgress` (tqdm's subset)
    show nothing; ``n`` counts and ``write`` prints its line as ``tqdm.write`` does. A
    disabled tqdm did the same after importing tqdm and starting tqdm's monitor thread (53 M
    instructions, callgrind: ~5 % of a replay's imports)."""

    #: As a disabled tqdm's (``Heartbeat`` starts no thread for a disabled bar).
    disable = True

    def __init__(self, total: float | None = None, initial: float = 0) -> None:
        self.total = total
        self.n = initial

    def update(self, n: float = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def set_description(self, desc: str = "", refresh: bool = True) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def write(self, s: str, file: TextIO | None = None) -> None:
        """Print a line (to stdout by default, as ``tqdm.write``)."""
        out = sys.stdout if file is None else file
        out.write(s + "\n")
        out.flush()

    def close(self) -> None:
        pass


def is_tty(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def progress(
    total: float | None = None,
    desc: str = "",
    unit: str = "it",
    initial: float = 0,
    disable: bool = False,
    file: TextIO | None = None,
    eta: Callable[[], str] | None = None,
) -> Any:
    """A progress report on ``file`` (default stderr): a tqdm bar if it is a terminal, a
    :class:`PlainProgress` otherwise, nothing (a :class:`NullProgress`) with ``disable``
    (``--quiet``).
    ``eta`` (e.g. :meth:`KindETA.text`) replaces the rate-based ETA of both.
    """
    out = sys.stderr if file is None else file
    if disable:
        return NullProgress(total, initial)
    if is_tty(out):
        from tqdm import tqdm

        kwargs: dict[str, Any] = {}
        bar = tqdm
        if eta is not None:
            kwargs["bar_format"] = ETA_BAR_FORMAT
            bar = _eta_tqdm(eta)
        return bar(
            total=total, desc=desc or None, unit=unit, initial=initial, disable=disable,
            file=out, dynamic_ncols=True, **kwargs,
        )  # fmt: skip
    return PlainProgress(total, desc, unit, initial, file=file, eta=eta)


#: tqdm's default bar with the ETA from the caller's ``eta`` instead of tqdm's rate-based one.
ETA_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, ETA {eta}{postfix}]"


def _eta_tqdm(eta: Callable[[], str]) -> Any:
    """A tqdm class whose bar shows ``eta()`` (the ``{eta}`` of :data:`ETA_BAR_FORMAT`)."""
    from tqdm import tqdm

    class EtaTqdm(tqdm):  # type: ignore[misc,type-arg]
        @property
        def format_dict(self) -> dict[str, Any]:
            d = dict(super().format_dict)
            d["eta"] = eta()
            return d

    return EtaTqdm


__all__ = [
    "DEFAULT_INTERVAL_S",
    "INTERVAL_ENV",
    "KindETA",
    "NullProgress",
    "PlainProgress",
    "hms",
    "interval_s",
    "progress",
]
