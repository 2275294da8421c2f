"""The scheduling policies of Alibaba PAI (Weng et al., "MLaaS in the Wild: Workload Analysis and
Scheduling in Large-Scale Heterogeneous GPU Clusters", NSDI'22; notes in
``../shared/seeds/001_*.txt``): reserving-and-packing, load balancing, and shortest-job-first on
durations predicted from recurring jobs.

Common to ``reserve_pack`` and ``load_balance`` (PAI's GPU sharing, Sec. 4.2): a task is granted
what it requests. A fractional request (``gpu_frac < 1``) is packed with others under
time-sharing as long as the requested fractions on the GPU sum to at most 1 (the memory is the
declared share; compute is time-multiplexed, not partitioned); a whole-GPU request or a gang gets
whole GPUs exclusively, one node preferred.

``reserve_pack`` — reserving-and-packing (Sec. 6.3), the production policy:

* **High-GPU tasks** are those whose *compute efficiency* passes ``efficiency_threshold``. The
  performance model is ``gpus requested x profiled duty x speed-up of the model on the best
  high-end GPU over the best low-end GPU in the fleet`` (public profiles via
  ``ClusterView.solo_speed``), or a type constraint that only allows high-end GPUs (PAI's
  high-GPU NLP tasks). High-end GPUs are the types with at least ``high_end_tflops`` dense FP16
  tensor TFLOPS (V100, A10, A100, H100); T4 and P100 are low-end.
* **Ordered schedule plans with timeouts.** Each task has one plan per GPU type in the fleet: by
  decreasing capability for high-GPU tasks, increasing for the others (packed onto older GPUs).
  Plan ``k`` becomes usable once the task has waited ``k * plan_timeout_s``; the earliest usable
  plan with a legal placement wins. So high-end GPUs stay reserved for high-GPU tasks until
  another task has waited through its earlier plans.
* Online services are neither: their plans start with the least capable GPU types that serve
  their peak load (peak rate x profiled batch latency below ``service_max_duty``).
* High-GPU tasks in the window (or the queue) are considered before the others (they come from
  business-critical applications, Sec. 6.3).
* **Load balancing as the second criterion** inside a plan: the least-loaded node among the
  plan's GPUs first (load = mean of the node's GPU and GPU-memory allocation rates), then — for
  fractional tasks — the fullest GPU of that node that still fits (packing).

``load_balance`` — the "Balanced" policy R&P is compared against: FIFO over the window, no type
preference, the least-loaded node and then its least-allocated GPU among legal placements.

Both take the queue window by default (the jobs a Gymnasium action can name); a subclass that
declares ``decision_scope = "queue"`` schedules from the whole queue, as PAI's scheduler does
(``gpu_sharing_gym.fidelity.pai`` runs them so).

``sjf_predicted`` — shortest job first on predicted durations (Sec. 5): online services first
(they have no duration to order by), then the *whole queue* (as PAI's simulator; it declares
``decision_scope = "queue"``, so the runner lets it place any queued job and stops at every
instant where some queued job fits) in increasing ``est_remaining_s`` (the recurring-job
predictor's ``est_work_s`` less observed progress), each job placed as ``first_fit`` places it
(MPS by memory at the SM share of its request), so only the order differs from a first fit
over the same queue. Under the Gymnasium env (``act``) it orders the env's queue window, the
only jobs an action can name.

Simplified: PAI's node load also counts CPU allocation; ``ClusterView`` does not expose node vCPU
capacity or use, so CPU is left out (core change: expose ``node_vcpus`` / ``node_cpu_used``).
Plan timeouts are checked at the runner's decision points (arrivals and completions while a
queued job is placeable), not at the instant they expire. SJF is non-preemptive and
work-conserving: a longer job that fits runs while a shorter one cannot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from heapq import heappop, heappush
from typing import Any

import numpy as np

try:  # compiled (gpu_sharing_env._compile): extension types below; interpreted: no-ops
    import cython
except ModuleNotFoundError:  # pragma: no cover
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

if cython.compiled:  # C's floor division pieces (``_floordiv``)
    from cython.cimports.libc.math import copysign, floor, fmod

from gpu_sharing_env.physics.hardware import GpuType
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.base import HeuristicPolicy, per_options
from gpu_sharing_gym.baselines.gandiva import est_duty, exclusive_option, shared_option
from gpu_sharing_gym.baselines.reference import first_fit_options, first_fit_order

#: Dense FP16 tensor TFLOPS from which a GPU type counts as high-end (V100: 125; T4: 65).
HIGH_END_TFLOPS = 100.0


def is_high_end(gt: GpuType, tflops: float = HIGH_END_TFLOPS) -> bool:
    return gt.fp16_tensor_tflops >= tflops


def _capability(gt: GpuType) -> tuple[float, float]:
    return (gt.fp16_tensor_tflops, gt.mem_gb)


_FleetStatic = tuple[int, np.ndarray, np.ndarray, bool, np.ndarray, np.ndarray, list[float]]
_FLEET: dict[int, tuple[tuple[str, ...], _FleetStatic]] = {}


def _fleet_static(view: ClusterView) -> _FleetStatic:
    """Per fleet (cached): nodes, GPUs per node, GPU memory per node, whether every node's
    GPUs are contiguous in GPU order; the GPUs ordered by type, where each type starts there
    and the largest GPU memory of each type."""
    key = view.type_name  # static: the same tuple in every snapshot of a simulator
    hit = _FLEET.get(id(key))
    if hit is None or hit[0] is not key:
        node_of = np.asarray(view.node_of)
        n_nodes = int(node_of.max()) + 1
        tix = np.asarray(view.type_idx)
        by_type = np.argsort(tix, kind="stable")
        static = (
            n_nodes,
            np.bincount(node_of, minlength=n_nodes),
            np.bincount(node_of, view.mem_cap_gb, n_nodes),
            bool(np.all(node_of[1:] >= node_of[:-1])),
            by_type,
            starts := np.searchsorted(tix[by_type], np.arange(len(view.type_names))),
            np.maximum.reduceat(np.asarray(view.mem_cap_gb)[by_type], starts).tolist(),
        )
        if len(_FLEET) > 16:
            _FLEET.clear()
        hit = _FLEET[id(key)] = (key, static)
    return hit[1]


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)  # (raises nothing)
@cython.locals(a=cython.double, frac=cython.double)
@cython.returns(cython.bint)
def _has_room(a: float, frac: float) -> bool:
    """:func:`_room` of one GPU's allocation ``a`` (a fraction below 1.0 fits on top of it
    within 1e-9; a whole GPU needs it empty), C-callable: the test the typed loops below
    (:meth:`Allocation.room`, :func:`_span_least_loaded`, :func:`_kept_holds`) ask per GPU."""
    return a + frac <= 1.0 + 1e-9 if frac < 1.0 else a == 0


@cython.cclass
class Allocation:
    """PAI's allocation accounting of one snapshot: requested GPU fractions per GPU and the
    per-node load (mean of GPU and GPU-memory allocation rates)."""

    # Compiled, the fields of an extension type (C struct slots, not an instance dict);
    # public: the tests read them.
    _by_type = cython.declare(object, visibility="public")
    _empty_prefix = cython.declare(object, visibility="public")
    #: The fleet (``ClusterView.type_name``, ``_fleet_static``'s key) of the facts below.
    _fleet = cython.declare(object, visibility="public")
    _mem_used = cython.declare(object, visibility="public")
    _n_res = cython.declare(object, visibility="public")
    _node = cython.declare(object, visibility="public")
    _node_static = cython.declare(tuple, visibility="public")
    _one_node = cython.declare(dict, visibility="public")
    _type_mem = cython.declare(list, visibility="public")
    _type_min = cython.declare(list, visibility="public")
    _type_start = cython.declare(object, visibility="public")
    _view = cython.declare(object, visibility="public")
    contiguous = cython.declare(object, visibility="public")
    gpu = cython.declare(object, visibility="public")
    node_of = cython.declare(object, visibility="public")
    node_state = cython.declare(object, visibility="public")

    def __init__(self, view: ClusterView) -> None:
        self._fleet = None
        self.renew(view)
        #: Where set (a policy's, kept across decisions), :meth:`one_node` reads its empty runs.
        self.node_state = None

    @cython.ccall
    def renew(self, view: ClusterView) -> None:
        """Make this the allocation of ``view``'s state, as ``Allocation(view)`` would be (its
        :attr:`node_state` kept): a policy renews one object at every decision instead of
        building one (the fleet's facts, ``_fleet_static``, taken again only for a new
        fleet)."""
        # The residents' requested fractions summed per GPU in residence order (maintained by
        # the cluster as residents come and go, not re-summed over the fleet here).
        # (the view's arrays: read-only numpy arrays already)
        self.gpu = view.frac_used
        if self._fleet is not view.type_name:  # (``_fleet_static``'s key)
            (
                n_nodes, gpus, mem_cap, self.contiguous, self._by_type, self._type_start,
                self._type_mem,
            ) = _fleet_static(view)  # fmt: skip
            self._node_static = (n_nodes, gpus, mem_cap)
            self._fleet = view.type_name
        self._mem_used = view.mem_used_gb
        self._node = None
        self.node_of = view.node_of
        self._n_res = view.n_res
        self._empty_prefix = None
        self._type_min = None
        self._one_node = {}
        self._view = view

    @property
    def node(self) -> np.ndarray:
        """Per node: the mean of its GPU and GPU-memory allocation rates."""
        if self._node is None:
            n_nodes, gpus, mem_cap = self._node_static
            gpu_rate = np.bincount(self.node_of, np.minimum(self.gpu, 1.0), n_nodes) / gpus
            mem_rate = np.bincount(self.node_of, self._mem_used, n_nodes) / mem_cap
            self._node = (gpu_rate + mem_rate) / 2.0
        return self._node

    @property
    def empty_prefix(self) -> np.ndarray:
        """Empty GPUs among the first ``g`` GPUs, for ``g`` in ``0 .. n_gpus``."""
        if self._empty_prefix is None:
            self._empty_prefix = np.concatenate(([0], np.cumsum(self._n_res == 0)))
        return self._empty_prefix

    def one_node(self, n: int) -> np.ndarray:
        """Per GPU ``g``: :func:`gpu_sharing_gym.baselines.gandiva.one_node_empty` of ``(g, n)``, for ``n`` >= 2
        (:func:`one_node_empty_starts` of every GPU; memoised per ``n``)."""
        ok = self._one_node.get(n)
        if ok is None:
            n_gpus = self.gpu.size
            if not self.contiguous:
                ok = one_node_empty_starts(self._view, np.arange(n_gpus), n, self)
            elif self.node_state is not None:
                # n empty GPUs of one node from g on (nodes contiguous: the span's ends agree)
                ok = self.node_state.empty_runs(self._view) >= n
            else:
                ok = np.zeros(n_gpus, dtype=bool)
                if n <= n_gpus:
                    empty = self.empty_prefix
                    same = self.node_of[n - 1 :] == self.node_of[: n_gpus - n + 1]
                    ok[: n_gpus - n + 1] = (empty[n:] - empty[: n_gpus - n + 1] == n) & same
            self._one_node[n] = ok
        return ok

    @cython.ccall
    @cython.locals(mem=cython.double, frac=cython.double, c=cython.double, t=cython.Py_ssize_t)
    @cython.locals(least=list, cap=list)
    def room(self, types: list[int], job: JobView) -> bool:
        """Whether some GPU of ``types`` (type indices) may hold a candidate of ``job``: the
        type's GPU memory holds the request (with a margin far above the legality check's
        tolerance) and a GPU has the allocation room :func:`pai_candidate_gpus` asks (nothing
        allocated for a whole GPU, ``gpu_frac`` more within 1 otherwise). Its candidates are a
        subset of those GPUs: without any, it has none there."""
        if self._type_min is None:
            if self.node_state is not None:
                self._type_min = self.node_state.type_min(self._view)
            else:
                by_type = self.gpu[self._by_type]
                self._type_min = np.minimum.reduceat(by_type, self._type_start).tolist()
        # (Allocations are sums of positive fractions: some GPU has none iff the least is 0;
        # adding ``frac`` is monotonic in floats, so the least fits iff some GPU does.)
        least, cap, mem, frac = self._type_min, self._type_mem, job.mem_gb, job.gpu_frac
        for t in types:
            c = cap[t]  # (compiled, C doubles: the same IEEE sum and comparison)
            if mem <= c + 1e-3 and _has_room(least[t], frac):
                return True
        return False

    def node_load(self, gpu: int) -> float:
        return float(self.node[self.node_of[gpu]])


@cython.cclass
class NodeState:
    """Per-node facts of :class:`Allocation` kept across the decisions of one episode, updated
    only for the nodes whose GPUs changed since (``ClusterView.watch_gpus``):

    * :meth:`loads`: :attr:`Allocation.node`, each node summed over its GPUs in GPU order from
      0.0 as ``np.bincount`` sums, so the same floats as a recomputation over the fleet;
    * :meth:`empty_runs`: per GPU, how many empty GPUs of its node start there (itself and
      those after it), so that on a fleet whose nodes are contiguous in GPU order a span of
      ``n`` empty GPUs on one node starts at ``g`` iff ``runs[g] >= n``
      (:meth:`Allocation.one_node`);
    * :meth:`type_min`: per GPU type, the least allocation of its GPUs (what
      :meth:`Allocation.room` asks), from a count per type of its unallocated GPUs;
    * :meth:`gpu_loads`: per GPU, its node's load (the same floats as :meth:`loads`),
      :meth:`gpu_zero`: per GPU, whether that load is 0.0, and :meth:`zero_load_empty`:
      whether every node whose load is not positive is empty (so its load and its GPUs'
      allocations are exactly 0.0: ``ReservePack._pick``'s and ``_single_pick``'s shortcut).
    """

    # Compiled, the fields of an extension type (C struct slots, not an instance dict);
    # public: the tests read them.
    _alloc_of = cython.declare(list, visibility="public")
    _changed = cython.declare(object, visibility="public")
    _dirty_alloc = cython.declare(set, visibility="public")
    _dirty_load = cython.declare(set, visibility="public")
    _dirty_runs = cython.declare(set, visibility="public")
    _episode = cython.declare(object, visibility="public")
    _fleet = cython.declare(object, visibility="public")
    _gpu_load = cython.declare(object, visibility="public")
    _gpu_zero = cython.declare(object, visibility="public")
    _gpus = cython.declare(list, visibility="public")
    _least = cython.declare(list, visibility="public")
    _mem_cap = cython.declare(list, visibility="public")
    _n_gpus = cython.declare(list, visibility="public")
    _n_zero = cython.declare(object, visibility="public")
    _node = cython.declare(object, visibility="public")
    _node_of = cython.declare(list, visibility="public")
    _node_span = cython.declare(list, visibility="public")
    _odd = cython.declare(set, visibility="public")
    _runs = cython.declare(object, visibility="public")
    _since = cython.declare(object, visibility="public")
    _stale = cython.declare(set, visibility="public")
    _type_gpus = cython.declare(list, visibility="public")
    _type_of = cython.declare(list, visibility="public")
    _zeros = cython.declare(list, visibility="public")
    # Compiled, typed memoryviews of the arrays above (``_node``, ``_gpu_load``, ``_gpu_zero``
    # as bytes, ``_runs``: taken when each is made) and of the view's state arrays (read-only,
    # so ``const``; taken again when the episode's arrays are new: ``_arrays``), which the
    # loops of :meth:`loads` and :meth:`empty_runs` read and write as C values; interpreted,
    # the arrays themselves.
    _node_mv = cython.declare(cython.double[:])
    _load_mv = cython.declare(cython.double[:])
    _zero_mv = cython.declare(cython.uchar[:])
    _runs_mv = cython.declare(cython.longlong[:])
    #: Per GPU: the first GPU after it on another node (the end of its run of one node's GPUs
    #: in GPU order, which share its node's load); an array, compiled read as a typed view.
    _run_end = cython.declare(object, visibility="public")
    #: GPU ``lo`` -> ``h``: no GPU of ``lo .. h - 1`` is on a node of load 0.0 (what a scan from
    #: ``lo``, ``_first_zero_start``, found; lowered where such a node gets load 0.0; emptied
    #: with the loads).
    _zero_hint = cython.declare(dict, visibility="public")
    _run_end_mv = cython.declare(cython.longlong[:])
    _src = cython.declare(tuple)
    _frac_mv = cython.declare(cython.const_double[:])
    _mem_mv = cython.declare(cython.const_double[:])
    _nres_mv = cython.declare(cython.const_longlong[:])

    def __init__(self) -> None:
        self._src = ()
        self._episode = None
        self._fleet = None
        self._changed = set()
        self._dirty_load = set()
        self._dirty_runs = set()
        self._dirty_alloc = set()
        self._node = None
        #: Per GPU: ``_node`` of its node (kept with it).
        self._gpu_load = None
        #: The nodes with residents whose load is not positive (none but in float drift).
        self._odd = set()
        self._runs = None
        self._run_end = None
        self._zero_hint = {}
        self._gpus = []
        self._node_span = None
        self._node_of = []
        self._n_gpus = []
        self._mem_cap = []
        self._type_of = []
        #: Per GPU type: its least allocation (``frac_used``), its GPUs whose allocation is
        #: 0.0, the types whose least is to be recomputed; per GPU, its allocation as last read.
        self._least = None
        self._zeros = []
        self._stale = set()
        self._alloc_of = []
        #: Per type, its GPUs (ascending).
        self._type_gpus = []
        #: Per GPU: its node's load is 0.0 (``_gpu_load == 0.0``, kept with it); how many
        #: nodes have load 0.0.
        self._gpu_zero = None
        self._n_zero = 0
        #: The GPUs changed since the last :meth:`take_changed` (of this episode).
        self._since = set()

    @cython.ccall
    @cython.locals(changed=set, nodes=set)
    def _sync(self, view: ClusterView) -> None:
        if self._episode is not view.episode:
            self._episode = view.episode
            self._changed = view.watch_gpus()
            self._since = set()
            self._node = self._gpu_load = self._gpu_zero = self._runs = self._least = None
            self._dirty_load, self._dirty_runs, self._dirty_alloc = set(), set(), set()
            if self._fleet is not view.type_name:  # (the key of ``_fleet_static``)
                self._new_fleet(view)
            return
        changed = self._changed
        if changed:
            node_of = self._node_of
            nodes = {node_of[g] for g in changed}
            # (``|=``: ``set.update``'s own steps, without a method call each)
            self._dirty_alloc |= changed
            self._since |= changed
            changed.clear()
            self._dirty_load |= nodes
            self._dirty_runs |= nodes

    def _new_fleet(self, view: ClusterView) -> None:
        """The fleet's static facts (:meth:`_sync`, at an episode on a new fleet)."""
        self._fleet = view.type_name
        n_nodes, gpus, mem_cap = _fleet_static(view)[:3]
        node_of = np.asarray(view.node_of)
        self._node_of = node_of.tolist()
        self._gpus = [[] for _ in range(n_nodes)]
        for g, n in enumerate(self._node_of):
            self._gpus[n].append(g)
        # Per node, its GPUs as a range (first, last + 1) where every node's are one
        # (then its empty runs are taken GPU by GPU over that range); else None.
        spans = [(gs[0], gs[-1] + 1) if gs else (0, 0) for gs in self._gpus]
        contiguous = all(b - a == len(gs) for (a, b), gs in zip(spans, self._gpus, strict=True))
        self._node_span = spans if contiguous else None
        n_gpus = node_of.size
        # (a run ends where the next GPU's node differs, and at the last GPU)
        cuts = np.flatnonzero(node_of[1:] != node_of[:-1]) + 1
        run_ends = np.append(cuts, n_gpus)
        self._run_end = np.repeat(run_ends, np.diff(np.concatenate(([0], run_ends)))).astype(
            np.int64
        )
        self._run_end_mv = self._run_end
        self._n_gpus, self._mem_cap = gpus.tolist(), mem_cap.tolist()
        self._type_of = np.asarray(view.type_idx).tolist()
        by_type, starts = _fleet_static(view)[4:6]
        ends = [*starts.tolist()[1:], len(by_type)]
        self._type_gpus = [np.sort(by_type[a:b]) for a, b in zip(starts, ends, strict=True)]

    @cython.ccall
    def take_changed(self, view: ClusterView) -> set[int] | None:
        """The GPUs whose state changed since the last call (None: the first call of an
        episode, when everything is new)."""
        if self._episode is not view.episode:
            self._sync(view)
            return None
        self._sync(view)
        out, self._since = self._since, set()
        return out

    @cython.ccall
    def node_gpus(self, node: int) -> list[int]:
        """Node ``node``'s GPUs in GPU order (of the fleet of the last sync)."""
        return self._gpus[node]

    @cython.ccall
    def node_of(self, gpu: int) -> int:
        return self._node_of[gpu]

    @cython.ccall
    def nodes_of(self, gpus: Iterable[int]) -> set[int]:
        """The nodes of ``gpus`` (of the fleet of the last sync)."""
        node_of = self._node_of
        return {node_of[g] for g in gpus}

    @cython.ccall
    @cython.locals(v=cython.double, old=cython.double)
    def type_min(self, view: ClusterView) -> list[float]:
        """Per GPU type (``type_names`` order): the least ``frac_used`` of its GPUs.

        Kept per type from the changed GPUs only: a value below the least is the new least;
        a GPU that held the least and rose leaves the type to be taken again, as 0.0 where the
        type has a GPU of allocation 0.0 (counted per type: allocations are sums of positive
        fractions, ``Cluster``'s ``frac_decl`` the ``sum`` of the residents' fractions, 0
        without any, so never below 0.0), else by a reduction over the type's GPUs."""
        self._sync(view)
        frac = view.frac_used
        least, zeros, stale = self._least, self._zeros, self._stale
        if least is None:
            alloc_of = self._alloc_of = np.asarray(frac).tolist()
            n_types = len(self._type_gpus)
            least = self._least = [0.0] * n_types
            zeros = self._zeros = [0] * n_types
            type_of = self._type_of
            for g, v in enumerate(alloc_of):
                if v == 0.0:
                    zeros[type_of[g]] += 1
            stale.update(range(n_types))
            self._dirty_alloc = set()
        elif self._dirty_alloc:
            alloc_of, type_of = self._alloc_of, self._type_of
            self._arrays(view)
            for g in self._dirty_alloc:
                v, old = self._frac_mv[g], alloc_of[g]
                if v != old:
                    t = type_of[g]
                    zeros[t] += (1 if v == 0.0 else 0) - (1 if old == 0.0 else 0)
                    alloc_of[g] = v
                    if t not in stale:
                        if v < least[t]:
                            least[t] = v  # (a lower value: the new least)
                        elif old == least[t]:
                            stale.add(t)  # (the least may have risen)
            self._dirty_alloc = set()
        if stale:
            for t in stale:
                least[t] = 0.0 if zeros[t] else float(frac[self._type_gpus[t]].min())
            stale.clear()
        return list(least)

    @cython.ccall
    def _arrays(self, view: ClusterView) -> None:
        """The typed views of ``view``'s state arrays, taken again where they are new (the
        episode's arrays: the same objects in every view of it)."""
        frac, mem, n_res = view.frac_used, view.mem_used_gb, view.n_res
        src = self._src
        if not src or src[0] is not frac or src[1] is not mem or src[2] is not n_res:
            self._src = (frac, mem, n_res)
            self._frac_mv, self._mem_mv, self._nres_mv = frac, mem, n_res

    @cython.ccall
    def loads(self, view: ClusterView, alloc: Allocation) -> np.ndarray:
        """Per node: its load in ``view``'s state (``alloc``: an allocation of that state)."""
        self._sync(view)
        out = self._node
        if out is None:
            out = self._node = alloc.node.copy()
            node_of = alloc.node_of
            self._gpu_load = out[node_of]
            self._gpu_zero = self._gpu_load == 0.0
            self._node_mv, self._load_mv = out, self._gpu_load
            self._zero_mv = self._gpu_zero.view(np.uint8)
            self._zero_hint = {}
            self._n_zero = int(np.count_nonzero(out == 0.0))
            held = np.bincount(node_of, np.asarray(view.n_res) > 0, out.size) > 0
            self._odd = set(np.flatnonzero(held & (out <= 0.0)).tolist())
            self._dirty_load = set()
            return out
        if self._dirty_load:
            self._update_loads(view)
        return out

    @cython.ccall
    @cython.locals(g=cython.Py_ssize_t, gs=cython.double, ms=cython.double, f=cython.double)
    @cython.locals(v=cython.double, n_gpus=cython.double, mem_cap=cython.double)
    @cython.locals(busy=cython.bint, zero=cython.bint, was_zero=cython.bint)
    def _update_loads(self, view: ClusterView) -> None:
        """:meth:`loads` of the nodes changed since: each summed over its GPUs in GPU order
        from 0.0 (``np.bincount``'s order, the same double operations), its GPUs' loads and
        zero flags written with it."""
        self._arrays(view)
        odd = self._odd
        for n in self._dirty_load:
            gs = 0.0
            ms = 0.0
            busy = False
            gpus = self._gpus[n]
            for g in gpus:
                f = self._frac_mv[g]
                gs += f if f < 1.0 else 1.0  # np.minimum(frac, 1.0)
                ms += self._mem_mv[g]
                busy = busy or self._nres_mv[g] > 0
            was_zero = self._node_mv[n] == 0.0
            n_gpus, mem_cap = self._n_gpus[n], self._mem_cap[n]
            v = (gs / n_gpus + ms / mem_cap) / 2.0
            self._node_mv[n] = v
            zero = v == 0.0
            for g in gpus:
                self._load_mv[g] = v
            if zero != was_zero:
                self._n_zero += 1 if zero else -1
                for g in gpus:
                    self._zero_mv[g] = zero
                if zero and self._zero_hint:
                    self._lower_hints(gpus)
            if busy and v <= 0.0:
                odd.add(n)
            else:
                odd.discard(n)
        self._dirty_load = set()

    @cython.ccall
    @cython.locals(g=cython.Py_ssize_t, k=cython.Py_ssize_t, h=cython.Py_ssize_t)
    @cython.locals(first=cython.Py_ssize_t, last=cython.Py_ssize_t, hints=dict)
    def _lower_hints(self, gpus: list[int]) -> None:
        """Keep :attr:`_zero_hint` true where the node of ``gpus`` has just got load 0.0: a
        range that held one of them now ends there."""
        hints = self._zero_hint
        first, last = gpus[0], gpus[-1]  # (ascending)
        for k, h in hints.items():
            if last < k or first >= h:
                continue  # (none of them in ``k .. h - 1``)
            for g in gpus:
                if k <= g < h:
                    hints[k] = g  # (a value replaced: the dict's size unchanged)
                    break

    @cython.ccall
    def gpu_loads(self, view: ClusterView, alloc: Allocation) -> np.ndarray:
        """Per GPU: its node's load (``loads()[node_of]``, the same floats)."""
        self.loads(view, alloc)
        assert self._gpu_load is not None
        return self._gpu_load

    @cython.ccall
    def gpu_zero(self, view: ClusterView, alloc: Allocation) -> np.ndarray:
        """Per GPU: its node's load is 0.0 (``gpu_loads() == 0.0``)."""
        self.loads(view, alloc)
        assert self._gpu_zero is not None
        return self._gpu_zero

    @cython.ccall
    def zero_nodes(self) -> int:
        """How many nodes have load 0.0, as of the last :meth:`loads`."""
        return self._n_zero

    @cython.ccall
    def zero_load_empty(self) -> bool:
        """Whether, as of the last :meth:`loads`, every node with residents has a positive load.
        Then a node of load ``<= 0.0`` is empty: its load is exactly 0.0 (the sums of nothing),
        no node's is lower, and its GPUs' allocations (``frac_used``) are 0.0."""
        return not self._odd

    @cython.ccall
    @cython.locals(k=cython.Py_ssize_t, g=cython.Py_ssize_t, a=cython.Py_ssize_t)
    @cython.locals(b=cython.Py_ssize_t, i=cython.Py_ssize_t)
    def empty_runs(self, view: ClusterView) -> np.ndarray:
        """Per GPU: the empty GPUs of its node from it on without a gap (0: it is not empty)."""
        self._sync(view)
        runs = self._runs
        if runs is None:
            runs = self._runs = np.zeros(view.n_gpus, dtype=np.int64)
            self._runs_mv = runs
            dirty: Iterable[int] = range(len(self._gpus))
        else:
            dirty = self._dirty_runs
        self._arrays(view)
        spans = self._node_span
        for n in dirty:
            k = 0
            if spans is not None:  # (its GPUs a range: ``a`` to ``b - 1``)
                a, b = spans[n]
                for g in range(b - 1, a - 1, -1):
                    k = k + 1 if self._nres_mv[g] == 0 else 0
                    self._runs_mv[g] = k
                continue
            gpus = self._gpus[n]
            for i in range(len(gpus) - 1, -1, -1):
                g = gpus[i]
                k = k + 1 if self._nres_mv[g] == 0 else 0
                self._runs_mv[g] = k
        self._dirty_runs = set()
        return runs


