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
  splits (:func:`gpu_sharing_gym.baselines.predictors.train_pair_speed`).
* **Dynamic SM allocation** (``dynamic_sm`` mechanism): the offline client's SM share follows the
  online service's load; the predictor is queried at the share the mechanism will give (every
  SM for a client xCUDA holds back, physics version 5: no cap on top of the launch control).
* **Two-level protection** (``protection`` mechanism): the simulator's SysMonitor, a state
  machine on the GPU's utilisation, SM activity, SM clock (the service's kernel speed) and
  memory (``sim.online``), closes a busy GPU to new offline work, throttles, then evicts offline
  work, and offline work is placed only on healthy GPUs (the legality mask excludes the others).
* **xCUDA** (``kernel_priority`` mechanism): the offline client runs at a lower priority than
  the service and launches kernels only into its idle time (see below), and a feedback loop on
  the service's kernel speed (the device metric standing for the SM clock) delays its launches
  further while that speed drops below ``sim.online.XCUDA_CLOCK_MIN`` (physics version 5).
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
partner run alone on empty GPUs; gang jobs only go to empty GPUs. The paper's xCUDA (kernel
launches of offline work held back while the service is busy) is the ``kernel_priority``
mechanism: kernel-level priority under MPS, calibrated on Tally's measured pairs (the only
measurements of a kernel-level-throttled co-runner we have; xCUDA itself is unpublished), and
the predictor is profiled with it. To avoid starving the queue, a round also starts whenever
no offline job is running (no future completion would wake the scheduler).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import ClassVar, overload

import numpy as np
from scipy.optimize import linear_sum_assignment

from gpu_sharing_env.fleet.cluster import PlacementOption
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.baselines.predictors import (
    PairSpeedPredictor,
    model_features,
    offline_share,
    offline_share_array,
    sm_limited,
    train_pair_speed,
)

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


def _option_order(options: tuple[PlacementOption, ...]) -> tuple[tuple[int, ...], int]:
    """Exclusive options, then MPS by decreasing SM share; and how many are exclusive."""
    excl = [i for i, o in enumerate(options) if o.mode is SharingMode.EXCLUSIVE]
    mps_desc = sorted(
        (i for i, o in enumerate(options) if o.mode is SharingMode.MPS),
        key=lambda i: -options[i].sm_pct,
    )
    return tuple(excl + mps_desc), len(excl)


@functools.cache
def _option_lut(order: tuple[int, ...], k: int) -> np.ndarray:
    """:func:`_first_option_tables` as one table (int8) indexed by the legal bits, plus
    ``1 << len(order)`` beside a service (the first legal MPS option there) and
    ``2 << len(order)`` for a gang (nothing beside a service)."""
    first_any, first_late = _first_option_tables(order, k)
    none = np.full(first_any.size, -1, dtype=np.int64)
    return np.concatenate((first_any, first_late, first_any, none)).astype(np.int8)


