"""AntMan (Xiao et al., "AntMan: Dynamic Scaling on GPU Clusters for Deep Learning", OSDI'20):
resource-guarantee jobs first, opportunistic jobs in the leftover GPU time and memory, under
priority time-sharing (the "PB-time-sharing" baseline of MuxFlow's evaluation).

Mechanisms implemented:

* **Two job classes.** Resource-guarantee jobs are, by default, online services and jobs with
  ``priority > 0`` (PAI's high-GPU tasks); everything else is opportunistic. The rule is a
  constructor argument.
* **Guarantee first.** Each decision considers the window's guarantee jobs before any
  opportunistic one, whatever their queue order. A guarantee job gets a GPU that hosts no other
  guarantee job (its own GPU time: empty first, else the one with the least opportunistic load),
  the fastest for its model among equals.
* **Priority time-sharing.** Everything is placed with the time-sharing option. The simulator's
  time-sharing serves priority groups in order (online services first when
  ``sharing.online_priority``, then by job priority), so a guarantee job runs at its solo speed
  (less the context-switch overhead) whatever opportunistic work shares its GPU.
* **Opportunistic jobs fill leftovers.** An opportunistic job goes where the observed GPU
  utilisation leaves the most idle time (at least ``min_idle``), and on GPUs without a guarantee
  job it may take at most ``opp_mem_frac`` of the memory, keeping room for a guarantee job to
  arrive (AntMan's memory headroom). When no guarantee job waits, the headroom is lent out.
* **Dynamic scaling** is approximated by the time share: an opportunistic job's rate is what its
  guarantee co-runner leaves, ``(1 - duty_guarantee) / sum(duty_opportunistic)``, so it grows
  and shrinks with an online service's load, and takes the whole GPU when the guarantee job
  leaves.

Simplified: AntMan's framework-level memory scaling (opportunistic jobs' tensors shrink or move
to host memory when the guarantee job grows) and its preemption of opportunistic jobs are not
modelled: declared memory is a hard limit, so the headroom rule stands in for them. The
time-sharing priority is the job's submitted priority (the simulator's); with a custom
guarantee rule that disagrees with priorities, only placement follows the rule. Gang jobs take
whole empty GPUs, preferring one node. Without a time-sharing option the policy falls back to
MPS at 100 % SM, where no priority exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy, per_options
from gpu_sharing_gym.baselines.gandiva import (
    est_duty,
    gang_gpus,
    gpu_load,
    one_node_empty,
    shared_option,
)

#: :func:`shared_option` per placement-options tuple (``per_options``; a function of them alone).
_SHARED_OPTION: dict[int, tuple[Any, dict[Any, Any]]] = {}


def shared_option_of(view: ClusterView) -> int | None:
    """:func:`shared_option` of ``view``, kept per options tuple (one per simulator: asked at
    every decision)."""
    table = per_options(_SHARED_OPTION, view)
    if "opt" not in table:
        table["opt"] = shared_option(view)
    return table["opt"]  # type: ignore[no-any-return]


def default_guarantee(job: JobView) -> bool:
    """Online services and prioritised jobs are resource-guarantee jobs."""
    return job.online or job.priority > 0


class AntMan(HeuristicPolicy):
    """AntMan: guarantee jobs first with priority; opportunistic jobs in the leftovers.

    Args:
        guarantee: Which jobs are resource-guarantee jobs.
        opp_mem_frac: Most of a GPU's memory opportunistic jobs may hold on a GPU without a
            guarantee job while guarantee jobs wait.
        min_idle: Least observed idle GPU time (1 - utilisation) an opportunistic job is
            placed into.
        service_max_duty: Online services go to the least capable GPU where their peak duty
            stays below this.
    """

    name = "antman"
    reads_estimates = False  # (tests/test_no_estimates.py)

    def __init__(
        self,
        guarantee: Callable[[JobView], bool] = default_guarantee,
        opp_mem_frac: float = 0.5,
        min_idle: float = 0.05,
        service_max_duty: float = 0.6,
    ) -> None:
        self.guarantee = guarantee
        self.service_max_duty = service_max_duty
        self.opp_mem_frac = opp_mem_frac
        self.min_idle = min_idle

    def decide(self, view: ClusterView) -> Decision | None:
        opt = shared_option_of(view)
        if opt is None:
            return None
        window = view.window
        guaranteed = [j for j in window if self.guarantee(j)]
        for job in guaranteed:
            col = view.mask_column(job.job_id, opt)
            g = self._guarantee_gpu(view, job, col)
            if g is not None:
                return Decision(job.job_id, g, opt)
        # Headroom is kept for guarantee jobs while any waits (in the whole queue).
        waiting = bool(guaranteed) or any(self.guarantee(j) for j in view.queue)
        rest = [j for j in window if not self.guarantee(j)]
        for job in self._opportunistic_order(view, rest, opt):
            col = view.mask_column(job.job_id, opt)
            g = self._opportunistic_gpu(view, job, col, keep_headroom=waiting)
            if g is not None:
                return Decision(job.job_id, g, opt)
        return None

    def _opportunistic_order(
        self, view: ClusterView, jobs: list[JobView], opt: int
    ) -> list[JobView]:
        """The order opportunistic jobs are tried in: the window's (FIFO)."""
        return jobs

    def _has_guarantee(self, view: ClusterView, gpu: int) -> bool:
        return any(self.guarantee(r) for r in view.residents(gpu))

    def _guarantee_gpu(self, view: ClusterView, job: JobView, col: np.ndarray) -> int | None:
        best: tuple[float, ...] | None = None
        for start in np.flatnonzero(col):
            gpus = gang_gpus(col, int(start), job.num_gpus)
            if any(self._has_guarantee(view, g) for g in gpus):
                continue  # one guarantee job per GPU: its time is its own
            occupied = float(
                not one_node_empty(view, int(start), job.num_gpus)
                if job.num_gpus > 1
                else view.n_res[int(start)] > 0
            )
            opp_load = max(gpu_load(view, g) for g in gpus)
            if job.online:
                # A service is right-sized: the least capable GPU whose peak duty stays under
                # ``service_max_duty`` (capable ones stay free for training), else the fastest.
                duty = max(est_duty(view, job, g) for g in gpus)
                fits = duty <= self.service_max_duty
                speed = min(view.solo_speed(job.model, g) for g in gpus)
                key: tuple[float, ...] = (occupied, not fits, speed if fits else -speed, opp_load)
            else:
                speed = min(view.solo_speed(job.model, g) for g in gpus)
                key = (occupied, opp_load, -speed)
            if best is None or (*key, start) < best:
                best = (*key, int(start))
        return None if best is None else int(best[-1])

    def _opportunistic_gpu(
        self, view: ClusterView, job: JobView, col: np.ndarray, keep_headroom: bool
    ) -> int | None:
        # Per GPU as lists of Python floats (the same doubles; an element of a list reads
        # faster than one of an array: this runs at every decision).
        idle = (1.0 - np.asarray(view.util, dtype=float)).tolist()
        used, cap = view.mem_used_gb.tolist(), view.mem_cap_gb.tolist()
        best: tuple[tuple[float, ...], int] | None = None
        n = job.num_gpus
        for start in np.flatnonzero(col).tolist():
            # (one GPU: the legal start itself, as ``gang_gpus`` reads it off the column)
            gpus = [start] if n == 1 else gang_gpus(col, start, n)
            # (the memory test first: it is cheaper than reading the GPU's residents)
            if keep_headroom and any(
                used[g] + job.mem_gb > self.opp_mem_frac * cap[g] + 1e-9
                and not self._has_guarantee(view, g)
                for g in gpus
            ):
                continue
            spare = min(idle[g] for g in gpus)
            if spare < self.min_idle:
                continue
            key = self._opportunistic_key(view, job, gpus, spare, start)
            if best is None or key < best[0]:
                best = (key, start)
        return None if best is None else best[1]

    def _opportunistic_key(
        self, view: ClusterView, job: JobView, gpus: list[int], spare: float, start: int
    ) -> tuple[float, ...]:
        """Sort key of a candidate opportunistic placement (smallest wins): most idle GPU time
        first; fewer co-runners and faster GPUs break ties."""
        return (
            -spare,
            max(int(view.n_res[g]) for g in gpus),
            -min(view.solo_speed(job.model, g) for g in gpus),
            start,
        )