#: Why a request has no candidate (:meth:`ReservePack._usable_candidates`; a GPU, >= 0: a
#: witness elsewhere): no usable GPU is legal with room, or not known.
NO_USABLE = -1
UNKNOWN = -2


@cython.cclass
class _Kept:
    """Why a request has no candidate (:class:`NoCandidates`). Compiled, an extension type
    (its GPU count, fraction and witness C values, its usable GPUs a typed memoryview read by
    :func:`_kept_holds`); interpreted, a plain class."""

    job_id = cython.declare(object, visibility="public")
    option = cython.declare(object, visibility="public")
    n = cython.declare(cython.Py_ssize_t, visibility="public")
    frac = cython.declare(cython.double, visibility="public")
    usable = cython.declare(object, visibility="public")
    witness_node = cython.declare(cython.Py_ssize_t, visibility="public")
    #: ``usable`` as bytes (compiled: a typed memoryview; interpreted: the array).
    _usable_mv = cython.declare(cython.const_uchar[:])

    def __init__(self, job: Any, option: int, usable: np.ndarray | None, witness_node: int) -> None:
        #: A job with the request (its single-GPU legality is the request's) and its option
        #: (-1: none, so never a candidate).
        self.job_id, self.option = job.job_id, option
        self.n, self.frac = job.num_gpus, job.gpu_frac
        #: Per GPU: its type is in a usable plan.
        self.usable = usable
        if usable is not None:
            self._usable_mv = usable.view(np.uint8)
        #: -1: no usable GPU is legal with room. Else a gang's: no usable GPU with room is a
        #: legal one-node start, and this node holds one outside the usable plans.
        self.witness_node = witness_node


