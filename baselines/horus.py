"""Horus (Yeung et al., "Horus: Interference-Aware and Prediction-Based Scheduling in Deep Learning
Systems", IEEE TPDS 2022): co-locate jobs by *predicted* GPU utilisation, with fair queueing.

Mechanisms implemented:

* **Prediction engine.** GPU utilisation and GPU memory of each job are predicted from model
  features (graph-like figures of the model class: bandwidth intensity, SM scaling, per-sample and
  fixed compute cost, CPU demand) by tree-based regressors trained on the public model-class
  profiles (:func:`gpu_sharing_gym.baselines.predictors.train_util`): no online profiling of the job itself. An
  online service's utilisation is predicted from its peak request rate and profiled batch latency.
* **Interference-aware, cost-based placement.** A job may join a GPU only if the GPUs' summed
  predicted utilisation stays at most 1 (no over-commitment: the interference Horus avoids) and
  the summed predicted memory fits; among those GPUs it takes the one of least cost
  ``(1 - U_after) + w_int * U_before * u_job + w_comm * (nodes - 1) + w_speed * (1 - speed/best)``:
  best fit on utilisation, a penalty for the contention of co-location, for spreading a gang
  over nodes, and for slower GPU types. (Online services, outside Horus' scope, take the
  placement with the lowest utilisation after placement instead of the best fit.) Co-located jobs take turns (time-sharing), which costs
  them almost nothing while their utilisations sum to at most 1.
* **Weighted fair queueing over job groups.** Queued jobs are grouped by k-means (k = 3, as the
  paper) on (tasks, predicted utilisation, GPUs per task, predicted memory); each group's weight
  is ``max(median wait, 1 s) * queue length``; a batch of ``b`` jobs takes from each group in
  proportion to its weight, longest-waiting first, so no group starves; a job that heads the
  fair order after waiting ``reserve_after_s`` and does not fit can get a reservation (nothing
  behind it is placed until it fits; optional, as in the paper).

Simplified: the simulator places only jobs inside its queue window, so the fair-queueing order
applies to the window's jobs (groups and weights are computed over the whole queue). The paper's
memory estimate from batch, activations, gradients and parameters becomes a regressor over the
model-class features, combined with the declared request (the larger of the two). Gang
co-location is checked on the gang's first ``n`` GPUs from its start (the simulator's choice when
they are legal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans

from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.baselines.predictors import UtilPredictor, one_thread, train_util

#: Horus' number of job groups (the paper found three utilisation patterns).
N_GROUPS = 3


@dataclass(frozen=True, slots=True)
class Group:
    """One k-means job group with its WFQ weight."""

    jobs: tuple[int, ...]  # job ids, longest-waiting first
    weight: float


def wfq_order(groups: list[Group], batch: int) -> list[int]:
    """Horus' weighted fair selection: job ids in scheduling order.

    Group ``x`` contributes ``ceil(batch * w_x / sum(w))`` jobs (its longest-waiting ones);
    heavier groups go first. Jobs beyond the quotas follow in the same interleaving.
    """
    total = sum(g.weight for g in groups)
    if total <= 0:
        return [j for g in groups for j in g.jobs]
    order = sorted(range(len(groups)), key=lambda i: (-groups[i].weight, i))
    quota = {i: int(np.ceil(batch * groups[i].weight / total)) for i in order}
    first = [j for i in order for j in groups[i].jobs[: quota[i]]]
    rest = [j for i in order for j in groups[i].jobs[quota[i] :]]
    return first + rest


class Horus(HeuristicPolicy):
    """Horus: utilisation-predicted co-location with weighted fair queueing.

    Args:
        w_int: Cost weight of the contention term ``U_before * u_job``.
        w_comm: Cost weight per extra node a gang spans.
        w_speed: Cost weight of a slower GPU type.
        max_util: Cap on the summed predicted utilisation of a GPU.
        reserve_after_s: A job first in the fair order that has waited this long and cannot be
            placed is reserved for: nothing behind it is placed until it fits. Off by default
            (the paper offers it as an option; with heavy-tailed durations a reservation can
            block the queue behind a job waiting for days-long jobs to end).
    """

    name = "horus"
    reads_estimates = False  # (tests/test_no_estimates.py)

    def __init__(
        self,
        w_int: float = 1.0,
        w_comm: float = 0.5,
        w_speed: float = 0.5,
        max_util: float = 1.0,
        reserve_after_s: float = math.inf,
    ) -> None:
        self.w_int = w_int
        self.w_comm = w_comm
        self.w_speed = w_speed
        self.max_util = max_util
        self.reserve_after_s = reserve_after_s
        self.reset(0)

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.seed = seed
        self._pred: UtilPredictor | None = None
        self._labels_key: tuple[int, ...] | None = None
        self._labels = np.zeros(0, dtype=int)
        #: :meth:`speeds` and :meth:`best_speed`'s memos: the fleet they are for, per model.
        self._fleet: tuple[str, ...] | None = None
        self._speeds: dict[str, list[float]] = {}
        self._best: dict[str, float] = {}
        #: :meth:`gpu_load`'s memo, per GPU, while :meth:`decide` runs (None outside it: no
        #: state is kept from one snapshot to the next, nor copied with the policy).
        self._loads: dict[int, tuple[float, float]] | None = None

    @property
    def predictor(self) -> UtilPredictor:
        if self._pred is None:
            self._pred = train_util(self.seed)
        return self._pred

    # ------------------------------------------------------------------ predictions
    def util(self, view: ClusterView, job: JobView, gpu: int | None = None) -> float:
        """Predicted GPU utilisation of ``job`` (on ``gpu`` for a service's load)."""
        if job.online and job.service is not None:
            svc = job.service
            g = gpu if gpu is not None else 0
            lat = view.profile_latency_ms(job.model, view.type_name[g], svc.batch_size)
            rps = max(svc.peak_rps, job.rps)
            return min(1.0, rps * lat / 1000.0 / svc.batch_size)
        return self.predictor.util(job.model)

    def mem_gb(self, job: JobView) -> float:
        return max(job.mem_gb, self.predictor.mem_gb(job.model))

    def gpu_load(self, view: ClusterView, gpu: int) -> tuple[float, float]:
        """(summed predicted utilisation, summed predicted memory) of a GPU's residents.

        Memoised within one :meth:`decide` (its snapshot does not change while it decides):
        a decision scores many placements, each reading the loads of the GPUs it would take.
        """
        loads = self._loads
        hit = loads.get(gpu) if loads is not None else None
        if hit is None:
            res = view.residents(gpu)
            hit = (
                sum(self.util(view, r, gpu) for r in res),
                sum(self.mem_gb(r) for r in res),
            )
            if loads is not None:
                loads[gpu] = hit
        return hit

    # ------------------------------------------------------------------ fair queueing
    def groups(self, view: ClusterView, queue: list[JobView]) -> list[Group]:
        """k-means groups of the queue with weights ``max(median wait, 1) * length``."""
        if not queue:
            return []
        key = tuple(j.job_id for j in queue)
        if key == self._labels_key:  # same queue: same clusters (only the waits moved)
            labels = self._labels
        else:
            feats = np.asarray(
                [[j.num_gpus, self.util(view, j), j.gpu_frac, self.mem_gb(j)] for j in queue]
            )
            k = min(N_GROUPS, len({tuple(r) for r in feats.tolist()}))
            if k <= 1:
                labels = np.zeros(len(queue), dtype=int)
            else:
                std = feats.std(axis=0)
                z = (feats - feats.mean(axis=0)) / np.where(std > 0, std, 1.0)
                km = KMeans(n_clusters=k, n_init=3, random_state=self.seed)
                with one_thread():  # a few dozen points: threads cost more than work
                    labels = km.fit_predict(z)
            self._labels_key, self._labels = key, labels
        out = []
        for lab in sorted(set(labels.tolist())):
            members = [j for j, lb in zip(queue, labels) if lb == lab]
            members.sort(key=lambda j: (-j.wait_s, j.job_id))
            wait = float(np.median([j.wait_s for j in members]))
            out.append(Group(tuple(j.job_id for j in members), max(wait, 1.0) * len(members)))
        return out

    # ------------------------------------------------------------------ placement
    def cost(self, view: ClusterView, job: JobView, gpus: list[int]) -> float | None:
        """Horus' placement cost on ``gpus`` (None if it would over-commit utilisation/memory)."""
        cost = 0.0
        best_speed = self.best_speed(view, job)
        # a gang runs at its slowest member's speed (docs/simulator.md): every member pays it
        speed = min(map(self.speeds(view, job).__getitem__, gpus))
        for g in gpus:
            u_job = self.util(view, job, g)
            u_gpu, m_gpu = self.gpu_load(view, g)
            if view.n_res[g] > 0 and (
                u_gpu + u_job > self.max_util + 1e-9
                or m_gpu + self.mem_gb(job) > view.mem_cap_gb[g]
            ):
                return None
            if job.online:  # latency-critical: the most head-room (Horus packs training jobs)
                cost += min(1.0, u_gpu + u_job) + self.w_int * u_gpu * u_job
            else:  # best fit on utilisation, plus the contention of co-location
                cost += (1.0 - min(1.0, u_gpu + u_job)) + self.w_int * u_gpu * u_job
            cost += self.w_speed * (1.0 - speed / best_speed)
        nodes = len({int(view.node_of[g]) for g in gpus})
        return cost / len(gpus) + self.w_comm * (nodes - 1)

    def speeds(self, view: ClusterView, job: JobView) -> list[float]:
        """The job's profiled solo speed on each GPU of the fleet (``ClusterView.solo_speed``),
        memoised per fleet and model: a GPU's solo speed is its type's."""
        if self._fleet is not view.type_name:
            self._fleet, self._speeds, self._best = view.type_name, {}, {}
        hit = self._speeds.get(job.model)
        if hit is None:
            by_type: dict[str, float] = {}
            for g, t in enumerate(view.type_name):
                if t not in by_type:
                    by_type[t] = view.solo_speed(job.model, g)
            hit = self._speeds[job.model] = [by_type[t] for t in view.type_name]
        return hit

    def best_speed(self, view: ClusterView, job: JobView) -> float:
        """The job's fastest profiled solo speed on any GPU of the fleet (the maximum of
        :meth:`speeds`; memoised per fleet and model)."""
        speeds = self.speeds(view, job)
        hit = self._best.get(job.model)
        if hit is None:
            hit = self._best[job.model] = max(speeds)
        return hit

    def gang(self, view: ClusterView, job: JobView, start: int) -> list[int]:
        return list(range(start, min(view.n_gpus, start + job.num_gpus)))

    def place(self, view: ClusterView, job: JobView) -> Decision | None:
        ts = [i for i, o in enumerate(view.options) if o.mode is SharingMode.TIME_SHARING]
        if not ts:
            return None
        legal = np.flatnonzero(view.mask(job.job_id)[:, ts[0]])
        best: tuple[float, int] | None = None
        for g in map(int, legal):
            c = self.cost(view, job, self.gang(view, job, g))
            if c is not None and (best is None or (c, g) < best):
                best = (c, g)
        return Decision(job.job_id, best[1], ts[0]) if best else None

    def decide(self, view: ClusterView) -> Decision | None:
        self._loads = {}
        try:
            return self._decide(view)
        finally:
            self._loads = None

    def _decide(self, view: ClusterView) -> Decision | None:
        window = {j.job_id: j for j in view.window}
        if not window:
            return None
        order = [j for j in wfq_order(self.groups(view, view.queue), len(window)) if j in window]
        for jid in order:
            job = window[jid]
            d = self.place(view, job)
            if d is not None:
                return d
            if job.wait_s >= self.reserve_after_s:
                return None  # reservation for a starving job: let the GPUs drain for it
        return None
