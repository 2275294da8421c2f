"""Reference policies: plain schedulers every paper compares against.

* ``fifo_exclusive`` — strict FIFO, one job per GPU, no sharing (head-of-line blocking).
* ``first_fit`` — packs jobs by memory under MPS on the lowest-index GPU that fits, with the
  SM share closest to (and not below) the job's fractional GPU request.
* ``time_sharing`` — Gandiva-style plain time-slicing: the least-loaded GPU that fits.
* ``random`` — a uniformly random legal placement (never waits when something is legal).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy, per_options


def _option_indices(view: ClusterView, mode: SharingMode) -> list[int]:
    return [i for i, o in enumerate(view.options) if o.mode is mode]


#: ``first_fit_options`` per options tuple and GPU fraction (``per_options``).
_FIRST_FIT_ORDER: dict[int, tuple[Any, dict[Any, Any]]] = {}


def first_fit_options(view: ClusterView, job: JobView) -> tuple[int, ...]:
    """The options ``first_fit`` tries, in order: the MPS shares from the smallest one that
    covers the job's GPU fraction, then larger, then smaller ones (a job asking for a full GPU
    still packs at a partial share), then exclusive use (memoised per options tuple)."""
    return first_fit_order(view, job.gpu_frac)


def first_fit_order(view: ClusterView, gpu_frac: float) -> tuple[int, ...]:
    """:func:`first_fit_options` of a job whose GPU fraction is ``gpu_frac`` (no view of the
    job needed: ``ClusterView.gpu_frac``)."""
    table = per_options(_FIRST_FIT_ORDER, view)
    order: tuple[int, ...] | None = table.get(gpu_frac)
    if order is None:
        want = gpu_frac * 100.0
        ranked = sorted(
            _option_indices(view, SharingMode.MPS),
            key=lambda o: (view.options[o].sm_pct < want, abs(view.options[o].sm_pct - want)),
        )
        order = table[gpu_frac] = (*ranked, *_option_indices(view, SharingMode.EXCLUSIVE))
    return order


class FifoExclusive(HeuristicPolicy):
    """Strict FIFO, exclusive GPUs: the head of the queue goes first or nobody goes."""

    name = "fifo_exclusive"
    reads_estimates = False  # (tests/test_no_estimates.py)

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
    reads_estimates = False  # (tests/test_no_estimates.py)

    def decide(self, view: ClusterView) -> Decision | None:
        # the window, unless a subclass declares the whole queue (``decision_scope``); by job
        # id, no JobViews built (only the GPU fraction is read)
        for jid in view.decidable_ids():
            if not view.placeable(jid):
                continue  # an all-False mask (known without building it)
            # the first legal GPU (mask column argmax) under the first option that has one
            g, o = view.first_legal_in(jid, first_fit_order(view, view.gpu_frac(jid)))
            if g >= 0:
                return Decision(jid, g, o)
        return None


class TimeSharing(HeuristicPolicy):
    """Plain time-slicing (Gandiva's baseline mode): least-loaded GPU that fits."""

    name = "time_sharing"
    reads_estimates = False  # (tests/test_no_estimates.py)

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
    reads_estimates = False  # (tests/test_no_estimates.py)

    def decide(self, view: ClusterView) -> Decision | None:
        cands = [(j, view.mask(j.job_id)) for j in view.window]
        cands = [(j, m) for j, m in cands if m.any()]
        if not cands:
            return None
        job, m = cands[int(self.rng.integers(len(cands)))]
        legal = np.argwhere(m)
        gpu, opt = legal[int(self.rng.integers(len(legal)))]
        return Decision(job.job_id, int(gpu), int(opt))