@cython.cclass
class NoCandidates:
    """The requests ``reserve_pack`` found without a candidate, kept across its decisions
    while no change of the GPUs since can have given them one, so that they are not asked
    again (a gang waiting for a plan to open is most of a PAI replay's questions).

    A request (its mask signature, GPU fraction and usable plans) has no candidate when

    * **no usable GPU is legal with room** (``pai_column``'s room: ``gpu_frac`` more within 1,
      or nothing allocated for a whole GPU), or
    * (a gang, nodes contiguous in GPU order) **no usable GPU with room starts ``num_gpus``
      legal empty GPUs of its node, and some GPU outside the usable plans does** (the witness):
      candidates are then the usable one-node starts (none), as
      :meth:`ReservePack._usable_candidates` rules.

    Each depends only on the state of single GPUs or of one node: a GPU's legality
    (``ClusterView.single_column``) and room read only that GPU's state, a one-node run only
    its node's. So after a change of GPUs ``C`` the first holds while no usable GPU of ``C``
    is legal with room, and the second while the witness's node is untouched and no node of
    ``C`` holds a usable legal one-node start with room (the witness's run is legal GPU by GPU,
    so it starts a gang whatever the rest of the fleet). Anything else is asked again.
    """

    # Compiled, the fields of an extension type (C struct slots, not an instance dict);
    # public: the tests read them.
    _episode = cython.declare(object, visibility="public")
    _kept = cython.declare(dict, visibility="public")
    _used = cython.declare(set, visibility="public")

    def __init__(self) -> None:
        self._episode = None
        self._kept = {}
        #: The requests asked about (:meth:`has`) or kept since the last :meth:`update`, or
        #: every kept one after a placement (:meth:`note_placed`): the others are forgotten
        #: there (a request that left the window need not be checked).
        self._used = set()

    @cython.locals(nodes=NodeState)
    def update(self, view: ClusterView, nodes: NodeState) -> None:
        """Forget the requests that may have a candidate in ``view``'s state (``nodes``: the
        caller's, which notes the GPUs changed since its last call) or were not asked about
        since the last update."""
        changed = nodes.take_changed(view)
        if self._episode is not view.episode or changed is None:
            self._episode, self._kept = view.episode, {}
        elif self._kept:
            used = self._used
            self._kept = {
                req: k
                for req, k in self._kept.items()
                if req in used and (not changed or _kept_holds(view, nodes, k, changed))
            }
        self._used = set()

    @cython.ccall
    def note_placed(self) -> None:
        """A decision placed a job: every kept request counts as asked about since the last
        update. (The jobs after the one placed were not asked and are still decidable: what is
        kept of their requests stays, checked at the next update as the rest. A request whose
        job left the window is forgotten at the first update after a decision that placed
        none, which asks every decidable job's request.)"""
        self._used.update(self._kept)

    @cython.ccall
    def has(self, req: tuple[object, ...]) -> bool:
        """Whether request ``req`` is known to have no candidate (as of the last update)."""
        if req in self._kept:
            self._used.add(req)
            return True
        return False

    def keep(
        self,
        req: tuple[object, ...],
        job: JobView,
        alloc: Allocation,
        usable: np.ndarray,
        option: int,
        why: int,
    ) -> None:
        """Note that ``job``'s request ``req`` has no candidate now (``usable``: the GPUs of its
        usable plans; ``option``: :func:`pai_option`; ``why``: as
        :meth:`ReservePack._usable_candidates` says), unless why is unknown."""
        self._used.add(req)
        if option < 0:  # (no option: a function of the options and the fraction only)
            self._kept[req] = _Kept(job, option, None, -1)
        elif why == NO_USABLE:
            self._kept[req] = _Kept(job, option, usable, -1)
        elif why >= 0 and alloc.contiguous and alloc.node_state is not None:
            self._kept[req] = _Kept(job, option, usable, alloc.node_state.node_of(why))

    @staticmethod
    def _holds(view: ClusterView, nodes: NodeState, k: _Kept, changed: set[int]) -> bool:
        """Whether what ``k`` says still holds after the GPUs ``changed`` changed
        (:func:`_kept_holds`)."""
        return _kept_holds(view, nodes, k, changed)  # type: ignore[no-any-return]


