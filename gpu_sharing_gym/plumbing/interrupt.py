"""Stopping cleanly on Ctrl-C (SIGINT) and SIGTERM.

Python turns SIGINT into :class:`KeyboardInterrupt`; SIGTERM, by default, kills the process
on the spot: no ``finally`` runs, nothing is saved, and worker processes are left computing.
Within :func:`sigterm_raises`, SIGTERM raises :class:`Terminated` instead, a subclass of
``KeyboardInterrupt``, so every ``except KeyboardInterrupt`` path (save a checkpoint, keep the
finished cells, stop the workers) handles both; :func:`exit_code` gives the shell's status for
each (130 = 128 + SIGINT, 143 = 128 + SIGTERM).

Worker processes leave the decision to their parent: Ctrl-C on a terminal reaches the whole
foreground process group, so pool workers ignore SIGINT (:func:`worker_init`) and the parent
stops them (:func:`stop_pool`, or :func:`process_pool` which does it on any exception).

An exception raised by a signal handler lands between any two bytecodes, also while the main
thread holds a lock that a pool's own threads need (a future's condition inside
``concurrent.futures.wait``, the executor's shutdown lock inside ``submit``); such a lock is
never released, the pool's manager thread blocks on it, and the interpreter then waits for that
thread forever at exit. Code that talks to a pool does so within :func:`signals_held` (or calls
:func:`wait_first`), where a signal is acted on only when the block ends, and
:func:`exit_process` ends an interrupted command even if its exit is stuck.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

if TYPE_CHECKING:  # (imported where used: ``concurrent.futures`` is ~10 ms of a CLI's start)
    from concurrent.futures import Future, ProcessPoolExecutor

_T = TypeVar("_T")
_I = TypeVar("_I")
#: End of :func:`pool_results`' items (an item may itself be None).
_DONE: Any = object()

#: Exit status of a command stopped by Ctrl-C (SIGINT) or by SIGTERM (the shell's 128 + signal).
SIGINT_EXIT = 128 + int(signal.SIGINT)
SIGTERM_EXIT = 128 + int(signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM received (see :func:`sigterm_raises`); a ``KeyboardInterrupt`` so that the same
    handlers stop the work."""


#: Set when :func:`sigterm_raises`'s handler ran (reset when a block starts): some libraries
#: (Ray's ``wait``) catch the exception and raise a plain ``KeyboardInterrupt`` in its place.
_sigterm_received = False


def _is_sigterm(exc: BaseException) -> bool:
    return isinstance(exc, Terminated) or (_sigterm_received and isinstance(exc, KeyboardInterrupt))


def exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C (``KeyboardInterrupt``), 143 for SIGTERM (:class:`Terminated`)."""
    return SIGTERM_EXIT if _is_sigterm(exc) else SIGINT_EXIT


def stopped_by(exc: BaseException) -> str:
    """``"terminated (SIGTERM)"`` or ``"interrupted"``, for a command's last line."""
    return "terminated (SIGTERM)" if _is_sigterm(exc) else "interrupted"


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within this block SIGTERM raises :class:`Terminated` in the main thread of this process;
    the previous handler comes back after it. A no-op outside the main thread (only it may set
    handlers). A process forked inside the block inherits the handler; there it restores the
    default and re-sends the signal, so such a child dies of SIGTERM as it would have."""
    global _sigterm_received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()
    _sigterm_received = False

    def handler(signum: int, frame: Any) -> None:
        global _sigterm_received
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        _sigterm_received = True
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Within this block Ctrl-C (SIGINT) and SIGTERM are recorded, not acted on; when the block
    ends, the first one recorded is acted on as its handler would have done (raise
    ``KeyboardInterrupt`` or :class:`Terminated`, die of the default action, or nothing where it
    is ignored). The yielded list holds the signals recorded so far, so that a blocking loop
    inside can poll it and end early. A no-op outside the main thread."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def note(signum: int, frame: Any) -> None:
        got.append(signum)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if got:
        signum = got[0]
        handler = previous[signal.Signals(signum)]
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)


def wait_first(futures: Collection[Future[_T]], poll_s: float = 0.2) -> set[Future[_T]]:
    """``concurrent.futures.wait(futures, return_when=FIRST_COMPLETED)``'s finished set, with
    Ctrl-C and SIGTERM held (:func:`signals_held`) while it holds the futures' locks: a signal
    ends the wait within ``poll_s`` seconds and is acted on after it, never inside it. An empty
    set only where the signal is ignored."""
    from concurrent.futures import FIRST_COMPLETED, wait

    with signals_held() as got:
        while not got:
            done, _ = wait(futures, timeout=poll_s, return_when=FIRST_COMPLETED)
            if done:
                return done
    return set()


def pool_results(
    pool: ProcessPoolExecutor,
    fn: Callable[[_I], _T],
    items: Iterable[_I],
    in_flight: int | None = None,
) -> Iterator[tuple[_I, _T]]:
    """``(item, fn(item))`` for each of ``items`` as it finishes in ``pool`` (completion order),
    with at most ``in_flight`` submitted at a time (None: all at once). Every call into the pool
    (``submit``, the wait, ``result``) is made within :func:`signals_held`, so a Ctrl-C or
    SIGTERM never lands while the pool's locks are held; it is acted on between two of them."""
    todo = iter(items)
    running: dict[Future[_T], _I] = {}
    while True:
        with signals_held():
            while in_flight is None or len(running) < in_flight:
                nxt = next(todo, _DONE)
                if nxt is _DONE:
                    break
                running[pool.submit(fn, nxt)] = nxt  # type: ignore[arg-type]
        if not running:
            return
        for fut in wait_first(running):
            item = running.pop(fut)
            with signals_held():
                result = fut.result()
            yield item, result


