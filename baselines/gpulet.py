"""GPULet (Choi et al., "Serving Heterogeneous Machine Learning Models on Multi-GPU Servers with
Spatio-Temporal Sharing", USENIX ATC'22): inference services on *gpulets* (spatial partitions
with temporal sharing) sized to meet each SLO with the fewest GPUs.

Mechanisms implemented:

* **Per-model offline profiles.** The batch latency of a model on each GPU type
  (:meth:`ClusterView.profile_latency_ms`) and its speed in each MPS partition (one profiling run
  per (model, partition, load), :meth:`ClusterView.profile` with the service alone).
* **Elastic partitioning, spatial first, fewest GPUs first.** GPULet splits a GPU into (at most)
  two gpulets with its partitioning algorithm, fills them, and shares a gpulet in time only
  inside it (the paper's Sec. 4; notes ``../shared/seeds/003_*``). For each arriving service
  the scheduler searches (GPU, partition) pairs; a candidate is feasible when the predicted p99
  meets the SLO at the service's peak rate. Among the feasible ones: no new GPU first; then the
  free second gpulet of a split GPU (MPS, best fit: the smallest partition that meets the SLO);
  then temporal sharing inside a whole-GPU gpulet that already serves (time-sharing); on a new
  GPU, a split with the smallest feasible partition (the rest stays free for the next service),
  else a whole-GPU gpulet others may later share in time, else an exclusive GPU. Where the
  scenario enables gpulets (``sharing.gpulets``, opt-in), temporal sharing happens inside any
  gpulet, partial ones included (the placement options ``gpulet1``/``gpulet2``: join the GPU's
  k-th partition); without them a temporal gpulet is a whole GPU (time-sharing mode).
* **Batch size per placement and rate** (the third dimension of the paper's search). For
  each candidate (GPU, partition) the scheduler tries ``batch_sizes`` (1, 2, 4, ..., 32 by
  default, plus the service's configured batch) and keeps, as GPULet's artifact does for a
  gpulet serving a rate ``r`` below its saturation (casys-kaist/glet, commit 3c1c2aa,
  ``src/scheduler/scheduler_base.cpp`` ``getMaxBatch(is_residue)`` and
  ``scheduler_incremental.cpp`` ``getMinPart``), the largest batch ``b`` whose latency ``L``
  in that partition keeps up with the rate (``L <= b / r``) and whose collection time plus
  execution meets the SLO (``b / r + L <= SLO``; at saturation, ``b / r = L``, this is the
  paper's and Nexus' ``2 L <= SLO``), and that meets the SLO at peak in the queueing estimate
  below. A low-rate service gets a small batch and a short batch latency, so others can share
  its gpulet's time; the largest batch under ``SLO / 2`` regardless of the rate (before v4)
  left no room beside a service. At rates too low for any batch to fill within the SLO the
  artifact runs batches of 1 when ``L(1)`` is below the gap between requests; so does this
  planner. The chosen size goes in the decision (``Decision.batch_size``) and the simulator
  runs the service with it.
* **Batch-aware SM-share profile.** The partition profile is taken at the candidate batch size
  (``Resident.batch``): small batches fill few SMs and gain less from a larger partition
  (``interference.sm_share_k``, fitted on iGniter's V100 MPS solo profile per batch size).
* **Interference prediction by a linear model** (the paper's linear regression on two pair
  factors), fitted on profiled pairs (:func:`gpu_sharing_gym.baselines.predictors.train_linear_interference`).
  A placement is rejected if it would push an already placed service over its SLO.
* **Offline jobs fill what is left**: empty GPUs first (exclusive), then leftover partitions of
  inference GPUs when the linear model predicts every service there still meets its SLO.

Simplified: latency at a load is estimated with Kingman's G/G/1 approximation (queueing on top
of the profiled batch latency) besides the paper's batch rule above, and
services are planned for their peak rate instead of periodic re-partitioning (no
reorganisation, no migration, so a service keeps the batch size it was placed with). The
simulator's latency model has no batch-formation delay (a large batch at a low rate is not
penalised for waiting to fill), which the batch rule's collection-time term bounds. Time-sharing gives services
priority over offline co-runners (the cluster's ``online_priority``), so a temporal gpulet's
offline fill is not counted as interference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpu_sharing_env.fleet.cluster import PlacementOption
from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy, fastest_exclusive
from gpu_sharing_gym.baselines.predictors import LinearInterference, train_linear_interference

#: Batch sizes GPULet searches by default (the service's configured one is added).
DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True, slots=True)
class Load:
    """A co-runner as the interference model sees it: model class and SM activity; with
    gpulets (``SharingConfig.gpulets``) also its partition on the GPU and the share of that
    partition's time it keeps busy (its duty over its profiled speed there)."""

    model: str
    duty: float
    online: bool
    part: int = -1
    occ: float = 0.0


