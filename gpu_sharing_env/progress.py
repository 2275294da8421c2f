"""Progress of a long command: a tqdm bar on a terminal, plain log lines elsewhere.

On a terminal a bar redraws in place; in a log file (CI, ``nohup``, a pipe) tqdm's redraws are
either suppressed or pile up as carriage returns. :func:`progress` returns a tqdm bar when its
stream is a TTY and otherwise a :class:`PlainProgress`, which writes one line every
:data:`DEFAULT_INTERVAL_S` seconds (``GSG_PROGRESS_INTERVAL`` overrides it)::

    evaluate: 3/12 episodes (25%), elapsed 0:01:31, ETA 0:04:33, first_fit seed 2

Both take the same calls (the subset of tqdm's API the commands use): ``update``, ``n`` plus
``refresh``, ``set_description``, ``set_postfix_str``, ``write``, ``close`` and ``with``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

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


class PlainProgress:
    """Periodic one-line progress reports for a stream that is not a terminal.

    A daemon thread writes :meth:`line` every ``interval`` seconds (so a line comes even while
    one long step runs), and :meth:`close` writes the final state if a line was written
    before and the count moved since (short runs stay silent). The ETA extrapolates the rate of this run (``initial``, e.g. resumed
    work, does not count as done by it).
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
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
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
        if self.total and done > 0:
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

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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
) -> Any:
    """A progress report on ``file`` (default stderr): a tqdm bar if it is a terminal, a
    :class:`PlainProgress` otherwise, nothing (a disabled tqdm) with ``disable`` (``--quiet``).
    """
    out = sys.stderr if file is None else file
    if disable or is_tty(out):
        from tqdm import tqdm

        return tqdm(
            total=total, desc=desc or None, unit=unit, initial=initial, disable=disable,
            file=out, dynamic_ncols=True,
        )  # fmt: skip
    return PlainProgress(total, desc, unit, initial, file=file)


__all__ = ["DEFAULT_INTERVAL_S", "INTERVAL_ENV", "PlainProgress", "hms", "interval_s", "progress"]
