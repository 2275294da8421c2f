"""Observation encoding of ``GpuSharing-v1``: v0's tables, widened, plus placement options and
job × GPU pairs, so that one network can score any scenario's actions.

Five keys, each the row-major flattening of a (rows, features) table:

* ``"gpus"``: ``max_gpus × len(GPU_FEATURES_V1)``: v0's columns, then the estimated time until
  the GPU is free and until its first resident leaves, its resource-guarantee residents, the
  load of its online residents and the profiled demand of its offline ones.
* ``"jobs"``: ``max_window × len(JOB_FEATURES_V1)``: v0's columns, then whether the job is a
  resource-guarantee job, its profiled GPU-time demand, its estimated remaining work, its
  predicted duration on its fastest GPU and the rank of that duration in the window.
* ``"global"``: v0's values, then statistics of the queue beyond the window, running jobs,
  the soonest time a GPU frees up and the share of the window that can be placed.
* ``"options"``: ``max_options × len(OPTION_FEATURES)``: each placement option described by
  its features (mode one-hot, MPS SM share, MIG compute and memory slices), so a network's
  weights do not depend on which options a scenario offers or in what order.
* ``"pairs"``: ``max_window × max_gpus × len(PAIR_FEATURES)``: per (window job, first GPU):
  whether any option is legal, the profiled solo speed, the speed relative to the job's fastest
  GPU type, the predicted time share, the predicted rate and the predicted duration there.

Rows past the cluster's GPUs, the window's jobs or the scenario's options are zero (their
``present``/``legal`` feature is 0). Every quantity is computed from what a scheduler can see:
estimates (``est_work_s``), observed progress and utilisation, and public profiles (solo
speeds, duties); never the true durations. The time a resident still needs is its estimated
remaining work over its current rate; a job past its estimate is assumed to need a tenth of
its estimate more (the estimate's error is unknown to the scheduler).
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from gpu_sharing_env.envs.observation import (
    GLOBAL_FEATURES,
    GPU_FEATURES,
    JOB_FEATURES,
    LOG_COUNT_SCALE,
    LOG_GANG_SCALE,
    LOG_WAIT_SCALE,
    ObservationEncoder,
)
from gpu_sharing_env.hardware import GPU_TYPES, MIG_COMPUTE_SLICES, MIG_MEM_SLICES
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.zoo import ZOO

#: log10 normaliser of times until free and predicted durations: 10^6 s (~11.6 days) maps to 1.
LOG_TIME_SCALE = LOG_WAIT_SCALE
#: log10 normaliser of summed estimated work beyond the window: 10^8 s maps to 1.
LOG_QUEUE_WORK_SCALE = 8.0
#: Solo speeds (relative to a V100) are divided by this and clipped (an H100 runs ~3-4x).
SPEED_SCALE = 4.0
#: Summed profiled demand of a GPU's offline residents is divided by this and clipped.
DUTY_SCALE = 4.0
#: Queued GPU demand beyond the window, in cluster sizes, is divided by this and clipped.
QUEUE_GPU_SCALE = 4.0
#: A job that ran past its estimate is assumed to need this fraction of the estimate more.
OVERRUN_FRACTION = 0.1

GPU_FEATURES_V1: tuple[str, ...] = (
    *GPU_FEATURES,
    "free_in",
    "next_free_in",
    "guarantee_res",
    "online_load",
    "offline_duty",
)
JOB_FEATURES_V1: tuple[str, ...] = (
    *JOB_FEATURES,
    "guarantee",
    "duty",
    "est_remaining",
    "pred_duration",
    "duration_rank",
)
GLOBAL_FEATURES_V1: tuple[str, ...] = (
    *GLOBAL_FEATURES,
    "beyond_jobs",
    "beyond_work",
    "beyond_gpus",
    "beyond_min_duration",
    "queue_guarantee",
    "queue_gang_max",
    "running_offline",
    "soonest_free_in",
    "window_placeable",
)
OPTION_FEATURES: tuple[str, ...] = (
    "present",
    "opt_exclusive",
    "opt_time_sharing",
    "opt_mps",
    "opt_mig",
    "sm_share",
    "mig_compute",
    "mig_mem",
)
PAIR_FEATURES: tuple[str, ...] = (
    "legal",
    "speed",
    "speed_rel",
    "share",
    "pred_rate",
    "pred_duration",
    "fits_mem",
)
#: Keys of a v1 observation, in the order networks concatenate them.
KEYS_V1 = ("gpus", "jobs", "global", "options", "pairs")

_MODE_OPT = {
    SharingMode.EXCLUSIVE: 1,
    SharingMode.TIME_SHARING: 2,
    SharingMode.MPS: 3,
    SharingMode.MIG: 4,
}


def observation_space_v1(max_gpus: int, window: int, n_options: int) -> spaces.Dict:
    """The v1 observation space for a padded GPU count, queue window and option count."""

    def box(n: int, low: float = 0.0) -> spaces.Box:
        return spaces.Box(low=low, high=1.0, shape=(n,), dtype=np.float32)

    return spaces.Dict(
        {
            "gpus": box(max_gpus * len(GPU_FEATURES_V1)),
            "jobs": box(window * len(JOB_FEATURES_V1)),
            "global": box(len(GLOBAL_FEATURES_V1), low=-1.0),
            "options": box(n_options * len(OPTION_FEATURES)),
            "pairs": box(window * max_gpus * len(PAIR_FEATURES)),
        }
    )


def layout_v1(space: spaces.Dict) -> tuple[int, int, int]:
    """(max_gpus, window, n_options) of a v1 observation space; ValueError if it is not one."""
    try:
        n = {k: int(space[k].shape[0]) for k in KEYS_V1}  # type: ignore[index]
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"observation space is not GpuSharing-v1's (no {e})") from None
    if (
        n["gpus"] % len(GPU_FEATURES_V1)
        or n["jobs"] % len(JOB_FEATURES_V1)
        or n["options"] % len(OPTION_FEATURES)
        or n["global"] != len(GLOBAL_FEATURES_V1)
    ):
        raise ValueError("observation space: feature layout differs from GpuSharing-v1's")
    g = n["gpus"] // len(GPU_FEATURES_V1)
    w = n["jobs"] // len(JOB_FEATURES_V1)
    if n["pairs"] != w * g * len(PAIR_FEATURES):
        raise ValueError("observation space: pairs do not match the gpus and jobs tables")
    return g, w, n["options"] // len(OPTION_FEATURES)


def _log_norm(x: float, scale: float) -> float:
    return min(1.0, math.log10(1.0 + max(0.0, x)) / scale)


def _mig_mem_slices(compute: int) -> int:
    """Memory slices of the smallest MIG profile with ``compute`` compute slices (A100/H100
    geometry, NVIDIA MIG User Guide): 1g -> 1, 2g -> 2, 3g -> 4, 4g -> 4, 7g -> 8."""
    for gt in GPU_TYPES.values():
        sizes = [p.mem_slices for p in gt.mig_profiles if p.compute_slices == compute]
        if sizes:
            return min(sizes)
    return 0


def option_table(sim: Simulator, max_options: int) -> np.ndarray:
    """The ``options`` table (``max_options × len(OPTION_FEATURES)``, float32)."""
    out = np.zeros((max_options, len(OPTION_FEATURES)), dtype=np.float32)
    for i, o in enumerate(sim.options):
        out[i, 0] = 1.0
        out[i, _MODE_OPT[o.mode]] = 1.0
        out[i, 5] = o.sm_pct / 100.0 if o.mode is SharingMode.MPS else 1.0
        if o.mode is SharingMode.MIG:
            out[i, 6] = o.mig_slices / MIG_COMPUTE_SLICES
            out[i, 7] = _mig_mem_slices(o.mig_slices) / MIG_MEM_SLICES
        else:
            out[i, 6] = out[i, 7] = 1.0
    return out


def guarantee(spec: JobSpec) -> bool:
    """A resource-guarantee job (AntMan's class): an online service or a prioritised job."""
    return spec.online or spec.priority > 0


def time_left_s(st: JobState, now: float) -> float:
    """Estimated seconds until a running job leaves its GPUs (module doc), from the estimate,
    its observed progress and its current rate."""
    spec = st.spec
    if spec.online:
        return max(0.0, spec.submit_s + spec.est_work_s - now)
    t0 = max(st.last_t, st.setup_until)
    done = st.work_done + (st.rate * (now - t0) if now > t0 else 0.0)
    left = spec.est_work_s - done
    if left <= 0.0:
        left = OVERRUN_FRACTION * spec.est_work_s
    setup = max(0.0, st.setup_until - now)
    return setup + left / max(st.rate, 1e-6)


class ObservationEncoderV1:
    """Encodes one simulator's state for ``GpuSharing-v1`` (module doc).

    Args:
        sim: The simulator (its cluster layout is fixed for the encoder's lifetime).
        max_gpus: Padded GPU count (>= the cluster's size).
        max_window: Padded queue window (>= the scenario's ``queue_window``); None: the window.
        max_options: Padded option count (>= the scenario's options); None: the options.
    """

    def __init__(
        self,
        sim: Simulator,
        max_gpus: int,
        max_window: int | None = None,
        max_options: int | None = None,
    ) -> None:
        self.base = ObservationEncoder(sim, max_gpus)
        self.max_gpus = max_gpus
        self.window = sim.window if max_window is None else int(max_window)
        self.n_options = len(sim.options) if max_options is None else int(max_options)
        if self.window < sim.window or self.n_options < len(sim.options):
            raise ValueError(
                f"max_window/max_options: must be >= the scenario's {sim.window} and "
                f"{len(sim.options)} (got {self.window} and {self.n_options})"
            )
        self.space = observation_space_v1(max_gpus, self.window, self.n_options)
        self._options = option_table(sim, self.n_options)
        c = sim.cluster
        self._type_names = tuple(c.type_names)
        self._type_idx = np.asarray(c.type_idx)
        self._speed: dict[tuple[str, tuple[str, ...]], tuple[np.ndarray, float]] = {}

    def reset(self) -> None:
        """Forget per-episode caches."""
        self.base.reset()

    # ------------------------------------------------------------------ parts
    def _speeds(self, sim: Simulator, spec: JobSpec) -> tuple[np.ndarray, float]:
        """(solo speed per GPU, the best over the GPU types the job may use)."""
        key = (spec.model, spec.gpu_types)
        hit = self._speed.get(key)
        if hit is None:
            by_type = np.array([sim.solo_speed(spec.model, t) for t in self._type_names])
            allowed = [
                i
                for i, t in enumerate(self._type_names)
                if not spec.gpu_types or t in spec.gpu_types
            ]
            best = float(by_type[allowed].max()) if allowed else float(by_type.max())
            hit = self._speed[key] = (by_type[self._type_idx], max(best, 1e-9))
        return hit

    def _gpu_times(self, sim: Simulator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per GPU: (time until free, time until the first resident leaves, guarantee
        residents), plus online load and offline demand in :meth:`gpus`."""
        c = sim.cluster
        g = c.n_gpus
        now = sim.now
        free_in = np.zeros(g)
        next_in = np.zeros(g)
        extra = np.zeros((3, g))  # guarantee residents, online load, offline duty
        jobs = sim.jobs
        for i, res in enumerate(c.residents):
            if not res:
                continue
            lo, hi = math.inf, 0.0
            for jid in res:
                st = jobs[jid]
                t = time_left_s(st, now)
                hi = t if t > hi else hi
                lo = t if t < lo else lo
                spec = st.spec
                if guarantee(spec):
                    extra[0, i] += 1.0
                if spec.online:
                    extra[1, i] += st.duty
                else:
                    extra[2, i] += ZOO[spec.model].duty
            free_in[i], next_in[i] = hi, lo
        return free_in, next_in, extra

    def encode(self, sim: Simulator) -> dict[str, np.ndarray]:
        """The current v1 observation of ``sim`` (fresh arrays every call)."""
        base = self.base
        window = sim.window_jobs()
        c = sim.cluster
        g = c.n_gpus
        n_g0, n_j0 = len(GPU_FEATURES), len(JOB_FEATURES)

        # --- GPUs: v0's table, widened
        free_in, next_in, extra = self._gpu_times(sim)
        gpus = np.zeros((self.max_gpus, len(GPU_FEATURES_V1)), dtype=np.float32)
        gpus[:, :n_g0] = base.gpus(sim).reshape(self.max_gpus, n_g0)
        log_t = np.log10(1.0 + free_in) / LOG_TIME_SCALE
        gpus[:g, n_g0] = np.minimum(1.0, log_t)
        gpus[:g, n_g0 + 1] = np.minimum(1.0, np.log10(1.0 + next_in) / LOG_TIME_SCALE)
        gpus[:g, n_g0 + 2] = np.minimum(1.0, extra[0] / max(1, c.sharing.max_residents))
        gpus[:g, n_g0 + 3] = np.minimum(1.0, extra[1])
        gpus[:g, n_g0 + 4] = np.minimum(1.0, extra[2] / DUTY_SCALE)

        # --- window jobs and pairs
        jobs = np.zeros((self.window, len(JOB_FEATURES_V1)), dtype=np.float32)
        jobs[: sim.window, :n_j0] = base.jobs(sim, window).reshape(sim.window, n_j0)
        pairs = np.zeros((self.window, self.max_gpus, len(PAIR_FEATURES)), dtype=np.float32)
        n = len(window)
        pred: list[float] = []
        if n:
            # per window job (rows), then every (job, GPU) pair at once: one numpy pass per
            # feature for the whole window, not per job
            speed = np.empty((n, g))
            best = np.empty((n, 1))
            duty = np.empty((n, 1))
            remaining = np.empty((n, 1))
            mem = np.empty((n, 1))
            legal = np.empty((n, g), dtype=bool)
            for k, spec in enumerate(window):
                st = sim.jobs[spec.job_id]
                speed[k], b = self._speeds(sim, spec)
                d = ZOO[spec.model].duty if not spec.online else max(st.duty, 0.05)
                left = max(0.0, spec.est_work_s - st.work_done)
                dur = left / b
                pred.append(dur)
                best[k], duty[k], remaining[k], mem[k] = b, d, left, spec.mem_gb
                legal[k] = sim.mask(spec.job_id).any(axis=1)
                row = jobs[k]
                row[n_j0] = guarantee(spec)
                row[n_j0 + 1] = min(1.0, d)
                row[n_j0 + 2] = _log_norm(left, LOG_TIME_SCALE)
                row[n_j0 + 3] = _log_norm(dur, LOG_TIME_SCALE)
            idle = np.maximum(1.0 - np.asarray(sim.gpu_util, dtype=np.float64), 0.0)
            free_mem = c.mem_cap - c.mem_decl
            share = np.minimum(1.0, idle / np.maximum(duty, 1e-3))
            rate = speed * share
            p = pairs[:n, :g]
            p[..., 0] = legal
            p[..., 1] = np.minimum(1.0, speed / SPEED_SCALE)
            p[..., 2] = np.minimum(1.0, speed / best)  # (> 1 only on GPUs it may not use)
            p[..., 3] = share
            p[..., 4] = np.minimum(1.0, rate / best)
            p[..., 5] = np.minimum(
                1.0, np.log10(1.0 + remaining / np.maximum(rate, 1e-3)) / LOG_TIME_SCALE
            )
            p[..., 6] = free_mem >= mem - 1e-9
            ranks = np.argsort(np.argsort(np.asarray(pred), kind="stable"), kind="stable")
            jobs[:n, n_j0 + 4] = ranks / max(1, self.window - 1)

        # --- global: v0's values, then the queue beyond the window
        beyond = [sim.jobs[jid] for _, jid in sim.queue[sim.window :]]
        queued = [sim.jobs[jid].spec for _, jid in sim.queue]
        b_work = [max(0.0, st.spec.est_work_s - st.work_done) for st in beyond]
        b_gpus = sum(st.spec.num_gpus * st.spec.gpu_frac for st in beyond)
        running_offline = sim.offline_in_system - sum(not s.online for s in queued)
        busy = next_in[np.asarray(c.n_res) > 0]
        placeable = sum(bool(sim.placeable(s.job_id)) for s in window)
        extra_global = np.array(
            [
                _log_norm(len(beyond), LOG_COUNT_SCALE),
                _log_norm(sum(b_work), LOG_QUEUE_WORK_SCALE),
                min(1.0, b_gpus / g / QUEUE_GPU_SCALE),
                _log_norm(min(b_work), LOG_TIME_SCALE) if b_work else 0.0,
                _log_norm(sum(guarantee(s) for s in queued), LOG_COUNT_SCALE),
                min(1.0, math.log2(max(s.num_gpus for s in queued)) / LOG_GANG_SCALE)
                if queued
                else 0.0,
                _log_norm(running_offline, LOG_COUNT_SCALE),
                _log_norm(float(busy.min()), LOG_TIME_SCALE) if busy.size else 0.0,
                placeable / len(window) if window else 0.0,
            ],
            dtype=np.float32,
        )
        glob = np.concatenate([base.global_(sim, window), extra_global])
        return {
            "gpus": gpus.ravel(),
            "jobs": jobs.ravel(),
            "global": glob,
            "options": self._options.ravel().copy(),
            "pairs": pairs.ravel(),
        }


__all__ = [
    "GLOBAL_FEATURES_V1",
    "GPU_FEATURES_V1",
    "JOB_FEATURES_V1",
    "KEYS_V1",
    "OPTION_FEATURES",
    "PAIR_FEATURES",
    "ObservationEncoderV1",
    "guarantee",
    "layout_v1",
    "observation_space_v1",
    "option_table",
    "time_left_s",
]
