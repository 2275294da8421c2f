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

import numpy as np

from baselines.base import HeuristicPolicy
from baselines.gandiva import est_duty, gang_start, shared_option
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView


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
    """

    name = "antman"

    def __init__(
        self,
        guarantee: Callable[[JobView], bool] = default_guarantee,
        opp_mem_frac: float = 0.5,
        min_idle: float = 0.05,
    ) -> None:
        self.guarantee = guarantee
        self.opp_mem_frac = opp_mem_frac
        self.min_idle = min_idle

    def decide(self, view: ClusterView) -> Decision | None:
        opt = shared_option(view)
        if opt is None:
            return None
        window = view.window
        guaranteed = [j for j in window if self.guarantee(j)]
        for job in guaranteed:
            col = view.mask(job.job_id)[:, opt]
            g = self._guarantee_gpu(view, job, col)
            if g is not None:
                return Decision(job.job_id, g, opt)
        # Headroom is kept for guarantee jobs while any waits (in the whole queue).
        waiting = bool(guaranteed) or any(self.guarantee(j) for j in view.queue)
        for job in window:
            if self.guarantee(job):
                continue
            col = view.mask(job.job_id)[:, opt]
            g = self._opportunistic_gpu(view, job, col, keep_headroom=True)
            if g is None and not waiting:
                g = self._opportunistic_gpu(view, job, col, keep_headroom=False)
            if g is not None:
                return Decision(job.job_id, g, opt)
        return None

    def _has_guarantee(self, view: ClusterView, gpu: int) -> bool:
        return any(self.guarantee(r) for r in view.residents(gpu))

    def _guarantee_gpu(self, view: ClusterView, job: JobView, col: np.ndarray) -> int | None:
        if job.num_gpus > 1:
            return gang_start(view, job, col & (np.asarray(view.n_res) == 0))
        legal = [int(g) for g in np.flatnonzero(col) if not self._has_guarantee(view, int(g))]
        if not legal:
            return None
        # Empty GPUs first, then the least opportunistic load; the fastest GPU among equals.
        return min(
            legal,
            key=lambda g: (
                view.n_res[g] > 0,
                sum(est_duty(view, r, g) for r in view.residents(g)),
                -view.solo_speed(job.model, g),
                g,
            ),
        )

    def _opportunistic_gpu(
        self, view: ClusterView, job: JobView, col: np.ndarray, keep_headroom: bool
    ) -> int | None:
        ok = col.copy()
        if keep_headroom:
            for g in np.flatnonzero(ok):
                room = self.opp_mem_frac * view.mem_cap_gb[g]
                if not self._has_guarantee(view, int(g)) and view.mem_used_gb[g] + job.mem_gb > (
                    room + 1e-9
                ):
                    ok[g] = False
        if job.num_gpus > 1:
            return gang_start(view, job, ok & (np.asarray(view.n_res) == 0))
        idle = 1.0 - np.asarray(view.util, dtype=float)
        legal = [int(g) for g in np.flatnonzero(ok) if idle[g] >= self.min_idle]
        if not legal:
            return None
        # Most idle GPU time first; fewer co-runners and faster GPUs break ties.
        return max(legal, key=lambda g: (idle[g], -view.n_res[g], view.solo_speed(job.model, g), -g))
