"""Cluster state and the one legality function.

The state of every GPU lives in numpy arrays (struct of arrays) so that the legality of placing a
job on *every* GPU with *every* placement option is a handful of vectorised comparisons:
:meth:`Cluster.placement_mask`. The simulator's ``apply`` checks a decision with the same
function (:meth:`Cluster.check`), and the Gymnasium env's action mask is built from it, so what
the mask allows and what ``apply`` accepts can never disagree.

Capacity invariants (memory, MPS SM percentages, MIG geometry, residents per GPU) are enforced
here and nowhere else.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpu_sharing_env.config import SharingConfig
from gpu_sharing_env.hardware import (
    GpuType,
    get_gpu_type,
    mig_creatable_table,
    mig_free_starts,
    mig_layout_legal,
)
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.nodes import NodeSpec
from gpu_sharing_env.workload.job import JobSpec

#: ``Cluster.mode`` value of a GPU that has never been configured.
MODE_NONE = -1
#: Floating-point slack for memory comparisons (GB).
_EPS = 1e-9
#: From this many GPUs on, gang masks are cut per row at the n-th legal GPU from the end
#: instead of by a suffix sum (measured on a 10-option mask, half its rows empty: equal at
#: ~256 GPUs, 15 vs 12 us at 512, 34 vs 13 us at 1,024, 179 vs 43 us at 6,500).
_GANG_SCAN_GPUS = 512
_TS = int(SharingMode.TIME_SHARING)
_MPS = int(SharingMode.MPS)
_MIG = int(SharingMode.MIG)


@dataclass(frozen=True, slots=True)
class PlacementOption:
    """How a job is placed on its GPU(s): the sharing mode and its parameter.

    Attributes:
        mode: Sharing mode the GPU must be in (or is switched to if empty).
        sm_pct: MPS active-thread percentage (100 outside MPS).
        mig_slices: MIG compute slices (of 7) of the instance to use (0 outside MIG).
    """

    mode: SharingMode
    sm_pct: int = 100
    mig_slices: int = 0

    @property
    def label(self) -> str:
        if self.mode is SharingMode.EXCLUSIVE:
            return "excl"
        if self.mode is SharingMode.TIME_SHARING:
            return "ts"
        if self.mode is SharingMode.MPS:
            return f"mps{self.sm_pct}"
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


class Cluster:
    """All GPUs and nodes of the fleet, with their sharing state.

    Args:
        nodes: The fleet.
        sharing: Allowed modes, options, residency limit.
    """

    def __init__(self, nodes: Sequence[NodeSpec], sharing: SharingConfig) -> None:
        if not nodes:
            raise ValueError("cluster: the fleet has no nodes")
        self.nodes = tuple(nodes)
        self.sharing = sharing
        self.options = build_options(sharing)
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
        self._node_of_l: list[int] = self.node_of.tolist()
        self._mps_limit_l: list[bool] = self.mps_limit.tolist()
        self.node_first_gpu = np.concatenate([[0], np.cumsum([n.num_gpus for n in nodes])[:-1]])
        self.mig = _MigTables(self.types)
        self._cap_eps = self.mem_cap + _EPS
        # Option layout (``build_options`` order: exclusive, time-sharing, MPS..., MIG...).
        modes = [o.mode for o in self.options]
        if modes != sorted(modes):
            raise ValueError("cluster: placement options must be grouped by mode")
        self._n_excl = modes.count(SharingMode.EXCLUSIVE)
        self._n_ts = modes.count(SharingMode.TIME_SHARING)
        self._mps_pcts = np.array(
            [o.sm_pct for o in self.options if o.mode is SharingMode.MPS], dtype=np.int64
        )
        self._mps_pct_list: list[int] = self._mps_pcts.tolist()
        #: ``100 - pct`` per MPS option (a column), and GPUs without an MPS SM limit (static).
        self._mps_headroom = (100 - self._mps_pcts)[:, None]
        self._no_mps_limit = ~self.mps_limit
        self._mig_slices = [o.mig_slices for o in self.options if o.mode is SharingMode.MIG]
        self._mps0 = self._n_excl + self._n_ts
        self._mig0 = self._mps0 + len(self._mps_pcts)
        self._job_static: dict[tuple[float, tuple[str, ...]], tuple[np.ndarray, ...]] = {}
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Empty every GPU; modes return to unset."""
        g = self.n_gpus
        self.mode = np.full(g, MODE_NONE, dtype=np.int64)
        self.n_res = np.zeros(g, dtype=np.int64)
        self.mem_decl = np.zeros(g, dtype=np.float64)
        self.mem_true = np.zeros(g, dtype=np.float64)
        self.sm_used = np.zeros(g, dtype=np.int64)
        self.online_count = np.zeros(g, dtype=np.int64)
        self.healthy = np.ones(g, dtype=bool)
        self.ready = np.ones(g, dtype=bool)
        self.mig_occ = np.zeros(g, dtype=np.int64)
        self.mig_used = np.zeros(g, dtype=np.int64)
        self.mig_instances: list[list[MigInstance]] = [[] for _ in range(g)]
        self._bits_buf = np.empty((len(self._mig_slices), g), dtype=np.int64)
        self.residents: list[list[int]] = [[] for _ in range(g)]
        #: Per GPU: the residents' requested GPU fractions (``JobSpec.gpu_frac``), in residence
        #: order, and their sum (summed in that order: what PAI's allocation accounting sees).
        self.res_frac: list[list[float]] = [[] for _ in range(g)]
        self.frac_decl = np.zeros(g, dtype=np.float64)
        self.node_cpu_used = np.zeros(self.n_nodes, dtype=np.float64)
        self.version = 0
        self._type_ok_cache: dict[tuple[str, ...], np.ndarray] = {}
        self._dyn_version = -1
        self._dyn: tuple[np.ndarray, ...] = ()
        self._dirty: set[int] | None = None  # None: recompute everything
        self._single_version = -1
        self._single_memo: dict[tuple[float, tuple[str, ...], bool, bool], np.ndarray] = {}
        #: "Does anything fit" indexes (:class:`_FitIndex`), per job kind (online or not),
        #: built on first use and kept up to date with the GPUs changed since.
        self._fit_ix: dict[bool, _FitIndex] = {}
        self._fit_last = True  # the last answer of ``placeable``, and the version asked at
        self._fit_asked = -1

    def gpu_type(self, gpu: int) -> GpuType:
        return self.types[int(self.type_idx[gpu])]

    @cached_property
    def total_gpus_by_type(self) -> dict[str, int]:
        counts = np.bincount(self.type_idx, minlength=len(self.types))
        return {self.type_names[i]: int(c) for i, c in enumerate(counts)}

    def _type_ok(self, allowed: tuple[str, ...]) -> np.ndarray:
        if not allowed:
            return np.ones(self.n_gpus, dtype=bool)
        hit = self._type_ok_cache.get(allowed)
        if hit is None:
            names = {get_gpu_type(a).name for a in allowed}
            ok_types = np.array([n in names for n in self.type_names], dtype=bool)
            hit = ok_types[self.type_idx]
            self._type_ok_cache[allowed] = hit
        return hit

    # ------------------------------------------------------------------ legality
    def placement_mask(self, job: JobSpec) -> np.ndarray:
        """Legal (first GPU, option) pairs for ``job``: a bool array of shape (n_gpus, n_options).

        This is the single source of truth for what may be placed where.
        """
        single = self._single_cached(job)
        m = self._gang_mask(single, job.num_gpus) if job.num_gpus > 1 else single
        # Computed option-major (contiguous rows per option); returned as a (gpu, option) view.
        return m.T

    def placeable(self, job: JobSpec) -> bool:
        """Whether :meth:`placement_mask` of ``job`` allows anything.

        Two exact ways, chosen for speed only: from the cluster's :class:`_FitIndex`
        (:meth:`placeable_index`: no mask), or, for the first question after a change when the
        last answer was "yes", from the job's single-GPU mask (:meth:`placeable_scan`,
        memoised for this version): on a lightly loaded fleet nearly every answer is "yes"
        and is followed by a decision that needs that mask; on a busy one most are "no", and
        a decision looks through several jobs at one version)."""
        if self._fit_last and self._fit_asked != self.version:
            ok = self.placeable_scan(job)
        else:
            ok = self.placeable_index(job)
        self._fit_last, self._fit_asked = ok, self.version
        return ok

    def placeable_index(self, job: JobSpec) -> bool:
        """:meth:`placeable` from the cluster's :class:`_FitIndex` (kept up to date as GPUs
        change, so a question costs O(GPU types x options), not O(GPUs))."""
        ix = self._fit_ix.get(job.online)
        if ix is None:
            ix = self._fit_ix[job.online] = _FitIndex(self, job.online)
        return ix.placeable(job)

    def placeable_scan(self, job: JobSpec) -> bool:
        """:meth:`placeable` from the masks (the reference the index is tested against): a gang
        fits under an option iff the option has ``num_gpus`` legal GPUs (:meth:`_gang_mask`
        starts one at each of the first ``k - n + 1`` of ``k``)."""
        single = self._single_cached(job)
        if job.num_gpus > 1:
            n = job.num_gpus  # (row by row: ``count_nonzero`` with an axis is a slow sum)
            return any(np.count_nonzero(row) >= n for row in single)
        return bool(single.any())

    def _dynamic(self) -> tuple[np.ndarray, ...]:
        """The job-independent parts of the mask: recomputed once per ``version``, and then
        only on the GPUs changed since (O(GPUs touched) per event, not O(cluster))."""
        if self._dyn_version == self.version:
            return self._dyn
        dirty = self._dirty
        if dirty is None or not dirty or 8 * len(dirty) > self.n_gpus:
            self._dyn = self._dynamic_full()
        else:
            for g in dirty:
                self._dynamic_row(g)
        self._dirty = set()
        self._dyn_version = self.version
        return self._dyn

    def _dynamic_full(self) -> tuple[np.ndarray, ...]:
        # Modes are compared as plain ints (an array compared with an enum member costs ~4x
        # more), and ``sm_used + pct <= 100`` as ``sm_used <= 100 - pct`` (integers: exact).
        free = self.n_res == 0
        room = self.n_res < self.sharing.max_residents
        mode = self.mode
        ts = room & (free | (mode == _TS))
        mps_room = room & (free | (mode == _MPS))
        sm_ok = (self.sm_used <= self._mps_headroom) | self._no_mps_limit
        mps = mps_room & sm_ok  # (n_mps, n_gpus)
        mig_base = room & self.mig_capable & (free | (mode == _MIG))
        if self._mig_slices:
            mig_bits = self.mig.creatable_bits[self.type_idx, self.mig_occ, self.mig_used]
        else:
            mig_bits = np.zeros(self.n_gpus, dtype=np.int64)
        return (free, self.ready & self.healthy, ts, mps, mig_base, mig_bits)

    def _dynamic_row(self, g: int) -> None:
        """:meth:`_dynamic_full` for one GPU (the same rules, on scalars)."""
        free_a, ready_healthy, ts, mps, mig_base, mig_bits = self._dyn
        n = self.n_res.item(g)
        mode = self.mode.item(g)
        free = n == 0
        room = n < self.sharing.max_residents
        free_a[g] = free
        ready_healthy[g] = self.ready.item(g) and self.healthy.item(g)
        ts[g] = room and (free or mode == _TS)
        mps_room = room and (free or mode == _MPS)
        sm = self.sm_used.item(g)
        no_limit = not self._mps_limit_l[g]
        mps[:, g] = [mps_room and (sm + p <= 100 or no_limit) for p in self._mps_pct_list]
        mig_base[g] = room and self.mig_capable.item(g) and (free or mode == _MIG)
        if self._mig_slices:
            t, occ, used = self.type_idx.item(g), self.mig_occ.item(g), self.mig_used.item(g)
            mig_bits[g] = self.mig.creatable_bits[t, occ, used]

    def _touch(self, gpu: int) -> None:
        """Note that ``gpu``'s state changed (for :meth:`_dynamic`)."""
        if self._dirty is not None:
            self._dirty.add(gpu)
        for ix in self._fit_ix.values():
            ix.touch(gpu)

    def set_ready(self, gpu: int, ready: bool) -> None:
        """Mark ``gpu`` ready (or being reconfigured)."""
        self.ready[gpu] = ready
        self._touch(gpu)
        self.version += 1

    def set_healthy(self, gpu: int, healthy: bool) -> None:
        """Mark ``gpu`` healthy or not (SysMonitor): offline work is placed on healthy GPUs."""
        self.healthy[gpu] = healthy
        self._touch(gpu)
        self.version += 1

    def _static(self, job: JobSpec) -> tuple[np.ndarray, ...]:
        """The parts of ``job``'s mask that depend on the fleet only (cached per memory/types)."""
        key = (job.mem_gb, job.gpu_types)
        hit = self._job_static.get(key)
        if hit is None:
            mem = job.mem_gb
            type_ok = self._type_ok(job.gpu_types)
            excl = type_ok & (mem <= self._cap_eps)
            bits = self.mig.profile_bits(mem, self._mig_slices)[self.type_idx].T.copy()
            if len(self._job_static) >= 4096:
                self._job_static.clear()
            hit = self._job_static[key] = (type_ok, excl, bits)
        return hit

    def _single_cached(self, job: JobSpec) -> np.ndarray:
        """:meth:`_single_mask`, memoised for the current ``version`` (it depends on the job's
        memory, GPU types, kind and gang-ness only)."""
        if self._single_version != self.version:
            self._single_memo.clear()
            self._single_version = self.version
        key = (job.mem_gb, job.gpu_types, job.online, job.num_gpus > 1)
        m = self._single_memo.get(key)
        if m is None:
            m = self._single_memo[key] = self._single_mask(job)
            m.flags.writeable = False
        return m

    def _single_mask(self, job: JobSpec) -> np.ndarray:
        """Legal single-GPU placements, option-major: shape (n_options, n_gpus)."""
        free, ready_healthy, ts, mps, mig_base, mig_bits = self._dynamic()
        type_ok, excl, bits = self._static(job)
        out = np.empty((len(self.options), self.n_gpus), dtype=bool)
        base = type_ok & (self.ready if job.online else ready_healthy)
        n_excl, mps0, mig0 = self._n_excl, self._mps0, self._mig0
        if n_excl:
            np.logical_and(base & free, excl, out=out[0])
        shared = base & (self.mem_decl + job.mem_gb <= self._cap_eps)
        if self._n_ts:
            np.logical_and(shared, ts, out=out[n_excl])
        if mig0 > mps0:
            np.logical_and(shared, mps, out=out[mps0:mig0])
        if self._mig_slices:
            rows = out[mig0:]
            if job.num_gpus > 1:
                rows[:] = False  # MIG instances host single-GPU jobs only (gangs span whole GPUs)
            else:
                np.bitwise_and(mig_bits, bits, out=self._bits_buf)
                np.not_equal(self._bits_buf, 0, out=rows)
                rows &= base & mig_base
        return out

    def _gang_mask(self, single: np.ndarray, n: int) -> np.ndarray:
        """A gang starting at GPU g takes the first ``n`` legal GPUs at index >= g
        (``single`` option-major, as from :meth:`_single_mask`)."""
        if single.shape[1] < _GANG_SCAN_GPUS:
            suffix = np.cumsum(single[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
            return single & (suffix >= n)
        # On a large fleet: only the last n - 1 legal GPUs of each option's row cannot start a
        # gang, so clear the row after its n-th legal GPU from the end (the same booleans; a
        # nonzero scan is ~4x cheaper than the int32 suffix sum at 1,000+ GPUs).
        out = single.copy()
        counts = np.count_nonzero(single, axis=1).tolist()
        for r, k in enumerate(counts):
            if k >= n:
                row = out[r]
                row[row.nonzero()[0].item(k - n) + 1 :] = False
            elif k:
                out[r] = False
        return out

    def gang_gpus(self, job: JobSpec, first_gpu: int, option: int) -> list[int]:
        """The GPUs a placement of ``job`` at (first_gpu, option) uses."""
        if job.num_gpus == 1:
            return [first_gpu]
        single = self._single_cached(job)[option]
        idx = np.flatnonzero(single[first_gpu:])[: job.num_gpus] + first_gpu
        return [int(i) for i in idx]

    def check(self, job: JobSpec, gpu: int, option: int) -> str | None:
        """Why placing ``job`` at (gpu, option) is illegal, or None if it is legal."""
        if not 0 <= option < len(self.options):
            return f"option {option} out of range 0..{len(self.options) - 1}"
        if not 0 <= gpu < self.n_gpus:
            return f"gpu {gpu} out of range 0..{self.n_gpus - 1}"
        if self.placement_mask(job)[gpu, option]:
            return None
        return self._explain(job, gpu, self.options[option])

    def _explain(self, job: JobSpec, gpu: int, opt: PlacementOption) -> str:
        gt = self.gpu_type(gpu)
        if job.gpu_types and gt.name not in {get_gpu_type(a).name for a in job.gpu_types}:
            return f"job {job.job_id} needs {'/'.join(job.gpu_types)}, gpu {gpu} is {gt.name}"
        if not self.ready[gpu]:
            return f"gpu {gpu} is being reconfigured"
        if not job.online and not self.healthy[gpu]:
            return f"gpu {gpu} is not healthy (SysMonitor): offline work is not placed there"
        if job.num_gpus > 1:
            return f"gang of {job.num_gpus} GPUs does not fit from gpu {gpu} with {opt.label}"
        if opt.mode is SharingMode.EXCLUSIVE and self.n_res[gpu] > 0:
            return f"gpu {gpu} is not empty ({self.n_res[gpu]} residents) for exclusive use"
        if self.n_res[gpu] >= self.sharing.max_residents:
            return f"gpu {gpu} already hosts the maximum of {self.sharing.max_residents} jobs"
        if self.n_res[gpu] > 0 and self.mode[gpu] != opt.mode:
            return f"gpu {gpu} is in mode {SharingMode(self.mode[gpu]).name}, not {opt.mode.name}"
        if opt.mode is SharingMode.MIG and not self.mig_capable[gpu]:
            return f"gpu {gpu} ({gt.name}) does not support MIG"
        if opt.mode is SharingMode.MIG:
            return f"no free MIG {opt.mig_slices}g instance with {job.mem_gb:g} GB on gpu {gpu}"
        if opt.mode is SharingMode.MPS and self.sm_used[gpu] + opt.sm_pct > 100:
            return f"gpu {gpu} MPS SM share would be {self.sm_used[gpu] + opt.sm_pct}% > 100%"
        return (
            f"job {job.job_id} needs {job.mem_gb:g} GB, gpu {gpu} has "
            f"{self.mem_cap[gpu] - self.mem_decl[gpu]:g} GB free"
        )

    # ------------------------------------------------------------------ mutation
    def add(self, job: JobSpec, gpu: int, opt: PlacementOption) -> tuple[float, MigInstance | None]:
        """Place one instance of ``job`` on ``gpu`` (legality already checked).

        Returns:
            The setup delay in seconds (mode switch, MPS daemon start, MIG instance creation)
            and the MIG instance used, if any.
        """
        # Elements are read as Python numbers (``.item``) and written back: the same values as
        # numpy's scalar arithmetic (IEEE float64 / int64), at a fraction of its cost.
        delay = 0.0
        inst: MigInstance | None = None
        n = self.n_res.item(gpu)
        mode = self.mode.item(gpu)
        if n == 0 and mode != opt.mode:
            if opt.mode is SharingMode.MIG or mode == _MIG:
                delay += self.sharing.mig_mode_switch_s
                self.mig_instances[gpu] = []
            elif opt.mode is SharingMode.MPS:
                delay += self.sharing.mps_start_s
            self.mode[gpu] = int(opt.mode)
        if opt.mode is SharingMode.MIG:
            inst, created = self._mig_take(job, gpu, opt.mig_slices)
            if created:
                delay += self.sharing.mig_reconfig_s
        if opt.mode is SharingMode.MPS and self._mps_limit_l[gpu]:
            self.sm_used[gpu] = self.sm_used.item(gpu) + opt.sm_pct
        self.n_res[gpu] = n + 1
        self.mem_decl[gpu] = self.mem_decl.item(gpu) + job.mem_gb
        self.mem_true[gpu] = self.mem_true.item(gpu) + job.true_mem_gb
        if job.online:
            self.online_count[gpu] = self.online_count.item(gpu) + 1
        self.residents[gpu].append(job.job_id)
        fracs = self.res_frac[gpu]
        fracs.append(job.gpu_frac)
        self.frac_decl[gpu] = sum(fracs)
        node = self._node_of_l[gpu]
        self.node_cpu_used[node] = self.node_cpu_used.item(node) + job.cpu_cores
        self._touch(gpu)
        self.version += 1
        return delay, inst

    def _mig_take(self, job: JobSpec, gpu: int, slices: int) -> tuple[MigInstance, bool]:
        t = int(self.type_idx[gpu])
        gt = self.types[t]
        occ = int(self.mig_occ[gpu])
        # Reuse an empty instance of a fitting profile first (no reconfiguration needed).
        cands = sorted(
            (p for p in gt.mig_profiles if p.compute_slices == slices and p.mem_gb >= job.mem_gb),
            key=lambda p: p.mem_gb,
        )
        for inst in self.mig_instances[gpu]:
            if inst.job_id is None and any(inst.profile == p.name for p in cands):
                inst.job_id = job.job_id
                self._mig_mark(gpu, inst, busy=True)
                return inst, False
        for p_idx, prof in enumerate(gt.mig_profiles):
            if prof not in cands:
                continue
            start = int(self.mig.first_start[t, occ, p_idx])
            if start < 0 or not self.mig.creatable[t, occ, self.mig_used[gpu], p_idx]:
                continue
            mask = prof.slice_mask(start)
            # Destroy the empty instances the new one overlaps (legal: they are empty).
            self.mig_instances[gpu] = [
                i for i in self.mig_instances[gpu] if i.job_id is not None or not (i.mask & mask)
            ]
            inst = MigInstance(prof.name, start, mask, prof.compute_slices, job.job_id)
            self.mig_instances[gpu].append(inst)
            self._mig_mark(gpu, inst, busy=True)
            return inst, True
        raise RuntimeError(f"no MIG {slices}g instance on gpu {gpu}: legality was not checked")

    def _mig_mark(self, gpu: int, inst: MigInstance, busy: bool) -> None:
        sign = 1 if busy else -1
        self.mig_occ[gpu] = int(self.mig_occ[gpu]) ^ inst.mask
        self.mig_used[gpu] += sign * inst.compute

    def remove(self, job: JobSpec, gpu: int, opt: PlacementOption) -> None:
        """Take one instance of ``job`` off ``gpu``."""
        # Python-number element updates, as in ``add``.
        i = self.residents[gpu].index(job.job_id)
        del self.residents[gpu][i]
        fracs = self.res_frac[gpu]
        del fracs[i]
        self.frac_decl[gpu] = sum(fracs)
        n = self.n_res[gpu] = self.n_res.item(gpu) - 1
        self.mem_decl[gpu] = self.mem_decl.item(gpu) - job.mem_gb
        self.mem_true[gpu] = self.mem_true.item(gpu) - job.true_mem_gb
        if job.online:
            self.online_count[gpu] = self.online_count.item(gpu) - 1
        node = self._node_of_l[gpu]
        self.node_cpu_used[node] = self.node_cpu_used.item(node) - job.cpu_cores
        if opt.mode is SharingMode.MPS and self._mps_limit_l[gpu]:
            self.sm_used[gpu] = self.sm_used.item(gpu) - opt.sm_pct
        if opt.mode is SharingMode.MIG:
            for inst in self.mig_instances[gpu]:
                if inst.job_id == job.job_id:
                    self._mig_mark(gpu, inst, busy=False)
                    inst.job_id = None
                    break
        if n == 0:
            self.mem_decl[gpu] = 0.0  # drop float drift
            self.mem_true[gpu] = 0.0
        self._touch(gpu)
        self.version += 1

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


def _float_order(x: float) -> int:
    """An integer that orders floats as their values do (bijective on non-NaN floats, up to
    the two zeros)."""
    i = struct.unpack("<q", struct.pack("<d", x))[0]
    return i if i >= 0 else -(i & 0x7FFF_FFFF_FFFF_FFFF)


def _from_order(i: int) -> float:
    bits = i if i >= 0 else (-i) | -0x8000_0000_0000_0000
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def _last_fitting(mem: float, cap: float) -> float:
    """The greatest float ``x`` with ``x + mem <= cap`` (IEEE addition, as the masks do):
    ``x + mem`` is monotone in ``x``, so the floats that fit are exactly those ``<= x``."""
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


class _FitIndex:
    """Whether a job of one kind (online or offline) fits anywhere, kept incrementally.

    Under every non-MIG option a single GPU is legal for a job iff the job-independent part of
    the mask holds (ready/healthy, residents, mode, MPS share: :meth:`Cluster._single_mask`),
    the GPU's type is allowed, and ``mem_decl + mem <= cap + eps`` (exclusive use: a free GPU
    and ``mem <= cap + eps``, i.e. the same test with ``0.0``). For a fixed type the test is
    monotone in the GPU's value (IEEE addition is monotone), so per (option, type) the sorted
    values of the GPUs whose job-independent part holds answer "does a job of ``mem`` fit" by
    their least value, and "how many GPUs fit" (gangs) by a binary search. MIG rows (single-GPU
    jobs only) need no memory test: per type, a count of the GPUs by their creatable-profile
    bits. A GPU's entries are replaced when it changes (:meth:`touch`, applied lazily).
    """

    def __init__(self, cluster: Cluster, online: bool) -> None:
        c = self.c = cluster
        self.online = online
        pcts = c._mps_pct_list
        #: The MPS option with the least SM share: a GPU legal under any MPS option is legal
        #: under it (``sm_used + pct <= 100`` is monotone in ``pct``), so it alone answers.
        self.mps_k = pcts.index(min(pcts)) if pcts else -1
        n_opt = c._n_excl + c._n_ts + (1 if pcts else 0)  # entries: excl, ts, least MPS
        n_t = len(c.types)
        self.cap_eps = [t.mem_gb + _EPS for t in c.types]
        self.vals: list[list[list[float]]] = [[[] for _ in range(n_t)] for _ in range(n_opt)]
        #: Per non-MIG option, per GPU: the value in ``vals`` (NaN: none).
        self.cur: list[list[float]] = []
        self.mig: list[dict[int, int]] = [{} for _ in range(n_t)]
        self.cur_mig: list[int] = []  # per GPU: its bits counted in ``mig`` (-1: none)
        self.type_l: list[int] = c.type_idx.tolist()
        self._thr: dict[tuple[float, tuple[str, ...]], list[tuple[int, float]]] = {}
        self._mig_bits: dict[float, list[int]] = {}
        self.dirty: set[int] = set()
        self._build()

    def touch(self, gpu: int) -> None:
        self.dirty.add(gpu)

    def _build(self) -> None:
        """Every entry from the cluster's state (vectorised)."""
        c = self.c
        free, ready_healthy, ts, mps, mig_base, mig_bits = c._dynamic()
        base = c.ready if self.online else ready_healthy
        mem = c.mem_decl
        nan = np.nan
        rows: list[np.ndarray] = []
        if c._n_excl:
            rows.append(np.where(base & free, 0.0, nan))
        if c._n_ts:
            rows.append(np.where(base & ts, mem, nan))
        if self.mps_k >= 0:
            rows.append(np.where(base & mps[self.mps_k], mem, nan))
        self.cur = [r.tolist() for r in rows]
        tidx = c.type_idx
        for o, r in enumerate(rows):
            for t in range(len(c.types)):
                v = r[tidx == t]
                v = np.sort(v[~np.isnan(v)])
                self.vals[o][t] = v.tolist()
        self.mig = [{} for _ in c.types]
        if c._mig_slices:
            bits = np.where(base & mig_base, mig_bits, -1)
            self.cur_mig = bits.tolist()
            for g, b in enumerate(self.cur_mig):
                if b >= 0:
                    d = self.mig[self.type_l[g]]
                    d[b] = d.get(b, 0) + 1
        else:
            self.cur_mig = [-1] * c.n_gpus
        self.dirty = set()

    def _sync(self) -> None:
        """Replace the entries of the GPUs changed since the last question."""
        dirty = self.dirty
        if not dirty:
            return
        if 8 * len(dirty) > self.c.n_gpus:
            self._build()
            return
        self.dirty = set()
        c = self.c
        mr = c.sharing.max_residents
        n_excl, n_ts = c._n_excl, c._n_ts
        online = self.online
        for g in dirty:
            t = self.type_l[g]
            n = c.n_res.item(g)
            mode = c.mode.item(g)
            free = n == 0
            room = n < mr
            ok = c.ready.item(g) if online else c.ready.item(g) and c.healthy.item(g)
            mem = c.mem_decl.item(g)
            new: list[float] = []
            nan = float("nan")
            if n_excl:
                new.append(0.0 if ok and free else nan)
            if n_ts:
                new.append(mem if ok and room and (free or mode == _TS) else nan)
            if self.mps_k >= 0:
                mps_ok = ok and room and (free or mode == _MPS)
                sm = c.sm_used.item(g)
                no_limit = not c._mps_limit_l[g]
                p = c._mps_pct_list[self.mps_k]
                new.append(mem if mps_ok and (sm + p <= 100 or no_limit) else nan)
            for o, v in enumerate(new):
                row = self.cur[o]
                old = row[g]
                if old == v or (old != old and v != v):
                    continue
                lst = self.vals[o][t]
                if old == old:
                    del lst[bisect_left(lst, old)]
                if v == v:
                    insort(lst, v)
                row[g] = v
            if c._mig_slices:
                b = -1
                if ok and room and c.mig_capable.item(g) and (free or mode == _MIG):
                    b = int(c.mig.creatable_bits[t, c.mig_occ.item(g), c.mig_used.item(g)])
                old_b = self.cur_mig[g]
                if old_b != b:
                    d = self.mig[t]
                    if old_b >= 0:
                        d[old_b] -= 1
                        if not d[old_b]:
                            del d[old_b]
                    if b >= 0:
                        d[b] = d.get(b, 0) + 1
                    self.cur_mig[g] = b

    def _thresholds(self, mem: float, allowed: tuple[str, ...]) -> list[tuple[int, float]]:
        """Per allowed type ``t``: the greatest float ``x`` with ``x + mem <= cap_eps[t]`` (the
        values that fit a job of ``mem`` are exactly those ``<= x``: the test is monotone)."""
        key = (mem, allowed)
        hit = self._thr.get(key)
        if hit is None:
            if allowed:
                names = {get_gpu_type(a).name for a in allowed}
                types = [t for t, n in enumerate(self.c.type_names) if n in names]
            else:
                types = list(range(len(self.c.types)))
            hit = []
            for t in types:
                hit.append((t, _last_fitting(mem, self.cap_eps[t])))
            if len(self._thr) >= 4096:
                self._thr.clear()
            self._thr[key] = hit
        return hit

    def placeable(self, job: JobSpec) -> bool:
        """Whether ``Cluster.placement_mask(job)`` allows anything (``job.online`` must be this
        index's kind)."""
        if self.dirty:
            self._sync()
        mem = job.mem_gb
        thr = self._thresholds(mem, job.gpu_types)
        n = job.num_gpus
        if n <= 1:
            for per_type in self.vals:
                for t, x in thr:
                    lst = per_type[t]
                    if lst and lst[0] <= x:
                        return True
            if self.c._mig_slices:
                pb = self._mig_bits.get(mem)
                if pb is None:
                    bits = self.c.mig.profile_bits(mem, self.c._mig_slices)
                    pb = self._mig_bits[mem] = np.bitwise_or.reduce(bits, axis=1).tolist()
                for t, _ in thr:
                    want = pb[t]
                    if want and any(b & want for b in self.mig[t]):
                        return True
            return False
        for per_type in self.vals:  # a gang: n legal GPUs under one option (no MIG)
            k = 0
            for t, x in thr:
                k += bisect_right(per_type[t], x)
            if k >= n:
                return True
        return False
