"""Helpers shared by the baselines; the Policy protocol itself is in the core.

:class:`Policy` and :class:`HeuristicPolicy` are defined in :mod:`gpu_sharing_env.policy` and
re-exported here, so ``from gpu_sharing_gym.baselines.base import HeuristicPolicy`` keeps working.
"""

from __future__ import annotations

import numpy as np

from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.policy import HeuristicPolicy, Policy
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView

__all__ = ["HeuristicPolicy", "Policy", "fastest_exclusive"]


def fastest_exclusive(view: ClusterView, job: JobView) -> Decision | None:
    """Run ``job`` alone: an exclusive GPU, the fastest for its model (lowest index on ties)."""
    excl = [i for i, o in enumerate(view.options) if o.mode is SharingMode.EXCLUSIVE]
    if not excl:
        return None
    legal = np.flatnonzero(view.mask(job.job_id)[:, excl[0]])
    if not legal.size:
        return None
    g = max((int(g) for g in legal), key=lambda g: (view.solo_speed(job.model, g), -g))
    return Decision(job.job_id, g, excl[0])
