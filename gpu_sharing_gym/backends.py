"""Where leaderboard cells run: in-process, across local processes, or as Ray tasks.

Every backend calls the same :func:`gpu_sharing_gym.cells.run_cell` and yields ``(cell, result)``
pairs as cells finish (completion order, not submission order); the caller saves each result
at once, so an interrupted run keeps everything that finished. Results do not depend on the
backend: each cell builds its own simulator and the simulator is deterministic per seed.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from gpu_sharing_gym.cells import Cell, run_cell

BACKENDS = ("local", "ray")


class BackendError(RuntimeError):
    """The backend cannot run (e.g. Ray is not installed); one-line message."""


def _mp_context() -> Any:
    # Never fork: the parent may hold threads (tqdm's monitor, torch) that fork would copy
    # mid-lock. forkserver is cheaper than spawn where it exists (POSIX).
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method)


def run_local(cells: Sequence[Cell], workers: int) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Run ``cells`` in this process (``workers == 1``) or in a pool of ``workers`` processes.

    At most ``2 * workers`` cells are in flight, so an interrupt leaves little work queued.
    """
    if workers <= 1:
        for c in cells:
            yield c, run_cell(c)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=_mp_context()) as pool:
        todo = iter(cells)
        running: dict[Future[dict[str, Any]], Cell] = {}
        try:
            while True:
                while len(running) < 2 * workers:
                    nxt = next(todo, None)
                    if nxt is None:
                        break
                    running[pool.submit(run_cell, nxt)] = nxt
                if not running:
                    return
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield running.pop(fut), fut.result()
        finally:
            for fut in running:
                fut.cancel()


def run_ray(
    cells: Sequence[Cell], workers: int, address: str | None = None
) -> Iterator[tuple[Cell, dict[str, Any]]]:
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
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        except Exception as e:  # connection errors have many types across Ray versions
            first = str(e).strip().splitlines()
            msg = first[0] if first else type(e).__name__
            raise BackendError(f"ray.init failed: {msg}") from None
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_cell)
        refs = {task.remote(c): c for c in cells}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                yield refs[ref], ray.get(ref)
    finally:
        if started:
            ray.shutdown()


def run_cells(
    cells: Sequence[Cell], backend: str = "local", workers: int = 1, address: str | None = None
) -> Iterator[tuple[Cell, dict[str, Any]]]:
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
