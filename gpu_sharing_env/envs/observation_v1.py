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

With migration slots (the env's ``migration_slots = k``), ``"jobs"`` and ``"pairs"`` have
``max_window + k`` rows, the candidates' (``Simulator.migration_candidates``) after the window's,
and every ``"jobs"`` row two more columns (:data:`MOVE_FEATURES`).

Rows past the cluster's GPUs, the window's jobs or the scenario's options are zero (their
``present``/``legal`` feature is 0). Every quantity is computed from what a scheduler can see:
estimates (``est_work_s``), observed progress and utilisation, and public profiles (solo
speeds, duties); never the true durations. The time a resident still needs is its estimated
remaining work over its current rate; a job past its estimate is assumed to need a tenth of
its estimate more (the estimate's error is unknown to the scheduler).
"""

from __future__ import annotations

import math
import weakref
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.envs.observation import (
    GLOBAL_FEATURES,
    GPU_FEATURES,
    JOB_FEATURES,
    LOG_COUNT_SCALE,
    LOG_GANG_SCALE,
    LOG_WAIT_SCALE,
    ObservationEncoder,
    static_job_values,
)
from gpu_sharing_env.fleet.cluster import Cluster, _no_views
from gpu_sharing_env.physics.hardware import GPU_TYPES, MIG_COMPUTE_SLICES, MIG_MEM_SLICES
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Simulator

if cython.compiled:  # the extension type (state.pxd): its float fields read as C doubles
    from cython.cimports.gpu_sharing_env.sim.state import JobState
else:
    from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.workload.job import JobSpec

#: log10 normaliser of times until free and predicted durations: 10^6 s (~11.6 days) maps to 1.
LOG_TIME_SCALE = LOG_WAIT_SCALE
#: Spread of a group's log run times (its standard deviation) that maps to 1: sigma 2 is the
#: whole population's (``SyntheticWorkloadConfig.duration_sigma``).
HIST_SPREAD_SCALE = 2.0
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
#: The ``jobs`` columns added after :data:`JOB_FEATURES_V1` when the env has migration slots
#: (``migration_slots > 0``): whether the row is a running job (a migration candidate; queue
#: rows 0), and its estimated time until it leaves its GPU at its current (shared) rate, the
#: figure a migration would shorten (:func:`time_left_s`).
MOVE_FEATURES: tuple[str, ...] = ("running", "time_left")
#: Columns of the opt-in ``"history"`` table (``GpuSharing-v1`` with ``job_history=True``), one
#: row per job slot: what the cluster's log says about the job's recurring group and user (as
#: ``ClusterView.group_stats``): its group tag and user hashed to [0, 1), whether it has a group,
#: the group's finished runs seen, their mean and spread of log run time, the time since the
#: group's last submission and its estimated period (median gap between its submissions). With
#: it comes ``"nodes"``: per GPU row, (node index + 1) / max_gpus (0: padding), so which GPUs
#: share a machine. Only finished runs and past submissions: no truth.
HISTORY_FEATURES: tuple[str, ...] = (
    "group_hash",
    "user_hash",
    "has_group",
    "runs_seen",
    "hist_mean",
    "hist_spread",
    "since_last_submit",
    "period",
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


def job_features_v1(moves: int) -> int:
    """Columns of a v1 ``jobs`` row: :data:`JOB_FEATURES_V1`, and :data:`MOVE_FEATURES` where
    the env has migration slots."""
    return len(JOB_FEATURES_V1) + (len(MOVE_FEATURES) if moves > 0 else 0)


def observation_space_v1(
    max_gpus: int, window: int, n_options: int, moves: int = 0, history: bool = False
) -> spaces.Dict:
    """The v1 observation space for a padded GPU count, queue window and option count, with
    ``moves`` migration slots after the window's (their rows follow the window's), and with
    ``history`` the ``"history"`` and ``"nodes"`` keys (:data:`HISTORY_FEATURES`)."""

    def box(n: int, low: float = 0.0) -> spaces.Box:
        return spaces.Box(low=low, high=1.0, shape=(n,), dtype=np.float32)

    slots = window + moves
    keys: dict[str, spaces.Space[Any]] = {
        "gpus": box(max_gpus * len(GPU_FEATURES_V1)),
        "jobs": box(slots * job_features_v1(moves)),
        "global": box(len(GLOBAL_FEATURES_V1), low=-1.0),
        "options": box(n_options * len(OPTION_FEATURES)),
        "pairs": box(slots * max_gpus * len(PAIR_FEATURES)),
    }
    if history:
        keys["history"] = box(slots * len(HISTORY_FEATURES))
        keys["nodes"] = box(max_gpus)
    return spaces.Dict(keys)


def _hash01(text: str) -> float:
    """A tag hashed to [0, 1) (stable across processes: CRC-32, not ``hash``)."""
    return zlib.crc32(text.encode()) / 2.0**32


def history_row(sim: Simulator, spec: JobSpec) -> list[float]:
    """The :data:`HISTORY_FEATURES` of a job now (zeros without an online predictor)."""
    pred = sim.predictor
    if pred is None or spec.online:
        return [0.0] * len(HISTORY_FEATURES)
    st = pred.group_stats(spec, sim.now)
    since = sim.now - st.last_submit_s
    return [
        _hash01(spec.group) if spec.group else 0.0,
        _hash01(spec.user) if spec.user else 0.0,
        1.0 if spec.group else 0.0,
        _log_norm(st.runs_seen, LOG_COUNT_SCALE),
        min(1.0, max(0.0, st.mean_log_s / math.log(10.0) / LOG_TIME_SCALE))
        if st.runs_seen
        else 0.0,
        min(1.0, st.std_log_s / HIST_SPREAD_SCALE) if st.std_log_s == st.std_log_s else 0.0,
        _log_norm(since, LOG_TIME_SCALE) if since == since else 0.0,
        _log_norm(st.period_s, LOG_TIME_SCALE) if st.period_s == st.period_s else 0.0,
    ]


def layout_v1(space: spaces.Dict) -> tuple[int, int, int]:
    """(max_gpus, job slots, n_options) of a v1 observation space (slots: the window's and any
    migration slots); ValueError if it is not one."""
    g, w, o, _ = layout_v1_columns(space)
    return g, w, o


def layout_v1_columns(space: spaces.Dict) -> tuple[int, int, int, int]:
    """:func:`layout_v1` and the number of ``jobs`` columns (:func:`job_features_v1`)."""
    try:
        n = {k: int(space[k].shape[0]) for k in KEYS_V1}  # type: ignore[index]
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"observation space is not GpuSharing-v1's (no {e})") from None
    if (
        n["gpus"] % len(GPU_FEATURES_V1)
        or n["options"] % len(OPTION_FEATURES)
        or n["global"] != len(GLOBAL_FEATURES_V1)
        or not n["gpus"]
    ):
        raise ValueError("observation space: feature layout differs from GpuSharing-v1's")
    g = n["gpus"] // len(GPU_FEATURES_V1)
    w, rest = divmod(n["pairs"], g * len(PAIR_FEATURES))
    if (
        rest
        or not w
        or n["jobs"] % w
        or n["jobs"] // w not in (job_features_v1(0), job_features_v1(1))
    ):
        raise ValueError("observation space: pairs do not match the gpus and jobs tables")
    return g, w, n["options"] // len(OPTION_FEATURES), n["jobs"] // w


@cython.ccall
@cython.locals(x=cython.double, scale=cython.double)
@cython.returns(cython.double)
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


@cython.ccall
@cython.locals(st=JobState, now=cython.double)
@cython.returns(cython.double)
def time_left_s(st: JobState, now: float) -> float:
    """Estimated seconds until a running job leaves its GPUs (module doc), from the estimate,
    its observed progress and its current rate."""
    spec = st.spec
    return _time_left(st, now, spec.online, spec.est_work_s, spec.submit_s + spec.est_work_s)


@cython.cfunc
@cython.locals(
    now=cython.double, online=cython.bint, est=cython.double, end=cython.double,
    last_t=cython.double, setup_until=cython.double, rate=cython.double, t0=cython.double,
    done=cython.double, left=cython.double, setup=cython.double, st=JobState,
)  # fmt: skip
@cython.returns(cython.double)
def _time_left(st: JobState, now: float, online: bool, est: float, end: float) -> float:
    """:func:`time_left_s` of a job whose spec is online or not, estimates ``est`` seconds of
    work and was submitted ``end - est`` seconds after 0 (``end``: ``submit_s + est_work_s``,
    that sum), read from the encoder's per-job cache (:class:`_Job`) instead of the spec."""
    if online:
        return max(0.0, end - now)
    last_t, setup_until, rate = st.last_t, st.setup_until, st.rate
    t0 = max(last_t, setup_until)
    done = st.work_done + (rate * (now - t0) if now > t0 else 0.0)
    left = est - done
    if left <= 0.0:
        left = OVERRUN_FRACTION * est
    setup = max(0.0, setup_until - now)
    return setup + left / max(rate, 1e-6)