@cython.ccall  # (C calls here; the tests call it too)
@cython.locals(nodes=NodeState, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, g=cython.Py_ssize_t)
@cython.locals(frac=cython.double, a=cython.double, load=cython.double)
@cython.locals(best=cython.Py_ssize_t, best_load=cython.double, best_a=cython.double)
@cython.boundscheck(False)  # (``lo`` .. ``hi`` - 1 within the fleet)
@cython.wraparound(False)
def _span_least_loaded(view: ClusterView, nodes: NodeState, lo: int, hi: int, frac: float) -> int:
    """``ReservePack._least_loaded`` of the GPUs ``lo .. hi - 1`` with room for ``frac``
    (``_room``), -1 where none has, in one pass over ``nodes``' typed views (its loads up to
    date for ``view``): the least node load, then the greatest allocation, then the lowest GPU
    (``argmin``'s first least, then ``argmax``'s first greatest among the loads equal to it);
    ``_least_loaded``'s zero-load shortcut (the first GPU of load 0.0, where every node of load
    0.0 is empty) is the same GPU, its allocation being 0.0 as every other's of load 0.0.

    Once a GPU is kept, a GPU of a greater load is passed over with the rest of its run of one
    node's GPUs (``_run_end``: they share its load, so none of them can be kept either)."""
    nodes._arrays(view)
    best = -1
    best_load = 0.0
    best_a = 0.0
    g = lo
    while g < hi:
        load = nodes._load_mv[g]
        if best >= 0 and load > best_load:
            g = nodes._run_end_mv[g]  # (the next node's first GPU)
            continue
        a = nodes._frac_mv[g]
        if _has_room(a, frac) and (
            best < 0 or load < best_load or (load == best_load and a > best_a)
        ):
            best, best_load, best_a = g, load, a
        g += 1
    return best


@cython.ccall  # (C calls here; the tests call it too)
@cython.locals(nodes=NodeState, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, g=cython.Py_ssize_t)
@cython.locals(n=cython.longlong, start=cython.Py_ssize_t, seen=cython.Py_ssize_t)
@cython.returns(cython.Py_ssize_t)
@cython.boundscheck(False)  # (``lo`` .. ``hi`` - 1 within the fleet)
@cython.wraparound(False)
def _first_zero_start(nodes: NodeState, lo: int, hi: int, n: int, keyed: bool) -> int:
    """The first GPU of ``lo .. hi - 1`` whose node's load is 0.0 and that starts ``n`` empty
    GPUs of its node (``gpu_zero`` and ``empty_runs >= n``, both up to date; ``n`` 0: any
    GPU of load 0.0), -1 where none does. Compiled, one pass over ``nodes``' typed views, a
    node's GPUs passed over together where its load is not 0.0 (``_run_end``); with ``keyed``
    (``lo`` the start of a span scanned again at later decisions), from where the last scan
    from ``lo`` found the first GPU of load 0.0 (``NodeState._zero_hint``: none before it, nor
    since), which it notes."""
    if not cython.compiled:  # (interpreted: numpy's scan)
        z = nodes._gpu_zero[lo:hi]
        if n > 0:
            z = z & (nodes._runs[lo:hi] >= n)
        i = int(z.argmax()) if z.size else 0
        return lo + i if z.size and z[i] else -1
    start = lo
    if keyed:
        hint = nodes._zero_hint.get(lo)
        if hint is not None:
            start = hint
    seen = -1  # (the first GPU of load 0.0 met)
    g = start
    while g < hi:
        if not nodes._zero_mv[g]:
            g = nodes._run_end_mv[g]  # (its node's GPUs up to there share its load: not 0.0)
            continue
        if seen < 0:
            seen = g
        if n <= 0 or nodes._runs_mv[g] >= n:
            break
        g += 1
    if keyed:
        nodes._zero_hint[lo] = seen if seen >= 0 else max(start, hi)
    return g if g < hi else -1


@cython.ccall  # (C calls here; the tests call it too)
@cython.locals(nodes=NodeState, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, g=cython.Py_ssize_t)
@cython.locals(n=cython.longlong)
@cython.returns(cython.bint)
@cython.boundscheck(False)  # (``lo`` .. ``hi`` - 1 within the fleet)
@cython.wraparound(False)
def _any_start(nodes: NodeState, lo: int, hi: int, n: int) -> bool:
    """Whether some GPU of ``lo .. hi - 1`` starts ``n`` empty GPUs of its node
    (``empty_runs >= n``, up to date)."""
    if not cython.compiled:
        return bool((nodes._runs[lo:hi] >= n).any())
    for g in range(lo, hi):  # noqa: SIM110  (a loop: compiled, no generator made a call)
        if nodes._runs_mv[g] >= n:
            return True
    return False


@cython.cfunc
@cython.locals(nodes=NodeState, k=_Kept, g=cython.Py_ssize_t, h=cython.Py_ssize_t)
@cython.locals(n=cython.Py_ssize_t, frac=cython.double, a=cython.double)
def _kept_holds(view: ClusterView, nodes: NodeState, k: _Kept, changed: set[int]) -> bool:
    """:meth:`NoCandidates._holds`'s body, C-callable (from :meth:`NoCandidates.update`): the
    allocations (``frac_used``) and empty runs read through ``nodes``' typed views."""
    if k.usable is None:
        return True
    frac, n = k.frac, k.n
    nodes._arrays(view)  # (``_frac_mv``: ``view.frac_used``)
    # The GPUs to look at: the changed ones (no usable GPU legal with room), or every GPU
    # of a touched node that starts a run of ``n`` empty ones (no usable one-node start).
    if k.witness_node < 0:
        gpus: Iterable[int] = changed
    else:
        touched = nodes.nodes_of(changed)
        if k.witness_node in touched:
            return False
        nodes.empty_runs(view)  # (``_runs_mv``, brought up to date)
        gpus = [h for node in touched for h in nodes._gpus[node] if nodes._runs_mv[h] >= n]
    for g in gpus:  # none may be usable, with room (``_room``) and legal now
        if not k._usable_mv[g]:
            continue
        a = nodes._frac_mv[g]
        if _has_room(a, frac) and view.single_legal(k.job_id, g, k.option):
            return False
    return True


#: How many GPUs of load 0.0 ``ReservePack._single_pick`` tests one by one in a span before it
#: fetches the legality column (a GPU of an empty node is legal unless unhealthy or not ready,
#: its type being able to hold the request: in the replays the first try always answers).
_ZERO_TRIES = 3


def _room(gpu: Any, frac: float) -> Any:
    """Per GPU: the allocation has room for a request of ``frac`` (``pai_column``'s test); of
    one GPU's allocation (a float), a bool."""
    return gpu + frac <= 1.0 + 1e-9 if frac < 1.0 else gpu == 0


def pai_candidates(view: ClusterView, job: JobView, alloc: Allocation) -> list[tuple[int, int]]:
    """Legal (gpu, option) placements under PAI's grant-what-is-requested sharing rule."""
    gpus, o = pai_candidate_gpus(view, job, alloc)
    return [(int(g), o) for g in gpus]


_NONE = np.zeros(0, dtype=np.int64)


def one_node_empty_starts(
    view: ClusterView, starts: np.ndarray, n: int, alloc: Allocation | None = None
) -> np.ndarray:
    """:func:`gpu_sharing_gym.baselines.gandiva.one_node_empty` of every GPU in ``starts`` at once."""
    alloc = alloc if alloc is not None else Allocation(view)
    n_res = np.asarray(view.n_res)
    node_of = np.asarray(view.node_of)
    if n < 2 or not alloc.contiguous:  # GPU by GPU
        ok = starts + n <= view.n_gpus
        node0 = node_of[starts]
        for k in range(n):
            g = np.minimum(starts + k, view.n_gpus - 1)
            ok &= (n_res[g] == 0) & (node_of[g] == node0)
        return ok
    # Contiguous nodes: the span is on one node iff its ends are; empty iff it counts n empty.
    empty = alloc.empty_prefix
    ok = starts + n <= view.n_gpus
    s = starts[ok]
    ok[ok] = (empty[s + n] - empty[s] == n) & (node_of[s + n - 1] == node_of[s])
    return ok


