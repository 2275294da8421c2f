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

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
from scipy.optimize import linear_sum_assignment

from baselines.base import HeuristicPolicy
from baselines.predictors import PairSpeedPredictor, offline_share, sm_limited, train_pair_speed
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView

#: Weight of an infeasible (job, GPU) edge: never chosen unless nothing else exists.
_ILLEGAL = -1e9


def service_duty(view: ClusterView, svc: JobView, gpu: int, rps: float) -> float:
    """SM activity of an online service at ``rps`` on ``gpu``, from its profiled batch latency."""
    assert svc.service is not None
    b = svc.service.batch_size
    lat_ms = view.profile_latency_ms(svc.model, view.type_name[gpu], b)
    return min(1.0, rps * lat_ms / 1000.0 / b)


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
        best: tuple[float, int, int] | None = None
        for g in map(int, np.flatnonzero(np.asarray(view.n_res) == 0)):
            duty = service_duty(view, svc, g, peak)
            fits_share = duty * 1.2 <= self.online_sm_pct / 100.0
            for o in (share if fits_share else []) + excl + mps[::-1]:
                if mask[g, o]:
                    key = (duty, g, o)
                    if best is None or key < best:
                        best = key
                    break
        return Decision(svc.job_id, best[1], best[2]) if best else None

    def predicted_share(self, online_duty: float, option_share: float) -> float:
        """The offline SM fraction the predictor is asked about: what dynamic SM allocation
        gives beside a service at ``online_duty`` (``option_share`` is the placement option's
        static share, which a variant without dynamic SM allocation would use instead)."""
        return offline_share(online_duty)

    def columns(self, view: ClusterView) -> list[tuple[int, int | None]]:
        """GPUs that may take an offline job: (gpu, online service job id or None if empty)."""
        cols: list[tuple[int, int | None]] = []
        for g in range(view.n_gpus):
            if view.n_res[g] == 0:
                cols.append((g, None))
            elif (
                view.n_res[g] == 1
                and view.online_count[g] == 1
                and view.mode[g] == SharingMode.MPS
                and view.healthy[g]
            ):
                cols.append((g, view.residents(g)[0].job_id))
        return cols

    def weights(
        self, view: ClusterView, jobs: list[JobView], cols: list[tuple[int, int | None]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, options, predicted normalised throughput) per (job, column)."""
        n, m = len(jobs), len(cols)
        w = np.full((n, m), _ILLEGAL)
        opt = np.full((n, m), -1, dtype=np.int64)
        norm = np.zeros((n, m))
        opts = view.options
        excl = [i for i, o in enumerate(opts) if o.mode is SharingMode.EXCLUSIVE]
        mps_desc = sorted(
            (i for i, o in enumerate(opts) if o.mode is SharingMode.MPS),
            key=lambda i: -opts[i].sm_pct,
        )
        rows: list[list[float]] = []
        where: list[tuple[int, int]] = []
        for c, (g, svc_id) in enumerate(cols):
            svc = view.job(svc_id) if svc_id is not None else None
            duty = service_duty(view, svc, g, svc.rps) if svc is not None else 0.0
            for r, job in enumerate(jobs):
                mask = view.mask(job.job_id)
                if svc is None:
                    legal = [o for o in excl + mps_desc if mask[g, o]]
                    if legal:
                        opt[r, c], norm[r, c] = legal[0], 1.0
                    continue
                if job.num_gpus > 1:
                    continue
                legal = [o for o in mps_desc if mask[g, o]]  # largest share the SM budget allows
                if not legal:
                    continue
                opt[r, c] = legal[0]
                s = self.predicted_share(duty, opts[legal[0]].sm_pct / 100.0)
                lim = sm_limited(view, view.type_name[g])
                rows.append(PairSpeedPredictor.row(job.model, svc.model, duty, s, lim))
                where.append((r, c))
        for (r, c), y in zip(where, self.predictor(view).predict(rows)):
            norm[r, c] = float(y)
        for r, job in enumerate(jobs):
            for c, (g, svc_id) in enumerate(cols):
                ok = opt[r, c] >= 0 and (svc_id is None or norm[r, c] >= self.min_norm_tput)
                if ok:
                    w[r, c] = norm[r, c] * view.solo_speed(job.model, g)
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