@cython.boundscheck(False)  # (compiled: the shapes are checked first)
@cython.wraparound(False)
@cython.locals(
    m=cython.Py_ssize_t, g=cython.Py_ssize_t, i=cython.Py_ssize_t, j=cython.Py_ssize_t,
    sp=cython.double[:, ::1], pj=cython.double[:, ::1], lr=cython.uchar[:, ::1],
    ut=cython.double[::1], free=cython.double[::1],
    fv=cython.double[:, :, ::1], tv=cython.double[:, ::1], s=cython.double, best=cython.double,
    duty=cython.double, rem=cython.double, mem=cython.double, x=cython.double,
    share=cython.double, rate=cython.double, sps=cython.double, lts=cython.double,
)  # fmt: skip
def pair_features(
    speeds: list[np.ndarray],
    cols: np.ndarray,
    legal_rows: np.ndarray,
    util: np.ndarray,
    mem_cap: np.ndarray,
    mem_decl: np.ndarray,
) -> np.ndarray:
    """The ``pairs`` features (float64, rows x GPUs x ``len(PAIR_FEATURES)``) of the job rows
    whose solo speed per GPU is ``speeds``, whose best speed, duty, estimated work left and
    declared memory are ``cols``' rows (float64, C order) and whose legal GPUs are
    ``legal_rows``, on GPUs with utilisation ``util`` and declared of ``mem_cap`` GPU memory
    ``mem_decl``.

    Interpreted: one numpy pass per feature over every pair. Compiled: one typed loop over the
    pairs, the same IEEE operations on each (numpy's ``maximum``/``minimum``, NaN included),
    and numpy's ``log10`` over the same contiguous array (its SIMD loop is not libm's): the
    same bits (``tests/test_compiled.py`` compares the two modes' observations)."""
    speed = np.array(speeds)
    m, g = speed.shape[0], speed.shape[1]
    if cython.compiled:
        f = np.empty((m, g, len(PAIR_FEATURES)))
        sps, lts = float(SPEED_SCALE), float(LOG_TIME_SCALE)
        sp = speed
        pj = cols
        lr = np.ascontiguousarray(legal_rows).view(np.uint8)
        ut = np.subtract(1.0, util, dtype=np.float64)  # (writable: the simulator's are not)
        free = mem_cap - mem_decl
        if not (
            pj.shape[0] >= m
            and pj.shape[1] >= 4
            and lr.shape[0] >= m
            and lr.shape[1] >= g
            and ut.shape[0] >= g
            and free.shape[0] >= g
        ):
            raise ValueError(
                f"pair_features: {m} rows x {g} GPUs of speeds, but cols {cols.shape}, "
                f"legal_rows {legal_rows.shape}, {util.size} GPUs' util and memory"
            )
        fv = f
        t = np.empty((m, g))
        tv = t
        for i in range(m):
            best = pj[i, 0]
            duty = pj[i, 1]
            rem = pj[i, 2]
            mem = pj[i, 3] - 1e-9
            if not (duty >= 1e-3 or duty != duty):  # np.maximum(duty, 1e-3)
                duty = 1e-3
            for j in range(g):
                s = sp[i, j]
                fv[i, j, 0] = 1.0 if lr[i, j] else 0.0
                x = s / sps
                fv[i, j, 1] = x if (x <= 1.0 or x != x) else 1.0
                x = s / best  # (> 1 only on GPUs it may not use)
                fv[i, j, 2] = x if (x <= 1.0 or x != x) else 1.0
                x = ut[j]
                if not (x >= 0.0 or x != x):
                    x = 0.0
                share = x / duty
                if not (share <= 1.0 or share != share):
                    share = 1.0
                fv[i, j, 3] = share
                rate = s * share
                x = rate if (rate >= 1e-3 or rate != rate) else 1e-3
                tv[i, j] = rem / x + 1.0
                x = rate / best
                fv[i, j, 4] = x if (x <= 1.0 or x != x) else 1.0
                fv[i, j, 6] = 1.0 if free[j] >= mem else 0.0
        np.log10(t, out=t)
        for i in range(m):
            for j in range(g):
                x = tv[i, j] / lts
                fv[i, j, 5] = x if (x <= 1.0 or x != x) else 1.0
    else:
        per_job = np.array(cols)
        best_c = per_job[:, 0:1]
        duty_c = per_job[:, 1:2]
        remaining = per_job[:, 2:3]
        mem_c = per_job[:, 3:4]
        idle = np.subtract(1.0, util, dtype=np.float64)
        np.maximum(idle, 0.0, out=idle)
        free_mem = mem_cap - mem_decl
        ft = np.empty((len(PAIR_FEATURES), m, g))
        ft[0] = legal_rows
        np.divide(speed, SPEED_SCALE, out=ft[1])
        np.divide(speed, best_c, out=ft[2])  # (> 1 only on GPUs it may not use)
        share_t = ft[3]
        np.maximum(duty_c, 1e-3, out=duty_c)
        np.divide(idle, duty_c, out=share_t)
        np.minimum(share_t, 1.0, out=share_t)
        rate_t = ft[4]
        np.multiply(speed, share_t, out=rate_t)
        tt = np.maximum(rate_t, 1e-3)
        np.divide(remaining, tt, out=tt)
        tt += 1.0
        np.log10(tt, out=tt)
        np.divide(tt, LOG_TIME_SCALE, out=ft[5])
        rate_t /= best_c
        np.greater_equal(free_mem, mem_c - 1e-9, out=ft[6])
        np.minimum(ft[1:6], 1.0, out=ft[1:6])
        f = ft.transpose(1, 2, 0)
    return f


