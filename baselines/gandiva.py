"""Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning",
OSDI'18): time-slicing, packing by profiled utilisation and introspective migration.

Mechanisms implemented:

* **Time-slicing.** Every job (gangs too) is placed with the time-sharing option, so GPUs stay
  open to co-runners. When the cluster is oversubscribed (no GPU the job packs onto and no empty
  GPU) the job is still admitted onto the least-loaded GPU as long as the summed profiled duty
  stays within ``max_ts_load``: jobs take turns (the paper's suspend-resume time-slicing), so a
  new job starts early instead of queueing behind long ones.
* **Packing by profiled utilisation.** A job joins an occupied GPU when the residents' profiled
  duties plus its own sum to at most ``pack_limit`` (1.0: they fit in one GPU's time). Duty is
  the model's profiled solo GPU utilisation (``gpu_sharing_env.physics.zoo``, public profiles); an online
  service's duty is its peak request rate times its profiled batch latency. Best fit: the fullest
  GPU that still fits, keeping empty GPUs for the jobs that need one.
* **Introspective migration.** At every decision point each shared GPU is introspected: its
  observed utilisation (nvidia-smi) divided by the summed duty estimates of its residents is
  their mean normalised progress rate (exact when they share evenly). Below ``hurt_ratio`` the
  packing hurts (oversubscribed, or an online service's load moved); if an empty GPU the job may
  use exists, the offline resident with the most estimated remaining work migrates there (a
  decision about a running job: it checkpoints, pauses ``sharing.migration_s`` and keeps its
  progress). A job migrates at most once per ``cooldown_s`` and jobs that are nearly done
  (< ``min_remaining_s`` estimated) are not moved.

Simplified: the paper profiles mini-batch times of packed jobs after the fact; here the
observable is GPU utilisation against profiled duty (the job views' ``work_done`` is only as
fresh as the last rate change, too coarse for per-job rates). Gang jobs count as "empty" only on
whole empty GPUs of one node (the paper's affinity); they are never migrated; the paper's
grow-shrink and locality-driven migrations are not modelled. The runner only consults a policy
when some queued job is placeable, so introspection runs at those points (arrivals,
completions with a non-empty queue). Through the Gymnasium action codec (``act``), which cannot
encode migrations, Gandiva only places. Without a time-sharing option in the scenario it falls
back to MPS at 100 % SM (the simulator's closest duty-driven sharing).
"""

from __future__ import annotations

import numpy as np

from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy


def shared_option(view: ClusterView) -> int | None:
    """The time-sharing option, else MPS at the largest SM share, else None."""
    ts = [i for i, o in enumerate(view.options) if o.mode is SharingMode.TIME_SHARING]
    if ts:
        return ts[0]
    mps = [i for i, o in enumerate(view.options) if o.mode is SharingMode.MPS]
    return max(mps, key=lambda i: view.options[i].sm_pct) if mps else None


def exclusive_option(view: ClusterView) -> int | None:
    excl = [i for i, o in enumerate(view.options) if o.mode is SharingMode.EXCLUSIVE]
    return excl[0] if excl else None


def est_duty(view: ClusterView, job: JobView, gpu: int, peak: bool = True) -> float:
    """A job's GPU-time demand in (0, 1] from public profiles.

    Offline jobs: the model's profiled duty. Online services: request rate (the spec's peak, or
    the currently observed rate with ``peak=False``) times the profiled batch latency on
    ``gpu``'s type, per request.
    """
    if job.service is None:
        return ZOO[job.model].duty
    svc = job.service
    rps = svc.peak_rps if peak else job.rps
    lat_ms = view.profile_latency_ms(job.model, view.type_name[gpu], svc.batch_size)
    return min(1.0, max(0.02, rps * lat_ms / 1000.0 / svc.batch_size))


def gpu_load(view: ClusterView, gpu: int, peak: bool = True) -> float:
    """Summed duty estimates of ``gpu``'s residents."""
    return sum(est_duty(view, r, gpu, peak) for r in view.residents(gpu))


def gang_start(view: ClusterView, job: JobView, col: np.ndarray) -> int | None:
    """First GPU of a whole-GPU gang placement from a legal mask column: prefer a start whose
    ``num_gpus`` GPUs are consecutive, empty and on one node; else the first legal start."""
    starts = np.flatnonzero(col)
    if not starts.size:
        return None
    for g in starts:
        if one_node_empty(view, int(g), job.num_gpus):
            return int(g)
    return int(starts[0])


def one_node_empty(view: ClusterView, start: int, n: int) -> bool:
    """GPUs ``start .. start+n-1`` exist, are empty and sit on one node."""
    span = range(start, start + n)
    return span.stop <= view.n_gpus and all(
        view.n_res[g] == 0 and view.node_of[g] == view.node_of[start] for g in span
    )


def gang_gpus(col: np.ndarray, start: int, n: int) -> list[int]:
    """The GPUs a placement at ``start`` takes, read off the legal mask column: the first ``n``
    legal starts from ``start`` (exact unless the gang reaches the last ``n - 1`` individually
    legal GPUs, which the gang mask hides; then the visible ones)."""
    if n == 1 and col[start]:
        return [start]  # (the common case, without a scan)
    return [int(g) for g in np.flatnonzero(col[start:])[:n] + start]