def exit_process(code: int, grace_s: float = 15.0) -> NoReturn:
    """End the process with ``code``. After Ctrl-C or SIGTERM (``code`` 130 or 143) a watchdog
    bounds the interpreter's own exit to ``grace_s`` seconds: that exit joins every non-daemon
    thread and runs the ``atexit`` handlers (``concurrent.futures`` joins its pools' manager
    threads, ``multiprocessing`` its children), and one stuck there (a manager thread blocked
    on a lock that the interrupted main thread held) would keep the process alive forever.
    Past the grace the watchdog flushes the output and ends the process with ``code``; what the
    command saved is on disk by then.

    The interpreter's exit runs a full collection of the cyclic garbage collector, which walks
    every object the command built (0.25-0.45 s after a 20,000-job replay, a sixth of
    ``gsg evaluate``'s process). So the young generations are collected here (the cycles the
    command left behind as it returned: their finalizers run, e.g. a file's flush) and what
    remains is frozen (``gc.freeze``), out of that collection. It is freed as the modules are
    torn down, as before; an older unreachable cycle is left to the end of the process (its
    finalizers, like any at exit, are not guaranteed: the language reference,
    ``object.__del__``)."""
    gc.collect(1)
    gc.freeze()
    if code in (SIGINT_EXIT, SIGTERM_EXIT):

        def watchdog() -> None:
            time.sleep(grace_s)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)

        # a daemon thread: it never delays a normal exit, and it runs on while the exit hangs
        threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()
    sys.exit(code)


def worker_init() -> None:
    """Initializer of pool workers: ignore SIGINT (the parent, which gets the same Ctrl-C,
    decides and stops them) and die of SIGTERM (the default, even if a forked worker inherited
    another handler)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_pool(pool: ProcessPoolExecutor, grace_s: float = 3.0) -> None:
    """Stop ``pool`` now: cancel the work not started, SIGTERM the workers, and SIGKILL those
    still alive after ``grace_s`` seconds. Running work is lost (its caller saves only what
    finished)."""
    # The executor keeps its processes in a private dict; there is no public way to reach them.
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        with contextlib.suppress(Exception):
            if p.is_alive():
                p.kill()
                # SIGKILL cannot be ignored; reaping it can still take a while on a loaded
                # machine, so wait generously (a bounded wait: never hang the caller)
                p.join(10.0)


@contextlib.contextmanager
def process_pool(max_workers: int, mp_context: Any = None) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` whose workers run :func:`worker_init`: closed normally
    (waiting for its work) when the block ends, stopped with :func:`stop_pool` (not waiting)
    when it ends by an exception, Ctrl-C and SIGTERM included."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers, mp_context=mp_context, initializer=worker_init)
    try:
        yield pool
    except BaseException:
        with signals_held() as again:  # a second Ctrl-C must not cut the stopping short
            stop_pool(pool)
            again.clear()  # already stopping: nothing more to act on
        raise
    pool.shutdown(wait=True)


__all__ = [
    "SIGINT_EXIT",
    "SIGTERM_EXIT",
    "Terminated",
    "exit_code",
    "exit_process",
    "pool_results",
    "process_pool",
    "signals_held",
    "sigterm_raises",
    "stop_pool",
    "stopped_by",
    "wait_first",
    "worker_init",
]
