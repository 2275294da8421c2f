"""Helpers shared by the baselines; the Policy protocol itself is in the core.

:class:`Policy` and :class:`HeuristicPolicy` are defined in :mod:`gpu_sharing_env.policy` and
re-exported here, so ``from gpu_sharing_gym.baselines.base import HeuristicPolicy`` keeps working.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.policy import HeuristicPolicy, Policy
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView

__all__ = ["HeuristicPolicy", "Policy", "fastest_exclusive", "per_options"]


def per_options(memo: dict[int, tuple[Any, dict[Any, Any]]], view: ClusterView) -> dict[Any, Any]:
    """``memo``'s table for ``view``'s placement options: a policy's answers that depend only on
    the options (and what the caller keys them by) are kept per options tuple, which is one
    object per simulator, the same in every snapshot (id -> (the tuple, table))."""
    opts = view.options
    hit = memo.get(id(opts))
    if hit is None or hit[0] is not opts:
        if len(memo) > 16:
            memo.clear()
        hit = memo[id(opts)] = (opts, {})
    return hit[1]


def fastest_exclusive(view: ClusterView, job: JobView) -> Decision | None:
    """Run ``job`` alone: an exclusive GPU, the fastest for its model (lowest index on ties).

    A gang runs at its slowest member's speed (``docs/simulator.md``), so a gang's start is
    rated by the slowest GPU it takes."""
    excl = [i for i, o in enumerate(view.options) if o.mode is SharingMode.EXCLUSIVE]
    if not excl:
        return None
    legal = np.flatnonzero(view.mask(job.job_id)[:, excl[0]])
    if not legal.size:
        return None
    model, n = job.model, job.num_gpus
    if n == 1:
        g = max((int(g) for g in legal), key=lambda g: (view.solo_speed(model, g), -g))
    else:
        starts = legal.tolist()

        def slowest(i: int) -> float:
            # the gang at ``starts[i]`` takes the next ``n`` legal starts, unless it reaches
            # the last ``n - 1`` GPUs legal one by one (the gang mask hides them)
            gpus = (
                starts[i : i + n]
                if i + n <= len(starts)
                else view.gang_gpus(job.job_id, starts[i], excl[0])
            )
            return min(view.solo_speed(model, m) for m in gpus)

        g = starts[max(range(len(starts)), key=lambda i: (slowest(i), -i))]
    return Decision(job.job_id, g, excl[0])