class Gandiva(HeuristicPolicy):
    """Gandiva: time-slice, pack by profiled duty, migrate when packing hurts.

    Args:
        pack_limit: Largest summed duty of a packed GPU.
        max_ts_load: Largest summed duty when time-slicing an oversubscribed cluster.
        hurt_ratio: Observed utilisation / summed duty below which packing hurts.
        cooldown_s: Least time between two migrations of one job.
        min_remaining_s: Jobs with less estimated remaining work are not migrated.
    """

    name = "gandiva"

    def __init__(
        self,
        pack_limit: float = 1.0,
        max_ts_load: float = 2.0,
        hurt_ratio: float = 0.8,
        cooldown_s: float = 1800.0,
        min_remaining_s: float = 300.0,
    ) -> None:
        self.pack_limit = pack_limit
        self.max_ts_load = max_ts_load
        self.hurt_ratio = hurt_ratio
        self.cooldown_s = cooldown_s
        self.min_remaining_s = min_remaining_s
        self._migrated_at: dict[int, float] = {}

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self._migrated_at = {}

    def decide(self, view: ClusterView) -> Decision | None:
        return self.migration(view) or self.placement(view)

    def env_decision(self, view: ClusterView) -> Decision | None:
        # The action codec encodes placements of queued jobs only.
        return self.placement(view)

    # ------------------------------------------------------------------ introspection
    def hurting(self, view: ClusterView, gpu: int) -> bool:
        """Whether packing on ``gpu`` hurts: observed utilisation well below summed duty."""
        if view.n_res[gpu] < 2:
            return False
        demand = gpu_load(view, gpu, peak=False)
        return float(view.util[gpu]) < self.hurt_ratio * demand

    def migration(self, view: ClusterView) -> Decision | None:
        """Move one job off a GPU where packing hurts onto an empty GPU, if any."""
        opt = shared_option(view)
        empty = np.flatnonzero((np.asarray(view.n_res) == 0) & np.asarray(view.ready))
        if opt is None or not empty.size:
            return None
        hurt = [g for g in range(view.n_gpus) if self.hurting(view, g)]
        # Worst first: the lowest observed progress per unit of demand.
        hurt.sort(key=lambda g: float(view.util[g]) / max(gpu_load(view, g, False), 1e-9))
        for g in hurt:
            movable = [
                r
                for r in view.residents(g)
                if not r.online
                and r.num_gpus == 1
                and r.est_remaining_s >= self.min_remaining_s
                and view.now_s - self._migrated_at.get(r.job_id, -np.inf) >= self.cooldown_s
            ]
            movable.sort(key=lambda r: (-r.est_remaining_s, r.job_id))
            for r in movable:
                # Its legal destinations (its own residency only affects the GPU it leaves):
                # none while it is still setting up (moved at this instant by another policy,
                # e.g. a planner's rollout handing over from a candidate to this base).
                legal = view.migration_mask(r.job_id)[:, opt]
                targets = [int(t) for t in empty if legal[t] and t != g]
                if targets:
                    t = max(targets, key=lambda t: (view.solo_speed(r.model, t), -t))
                    self._migrated_at[r.job_id] = view.now_s
                    return Decision(r.job_id, t, opt)
        return None

    # ------------------------------------------------------------------ placement
    def placement(self, view: ClusterView) -> Decision | None:
        """The first window job (queue order) that packs, gets empty GPUs or time-slices."""
        opt = shared_option(view)
        if opt is None:
            return None
        for job in view.window:
            g = self._choose(view, job, view.mask(job.job_id)[:, opt])
            if g is not None:
                return Decision(job.job_id, g, opt)
        return None

    def _choose(self, view: ClusterView, job: JobView, col: np.ndarray) -> int | None:
        n = job.num_gpus
        load: dict[int, float] = {}
        cands: list[tuple[int, float, bool, float]] = []  # start, peak load after, empty, speed
        for start in np.flatnonzero(col):
            gpus = gang_gpus(col, int(start), n)
            for g in gpus:
                if g not in load:
                    load[g] = gpu_load(view, g)
            after = max(load[g] + est_duty(view, job, g) for g in gpus)
            empty = all(view.n_res[g] == 0 for g in gpus)
            if n > 1:  # gangs: whole empty GPUs on one node count as empty (affinity)
                empty = one_node_empty(view, int(start), n)
            speed = min(view.solo_speed(job.model, g) for g in gpus)
            cands.append((int(start), after, empty, speed))
        if not cands:
            return None
        # 1. Pack (best fit): occupied GPUs the job fits into by profiled duty.
        packs = [c for c in cands if not c[2] and c[1] <= self.pack_limit + 1e-9]
        if packs:
            return max(packs, key=lambda c: (c[1], c[3], -c[0]))[0]
        # 2. Empty GPUs, the fastest for the model.
        free = [c for c in cands if c[2]]
        if free:
            return max(free, key=lambda c: (c[3], -c[0]))[0]
        # 3. Oversubscribed: time-slice on the least-loaded GPUs.
        slices = [c for c in cands if c[1] <= self.max_ts_load + 1e-9]
        if slices:
            return min(slices, key=lambda c: (c[1], -c[3], c[0]))[0]
        return None