#: Fleets from this many GPUs keep the ``gpus`` table's resident columns incrementally
#: (``_ResidentSlots``); smaller ones scan their residents at every step. Raw env steps/s under
#: random legal actions, table against scan (2 cores, 2026-11-27, 2,000 steps, best of 5):
#: ``default`` (12 GPUs) 1,860 / 1,947, ``mig-a100`` (48) 1,726 / 1,818, ``pai-busy`` (226)
#: 1,657 / 1,024. The same bits either way (``tests/test_observation_v1_slots.py``).
SLOTS_MIN_GPUS = 64
#: Slots per GPU to start with (more are added when a GPU holds more residents).
_SLOTS_WIDTH = 4

#: Column of the first v1-only GPU and job feature.
_G1 = len(GPU_FEATURES)
_J1 = len(JOB_FEATURES)
#: Per-step ``jobs`` columns, in :meth:`ObservationEncoderV1.encode`'s order.
_J_STEP_V1 = np.array(
    [JOB_FEATURES_V1.index(f) for f in ("wait", "attempts", "placeable", "duty")]
    + [JOB_FEATURES_V1.index(f) for f in ("est_remaining", "pred_duration", "duration_rank")],
    dtype=np.intp,
)


class _Job:
    """What the encoder reads of a job's spec, cached per job id (checked against the spec
    object, which a simulator may replace)."""

    __slots__ = (
        "best",
        "duty",
        "end",
        "est",
        "gang",
        "guarantee",
        "mem",
        "online",
        "row",
        "share_gpus",
        "spec",
        "speed",
    )

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.online = spec.online
        self.guarantee = guarantee(spec)
        self.duty = ZOO[spec.model].duty
        self.est = spec.est_work_s
        #: ``submit_s + est_work_s``: when an online service's estimate says it leaves.
        self.end = spec.submit_s + spec.est_work_s
        self.gang = spec.num_gpus
        self.share_gpus = spec.num_gpus * spec.gpu_frac
        self.mem = spec.mem_gb
        self.speed: np.ndarray | None = None
        self.best = 0.0
        #: The ``jobs`` row's static columns (float32; built when the job enters the window).
        self.row: np.ndarray | None = None


