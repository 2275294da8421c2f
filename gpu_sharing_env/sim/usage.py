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
    """A typed view of a ``g_util`` array, for :meth:`FleetUsage.set_row` (compiled). A pickle
    or deep copy of one is None (as the cluster's ``_StateViews``): a copied usage builds a
    view of its own array (a view of the original's would write the original's)."""

    src: object
    v: cython.double[:]

    def __init__(self, arr: np.ndarray) -> None:
        self.src = arr
        self.v = arr

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


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
        "_ts",
        "_util_view",
        "g_util",
        "sums",
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
        #: A typed view of ``g_util`` (compiled; built on first use: :meth:`set_row`).
        self._util_view: _UtilView | None = None
        #: Per GPU (Python floats, read on the hot path): :data:`GpuRow`.
        self._rows: list[GpuRow] = []
        #: The rows' sums over the fleet.
        self.sums = [0.0] * 7
        #: The timeseries' rows (:attr:`timeseries`) one after another, six floats a tick (no
        #: tuple kept a tick: a container that lives on makes the cyclic GC run more often).
        self._ts: list[float] = []
        self._frag_cv = self._frag_qv = -1  # (cluster, queue) versions of ``_frag_val``
        self._frag_val = 0.0

    def reset(self, jobs: dict[int, JobState]) -> None:
        g = self._cluster.n_gpus
        self._jobs = jobs
        self.g_util = np.zeros(g)
        self._rows = [(0.0,) * 7] * g  # type: ignore[list-item]
        self.sums = [0.0] * 7
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

    def set_gpu(self, g: int, new: GpuRow) -> None:
        """GPU ``g``'s new row; the fleet sums move by the difference, element by element
        (``s[k] += new[k] - old[k]``: :meth:`set_row`)."""
        self.set_row(g, new[0], new[1], new[2], new[3], new[4], new[5], new[6])

    @cython.locals(
        gi=cython.Py_ssize_t, k=cython.Py_ssize_t, a=cython.double, b=cython.double,
        t=cython.double, old=tuple, new=tuple, s=list, uv=_UtilView,
    )  # fmt: skip
    def set_row(
        self, g: int, util: float, sm: float, mem: float, busy: float, stp: float,
        over: float, hosts: float,
    ) -> None:  # fmt: skip
        """:meth:`set_gpu` of the row ``(util, sm, mem, busy, stp, over, hosts)``, its values
        as arguments: compiled, a C call with seven C doubles (from ``Rates.gpu_fractions``),
        the old row's values read as C doubles, the sums moved in C doubles (the same IEEE
        operations as the Python floats') and ``g_util``'s element written through a typed
        view (:class:`_UtilView`), where a tuple was read generically and the element written
        by numpy's ``setitem``."""
        gi = g
        old = self._rows[gi]
        new = (util, sm, mem, busy, stp, over, hosts)
        s = self.sums
        for k in range(7):  # (compiled, each value a C double: the floats' own values)
            a = new[k]
            b = old[k]
            t = s[k]
            s[k] = t + (a - b)
        self._rows[gi] = new
        if cython.compiled:
            uv = self._util_view
            if uv is None or uv.src is not self.g_util:
                uv = self._util_view = _UtilView(self.g_util)
            uv.v[gi] = util
        else:
            self.g_util[g] = util

    def row(self, g: int) -> GpuRow:
        """GPU ``g``'s row (SysMonitor's device metrics)."""
        return self._rows[g]

    def rows(self) -> list[GpuRow]:
        """Every GPU's row (a copy)."""
        return list(self._rows)

    @cython.locals(s=list, x=cython.double)
    def integrate(self, acc: Accumulator, dt: float, in_system: int) -> None:
        """Add ``dt`` seconds at the current rows' sums (and ``in_system`` offline jobs).

        Compiled, ``acc``'s integrals are C doubles (``accumulator.pxd``) and each sum is read
        as one: the same IEEE multiplication and addition as the interpreted floats'."""
        s = self.sums
        x = s[0]
        acc.util_s += x * dt
        x = s[1]
        acc.sm_s += x * dt
        x = s[2]
        acc.mem_s += x * dt
        x = s[3]
        acc.busy_gpu_s += x * dt
        x = s[4]
        acc.stp_s += x * dt
        x = s[5]
        acc.oversold_s += x * dt
        x = s[6]
        acc.online_gpu_s += x * dt
        acc.in_system_s += in_system * dt
        acc.elapsed_s += dt

    def record(self, now: float, p99_max: float) -> None:
        """A load tick's timeseries row at ``now``."""
        g = self._n_gpus_f
        s = self.sums
        ts = self._ts
        ts.append(now)
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
        if c.version != self._frag_cv or q.version != self._frag_qv:
            need = q.least_offline_mem()
            val = None
            if cython.compiled and c.n_gpus < _FRAG_LOOP_GPUS:
                # a typed loop on a small fleet (numpy's fixed cost per pass was most of it);
                # interpreted, the passes below (tests/test_typed_components.py compares them)
                sv = _views_of(c)
                val = frag_sum(self._caps, sv.mem_decl, sv.n_res, need)
            if val is None:
                free = c.mem_cap - c.mem_decl
                part = (c.n_res > 0) & (free > 1e-9) & (free < need)
                val = float((free[part] / c.mem_cap[part]).sum())
            self._frag_val = val
            self._frag_cv = c.version
            self._frag_qv = q.version
        return self._frag_val
