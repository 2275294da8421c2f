"""The one runner of independent cells: in-process, across local processes, or as Ray tasks.

``gsg leaderboard``, ``gsg headroom`` and ``gsg reproduce`` hand their cells to
:func:`run_tasks`: picklable items and a top-level function of one item. Every backend yields
``(item, fn(item))`` pairs as cells finish (completion order, not submission order); the caller
saves each result at once, so an interrupted run keeps everything that finished and a rerun
skips it. Results do not depend on the backend: each cell builds its own simulator and the
simulator is deterministic per seed.

Backends (:data:`BACKENDS`): ``local`` runs in this process (``workers == 1``) or in a pool of
``workers`` processes (:func:`gpu_sharing_gym.plumbing.interrupt.process_pool`: Ctrl-C and SIGTERM stop
the workers within seconds); ``ray`` runs each cell as a Ray task, on a local Ray with
``workers`` CPUs or on an existing cluster (``address``, e.g. ``auto`` after ``ray start``).
A command opens one Ray session for all its cells with :func:`backend_session`; the flags
``--backend`` and ``--ray-address`` are the same in every command (:func:`add_backend_args`,
:func:`check_backend_args`).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import signal
import socket
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from gpu_sharing_gym.cells import Cell, run_cell
from gpu_sharing_gym.plumbing.interrupt import pool_results, process_pool

BACKENDS = ("local", "ray")
#: The one line a command prints where ``--backend ray`` is asked for without Ray.
RAY_MISSING = "--backend ray: Ray is not installed (pip install 'gpu-sharing-gym[ray]')"

_I = TypeVar("_I")
_T = TypeVar("_T")

#: True while the Ray in use is a local one this process started (:func:`_ray_init` without an
#: address): its shutdown stops its workers, so an interrupt leaves the tasks to it.
_local_ray_ours = False


class BackendError(RuntimeError):
    """The backend cannot run (e.g. Ray is not installed); one-line message."""


def _mp_context() -> Any:
    # Never fork: the parent may hold threads (tqdm's monitor, torch) that fork would copy
    # mid-lock. forkserver is cheaper than spawn where it exists (POSIX).
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method)


def run_local(
    fn: Callable[[_I], _T], items: Iterable[_I], workers: int, mp_context: Any = None
) -> Generator[tuple[_I, _T], None, None]:
    """``(item, fn(item))`` for each item, in this process (``workers <= 1``) or in a pool of
    ``workers`` processes started with ``mp_context`` (default forkserver, else spawn: ``fn``
    and the items must pickle; a caller whose items do not passes the fork context and
    items that index what the forked workers inherit).

    At most ``2 * workers`` cells are in flight; an interrupt (Ctrl-C, SIGTERM) stops the
    workers within seconds, losing only the cells they were running.
    """
    if workers <= 1:
        for item in items:
            yield item, fn(item)
        return
    # process_pool: on an interrupt (or the caller closing this generator) the workers are
    # terminated at once instead of finishing their cells; they ignore Ctrl-C themselves.
    with process_pool(workers, mp_context or _mp_context()) as pool:
        yield from pool_results(pool, fn, items, 2 * workers)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BackendError(RAY_MISSING) from None
    return ray


def _unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why nothing answers at ``address`` (``host:port`` or ``ray://host:port``), or None where
    a TCP connection opens or the address is of another form (``auto``): Ray itself retries an
    unreachable address for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__


def _ray_init(ray: Any, workers: int, address: str | None) -> None:
    global _local_ray_ours
    if address and (why := _unreachable(address)) is not None:
        raise BackendError(f"--ray-address {address}: cannot connect ({why})")
    # ray.init sets its own SIGTERM handler (exit at once); keep ours (see
    # gpu_sharing_gym.plumbing.interrupt), so that SIGTERM cancels the tasks and shuts Ray down.
    main_thread = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
            _local_ray_ours = True
    except Exception as e:  # connection errors have many types across Ray versions
        first = str(e).strip().splitlines()
        msg = first[0] if first else type(e).__name__
        raise BackendError(f"--backend ray: ray.init failed: {msg}") from None
    finally:
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)


def _interrupted(exc: BaseException) -> bool:
    """An interrupt, here or in the caller's loop (which closes this generator while it
    propagates: ``GeneratorExit`` with the interrupt as its context)."""
    if isinstance(exc, GeneratorExit):
        exc = exc.__context__ or exc
    return isinstance(exc, KeyboardInterrupt)


def _ray_shutdown(ray: Any) -> None:
    global _local_ray_ours
    ray.shutdown()
    _local_ray_ours = False


def run_ray(
    fn: Callable[[_I], _T], items: Iterable[_I], workers: int, address: str | None = None
) -> Generator[tuple[_I, _T], None, None]:
    """``(item, fn(item))`` for each item, each a Ray task (one CPU, no retries), on the Ray
    already initialised (:func:`backend_session`), else on an existing cluster (``address``)
    or a local Ray with ``workers`` CPUs, shut down at the end. ``fn`` and the items travel
    with Ray's serializer (cloudpickle: lambdas and closures too). An exception raised by ``fn``
    is raised here as itself, as the local backend does. Ray is an optional extra:
    ``pip install 'gpu-sharing-gym[ray]'``."""
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        _ray_init(ray, workers, address)
        started = True
    pending: list[Any] = []
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = {task.remote(item): item for item in items}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, Exception):
                        raise cause from None
                    raise
                yield refs[ref], result
    except BaseException as exc:
        # An interrupt (or an error): cancel what is left (force: kill the workers running it);
        # on a cluster we did not start this is all that stops them. An interrupt on a local
        # Ray of ours leaves them to its shutdown (below, or the session's), which stops its
        # workers: force-cancelling them first races Ray's own handling of a task's reply, and
        # Ray 2.60's driver then aborts in ``TaskManager::CompletePendingTask`` ("an unexpected
        # system state", ~1 SIGTERM in 16 on 2 cores; the same class of race as
        # ray-project/ray#54785).
        if _local_ray_ours and _interrupted(exc):
            raise
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            _ray_shutdown(ray)


def run_tasks(
    fn: Callable[[_I], _T],
    items: Iterable[_I],
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    mp_context: Any = None,
) -> Generator[tuple[_I, _T], None, None]:
    """The runner: ``(item, fn(item))`` pairs as the cells finish, on ``backend``
    (:data:`BACKENDS`) with ``workers`` processes or CPUs (``address``: an existing Ray
    cluster; ``mp_context``: the local pool's start method). ``fn`` is a top-level function.
    Close the generator (``contextlib.closing``) where the loop over it can be interrupted, so
    that the workers stop at once."""
    if backend == "local":
        return run_local(fn, items, workers, mp_context)
    if backend == "ray":
        return run_ray(fn, items, workers, address)
    raise BackendError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")


def run_cells(
    cells: Sequence[Cell], backend: str = "local", workers: int = 1, address: str | None = None
) -> Generator[tuple[Cell, dict[str, Any]], None, None]:
    """Leaderboard cells through :func:`run_tasks` (:func:`gpu_sharing_gym.cells.run_cell`)."""
    return run_tasks(run_cell, cells, backend, workers, address)


@contextlib.contextmanager
def backend_session(backend: str, workers: int = 1, address: str | None = None) -> Iterator[None]:
    """Within this block every :func:`run_tasks` on ``ray`` uses one Ray session (started here
    unless one is running; shut down at the end if started here), instead of starting Ray for
    each batch of cells. A no-op for ``local``. Raises :class:`BackendError` (one line) where
    Ray is missing or cannot connect."""
    if backend != "ray":
        yield
        return
    ray = _import_ray()
    if ray.is_initialized():
        yield
        return
    _ray_init(ray, workers, address)
    try:
        yield
    finally:
        _ray_shutdown(ray)


def check_backend(backend: str) -> None:
    """Raise :class:`BackendError` now if ``backend`` cannot run here (before any work)."""
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if backend == "ray":
        _import_ray()


def add_backend_args(ap: argparse.ArgumentParser) -> None:
    """``--backend {local,ray}`` and ``--ray-address ADDR``, the same in every command."""
    ap.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="where cells run: local processes (--workers) or Ray tasks (default local)",
    )
    ap.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="an existing Ray cluster (auto, ray://host:10001) with --backend ray; without it "
        "a local Ray with --workers CPUs",
    )


def check_backend_args(args: argparse.Namespace) -> None:
    """Validate :func:`add_backend_args`' flags before any work: one-line
    :class:`BackendError` for ``--ray-address`` without ``--backend ray`` or Ray missing."""
    if args.ray_address and args.backend != "ray":
        raise BackendError("--ray-address: only with --backend ray")
    check_backend(args.backend)
    # Checked here, not only when Ray starts: a Ray already running in this process (a library
    # caller's, a test's) would otherwise be used and the address never looked at.
    if args.ray_address and (why := _unreachable(args.ray_address)) is not None:
        raise BackendError(f"--ray-address {args.ray_address}: cannot connect ({why})")


__all__ = [
    "BACKENDS",
    "RAY_MISSING",
    "BackendError",
    "add_backend_args",
    "backend_session",
    "check_backend",
    "check_backend_args",
    "run_cells",
    "run_local",
    "run_ray",
    "run_tasks",
]