def first_options(
    view: ClusterView, jobs: Sequence[JobView], gpus: np.ndarray, is_svc: np.ndarray
) -> np.ndarray:
    """MuxFlow's option per (job, GPU of ``gpus``), -1 if none (int8 when the options fit):
    on an empty GPU the first legal one of exclusive + MPS by decreasing share; beside a
    service (single-GPU jobs only) the largest MPS share the SM budget allows."""
    order, k = _option_order(view.options)
    n, m, nb = len(jobs), gpus.size, len(order)
    if nb <= 6 and len(view.options) <= 127:
        # Per job and GPU the legality of the options in that order as bits (bit nb: beside
        # a service; bit nb + 1: a gang); a table maps them to the option.
        # Jobs with the same mask (the cluster's masks are shared by jobs of one memory size
        # and GPU-type constraint) and kind share a row.
        weight = np.zeros(len(view.options), dtype=np.uint8)
        weight[list(order)] = 1 << np.arange(nb, dtype=np.uint8)
        bits = np.empty((n, view.n_gpus), dtype=np.uint8)
        row_of: dict[tuple[int, tuple[int, ...], bool], int] = {}
        src = np.empty(n, dtype=np.intp)
        for r, job in enumerate(jobs):
            mask = view.mask(job.job_id)
            key = (mask.ctypes.data, mask.strides, job.num_gpus == 1)  # arrays alive: unique
            u = row_of.get(key)
            if u is None:
                u = row_of[key] = len(row_of)
                # sum over options of legal x (1 << rank in the order): the bits (exact)
                np.einsum("go,o->g", mask.view(np.uint8), weight, out=bits[u])
                if job.num_gpus > 1:
                    bits[u] |= 2 << nb
            src[r] = u
        b = bits[: len(row_of)].take(gpus, axis=1)
        b |= is_svc.view(np.uint8) << nb
        opt = _option_lut(order, k).take(b)
        return opt if len(row_of) == n else opt[src]
    opt = np.full((n, m), -1, dtype=np.int64)
    # options assigned back to front: the first legal one stays
    excl, mps_desc = list(order[:k]), list(order[k:])
    svc_c = np.flatnonzero(is_svc)
    for r, job in enumerate(jobs):
        mask = view.mask(job.job_id)
        first = opt[r]
        for o in mps_desc[::-1]:
            first[mask[:, o][gpus]] = o
        if job.num_gpus > 1:
            first[svc_c] = -1
        for o in excl[::-1]:
            first[mask[:, o][gpus] & ~is_svc] = o
    return opt


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
    reads_estimates = False  # (tests/test_no_estimates.py)
    mechanisms: ClassVar[Mapping[str, bool]] = {
        "protection": True,
        "dynamic_sm": True,
        "mixed_error_handling": True,
        "kernel_priority": True,
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
        #: Per GPU, the online service last seen there (``_svc_known``) and its batch latency
        #: there (ms), batch size and bandwidth intensity: :meth:`_service_statics`.
        self._svc_episode: object = None
        self._svc_id = np.zeros(0, dtype=np.int64)
        self._svc_known = np.zeros(0, dtype=bool)
        self._svc_tab = np.zeros((3, 0))

    def predictor(self, view: ClusterView) -> PairSpeedPredictor:
        """The trained speed predictor (trained on first use, cached per profiler and seed)."""
        if self._predictor is None:
            kp = bool(self.mechanisms.get("kernel_priority", False))
            self._predictor = train_pair_speed(view, self.seed, kernel_priority=kp)
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
        static share, which a variant without dynamic SM allocation would use instead). With
        xCUDA (``kernel_priority``) deployed that is every SM (physics version 5: the client's
        launches wait for the service's idle time instead of a cap on its SMs)."""
        if self.mechanisms.get("kernel_priority", False):
            return 1.0
        return offline_share(online_duty)

    def predicted_shares(self, online_duty: np.ndarray, option_share: np.ndarray) -> np.ndarray:
        """:meth:`predicted_share` of many (service, option) pairs (the same floats)."""
        if type(self).predicted_share is MuxFlow.predicted_share:
            if self.mechanisms.get("kernel_priority", False):
                return np.ones(online_duty.size)
            return offline_share_array(online_duty)
        # An override: once per distinct (duty, share), in the order they first occur.
        memo: dict[tuple[float, float], float] = {}
        out = np.empty(online_duty.size)
        for i, key in enumerate(zip(online_duty.tolist(), option_share.tolist())):
            v = memo.get(key)
            if v is None:
                v = memo[key] = self.predicted_share(*key)
            out[i] = v
        return out

    def _service_statics(
        self, view: ClusterView, ids: np.ndarray, gpus: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of online services ``ids`` on ``gpus``: the profiled latency of a batch there (ms),
        the batch size and the model's bandwidth intensity. Memoised per episode and GPU (a
        service's model and batch size never change; its GPU's type is fixed)."""
        if self._svc_episode is not view.episode or self._svc_id.size != view.n_gpus:
            self._svc_episode = view.episode
            self._svc_id = np.zeros(view.n_gpus, dtype=np.int64)
            self._svc_known = np.zeros(view.n_gpus, dtype=bool)
            self._svc_tab = np.zeros((3, view.n_gpus))
        miss = np.flatnonzero(~self._svc_known[gpus] | (self._svc_id[gpus] != ids))
        for k in miss.tolist():
            g, sv = int(gpus[k]), view.job(int(ids[k]))
            assert sv.service is not None
            b = sv.service.batch_size
            lat = view.profile_latency_ms(sv.model, view.type_name[g], b)
            self._svc_tab[:, g] = (lat, float(b), ZOO[sv.model].bw_intensity)
            self._svc_id[g], self._svc_known[g] = sv.job_id, True
        lat_a, batch_a, bw_a = self._svc_tab.take(gpus, axis=1)
        return lat_a, batch_a, bw_a

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
        c = np.flatnonzero(paired[gpus])
        svc[c] = view.first_resident_ids(gpus[c])
        return Columns(gpus, svc)

    def weights(
        self, view: ClusterView, jobs: list[JobView], cols: Sequence[tuple[int, int | None]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, options, predicted normalised throughput) per (job, column)."""
        w, opt, norm = self._weights(view, jobs, Columns.of(cols), with_norm=True)
        assert norm is not None
        return w, opt.astype(np.int64), norm

    def _weights(
        self, view: ClusterView, jobs: list[JobView], cs: Columns, with_norm: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """:meth:`weights` (the normalised throughputs only ``with_norm``)."""
        n = len(jobs)
        gpus, is_svc = cs.gpus, cs.svc >= 0
        opt = first_options(view, jobs, gpus, is_svc)
        legal = opt >= 0
        # Pairs with a service, column by column and jobs in order within a column: the
        # predictor's batch (its rows in this order).
        svc_c = np.flatnonzero(is_svc)
        ps, pr = np.nonzero(legal[:, svc_c].T)
        pc = svc_c[ps]
        # Per service column: SM activity at the observed rate (service_duty, elementwise),
        # bandwidth intensity, SM-limit flag.
        s_gpu, s_ids = gpus[svc_c], cs.svc[svc_c]
        lat, batch, bw = self._service_statics(view, s_ids, s_gpu)
        duty = np.minimum(1.0, view.request_rates(s_ids.tolist()) * lat / 1000.0 / batch)
        tix = np.asarray(view.type_idx)
        lim = np.array([sm_limited(view, t) for t in view.type_names])[tix[s_gpu]]
        # The offline SM share asked about, per pair (the option's static share as well).
        pct = np.array([o.sm_pct for o in view.options], dtype=np.float64) / 100.0
        share = self.predicted_shares(duty[ps], pct[opt[pr, pc]])
        feats = np.array([model_features(job.model) for job in jobs]).reshape(n, 3)
        x = PairSpeedPredictor.rows(feats[pr], bw[ps], duty[ps], share, lim[ps])
        pred = self.predictor(view).predict(x)
        # weight: predicted normalised throughput x solo speed of the model on the GPU's type
        # (on an empty GPU the throughput is 1.0 and the weight the solo speed itself).
        reps = type_reps(view)
        solo = np.array([[view.solo_speed(job.model, int(g)) for g in reps] for job in jobs])
        speed = solo.reshape(n, len(reps)).take(tix[gpus], axis=1)
        empty_ok = legal & ~is_svc
        w = np.where(empty_ok, speed, _ILLEGAL)
        good = pred >= self.min_norm_tput
        gr, gc = pr[good], pc[good]
        w[gr, gc] = pred[good] * speed[gr, gc]
        norm = None
        if with_norm:
            norm = empty_ok.astype(np.float64)
            norm[pr, pc] = pred
        return w, opt, norm

    def _plan_offline(self, view: ClusterView) -> Decision | None:
        jobs = [j for j in view.window if not j.online]
        cols = self.columns(view)
        if not jobs or not cols:
            return None
        w, opt, _ = self._weights(view, jobs, cols, with_norm=False)
        pairs = km_assign(w)
        if not pairs:
            return None
        # Carry out the plan one placement at a time (the next call re-plans on the new state);
        # the head of the queue first.
        r, c = min(pairs)
        return Decision(jobs[r].job_id, cols[c][0], int(opt[r, c]))