def lexmin(gpus: np.ndarray, *keys: Callable[[np.ndarray], np.ndarray]) -> int:
    """The GPU of ``gpus`` (ascending) with the lexicographically smallest ``(*keys, gpu)``:
    ``min(zip(*keys, gpus))`` by successive filtering (exact, no NaN keys). Each key maps GPUs
    to their values and is read only on the GPUs the keys before it left (on an idle fleet
    every GPU is a candidate, and the first key usually leaves few)."""
    sel = gpus
    for key in keys:
        if sel.size == 1:  # (one GPU left: the keys after cannot change the answer)
            break
        k = key(sel)
        sel = sel[k == k.min()]
    return int(sel[0])


def pai_candidate_gpus(
    view: ClusterView, job: JobView, alloc: Allocation
) -> tuple[np.ndarray, int]:
    """:func:`pai_candidates` as (GPUs ascending, the option they all share); no GPUs: none."""
    o = pai_option(view, job)
    if o < 0:
        return _NONE, -1
    starts = np.flatnonzero(pai_column(view, job, alloc, o))
    if job.num_gpus > 1:
        local = starts[one_node_empty_starts(view, starts, job.num_gpus, alloc)]
        starts = local if local.size else starts
    return starts, o


@cython.cclass
class PaiRequest:
    """An offline job's request as ``reserve_pack`` reads it (the :class:`JobView` fields of
    that name, from ``ClusterView.request``: no view built per new job). Interpreted, a plain
    class; compiled, an extension type (its fields C struct slots)."""

    job_id = cython.declare(object, visibility="public")
    num_gpus = cython.declare(object, visibility="public")
    gpu_frac = cython.declare(object, visibility="public")
    mem_gb = cython.declare(object, visibility="public")
    gpu_types = cython.declare(tuple, visibility="public")
    model = cython.declare(object, visibility="public")
    #: An online service's request is its :class:`JobView` (its plans read its profile).
    online = cython.declare(object, visibility="public")
    service = cython.declare(object, visibility="public")

    def __init__(
        self,
        job_id: int,
        num_gpus: int,
        gpu_frac: float,
        mem_gb: float,
        gpu_types: tuple[str, ...],
        model: str,
    ) -> None:
        self.job_id, self.num_gpus, self.gpu_frac = job_id, num_gpus, gpu_frac
        self.mem_gb, self.gpu_types, self.model = mem_gb, gpu_types, model
        self.online = False
        self.service = None


#: A queued job's (high-GPU, GPU types in the order tried, its request (a :class:`PaiRequest`,
#: or an online service's view as first seen), the ids of its request
#: (``ReservePack._request_ids``: what the room test reads, and all of it), GPUs), read once (a
#: job's request never changes).
_PlanInfo = tuple[bool, tuple[str, ...], Any, int, int, int]


@cython.ccall
@cython.returns(cython.double)
@cython.locals(a=cython.double, b=cython.double, mod=cython.double, div=cython.double)
@cython.locals(q=cython.double)
def _floordiv(a: float, b: float) -> float:
    """Python's ``a // b`` of two floats (``b`` not 0). Compiled, C doubles through CPython's
    own steps (``Objects/floatobject.c``, ``_float_div_mod``: ``fmod``, the quotient snapped to
    the nearest integer), not Cython's ``floor(a / b)``, which differs (``7.0 // 0.1`` is
    69.0, ``floor(7.0 / 0.1)`` 70.0); interpreted, ``a // b`` itself."""
    if not cython.compiled:
        return a // b
    mod = fmod(a, b)
    div = (a - mod) / b
    if mod and (b < 0) != (mod < 0):
        div -= 1.0
    if div:
        q = floor(div)
        if div - q > 0.5:
            q += 1.0
        return q
    return copysign(0.0, a / b)


@cython.ccall
@cython.locals(i=cython.Py_ssize_t, m=cython.Py_ssize_t, k=cython.Py_ssize_t)
@cython.locals(t=cython.double, q=cython.double)
def _usable_counts(waits: list, n_plans: list, timeout: float) -> list:  # type: ignore[type-arg]
    """Per job: how many of its ``n_plans`` plans it may use after waiting ``waits``
    (``min(1 + int(w // timeout), n)``, all of them without a timeout: ``min(99, n)``), the
    Python expression's values (``_floordiv``; the quotient compared as a double before it is
    made an int, so no cast overflows). ``decide`` counts through :func:`_usable_counts_until`
    (kept until the counts' next step); this is the counting it is tested against."""
    out = []
    t = timeout
    for i in range(len(waits)):
        m = n_plans[i]
        if t > 0:
            q = _floordiv(waits[i], t)
            if q >= m - 1:
                out.append(m)
            else:
                k = int(q)  # (compiled, a C cast: ``q`` is integral and small)
                out.append(1 + k)
        else:
            out.append(min(99, m))
    return out


#: The margin of :func:`_usable_counts_until`'s time, relative to the magnitudes added (their
#: sums round by ~1e-16 of them: this is far above it, and costs a recount ~1e-9 of a timeout
#: early at most).
_STEP_MARGIN = 1e-9


@cython.ccall
@cython.locals(i=cython.Py_ssize_t, m=cython.Py_ssize_t, k=cython.Py_ssize_t)
@cython.locals(u=cython.Py_ssize_t, t=cython.double, q=cython.double, e=cython.double)
@cython.locals(w=cython.double, at_s=cython.double, step=cython.double, until=cython.double)
@cython.locals(margin=cython.double)
def _usable_counts_until(
    enq: list, now_s: float, n_plans: list, timeout: float, out: list
) -> float:  # type: ignore[type-arg]
    """:func:`_usable_counts` of jobs that entered the queue at ``enq`` (their waits
    ``now_s - enq``: ``ClusterView.queued_wait_s``'s double subtraction), appended to ``out``;
    returns a time before which, from ``now_s`` on, none of the counts changes while the jobs
    stay queued (``inf``: never). A count ``u`` below its job's plan count holds while the
    wait's floor division by ``timeout`` is ``u - 1`` (non-decreasing in the wait): it may grow
    once the wait reaches ``u * timeout``, at ``enq + u * timeout``, here less a margin for the
    sums' rounding (:data:`_STEP_MARGIN`); a job with all its plans usable keeps them, as does
    every job without a timeout (an infinite one: ``at_s`` is NaN, never less)."""
    t = timeout
    until = math.inf
    margin = _STEP_MARGIN
    for i in range(len(enq)):
        m = n_plans[i]
        if t > 0:
            e = enq[i]
            w = now_s - e
            q = _floordiv(w, t)
            if q >= m - 1:
                out.append(m)
            else:
                k = int(q)  # (compiled, a C cast: ``q`` is integral and small)
                u = 1 + k
                out.append(u)
                step = u * t
                at_s = e + step - margin * (abs(e) + step + 1.0)
                if at_s < until:
                    until = at_s
        else:
            out.append(min(99, m))
    return until


#: ``pai_option`` per options tuple and GPU fraction (``per_options``).
_PAI_OPTION: dict[int, tuple[Any, dict[Any, Any]]] = {}


def pai_option(view: ClusterView, job: JobView) -> int:
    """The option PAI grants ``job`` (-1: none): a fractional request time-shares (or, without
    time-sharing, MPS at the smallest share covering it); a whole GPU is exclusive (memoised: a
    function of the options and the request's fraction)."""
    table = per_options(_PAI_OPTION, view)
    o: int | None = table.get(job.gpu_frac)
    if o is None:
        o = table[job.gpu_frac] = _pai_option(view, job)
    return o


def _pai_option(view: ClusterView, job: JobView) -> int:
    if job.gpu_frac < 1.0:
        o = shared_option(view)
        if o is None:
            return -1
        if view.options[o].mode is SharingMode.MPS:
            # No time-sharing in this scenario: MPS at the smallest share covering the request.
            mps = [i for i, p in enumerate(view.options) if p.mode is SharingMode.MPS]
            covers = [i for i in mps if view.options[i].sm_pct >= job.gpu_frac * 100.0]
            o = min(covers, key=lambda i: view.options[i].sm_pct) if covers else o
        return o
    o_ex = exclusive_option(view)
    o = o_ex if o_ex is not None else shared_option(view)
    return -1 if o is None else o


def pai_column(view: ClusterView, job: JobView, alloc: Allocation, o: int) -> np.ndarray:
    """Per GPU: ``job`` may start there with option ``o`` and the allocation has room (the
    request within 1 for a fraction; nothing allocated for whole GPUs)."""
    return view.mask_column(job.job_id, o) & _room(alloc.gpu, job.gpu_frac)


