"""Where leaderboard cells run: in-process, across local processes, or as Ray tasks.

Every backend calls the same :func:`gpu_sharing_gym.cells.run_cell` and yields ``(cell, result)``
pairs as cells finish (completion order, not submission order); the caller saves each result
at once, so an interrupted run keeps everything that finished. Results do not depend on the
backend: each cell builds its own simulator and the simulator is deterministic per seed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
import threading
from collections.abc import Generator, Sequence
from typing import Any

from gpu_sharing_env.interrupt import pool_results, process_pool
from gpu_sharing_gym.cells import Cell, run_cell

BACKENDS = ("local", "ray")


class BackendError(RuntimeError):
    """The backend cannot run (e.g. Ray is not installed); one-line message."""


def _mp_context() -> Any:
    # Never fork: the parent may hold threads (tqdm's monitor, torch) that fork would copy
    # mid-lock. forkserver is cheaper than spawn where it exists (POSIX).
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method)


def run_local(
    cells: Sequence[Cell], workers: int
) -> Generator[tuple[Cell, dict[str, Any]], None, None]:
    """Run ``cells`` in this process (``workers == 1``) or in a pool of ``workers`` processes.

    At most ``2 * workers`` cells are in flight; an interrupt (Ctrl-C, SIGTERM) stops the
    workers within seconds, losing only the cells they were running.
    """
    if workers <= 1:
        for c in cells:
            yield c, run_cell(c)
        return
    # process_pool: on an interrupt (or the caller closing this generator) the workers are
    # terminated at once instead of finishing their cells; they ignore Ctrl-C themselves.
    with process_pool(workers, _mp_context()) as pool:
        yield from pool_results(pool, run_cell, cells, 2 * workers)


def run_ray(
    cells: Sequence[Cell], workers: int, address: str | None = None
) -> Generator[tuple[Cell, dict[str, Any]], None, None]:
    """Run ``cells`` as Ray tasks: on an existing cluster (``address``) or a local Ray with
    ``workers`` CPUs. Ray is an optional extra: ``pip install 'gpu-sharing-gym[ray]'``."""
    try:
        import ray
    except ImportError:
        raise BackendError(
            "the ray backend needs Ray: pip install 'gpu-sharing-gym[ray]'"
        ) from None
    started = False
    if not ray.is_initialized():
        # ray.init sets its own SIGTERM handler (exit at once); keep ours (see
        # gpu_sharing_env.interrupt), so that SIGTERM cancels the tasks and shuts Ray down below.
        main_thread = threading.current_thread() is threading.main_thread()
        sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        except Exception as e:  # connection errors have many types across Ray versions
            first = str(e).strip().splitlines()
            msg = first[0] if first else type(e).__name__
            raise BackendError(f"ray.init failed: {msg}") from None
        finally:
            if sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)
        started = True
    pending: list[Any] = []
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_cell)
        refs = {task.remote(c): c for c in cells}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                yield refs[ref], ray.get(ref)
    except BaseException:
        # An interrupt: cancel what is left (force: kill the workers running it); on a cluster
        # we did not start this is all that stops them. A local Ray is shut down below.
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()


def run_cells(
    cells: Sequence[Cell], backend: str = "local", workers: int = 1, address: str | None = None
) -> Generator[tuple[Cell, dict[str, Any]], None, None]:
    """Dispatch to a backend by name (:data:`BACKENDS`)."""
    if backend == "local":
        return run_local(cells, workers)
    if backend == "ray":
        return run_ray(cells, workers, address)
    raise BackendError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")


def check_backend(backend: str) -> None:
    """Raise :class:`BackendError` now if ``backend`` cannot run here (before any work)."""
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise BackendError(
                "the ray backend needs Ray: pip install 'gpu-sharing-gym[ray]'"
            ) from None


__all__ = ["BACKENDS", "BackendError", "check_backend", "run_cells", "run_local", "run_ray"]