def p99_ms(batch_ms: float, rps: float, batch: int) -> float:
    """Kingman's approximation of the p99 latency of a batching server (inf if unstable)."""
    rho = rps * batch_ms / 1000.0 / batch
    if rho >= 1.0:
        return math.inf
    m = batch_ms / (2.0 * (1.0 - rho))
    return batch_ms + (m * math.log(100.0 * rho) if rho > 0.01 else 0.0)


class GPULet(HeuristicPolicy):
    """GPULet: spatio-temporal partitions sized per service's SLO, fewest GPUs first.

    Args:
        slo_margin: Plan for a p99 latency of at most ``slo_margin * SLO``.
        temporal_max_duty: Kept for compatibility; unused since placement is spatial first (a
            new GPU is time-shared only when no partition below 100 % meets the SLO).
        max_gpulets: MPS gpulets per GPU (the paper splits a GPU in two).
        batch_sizes: Batch sizes to search per placement (the service's configured size is
            always a candidate); None or empty: only the configured size, and decisions leave
            ``Decision.batch_size`` at 0.
    """

    name = "gpulet"
    reads_estimates = False  # (tests/test_no_estimates.py)

    def __init__(
        self,
        slo_margin: float = 0.8,
        temporal_max_duty: float = 0.15,
        batch_sizes: Sequence[int] | None = DEFAULT_BATCH_SIZES,
        max_gpulets: int = 2,
    ) -> None:
        self.slo_margin = slo_margin
        self.temporal_max_duty = temporal_max_duty
        self.max_gpulets = max_gpulets
        self.batch_sizes = tuple(batch_sizes) if batch_sizes else None
        self.reset(0)

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.seed = seed
        self._lin: LinearInterference | None = None
        self._speed: dict[tuple[str, str, int, float, int], float] = {}
        self._wait = False

    def interference(self, view: ClusterView) -> LinearInterference:
        if self._lin is None:
            self._lin = train_linear_interference(view, self.seed)
        return self._lin

    # ------------------------------------------------------------------ latency model
    def partition_speed(
        self, view: ClusterView, model: str, gpu: int, pct: int, duty: float, batch: int = 0
    ) -> float:
        """Profiled speed of a service alone in an MPS partition of ``pct`` % at SM activity
        ``duty`` running batches of ``batch`` (GPULet's per-model, per-batch profile), as a
        fraction of the whole GPU."""
        gt = view.type_name[gpu]
        key = (model, gt, pct, round(duty, 3), batch)
        hit = self._speed.get(key)
        if hit is None:
            res = [
                Resident(model, sm_frac=pct / 100.0, duty=max(duty, 1e-3), online=True, batch=batch)
            ]
            hit = self._speed[key] = view.profile(gt, SharingMode.MPS, res)[0]
        return hit

    def service_latency(
        self,
        view: ClusterView,
        svc: JobView,
        gpu: int,
        mode: SharingMode,
        pct: int,
        others: Sequence[Load],
        batch: int | None = None,
        part: int = -1,
    ) -> tuple[float, float]:
        """Predicted (batch latency, p99 latency) in ms of ``svc`` at peak rate on ``gpu`` in
        ``mode`` / ``pct`` beside ``others``, with batch size ``batch`` (default: the one it
        runs with, ``JobView.batch_size``); (inf, inf) if it gets no GPU time. With gpulets,
        ``part`` is the partition ``svc`` is in: the others in it share its time (the time
        their occupancies leave), the rest interfere as MPS co-runners."""
        assert svc.service is not None
        b = batch or svc.batch_size or svc.service.batch_size
        rps = max(svc.service.peak_rps, svc.rps)
        solo_ms = view.profile_latency_ms(svc.model, view.type_name[gpu], b)
        duty = min(1.0, rps * solo_ms / 1000.0 / b)
        if mode is SharingMode.MPS:
            f = self.partition_speed(view, svc.model, gpu, pct, duty, b)
            mates = [o for o in others if part >= 0 and o.part == part]
            rest = [o for o in others if part < 0 or o.part != part]
            f /= 1.0 + self.interference(view).slowdown(
                svc.model, [(o.model, o.duty) for o in rest]
            )
            if mates:  # temporal sharing inside the gpulet: the time its mates leave
                f *= 1.0 - sum(o.occ for o in mates if o.online)
        elif mode is SharingMode.TIME_SHARING:
            # Temporal sharing: the time the other services leave (duty cycle), offline co-runners
            # run at lower priority.
            f = 1.0 - sum(o.duty for o in others if o.online)
        else:
            f = 1.0
        if f <= 0:
            return math.inf, math.inf
        return solo_ms / f, p99_ms(solo_ms / f, rps, b)

    def service_ok(
        self,
        view: ClusterView,
        svc: JobView,
        gpu: int,
        mode: SharingMode,
        pct: int,
        others: Sequence[Load],
        batch: int | None = None,
        part: int = -1,
    ) -> bool:
        """Does ``svc`` meet its SLO at peak rate on ``gpu`` beside ``others``?"""
        assert svc.service is not None
        _, p99 = self.service_latency(view, svc, gpu, mode, pct, others, batch, part)
        return p99 <= self.slo_margin * svc.service.slo_ms

    def choose_batch(
        self,
        view: ClusterView,
        svc: JobView,
        gpu: int,
        mode: SharingMode,
        pct: int,
        others: Sequence[Load],
        part: int = -1,
    ) -> int | None:
        """The batch size for ``svc`` in this gpulet at its (peak) rate, GPULet's rule for a
        gpulet serving a given rate (its artifact, ``getMaxBatch`` / ``getMinPart``, module
        docstring): the largest candidate ``b`` whose batch latency ``L`` in this gpulet keeps
        up with the rate (``L <= b / rate``, the batch fills no faster than it runs) and whose
        batch-collection time plus execution meets the SLO (``b / rate + L <= SLO``, which
        implies ``2 L <= SLO``), and that meets the SLO at peak in the queueing estimate. At a
        rate so low that no batch fills within the SLO, a batch of 1 if it runs within the
        SLO and within the gap between requests (the artifact's low-rate case). None if none
        does. Without a search (``batch_sizes`` None) the configured size, checked against the
        SLO only."""
        assert svc.service is not None
        slo = svc.service.slo_ms
        if self.batch_sizes is None:
            ok = self.service_ok(view, svc, gpu, mode, pct, others, part=part)
            return svc.service.batch_size if ok else None
        rps = max(svc.service.peak_rps, svc.rps)
        best: int | None = None
        for b in sorted({*self.batch_sizes, svc.service.batch_size}):
            batch_ms, p99 = self.service_latency(view, svc, gpu, mode, pct, others, b, part)
            fill_ms = 1000.0 * b / rps if rps > 0 else math.inf
            if batch_ms > fill_ms or batch_ms + fill_ms > slo or p99 > self.slo_margin * slo:
                continue
            best = b
        if best is None:
            batch_ms, p99 = self.service_latency(view, svc, gpu, mode, pct, others, 1, part)
            gap_ms = 1000.0 / rps if rps > 0 else math.inf
            if batch_ms < min(gap_ms, slo) and p99 <= self.slo_margin * slo:
                best = 1
        return best

    def service_duty(
        self, view: ClusterView, svc: JobView, gpu: int, batch: int | None = None
    ) -> float:
        """SM activity of ``svc`` at peak on a whole ``gpu`` with batch size ``batch`` (default:
        the one it runs with)."""
        assert svc.service is not None
        b = batch or svc.batch_size or svc.service.batch_size
        rps = max(svc.service.peak_rps, svc.rps)
        return min(1.0, rps * view.profile_latency_ms(svc.model, view.type_name[gpu], b) / 1e3 / b)

    def loads(self, view: ClusterView, gpu: int) -> list[tuple[JobView, Load]]:
        out = []
        where = {j: (k, pct) for k, (pct, ids) in enumerate(view.gpulets(gpu)) for j in ids}
        for r in view.residents(gpu):
            duty = self.service_duty(view, r, gpu) if r.online else ZOO[r.model].duty
            part, pct = where.get(r.job_id, (-1, 100))
            occ = 0.0
            if part >= 0 and r.online:
                assert r.service is not None
                b = r.batch_size or r.service.batch_size
                occ = self.occupancy(view, r.model, gpu, pct, duty, b)
            out.append((r, Load(r.model, duty, r.online, part, occ)))
        return out

    def occupancy(
        self, view: ClusterView, model: str, gpu: int, pct: int, duty: float, batch: int
    ) -> float:
        """The share of a ``pct`` % gpulet's time a service at SM activity ``duty`` keeps busy:
        its duty over its profiled speed in the gpulet (its batches run that much longer)."""
        return min(1.0, duty / self.partition_speed(view, model, gpu, pct, duty, batch))

    def residents_ok(
        self, view: ClusterView, gpu: int, newcomer: Load, pcts: dict[int, int]
    ) -> bool:
        """Do the services already on ``gpu`` still meet their SLOs with ``newcomer`` added?"""
        mode = SharingMode(int(view.mode[gpu]))
        loads = self.loads(view, gpu)
        for r, me in loads:
            if not r.online:
                continue
            others = [ld for q, ld in loads if q.job_id != r.job_id] + [newcomer]
            pct = pcts.get(r.job_id, 100)
            if not self.service_ok(view, r, gpu, mode, pct, others, part=me.part):
                return False
        return True

    def _resident_pcts(self, view: ClusterView, gpu: int) -> dict[int, int]:
        """Each resident's SM percentage (its gpulet's, with gpulets)."""
        gl = view.gpulets(gpu)
        if gl:
            return {j: pct for pct, ids in gl for j in ids}
        return {r.job_id: view.options[r.option].sm_pct for r in view.residents(gpu)}

    # ------------------------------------------------------------------ decisions
    def decide(self, view: ClusterView) -> Decision | None:
        self._wait = False
        for job in view.window:
            if job.online:
                d = self.place_service(view, job)
                if d is not None or self._wait:
                    return d  # a plan deploys in order: wait for the gpulet being set up
        for job in view.window:
            if not job.online:
                d = self.place_offline(view, job)
                if d is not None:
                    return d
        return None

    def place_service(self, view: ClusterView, svc: JobView) -> Decision | None:
        """The feasible gpulet that opens the fewest GPUs, spatial first (a split GPU's free
        gpulet, then temporal sharing of a whole-GPU gpulet; on a new GPU the smallest
        partition), with the batch size :meth:`choose_batch` picks for it."""
        mask = view.mask(svc.job_id)
        opts = view.options
        assert svc.service is not None
        best: tuple[tuple[float, ...], int, int, int] | None = None
        gpulets_on = any(opt.gpulet for opt in opts)
        for g in range(view.n_gpus):
            empty = view.n_res[g] == 0
            hosts_services = view.online_count[g] > 0
            if not (empty or hosts_services):
                continue  # GPUs running only offline work are not inference gpulets
            loads = [ld for _, ld in self.loads(view, g)]
            speed = -view.solo_speed(svc.model, g)
            pcts = self._resident_pcts(view, g)
            gl = view.gpulets(g)
            pending = not empty and not bool(view.ready[g])
            for o, opt in enumerate(opts):
                if not (self._pending_ok(view, svc, g, opt, pcts) if pending else mask[g, o]):
                    continue
                pct, part = opt.sm_pct, -1
                if opt.mode is SharingMode.MPS and opt.gpulet:
                    # temporal sharing inside the GPU's k-th gpulet (gpulets on)
                    part = opt.gpulet - 1
                    pct = gl[part][0]
                    tier, size = 1, pct
                elif opt.mode is SharingMode.MPS:
                    n_gl = len(gl) if gpulets_on else view.n_res[g]
                    if not empty and n_gl >= self.max_gpulets:
                        continue  # the GPU is already split in its gpulets
                    part = len(gl) if gpulets_on else -1
                    # a partial gpulet first; a whole GPU as an MPS partition after a temporal one
                    tier, size = (0 if opt.sm_pct < 100 else 2), opt.sm_pct
                elif opt.mode is SharingMode.TIME_SHARING:
                    tier, size = 1, 100  # temporal sharing inside a whole-GPU gpulet
                elif opt.mode is SharingMode.EXCLUSIVE:
                    tier, size = 3, 101  # a whole GPU nobody may share: last
                else:
                    continue
                b = self.choose_batch(view, svc, g, opt.mode, pct, loads, part)
                if b is None:
                    continue
                duty = self.service_duty(view, svc, g, b)
                occ = self.occupancy(view, svc.model, g, pct, duty, b) if part >= 0 else 0.0
                me = Load(svc.model, duty, True, part, occ)
                if not empty and not self.residents_ok(view, g, me, pcts):
                    continue
                key = (float(empty), float(tier), float(size), speed, float(g))
                if best is None or key < best[0]:
                    best = (key, g, o, b)
        if best is None:  # nothing meets the SLO: the fastest empty GPU, whole
            return self._fastest_whole(view, svc)
        if not view.ready[best[1]]:
            self._wait = True  # its gpulet is being set up (a plan's earlier split): wait for it
            return None
        batch = best[3] if self.batch_sizes is not None else 0
        return Decision(svc.job_id, best[1], best[2], batch_size=batch)

    def _pending_ok(
        self, view: ClusterView, svc: JobView, gpu: int, opt: PlacementOption, pcts: dict[int, int]
    ) -> bool:
        """Would (``gpu``, ``opt``) be legal for ``svc`` once ``gpu`` has finished the
        reconfiguration an earlier placement of this plan started? GPULet plans the whole set
        of models before deploying (the paper's Sec. 4), so a GPU split for one model offers its
        second gpulet to the next at once; the simulator's legality mask hides a GPU while its
        mode changes, so the plan checks the same rules itself: the GPU's mode, partitions
        summing to at most 100 %, the resident limit and declared memory (with gpulets: the
        partition to join exists, or a new one is within the GPU's gpulets)."""
        if opt.mode is not SharingMode(int(view.mode[gpu])) or opt.mode is SharingMode.EXCLUSIVE:
            return False
        if view.n_res[gpu] >= view.max_residents:
            return False
        if view.mem_used_gb[gpu] + svc.mem_gb > view.mem_cap_gb[gpu]:
            return False
        if svc.gpu_types and view.type_name[gpu] not in svc.gpu_types:
            return False
        if opt.mode is not SharingMode.MPS:
            return True
        gl = view.gpulets(gpu)
        if opt.gpulet:
            return opt.gpulet <= len(gl)
        if gl:
            n_max = sum(1 for o in view.options if o.gpulet)
            return len(gl) < n_max and opt.sm_pct + sum(p for p, _ in gl) <= 100
        return opt.sm_pct + sum(pcts.values()) <= 100

    def place_offline(self, view: ClusterView, job: JobView) -> Decision | None:
        """Empty GPUs first; then what inference gpulets leave, if every SLO still holds."""
        d = self._fastest_whole(view, job)
        if d is not None or job.num_gpus > 1:
            return d
        mask = view.mask(job.job_id)
        opts = view.options
        me = Load(job.model, ZOO[job.model].duty, False)
        best: tuple[tuple[float, ...], int, int] | None = None
        for g in map(int, np.flatnonzero(np.asarray(view.online_count) > 0)):
            pcts = self._resident_pcts(view, g)
            online_duty = sum(float(ld.duty) for r, ld in self.loads(view, g) if r.online)
            for o, opt in enumerate(opts):
                if not mask[g, o] or opt.mode not in (SharingMode.MPS, SharingMode.TIME_SHARING):
                    continue
                if opt.gpulet:
                    continue  # offline work fills leftover partitions, never a service's gpulet
                if not self.residents_ok(view, g, me, pcts):
                    continue
                left = (
                    opt.sm_pct / 100.0
                    if opt.mode is SharingMode.MPS
                    else max(0.0, 1.0 - online_duty)
                )
                key = (-left * view.solo_speed(job.model, g), float(g))
                if best is None or key < best[0]:
                    best = (key, g, o)
        return Decision(job.job_id, best[1], best[2]) if best else None

    def _fastest_whole(self, view: ClusterView, job: JobView) -> Decision | None:
        """Run alone: an exclusive GPU, the fastest for the model (lowest index on ties)."""
        return fastest_exclusive(view, job)
