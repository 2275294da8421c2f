"""Reference policies: plain schedulers every paper compares against.

* ``fifo_exclusive`` — strict FIFO, one job per GPU, no sharing (head-of-line blocking).
* ``first_fit`` — packs jobs by memory under MPS on the lowest-index GPU that fits, with the
  SM share closest to (and not below) the job's fractional GPU request.
* ``time_sharing`` — Gandiva-style plain time-slicing: the least-loaded GPU that fits.
* ``random`` — a uniformly random legal placement (never waits when something is legal).
"""

from __future__ import annotations

import numpy as np

from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.base import HeuristicPolicy


def _option_indices(view: ClusterView, mode: SharingMode) -> list[int]:
    return [i for i, o in enumerate(view.options) if o.mode is mode]


class FifoExclusive(HeuristicPolicy):
    """Strict FIFO, exclusive GPUs: the head of the queue goes first or nobody goes."""

    name = "fifo_exclusive"

    def decide(self, view: ClusterView) -> Decision | None:
        window = view.window
        if not window:
            return None
        head = window[0]
        excl = _option_indices(view, SharingMode.EXCLUSIVE)
        if not excl:
            return None
        col = view.mask(head.job_id)[:, excl[0]]
        gpus = np.flatnonzero(col)
        return Decision(head.job_id, int(gpus[0]), excl[0]) if gpus.size else None


class FirstFit(HeuristicPolicy):
    """MPS packing by memory: first GPU (lowest index) with room, SM share >= request."""

    name = "first_fit"

    def decide(self, view: ClusterView) -> Decision | None:
        mps = _option_indices(view, SharingMode.MPS)
        fallback = _option_indices(view, SharingMode.EXCLUSIVE)
        # the window, unless a subclass declares the whole queue (``decision_scope``)
        for job in view.iter_decidable():
            if not view.placeable(job.job_id):
                continue  # an all-False mask (known without building it)
            want = job.gpu_frac * 100.0
            # SM options ordered: smallest share that covers the request, then larger, then
            # smaller ones (a job asking for a full GPU still packs at a partial share).
            ranked = sorted(
                mps,
                key=lambda o: (view.options[o].sm_pct < want, abs(view.options[o].sm_pct - want)),
            )
            for o in ranked + fallback:
                g = view.first_legal(job.job_id, o)  # the first legal GPU (mask column argmax)
                if g >= 0:
                    return Decision(job.job_id, g, o)
        return None


class TimeSharing(HeuristicPolicy):
    """Plain time-slicing (Gandiva's baseline mode): least-loaded GPU that fits."""

    name = "time_sharing"

    def decide(self, view: ClusterView) -> Decision | None:
        ts = _option_indices(view, SharingMode.TIME_SHARING)
        if not ts:
            return None
        o = ts[0]
        for job in view.window:
            col = view.mask(job.job_id)[:, o]
            gpus = np.flatnonzero(col)
            if gpus.size:
                load = np.asarray(view.n_res)[gpus]
                return Decision(job.job_id, int(gpus[np.argmin(load)]), o)
        return None


class RandomPolicy(HeuristicPolicy):
    """A uniformly random legal placement of a uniformly random placeable window job."""

    name = "random"

    def decide(self, view: ClusterView) -> Decision | None:
        cands = [(j, view.mask(j.job_id)) for j in view.window]
        cands = [(j, m) for j, m in cands if m.any()]
        if not cands:
            return None
        job, m = cands[int(self.rng.integers(len(cands)))]
        legal = np.argwhere(m)
        gpu, opt = legal[int(self.rng.integers(len(legal)))]
        return Decision(job.job_id, int(gpu), int(opt))
