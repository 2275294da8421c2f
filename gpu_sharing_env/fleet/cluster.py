"""Cluster state and the one legality function.

The state of every GPU lives in numpy arrays (struct of arrays) so that the legality of placing a
job on *every* GPU with *every* placement option is a handful of vectorised comparisons:
:meth:`Cluster.placement_mask`. The simulator's ``apply`` checks a decision with the same
function (:meth:`Cluster.check`), and the Gymnasium env's action mask is built from it, so what
the mask allows and what ``apply`` accepts can never disagree.

Capacity invariants (memory, MPS SM percentages, MIG geometry, residents per GPU) are enforced
here and nowhere else.

The cluster is wired from parts that each own their state (issue 51; docs/simulator.md, "The
cluster"): :class:`Fleet` and :class:`OptionLayout` (the fixed description), the occupancy on
:class:`Cluster` itself with its MIG and gpulet parts (:class:`MigLayouts`,
:class:`GpuletParts`), and the legality function with its caches (:class:`Masks`).
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from operator import attrgetter
from typing import Any

import numpy as np

try:  # compiled (gpu_sharing_env._compile): C types for the mask's loop; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.config import SharingConfig
from gpu_sharing_env.physics.hardware import (
    GpuType,
    get_gpu_type,
    mig_creatable_table,
    mig_free_starts,
    mig_layout_legal,
)
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.nodes import NodeSpec
from gpu_sharing_env.workload.job import JobKind, JobSpec


def _slot_read(obj: object, slot: Any) -> object:
    """``slot.__get__(obj)`` for a slot descriptor of ``obj``'s exact type, else ``getattr`` of
    the slot's name (a subclass, a stand-in job): what ``job.pxd``'s ``_take`` does, for a module
    that runs interpreted (a Python function: importable however ``workload.job`` runs;
    ``sim/rates.py``, ``sim/lifecycle.py`` and ``sim/engine.py`` take it from here)."""
    if type(obj) is slot.__objclass__:
        return slot.__get__(obj, JobSpec)
    return getattr(obj, slot.__name__)


if cython.compiled:  # ``JobSpec``'s slots read in C (``job.pxd``'s ``_take``)
    from cython.cimports.gpu_sharing_env.workload.job import _take
    from cython.cimports.libc.string import memcpy  # (a double's bits: ``_order_c``)
else:
    _take = _slot_read

#: ``Cluster.mode`` value of a GPU that has never been configured.
MODE_NONE = -1
#: Floating-point slack for memory comparisons (GB).
_EPS = 1e-9
_INF = float("inf")
#: From this many GPUs on, gang masks are cut per row at the n-th legal GPU from the end
#: instead of by a suffix sum (measured on a 10-option mask, half its rows empty: equal at
#: ~256 GPUs, 15 vs 12 us at 512, 34 vs 13 us at 1,024, 179 vs 43 us at 6,500).
_GANG_SCAN_GPUS = 512
#: Below this many GPUs the compiled single-GPU mask is one typed loop (``_single_rows``): on a
#: small fleet numpy's fixed cost per pass is most of a mask; on a large one its SIMD passes
#: beat a scalar loop (at 1,024 GPUs the loop cost 3x the passes' instructions).
_MASK_LOOP_GPUS = 64
_TS = int(SharingMode.TIME_SHARING)
_MPS = int(SharingMode.MPS)
_MIG = int(SharingMode.MIG)
#: ``job.online`` is ``job.kind is _ONLINE``: the hot paths read the field (a property call
#: is a Python frame per read; ~9 reads a job in a replay).
_ONLINE = JobKind.ONLINE
#: The modes as members, for ``opt.mode is ...`` on the hot paths: an enum class's attribute
#: read goes through ``EnumType.__getattr__``'s hook in Python 3.11 (~800 instructions).
_M_EXCL = SharingMode.EXCLUSIVE
_M_MPS = SharingMode.MPS
_M_MIG = SharingMode.MIG


@dataclass(frozen=True, slots=True)
class PlacementOption:
    """How a job is placed on its GPU(s): the sharing mode and its parameter.

    Attributes:
        mode: Sharing mode the GPU must be in (or is switched to if empty).
        sm_pct: MPS active-thread percentage (100 outside MPS).
        mig_slices: MIG compute slices (of 7) of the instance to use (0 outside MIG).
        gpulet: ``k >= 1``: join the k-th MPS partition (gpulet, in creation order) of the GPU
            and share its SM share in time (``SharingConfig.gpulets``); 0: an MPS option opens
            a partition of its own.
    """

    mode: SharingMode
    sm_pct: int = 100
    mig_slices: int = 0
    gpulet: int = 0

    @property
    def label(self) -> str:
        if self.mode is SharingMode.EXCLUSIVE:
            return "excl"
        if self.mode is SharingMode.TIME_SHARING:
            return "ts"
        if self.mode is SharingMode.MPS:
            return f"gpulet{self.gpulet}" if self.gpulet else f"mps{self.sm_pct}"
        return f"mig{self.mig_slices}g"


def build_options(sharing: SharingConfig) -> tuple[PlacementOption, ...]:
    """The scenario's placement options, in a fixed order (the env's action layout)."""
    opts: list[PlacementOption] = []
    if "exclusive" in sharing.modes:
        opts.append(PlacementOption(SharingMode.EXCLUSIVE))
    if "time_sharing" in sharing.modes:
        opts.append(PlacementOption(SharingMode.TIME_SHARING))
    if "mps" in sharing.modes:
        opts.extend(PlacementOption(SharingMode.MPS, sm_pct=p) for p in sharing.mps_sm_pcts)
        # gpulets (opt-in): join the k-th partition of a GPU (its share is the partition's)
        opts.extend(
            PlacementOption(SharingMode.MPS, gpulet=k) for k in range(1, sharing.gpulets + 1)
        )
    if "mig" in sharing.modes:
        opts.extend(
            PlacementOption(SharingMode.MIG, mig_slices=c) for c in sharing.mig_compute_slices
        )
    return tuple(opts)


@dataclass(slots=True)
class MigInstance:
    """A GPU instance in a MIG layout; ``job_id`` is None while it is empty."""

    profile: str
    start: int
    mask: int
    compute: int
    job_id: int | None = None


def _new_mig_instance(
    profile: str, start: int, mask: int, compute: int, job_id: int | None
) -> MigInstance:
    """``MigInstance(profile, start, mask, compute, job_id)``: compiled, its slots written by C
    calls (the dataclass's generated ``__init__`` runs as bytecode, ~3.5 k instructions);
    interpreted, the constructor."""
    if not cython.compiled:
        return MigInstance(profile, start, mask, compute, job_id)
    inst = object.__new__(MigInstance)
    inst.profile = profile
    inst.start = start
    inst.mask = mask
    inst.compute = compute
    inst.job_id = job_id
    return inst


class _MigTables:
    """Per GPU type: which profile can be created given the busy slices (O(1) lookups).

    ``creatable[t, occ_mask, used_compute, p]`` comes from ``hardware.mig_creatable_table`` (the
    MIG geometry's one source of truth: NVIDIA's legal starts, 8 memory and 7 compute slices).
    Empty instances do not count as occupied: they can be destroyed first.
    """

    def __init__(self, types: Sequence[GpuType]) -> None:
        n_p = max([len(t.mig_profiles) for t in types] + [1])
        self.creatable = np.zeros((len(types), 256, 8, n_p), dtype=bool)
        self.first_start = np.full((len(types), 256, n_p), -1, dtype=np.int16)
        self.compute = np.zeros((len(types), n_p), dtype=np.int16)
        self.mem_gb = np.zeros((len(types), n_p), dtype=np.float64)
        for t, gt in enumerate(types):
            if not gt.mig_profiles:
                continue
            n = len(gt.mig_profiles)
            self.creatable[t, :, :, :n] = mig_creatable_table(gt)
            for p, prof in enumerate(gt.mig_profiles):
                self.compute[t, p] = prof.compute_slices
                self.mem_gb[t, p] = prof.mem_gb
                for occ in range(256):
                    starts = mig_free_starts(gt, occ, 0, prof.name)
                    self.first_start[t, occ, p] = starts[0] if starts else -1
        #: ``creatable`` packed over profiles: bit ``p`` of ``creatable_bits[t, occ, used]``.
        weights = np.left_shift(np.int64(1), np.arange(n_p, dtype=np.int64))
        self.creatable_bits = (self.creatable.astype(np.int64) * weights).sum(axis=-1)
        #: Per type, per profile (its index order): ``(name, compute slices, memory GB, memory
        #: slices, the index of the first profile equal to it)`` (what :meth:`MigLayouts.take`
        #: reads of a profile: plain values, where each was a read of the frozen dataclass; the
        #: last as the dataclass's ``==`` matched it to a candidate).
        self.profile_facts: tuple[tuple[tuple[str, int, float, int, int], ...], ...] = tuple(
            tuple(
                (p.name, p.compute_slices, p.mem_gb, p.mem_slices, gt.mig_profiles.index(p))
                for p in gt.mig_profiles
            )
            for gt in types
        )

    def profile_bits(self, mem_gb: float, slices: Sequence[int]) -> np.ndarray:
        """``[type, k]``: the profiles with ``slices[k]`` compute slices and ``mem_gb`` of memory
        (bits as in ``creatable_bits``)."""
        mem_ok = self.mem_gb >= mem_gb - _EPS
        n_t, n_p = self.compute.shape
        out = np.zeros((n_t, len(slices)), dtype=np.int64)
        for k, c in enumerate(slices):
            ok = mem_ok & (self.compute == c)
            for p in range(n_p):
                out[:, k] |= ok[:, p].astype(np.int64) << p
        return out


def _no_views() -> None:
    """What a pickled or deep-copied holder of typed views becomes (:class:`_StateViews` here,
    the encoders' ``_DynViews`` and ``_EncViews``): nothing, so its owner builds views of its
    own arrays again (:meth:`Cluster.state_views`; the encoder at its next table)."""
    return None


@cython.cclass
class _StateViews:
    """Typed views of a cluster's state arrays, for the compiled mask loop (``_single_rows``):
    built once per :meth:`Cluster.reset` (the arrays are replaced there and only there) instead
    of ~15 buffer acquisitions a mask. They share the arrays' memory, so they read the state as
    it is now. A pickle or deep copy of one is None: a copied cluster builds views of its own
    arrays (a view of the original's would read the original's state)."""

    src: object
    n_res: cython.longlong[:]
    mode: cython.longlong[:]
    sm_used: cython.longlong[:]
    mem_decl: cython.double[:]
    mem_true: cython.double[:]
    frac_decl: cython.double[:]
    online_count: cython.longlong[:]
    node_cpu: cython.double[:]
    ready: cython.uchar[:]
    healthy: cython.uchar[:]
    mig_occ: cython.longlong[:]
    mig_used: cython.longlong[:]
    cap_eps: cython.double[:]
    mps_limit: cython.uchar[:]
    mig_capable: cython.uchar[:]
    type_idx: cython.longlong[:]
    creatable: cython.longlong[:, :, :]
    pcts: cython.longlong[:]
    #: ``(residents, res_frac, node_of_l, mps_limit_l, masks, watchers, gpulets)``
    #: (:func:`_views_of`)
    lists: tuple

    def __init__(self, c: Cluster) -> None:
        f = c.fleet
        self.src = c.n_res  # (the arrays of one reset: ``Cluster.state_views`` checks it)
        self.n_res = c.n_res
        self.mode = c.mode
        self.sm_used = c.sm_used
        self.mem_decl = c.mem_decl
        self.mem_true = c.mem_true
        self.frac_decl = c.frac_decl
        self.online_count = c.online_count
        self.node_cpu = c.node_cpu_used
        self.ready = c.ready.view(np.uint8)
        self.healthy = c.healthy.view(np.uint8)
        self.mig_occ = c.mig_layouts.occ
        self.mig_used = c.mig_layouts.used
        self.cap_eps = f.cap_eps
        self.mps_limit = f.mps_limit.view(np.uint8)
        self.mig_capable = f.mig_capable.view(np.uint8)
        self.type_idx = f.type_idx
        self.creatable = f.mig.creatable_bits
        self.pcts = c.layout.mps_pcts

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


@cython.cfunc  # (a C call from ``_cluster_add``, where it was a Python call of 7 arguments)
@cython.boundscheck(False)  # (a GPU and its node: in range, as ``add`` and ``remove`` index)
@cython.wraparound(False)
@cython.locals(
    v=_StateViews, g=cython.Py_ssize_t, node=cython.Py_ssize_t, mem=cython.double,
    true_mem=cython.double, online=cython.bint, cpu=cython.double,
)  # fmt: skip
def _res_add(v: _StateViews, g: int, node: int, mem: float, true_mem: float, online: bool,
             cpu: float) -> None:  # fmt: skip
    """``Cluster.add``'s element updates through the typed views (compiled only): the same
    IEEE additions as the Python numbers of ``.item`` (a number converts to the double it is)."""
    v.n_res[g] += 1
    v.mem_decl[g] = v.mem_decl[g] + mem
    v.mem_true[g] = v.mem_true[g] + true_mem
    if online:
        v.online_count[g] += 1
    v.node_cpu[node] = v.node_cpu[node] + cpu


@cython.cfunc  # (as ``_res_add``)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(
    v=_StateViews, g=cython.Py_ssize_t, node=cython.Py_ssize_t, mem=cython.double,
    true_mem=cython.double, online=cython.bint, cpu=cython.double,
)  # fmt: skip
@cython.returns(cython.longlong)
def _res_remove(v: _StateViews, g: int, node: int, mem: float, true_mem: float, online: bool,
                cpu: float) -> int:  # fmt: skip
    """``Cluster.remove``'s element updates through the typed views (compiled only), as
    :func:`_res_add`; returns the residents left."""
    v.n_res[g] -= 1
    v.mem_decl[g] = v.mem_decl[g] - mem
    v.mem_true[g] = v.mem_true[g] - true_mem
    if online:
        v.online_count[g] -= 1
    v.node_cpu[node] = v.node_cpu[node] - cpu
    return v.n_res[g]


#: The cluster :func:`_views_of` answered last and its views: the next call for the same cluster
#: is one comparison, where its check read two attributes of the cluster (generic attribute
#: reads of a Python object, ~0.7 k instructions each at a step). :meth:`Cluster.reset` (the only
#: place the arrays are replaced) forgets them; a copy is another object. (It keeps that one
#: cluster alive until another's views are asked for.)
_last_cluster: object = None
_last_views: _StateViews | None = None


def _forget_views(c: Cluster) -> None:
    """``c``'s arrays are replaced (:meth:`Cluster.reset`): :func:`_views_of` forgets its views."""
    global _last_cluster, _last_views
    if _last_cluster is c:
        _last_cluster = None
        _last_views = None


@cython.cfunc
@cython.locals(v=_StateViews)
@cython.returns(_StateViews)
def _views_of(self: Cluster) -> _StateViews:
    """:meth:`Cluster.state_views`' body, C-callable (from ``add``, ``remove`` and the fit
    index's sync, where each was a Python method call)."""
    global _last_cluster, _last_views
    if self is _last_cluster:
        return _last_views  # type: ignore[return-value]
    v = self._views
    if v is None or v.src is not self.n_res:
        v = self._views = _StateViews(self)
        # the reset's per-GPU lists and the fleet's, the masks and the reset's watchers
        # (``add`` and ``remove`` read them here: one typed read, where each was a generic
        # attribute read of the cluster or its fleet)
        f = self.fleet
        v.lists = (self.residents, self.res_frac, f.node_of_l, f.mps_limit_l, self.masks,
                   self._watchers, self.layout.gpulets)  # fmt: skip
    _last_cluster = self
    _last_views = v
    return v


@cython.cclass
class _JobViews:
    """Typed views of a job's static mask parts (``Masks.static_parts``): its GPU types allowed,
    its exclusive fit (``uint8``) and its MIG profile bits per option and GPU. The arrays never
    change, so a copy (pickle, deep copy) views the same values."""

    arrays: tuple
    type_ok: cython.uchar[:]
    excl: cython.uchar[:]
    bits: cython.longlong[:, :]

    def __init__(self, type_ok: np.ndarray, excl: np.ndarray, bits: np.ndarray) -> None:
        self.arrays = (type_ok, excl, bits)
        self.type_ok = type_ok.view(np.uint8)
        self.excl = excl.view(np.uint8)
        self.bits = bits

    def __reduce__(self) -> tuple[object, tuple[Any, ...]]:
        return (_JobViews, self.arrays)


@cython.boundscheck(False)  # (every index is in range by construction)
@cython.wraparound(False)
@cython.locals(
    g=cython.Py_ssize_t, k=cython.Py_ssize_t, n=cython.Py_ssize_t, n_mig=cython.Py_ssize_t,
    mps0=cython.Py_ssize_t, join0=cython.Py_ssize_t, mig0=cython.Py_ssize_t,
    n_excl=cython.Py_ssize_t, n_ts=cython.Py_ssize_t, max_res=cython.longlong,
    b=cython.uchar, sh=cython.uchar, sh_room=cython.uchar, mps_room=cython.uchar,
    mb=cython.uchar, free=cython.uchar, room=cython.uchar, no_limit=cython.uchar,
    mbits=cython.longlong, n_r=cython.longlong, md=cython.longlong, sm=cython.longlong,
    m_ts=cython.longlong, m_mps=cython.longlong, m_mig=cython.longlong, mem=cython.double,
    gang=cython.bint, online=cython.bint, v=_StateViews, jv=_JobViews,
    out=cython.uchar[:, :], type_ok=cython.uchar[:], excl=cython.uchar[:],
    ready=cython.uchar[:], healthy=cython.uchar[:], n_res=cython.longlong[:],
    mode=cython.longlong[:], sm_used=cython.longlong[:], mem_decl=cython.double[:],
    cap_eps=cython.double[:], mps_limit=cython.uchar[:], mig_capable=cython.uchar[:],
    mig_occ=cython.longlong[:], mig_used=cython.longlong[:], type_idx=cython.longlong[:],
    creatable=cython.longlong[:, :, :], pcts=cython.longlong[:], bits=cython.longlong[:, :],
)  # fmt: skip
def _single_rows(
    out: np.ndarray,
    v: _StateViews,
    jv: _JobViews,
    online: bool,
    mem: float,
    max_res: int,
    n_excl: int,
    n_ts: int,
    mps0: int,
    join0: int,
    mig0: int,
    n_mig: int,
    gang: bool,
) -> None:
    """``Cluster._single_mask``'s rows without gpulets, GPU by GPU (compiled only), from the
    cluster's own state arrays (no job-independent pass first: ``Cluster._dynamic``) read
    through views held from the cluster's reset (``v``) and the job's static entry (``jv``):
    ``out`` and the boolean inputs as ``uint8`` views. The same booleans as the numpy passes:
    the same integer comparisons (``sm_used + pct <= 100`` as ``sm_used <= 100 - pct``), and
    the memory test the same double addition and comparison (``mem_decl + mem <= cap_eps``)."""
    # (one view a line: a tuple assignment would box each view as a Python object)
    type_ok = jv.type_ok
    excl = jv.excl
    bits = jv.bits
    ready = v.ready
    healthy = v.healthy
    n_res = v.n_res
    mode = v.mode
    sm_used = v.sm_used
    mem_decl = v.mem_decl
    cap_eps = v.cap_eps
    mps_limit = v.mps_limit
    mig_capable = v.mig_capable
    mig_occ = v.mig_occ
    mig_used = v.mig_used
    type_idx = v.type_idx
    creatable = v.creatable
    pcts = v.pcts
    n = out.shape[1]
    m_ts, m_mps, m_mig = _TS, _MPS, _MIG
    for g in range(n):
        n_r = n_res[g]
        md = mode[g]
        free = n_r == 0
        room = n_r < max_res
        b = type_ok[g] & ready[g]
        if not online:
            b = b & healthy[g]
        if n_excl:
            out[0, g] = b & free & excl[g]
        sh = b & (mem_decl[g] + mem <= cap_eps[g])
        sh_room = sh & room
        if n_ts:
            out[n_excl, g] = sh_room & (free | (md == m_ts))
        if join0 > mps0:
            mps_room = sh_room & (free | (md == m_mps))
            no_limit = not mps_limit[g]
            sm = sm_used[g]
            for k in range(mps0, join0):
                out[k, g] = mps_room & ((sm <= 100 - pcts[k - mps0]) | no_limit)
        if n_mig:
            if gang:
                for k in range(n_mig):
                    out[mig0 + k, g] = 0
            else:
                mb = b & room & mig_capable[g] & (free | (md == m_mig))
                mbits = creatable[type_idx[g], mig_occ[g], mig_used[g]]
                for k in range(n_mig):
                    out[mig0 + k, g] = mb & ((mbits & bits[k, g]) != 0)


class Fleet:
    """The fleet's fixed description: its nodes, GPU types, per-GPU hardware facts and the MIG
    geometry tables. Built once per :class:`Cluster` and only read after (no method writes it),
    so every holder reads the same facts.

    Args:
        nodes: The fleet.
    """

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        if not nodes:
            raise ValueError("cluster: the fleet has no nodes")
        self.nodes = tuple(nodes)
        type_names = sorted({n.gpu_type for n in nodes})
        self.types: tuple[GpuType, ...] = tuple(get_gpu_type(n) for n in type_names)
        tindex = {n: i for i, n in enumerate(type_names)}
        gpu_type_idx: list[int] = []
        node_of: list[int] = []
        for ni, node in enumerate(nodes):
            gpu_type_idx += [tindex[node.gpu_type]] * node.num_gpus
            node_of += [ni] * node.num_gpus
        self.n_gpus = len(gpu_type_idx)
        self.n_nodes = len(nodes)
        self.type_idx = np.asarray(gpu_type_idx, dtype=np.int64)
        self.node_of = np.asarray(node_of, dtype=np.int64)
        self.type_names = tuple(type_names)
        #: Per GPU: its GpuType and type name (static; shared by every snapshot).
        self.gpu_type_of: tuple[GpuType, ...] = tuple(self.types[t] for t in gpu_type_idx)
        self.type_name_of: tuple[str, ...] = tuple(t.name for t in self.gpu_type_of)
        self.mem_cap = np.array([self.types[t].mem_gb for t in gpu_type_idx], dtype=np.float64)
        self.mps_limit = np.array([self.types[t].mps_sm_limit for t in gpu_type_idx], dtype=bool)
        self.mig_capable = np.array([bool(self.types[t].mig_profiles) for t in gpu_type_idx])
        self.node_vcpus = np.array([n.vcpus for n in nodes], dtype=np.float64)
        #: Static per-GPU facts as Python lists (scalar reads on the hot path).
        self.node_of_l: list[int] = self.node_of.tolist()
        self.mps_limit_l: list[bool] = self.mps_limit.tolist()
        self.node_first_gpu = np.concatenate([[0], np.cumsum([n.num_gpus for n in nodes])[:-1]])
        self.mig = _MigTables(self.types)
        #: Per GPU: its memory plus the comparisons' slack (``mem_decl + mem <= cap_eps``).
        self.cap_eps = self.mem_cap + _EPS

    def gpu_type(self, gpu: int) -> GpuType:
        return self.types[int(self.type_idx[gpu])]

    @cached_property
    def total_gpus_by_type(self) -> dict[str, int]:
        counts = np.bincount(self.type_idx, minlength=len(self.types))
        return {self.type_names[i]: int(c) for i, c in enumerate(counts)}


class OptionLayout:
    """The scenario's placement options (:func:`build_options`) and where each mode's rows sit
    in a mask: exclusive, time-sharing, the MPS shares, the gpulet joins, MIG. Fixed at
    construction, like :class:`Fleet`.

    Args:
        sharing: Allowed modes, options, residency limit.
    """

    def __init__(self, sharing: SharingConfig) -> None:
        self.sharing = sharing
        self.options = build_options(sharing)
        modes = [o.mode for o in self.options]
        if modes != sorted(modes):
            raise ValueError("cluster: placement options must be grouped by mode")
        self.n_excl = modes.count(SharingMode.EXCLUSIVE)
        self.n_ts = modes.count(SharingMode.TIME_SHARING)
        self.mps_pcts = np.array(
            [o.sm_pct for o in self.options if o.mode is SharingMode.MPS and not o.gpulet],
            dtype=np.int64,
        )
        #: GPULet's gpulets (``SharingConfig.gpulets``; 0: off): the most MPS partitions a GPU
        #: holds, and the join options ``gpulet1..N`` (after the MPS percentages).
        self.gpulets = sum(1 for o in self.options if o.gpulet)
        self.mps_pct_list: list[int] = self.mps_pcts.tolist()
        #: ``100 - pct`` per MPS option (a column).
        self.mps_headroom = (100 - self.mps_pcts)[:, None]
        self.mig_slices = [o.mig_slices for o in self.options if o.mode is SharingMode.MIG]
        #: The first row of the MPS shares, of the gpulet joins and of MIG.
        self.mps0 = self.n_excl + self.n_ts
        self.join0 = self.mps0 + len(self.mps_pcts)
        self.mig0 = self.join0 + self.gpulets


class MigLayouts:
    """The MIG part of the occupancy: per GPU, its MIG instances (creation order), the slices
    they occupy (a bit mask, ``occ``) and the compute slices in use (``used``). Written by its
    own methods only, which :meth:`Cluster.add` and :meth:`Cluster.remove` call."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.reset()

    def reset(self) -> None:
        """No instance on any GPU."""
        g = self.fleet.n_gpus
        self.occ = np.zeros(g, dtype=np.int64)
        self.used = np.zeros(g, dtype=np.int64)
        self.instances: list[list[MigInstance]] = [[] for _ in range(g)]

    def clear(self, gpu: int) -> None:
        """Drop ``gpu``'s layout (an empty GPU switching into or out of MIG)."""
        self.instances[gpu] = []

    def take(self, job: JobSpec, gpu: int, slices: int) -> tuple[MigInstance, bool]:
        """An instance of ``slices`` compute slices for ``job`` on ``gpu``: an empty one that
        fits, else a new one (True: created)."""
        f = self.fleet
        tables = f.mig
        t = f.type_idx.item(gpu)
        facts = tables.profile_facts[t]
        occ = self.occ.item(gpu)
        mem = _take(job, _S_MEM_GB)
        job_id = _take(job, _S_JOB_ID)
        # The candidates: the profiles of ``slices`` compute slices with the job's memory
        # (their names, and which profiles are among them: the classes of equal ones)
        names = []
        fit = []
        for fact in facts:
            if fact[1] == slices and fact[2] >= mem:
                names.append(fact[0])
                fit.append(fact[4])
        # Reuse an empty instance of a fitting profile first (no reconfiguration needed).
        instances = self.instances[gpu]
        for inst in instances:
            if inst.job_id is None and inst.profile in names:
                inst.job_id = job_id
                self._mark(gpu, inst, busy=True)
                return inst, False
        if fit:
            bits = tables.creatable_bits.item(t, occ, self.used.item(gpu))
            first_start = tables.first_start
            for p_idx in range(len(facts)):
                fact = facts[p_idx]
                if fact[4] not in fit:
                    continue
                start = first_start.item(t, occ, p_idx)
                if start < 0 or not (bits >> p_idx) & 1:
                    continue
                mask = ((1 << fact[3]) - 1) << start  # ``MigProfile.slice_mask(start)``
                # Destroy the empty instances the new one overlaps (legal: they are empty).
                self.instances[gpu] = instances = [
                    i for i in instances if i.job_id is not None or not (i.mask & mask)
                ]
                inst = _new_mig_instance(fact[0], start, mask, fact[1], job_id)
                instances.append(inst)
                self._mark(gpu, inst, busy=True)
                return inst, True
        raise RuntimeError(f"no MIG {slices}g instance on gpu {gpu}: legality was not checked")

    def release(self, job_id: int, gpu: int) -> None:
        """Empty ``job_id``'s instance on ``gpu`` (the instance stays, for reuse)."""
        for inst in self.instances[gpu]:
            if inst.job_id == job_id:
                self._mark(gpu, inst, busy=False)
                inst.job_id = None
                break

    def _mark(self, gpu: int, inst: MigInstance, busy: bool) -> None:
        # (``.item``: the int64 elements as Python ints; stored back, the same int64 values)
        self.occ[gpu] = self.occ.item(gpu) ^ inst.mask
        self.used[gpu] = self.used.item(gpu) + (inst.compute if busy else -inst.compute)


class GpuletParts:
    """GPULet's partitions (``SharingConfig.gpulets``): per GPU, its MPS partitions in creation
    order, ``[sm_pct, [job ids]]`` each, and how many there are (``n_parts``). Written by its
    own methods only; the SM percentage they hold is the cluster's ``sm_used``."""

    def __init__(self, n_gpus: int) -> None:
        self.reset(n_gpus)

    def reset(self, n_gpus: int) -> None:
        """No partition on any GPU."""
        self.parts: list[list[list]] = [[] for _ in range(n_gpus)]
        self.n_parts = np.zeros(n_gpus, dtype=np.int64)

    def join(self, job_id: int, gpu: int, k: int) -> None:
        """Put ``job_id`` in ``gpu``'s k-th partition (from 1)."""
        parts = self.parts[gpu]
        if k > len(parts):
            raise RuntimeError(f"gpu {gpu} has no gpulet {k}: legality was not checked")
        parts[k - 1][1].append(job_id)

    def open(self, job_id: int, gpu: int, sm_pct: int) -> None:
        """A new partition of ``sm_pct`` on ``gpu``, holding ``job_id``."""
        parts = self.parts[gpu]
        parts.append([sm_pct, [job_id]])
        self.n_parts[gpu] = len(parts)

    def leave(self, job_id: int, gpu: int) -> int:
        """Take ``job_id`` out of its partition of ``gpu``; an emptied partition is freed.
        Returns the SM percentage freed (0: the partition still holds jobs)."""
        parts = self.parts[gpu]
        for k, (pct, members) in enumerate(parts):
            if job_id in members:
                members.remove(job_id)
                if members:
                    return 0
                del parts[k]
                self.n_parts[gpu] = len(parts)
                return pct
        raise RuntimeError(f"job {job_id} is in no gpulet of gpu {gpu}")

    def state(self, gpu: int) -> list[list]:
        """A copy of ``gpu``'s partitions."""
        return [[p, list(m)] for p, m in self.parts[gpu]]

    def restore(self, gpu: int, parts: list[list]) -> None:
        """Put back ``gpu``'s partitions as :meth:`state` gave them."""
        self.parts[gpu] = parts
        self.n_parts[gpu] = len(parts)

    def of(self, gpu: int) -> dict[int, tuple[int, int]]:
        """Per job in ``gpu``'s partitions: (partition index, its SM percentage)."""
        return {j: (k, pct) for k, (pct, members) in enumerate(self.parts[gpu]) for j in members}


def _gang_starts(single: np.ndarray, n: int) -> np.ndarray:
    """A gang starting at GPU g takes the first ``n`` legal GPUs at index >= g
    (``single`` option-major, as from :meth:`Masks._single_mask`)."""
    if single.shape[1] < _GANG_SCAN_GPUS:
        suffix = np.cumsum(single[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
        return single & (suffix >= n)
    # On a large fleet: only the last n - 1 legal GPUs of each option's row cannot start a
    # gang, so clear the row after its n-th legal GPU from the end (the same booleans; a
    # nonzero scan is ~4x cheaper than the int32 suffix sum at 1,000+ GPUs).
    out = single.copy()
    counts = [np.count_nonzero(row) for row in single]  # (with an axis: a slow sum)
    for r, k in enumerate(counts):
        if k >= n:
            row = out[r]
            row[row.nonzero()[0].item(k - n) + 1 :] = False
        elif k:
            out[r] = False
    return out


@cython.cfunc
@cython.inline
def _masks_indexed(self: Masks, option: int) -> bool:
    """:meth:`Masks._indexed`'s body, C-callable (from :func:`_masks_legal` and
    :func:`_masks_first_legal`)."""
    return option < self._index_below  # type: ignore[no-any-return]


@cython.cfunc
def _masks_placeable(self: Masks, job: JobSpec) -> bool:
    """:meth:`Masks.placeable`'s body, C-callable (from :meth:`Cluster.placeable`)."""
    if self.layout.gpulets:  # the fit index knows no join options: the masks answer
        return self.placeable_scan(job)  # type: ignore[no-any-return]
    return _fit_placeable(_fit_index(self, job.kind is _ONLINE), job)


class Masks:
    """The one legality function of a :class:`Cluster` and its caches: the placement masks
    (:meth:`placement_mask`), the "does anything fit" and "where first" questions answered
    from the fit indexes (:class:`_FitIndex`), and the reasons :meth:`check` gives. It reads
    the cluster's state and writes only its own caches, which the cluster keeps valid through
    :meth:`touch` (the GPUs changed) and :meth:`reset`.

    Args:
        cluster: The cluster whose state the masks read (its :class:`Fleet` and
            :class:`OptionLayout` too).
    """

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.fleet = cluster.fleet
        self.layout = cluster.layout
        #: GPUs without an MPS SM limit (static).
        self.no_mps_limit = ~self.fleet.mps_limit
        #: The options the fit index answers are those below this one (:meth:`_indexed`):
        #: exclusive, time-sharing and the MPS shares, none with gpulets on (fixed).
        self._index_below: int = 0 if self.layout.gpulets else self.layout.join0
        self._job_static: dict[tuple[float, tuple[str, ...]], tuple[Any, ...]] = {}

    def reset(self) -> None:
        """Forget everything derived from the cluster's state (its :meth:`Cluster.reset`)."""
        self._bits_buf = np.empty((len(self.layout.mig_slices), self.fleet.n_gpus), dtype=np.int64)
        self._type_ok_cache: dict[tuple[str, ...], np.ndarray] = {}
        self._dyn_version = -1
        self._dyn: tuple[np.ndarray, ...] = ()
        self._dirty: set[int] | None = None  # None: recompute everything
        self._single_version = -1
        self._single_memo: dict[tuple[float, tuple[str, ...], bool, bool], np.ndarray] = {}
        #: "Does anything fit" indexes (:class:`_FitIndex`), per job kind (online or not),
        #: built on first use and kept up to date with the GPUs changed since.
        self._fit_ix: dict[bool, _FitIndex] = {}

    def touch(self, gpu: int) -> None:
        """Note that ``gpu``'s state changed (for :meth:`_dynamic` and the fit indexes)."""
        _masks_touch(self, gpu)

    def type_ok(self, allowed: tuple[str, ...]) -> np.ndarray:
        """Per GPU: its type is one of ``allowed`` (every GPU when it is empty)."""
        f = self.fleet
        if not allowed:
            return np.ones(f.n_gpus, dtype=bool)
        hit = self._type_ok_cache.get(allowed)
        if hit is None:
            names = {get_gpu_type(a).name for a in allowed}
            ok_types = np.array([n in names for n in f.type_names], dtype=bool)
            hit = ok_types[f.type_idx]
            self._type_ok_cache[allowed] = hit
        return hit

    # ------------------------------------------------------------------ legality
    def placement_mask(self, job: JobSpec) -> np.ndarray:
        """Legal (first GPU, option) pairs for ``job``: a bool array of shape (n_gpus, n_options).

        This is the single source of truth for what may be placed where.
        """
        single = self._single_cached(job)
        m = _gang_starts(single, job.num_gpus) if job.num_gpus > 1 else single
        # Computed option-major (contiguous rows per option); returned as a (gpu, option) view.
        return m.T

    def placeable(self, job: JobSpec) -> bool:
        """Whether :meth:`placement_mask` of ``job`` allows anything.

        From the cluster's :class:`_FitIndex` (:meth:`placeable_index`: no mask); with gpulets
        on, from the masks (:meth:`placeable_scan`: the index knows no join options). A
        decision that follows needs no mask either where the index answers
        (:meth:`first_legal`, :meth:`legal`, :meth:`gang_gpus`)."""
        return _masks_placeable(self, job)

    def placeable_index(self, job: JobSpec) -> bool:
        """:meth:`placeable` from the cluster's :class:`_FitIndex` (kept up to date as GPUs
        change, so a question costs O(GPU types x options), not O(GPUs))."""
        return _fit_placeable(_fit_index(self, job.kind is _ONLINE), job)

    def _index(self, online: bool) -> _FitIndex:
        """The :class:`_FitIndex` of jobs of this kind, up to date (built on first use)."""
        return _fit_index(self, online)

    def _indexed(self, option: int) -> bool:
        """Whether the :class:`_FitIndex` answers legality under ``option``: exclusive,
        time-sharing and the MPS shares (its rows), not MIG nor gpulet joins."""
        return _masks_indexed(self, option)  # type: ignore[no-any-return]

    def first_legal(self, job: JobSpec, option: int) -> int:
        """The lowest GPU ``g`` with ``placement_mask(job)[g, option]`` (-1: none), what
        ``argmax`` of that column gives. From the :class:`_FitIndex` where it answers (a gang
        may start at its first single-GPU legal GPU iff the option has ``num_gpus`` of them:
        :func:`_gang_starts`), else from the mask."""
        return _masks_first_legal(self, job, option)

    def single_row(self, job: JobSpec, option: int) -> np.ndarray:
        """``_single_cached(job)[option]``: per GPU, ``job``'s single-GPU legality under
        ``option`` (what a gang's row of :func:`_gang_starts` starts from), from the
        :class:`_FitIndex` where it answers (one comparison over the fleet, no mask)."""
        if self._indexed(option):
            return self._index(job.kind is _ONLINE).row_fits(job.mem_gb, job.gpu_types, option)
        return self._single_cached(job)[option]

    def single_rows(self, job: JobSpec) -> np.ndarray:
        """Every option's :meth:`single_row` at once: ``job``'s single-GPU legality per (option,
        GPU), option-major, read-only (``_single_cached``: memoised for the cluster's version,
        so a gang's rows after its placement mask are a look-up)."""
        return self._single_cached(job)

    def single_legal(self, job: JobSpec, gpu: int, option: int) -> bool:
        """``single_row(job, option)[gpu]``: ``job`` may take ``gpu`` alone under ``option``
        (each of a gang's GPUs must), without a row: from the :class:`_FitIndex` where it
        answers (the GPU's value against its type's threshold, ``_FitIndex.legal``)."""
        if self._indexed(option):
            ix = self._index(job.kind is _ONLINE)
            return ix.legal(ix.thresholds(job.mem_gb, job.gpu_types), option, gpu)
        return bool(self._single_cached(job)[option][gpu])

    def legal(self, job: JobSpec, gpu: int, option: int) -> bool:
        """``placement_mask(job)[gpu, option]`` (in range), from the :class:`_FitIndex` where it
        answers: single-GPU legality, and for a gang ``num_gpus`` legal GPUs from ``gpu`` on,
        the first being ``gpu`` (:func:`_gang_starts`)."""
        return _masks_legal(self, job, gpu, option)

    def placeable_scan(self, job: JobSpec) -> bool:
        """:meth:`placeable` from the masks (the reference the index is tested against): a gang
        fits under an option iff the option has ``num_gpus`` legal GPUs (:func:`_gang_starts`
        starts one at each of the first ``k - n + 1`` of ``k``)."""
        single = self._single_cached(job)
        if job.num_gpus > 1:
            n = job.num_gpus  # (row by row: ``count_nonzero`` with an axis is a slow sum)
            return any(np.count_nonzero(row) >= n for row in single)
        return bool(single.any())

    def _dynamic(self) -> tuple[np.ndarray, ...]:
        """The job-independent parts of the mask: recomputed once per ``version``, and then
        only on the GPUs changed since (O(GPUs touched) per event, not O(cluster))."""
        version = self.c.version
        if self._dyn_version == version:
            return self._dyn
        dirty = self._dirty
        if dirty is None or not dirty or 8 * len(dirty) > self.fleet.n_gpus:
            self._dyn = self._dynamic_full()
        else:
            for g in dirty:
                self._dynamic_row(g)
        self._dirty = set()
        self._dyn_version = version
        return self._dyn

    def _dynamic_full(self) -> tuple[np.ndarray, ...]:
        # Modes are compared as plain ints (an array compared with an enum member costs ~4x
        # more), and ``sm_used + pct <= 100`` as ``sm_used <= 100 - pct`` (integers: exact).
        c, f, lay = self.c, self.fleet, self.layout
        free = c.n_res == 0
        room = c.n_res < lay.sharing.max_residents
        mode = c.mode
        ts = room & (free | (mode == _TS))
        mps_room = room & (free | (mode == _MPS))
        sm_ok = (c.sm_used <= lay.mps_headroom) | self.no_mps_limit
        mps = mps_room & sm_ok  # (n_mps, n_gpus)
        if lay.gpulets:  # a new partition: at most ``gpulets`` a GPU
            mps &= c.gpulet_parts.n_parts < lay.gpulets
        mig_base = room & f.mig_capable & (free | (mode == _MIG))
        if lay.mig_slices:
            ml = c.mig_layouts
            mig_bits = f.mig.creatable_bits[f.type_idx, ml.occ, ml.used]
        else:
            mig_bits = np.zeros(f.n_gpus, dtype=np.int64)
        return (free, c.ready & c.healthy, ts, mps, mig_base, mig_bits)

    def _dynamic_row(self, g: int) -> None:
        """:meth:`_dynamic_full` for one GPU (the same rules, on scalars)."""
        free_a, ready_healthy, ts, mps, mig_base, mig_bits = self._dyn
        c, f, lay = self.c, self.fleet, self.layout
        n = c.n_res.item(g)
        mode = c.mode.item(g)
        free = n == 0
        room = n < lay.sharing.max_residents
        free_a[g] = free
        ready_healthy[g] = c.ready.item(g) and c.healthy.item(g)
        ts[g] = room and (free or mode == _TS)
        mps_room = room and (free or mode == _MPS)
        sm = c.sm_used.item(g)
        no_limit = not f.mps_limit_l[g]
        if lay.gpulets and c.gpulet_parts.n_parts.item(g) >= lay.gpulets:
            mps_room = False
        mps[:, g] = [mps_room and (sm + p <= 100 or no_limit) for p in lay.mps_pct_list]
        mig_base[g] = room and f.mig_capable.item(g) and (free or mode == _MIG)
        if lay.mig_slices:
            ml = c.mig_layouts
            t, occ, used = f.type_idx.item(g), ml.occ.item(g), ml.used.item(g)
            mig_bits[g] = f.mig.creatable_bits[t, occ, used]

    def static_parts(self, job: JobSpec) -> tuple[Any, ...]:
        """The parts of ``job``'s mask that depend on the fleet only (cached per memory/types)."""
        key = (job.mem_gb, job.gpu_types)
        hit = self._job_static.get(key)
        if hit is None or (cython.compiled and hit[3] is None):
            # (no entry, or one made interpreted, without views: a cluster pickled by a pure
            # Python process and loaded by a compiled one)
            f = self.fleet
            mem = job.mem_gb
            type_ok = self.type_ok(job.gpu_types)
            excl = type_ok & (mem <= f.cap_eps)
            bits = f.mig.profile_bits(mem, self.layout.mig_slices)[f.type_idx].T.copy()
            if len(self._job_static) >= 4096:
                self._job_static.clear()
            # (with their typed views, for the compiled loop: ``_single_rows``)
            jv = _JobViews(type_ok, excl, bits) if cython.compiled else None
            hit = self._job_static[key] = (type_ok, excl, bits, jv)
        return hit

    def _single_cached(self, job: JobSpec) -> np.ndarray:
        """:meth:`_single_mask`, memoised for the current ``version`` (it depends on the job's
        memory, GPU types, kind and gang-ness only)."""
        version = self.c.version
        if self._single_version != version:
            self._single_memo.clear()
            self._single_version = version
        key = (job.mem_gb, job.gpu_types, job.kind is _ONLINE, job.num_gpus > 1)
        m = self._single_memo.get(key)
        if m is None:
            m = self._single_memo[key] = self._single_mask(job)
            m.flags.writeable = False
        return m

    def _single_mask(self, job: JobSpec) -> np.ndarray:
        """Legal single-GPU placements, option-major: shape (n_options, n_gpus)."""
        type_ok, excl, bits, jv = self.static_parts(job)
        c, lay = self.c, self.layout
        n_gpus = self.fleet.n_gpus
        gpulets = lay.gpulets
        if cython.compiled and not gpulets and n_gpus < _MASK_LOOP_GPUS:
            # Compiled: the same booleans in one typed loop over (GPU, option), from the
            # cluster's state arrays, instead of the job-independent pass (``_dynamic``) and
            # ~10 numpy passes over small arrays (their fixed cost was most of a mask on a
            # small fleet); interpreted, the passes below (tests/test_typed_components.py
            # compares the two on random states).
            out8 = np.empty((len(lay.options), n_gpus), dtype=np.uint8)
            _single_rows(
                out8, c.state_views(), jv, job.kind is _ONLINE, float(job.mem_gb),
                lay.sharing.max_residents, lay.n_excl, lay.n_ts, lay.mps0, lay.join0,
                lay.mig0, len(lay.mig_slices), job.num_gpus > 1,
            )  # fmt: skip
            return out8.view(bool)
        free, ready_healthy, ts, mps, mig_base, mig_bits = self._dynamic()
        out = np.empty((len(lay.options), n_gpus), dtype=bool)
        base = type_ok & (c.ready if job.kind is _ONLINE else ready_healthy)
        n_excl, mps0, mig0 = lay.n_excl, lay.mps0, lay.mig0
        if n_excl:
            np.logical_and(base & free, excl, out=out[0])
        shared = base & (c.mem_decl + job.mem_gb <= self.fleet.cap_eps)
        if lay.n_ts:
            np.logical_and(shared, ts, out=out[n_excl])
        join0 = lay.join0
        if join0 > mps0:
            np.logical_and(shared, mps, out=out[mps0:join0])
        if gpulets:
            # join the k-th partition: a GPU in MPS mode that has it, with room and memory;
            # gangs span whole GPUs (no joins)
            joinable = shared & (c.mode == _MPS) & (c.n_res < lay.sharing.max_residents)
            n_parts = c.gpulet_parts.n_parts
            for k in range(1, gpulets + 1):
                np.logical_and(joinable, n_parts >= k, out=out[join0 + k - 1])
                if job.num_gpus > 1:
                    out[join0 + k - 1] = False
        if lay.mig_slices:
            rows = out[mig0:]
            if job.num_gpus > 1:
                rows[:] = False  # MIG instances host single-GPU jobs only (gangs span whole GPUs)
            else:
                np.bitwise_and(mig_bits, bits, out=self._bits_buf)
                np.not_equal(self._bits_buf, 0, out=rows)
                rows &= base & mig_base
        return out

    def gang_gpus(self, job: JobSpec, first_gpu: int, option: int) -> list[int]:
        """The GPUs a placement of ``job`` at (first_gpu, option) uses."""
        if job.num_gpus == 1:
            return [first_gpu]
        if self._indexed(option):
            ix = self._index(job.kind is _ONLINE)
            return ix.walk(
                ix.thresholds(job.mem_gb, job.gpu_types), option, first_gpu, job.num_gpus
            )
        single = self._single_cached(job)[option]
        idx = np.flatnonzero(single[first_gpu:])[: job.num_gpus] + first_gpu
        return [int(i) for i in idx]

    def check(self, job: JobSpec, gpu: int, option: int) -> str | None:
        """Why placing ``job`` at (gpu, option) is illegal, or None if it is legal."""
        options = self.layout.options
        if not 0 <= option < len(options):
            return f"option {option} out of range 0..{len(options) - 1}"
        n_gpus = self.fleet.n_gpus
        if not 0 <= gpu < n_gpus:
            return f"gpu {gpu} out of range 0..{n_gpus - 1}"
        if _masks_legal(self, job, gpu, option):
            return None
        return self._explain(job, gpu, options[option])

    def _explain(self, job: JobSpec, gpu: int, opt: PlacementOption) -> str:
        c, f = self.c, self.fleet
        max_res, gpulets = self.layout.sharing.max_residents, self.layout.gpulets
        n_parts = c.gpulet_parts.n_parts
        gt = f.gpu_type(gpu)
        if job.gpu_types and gt.name not in {get_gpu_type(a).name for a in job.gpu_types}:
            return f"job {job.job_id} needs {'/'.join(job.gpu_types)}, gpu {gpu} is {gt.name}"
        if not c.ready[gpu]:
            return f"gpu {gpu} is being reconfigured"
        if job.kind is not _ONLINE and not c.healthy[gpu]:
            return f"gpu {gpu} is not healthy (SysMonitor): offline work is not placed there"
        if job.num_gpus > 1:
            return f"gang of {job.num_gpus} GPUs does not fit from gpu {gpu} with {opt.label}"
        if opt.mode is _M_EXCL and c.n_res[gpu] > 0:
            return f"gpu {gpu} is not empty ({c.n_res[gpu]} residents) for exclusive use"
        if c.n_res[gpu] >= max_res:
            return f"gpu {gpu} already hosts the maximum of {max_res} jobs"
        if c.n_res[gpu] > 0 and c.mode[gpu] != opt.mode:
            return f"gpu {gpu} is in mode {SharingMode(c.mode[gpu]).name}, not {opt.mode.name}"
        if opt.mode is _M_MIG and not f.mig_capable[gpu]:
            return f"gpu {gpu} ({gt.name}) does not support MIG"
        if opt.mode is _M_MIG:
            return f"no free MIG {opt.mig_slices}g instance with {job.mem_gb:g} GB on gpu {gpu}"
        if opt.mode is _M_MPS and opt.gpulet and n_parts[gpu] < opt.gpulet:
            return f"gpu {gpu} has {n_parts[gpu]} gpulet(s), no gpulet {opt.gpulet} to share"
        if opt.mode is _M_MPS and not opt.gpulet and gpulets and n_parts[gpu] >= gpulets:
            return f"gpu {gpu} is split in its {gpulets} gpulets already"
        if opt.mode is _M_MPS and not opt.gpulet and c.sm_used[gpu] + opt.sm_pct > 100:
            return f"gpu {gpu} MPS SM share would be {c.sm_used[gpu] + opt.sm_pct}% > 100%"
        return (
            f"job {job.job_id} needs {job.mem_gb:g} GB, gpu {gpu} has "
            f"{f.mem_cap[gpu] - c.mem_decl[gpu]:g} GB free"
        )


def _read(path: str) -> Any:
    """A read-only property of a :class:`Cluster` that reads ``path`` from it (``"fleet.n_gpus"``:
    the attribute of the part that owns it)."""
    return property(attrgetter(path), doc=f"``{path}`` (read-only).")


class Cluster:
    """All GPUs and nodes of the fleet, with their sharing state.

    The cluster owns the occupancy: per GPU its residents, mode, declared and true memory, MPS
    SM share, readiness and health, per node its CPU use, and the ``version`` that every
    change bumps; :meth:`add`, :meth:`remove`, :meth:`set_ready`, :meth:`set_healthy` and
    :meth:`restore_gpulets` are its only writers. Its components own the rest: the fixed
    description (:class:`Fleet`, :class:`OptionLayout`), the MIG layouts (:class:`MigLayouts`)
    and GPULet partitions (:class:`GpuletParts`) its writers update, and the placement masks
    with their caches and fit indexes (:class:`Masks`). The fixed facts are read through
    properties (``cluster.n_gpus``, ``cluster.node_of``, ...), the legality questions through
    methods that delegate to :class:`Masks`.

    Args:
        nodes: The fleet.
        sharing: Allowed modes, options, residency limit.
    """

    def __init__(self, nodes: Sequence[NodeSpec], sharing: SharingConfig) -> None:
        self.fleet = Fleet(nodes)
        self.layout = OptionLayout(sharing)
        self.mig_layouts = MigLayouts(self.fleet)
        self.gpulet_parts = GpuletParts(self.fleet.n_gpus)
        self.masks = Masks(self)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Empty every GPU; modes return to unset."""
        g = self.fleet.n_gpus
        self.mode = np.full(g, MODE_NONE, dtype=np.int64)
        self.n_res = np.zeros(g, dtype=np.int64)
        self.mem_decl = np.zeros(g, dtype=np.float64)
        self.mem_true = np.zeros(g, dtype=np.float64)
        self.sm_used = np.zeros(g, dtype=np.int64)
        self.online_count = np.zeros(g, dtype=np.int64)
        self.healthy = np.ones(g, dtype=bool)
        self.ready = np.ones(g, dtype=bool)
        self.mig_layouts.reset()
        self.residents: list[list[int]] = [[] for _ in range(g)]
        #: Per GPU: the residents' requested GPU fractions (``JobSpec.gpu_frac``), in residence
        #: order, and their sum (summed in that order: what PAI's allocation accounting sees).
        self.res_frac: list[list[float]] = [[] for _ in range(g)]
        self.frac_decl = np.zeros(g, dtype=np.float64)
        self.gpulet_parts.reset(g)
        self.node_cpu_used = np.zeros(self.fleet.n_nodes, dtype=np.float64)
        self.version = 0
        #: Typed views of the arrays above, for the compiled mask loop (built on first use:
        #: :meth:`state_views`).
        self._views: _StateViews | None = None
        _forget_views(self)
        #: Sets of GPUs changed since their owner last emptied them (:meth:`watch`).
        self._watchers: list[set[int]] = []
        self.masks.reset()

    # ------------------------------------------------------------------ the parts' facts
    # Read-only, each from the part that owns it (``cluster.n_gpus`` is ``cluster.fleet.n_gpus``).
    nodes: tuple[NodeSpec, ...] = _read("fleet.nodes")
    n_nodes: int = _read("fleet.n_nodes")
    n_gpus: int = _read("fleet.n_gpus")
    types: tuple[GpuType, ...] = _read("fleet.types")
    type_names: tuple[str, ...] = _read("fleet.type_names")
    type_idx: np.ndarray = _read("fleet.type_idx")
    node_of: np.ndarray = _read("fleet.node_of")
    node_first_gpu: np.ndarray = _read("fleet.node_first_gpu")
    node_vcpus: np.ndarray = _read("fleet.node_vcpus")
    gpu_type_of: tuple[GpuType, ...] = _read("fleet.gpu_type_of")
    type_name_of: tuple[str, ...] = _read("fleet.type_name_of")
    mem_cap: np.ndarray = _read("fleet.mem_cap")
    mps_limit: np.ndarray = _read("fleet.mps_limit")
    mig_capable: np.ndarray = _read("fleet.mig_capable")
    mig: _MigTables = _read("fleet.mig")
    total_gpus_by_type: dict[str, int] = _read("fleet.total_gpus_by_type")
    sharing: SharingConfig = _read("layout.sharing")
    options: tuple[PlacementOption, ...] = _read("layout.options")
    gpulets: int = _read("layout.gpulets")
    mig_occ: np.ndarray = _read("mig_layouts.occ")
    mig_used: np.ndarray = _read("mig_layouts.used")
    mig_instances: list[list[MigInstance]] = _read("mig_layouts.instances")
    parts: list[list[list]] = _read("gpulet_parts.parts")
    n_parts: np.ndarray = _read("gpulet_parts.n_parts")

    def gpu_type(self, gpu: int) -> GpuType:
        return self.fleet.gpu_type(gpu)

    # ------------------------------------------------------------------ legality (Masks)
    def placement_mask(self, job: JobSpec) -> np.ndarray:
        """Legal (first GPU, option) pairs for ``job``: a bool array of shape (n_gpus, n_options).

        This is the single source of truth for what may be placed where (:class:`Masks`).
        """
        return self.masks.placement_mask(job)

    def placeable(self, job: JobSpec) -> bool:
        """Whether :meth:`placement_mask` of ``job`` allows anything (:meth:`Masks.placeable`;
        compiled, through C calls down to the fit index)."""
        return _masks_placeable(self.masks, job)

    def placeable_index(self, job: JobSpec) -> bool:
        """:meth:`placeable` from the fit index (:meth:`Masks.placeable_index`)."""
        return self.masks.placeable_index(job)

    def placeable_scan(self, job: JobSpec) -> bool:
        """:meth:`placeable` from the masks (:meth:`Masks.placeable_scan`)."""
        return self.masks.placeable_scan(job)

    def first_legal(self, job: JobSpec, option: int) -> int:
        """The lowest GPU ``g`` with ``placement_mask(job)[g, option]`` (-1: none)."""
        return _masks_first_legal(self.masks, job, option)

    def first_legal_in(self, job: JobSpec, options: Sequence[int]) -> tuple[int, int]:
        """The first of ``options`` (in their order) with a legal GPU for ``job``, and its
        lowest one: ``(gpu, option)``, ``(-1, -1)`` when none has one. :meth:`first_legal` over
        the options in one call (compiled, each option's question a C call)."""
        m = self.masks
        for o in options:
            g = _masks_first_legal(m, job, o)
            if g >= 0:
                return g, o
        return -1, -1

    def single_row(self, job: JobSpec, option: int) -> np.ndarray:
        """Per GPU, ``job``'s single-GPU legality under ``option`` (:meth:`Masks.single_row`)."""
        return self.masks.single_row(job, option)

    def single_rows(self, job: JobSpec) -> np.ndarray:
        """Per (option, GPU), ``job``'s single-GPU legality (:meth:`Masks.single_rows`)."""
        return self.masks.single_rows(job)

    def legal(self, job: JobSpec, gpu: int, option: int) -> bool:
        """``placement_mask(job)[gpu, option]`` (in range; :meth:`Masks.legal`)."""
        return _masks_legal(self.masks, job, gpu, option)  # type: ignore[no-any-return]

    def single_legal(self, job: JobSpec, gpu: int, option: int) -> bool:
        """``single_row(job, option)[gpu]`` without the row (:meth:`Masks.single_legal`)."""
        return self.masks.single_legal(job, gpu, option)

    def gang_gpus(self, job: JobSpec, first_gpu: int, option: int) -> list[int]:
        """The GPUs a placement of ``job`` at (first_gpu, option) uses (:meth:`Masks.gang_gpus`;
        a single-GPU job's here, without the call: :func:`_cluster_gang_gpus`)."""
        return _cluster_gang_gpus(self, job, first_gpu, option)  # type: ignore[no-any-return]

    def check(self, job: JobSpec, gpu: int, option: int) -> str | None:
        """Why placing ``job`` at (gpu, option) is illegal, or None if it is legal."""
        return self.masks.check(job, gpu, option)

    def type_ok(self, allowed: tuple[str, ...]) -> np.ndarray:
        """Per GPU: its type is allowed (:meth:`Masks.type_ok`)."""
        return self.masks.type_ok(allowed)

    #: (a function of its arguments only: :func:`_gang_starts`)
    gang_mask = staticmethod(_gang_starts)

    # ------------------------------------------------------------------ change notes
    def _touch(self, gpu: int) -> None:
        """Note that ``gpu``'s state changed (for the masks' caches and the watchers)."""
        _touched(self, gpu)

    def watch(self) -> set[int]:
        """A set that every GPU whose state changes (residents, declared memory and fractions,
        mode, health, readiness) is added to from now on, until :meth:`reset`: its owner reads
        and empties it to keep something derived from the GPUs up to date incrementally."""
        w: set[int] = set()
        self._watchers.append(w)
        return w

    def unwatch(self, w: set[int]) -> None:
        """Stop adding to ``w`` (a set :meth:`watch` returned; nothing if it is not watching,
        e.g. after a reset)."""
        self._watchers[:] = [x for x in self._watchers if x is not w]

    @cython.locals(sv=_StateViews)
    def set_ready(self, gpu: int, ready: bool) -> None:
        """Mark ``gpu`` ready (or being reconfigured). Compiled, written through the typed
        views (the byte numpy's boolean ``setitem`` stores, without its ~1.3 k instructions)
        and noted by a C call."""
        if cython.compiled:
            sv = _views_of(self)
            sv.ready[gpu] = 1 if ready else 0
            _touched(self, gpu)
        else:
            self.ready[gpu] = ready
            self._touch(gpu)
        self.version += 1

    def set_healthy(self, gpu: int, healthy: bool) -> None:
        """Mark ``gpu`` healthy or not (SysMonitor): offline work is placed on healthy GPUs."""
        self.healthy[gpu] = healthy
        self._touch(gpu)
        self.version += 1

    def state_views(self) -> _StateViews:
        """The typed views of this reset's state arrays (built on first use, and again in a
        copy: a deep copy's are None)."""
        return _views_of(self)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ mutation
    def add(self, job: JobSpec, gpu: int, opt: PlacementOption) -> tuple[float, MigInstance | None]:
        """Place one instance of ``job`` on ``gpu`` (legality already checked).

        Returns:
            The setup delay in seconds (mode switch, MPS daemon start, MIG instance creation)
            and the MIG instance used, if any (:func:`_cluster_add`: compiled, the lifecycle
            calls it in C).
        """
        return _cluster_add(self, job, gpu, opt)  # type: ignore[no-any-return]

    def gpulet_state(self, gpu: int) -> tuple[list[list], int]:
        """A copy of ``gpu``'s MPS partitions (``[sm_pct, [job ids]]`` each) and its SM
        percentage in use: what :meth:`restore_gpulets` puts back."""
        return self.gpulet_parts.state(gpu), self.sm_used.item(gpu)

    def restore_gpulets(self, gpu: int, parts: list[list], sm_used: int) -> None:
        """Put back ``gpu``'s partitions and SM percentage as :meth:`gpulet_state` gave them
        (a migration's check that removed and re-added a job undoes the new partition order)."""
        self.gpulet_parts.restore(gpu, parts)
        self.sm_used[gpu] = sm_used
        self._touch(gpu)
        self.version += 1

    def gpulet_of(self, gpu: int) -> dict[int, tuple[int, int]]:
        """Per resident of ``gpu`` (gpulets on, MPS): (partition index, its SM percentage)."""
        return self.gpulet_parts.of(gpu)

    def remove(self, job: JobSpec, gpu: int, opt: PlacementOption) -> None:
        """Take one instance of ``job`` off ``gpu`` (:func:`_cluster_remove`: compiled, the
        lifecycle calls it in C)."""
        _cluster_remove(self, job, gpu, opt)

    # ------------------------------------------------------------------ invariants
    def check_invariants(self) -> None:
        """Raise AssertionError if a capacity invariant is broken (used by tests)."""
        assert np.all(self.mem_decl <= self.mem_cap + 1e-6), "declared memory over capacity"
        assert np.all(self.sm_used <= 100), "MPS SM percentage over 100"
        assert np.all(self.n_res <= self.sharing.max_residents), "too many residents"
        assert np.all(self.n_res == np.array([len(r) for r in self.residents]))
        for g in range(self.n_gpus):
            insts = self.mig_instances[g]
            if insts:
                used = 0
                mask = 0
                for inst in insts:
                    assert not (mask & inst.mask), f"gpu {g}: overlapping MIG instances"
                    mask |= inst.mask
                    used += inst.compute
                assert used <= 7, f"gpu {g}: MIG compute slices {used} > 7"
                layout = [(i.profile, i.start) for i in insts]
                assert mig_layout_legal(self.gpu_type(g), layout), f"gpu {g}: illegal {layout}"
            if self.n_res[g] > 1:
                assert self.mode[g] != SharingMode.EXCLUSIVE, f"gpu {g}: shared while exclusive"
            if self.gpulets:
                parts = self.parts[g]
                assert len(parts) == self.n_parts[g] <= self.gpulets, f"gpu {g}: gpulets {parts}"
                members = sorted(j for _, m in parts for j in m)
                if self.mode[g] == SharingMode.MPS:
                    assert members == sorted(self.residents[g]), f"gpu {g}: gpulets {parts}"
                    assert all(m for _, m in parts), f"gpu {g}: an empty gpulet"
                    if self.mps_limit[g]:
                        assert self.sm_used[g] == sum(p for p, _ in parts), f"gpu {g}: SM use"
                else:
                    assert not parts, f"gpu {g}: gpulets outside MPS"


# ``JobSpec``'s slot descriptors of the fields ``add``, ``remove`` and ``gang_gpus`` read:
# ``_take(job, _S_MEM_GB)`` is ``job.mem_gb`` (compiled, CPython's member read, a C call of
# ``job.pxd``'s ``_take``, no attribute lookup through the type; interpreted, the descriptor).
_S_CPU_CORES = JobSpec.__dict__["cpu_cores"]
_S_GPU_FRAC = JobSpec.__dict__["gpu_frac"]
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_KIND = JobSpec.__dict__["kind"]
_S_MEM_GB = JobSpec.__dict__["mem_gb"]
_S_NUM_GPUS = JobSpec.__dict__["num_gpus"]
_S_TRUE_MEM_GB = JobSpec.__dict__["true_mem_gb"]
# ``PlacementOption``'s, the same way (``opt.mode``, ``opt.sm_pct``, ``opt.mig_slices``).
_O_MIG_SLICES = PlacementOption.__dict__["mig_slices"]
_O_MODE = PlacementOption.__dict__["mode"]
_O_SM_PCT = PlacementOption.__dict__["sm_pct"]


@cython.cfunc
@cython.locals(fracs=list, t=cython.double)
@cython.returns(cython.double)
def _frac_sum(fracs: list[float]) -> float:
    """The fractions' sum, added left to right from ``0.0`` (compiled, a C loop where ``sum``
    was a builtin call): Python 3.11's ``sum`` of floats, the same IEEE additions in the same
    order. Both modes call it: from 3.12 ``sum`` of floats compensates its rounding, so
    ``sum`` in one mode and this loop in the other would part in the last bit."""
    t = 0.0
    for x in fracs:
        t += x
    return t


@cython.cfunc
@cython.locals(
    sv=_StateViews, residents=list, res_frac=list, node_of_l=list, limit_l=list, res=list,
    fracs=list, watchers=list,
)  # fmt: skip
@cython.returns(tuple)
def _cluster_add(
    self: Cluster, job: JobSpec, gpu: int, opt: PlacementOption
) -> tuple[float, MigInstance | None]:
    """:meth:`Cluster.add`'s body, C-callable (from the compiled lifecycle, ``cluster.pxd``):
    place one instance of ``job`` on ``gpu`` (legality already checked).

    Returns:
        The setup delay in seconds (mode switch, MPS daemon start, MIG instance creation)
        and the MIG instance used, if any.
    """
    # Elements are read as Python numbers (``.item``) and written back: the same values as
    # numpy's scalar arithmetic (IEEE float64 / int64), at a fraction of its cost.
    omode = _take(opt, _O_MODE)
    delay = 0.0
    inst: MigInstance | None = None
    if cython.compiled:  # (C reads through the typed views: the numbers ``.item`` gives)
        sv = _views_of(self)
        n = sv.n_res[gpu]
        mode = sv.mode[gpu]
        residents, res_frac, node_of_l, limit_l, masks, watchers, gpulets = sv.lists
    else:
        n = self.n_res.item(gpu)
        mode = self.mode.item(gpu)
        residents, res_frac = self.residents, self.res_frac
        node_of_l, limit_l = self.fleet.node_of_l, self.fleet.mps_limit_l
        masks, watchers, gpulets = self.masks, self._watchers, self.layout.gpulets
    if n == 0 and mode != omode:
        sharing = self.layout.sharing
        if omode is _M_MIG or mode == _MIG:
            delay += sharing.mig_mode_switch_s
            self.mig_layouts.clear(gpu)
        elif omode is _M_MPS:
            delay += sharing.mps_start_s
        if cython.compiled:  # (the view's store: the int64 numpy's ``setitem`` makes)
            sv.mode[gpu] = int(omode)
        else:
            self.mode[gpu] = int(omode)
    if omode is _M_MIG:
        inst, created = self.mig_layouts.take(job, gpu, _take(opt, _O_MIG_SLICES))
        if created:
            delay += self.layout.sharing.mig_reconfig_s
    if omode is _M_MPS:
        if gpulets:  # (``self.layout.gpulets``: compiled, read with the views)
            if opt.gpulet:
                self.gpulet_parts.join(job.job_id, gpu, opt.gpulet)
            else:
                self.gpulet_parts.open(job.job_id, gpu, opt.sm_pct)
                if limit_l[gpu]:
                    self.sm_used[gpu] = self.sm_used.item(gpu) + opt.sm_pct
        elif limit_l[gpu]:
            if cython.compiled:  # (the typed view: the same integer sum, no numpy item calls)
                sv.sm_used[gpu] = sv.sm_used[gpu] + _take(opt, _O_SM_PCT)
            else:
                self.sm_used[gpu] = self.sm_used.item(gpu) + opt.sm_pct
    node = node_of_l[gpu]
    if cython.compiled:  # (C reads and writes through the typed views, the same values)
        _res_add(
            sv, gpu, node, _take(job, _S_MEM_GB), _take(job, _S_TRUE_MEM_GB),
            _take(job, _S_KIND) is _ONLINE, _take(job, _S_CPU_CORES),
        )  # fmt: skip
    else:
        self.n_res[gpu] = n + 1
        self.mem_decl[gpu] = self.mem_decl.item(gpu) + job.mem_gb
        self.mem_true[gpu] = self.mem_true.item(gpu) + job.true_mem_gb
        if job.kind is _ONLINE:
            self.online_count[gpu] = self.online_count.item(gpu) + 1
        self.node_cpu_used[node] = self.node_cpu_used.item(node) + job.cpu_cores
    res = residents[gpu]
    res.append(_take(job, _S_JOB_ID))
    fracs = res_frac[gpu]
    fracs.append(_take(job, _S_GPU_FRAC))
    if cython.compiled:  # (the view's store: the double numpy's ``setitem`` makes of it)
        sv.frac_decl[gpu] = _frac_sum(fracs)
    else:
        self.frac_decl[gpu] = _frac_sum(fracs)
    _touched_in(masks, watchers, gpu)  # (:meth:`_touch`; compiled, a C call)
    self.version += 1
    return delay, inst


@cython.cfunc
@cython.locals(
    sv=_StateViews, residents=list, res_frac=list, node_of_l=list, limit_l=list, res=list,
    fracs=list, watchers=list,
)  # fmt: skip
def _cluster_remove(self: Cluster, job: JobSpec, gpu: int, opt: PlacementOption) -> None:
    """:meth:`Cluster.remove`'s body, C-callable (from the compiled lifecycle, ``cluster.pxd``):
    take one instance of ``job`` off ``gpu``."""
    # Python-number element updates, as in ``add``.
    if cython.compiled:  # (as in ``add``)
        sv = _views_of(self)
        residents, res_frac, node_of_l, limit_l, masks, watchers, gpulets = sv.lists
    else:
        residents, res_frac = self.residents, self.res_frac
        node_of_l, limit_l = self.fleet.node_of_l, self.fleet.mps_limit_l
        masks, watchers, gpulets = self.masks, self._watchers, self.layout.gpulets
    res = residents[gpu]
    i = res.index(_take(job, _S_JOB_ID))
    del res[i]
    fracs = res_frac[gpu]
    del fracs[i]
    node = node_of_l[gpu]
    if cython.compiled:
        sv.frac_decl[gpu] = _frac_sum(fracs)
        n = _res_remove(
            sv, gpu, node, _take(job, _S_MEM_GB), _take(job, _S_TRUE_MEM_GB),
            _take(job, _S_KIND) is _ONLINE, _take(job, _S_CPU_CORES),
        )  # fmt: skip
    else:
        self.frac_decl[gpu] = _frac_sum(fracs)
        n = self.n_res[gpu] = self.n_res.item(gpu) - 1
        self.mem_decl[gpu] = self.mem_decl.item(gpu) - job.mem_gb
        self.mem_true[gpu] = self.mem_true.item(gpu) - job.true_mem_gb
        if job.kind is _ONLINE:
            self.online_count[gpu] = self.online_count.item(gpu) - 1
        self.node_cpu_used[node] = self.node_cpu_used.item(node) - job.cpu_cores
    omode = _take(opt, _O_MODE)
    if omode is _M_MPS:
        if gpulets:  # (as in ``add``)
            freed = self.gpulet_parts.leave(job.job_id, gpu)
            if freed and limit_l[gpu]:
                self.sm_used[gpu] = self.sm_used.item(gpu) - freed
        elif limit_l[gpu]:
            if cython.compiled:  # (as in ``add``)
                sv.sm_used[gpu] = sv.sm_used[gpu] - _take(opt, _O_SM_PCT)
            else:
                self.sm_used[gpu] = self.sm_used.item(gpu) - opt.sm_pct
    if omode is _M_MIG:
        self.mig_layouts.release(_take(job, _S_JOB_ID), gpu)
    if n == 0:  # drop float drift
        if cython.compiled:
            sv.mem_decl[gpu] = 0.0
            sv.mem_true[gpu] = 0.0
        else:
            self.mem_decl[gpu] = 0.0
            self.mem_true[gpu] = 0.0
    _touched_in(masks, watchers, gpu)  # (as in ``add``)
    self.version += 1


@cython.cfunc
@cython.returns(list)
def _cluster_gang_gpus(self: Cluster, job: JobSpec, first_gpu: int, option: int) -> list[int]:
    """:meth:`Cluster.gang_gpus`' body, C-callable (from the compiled lifecycle)."""
    if _take(job, _S_NUM_GPUS) == 1:
        return [first_gpu]
    return self.masks.gang_gpus(job, first_gpu, option)  # type: ignore[no-any-return]


def _float_order(x: float) -> int:
    """An integer that orders floats as their values do (bijective on non-NaN floats, up to
    the two zeros)."""
    i = struct.unpack("<q", struct.pack("<d", x))[0]
    return i if i >= 0 else -(i & 0x7FFF_FFFF_FFFF_FFFF)


def _from_order(i: int) -> float:
    bits = i if i >= 0 else (-i) | -0x8000_0000_0000_0000
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


@lru_cache(maxsize=4096)  # a pure function; the fit indexes are rebuilt every reset
def _last_fitting(mem: float, cap: float) -> float:
    """The greatest float ``x`` with ``x + mem <= cap`` (IEEE addition, as the masks do):
    ``x + mem`` is monotone in ``x``, so the floats that fit are exactly those ``<= x``.
    Compiled, :func:`_last_fitting_c` (the same bisection over the floats' bits in C); else
    :func:`_last_fitting_py`."""
    if cython.compiled:
        return _last_fitting_c(mem, cap)  # type: ignore[no-any-return]
    return _last_fitting_py(mem, cap)


def _last_fitting_py(mem: float, cap: float) -> float:
    """:func:`_last_fitting`'s bisection over :func:`_float_order` (Python integers)."""
    # (``cap >= 0`` and ``mem > 0``, finite: ``-2 mem - 1`` fits, ``2 cap + 1`` does not)
    lo, hi = _float_order(-2.0 * mem - 1.0), _float_order(2.0 * cap + 1.0)
    assert _from_order(lo) + mem <= cap < _from_order(hi) + mem
    while hi - lo > 1:  # invariant: lo fits, hi does not
        mid = (lo + hi) // 2
        if _from_order(mid) + mem <= cap:
            lo = mid
        else:
            hi = mid
    return _from_order(lo)


#: ``2**63 - 1``: a double's bits but its sign (compiled, a C constant: ``_order_c``).
_LOW63 = cython.declare(cython.longlong, 0x7FFF_FFFF_FFFF_FFFF)


@cython.cfunc
@cython.locals(x=cython.double, i=cython.longlong)
@cython.returns(cython.longlong)
def _order_c(x: float) -> int:
    """:func:`_float_order` in C (compiled only): the double's bits as a C integer."""
    i = 0
    memcpy(cython.address(i), cython.address(x), 8)
    return i if i >= 0 else -(i & _LOW63)


@cython.cfunc
@cython.locals(i=cython.longlong, bits=cython.longlong, x=cython.double)
@cython.returns(cython.double)
def _from_order_c(i: int) -> float:
    """:func:`_from_order` in C (compiled only): ``(-i) | -2**63`` is ``-i - 2**63`` where
    ``-i > 0``, written without a constant outside the C integer's range."""
    bits = i if i >= 0 else (-i) - _LOW63 - 1
    x = 0.0
    memcpy(cython.address(x), cython.address(bits), 8)
    return x


@cython.cfunc
@cython.locals(
    mem=cython.double, cap=cython.double, lo=cython.longlong, hi=cython.longlong,
    mid=cython.longlong,
)  # fmt: skip
@cython.returns(cython.double)
def _last_fitting_c(mem: float, cap: float) -> float:
    """:func:`_last_fitting_py` in C (compiled only): the same bisection, the same floats
    tested with the same IEEE addition (~1 k instructions where the Python integers and
    ``struct`` calls took ~60 k). The midpoint is ``(lo + hi) // 2`` without forming
    ``lo + hi`` or ``hi - lo`` (either may pass 2**63 in C): halves floored (``>>``, as
    Python's) plus the carry of the two low bits."""
    lo = _order_c(-2.0 * mem - 1.0)
    hi = _order_c(2.0 * cap + 1.0)
    assert _from_order_c(lo) + mem <= cap < _from_order_c(hi) + mem
    while lo < hi - 1:  # invariant: lo fits, hi does not (``hi - 1``: hi > lo >= -2**63+1)
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)
        if _from_order_c(mid) + mem <= cap:
            lo = mid
        else:
            hi = mid
    return _from_order_c(lo)


def _tree_build(vals: list[float]) -> list[float]:
    """A min segment tree over ``vals`` (leaves from ``len(tree) // 2``, padded with inf)."""
    size = 1
    while size < len(vals):
        size *= 2
    tree = [_INF] * (2 * size)
    tree[size : size + len(vals)] = vals
    for i in range(size - 1, 0, -1):
        a, b = tree[2 * i], tree[2 * i + 1]
        tree[i] = a if a < b else b
    return tree


@cython.ccall  # (C calls from ``_FitIndex._trees``; the tests call it from Python)
@cython.locals(
    tree=list, pos=cython.Py_ssize_t, i=cython.Py_ssize_t, a=cython.double, b=cython.double,
    t=cython.double,
)  # fmt: skip
def _tree_set(tree: list[float], pos: int, v: float) -> None:
    """Set leaf ``pos`` to ``v`` and the minima above it (up to the first one unchanged).
    Compiled, the values are compared as C doubles (the same comparisons: every value is a
    float) and the lesser child's float object is stored (no new float per level)."""
    i = pos + (len(tree) >> 1)
    tree[i] = v
    i >>= 1
    while i:
        oa = tree[2 * i]
        ob = tree[2 * i + 1]
        a = oa
        b = ob
        m = oa if a < b else ob
        t = tree[i]
        if t == (a if a < b else b):
            return
        tree[i] = m
        i >>= 1


@cython.ccall  # (C calls from ``_FitIndex.first`` and ``walk``; the tests call it from Python)
@cython.locals(
    tree=list, lo=cython.Py_ssize_t, x=cython.double, size=cython.Py_ssize_t,
    i=cython.Py_ssize_t, t=cython.double,
)  # fmt: skip
@cython.returns(cython.Py_ssize_t)
def _tree_first(tree: list[float], lo: int, x: float) -> int:
    """The least leaf position ``>= lo`` whose value is ``<= x`` (-1: none). Compiled, the
    values are read as C doubles (the same comparisons: every value is a float)."""
    size = len(tree) >> 1
    if lo <= 0:
        i = 1
    elif lo >= size:
        return -1
    else:
        i = lo + size
    # Walk the canonical segments of [lo, size) left to right up to one holding a value <= x,
    # then descend to its leftmost such leaf.
    t = tree[i]
    while t > x:
        while i & 1:  # a right child (or the root): its right neighbour is above
            i >>= 1
        if not i:
            return -1
        i += 1
        t = tree[i]
    while i < size:
        i <<= 1
        t = tree[i]
        if t > x:
            i += 1
    return i - size


@cython.ccall  # (C calls from ``_FitIndex.sync``; the tests call it from Python)
@cython.locals(
    lst=list, x=cython.double, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t,
    mid=cython.Py_ssize_t, y=cython.double,
)  # fmt: skip
@cython.returns(cython.Py_ssize_t)
def _bisect_right(lst: list[float], x: float) -> int:
    """``bisect.bisect_right(lst, x)`` for a sorted list of floats: the same halving and the
    same comparison (``x < lst[mid]``), compiled on C doubles (a float's value), without a
    Python call (``tests/test_fit_index.py`` compares the two)."""
    lo = 0
    hi = len(lst)
    while lo < hi:
        mid = (lo + hi) >> 1
        y = lst[mid]
        if x < y:
            hi = mid
        else:
            lo = mid + 1
    return lo


class _FitIndex:
    """Whether a job of one kind (online or offline) fits anywhere, and where first, kept
    incrementally.

    Under every non-MIG option a single GPU is legal for a job iff the job-independent part of
    the mask holds (ready/healthy, residents, mode, MPS share: :meth:`Cluster._single_mask`),
    the GPU's type is allowed, and ``mem_decl + mem <= cap + eps`` (exclusive use: a free GPU
    and ``mem <= cap + eps``, i.e. the same test with ``0.0``). For a fixed type the test is
    monotone in the GPU's value (IEEE addition is monotone), so per (option, type) the values
    of the GPUs whose job-independent part holds (inf: it does not) answer

    * "does a job of ``mem`` fit": their least value (the sorted ``vals``);
    * "how many GPUs fit" (gangs): a binary search in ``vals``;
    * "which GPU (lowest index) fits first, from GPU ``lo`` on": a min segment tree over the
      type's GPUs in GPU order (``trees``), descended to the first leaf ``<= x``.

    Rows are the options up to the gpulet joins (exclusive, time-sharing, each MPS share:
    row ``r`` is option ``r``); ``vals`` are kept for the rows :meth:`placeable` reads
    (``fit_rows``), the trees of a row from its first :meth:`first` question on, and brought
    up to date at the next (a row's pending GPUs). MIG rows (single-GPU jobs only) need no
    memory test: per type, a count of the GPUs by their creatable-profile bits. A GPU's
    entries are replaced when it changes (:meth:`touch`, applied lazily by :meth:`sync`).
    """

    __slots__ = (
        "_fixed",
        "_thr",
        "_thr_last",
        "_walk_memo",
        "_xs",
        "arrays",
        "cur",
        "cur_mig",
        "dirty",
        "fit_rows",
        "gpus_of",
        "keep_vals",
        "m",
        "mig",
        "pending",
        "pending_arr",
        "pos_l",
        "trees",
        "type_l",
        "vals",
    )

    def __init__(self, masks: Masks, online: bool) -> None:
        #: The masks whose questions this answers (their cluster's state, fleet and layout).
        self.m = masks
        f, lay = masks.fleet, masks.layout
        pcts = lay.mps_pct_list
        n_rows = lay.n_excl + lay.n_ts + len(pcts)
        #: What :meth:`sync` reads of the kind, the cluster, its fleet and layout (fixed), in
        #: one tuple (compiled, one typed read where each was a generic attribute read):
        #: online, the cluster, the residency limit, the MPS shares, whether an exclusive
        #: row, whether a time-sharing row, the GPUs' MPS limits, whether MIG options, the
        #: most GPUs changed that :meth:`sync` applies one by one; and the MIG profiles' bits
        #: per memory size (a memo, filled as asked: :func:`_fit_placeable`).
        self._fixed: tuple[Any, ...] = (
            online,
            masks.c,
            lay.sharing.max_residents,
            pcts,
            bool(lay.n_excl),
            bool(lay.n_ts),
            f.mps_limit_l,
            bool(lay.mig_slices),
            max(32, f.n_gpus >> 3),
            {},
        )
        #: The rows :meth:`placeable` reads: exclusive, time-sharing and the MPS option with
        #: the least SM share (a GPU legal under any MPS option is legal under it:
        #: ``sm_used + pct <= 100`` is monotone in ``pct``, so it alone answers).
        self.fit_rows = list(range(lay.n_excl + lay.n_ts))
        if pcts:
            self.fit_rows.append(lay.mps0 + pcts.index(min(pcts)))
        n_t = len(f.types)
        self.vals: list[list[list[float]]] = [[[] for _ in range(n_t)] for _ in range(n_rows)]
        self.keep_vals = [r in self.fit_rows for r in range(n_rows)]
        #: Per row: per type, its segment tree (None: not built yet), and the GPUs changed
        #: since the trees were last brought up to date.
        self.trees: list[list[list[float]] | None] = [None] * n_rows
        self.pending: list[set[int]] = [set() for _ in range(n_rows)]
        #: Per row: ``cur`` as an array (None: not built yet; :meth:`row_fits`), and the GPUs
        #: changed since it was last brought up to date.
        self.arrays: list[np.ndarray | None] = [None] * n_rows
        self.pending_arr: list[set[int]] = [set() for _ in range(n_rows)]
        self._xs: dict[tuple[float, tuple[str, ...]], np.ndarray] = {}
        #: Per row, per GPU: its value (inf: not legal under the row whatever the job).
        self.cur: list[list[float]] = []
        self.mig: list[dict[int, int]] = [{} for _ in range(n_t)]
        self.cur_mig: list[int] = []  # per GPU: its bits counted in ``mig`` (-1: none)
        self.type_l: list[int] = f.type_idx.tolist()
        #: Per type: its GPUs in GPU order; per GPU: its position there.
        self.gpus_of: list[list[int]] = [
            np.flatnonzero(f.type_idx == t).tolist() for t in range(n_t)
        ]
        self.pos_l: list[int] = [0] * f.n_gpus
        for gl in self.gpus_of:
            for p, g in enumerate(gl):
                self.pos_l[g] = p
        self._thr: dict[tuple[float, tuple[str, ...]], list[tuple[int, float]]] = {}
        #: The last thresholds asked, ``(mem, allowed, thresholds)`` (:func:`_fit_thresholds`:
        #: a decision asks them of one job several times in a row).
        self._thr_last: tuple[Any, ...] = (None, None, None)
        self._walk_memo: tuple[object, object, list[int]] = (None, None, [])
        self.dirty: set[int] = set()
        self._build()

    def __reduce__(self) -> tuple[Any, tuple[()], dict[str, Any]]:
        """A pickle or deep copy carries the members by name (:meth:`__setstate__`): one made
        interpreted (a class with slots) loads compiled (an extension type, whose own pickling
        would not read it), and back."""
        return _new_fit_index, (), {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._fixed = state["_fixed"]
        self._thr = state["_thr"]
        self._thr_last = state["_thr_last"]
        self._walk_memo = state["_walk_memo"]
        self._xs = state["_xs"]
        self.arrays = state["arrays"]
        self.cur = state["cur"]
        self.cur_mig = state["cur_mig"]
        self.dirty = state["dirty"]
        self.fit_rows = state["fit_rows"]
        self.gpus_of = state["gpus_of"]
        self.keep_vals = state["keep_vals"]
        self.m = state["m"]
        self.mig = state["mig"]
        self.pending = state["pending"]
        self.pending_arr = state["pending_arr"]
        self.pos_l = state["pos_l"]
        self.trees = state["trees"]
        self.type_l = state["type_l"]
        self.vals = state["vals"]

    def touch(self, gpu: int) -> None:
        self.dirty.add(gpu)

    def _build(self) -> None:
        """Every entry from the cluster's state (vectorised)."""
        m = self.m
        c, f, lay = m.c, m.fleet, m.layout
        free, ready_healthy, ts, mps, mig_base, mig_bits = m._dynamic()
        base = c.ready if self._fixed[0] else ready_healthy
        mem = c.mem_decl
        inf = np.inf
        rows: list[np.ndarray] = []
        if lay.n_excl:
            rows.append(np.where(base & free, 0.0, inf))
        if lay.n_ts:
            rows.append(np.where(base & ts, mem, inf))
        for k in range(len(lay.mps_pct_list)):
            rows.append(np.where(base & mps[k], mem, inf))
        self.cur = [r.tolist() for r in rows]
        tidx = f.type_idx
        for o, r in enumerate(rows):
            self.trees[o] = None
            self.pending[o] = set()
            self.arrays[o] = None
            self.pending_arr[o] = set()
            if self.keep_vals[o]:
                for t in range(len(f.types)):
                    v = r[tidx == t]
                    self.vals[o][t] = np.sort(v[v < inf]).tolist()
        self.mig = [{} for _ in f.types]
        if lay.mig_slices:
            bits = np.where(base & mig_base, mig_bits, -1)
            self.cur_mig = bits.tolist()
            for g, b in enumerate(self.cur_mig):
                if b >= 0:
                    d = self.mig[self.type_l[g]]
                    d[b] = d.get(b, 0) + 1
        else:
            self.cur_mig = [-1] * f.n_gpus
        self.dirty = set()

    @cython.boundscheck(False)  # (every index in range: GPUs of the fleet, rows of the index)
    @cython.wraparound(False)
    @cython.locals(
        sv=_StateViews, gi=cython.Py_ssize_t, t=cython.Py_ssize_t, o=cython.Py_ssize_t,
        n_rows=cython.Py_ssize_t, n_ex=cython.Py_ssize_t, n_fixed=cython.Py_ssize_t,
        cur=list, vals=list, type_l=list, keep=list, trees=list, pending=list, arrays=list,
        pending_arr=list, pcts=list, row=list, lst=list, ps=set, dirty=set, fixed=tuple,
        limit=list, cur_mig=list, inf=cython.double, mem=cython.double, v=cython.double,
        old=cython.double,
    )  # fmt: skip
    def sync(self) -> None:
        """Replace the entries of the GPUs changed since the last question (compiled, the
        GPUs' state read through the cluster's typed views: :meth:`Cluster.state_views`, the
        per-GPU lists indexed by a C integer and each row's value a C double)."""
        dirty = self.dirty
        if not dirty:
            return
        # a rebuild is a few numpy passes (~0.1 ms at 16 GPUs), an entry ~5 us: rebuild only
        # when more than an eighth of a fleet of 256+ GPUs changed (``_fixed[8]``)
        fixed = self._fixed
        online, c, mr, pcts, has_ex, has_ts, limit, mig_on, most, _ = fixed
        if len(dirty) > most:
            self._build()
            return
        self.dirty = set()
        # the rows, as :meth:`_build` makes them: exclusive (if an option), time-sharing (if
        # one), then one per MPS share
        n_ex = 1 if has_ex else 0
        n_fixed = n_ex + (1 if has_ts else 0)
        inf = _INF
        cur, vals, type_l = self.cur, self.vals, self.type_l
        keep, trees, pending = self.keep_vals, self.trees, self.pending
        arrays, pending_arr = self.arrays, self.pending_arr
        cur_mig = self.cur_mig
        n_rows = len(cur)
        if cython.compiled:
            sv = _views_of(c)
        else:  # (compiled, the views are read instead: no bound ``.item`` methods to make)
            f = c.fleet
            n_res, mode_of, ready, healthy = c.n_res.item, c.mode.item, c.ready.item, c.healthy.item
            mem_of, sm_of = c.mem_decl.item, c.sm_used.item
        for g in dirty:
            gi = g
            t = type_l[gi]
            if cython.compiled:  # (typed views: C reads, no ``.item`` calls)
                n = sv.n_res[gi]
                mode = sv.mode[gi]
                ok = sv.ready[gi] != 0 and (online or sv.healthy[gi] != 0)
                mem = sv.mem_decl[gi]
            else:
                n = n_res(g)
                mode = mode_of(g)
                ok = ready(g) if online else ready(g) and healthy(g)
                mem = mem_of(g)
            free = n == 0
            room = n < mr
            ts_ok = ok and room and (free or mode == _TS)
            mps_ok = ok and room and (free or mode == _MPS)
            sm = 0
            lim = n_rows > n_fixed and mps_ok and limit[gi]
            if lim:
                sm = sv.sm_used[gi] if cython.compiled else sm_of(g)
            # the row values one by one (no list of them: compiled, C doubles), each row ``o``
            # as the option ``o``'s test gives it
            for o in range(n_rows):
                if o < n_ex:
                    v = 0.0 if ok and free else inf
                elif o < n_fixed:
                    v = mem if ts_ok else inf
                elif not mps_ok:
                    v = inf
                elif lim:
                    v = mem if sm + pcts[o - n_fixed] <= 100 else inf
                else:
                    v = mem
                row = cur[o]
                old = row[gi]
                if old == v:
                    continue
                row[gi] = v
                if keep[o]:
                    lst = vals[o][t]
                    if old < inf:
                        # the last of the values equal to ``old``: the list is only read by
                        # comparisons (its least value, bisections), so which equal one goes
                        # changes no answer, and the last one moves the fewest (a big fleet's
                        # free GPUs share one value: the first one moved the whole list)
                        del lst[_bisect_right(lst, old) - 1]
                    if v < inf:
                        lst.insert(_bisect_right(lst, v), v)  # (``bisect.insort``)
                if trees[o] is not None:
                    ps = pending[o]
                    ps.add(g)
                if arrays[o] is not None:
                    ps = pending_arr[o]
                    ps.add(g)
            if mig_on:
                b = -1
                if cython.compiled:
                    if ok and room and sv.mig_capable[gi] and (free or mode == _MIG):
                        b = sv.creatable[t, sv.mig_occ[gi], sv.mig_used[gi]]
                elif ok and room and f.mig_capable.item(g) and (free or mode == _MIG):
                    ml = c.mig_layouts
                    b = int(f.mig.creatable_bits[t, ml.occ.item(g), ml.used.item(g)])
                old_b = cur_mig[gi]
                if old_b != b:
                    d = self.mig[t]
                    if old_b >= 0:
                        d[old_b] -= 1
                        if not d[old_b]:
                            del d[old_b]
                    if b >= 0:
                        d[b] = d.get(b, 0) + 1
                    cur_mig[gi] = b

    def thresholds(self, mem: float, allowed: tuple[str, ...]) -> list[tuple[int, float]]:
        """Per allowed type ``t``: the greatest float ``x`` with ``x + mem <= cap_eps[t]`` (the
        values that fit a job of ``mem`` are exactly those ``<= x``: the test is monotone)."""
        return _fit_thresholds(self, mem, allowed)  # type: ignore[no-any-return]

    def placeable(self, job: JobSpec) -> bool:
        """Whether ``Cluster.placement_mask(job)`` allows anything (``job.online`` must be this
        index's kind)."""
        return _fit_placeable(self, job)  # type: ignore[no-any-return]

    def count_at_least(self, thr: list[tuple[int, float]], row: int, n: int) -> bool:
        """Whether ``n`` GPUs are single-GPU legal under ``row`` (``thr``: :meth:`thresholds`):
        counted in ``vals`` where the row keeps them, else found one by one."""
        if not self.keep_vals[row]:
            return len(self.walk(thr, row, 0, n)) >= n
        per_type = self.vals[row]
        k = 0
        for t, x in thr:
            k += bisect_right(per_type[t], x)
        return k >= n

    @cython.locals(
        trees=list, cur=list, type_l=list, pos_l=list, pending=set, gi=cython.Py_ssize_t,
    )  # fmt: skip
    def _trees(self, row: int) -> list[list[float]]:
        """The row's segment trees, built or brought up to date."""
        trees = self.trees[row]
        if trees is None:
            cur = self.cur[row]
            trees = self.trees[row] = [_tree_build([cur[g] for g in gl]) for gl in self.gpus_of]
            self.pending[row] = set()
            return trees
        pending = self.pending[row]
        if pending:
            cur, type_l, pos_l = self.cur[row], self.type_l, self.pos_l
            for g in pending:
                gi = g
                _tree_set(trees[type_l[gi]], pos_l[gi], cur[gi])
            pending.clear()
        return trees

    def row_fits(self, mem: float, allowed: tuple[str, ...], row: int) -> np.ndarray:
        """Per GPU: single-GPU legal under ``row`` for a job of ``mem`` GB allowed on the types
        ``allowed``: its value ``<=`` its type's threshold (-inf where the type is not allowed)."""
        arr = self.arrays[row]
        if arr is None:
            arr = self.arrays[row] = np.array(self.cur[row], dtype=np.float64)
            self.pending_arr[row] = set()
        elif self.pending_arr[row]:
            cur = self.cur[row]
            for g in self.pending_arr[row]:
                arr[g] = cur[g]
            self.pending_arr[row] = set()
        key = (mem, allowed)
        xs = self._xs.get(key)
        if xs is None:
            f = self.m.fleet
            per_type = np.full(len(f.types), -np.inf)
            for t, x in self.thresholds(mem, allowed):
                per_type[t] = x
            if len(self._xs) >= 256:
                self._xs.clear()
            xs = self._xs[key] = per_type[f.type_idx]
        return arr <= xs

    @cython.locals(
        best=cython.Py_ssize_t, g=cython.Py_ssize_t, p=cython.Py_ssize_t, trees=list,
        gpus_of=list, tree=list, gl=list, pair=tuple, x=cython.double, top=cython.double,
    )  # fmt: skip
    def first(self, thr: list[tuple[int, float]], row: int, lo: int = 0) -> int:
        """The lowest GPU index ``>= lo`` single-GPU legal under ``row`` (-1: none). Compiled,
        the thresholds and the trees' roots are compared as C doubles (every value a float)."""
        best = -1
        trees, gpus_of = self._trees(row), self.gpus_of
        for pair in thr:
            t = pair[0]
            x = pair[1]
            tree = trees[t]
            top = tree[1]
            if top > x:
                continue
            gl = gpus_of[t]
            if best >= 0 and gl[0] > best:
                continue  # (every GPU of the type comes after the best so far)
            p = _tree_first(tree, bisect_left(gl, lo) if lo else 0, x)
            if p >= 0:
                g = gl[p]
                if best < 0 or g < best:
                    best = g
        return best

    def legal(self, thr: list[tuple[int, float]], row: int, gpu: int) -> bool:
        """Whether ``gpu`` is single-GPU legal under ``row``."""
        return _fit_legal(self, thr, row, gpu)  # type: ignore[no-any-return]

    @cython.locals(
        g=cython.Py_ssize_t, gk=cython.Py_ssize_t, p=cython.Py_ssize_t, q=cython.Py_ssize_t,
        k=cython.Py_ssize_t, i=cython.Py_ssize_t, trees=list, gpus_of=list, tree=list, gl=list,
        pair=tuple, x=cython.double, top=cython.double, hg=list, ht=list, hl=list, hx=list,
        hp=list, out=list,
    )  # fmt: skip
    def walk(self, thr: list[tuple[int, float]], row: int, lo: int, n: int) -> list[int]:
        """The first ``n`` GPUs from ``lo`` on (fewer if there are not as many) single-GPU
        legal under ``row``: a gang's GPUs (:meth:`Cluster.gang_gpus`). Each type's GPUs are
        found in order from its tree and merged; the last answer is kept for the cluster's
        version (a decision asks it three times: where, whether legal, which GPUs)."""
        version = self._fixed[1].version
        key = (version, row, lo, n)
        memo = self._walk_memo
        if memo[0] == key and memo[1] is thr:
            return memo[2]
        trees, gpus_of = self._trees(row), self.gpus_of
        # the heads, one per type with a legal GPU left: its next GPU, the type's tree, GPUs
        # and threshold, and the GPU's position there (parallel lists)
        hg: list[int] = []
        ht: list[list[float]] = []
        hl: list[list[int]] = []
        hx: list[float] = []
        hp: list[int] = []
        for pair in thr:
            t = pair[0]
            x = pair[1]
            tree = trees[t]
            top = tree[1]
            if top > x:
                continue
            gl = gpus_of[t]
            p = _tree_first(tree, bisect_left(gl, lo) if lo else 0, x)
            if p >= 0:
                hg.append(gl[p])
                ht.append(tree)
                hl.append(gl)
                hx.append(x)
                hp.append(p)
        out: list[int] = []
        while hg and len(out) < n:
            # the head of the least GPU (the first of the least, as ``min`` of the (gpu, type,
            # position) heads gave it: no two types share a GPU)
            k = 0
            g = hg[0]
            for i in range(1, len(hg)):
                gk = hg[i]
                if gk < g:
                    k = i
                    g = gk
            out.append(g)
            q = _tree_first(ht[k], hp[k] + 1, hx[k])
            if q >= 0:
                gl = hl[k]
                hg[k] = gl[q]
                hp[k] = q
            else:
                del hg[k], ht[k], hl[k], hx[k], hp[k]
        if out:  # the walk from any GPU in lo..out[0] is the same
            self._walk_memo = ((version, row, out[0], n), thr, out)
        return out


def _new_fit_index() -> _FitIndex:
    """An empty fit index for :meth:`_FitIndex.__setstate__` to fill (a pickle's or a copy's)."""
    return _FitIndex.__new__(_FitIndex)


@cython.cfunc
@cython.locals(self=_FitIndex, last=tuple)
def _fit_thresholds(
    self: _FitIndex, mem: float, allowed: tuple[str, ...]
) -> list[tuple[int, float]]:
    """:meth:`_FitIndex.thresholds`' body, C-callable (memoised per ``(mem, allowed)``; the
    last answer kept for the same ``allowed`` object and an equal ``mem``, without the key's
    tuple and hash: the dictionary's answer for that key)."""
    last = self._thr_last
    if last[1] is allowed and last[0] == mem:
        return last[2]  # type: ignore[no-any-return]
    key = (mem, allowed)
    hit = self._thr.get(key)
    if hit is None:
        f = self.m.fleet
        if allowed:
            names = {get_gpu_type(a).name for a in allowed}
            types = [t for t, n in enumerate(f.type_names) if n in names]
        else:
            types = list(range(len(f.types)))
        hit = []
        for t in types:  # (the type's memory plus the masks' slack: ``Fleet.cap_eps``)
            hit.append((t, _last_fitting(mem, f.types[t].mem_gb + _EPS)))
        if len(self._thr) >= 4096:
            self._thr.clear()
        self._thr[key] = hit
    self._thr_last = (mem, allowed, hit)
    return hit


@cython.cfunc
@cython.locals(self=_FitIndex, rows=list, vals=list, per_type=list, lst=list, pair=tuple)
def _fit_placeable(self: _FitIndex, job: JobSpec) -> bool:
    """:meth:`_FitIndex.placeable`'s body, C-callable (from :meth:`Cluster.placeable`)."""
    if self.dirty:
        self.sync()
    mem = job.mem_gb
    thr = _fit_thresholds(self, mem, job.gpu_types)
    n = job.num_gpus
    if n <= 1:
        rows, vals = self.fit_rows, self.vals
        for r in rows:
            per_type = vals[r]
            for pair in thr:
                lst = per_type[pair[0]]
                if lst and lst[0] <= pair[1]:
                    return True
        if self._fixed[7]:  # (MIG options)
            mig_bits = self._fixed[9]
            pb = mig_bits.get(mem)
            if pb is None:
                bits = self.m.fleet.mig.profile_bits(mem, self.m.layout.mig_slices)
                pb = mig_bits[mem] = np.bitwise_or.reduce(bits, axis=1).tolist()
            for t, _ in thr:
                want = pb[t]
                if want:
                    for b in self.mig[t]:  # (``any(...)`` as a loop: compiled, no generator)
                        if b & want:
                            return True
        return False
    # a gang: n legal GPUs under one option (no MIG)
    for r in self.fit_rows:  # noqa: SIM110 (``any(...)`` as a loop, as above)
        if self.count_at_least(thr, r, n):
            return True
    return False


@cython.cfunc
@cython.locals(self=_FitIndex)
def _fit_legal(self: _FitIndex, thr: list[tuple[int, float]], row: int, gpu: int) -> bool:
    """:meth:`_FitIndex.legal`'s body, C-callable (from :func:`_masks_legal`)."""
    t = self.type_l[gpu]
    for tt, x in thr:
        if tt == t:
            return self.cur[row][gpu] <= x  # type: ignore[no-any-return]
    return False


@cython.cfunc
@cython.locals(ix=_FitIndex)
@cython.returns(_FitIndex)
def _fit_index(self: Masks, online: bool) -> _FitIndex:
    """:meth:`Masks._index`'s body, C-callable: the :class:`_FitIndex` of jobs of this kind
    (online or not), up to date (built on first use). Compiled, the cluster's "does anything
    fit" and "where first" questions reach the index through C calls (:meth:`Cluster.placeable`,
    :func:`_masks_first_legal`), where each was a chain of Python method calls."""
    ix = self._fit_ix.get(online)
    if ix is None:
        ix = self._fit_ix[online] = _FitIndex(self, online)
    elif ix.dirty:
        ix.sync()
    return ix


@cython.cfunc
@cython.locals(ix=_FitIndex)
def _masks_legal(self: Masks, job: JobSpec, gpu: int, option: int) -> bool:
    """:meth:`Masks.legal`'s body, C-callable (from :meth:`Masks.check` and
    :meth:`Cluster.legal`)."""
    if _masks_indexed(self, option):
        ix = _fit_index(self, job.kind is _ONLINE)
        thr = _fit_thresholds(ix, job.mem_gb, job.gpu_types)
        if not _fit_legal(ix, thr, option, gpu):
            return False
        n = job.num_gpus
        return n <= 1 or len(ix.walk(thr, option, gpu, n)) == n  # type: ignore[no-any-return]
    return bool(self.placement_mask(job)[gpu, option])


@cython.cfunc
@cython.locals(ix=_FitIndex)
def _masks_first_legal(self: Masks, job: JobSpec, option: int) -> int:
    """:meth:`Masks.first_legal`'s body, C-callable (from :meth:`Cluster.first_legal` and
    :meth:`Cluster.first_legal_in`)."""
    if _masks_indexed(self, option):
        ix = _fit_index(self, job.kind is _ONLINE)
        thr = _fit_thresholds(ix, job.mem_gb, job.gpu_types)
        n = job.num_gpus
        if n <= 1:
            return ix.first(thr, option)  # type: ignore[no-any-return]
        gang = ix.walk(thr, option, 0, n)
        return gang[0] if len(gang) == n else -1  # type: ignore[no-any-return]
    col = self.placement_mask(job)[:, option]
    g = int(col.argmax())
    return g if col[g] else -1


@cython.cfunc
@cython.locals(ix=_FitIndex)
def _masks_touch(self: Masks, gpu: int) -> None:
    """:meth:`Masks.touch`'s body, C-callable (from :func:`_touched` when compiled): ``gpu``
    noted for :meth:`Masks._dynamic` and the fit indexes."""
    dirty = self._dirty
    if dirty is not None:
        dirty.add(gpu)
    for ix in self._fit_ix.values():  # (compiled, ``ix`` typed: ``dirty`` a C read)
        ix.dirty.add(gpu)  # (``ix.touch(gpu)``, inlined: a method call fewer per change)


@cython.cfunc
def _touched(self: Cluster, gpu: int) -> None:
    """:meth:`Cluster._touch`'s body, C-callable: ``gpu`` noted in the masks' caches and the
    watchers' sets (from ``add`` and ``remove`` a C call when compiled, where the method and
    :meth:`Masks.touch` were two Python calls per change)."""
    _touched_in(self.masks, self._watchers, gpu)


@cython.cfunc
@cython.locals(watchers=list, w=set)
def _touched_in(masks: Masks, watchers: list[set[int]], gpu: int) -> None:
    """:func:`_touched` with the cluster's masks and watchers given (``add`` and ``remove``
    read them through the typed views)."""
    _masks_touch(masks, gpu)
    for w in watchers:
        w.add(gpu)