class ReservePack(HeuristicPolicy):
    """PAI's reserving-and-packing with load balancing as the second criterion.

    Args:
        plan_timeout_s: How long a task waits on each schedule plan before the next one opens.
        efficiency_threshold: Compute efficiency from which a task is high-GPU.
        high_end_tflops: Dense FP16 tensor TFLOPS from which a GPU type is high-end.
        service_max_duty: An online service's plans start with the least capable GPU types on
            which its peak duty (peak rate x profiled batch latency) stays below this.
    """

    name = "reserve_pack"
    reads_estimates = False  # (tests/test_no_estimates.py)
    #: Whether requests found without a candidate are kept across decisions
    #: (:class:`NoCandidates`; the tests compare with a policy that asks every time).
    _keep_no_cand = True

    def __init__(
        self,
        plan_timeout_s: float = 300.0,
        efficiency_threshold: float = 2.5,
        high_end_tflops: float = HIGH_END_TFLOPS,
        service_max_duty: float = 0.6,
    ) -> None:
        self.service_max_duty = service_max_duty
        self._fleet_key: tuple[GpuType, ...] | None = None
        self._types: dict[str, tuple[GpuType, list[int]]] = {}
        #: GPU type name -> (first GPU, last + 1) where each type's GPUs are contiguous.
        self._type_spans: dict[str, tuple[int, int]] | None = None
        #: GPU type name -> the largest GPU memory of its GPUs (GB).
        self._type_mem: dict[str, float] = {}
        #: GPU type name -> the most GPUs of a node holding GPUs of the type.
        self._type_node_gpus: dict[str, int] = {}
        #: The fleet's GPU type names from the least capable up (:meth:`plans`).
        self._order: list[str] = []
        self._offline_plans: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        #: high_gpu per (online, type constraint, model, GPUs, fraction); cleared per fleet.
        self._high: dict[tuple[bool, tuple[str, ...], str, int, float], bool] = {}
        #: (plans, usable plans) -> :meth:`_ranks`; cleared per fleet.
        self._rank_memo: dict[tuple[tuple[str, ...], int], tuple[np.ndarray, list[int], np.ndarray]]
        self._rank_memo = {}
        #: (room id (``_request_ids``), usable plans) -> :meth:`_ranks` of its plans (a room id
        #: names its plans), read in :meth:`decide` without the call; cleared per fleet.
        self._rank_of: dict[tuple[int, int], tuple[np.ndarray, list[int], np.ndarray]] = {}
        #: An offline request (``ClusterView.request``) -> its high-GPU flag, plans and ids
        #: (:meth:`_plan_info_id`: functions of the request and the fleet); cleared per fleet.
        self._by_request: dict[tuple[object, ...], tuple[bool, tuple[str, ...], int, int]] = {}
        #: job id -> :meth:`_plan_info_id`, for the episode ``_info_episode``.
        self._info_episode: object = None
        self._info: dict[int, _PlanInfo] = {}
        #: A request's id (never reused): per (plans, GPU memory, GPU fraction), what the room
        #: test reads, and per (those, GPUs, type constraint, online), all that a candidate
        #: depends on (with the usable plan count, the keys of a decision's sets and of
        #: :class:`NoCandidates`).
        self._request_ids: dict[tuple[object, ...], int] = {}
        #: What the last decision that found nothing was a function of (see :meth:`decide`).
        self._none_key: tuple[object, ...] | None = None
        #: (episode, decidable job ids, their ``_plan_info_id``, plan counts, the order they
        #: are tried in: high-GPU first) of the last decision.
        self._ids_memo: tuple[object, tuple[int, ...], list[_PlanInfo], list[int], list[int]] = (
            None, (), [], [], [],
        )  # fmt: skip
        #: The usable plan counts of the jobs of ``_ids_memo`` (:func:`_usable_counts_until`), as
        #: ``(queue_taken, timeout, since, until, counts, the counts as a tuple)``: the same
        #: counts at any time in ``[since, until)`` while no job left the queue and the
        #: timeout is the same; None: none yet for the window.
        self._use_memo: tuple[Any, ...] | None = None
        #: Node loads and empty runs, kept incrementally (per episode).
        self._nodes = NodeState()
        #: Requests without a candidate, kept across decisions (per episode).
        self._no_cand = NoCandidates()
        #: The allocation a decision reads (:meth:`Allocation.renew` at each), made at the
        #: first.
        self._alloc: Allocation | None = None
        self.plan_timeout_s = plan_timeout_s
        self.efficiency_threshold = efficiency_threshold
        self.high_end_tflops = high_end_tflops

    def _fleet_types(self, view: ClusterView) -> dict[str, tuple[GpuType, list[int]]]:
        """GPU type name -> (type, its GPUs); cached per fleet (the tuple is static)."""
        if self._fleet_key is not view.gpu_types:
            types: dict[str, tuple[GpuType, list[int]]] = {}
            for g, gt in enumerate(view.gpu_types):
                types.setdefault(gt.name, (gt, []))[1].append(g)
            self._fleet_key, self._types = view.gpu_types, types
            # GPU type name -> its GPUs' range where every type's are contiguous (else None)
            self._type_spans = {t: (gs[0], gs[-1] + 1) for t, (_, gs) in types.items()}
            if any(hi - lo != len(types[t][1]) for t, (lo, hi) in self._type_spans.items()):
                self._type_spans = None
            # GPU type name -> its GPUs' largest memory (``Allocation.room``'s, by name)
            type_mem = _fleet_static(view)[6]
            self._type_mem = {t: type_mem[i] for i, t in enumerate(view.type_names)}
            # GPU type name -> the most GPUs a node holding its GPUs has
            node_gpus = _fleet_static(view)[1]
            node_of = np.asarray(view.node_of)
            self._type_node_gpus = {
                t: int(node_gpus[node_of[gs]].max()) for t, (_, gs) in types.items()
            }
            self._order = sorted(types, key=lambda t: _capability(types[t][0]))
            #: An offline task's plans (:meth:`plans`), indexed by whether it is high-GPU.
            self._offline_plans = (tuple(self._order), tuple(self._order[::-1]))
            self._high, self._rank_memo, self._rank_of, self._info_episode = {}, {}, {}, None
            self._by_request = {}
        return self._types

    def efficiency(self, view: ClusterView, job: JobView) -> float:
        """The performance model: GPUs requested x profiled duty x high-end speed-up."""
        types = self._fleet_types(view)
        high = [gs[0] for gt, gs in types.values() if is_high_end(gt, self.high_end_tflops)]
        low = [gs[0] for gt, gs in types.values() if not is_high_end(gt, self.high_end_tflops)]
        speedup = 1.0
        if high and low:
            best_high = max(view.solo_speed(job.model, g) for g in high)
            best_low = max(view.solo_speed(job.model, g) for g in low)
            speedup = best_high / best_low
        return job.num_gpus * job.gpu_frac * ZOO[job.model].duty * speedup

    def high_gpu(self, view: ClusterView, job: JobView) -> bool:
        """A high-GPU (compute-efficient) task (memoised: a function of the job's request and
        the fleet)."""
        types = self._fleet_types(view)
        key = (job.online, job.gpu_types, job.model, job.num_gpus, job.gpu_frac)
        hit = self._high.get(key)
        if hit is None:
            hit = self._high[key] = self._high_gpu(view, job, types)
        return hit

    def _high_gpu(
        self, view: ClusterView, job: JobView, types: dict[str, tuple[GpuType, list[int]]]
    ) -> bool:
        if job.online:
            return False
        if job.gpu_types:
            gts = [gt for gt, _ in types.values() if gt.name in job.gpu_types]
            if gts and all(is_high_end(gt, self.high_end_tflops) for gt in gts):
                return True
        return self.efficiency(view, job) >= self.efficiency_threshold

    def plans(self, view: ClusterView, job: JobView) -> list[str]:
        """GPU types in the order this task tries them."""
        types = self._fleet_types(view)
        order = self._order
        if job.online:
            # Right-sized: the least capable types that serve the peak load, then the others
            # from the most capable down.
            fits = [
                t for t in order if est_duty(view, job, types[t][1][0]) <= self.service_max_duty
            ]
            return fits + [t for t in order[::-1] if t not in fits]
        return order[::-1] if self.high_gpu(view, job) else list(order)

    @cython.locals(alloc=Allocation, kept=NoCandidates, um=tuple)
    def decide(self, view: ClusterView) -> Decision | None:
        # The queue window, or the whole queue (``decision_scope``): taken as job ids, with a
        # job's view built only when it may have a candidate (a long queue has thousands).
        ids = view.decidable_ids()
        tids = tuple(ids)
        memo = self._ids_memo
        if memo[0] is view.episode and memo[1] == tids:
            info, n_plans, ordered = memo[2], memo[3], memo[4]
        else:  # (the same jobs as at the last decision: most decisions)
            if self._info_episode is not view.episode:
                self._info_episode, self._info = view.episode, {}
            # (most of a new window was in the last one: their plan info is a lookup)
            known = self._info.get
            info = [known(jid) or self._plan_info_id(view, jid) for jid in ids]
            n_plans = [len(i[1]) for i in info]
            ordered = [k for k, i in enumerate(info) if i[0]] + [
                k for k, i in enumerate(info) if not i[0]
            ]
            self._ids_memo = (view.episode, tids, info, n_plans, ordered)
            self._use_memo = None
        # The usable plan counts: a job's is a step function of its wait (its enqueue time
        # fixed while it stays queued), so the window's counts stand until the earliest next
        # step (all plans usable: never). A job of the window re-queued since (a start, then a
        # suspension or a preemption) has a new enqueue time: no job left the queue since
        # (``queue_taken``), none was.
        now = view.now_s
        timeout = self.plan_timeout_s
        taken = view.queue_taken()
        um = self._use_memo
        if um is not None and um[0] == taken and um[1] == timeout and um[2] <= now < um[3]:
            usables, utup = um[4], um[5]
        else:
            usables = []
            until = _usable_counts_until(view.queued_enqueue_t(ids), now, n_plans, timeout, usables)
            utup = tuple(usables)
            self._use_memo = (taken, timeout, now, until, usables, utup)
        # A decision is a function of the cluster's state (``view.version``), the decidable
        # jobs and how many plans each may use: when none of them changed since a decision that
        # found nothing (time passed, no plan opened), it finds nothing again.
        none_key = (view.episode, view.version, tids, utup)
        if none_key == self._none_key:
            return None
        if self._fleet_key is not view.gpu_types:  # (``_fleet_types``' test, without its call)
            self._fleet_types(view)  # (for ``_ranks`` and ``_rank_of``)
        rank_of = self._rank_of
        alloc = self._alloc
        if alloc is None:
            alloc = self._alloc = Allocation(view)
        else:
            alloc.renew(view)  # (as ``Allocation(view)``: the same facts)
        alloc.node_state = self._nodes
        # (requests found without a candidate at an earlier decision and none since)
        keep_no_cand = self._keep_no_cand
        kept = self._no_cand
        if keep_no_cand:
            kept.update(view, self._nodes)
        # (keyed by the request's ids and the usable plan count: two ints hash fast)
        no_room: set[tuple[int, int]] = set()
        #: requests found without a candidate in this decision (a function of the request,
        #: the usable plans and the state: so is every job asking the same)
        no_cand: set[tuple[object, ...]] = set()
        spans = self._type_spans
        decision: Decision | None = None
        for k in ordered:
            _, plans, job, room_id, req_id, n_gpus = info[k]
            usable = usables[k]
            key = (room_id, usable)
            req = (req_id, usable)
            if key in no_room:
                if keep_no_cand:
                    kept.has(req)  # (asked: what is kept of it stays)
                continue
            if keep_no_cand and kept.has(req):
                continue
            ranks = rank_of.get(key)
            if ranks is None:
                ranks = rank_of[key] = self._ranks(view, plans, usable)
            gpu_rank, usable_types, gpu_ok = ranks
            # No GPU of a usable plan with the memory and the allocation room: no candidate
            # there (the legality mask is not needed to know), nor for any job asking the same.
            if not alloc.room(usable_types, job):
                no_room.add(key)
                continue
            if req in no_cand:
                continue
            # (``job``: the request's view as first seen: what a candidate reads never changes)
            if spans is not None and n_gpus == 1:
                g, o = self._single_pick(view, job, alloc, plans[:usable])
                if g >= 0:
                    decision = Decision(job.job_id, g, o)
                    break
                no_cand.add(req)
                if keep_no_cand:
                    kept.keep(req, job, alloc, gpu_ok, o, NO_USABLE)
                continue
            if spans is not None and alloc.contiguous:
                g, o = self._gang_zero_pick(view, job, alloc, plans[:usable])
                if g >= 0:
                    decision = Decision(job.job_id, g, o)
                    break
            gpus, o, why = self._usable_candidates(view, job, alloc, gpu_ok)
            if not gpus.size:
                no_cand.add(req)
                if keep_no_cand:
                    kept.keep(req, job, alloc, gpu_ok, o, why)
                continue
            g = self._pick(view, alloc, gpus, plans[:usable], gpu_rank)
            decision = Decision(job.job_id, g, o)
            break
        if decision is None:
            self._none_key = none_key
            return None
        if keep_no_cand:
            kept.note_placed()  # (the jobs after the one placed were not asked)
        return decision

    def _pick(
        self,
        view: ClusterView,
        alloc: Allocation,
        gpus: np.ndarray,
        usable_plans: tuple[str, ...],
        gpu_rank: np.ndarray,
    ) -> int:
        """The GPU of ``gpus`` (candidates, ascending) with the least (plan rank, node load,
        -allocation, gpu): :func:`lexmin` of those keys, in fewer passes. Where each GPU type's
        GPUs are contiguous (``_type_spans``), the least rank's candidates are a slice of
        ``gpus``; where the least load among them is 0.0 and no node with residents has a load
        that is not positive (:meth:`NodeState.zero_load_empty`), every candidate of load 0.0
        is on an empty node (allocation 0.0), so the first of them wins."""
        spans = self._type_spans
        if spans is not None:
            sel = gpus
            for t in usable_plans:
                lo, hi = spans[t]
                i0, i1 = gpus.searchsorted((lo, hi)).tolist()
                if i1 > i0:
                    sel = gpus[i0:i1]
                    break
        else:
            k = gpu_rank[gpus]
            sel = gpus[k == k.min()]
        return self._least_loaded(view, alloc, sel)

    @cython.locals(nodes=NodeState, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t)
    @cython.locals(p=cython.Py_ssize_t, i=cython.Py_ssize_t)
    def _single_pick(
        self, view: ClusterView, job: JobView, alloc: Allocation, usable_plans: tuple[str, ...]
    ) -> tuple[int, int]:
        """A single-GPU ``job``'s GPU and option (-1: no candidate) where each GPU type's GPUs
        are contiguous (``_type_spans``): :meth:`_pick` of :meth:`_usable_candidates`, taking
        the usable types' spans in plan order up to the first that holds a candidate (the
        least rank's candidates), a span skipped where its type's memory cannot hold the
        request (``Allocation.room``'s test: none of its GPUs is legal). In a span, without
        the fleet-wide legality column where one GPU's legality answers
        (``ClusterView.legal``):

        * where :meth:`NodeState.zero_load_empty` holds, the span's first legal GPU on a node
          of load 0.0 is the pick (what :meth:`_least_loaded`'s shortcut would choose among
          the candidates): the first few such GPUs are tested one by one, the rest from the
          column;
        * else the candidates are the GPUs with room that are legal, so the least (node load,
          -allocation, gpu) of those with room is the pick if it is legal; if not, the column
          lists the candidates."""
        o = pai_option(view, job)
        if o < 0:
            return -1, o
        spans = self._type_spans
        assert spans is not None
        legal: np.ndarray | None = None  # (the legality column, fetched where needed)
        gpu, frac = alloc.gpu, job.gpu_frac
        nodes = self._nodes
        zero: np.ndarray | None = nodes.gpu_zero(view, alloc)  # (brings the loads up to date)
        if not nodes.zero_nodes() or not nodes.zero_load_empty():
            zero = None
        mem, type_mem = job.mem_gb, self._type_mem
        for t in usable_plans:
            if mem > type_mem[t] + 1e-3:
                continue  # (no GPU of the type holds the request: none is legal, as ``room``)
            lo, hi = spans[t]
            if zero is not None:
                # The zero-load shortcut before the candidates are listed: a legal GPU on a node
                # of load 0.0 is a candidate (the node is empty: its GPUs' allocations are 0.0,
                # so room holds), of the least load; the first such GPU is the pick. The first
                # few GPUs of load 0.0 are tested one by one (``ClusterView.legal``), the rest
                # from the legality column.
                p = lo
                for _ in range(_ZERO_TRIES):
                    if p >= hi:
                        break
                    i = _first_zero_start(nodes, p, hi, 0, p == lo)
                    if i < 0:
                        p = hi  # (no GPU of load 0.0 left in the span)
                        break
                    if view.legal(job.job_id, i, o):
                        return i, o
                    p = i + 1
                if p < hi:
                    if legal is None:
                        legal = view.mask_column(job.job_id, o)
                    z = legal[p:hi] & zero[p:hi]
                    i = int(z.argmax())
                    if z[i]:
                        return p + i, o
            # The candidates are the span's GPUs with room that are legal: the least (node
            # load, -allocation, gpu) of those with room, if legal, is their pick; else (or
            # none with room: no candidate) the legality column lists them.
            if cython.compiled:  # (one pass over the span in C, no arrays made)
                g = _span_least_loaded(view, nodes, lo, hi, frac)
                if g < 0:
                    continue
            else:
                room = _room(gpu[lo:hi], frac).nonzero()[0]  # (``flatnonzero``, 1-D)
                if not room.size:
                    continue
                g = self._least_loaded(view, alloc, room + lo)
            if view.legal(job.job_id, g, o):
                return g, o
            if legal is None:
                legal = view.mask_column(job.job_id, o)
            sel = (legal[lo:hi] & _room(gpu[lo:hi], frac)).nonzero()[0]
            if sel.size:
                return self._least_loaded(view, alloc, sel + lo), o
        return -1, o

    @cython.locals(nodes=NodeState, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t)
    @cython.locals(g=cython.Py_ssize_t, n=cython.Py_ssize_t)
    def _gang_zero_pick(
        self, view: ClusterView, job: JobView, alloc: Allocation, usable_plans: tuple[str, ...]
    ) -> tuple[int, int]:
        """A gang ``job``'s GPU and option where the zero-load shortcut answers, else -1 (the
        caller then lists the candidates, :meth:`_usable_candidates`), on a fleet whose GPU
        types and nodes are contiguous in GPU order (``_type_spans``,
        :attr:`Allocation.contiguous`) and where :meth:`NodeState.zero_load_empty` holds.

        A usable GPU ``g`` on a node of load 0.0 (an empty node: allocation 0.0, so room holds)
        that starts ``num_gpus`` empty GPUs of its node (``empty_runs``) and is legal
        (``ClusterView.legal``: the gang mask's entry) is a usable one-node start, so the
        candidates are the usable one-node starts, and ``g`` is one of the least load. So, the
        usable types' spans taken in plan order: a span where no GPU starts ``num_gpus`` empty
        GPUs of its node (none of its nodes has as many GPUs, or none has them empty) holds no
        one-node start (skipped, as a type whose memory cannot hold the request: no GPU of it
        is legal); in the first other span, the first such ``g`` among those of load 0.0 is
        :meth:`_pick`'s choice (usually the span's first GPU of load 0.0, the first GPU of an
        empty node, so the span's arrays are read only where it is not). Up to
        ``_ZERO_TRIES`` of them are tested one by one; where none is legal, or the span's
        one-node starts are all on nodes of positive load (the pick may be there), -1."""
        o = pai_option(view, job)
        if o < 0:
            return -1, o
        nodes = self._nodes
        nodes.gpu_zero(view, alloc)  # (brings the loads up to date)
        if not nodes.zero_nodes() or not nodes.zero_load_empty():
            return -1, o
        spans = self._type_spans
        assert spans is not None
        nodes.empty_runs(view)  # (brings the empty runs up to date)
        n, mem, type_mem, node_gpus = job.num_gpus, job.mem_gb, self._type_mem, self._type_node_gpus
        for t in usable_plans:
            if mem > type_mem[t] + 1e-3:
                continue  # (no GPU of the type holds the request: none is legal, as ``room``)
            if node_gpus[t] < n:
                continue  # (no node of the type has ``n`` GPUs: no one-node start)
            lo, hi = spans[t]
            # (the span's first one-node start of load 0.0)
            g = _first_zero_start(nodes, lo, hi, n, True)
            if g < 0:
                if not _any_start(nodes, lo, hi, n):
                    continue  # (no one-node start in the span)
                return -1, o  # (no one-node start of load 0.0 in the span)
            for _ in range(_ZERO_TRIES):  # (``g``: the next one-node start of load 0.0)
                if view.legal(job.job_id, g, o):
                    return g, o
                g = _first_zero_start(nodes, g + 1, hi, n, False)
                if g < 0:
                    return -1, o  # (none left in the span)
            return -1, o
        return -1, o

    def _least_loaded(self, view: ClusterView, alloc: Allocation, sel: np.ndarray) -> int:
        """The GPU of ``sel`` (ascending) with the least (node load, -allocation, gpu)."""
        if sel.size == 1:
            return int(sel[0])
        nodes = self._nodes
        gpu_load = nodes.gpu_loads(view, alloc)
        load = gpu_load[sel]
        i = int(load.argmin())
        if load[i] == 0.0 and nodes.zero_load_empty():
            return int(sel[i])
        # The least load's GPUs (``load[i]`` is the least), then the greatest allocation and
        # the lowest GPU among them: ``lexmin`` of ``-allocation`` (negation is exact), which is
        # the first maximum ``argmax`` returns.
        ties = sel[load == load[i]]
        if ties.size == 1:
            return int(ties[0])
        return int(ties[int(alloc.gpu[ties].argmax())])

    def _plan_info_id(self, view: ClusterView, job_id: int) -> _PlanInfo:
        """(:meth:`high_gpu`, :meth:`plans`) of job ``job_id`` and a view of it as first seen
        (for its request), memoised per episode (functions of the job's request, which never
        changes, and of the fleet)."""
        if self._info_episode is not view.episode:
            self._info_episode, self._info = view.episode, {}
        hit = self._info.get(job_id)
        if hit is None:
            request = view.request(job_id)
            online, model, n, frac, mem, gpu_types = request
            if self._fleet_key is not view.gpu_types:
                self._fleet_types(view)
            job: Any = (
                view.job(job_id)  # (a service's plans read its profile: ``est_duty``)
                if online
                else PaiRequest(job_id, n, frac, mem, gpu_types, model)
            )
            # (an offline request asked before: its high-GPU flag, plans and ids again)
            known = None if online else self._by_request.get(request)
            if known is not None:
                hit = self._info[job_id] = (known[0], known[1], job, known[2], known[3], n)
                return hit
            # (``high_gpu``'s memo read here, its key from the request's fields)
            high: bool | None = self._high.get((online, gpu_types, model, n, frac))
            if high is None:
                high = self.high_gpu(view, job)
            plans = tuple(self.plans(view, job)) if online else self._offline_plans[high]
            ids = self._request_ids
            room = ids.setdefault((plans, mem, frac), len(ids))
            req = ids.setdefault((plans, mem, frac, n, gpu_types, online), len(ids))
            hit = self._info[job_id] = (high, plans, job, room, req, n)
            if not online:
                self._by_request[request] = (high, plans, room, req)
        return hit

    def _ranks(
        self, view: ClusterView, plans: tuple[str, ...], usable: int
    ) -> tuple[np.ndarray, list[int], np.ndarray]:
        """For the first ``usable`` plans: per GPU its type's plan rank (-1: not usable), the
        usable types (indices into ``type_names``), and per GPU whether its type is usable
        (memoised per fleet: the caller has called :meth:`_fleet_types` for ``view``)."""
        key = (plans, usable)
        hit = self._rank_memo.get(key)
        if hit is None:
            rank = {t: k for k, t in enumerate(plans[:usable])}
            type_rank = np.array([rank.get(t, -1) for t in view.type_names])
            gpu_rank = type_rank[np.asarray(view.type_idx)]
            hit = self._rank_memo[key] = (
                gpu_rank,
                np.flatnonzero(type_rank >= 0).tolist(),
                gpu_rank >= 0,
            )
        return hit

    @staticmethod
    def _usable_candidates(
        view: ClusterView, job: JobView, alloc: Allocation, usable: np.ndarray
    ) -> tuple[np.ndarray, int, int]:
        """:func:`pai_candidate_gpus` restricted to the ``usable`` GPUs (those of usable plans),
        the same GPUs in the same order, with a gang's one-node check only where needed: its
        candidates are the one-node starts if there are any anywhere, else all starts. With
        them, where there are none, why (:class:`NoCandidates`): ``NO_USABLE`` (no usable GPU
        is legal with room), a witness (a GPU outside the usable plans starting ``num_gpus``
        legal empty GPUs of its node, while no usable GPU is a legal one-node start), or
        ``UNKNOWN``."""
        o = pai_option(view, job)
        if o < 0:
            return _NONE, -1, NO_USABLE
        if job.num_gpus > 1:
            hit, why = ReservePack._gang_quick(view, job, alloc, usable, o)
            if hit is not None:
                return hit, o, why
        col = pai_column(view, job, alloc, o)
        starts = (col & usable).nonzero()[0]
        if job.num_gpus == 1 or not starts.size:
            return starts, o, NO_USABLE if job.num_gpus == 1 else UNKNOWN
        one = alloc.one_node(job.num_gpus)
        local = starts[one[starts]]  # (the usable starts that are one-node, ascending)
        if local.size:
            return local, o, UNKNOWN
        # No one-node start among usable GPUs: the usable starts count only if there is no
        # one-node start elsewhere either.
        if (col & one).any():
            return _NONE, o, UNKNOWN
        return starts, o, UNKNOWN

    @staticmethod
    def _gang_quick(
        view: ClusterView, job: JobView, alloc: Allocation, usable: np.ndarray, o: int
    ) -> tuple[np.ndarray | None, int]:
        """:meth:`_usable_candidates` of a gang from the single-GPU legality and the one-node
        runs, a few passes over the fleet instead of the gang mask's; None where the answer
        is a non-empty set of starts without a one-node one (the full computation gives it).
        With it, why there are none (as :meth:`_usable_candidates`).

        A gang may start at ``g`` iff ``g`` is legal and ``num_gpus`` legal GPUs lie from ``g``
        on (``Cluster.gang_mask``): the legal GPUs up to a cut. So a set of legal GPUs holds a
        gang start iff its first does, and is all gang starts iff its last is.
        """
        n = job.num_gpus
        single = view.single_column(job.job_id, o)

        def gang_start(g: int) -> bool:
            head = single[g : g + n]
            return (head.size == n and bool(head.all())) or int(np.count_nonzero(single[g:])) >= n

        if np.count_nonzero(single) < n:  # no gang start anywhere
            return _NONE, UNKNOWN
        # (a one-node start's GPUs are empty, so unallocated: ``pai_column``'s room test holds)
        a = single & alloc.one_node(n)
        g = int(a.argmax())  # (the first one-node start, if any)
        if a[g] and gang_start(g):
            # some one-node start: the usable ones if any, else none (listed only if any)
            b = a & usable
            if not b[int(b.argmax())]:
                # (a witness if its run is legal GPU by GPU)
                return _NONE, g if single[g : g + n].all() else UNKNOWN
            local = b.nonzero()[0]
            return (local if gang_start(int(local[-1])) else None), UNKNOWN
        # no one-node start anywhere: every usable start counts; none if the first usable
        # legal GPU cannot start a gang (nor can any after it; room aside)
        b = single & usable
        g0 = int(b.argmax())
        if not b[g0]:
            return _NONE, NO_USABLE
        if not gang_start(g0):
            return _NONE, UNKNOWN
        return None, UNKNOWN


