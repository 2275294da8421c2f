"""Observation encoding: the simulator's state as a flat ``Dict`` of 1-D float32 boxes.

Three keys, each a row-major flattening of a (rows, features) table (see ``docs/env.md``):

* ``"gpus"``: ``max_gpus × len(GPU_FEATURES)``; rows beyond the cluster's size are all zero
  (their ``present`` feature is 0), so one policy serves clusters of several sizes.
* ``"jobs"``: ``queue_window × len(JOB_FEATURES)``; the window of the queue, in queue order
  (slot ``k`` is the job action slot ``k`` places); empty slots are all zero.
* ``"global"``: ``len(GLOBAL_FEATURES)``.

Every feature lies in [0, 1] except the time-of-day sine and cosine ([-1, 1]). Heavy-tailed
quantities (durations, waits, queue lengths) are log-scaled. The encoder is vectorised: the
GPU table costs a fixed number of numpy operations whatever the cluster size (compiled: one
typed loop over the GPUs, the same operations); only the queue window (at most 64 jobs) is
walked in Python, with each job's static features cached.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.fleet.cluster import _no_views  # (a pickled or copied view holder: None)
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.nodes import GPU_TYPE_NAMES
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.workload.job import MODEL_CLASSES, JobSpec

#: Memory normaliser (GB): the largest GPU in the catalogue (A100/H100-80GB).
MEM_SCALE_GB = 80.0
#: Per-instance vCPU normaliser.
CPU_SCALE = 32.0
#: log10 normaliser of estimated work: 10^7 s (~4 months) maps to 1; PAI durations span
#: seconds to weeks.
LOG_WORK_SCALE = 7.0
#: log10 normaliser of queue waits: 10^6 s (~11.6 days) maps to 1.
LOG_WAIT_SCALE = 6.0
#: log2 normaliser of gang sizes: 2^7 = 128 GPUs maps to 1.
LOG_GANG_SCALE = 7.0
#: log10 normaliser of job counts: 10^5 jobs maps to 1.
LOG_COUNT_SCALE = 5.0
#: Priorities are clipped to 0..PRIORITY_SCALE.
PRIORITY_SCALE = 10.0
#: log10 normaliser of an online service's SLO: 10^4 ms maps to 1.
LOG_SLO_SCALE = 4.0
DAY_S = 86_400.0

# Sharing-mode one-hot columns: unset (never configured), then SharingMode order.
_MODE_COLS = ("mode_unset", *(f"mode_{m.name.lower()}" for m in SharingMode))

GPU_FEATURES: tuple[str, ...] = (
    "present",
    *(f"type_{n}" for n in GPU_TYPE_NAMES),
    "mem_cap",
    "mig_capable",
    "mps_sm_limit",
    *_MODE_COLS,
    "residents",
    "free_mem",
    "free_sm",
    "free_mig",
    "healthy",
    "ready",
    "hosts_online",
    "util",
    "node_cpu_load",
)
JOB_FEATURES: tuple[str, ...] = (
    "present",
    "online",
    "gang",
    "gpu_frac",
    "mem",
    "cpu",
    "est_work",
    "wait",
    "attempts",
    "type_constrained",
    "placeable",
    "priority",
    "slo",
    *(f"model_{m}" for m in MODEL_CLASSES),
)
GLOBAL_FEATURES: tuple[str, ...] = (
    "time_of_day_sin",
    "time_of_day_cos",
    "time_frac",
    "queue_len",
    "in_system",
    "window_fill",
    "gpus_present",
    "gpus_empty",
    "util_mean",
    "slo_attainment",
    "slo_target",
)

_G = {n: i for i, n in enumerate(GPU_FEATURES)}
_J = {n: i for i, n in enumerate(JOB_FEATURES)}
_MODEL_COL = {m: _J[f"model_{m}"] for m in MODEL_CLASSES}
_MODE0 = _G["mode_unset"]
_DYN0 = _MODE0  # first dynamic GPU column: everything before it is static
_DYN1 = _G["residents"]  # first dynamic column after the mode one-hot
# Per-step job columns, in ``JobEncoder.jobs``' order: wait, attempts, placeable.
_J_STEP = np.array([_J["wait"], _J["attempts"], _J["placeable"]], dtype=np.intp)


def observation_space(max_gpus: int, window: int) -> spaces.Dict:
    """The observation space for a padded GPU count and queue window."""

    def box(n: int, low: float = 0.0) -> spaces.Box:
        return spaces.Box(low=low, high=1.0, shape=(n,), dtype=np.float32)

    return spaces.Dict(
        {
            "gpus": box(max_gpus * len(GPU_FEATURES)),
            "jobs": box(window * len(JOB_FEATURES)),
            "global": box(len(GLOBAL_FEATURES), low=-1.0),
        }
    )


def _log_norm(x: float, scale: float) -> float:
    return min(1.0, math.log10(1.0 + max(0.0, x)) / scale)


def static_job_values(spec: JobSpec) -> list[float]:
    """The ``JOB_FEATURES`` of a job that do not change while it waits (the per-step ones 0),
    as Python numbers (each rounded to float32 once, when written into a table)."""
    row = [0.0] * len(JOB_FEATURES)
    row[_J["present"]] = 1.0
    row[_J["online"]] = spec.online
    row[_J["gang"]] = min(1.0, math.log2(spec.num_gpus) / LOG_GANG_SCALE)
    row[_J["gpu_frac"]] = spec.gpu_frac
    row[_J["mem"]] = min(1.0, spec.mem_gb / MEM_SCALE_GB)
    row[_J["cpu"]] = min(1.0, spec.cpu_cores / CPU_SCALE)
    row[_J["est_work"]] = _log_norm(spec.est_work_s, LOG_WORK_SCALE)
    row[_J["type_constrained"]] = bool(spec.gpu_types)
    row[_J["priority"]] = min(1.0, max(0.0, spec.priority / PRIORITY_SCALE))
    if spec.service is not None:
        row[_J["slo"]] = _log_norm(spec.service.slo_ms, LOG_SLO_SCALE)
    row[_MODEL_COL[spec.model]] = 1.0
    return row


@cython.cclass
class _DynViews:
    """Compiled: typed views of what :func:`_dyn_columns` reads (a cluster's state arrays of
    one reset, the encoder's constant ones) and writes (the encoder's ``_dyn``), built once per
    cluster reset (the cluster replaces its arrays there and only there, ``src`` names them)
    instead of ~15 buffer acquisitions a table. A pickle or deep copy of one is None."""

    # (cython.declare: typed fields; with annotation typing off, annotations here would make
    # Python-object fields, converted to a view again at every read)
    src = cython.declare(object)
    dv = cython.declare(cython.double[:, ::1])
    mode = cython.declare(cython.longlong[::1])
    n_res = cython.declare(cython.longlong[::1])
    mem_decl = cython.declare(cython.double[::1])
    sm_used = cython.declare(cython.longlong[::1])
    mig_used = cython.declare(cython.longlong[::1])
    healthy = cython.declare(cython.uchar[::1])
    ready = cython.declare(cython.uchar[::1])
    online = cython.declare(cython.longlong[::1])
    node_cpu = cython.declare(cython.double[::1])
    node_of = cython.declare(cython.longlong[::1])
    neg_inv_cap = cython.declare(cython.double[::1])
    neg_mig7 = cython.declare(cython.double[::1])
    mig_cap = cython.declare(cython.double[::1])
    half_inv = cython.declare(cython.double[::1])

    def __init__(self, enc: ObservationEncoder, c: Any) -> None:
        self.src = c.n_res
        self.dv = enc._dyn
        self.mode = c.mode
        self.n_res = c.n_res
        self.mem_decl = c.mem_decl
        self.sm_used = c.sm_used
        self.mig_used = c.mig_used
        self.healthy = c.healthy.view(np.uint8)
        self.ready = c.ready.view(np.uint8)
        self.online = c.online_count
        self.node_cpu = c.node_cpu_used
        self.node_of = c.node_of
        self.neg_inv_cap = enc._neg_inv_cap
        self.neg_mig7 = enc._neg_mig7
        self.mig_cap = enc._mig_capable
        self.half_inv = enc._half_inv_gpu

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


@cython.cfunc
@cython.boundscheck(False)  # (every index is in range by construction: g GPUs, their nodes)
@cython.wraparound(False)
@cython.locals(
    v=_DynViews, dv=cython.double[:, ::1], mode=cython.longlong[::1],
    n_res=cython.longlong[::1], mem_decl=cython.double[::1], sm_used=cython.longlong[::1],
    mig_used=cython.longlong[::1], healthy=cython.uchar[::1], ready=cython.uchar[::1],
    online=cython.longlong[::1], node_cpu=cython.double[::1], node_of=cython.longlong[::1],
    inv_res=cython.double, neg_inv_cap=cython.double[::1], neg_mig7=cython.double[::1],
    mig_cap=cython.double[::1], half_inv=cython.double[::1], g=cython.Py_ssize_t,
    j=cython.Py_ssize_t, k=cython.Py_ssize_t, n_modes=cython.Py_ssize_t, r=cython.Py_ssize_t,
    x=cython.double,
)  # fmt: skip
def _dyn_columns(v: _DynViews, inv_res: float) -> None:
    """Compiled only: :meth:`ObservationEncoder.gpu_table`'s dynamic rows (the mode one-hot,
    then residents, free memory, free SM, free MIG slices, healthy, ready, online, utilisation
    (already in its row), CPU pressure), each GPU's with the numpy passes' operations in the
    same order (an integer is converted to a double first, as numpy's mixed ops do), then
    clipped to [0, 1] as ``ndarray.clip`` (NaN kept, -0.0 to 0.0)."""
    dv, mode, n_res, mem_decl = v.dv, v.mode, v.n_res, v.mem_decl
    sm_used, mig_used, healthy, ready = v.sm_used, v.mig_used, v.healthy, v.ready
    online, node_cpu, node_of = v.online, v.node_cpu, v.node_of
    neg_inv_cap, neg_mig7, mig_cap, half_inv = v.neg_inv_cap, v.neg_mig7, v.mig_cap, v.half_inv
    g = dv.shape[1]
    n_modes = dv.shape[0] - 9
    r = n_modes
    for k in range(n_modes):  # (row by row: each row is contiguous)
        for j in range(g):
            dv[k, j] = 1.0 if mode[j] == k - 1 else 0.0
    for j in range(g):
        dv[r, j] = cython.cast(cython.double, n_res[j]) * inv_res
    for j in range(g):
        dv[r + 1, j] = mem_decl[j] * neg_inv_cap[j] + 1.0
    for j in range(g):
        dv[r + 2, j] = cython.cast(cython.double, sm_used[j]) * -0.01 + 1.0
    for j in range(g):
        dv[r + 3, j] = cython.cast(cython.double, mig_used[j]) * neg_mig7[j] + mig_cap[j]
    for j in range(g):
        dv[r + 4, j] = 1.0 if healthy[j] else 0.0
        dv[r + 5, j] = 1.0 if ready[j] else 0.0
        dv[r + 6, j] = 1.0 if online[j] > 0 else 0.0
    for j in range(g):
        dv[r + 8, j] = node_cpu[node_of[j]] * half_inv[j]
    for k in range(r, r + 9):
        for j in range(g):
            x = dv[k, j]
            if not (x > 0.0 or x != x):
                x = 0.0
            elif x > 1.0:
                x = 1.0
            dv[k, j] = x


class ObservationEncoder:
    """Encodes one simulator's state; holds the static GPU table and per-job caches.

    Args:
        sim: The simulator (its cluster layout is fixed for the encoder's lifetime).
        max_gpus: Padded GPU count (>= the cluster's size).
    """

    def __init__(self, sim: Simulator, max_gpus: int) -> None:
        # The encoder keeps no reference to ``sim`` (the env pickles the simulator itself).
        c = sim.cluster
        g = c.n_gpus
        if max_gpus < g:
            raise ValueError(f"max_gpus: must be >= the cluster's {g} GPUs (got {max_gpus})")
        self.max_gpus = max_gpus
        self.window = sim.window
        self.space = observation_space(max_gpus, self.window)
        static = np.zeros((g, _DYN0), dtype=np.float32)
        static[:, _G["present"]] = 1.0
        tcol = np.array([_G[f"type_{n}"] for n in c.type_names], dtype=np.int64)
        static[np.arange(g), tcol[c.type_idx]] = 1.0
        static[:, _G["mem_cap"]] = np.minimum(1.0, c.mem_cap / MEM_SCALE_GB)
        static[:, _G["mig_capable"]] = c.mig_capable
        static[:, _G["mps_sm_limit"]] = c.mps_limit
        self._static = static
        #: The GPU table with its static columns filled in and every other entry 0: each
        #: observation starts from a copy of it.
        self._template = np.zeros((max_gpus, len(GPU_FEATURES)), dtype=np.float32)
        self._template[:g, :_DYN0] = static
        self._inv_res = 1.0 / max(1, c.sharing.max_residents)
        self._neg_inv_cap = -1.0 / c.mem_cap
        self._mig_capable = c.mig_capable.astype(np.float64)
        self._neg_mig7 = -self._mig_capable / 7.0
        # node CPU demand / vCPUs, halved: 1 means twice over-subscribed
        self._half_inv_vcpus = 0.5 / np.maximum(c.node_vcpus, 1e-9)
        self._half_inv_gpu = self._half_inv_vcpus[c.node_of]  # per GPU: its node's
        #: The GPU table's columns from the mode one-hot on, as float64 rows (one per column).
        self._dyn = np.empty((len(GPU_FEATURES) - _MODE0, g))
        #: Compiled: typed views for :func:`_dyn_columns` (of one cluster reset's arrays).
        self._dyn_views: _DynViews | None = None
        self._views()
        #: Per mode column, the ``cluster.mode`` value it stands for (MODE_NONE, -1: "unset").
        self._mode_vals = np.arange(-1, len(_MODE_COLS) - 1).reshape(-1, 1)
        self._job_static: dict[int, tuple[JobSpec, np.ndarray]] = {}
        #: The zero GPU table with the static columns filled in, by width (:meth:`gpu_table`).
        self._templates = {len(GPU_FEATURES): self._template}

    def _views(self) -> None:
        # Views of ``_dyn`` (rebuilt after unpickling, which would make them copies).
        self._dyn_rows = list(self._dyn[_DYN1 - _MODE0 :])
        self._mode_rows = self._dyn[: _DYN1 - _MODE0]

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        del state["_dyn_rows"], state["_mode_rows"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._dyn_views = None  # (views of the copy's own arrays are built when first asked)
        self._views()

    def reset(self) -> None:
        """Forget per-episode caches (job ids are only unique within an episode)."""
        self._job_static.clear()

    # ------------------------------------------------------------------ parts
    @cython.locals(views=_DynViews)
    def gpu_table(self, sim: Simulator, width: int) -> np.ndarray:
        """A fresh ``max_gpus × width`` float32 GPU table (``width`` >= ``len(GPU_FEATURES)``):
        ``GPU_FEATURES`` in its first columns, zero elsewhere."""
        c = sim.cluster
        g = c.n_gpus
        # Dynamic columns are computed as contiguous float64 rows (interpreted: one ufunc each,
        # written in place; compiled: one typed loop), then transposed into the float32 table
        # in one copy.
        d = self._dyn
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = self._dyn_rows
        if cython.compiled:  # one typed loop: the same operations on each GPU (_dyn_columns)
            r7[...] = sim.gpu_util
            views = self._dyn_views
            if views is None or views.src is not c.n_res:  # (a new episode's arrays)
                views = self._dyn_views = _DynViews(self, c)
            _dyn_columns(views, self._inv_res)
        else:
            np.equal(c.mode, self._mode_vals, out=self._mode_rows)  # the mode one-hot
            np.multiply(c.n_res, self._inv_res, out=r0)
            np.multiply(c.mem_decl, self._neg_inv_cap, out=r1)
            r1 += 1.0
            np.multiply(c.sm_used, -0.01, out=r2)
            r2 += 1.0
            np.multiply(c.mig_used, self._neg_mig7, out=r3)
            r3 += self._mig_capable
            r4[...] = c.healthy
            r5[...] = c.ready
            np.greater(c.online_count, 0, out=r6)  # bool written as 0.0 / 1.0
            r7[...] = sim.gpu_util
            np.multiply(c.node_cpu_used[c.node_of], self._half_inv_gpu, out=r8)
            # Clipped to [0, 1] before the cast to float32 (contiguous, so faster): the same
            # numbers, as the cast's rounding is monotonic and 0 and 1 are exact.
            d.clip(0.0, 1.0, out=d)
        return self._table(d, g, width)

    def _table(self, d: np.ndarray, g: int, width: int) -> np.ndarray:
        """The template of ``width`` columns, copied, with the dynamic columns ``d`` (float64,
        one row per column) written in."""
        out = self._templates.get(width)
        if out is None:
            out = self._templates[width] = np.zeros((self.max_gpus, width), dtype=np.float32)
            out[:, : len(GPU_FEATURES)] = self._template
        out = out.copy()
        out[:g, _MODE0 : len(GPU_FEATURES)] = d.T
        return out

    def gpus(self, sim: Simulator) -> np.ndarray:
        return self.gpu_table(sim, len(GPU_FEATURES)).ravel()

    def static_row(self, spec: JobSpec) -> np.ndarray:
        """The static columns of a job's ``jobs`` row (float32, the per-step columns 0;
        cached per job id until :meth:`reset`: do not modify it)."""
        hit = self._job_static.get(spec.job_id)
        if hit is None or hit[0] is not spec:  # (a new estimate is a new spec)
            hit = self._job_static[spec.job_id] = (
                spec,
                np.array(static_job_values(spec), dtype=np.float32),
            )
        return hit[1]

    def jobs(self, sim: Simulator, window: list[JobSpec]) -> np.ndarray:
        out = np.zeros((self.window, len(JOB_FEATURES)), dtype=np.float32)
        if not window:
            return out.ravel()
        max_att = float(sim.cfg.faults.max_attempts)
        now = sim.now
        rows = []
        step = []
        for spec in window:
            jid = spec.job_id
            rows.append(self.static_row(spec))
            st = sim.jobs[jid]
            step.append(
                (
                    _log_norm(now - st.ledger.enqueue_t, LOG_WAIT_SCALE),
                    min(1.0, st.ledger.attempts / max_att),
                    sim.placeable(jid),
                )
            )
        # Two numpy calls for the whole window (the same float32 roundings as per element).
        n = len(window)
        out[:n] = rows
        out[:n, _J_STEP] = step
        return out.ravel()

    def global_values(self, sim: Simulator, n_window: int, n_busy: int) -> list[float]:
        """The ``global`` values as Python numbers (``n_window`` jobs in the window, ``n_busy``
        GPUs with a resident)."""
        acc = sim.acc
        now = sim.now
        phase = 2.0 * math.pi * (now % DAY_S) / DAY_S
        att = acc.requests_ok / acc.requests if acc.requests > 0 else 1.0
        g = sim.cluster.n_gpus
        return [
            math.sin(phase),
            math.cos(phase),
            min(1.0, now / sim.horizon_s),
            _log_norm(len(sim.queue), LOG_COUNT_SCALE),
            _log_norm(sim.offline_in_system, LOG_COUNT_SCALE),
            n_window / self.window,
            g / self.max_gpus,
            (g - n_busy) / g,
            min(1.0, sim.util_sum / g),
            min(1.0, max(0.0, att)),
            sim.cfg.slo_target,
        ]

    def global_(self, sim: Simulator, window: list[JobSpec]) -> np.ndarray:
        n_busy = int(np.count_nonzero(sim.cluster.n_res))
        return np.array(self.global_values(sim, len(window), n_busy), dtype=np.float32)

    def encode(self, sim: Simulator) -> dict[str, np.ndarray]:
        """The current observation of ``sim`` (fresh arrays every call)."""
        window = sim.window_jobs()
        return {
            "gpus": self.gpus(sim),
            "jobs": self.jobs(sim, window),
            "global": self.global_(sim, window),
        }