def _unwatch(cluster: Cluster, sim: Simulator, gpus: set[int], jobs: set[int]) -> None:
    cluster.unwatch(gpus)
    sim.unwatch_jobs(jobs)


class _ResidentSlots:
    """What :func:`time_left_s` and the ``gpus`` table's resident columns read of every GPU's
    residents, one slot per resident in residence order, kept up to date incrementally: a
    GPU's row is rewritten only when its residents changed (``Cluster.watch``) or one of them
    accrued progress or changed rate or load (``Simulator.watch_jobs``). :meth:`times` then
    computes the per-GPU figures of all GPUs at once, with the same IEEE operations in the same
    order as :meth:`ObservationEncoderV1.gpu_times_scan`: the same bits.
    """

    def __init__(self, n_gpus: int) -> None:
        self.n = n_gpus
        self.width = 0
        #: The cluster's ``n_res`` array when the watches were taken (replaced at every reset).
        self._cluster_key: object = None
        self._gpu_watch: set[int] = set()
        self._job_watch: set[int] = set()
        self._unwatch: Callable[[], Any] = lambda: None
        #: Per GPU: guarantee residents, online load and offline duty, summed in residence
        #: order from 0.0 (as the scan adds).
        self.sums = np.zeros((n_gpus, 3))
        self._alloc(_SLOTS_WIDTH)

    def _alloc(self, width: int) -> None:
        n, old = self.n, self.width
        prev = self._cols() if old else None
        self.width = width
        self.valid = np.zeros((n, width), dtype=bool)
        self.online = np.zeros((n, width), dtype=bool)
        self.online_end = np.zeros((n, width))  # submit_s + est_work_s (online residents)
        # offline residents: max(last_t, setup_until), setup_until, work_done, rate,
        # est_work_s, OVERRUN_FRACTION x est_work_s and max(rate, 1e-6)
        self.t0 = np.zeros((n, width))
        self.setup = np.zeros((n, width))
        self.work = np.zeros((n, width))
        self.rate = np.zeros((n, width))
        self.est = np.zeros((n, width))
        self.overrun = np.zeros((n, width))
        self.rate_floor = np.ones((n, width))
        if prev is not None:
            for a, b in zip(self._cols(), prev, strict=True):
                a[:, :old] = b

    def _cols(self) -> tuple[np.ndarray, ...]:
        return (
            self.valid, self.online, self.online_end, self.t0, self.setup, self.work,
            self.rate, self.est, self.overrun, self.rate_floor,
        )  # fmt: skip

    def reset(self) -> None:
        self._cluster_key = None

    @cython.locals(
        g=cython.Py_ssize_t, k=cython.Py_ssize_t, n_res=cython.Py_ssize_t,
        n_g=cython.double, on=cython.double, off=cython.double, last_t=cython.double,
        setup=cython.double, rate=cython.double, est=cython.double,
        online_end=cython.double[:, :], t0=cython.double[:, :], setup_a=cython.double[:, :],
        work=cython.double[:, :], rate_a=cython.double[:, :], floor=cython.double[:, :],
        est_a=cython.double[:, :], overrun=cython.double[:, :],
    )  # fmt: skip
    def _sync(self, sim: Simulator, enc: ObservationEncoderV1) -> None:
        c = sim.cluster
        if self._cluster_key is not c.n_res:  # a new episode: watch it, every row anew
            self._cluster_key = c.n_res
            self._unwatch()  # (the last episode's, or another simulator's)
            self._gpu_watch = c.watch()
            self._job_watch = sim.watch_jobs()
            # The watches end with this table (an encoder made per decision, or one that moves
            # between simulators, leaves none behind to be filled for nothing).
            self._unwatch = weakref.finalize(
                self, _unwatch, c, sim, self._gpu_watch, self._job_watch
            )
            self._unwatch.atexit = False
            dirty: set[int] | range = range(self.n)
        else:
            dirty = self._gpu_watch
            if self._job_watch:
                jobs = sim.jobs
                for jid in self._job_watch:
                    dirty.update(jobs[jid].gpus)
                self._job_watch.clear()
            if not dirty:
                return
        residents, states, job = c.residents, sim.jobs, enc._job
        valid, online, sums = self.valid, self.online, self.sums
        online_end, t0, setup_a, work = self.online_end, self.t0, self.setup, self.work
        rate_a, floor, est_a, overrun = self.rate, self.rate_floor, self.est, self.overrun
        for g in dirty:
            res = residents[g]
            n_res = len(res)
            if n_res > self.width:
                self._alloc(n_res)
                valid, online = self.valid, self.online
                online_end, t0, setup_a, work = self.online_end, self.t0, self.setup, self.work
                rate_a, floor, est_a, overrun = self.rate, self.rate_floor, self.est, self.overrun
            n_g = on = off = 0.0
            for k, jid in enumerate(res):
                st = states[jid]
                spec = st.spec
                info = job(spec)
                if info.online:
                    online[g, k] = True
                    online_end[g, k] = spec.submit_s + spec.est_work_s
                    on += st.serving.duty
                else:
                    online[g, k] = False
                    last_t, setup, rate, est = st.last_t, st.setup_until, st.rate, spec.est_work_s
                    t0[g, k] = last_t if last_t >= setup else setup  # np.maximum's pick
                    setup_a[g, k] = setup
                    work[g, k] = st.work_done
                    rate_a[g, k] = rate
                    floor[g, k] = rate if rate >= 1e-6 else 1e-6
                    est_a[g, k] = est
                    overrun[g, k] = OVERRUN_FRACTION * est
                    off += info.duty
                if info.guarantee:
                    n_g += 1.0
            valid[g, :n_res] = True
            valid[g, n_res:] = False
            sums[g] = (n_g, on, off)
        self._gpu_watch.clear()

    def times(
        self, sim: Simulator, enc: ObservationEncoderV1, out: np.ndarray
    ) -> tuple[np.ndarray, float, int]:
        """:meth:`ObservationEncoderV1.gpu_times_scan`'s result, written into ``out``."""
        self._sync(sim, enc)
        now = sim.now
        valid = self.valid
        # time_left_s, element by element (the same operations in the same order)
        t0 = self.t0
        left = self.est - (self.work + np.where(now > t0, self.rate * (now - t0), 0.0))
        left = np.where(left <= 0.0, self.overrun, left)
        t = np.maximum(0.0, self.setup - now) + left / self.rate_floor
        t = np.where(self.online, np.maximum(0.0, self.online_end - now), t)
        out[:, 0] = np.where(valid, t, 0.0).max(axis=1)
        lo = np.where(valid, t, np.inf).min(axis=1)
        busy = valid[:, 0]  # (residents fill their row's slots from the first)
        out[:, 1] = np.where(busy, lo, 0.0)
        out[:, 2:] = self.sums
        lo = lo[busy]
        return out, (float(lo.min()) if lo.size else math.inf), int(lo.size)