class LoadBalance(HeuristicPolicy):
    """PAI's load balancing: the least-loaded node, then its least-allocated GPU."""

    name = "load_balance"
    reads_estimates = False  # (tests/test_no_estimates.py)

    def __init__(self) -> None:
        self._episode: object = None
        #: job id -> a view of it as first seen (its request never changes), for ``_episode``.
        self._requests: dict[int, JobView] = {}

    def decide(self, view: ClusterView) -> Decision | None:
        if self._episode is not view.episode:
            self._episode, self._requests = view.episode, {}
        alloc = Allocation(view)
        # The window, or the whole queue (``decision_scope``). A job's candidates depend on its
        # request only, so a request found without any is not tried again in this snapshot.
        none: set[tuple[object, ...]] = set()
        for jid in view.decidable_ids():
            job = self._requests.get(jid)
            if job is None:
                job = self._requests[jid] = view.job(jid)
            key = (job.online, job.mem_gb, job.gpu_types, job.num_gpus, job.gpu_frac)
            if key in none:
                continue
            gpus, o = pai_candidate_gpus(view, job, alloc)
            if gpus.size:
                g = lexmin(gpus, lambda s: alloc.node[alloc.node_of[s]], lambda s: alloc.gpu[s])
                return Decision(job.job_id, g, o)
            none.add(key)
        return None


