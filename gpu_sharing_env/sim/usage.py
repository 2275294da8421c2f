"""The fleet's usage over time (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`).

:class:`FleetUsage` owns, per GPU, the values the metrics integrate (utilisation, SM activity,
memory, busy, system throughput, oversold, hosts-online), their sums over the fleet (kept
incrementally, element by element: exact by construction), the per-tick timeseries and the
fragmentation sample (memoised on the cluster's and the queue's versions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # compiled (gpu_sharing_env._compile): C types for the fragmentation loop; else no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.fleet.cluster import Cluster, _no_views

if cython.compiled:  # the cluster's typed views of its state (cluster.pxd), a C call
    from cython.cimports.gpu_sharing_env.fleet.cluster import _StateViews, _views_of
else:
    from gpu_sharing_env.fleet.cluster import _StateViews
from gpu_sharing_env.sim.accumulator import Accumulator
from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.sim.waiting import Queue

#: One GPU's row: util, sm, mem, busy, stp, oversold, hosts-online.
GpuRow = tuple[float, float, float, float, float, float, float]

#: Below this many GPUs the compiled fragmentation sample is one typed loop (``frag_sum``).
_FRAG_LOOP_GPUS = 64


@cython.ccall
@cython.boundscheck(False)  # (every index is in range: the three are the fleet's)
@cython.wraparound(False)
@cython.locals(
    caps=list, decl=cython.double[:], n_res=cython.longlong[:], g=cython.Py_ssize_t,
    n=cython.Py_ssize_t, k=cython.Py_ssize_t, f=cython.double, cap=cython.double,
    total=cython.double, need=cython.double,
)  # fmt: skip
def frag_sum(caps: list[float], decl: Any, n_res: Any, need: float) -> float | None:
    """``float((free[part] / cap[part]).sum())`` with ``free = cap - decl`` and ``part =
    (n_res > 0) & (free > 1e-9) & (free < need)``, GPU by GPU, where fewer than 8 GPUs are in
    ``part``: numpy sums fewer than 8 values left to right from 0.0, so the loop gives the same
    float. None where 8 or more are (numpy's pairwise blocks then: the caller sums with numpy).
    ``cap`` is ``caps`` (the GPUs' memory as floats); compiled, ``decl`` and ``n_res`` are typed
    views, and ``FleetUsage.fragmentation`` (a C call) passes the cluster's own, acquired once
    per reset (:meth:`Cluster.state_views <gpu_sharing_env.fleet.cluster.Cluster.state_views>`),
    where three views of the arrays were acquired at every load tick."""
    n = len(caps)
    total = 0.0
    k = 0
    for g in range(n):
        if n_res[g] > 0:
            cap = caps[g]
            f = cap - decl[g]
            if f > 1e-9 and f < need:
                k += 1
                if k == 8:
                    return None
                total += f / cap
    return total


@cython.cclass
class _UtilView:
    """Typed views of a usage's arrays, for :meth:`FleetUsage.set_row` and ``integrate``
    (compiled): ``g_util`` (``src``, ``v``), the per-GPU rows (``rows``) and their sums
    (``sums``). A pickle or deep copy of one is None (as the cluster's ``_StateViews``): a copied
    usage builds views of its own arrays (views of the original's would write the original's)."""

    src: object
    v: cython.double[:]
    rows: cython.double[:, ::1]
    sums: cython.double[::1]

    def __init__(self, arr: np.ndarray, rows: np.ndarray, sums: np.ndarray) -> None:
        self.src = arr
        self.v = arr
        self.rows = rows
        self.sums = sums

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


@cython.cfunc
@cython.inline
@cython.boundscheck(False)  # (``gi`` is a GPU of the fleet, ``k`` below 7)
@cython.wraparound(False)
@cython.locals(
    uv=_UtilView, gi=cython.Py_ssize_t, k=cython.Py_ssize_t, a=cython.double, b=cython.double,
    t=cython.double,
)  # fmt: skip
def _move(uv: _UtilView, gi: int, k: int, a: float) -> None:
    """Value ``k`` of GPU ``gi``'s row becomes ``a``; its sum moves by the difference
    (``s[k] = s[k] + (a - old)``, in C doubles: the floats' IEEE operations). Compiled only."""
    b = uv.rows[gi, k]
    t = uv.sums[k]
    uv.sums[k] = t + (a - b)
    uv.rows[gi, k] = a


class FleetUsage:
    """Per-GPU usage rows, their fleet sums, the timeseries and the fragmentation sample."""

    __slots__ = (
        "_caps",
        "_cluster",
        "_frag_cv",
        "_frag_qv",
        "_frag_val",
        "_jobs",
        "_n_gpus_f",
        "_queue",
        "_rows",
        "_sums",
        "_ts",
        "_util_view",
        "g_util",
    )

    def __init__(self, cluster: Cluster, queue: Queue) -> None:
        self._cluster = cluster
        self._queue = queue
        #: Each GPU's memory (GB; ``Cluster.mem_cap``, static) as Python floats.
        self._caps: list[float] = cluster.mem_cap.tolist()
        self._n_gpus_f = float(cluster.n_gpus)
        self._jobs: dict[int, JobState] = {}
        #: Per-GPU utilisation (mirrors the rows' first value, for views).
        self.g_util = np.zeros(cluster.n_gpus)
        #: Typed views of ``g_util``, the rows and the sums (compiled; built on first use:
        #: :meth:`_views`).
        self._util_view: _UtilView | None = None
        #: Per GPU its :data:`GpuRow`, one row of seven float64 (C doubles compiled: no float
        #: objects made when a row moves).
        self._rows = np.zeros((cluster.n_gpus, 7))
        #: The rows' sums over the fleet (:attr:`sums`), seven float64.
        self._sums = np.zeros(7)
        #: The timeseries' rows (:attr:`timeseries`) one after another, six floats a tick (no
        #: tuple kept a tick: a container that lives on makes the cyclic GC run more often).
        self._ts: list[float] = []
        self._frag_cv = self._frag_qv = -1  # (cluster, queue) versions of ``_frag_val``
        self._frag_val = 0.0

    def reset(self, jobs: dict[int, JobState]) -> None:
        g = self._cluster.n_gpus
        self._jobs = jobs
        self.g_util = np.zeros(g)
        self._rows = np.zeros((g, 7))
        self._sums = np.zeros(7)
        self._ts = []
        self._frag_cv = self._frag_qv = -1
        self._frag_val = 0.0

    def copy_memo(self, memo: dict[int, Any]) -> None:
        """``Simulator.copy``: the timeseries is floats (shared)."""
        memo[id(self._ts)] = list(self._ts)

    @property
    def timeseries(self) -> list[tuple[float, float, float, float, float, float]]:
        """Per tick: (t_s, gpu_util, sm_activity, busy_gpu_frac, gpu_mem_util, max p99/SLO)
        (a new list of tuples at each read)."""
        it = iter(self._ts)
        return list(zip(it, it, it, it, it, it))

    @property
    def sums(self) -> list[float]:
        """The rows' sums over the fleet, element by element (a new list of floats)."""
        return self._sums.tolist()  # type: ignore[no-any-return]

    def sums_item(self, k: int) -> float:
        """The ``k``-th of :attr:`sums` (a float; no list made)."""
        return self._sums.item(k)  # type: ignore[no-any-return]

    @cython.locals(uv=_UtilView)
    def _views(self) -> _UtilView:
        """The typed views of the current arrays (compiled; replaced by ``reset`` and in a
        copy, where the kept ones are None or view other arrays)."""
        uv = self._util_view
        if uv is None or uv.src is not self.g_util:
            uv = self._util_view = _UtilView(self.g_util, self._rows, self._sums)
        return uv

    def set_gpu(self, g: int, new: GpuRow) -> None:
        """GPU ``g``'s new row; the fleet sums move by the difference, element by element
        (``s[k] += new[k] - old[k]``: :meth:`set_row`)."""
        self.set_row(g, new[0], new[1], new[2], new[3], new[4], new[5], new[6])

    @cython.locals(gi=cython.Py_ssize_t, uv=_UtilView)
    def set_row(
        self, g: int, util: float, sm: float, mem: float, busy: float, stp: float,
        over: float, hosts: float,
    ) -> None:  # fmt: skip
        """:meth:`set_gpu` of the row ``(util, sm, mem, busy, stp, over, hosts)``, its values
        as arguments: compiled, a C call with seven C doubles (from ``Rates.gpu_fractions``),
        the old row, the sums and ``g_util``'s element read and written as C doubles through
        typed views (:class:`_UtilView`): the same IEEE operations as the interpreted floats'
        (``s[k] = s[k] + (new[k] - old[k])``), no float objects."""
        gi = g
        if cython.compiled:
            uv = self._views()
            _move(uv, gi, 0, util)
            _move(uv, gi, 1, sm)
            _move(uv, gi, 2, mem)
            _move(uv, gi, 3, busy)
            _move(uv, gi, 4, stp)
            _move(uv, gi, 5, over)
            _move(uv, gi, 6, hosts)
            uv.v[gi] = util
        else:
            new = (util, sm, mem, busy, stp, over, hosts)
            rows, s = self._rows, self._sums
            for k in range(7):  # (Python floats: the arrays' float64 values)
                a = new[k]
                b = rows.item(gi, k)
                t = s.item(k)
                s[k] = t + (a - b)
                rows[gi, k] = a
            self.g_util[g] = util

    def row(self, g: int) -> GpuRow:
        """GPU ``g``'s row (SysMonitor's device metrics), as floats."""
        return tuple(self._rows[g].tolist())  # type: ignore[return-value]

    def rows(self) -> list[GpuRow]:
        """Every GPU's row (a new list of tuples of floats)."""
        return [tuple(r) for r in self._rows.tolist()]  # type: ignore[misc]

    @cython.locals(uv=_UtilView, x=cython.double)
    def integrate(self, acc: Accumulator, dt: float, in_system: int) -> None:
        """Add ``dt`` seconds at the current rows' sums (and ``in_system`` offline jobs).

        Compiled, ``acc``'s integrals are C doubles (``accumulator.pxd``) and each sum is read
        as one: the same IEEE multiplication and addition as the interpreted floats'."""
        if cython.compiled:
            uv = self._views()
            x = uv.sums[0]
            acc.util_s += x * dt
            x = uv.sums[1]
            acc.sm_s += x * dt
            x = uv.sums[2]
            acc.mem_s += x * dt
            x = uv.sums[3]
            acc.busy_gpu_s += x * dt
            x = uv.sums[4]
            acc.stp_s += x * dt
            x = uv.sums[5]
            acc.oversold_s += x * dt
            x = uv.sums[6]
            acc.online_gpu_s += x * dt
        else:
            s = self._sums.tolist()
            acc.util_s += s[0] * dt
            acc.sm_s += s[1] * dt
            acc.mem_s += s[2] * dt
            acc.busy_gpu_s += s[3] * dt
            acc.stp_s += s[4] * dt
            acc.oversold_s += s[5] * dt
            acc.online_gpu_s += s[6] * dt
        acc.in_system_s += in_system * dt
        acc.elapsed_s += dt

    @cython.locals(uv=_UtilView, g=cython.double)
    def record(self, now: float, p99_max: float) -> None:
        """A load tick's timeseries row at ``now`` (compiled, the sums read as C doubles: the
        same IEEE divisions as the floats')."""
        g = self._n_gpus_f
        ts = self._ts
        ts.append(now)
        if cython.compiled:
            uv = self._views()
            ts.append(uv.sums[0] / g)
            ts.append(uv.sums[1] / g)
            ts.append(uv.sums[3] / g)
            ts.append(uv.sums[2] / g)
        else:
            s = self._sums.tolist()
            ts.append(s[0] / g)
            ts.append(s[1] / g)
            ts.append(s[3] / g)
            ts.append(s[2] / g)
        ts.append(p99_max)

    @cython.locals(sv=_StateViews)
    def fragmentation(self) -> float:
        """FGD-style fragmentation: free memory on partly used GPUs that no queued job fits.

        The sample depends only on the cluster's memory state (``version``) and the queue
        (``Queue.version``): it is recomputed only when either changed.
        """
        c = self._cluster
        q = self._queue
        cv = c.version  # (each read once: a plain object's and an extension type's attribute)
        qv = q.version
        if cv != self._frag_cv or qv != self._frag_qv:
            need = q.least_offline_mem()
            val = None
            if cython.compiled and len(self._caps) < _FRAG_LOOP_GPUS:  # (the fleet's GPUs)
                # a typed loop on a small fleet (numpy's fixed cost per pass was most of it);
                # interpreted, the passes below (tests/test_typed_components.py compares them)
                sv = _views_of(c)
                val = frag_sum(self._caps, sv.mem_decl, sv.n_res, need)
            if val is None:
                free = c.mem_cap - c.mem_decl
                part = (c.n_res > 0) & (free > 1e-9) & (free < need)
                val = float((free[part] / c.mem_cap[part]).sum())
            self._frag_val = val
            self._frag_cv = cv
            self._frag_qv = qv
        return self._frag_val
