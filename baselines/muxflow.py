"""MuxFlow (Zhao et al., "MuxFlow: Efficient and Safe GPU Sharing in Large-Scale Production Deep
Learning Clusters", 2023): online inference services share GPUs with offline training jobs
through MPS, with the online service protected.

Mechanisms implemented:

* **Matching-based scheduling (Kuhn–Munkres).** At every scheduling round the queued offline
  jobs (the queue window) and the GPUs that can take one (GPUs hosting exactly one online service
  under MPS, plus empty GPUs) form a bipartite graph; edge weights are the *predicted* offline
  throughput of the job on that GPU, and :func:`scipy.optimize.linear_sum_assignment` finds the
  maximum-weight assignment. One offline job per online service (the paper's pairs).
* **Learned speed predictor.** A small MLP (3 hidden layers of 64, as the paper's 4-layer,
  64-wide network) predicts an offline job's normalised throughput beside an online service from
  the two models' profiled features, the service's current load and the offline SM share. It is
  trained on offline profiling runs (:meth:`ClusterView.profile`) of random pairs, loads and SM
  splits (:func:`baselines.predictors.train_pair_speed`).
* **Dynamic SM allocation** (``dynamic_sm`` mechanism): the offline client's SM share follows the
  online service's load; the predictor is queried at the share the mechanism will give.
* **Two-level protection** (``protection`` mechanism): the simulator's SysMonitor throttles, then
  evicts offline work when the service nears its SLO, and offline work is placed only on
  healthy GPUs (the legality mask excludes the others).
* **Mixed error handling** (``mixed_error_handling`` mechanism): graceful exit on SIGINT/SIGTERM,
  so user signals do not take down the MPS server.
* **Scheduling at an interval**: offline placements are planned in rounds every ``interval_s``
  (the paper: 15 minutes; here 5, the simulator's load tick) and the policy waits in between.
  Online services are placed as soon as they arrive.

Simplified: online services are placed by MuxFlow itself (the paper assumes them placed) on the
empty GPU where they run fastest, under MPS with a large share (75%) so an offline client fits
beside them, or exclusively when their peak load needs more. Weights are normalised throughput
times the model's solo speed on the GPU type (the paper's cluster was homogeneous T4; on mixed
fleets this keeps fast GPUs for the jobs that gain most). Offline jobs that get no online
partner run alone on empty GPUs; gang jobs only go to empty GPUs. The paper's xCUDA kernel-level
throttling is the simulator's SysMonitor throttle. To avoid starving the queue, a round also
starts whenever no offline job is running (no future completion would wake the scheduler).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import ClassVar, overload

import numpy as np
from scipy.optimize import linear_sum_assignment

from baselines.base import HeuristicPolicy
from baselines.predictors import (
    PairSpeedPredictor,
    model_features,
    offline_share,
    sm_limited,
    train_pair_speed,
)
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_env.zoo import ZOO

#: Weight of an infeasible (job, GPU) edge: never chosen unless nothing else exists.
_ILLEGAL = -1e9


def service_duty(view: ClusterView, svc: JobView, gpu: int, rps: float) -> float:
    """SM activity of an online service at ``rps`` on ``gpu``, from its profiled batch latency."""
    assert svc.service is not None
    b = svc.service.batch_size
    lat_ms = view.profile_latency_ms(svc.model, view.type_name[gpu], b)
    return min(1.0, rps * lat_ms / 1000.0 / b)


_TYPE_REPS: dict[int, tuple[tuple[str, ...], np.ndarray]] = {}


def type_reps(view: ClusterView) -> np.ndarray:
    """One GPU of each type, indexed like ``view.type_names`` (cached per fleet)."""
    key = view.type_name  # static: the same tuple in every snapshot of a simulator
    hit = _TYPE_REPS.get(id(key))
    if hit is None or hit[0] is not key:
        types, first = np.unique(np.asarray(view.type_idx), return_index=True)
        reps = np.full(len(view.type_names), -1, dtype=np.int64)
        reps[types] = first
        if len(_TYPE_REPS) > 64:
            _TYPE_REPS.clear()
        hit = _TYPE_REPS[id(key)] = (key, reps)
    return hit[1]


class Columns(Sequence[tuple[int, int | None]]):
    """The GPUs that may take an offline job as arrays: ``gpus`` (ascending) and ``svc`` (the
    online service's job id, -1 on an empty GPU). Indexes like a list of (gpu, service id or
    None) without building one per decision."""

    def __init__(self, gpus: np.ndarray, svc: np.ndarray) -> None:
        self.gpus = gpus
        self.svc = svc

    def __len__(self) -> int:
        return int(self.gpus.size)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int | None]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, int | None]]: ...
    def __getitem__(
        self, i: int | slice
    ) -> tuple[int, int | None] | Sequence[tuple[int, int | None]]:
        if isinstance(i, slice):
            return Columns(self.gpus[i], self.svc[i])
        s = int(self.svc[i])
        return int(self.gpus[i]), (s if s >= 0 else None)

    @staticmethod
    def of(cols: Sequence[tuple[int, int | None]]) -> Columns:
        if isinstance(cols, Columns):
            return cols
        gpus = np.array([g for g, _ in cols], dtype=np.int64)
        svc = np.array([-1 if s is None else s for _, s in cols], dtype=np.int64)
        return Columns(gpus, svc)


_DUTY: dict[int, tuple[tuple[str, ...], dict[tuple[str, str, int, float], float]]] = {}


def _service_duty_memo(view: ClusterView, svc: JobView, gpu: int, rps: float) -> float:
    """:func:`service_duty`, memoised per simulator (its fleet tuple; a pure function of model,
    GPU type, batch and rate there; rates change at load ticks, a round's decisions share them)."""
    assert svc.service is not None
    fleet = view.type_name
    hit = _DUTY.get(id(fleet))
    if hit is None or hit[0] is not fleet:
        if len(_DUTY) > 16:
            _DUTY.clear()
        hit = _DUTY[id(fleet)] = (fleet, {})
    memo = hit[1]
    key = (svc.model, view.type_name[gpu], svc.service.batch_size, rps)
    v = memo.get(key)
    if v is None:
        if len(memo) > 100_000:
            memo.clear()
        v = memo[key] = service_duty(view, svc, gpu, rps)
    return v


@functools.cache
def _first_option_tables(order: tuple[int, ...], k: int) -> tuple[np.ndarray, np.ndarray]:
    """For bit sets of legal options (bit i: ``order[i]`` legal): the first legal option, and
    the first legal one from ``order[k:]`` on (-1: none)."""
    first_any = np.full(1 << len(order), -1, dtype=np.int64)
    first_late = np.full(1 << len(order), -1, dtype=np.int64)
    for bits in range(1, 1 << len(order)):
        first_any[bits] = order[(bits & -bits).bit_length() - 1]
        late = bits >> k
        if late:
            first_late[bits] = order[k + (late & -late).bit_length() - 1]
    return first_any, first_late


def km_assign(weights: np.ndarray) -> list[tuple[int, int]]:
    """Maximum-weight assignment (Kuhn–Munkres) of rows to columns; infeasible edges dropped."""
    if weights.size == 0:
        return []
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return [(int(r), int(c)) for r, c in zip(rows, cols) if weights[r, c] > _ILLEGAL / 2]


class MuxFlow(HeuristicPolicy):
    """MuxFlow: KM pairing of offline jobs with online services on predicted throughput.

    Args:
        interval_s: Offline scheduling interval (simulated seconds).
        online_sm_pct: MPS share an online service is placed with when an offline client is to
            fit beside it.
        min_norm_tput: Pairs predicted below this normalised offline throughput are not formed.
    """

    name = "muxflow"
    mechanisms: ClassVar[Mapping[str, bool]] = {
        "protection": True,
        "dynamic_sm": True,
        "mixed_error_handling": True,
    }

    def __init__(
        self, interval_s: float = 300.0, online_sm_pct: int = 75, min_norm_tput: float = 0.2
    ) -> None:
        self.interval_s = interval_s
        self.online_sm_pct = online_sm_pct
        self.min_norm_tput = min_norm_tput
        self.reset(0)

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.seed = seed
        self._next_round_s = 0.0
        self._round_t = -1.0
        self._predictor: PairSpeedPredictor | None = None

    def predictor(self, view: ClusterView) -> PairSpeedPredictor:
        """The trained speed predictor (trained on first use, cached per profiler and seed)."""
        if self._predictor is None:
            self._predictor = train_pair_speed(view, self.seed)
        return self._predictor

    # ------------------------------------------------------------------ decisions
    def decide(self, view: ClusterView) -> Decision | None:
        for job in view.window:
            if job.online:
                d = self._place_online(view, job)
                if d is not None:
                    return d
        if not self._round_open(view):
            return None
        return self._plan_offline(view)

    def _round_open(self, view: ClusterView) -> bool:
        """A round runs at one instant (decisions until the plan is carried out); the next one
        opens ``interval_s`` later, or earlier if no offline job runs (none would wake us)."""
        if view.now_s == self._round_t:
            return True
        offline_running = bool(np.any(np.asarray(view.n_res) > np.asarray(view.online_count)))
        if view.now_s >= self._next_round_s or not offline_running:
            self._round_t = view.now_s
            self._next_round_s = view.now_s + self.interval_s
            return True
        return False

    def _place_online(self, view: ClusterView, svc: JobView) -> Decision | None:
        """An empty GPU where the service runs fastest: MPS at ``online_sm_pct`` when its peak
        load leaves room for an offline client, otherwise exclusive."""
        assert svc.service is not None
        mask = view.mask(svc.job_id)
        opts = view.options
        mps = [i for i, o in enumerate(opts) if o.mode is SharingMode.MPS]
        share = [i for i in mps if opts[i].sm_pct == self.online_sm_pct]
        excl = [i for i, o in enumerate(opts) if o.mode is SharingMode.EXCLUSIVE]
        peak = max(svc.service.peak_rps, svc.rps)
        empty = np.flatnonzero(np.asarray(view.n_res) == 0)
        if not empty.size:
            return None
        # The duty depends on the GPU's type only: once per type, then per empty GPU.
        duty_t = [service_duty(view, svc, int(g), peak) for g in type_reps(view)]
        tix = np.asarray(view.type_idx)[empty]
        duty = np.array(duty_t)[tix]
        fits = np.array([d * 1.2 <= self.online_sm_pct / 100.0 for d in duty_t])[tix]
        # Per GPU the first legal option of (share if it fits) + excl + mps[::-1]: assigning
        # the list back to front leaves the first legal one.
        first = np.full(empty.size, -1, dtype=np.int64)
        for o in (excl + mps[::-1])[::-1]:
            first[mask[:, o][empty]] = o
        for o in share[::-1]:
            first[fits & mask[:, o][empty]] = o
        ok = first >= 0
        if not ok.any():
            return None
        # min (duty, gpu, option) over GPUs with a legal option (one option per GPU)
        i = int(np.flatnonzero(ok & (duty == duty[ok].min()))[0])
        return Decision(svc.job_id, int(empty[i]), int(first[i]))

    def predicted_share(self, online_duty: float, option_share: float) -> float:
        """The offline SM fraction the predictor is asked about: what dynamic SM allocation
        gives beside a service at ``online_duty`` (``option_share`` is the placement option's
        static share, which a variant without dynamic SM allocation would use instead)."""
        return offline_share(online_duty)

    def columns(self, view: ClusterView) -> Columns:
        """GPUs that may take an offline job: (gpu, online service job id or None if empty)."""
        n_res = np.asarray(view.n_res)
        paired = (
            (n_res == 1)
            & (np.asarray(view.online_count) == 1)
            & (np.asarray(view.mode) == SharingMode.MPS)
            & np.asarray(view.healthy)
        )
        gpus = np.flatnonzero((n_res == 0) | paired)
        svc = np.full(gpus.size, -1, dtype=np.int64)
        for c in np.flatnonzero(paired[gpus]):
            svc[c] = view.resident_ids(int(gpus[c]))[0]
        return Columns(gpus, svc)

    def weights(
        self, view: ClusterView, jobs: list[JobView], cols: Sequence[tuple[int, int | None]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, options, predicted normalised throughput) per (job, column)."""
        cs = Columns.of(cols)
        n, m = len(jobs), len(cs)
        w = np.full((n, m), _ILLEGAL)
        opt = np.full((n, m), -1, dtype=np.int64)
        norm = np.zeros((n, m))
        opts = view.options
        excl = [i for i, o in enumerate(opts) if o.mode is SharingMode.EXCLUSIVE]
        mps_desc = sorted(
            (i for i, o in enumerate(opts) if o.mode is SharingMode.MPS),
            key=lambda i: -opts[i].sm_pct,
        )
        gpus, is_svc = cs.gpus, cs.svc >= 0
        svc_c = np.flatnonzero(is_svc)
        # Per job: on empty GPUs the first legal option of excl + mps_desc (norm 1); beside a
        # service (single-GPU jobs only) the largest MPS share the SM budget allows.
        order = excl + mps_desc
        if len(order) <= 16:
            # Legal options in that order as bits per GPU; tables map bits to the first one.
            lut_any, lut_mps = _first_option_tables(tuple(order), len(excl))
            for r, job in enumerate(jobs):
                legal = view.mask(job.job_id).T  # option-major (contiguous rows)
                bits = np.zeros(view.n_gpus, dtype=np.uint16)
                for i, o in enumerate(order):
                    bits |= legal[o].view(np.uint8).astype(np.uint16) << i
                b = bits[gpus]
                first_mps = lut_mps[b] if job.num_gpus == 1 else -1
                opt[r] = np.where(is_svc, first_mps, lut_any[b])
        else:  # options assigned back to front: the first legal one stays
            for r, job in enumerate(jobs):
                mask = view.mask(job.job_id)
                first = opt[r]
                for o in mps_desc[::-1]:
                    first[mask[:, o][gpus]] = o
                if job.num_gpus > 1:
                    first[svc_c] = -1
                for o in excl[::-1]:
                    first[mask[:, o][gpus] & ~is_svc] = o
        norm[(opt >= 0) & ~is_svc] = 1.0
        # Pairs with a service, column by column and jobs in order within a column.
        pc, pr = np.nonzero(opt[:, svc_c].T >= 0)
        pc = svc_c[pc]
        duty = np.zeros(m)
        bw = np.zeros(m)
        lim = np.zeros(m)
        duty_of: dict[int, float] = {}
        lim_of: dict[str, float] = {}
        for c in map(int, np.unique(pc)):
            g = int(gpus[c])
            svc = view.job(int(cs.svc[c]))
            duty[c] = duty_of[c] = _service_duty_memo(view, svc, g, svc.rps)
            bw[c] = ZOO[svc.model].bw_intensity
            t = view.type_name[g]
            if t not in lim_of:
                lim_of[t] = sm_limited(view, t)
            lim[c] = lim_of[t]
        po = opt[pr, pc]
        # predicted_share once per (column, option)
        keys, inv = np.unique(pc * len(opts) + po, return_inverse=True)
        shares = [
            self.predicted_share(duty_of[k // len(opts)], opts[k % len(opts)].sm_pct / 100.0)
            for k in map(int, keys)
        ]
        feats = np.array([model_features(job.model) for job in jobs]).reshape(n, 3)
        x = PairSpeedPredictor.rows(
            feats[pr], bw[pc], duty[pc], np.array(shares, dtype=float)[inv.ravel()], lim[pc]
        )
        norm[pr, pc] = self.predictor(view).predict(x)
        # weight: predicted normalised throughput x solo speed of the model on the GPU's type
        reps = type_reps(view)
        tix = np.asarray(view.type_idx)[gpus]
        ok = (opt >= 0) & (~is_svc | (norm >= self.min_norm_tput))
        for r, job in enumerate(jobs):
            speed = np.array([view.solo_speed(job.model, int(g)) for g in reps])[tix]
            w[r, ok[r]] = norm[r, ok[r]] * speed[ok[r]]
        return w, opt, norm

    def _plan_offline(self, view: ClusterView) -> Decision | None:
        jobs = [j for j in view.window if not j.online]
        cols = self.columns(view)
        if not jobs or not cols:
            return None
        w, opt, _ = self.weights(view, jobs, cols)
        pairs = km_assign(w)
        if not pairs:
            return None
        # Carry out the plan one placement at a time (the next call re-plans on the new state);
        # the head of the queue first.
        r, c = min(pairs)
        return Decision(jobs[r].job_id, cols[c][0], int(opt[r, c]))