def first_fit(view: ClusterView, job: JobView) -> Decision | None:
    """``first_fit``'s placement of one job (see ``gpu_sharing_gym.baselines.reference.FirstFit``)."""
    # the first legal GPU (mask column argmax) under the first option that has one
    g, o = view.first_legal_in(job.job_id, first_fit_options(view, job))
    return Decision(job.job_id, g, o) if g >= 0 else None


#: An SJF queue entry: (not online, est_remaining_s, submit_s, job id, queue-log position).
_SjfKey = tuple[bool, float, float, int, int]


class SjfPredicted(HeuristicPolicy):
    """Shortest (predicted) job first over the whole queue, first-fit placement.

    Over the whole queue (the runner's ``decision_scope = "queue"``) the queue is kept here,
    one heap per mask signature (the jobs whose masks are equal: a request), keyed by the SJF
    order; the heaps learn what entered the queue from ``ClusterView.queue_log`` and drop
    entries lazily (a job no longer queued, or queued again since). A decision looks at each
    signature's first job (a few dozen in a PAI trace), not at every queued job: the first
    queued job in SJF order that fits is the least head among signatures that fit. A queued
    job's key never changes while it waits (its progress only moves while it runs), so this is
    the same job as a stable sort of the queue by (not online, est_remaining_s) picks.
    """

    name = "sjf_predicted"
    decision_scope = "queue"

    def __init__(self) -> None:
        self._episode: object = None
        self._mark = 0
        self._latest: dict[int, int] = {}
        self._heaps: dict[tuple[object, ...], list[_SjfKey]] = {}

    def _sync(self, view: ClusterView) -> None:
        """Take in the queue entries since the last look (per episode)."""
        if self._episode is not view.episode:
            self._episode, self._mark, self._latest, self._heaps = view.episode, 0, {}, {}
        new = view.queue_log(self._mark)
        if not new:
            return
        pos = self._mark
        self._mark = pos + len(new)
        heaps, latest = self._heaps, self._latest
        facts = view.sjf_facts(new)
        if len(facts) != len(new):  # (what ``zip(..., strict=True)`` checked)
            raise ValueError(f"sjf_facts: {len(facts)} facts for {len(new)} jobs")
        # (an index loop, not ``zip(..., strict=True)``: compiled, a zip with a keyword is a
        # generic call of ~2.5 k instructions at every decision)
        for k in range(len(new)):
            jid = new[k]
            offline, est, submit, sig = facts[k]
            latest[jid] = pos
            h = heaps.get(sig)
            if h is None:
                h = heaps[sig] = []
            heappush(h, (offline, est, submit, jid, pos))
            pos += 1

    def decide(self, view: ClusterView) -> Decision | None:
        if view.decision_scope == "queue":
            return self._decide_queue(view)
        ids = view.decidable_ids()
        if not ids:
            return None
        # Order by (not online, est_remaining_s), ties in queue order, i.e. (submit_s, job_id):
        # a stable sort of the queue (the same order as sorting its views by that key).
        order = np.lexsort((view.est_remaining_s(ids), ~view.online_flags(ids)))
        return _first_fit_in_order(view, (ids[i] for i in order.tolist()))

    def _decide_queue(self, view: ClusterView) -> Decision | None:
        self._sync(view)
        latest, heads, empty = self._latest, [], []
        for sig, h in self._heaps.items():
            while h and not (latest[h[0][3]] == h[0][4] and view.is_queued(h[0][3])):
                heappop(h)
            if h:
                heads.append(h[0])
            else:
                empty.append(sig)
        for sig in empty:
            del self._heaps[sig]
        heads.sort()
        # (a list, not a generator: compiled, a generator is an object and a call per item)
        return _first_fit_in_order(view, [key[3] for key in heads])


def _first_fit_in_order(view: ClusterView, job_ids: Iterable[int]) -> Decision | None:
    """The first of ``job_ids`` (in their order) that first-fit can place, placed so
    (:func:`first_fit` of each, by job id: no JobViews built, only the GPU fraction read)."""
    for jid in job_ids:
        if view.placeable(jid):
            g, o = view.first_legal_in(jid, first_fit_order(view, view.gpu_frac(jid)))
            if g >= 0:
                return Decision(jid, g, o)
    return None