@cython.cclass
class _EncViews:
    """Compiled: typed views of an encoder's own work arrays (they live as long as it does),
    kept instead of a buffer acquisition each per observation. A pickle or deep copy of one is
    None (the copy's encoder builds views of its own arrays)."""

    step = cython.declare(cython.double[:, ::1])
    per_job = cython.declare(cython.double[:, ::1])
    times = cython.declare(cython.double[:, ::1])
    log_in = cython.declare(cython.double[:, ::1])
    times_div = cython.declare(cython.double[::1])
    jcols = cython.declare(cython.Py_ssize_t[::1])

    def __init__(self, enc: ObservationEncoderV1) -> None:
        self.step = enc._step
        self.per_job = enc._per_job
        self.times = enc._times
        self.log_in = enc._log_in
        self.times_div = enc._times_div
        self.jcols = _J_STEP_V1

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


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
        moves: int = 0,
        history: bool = False,
    ) -> None:
        self.base = ObservationEncoder(sim, max_gpus)
        #: Whether observations carry ``"history"`` and ``"nodes"`` (:data:`HISTORY_FEATURES`).
        self.history = bool(history)
        self.max_gpus = max_gpus
        self.window = sim.window if max_window is None else int(max_window)
        self.n_options = len(sim.options) if max_options is None else int(max_options)
        if self.window < sim.window or self.n_options < len(sim.options):
            raise ValueError(
                f"max_window/max_options: must be >= the scenario's {sim.window} and "
                f"{len(sim.options)} (got {self.window} and {self.n_options})"
            )
        #: Migration slots (rows after the window's: ``Simulator.migration_candidates``).
        self.moves = int(moves)
        self._n_cols = job_features_v1(self.moves)
        self.space = observation_space_v1(
            max_gpus, self.window, self.n_options, self.moves, self.history
        )
        nodes = np.zeros(max_gpus, dtype=np.float32)
        nodes[: sim.cluster.n_gpus] = (np.asarray(sim.cluster.node_of) + 1) / max_gpus
        self._nodes = np.minimum(nodes, 1.0)
        self._options = option_table(sim, self.n_options)
        c = sim.cluster
        self._type_names = tuple(c.type_names)
        self._type_idx = np.asarray(c.type_idx)
        self._speed: dict[tuple[str, tuple[str, ...]], tuple[np.ndarray, float]] = {}
        g = c.n_gpus
        #: Per GPU: time until free, until the first resident leaves, guarantee residents,
        #: online load, offline duty (float64, rows written per step).
        self._times = np.zeros((g, 5))
        #: What the five columns are divided by (times: after their log).
        self._times_div = np.array(
            [LOG_TIME_SCALE, LOG_TIME_SCALE, max(1, c.sharing.max_residents), 1.0, DUTY_SCALE]
        )
        #: Compiled: the first two columns plus 1, their log10 taken in place (numpy's).
        self._log_in = np.zeros((g, 2))
        self._jobs: dict[int, _Job] = {}
        self._rank_div = max(1, self.window - 1)
        #: Per job row (float64, rewritten each step): its per-step ``jobs`` columns
        #: (:data:`_J_STEP_V1`) and what :func:`pair_features` reads of it (best speed, duty,
        #: work left, memory); written element by element (typed when compiled), then copied
        #: into the float32 tables in one numpy call each.
        self._step = np.zeros((self.window + self.moves, len(_J_STEP_V1)))
        self._per_job = np.zeros((self.window + self.moves, 4))
        #: Compiled: typed views of the work arrays above (:class:`_EncViews`).
        self._ev: _EncViews | None = None
        #: The resident columns kept incrementally on larger fleets (on small ones a scan of the
        #: residents costs less than the table's fixed numpy work).
        self._slots = _ResidentSlots(g) if g >= SLOTS_MIN_GPUS else None

    @cython.locals(ev=_EncViews)
    def _enc_views(self) -> _EncViews:
        """The typed views of this encoder's work arrays (built when first asked, and again in
        a copy, whose views are None)."""
        ev = self._ev
        if ev is None:
            ev = self._ev = _EncViews(self)
        return ev

    def reset(self) -> None:
        """Forget per-episode caches."""
        self.base.reset()
        self._jobs.clear()
        if self._slots is not None:
            self._slots.reset()

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

    def _fill(self, sim: Simulator, info: _Job) -> None:
        """A job's static ``jobs`` columns and speeds (when it first enters a row)."""
        info.speed, info.best = self._speeds(sim, info.spec)
        info.row = np.array(
            [*static_job_values(info.spec), info.guarantee, 0.0, 0.0, 0.0, 0.0],
            dtype=np.float32,
        )

    def _job(self, spec: JobSpec) -> _Job:
        info = self._jobs.get(spec.job_id)
        if info is None or info.spec is not spec:
            info = self._jobs[spec.job_id] = _Job(spec)
        return info

    def _gpu_times(self, sim: Simulator) -> tuple[np.ndarray, float, int]:
        """Per GPU (rows): the time until it is free and until its first resident leaves
        (:func:`time_left_s`), its guarantee residents, the load of its online residents and
        the profiled demand of its offline ones (float64, 0 on empty GPUs); then the soonest
        time a busy GPU frees a slot (inf: none busy) and the number of busy GPUs.

        Kept incrementally (:class:`_ResidentSlots`); :meth:`gpu_times_scan` is the same from
        a scan of every resident."""
        if self._slots is None:
            return self.gpu_times_scan(sim, self._times)
        return self._slots.times(sim, self, self._times)

    @cython.locals(
        now=cython.double, soonest=cython.double, lo=cython.double, hi=cython.double,
        n_g=cython.double, on=cython.double, off=cython.double, t=cython.double, st=JobState,
        ov=cython.double[:, ::1], i=cython.Py_ssize_t,
    )  # fmt: skip
    def gpu_times_scan(self, sim: Simulator, out: np.ndarray) -> tuple[np.ndarray, float, int]:
        """:meth:`_gpu_times` by visiting every resident, written into ``out``: what small
        fleets use, and the reference the incremental table is tested against."""
        c = sim.cluster
        now = sim.now
        states = sim.jobs
        residents = c.residents
        out.fill(0.0)
        busy = c.n_res.nonzero()[0].tolist()
        soonest = math.inf
        if not busy:
            return out, soonest, 0
        jobs = self._jobs
        ov = out
        for i in busy:
            lo, hi = math.inf, 0.0
            n_g = on = off = 0.0
            for jid in residents[i]:
                st = states[jid]
                spec = st.spec
                info = jobs.get(spec.job_id)
                if info is None or info.spec is not spec:
                    info = self._job(spec)
                t = _time_left(st, now, info.online, info.est, info.end)
                if info.online:
                    on += st.serving.duty
                else:
                    off += info.duty
                if t > hi:
                    hi = t
                if t < lo:
                    lo = t
                if info.guarantee:
                    n_g += 1.0
            if lo < soonest:
                soonest = lo
            ov[i, 0] = hi
            ov[i, 1] = lo
            ov[i, 2] = n_g
            ov[i, 3] = on
            ov[i, 4] = off
        return out, soonest, len(busy)

    @cython.boundscheck(False)  # (the typed views' indices are in range by construction;
    @cython.wraparound(False)  # a legal mask's shape is checked before it is read)
    @cython.locals(
        now=cython.double, max_att=cython.double, b=cython.double, d=cython.double,
        left=cython.double, dur=cython.double, st=JobState, sv=cython.double[:, ::1],
        cv=cython.double[:, ::1], m=cython.Py_ssize_t, tv=cython.double[:, ::1],
        lv=cython.double[:, ::1], dv=cython.double[::1], gv=cython.float[:, ::1],
        i=cython.Py_ssize_t, k=cython.Py_ssize_t, x=cython.double, j=cython.Py_ssize_t,
        c0=cython.Py_ssize_t, ev=_EncViews,
        lg=cython.uchar[:, :], lr=cython.uchar[:, ::1], a=cython.uchar,
        jv=cython.float[:, ::1], jc=cython.Py_ssize_t[::1],
    )  # fmt: skip
    def encode(self, sim: Simulator, legal: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The current v1 observation of ``sim`` (fresh arrays every call).

        ``legal``: optionally, per job slot (rows: at least the window's jobs, and with migration
        slots row ``window + k`` for the ``k``-th candidate) and GPU (at least the cluster's),
        whether any option places (or moves) the slot's job there, as the
        env's action mask holds it; None: from ``sim.mask``.
        """
        c = sim.cluster
        g = c.n_gpus
        window = sim.window_jobs()
        n = len(window)

        # --- GPUs: v0's table, widened
        times, soonest, n_busy = self._gpu_times(sim)
        gpus = self.base.gpu_table(sim, len(GPU_FEATURES_V1))
        if cython.compiled:  # the same operations as below, one GPU at a time
            ev = self._enc_views()
            tv = ev.times  # (times is the encoder's own _times)
            lv = ev.log_in
            for i in range(g):
                lv[i, 0] = tv[i, 0] + 1.0
                lv[i, 1] = tv[i, 1] + 1.0
            np.log10(self._log_in, out=self._log_in)  # (numpy's, on the same (g, 2) array)
            dv = ev.times_div
            gv = gpus
            c0 = _G1
            for i in range(g):
                for k in range(5):
                    x = (lv[i, k] if k < 2 else tv[i, k]) / dv[k]
                    gv[i, c0 + k] = x if (x <= 1.0 or x != x) else 1.0  # np.minimum's
        else:
            ext = np.log10(times[:, :2] + 1.0)
            times[:, :2] = ext
            times /= self._times_div
            np.minimum(times, 1.0, out=times)
            gpus[:g, _G1:] = times

        # --- window jobs (rows 0..n-1), migration candidates (rows window..), and pairs
        slots = self.window + self.moves
        jobs = np.zeros((slots, self._n_cols), dtype=np.float32)
        pairs = np.zeros((slots, self.max_gpus, len(PAIR_FEATURES)), dtype=np.float32)
        placeable = 0
        movers = sim.migration_candidates(self.moves) if self.moves else []
        now = sim.now
        states = sim.jobs
        max_att = float(sim.cfg.faults.max_attempts)
        speeds: list[np.ndarray] = []
        if cython.compiled:
            ev = self._enc_views()
            sv, cv = ev.step, ev.per_job
        else:
            sv, cv = self._step, self._per_job
        legal_rows = np.zeros((n + len(movers), g), dtype=bool)
        if n:
            if legal is None:
                ok: list[bool] = [sim.placeable(s.job_id) for s in window]
                legal_rows[:n] = [sim.mask(s.job_id).any(axis=1) for s in window]
            elif (
                cython.compiled
                and legal.dtype == np.bool_
                and legal.ndim == 2
                and legal.shape[0] >= n
                and legal.shape[1] >= g
            ):  # the copy and any(), typed
                lg = legal.view(np.uint8)
                lr = legal_rows.view(np.uint8)
                ok = []
                for k in range(n):
                    a = 0
                    for j in range(g):
                        lr[k, j] = lg[k, j]
                        a |= lg[k, j]
                    ok.append(a != 0)
            else:
                legal_rows[:n] = legal[:n, :g]
                ok = legal_rows[:n].any(axis=1).tolist()  # type: ignore[assignment]
            rows = []
            pred = []
            cache = self._jobs
            for k, spec in enumerate(window):
                st = states[spec.job_id]
                info = cache.get(spec.job_id)
                if info is None or info.spec is not spec:
                    info = self._job(spec)
                if info.row is None:
                    self._fill(sim, info)
                b = info.best
                if info.online:
                    d = st.serving.duty
                    if d < 0.05:
                        d = 0.05
                else:
                    d = info.duty
                left = info.est - st.work_done
                if not left > 0.0:
                    left = 0.0
                dur = left / b
                pred.append(dur)
                rows.append(info.row)
                speeds.append(info.speed)  # type: ignore[arg-type]
                cv[k, 0] = b
                cv[k, 1] = d
                cv[k, 2] = left
                cv[k, 3] = info.mem
                sv[k, 0] = _log_norm(now - st.ledger.enqueue_t, LOG_WAIT_SCALE)
                sv[k, 1] = min(1.0, st.ledger.attempts / max_att)
                sv[k, 2] = 1.0 if ok[k] else 0.0
                sv[k, 3] = min(1.0, d)
                sv[k, 4] = _log_norm(left, LOG_TIME_SCALE)
                sv[k, 5] = _log_norm(dur, LOG_TIME_SCALE)
                sv[k, 6] = 0.0
                placeable += bool(ok[k])
            # the rank of each predicted duration in the window (stable: ties in queue order)
            if n > 1:
                if all(x == x for x in pred):  # (no NaN: Python's sort orders as numpy's)
                    order = sorted(range(n), key=pred.__getitem__)  # stable, as numpy's
                else:
                    order = np.argsort(np.asarray(pred), kind="stable").tolist()
                rank_div = self._rank_div
                for r, k in enumerate(order):
                    sv[k, 6] = r / rank_div
            jobs[:n, : len(JOB_FEATURES_V1)] = rows
            if cython.compiled:  # the per-step columns, element by element (the same casts)
                jv = jobs
                jc = ev.jcols
                for k in range(n):
                    for j in range(jc.shape[0]):
                        jv[k, jc[j]] = sv[k, j]
            else:
                jobs[:n, _J_STEP_V1] = self._step[:n]
        for k, jid in enumerate(movers):
            # a running job: its work left as of now, and how long it takes at its current rate
            st = states[jid]
            info = self._job(st.spec)
            if info.row is None:
                self._fill(sim, info)
            row = self.window + k
            if legal is None:
                legal_rows[n + k] = sim.migration_mask(jid).any(axis=1)
            else:
                legal_rows[n + k] = legal[row, :g]
            left = info.est - st.work_done_at(now)
            if not left > 0.0:
                left = 0.0
            b, d = info.best, info.duty
            speeds.append(info.speed)  # type: ignore[arg-type]
            m = n + k
            cv[m, 0] = b
            cv[m, 1] = d
            cv[m, 2] = left
            cv[m, 3] = info.mem
            jobs[row, : len(JOB_FEATURES_V1)] = info.row  # type: ignore[assignment]
            jobs[row, _J_STEP_V1] = (
                0.0,
                min(1.0, st.ledger.attempts / max_att),
                bool(legal_rows[n + k].any()),
                min(1.0, d),
                _log_norm(left, LOG_TIME_SCALE),
                _log_norm(left / b, LOG_TIME_SCALE),
                0.0,
            )
            jobs[row, len(JOB_FEATURES_V1) :] = (
                1.0,
                _log_norm(time_left_s(st, now), LOG_TIME_SCALE),
            )
        if speeds:
            per_job = self._per_job[: len(speeds)]
            f = pair_features(speeds, per_job, legal_rows, sim.gpu_util, c.mem_cap, c.mem_decl)
            pairs[:n, :g] = f[:n]
            if movers:
                pairs[self.window : self.window + len(movers), :g] = f[n:]

        # --- global: v0's values, then the queue beyond the window
        queue = sim.queue
        states = sim.jobs
        b_work: list[float] = []
        b_share: list[float] = []
        n_guarantee = n_online = gang_max = 0
        for k, (_, jid) in enumerate(queue):
            st = states[jid]
            info = self._job(st.spec)
            n_guarantee += info.guarantee
            n_online += info.online
            if info.gang > gang_max:
                gang_max = info.gang
            if k >= sim.window:
                w = info.est - st.work_done
                b_work.append(w if w > 0.0 else 0.0)
                b_share.append(info.share_gpus)
        n_beyond = len(b_work)
        running_offline = sim.offline_in_system - (len(queue) - n_online)
        glob = np.array(
            [
                *self.base.global_values(sim, n, n_busy),
                _log_norm(n_beyond, LOG_COUNT_SCALE),
                _log_norm(sum(b_work), LOG_QUEUE_WORK_SCALE),
                min(1.0, sum(b_share) / g / QUEUE_GPU_SCALE),
                _log_norm(min(b_work), LOG_TIME_SCALE) if b_work else 0.0,
                _log_norm(n_guarantee, LOG_COUNT_SCALE),
                min(1.0, math.log2(gang_max) / LOG_GANG_SCALE) if queue else 0.0,
                _log_norm(running_offline, LOG_COUNT_SCALE),
                _log_norm(soonest, LOG_TIME_SCALE) if n_busy else 0.0,
                placeable / n if n else 0.0,
            ],
            dtype=np.float32,
        )
        out = {
            "gpus": gpus.ravel(),
            "jobs": jobs.ravel(),
            "global": glob,
            "options": self._options.ravel().copy(),
            "pairs": pairs.ravel(),
        }
        if self.history:
            hist = np.zeros((slots, len(HISTORY_FEATURES)), dtype=np.float32)
            for k, spec in enumerate(window):
                hist[k] = history_row(sim, spec)
            for k, jid in enumerate(movers):
                hist[self.window + k] = history_row(sim, states[jid].spec)
            out["history"] = hist.ravel()
            out["nodes"] = self._nodes.copy()
        return out


__all__ = [
    "GLOBAL_FEATURES_V1",
    "GPU_FEATURES_V1",
    "HISTORY_FEATURES",
    "JOB_FEATURES_V1",
    "KEYS_V1",
    "MOVE_FEATURES",
    "OPTION_FEATURES",
    "PAIR_FEATURES",
    "ObservationEncoderV1",
    "guarantee",
    "history_row",
    "job_features_v1",
    "layout_v1",
    "layout_v1_columns",
    "observation_space_v1",
    "option_table",
    "pair_features",
    "time_left_s",
]
