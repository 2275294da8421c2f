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
        self.node_first_gpu = np.concatenate([[0], np.cumsum([n.num_gpus for n in nodes])[:-1]])
        self.mig = _MigTables(self.types)
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
        self.residents: list[list[int]] = [[] for _ in range(g)]
        self.node_cpu_used = np.zeros(self.n_nodes, dtype=np.float64)
        self.version = 0
        self._type_ok_cache: dict[tuple[str, ...], np.ndarray] = {}

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
        single = self._single_mask(job)
        return self._gang_mask(single, job.num_gpus) if job.num_gpus > 1 else single

    def _single_mask(self, job: JobSpec) -> np.ndarray:
        opts = self.options
        out = np.zeros((self.n_gpus, len(opts)), dtype=bool)
        mem = job.mem_gb
        free = self.n_res == 0
        room = self.n_res < self.sharing.max_residents
        base = self._type_ok(job.gpu_types) & self.ready
        if not job.online:
            base = base & self.healthy
        fits_shared = self.mem_decl + mem <= self.mem_cap + _EPS
        gang = job.num_gpus > 1
        mig_rows: np.ndarray | None = None
        for o, opt in enumerate(opts):
            if opt.mode is SharingMode.EXCLUSIVE:
                col = base & free & (mem <= self.mem_cap + _EPS)
            elif opt.mode is SharingMode.TIME_SHARING:
                col = base & room & fits_shared & (free | (self.mode == SharingMode.TIME_SHARING))
            elif opt.mode is SharingMode.MPS:
                sm_ok = (self.sm_used + opt.sm_pct <= 100) | ~self.mps_limit
                col = base & room & fits_shared & sm_ok & (free | (self.mode == SharingMode.MPS))
            else:
                if gang:
                    continue  # MIG instances host single-GPU jobs only (gangs span whole GPUs)
                if mig_rows is None:
                    mig_rows = self.mig.creatable[self.type_idx, self.mig_occ, self.mig_used]
                    mig_base = base & room & self.mig_capable
                    mig_base &= free | (self.mode == SharingMode.MIG)
                    mem_ok = self.mig.mem_gb[self.type_idx] >= mem - _EPS
                    rows_ok = mig_rows & mem_ok
                comp = self.mig.compute[self.type_idx] == opt.mig_slices
                col = mig_base & np.any(rows_ok & comp, axis=1)
            out[:, o] = col
        return out

    def _gang_mask(self, single: np.ndarray, n: int) -> np.ndarray:
        """A gang starting at GPU g takes the first ``n`` legal GPUs at index >= g."""
        suffix = np.cumsum(single[::-1], axis=0)[::-1]
        return single & (suffix >= n)

    def gang_gpus(self, job: JobSpec, first_gpu: int, option: int) -> list[int]:
        """The GPUs a placement of ``job`` at (first_gpu, option) uses."""
        if job.num_gpus == 1:
            return [first_gpu]
        single = self._single_mask(job)[:, option]
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
        delay = 0.0
        inst: MigInstance | None = None
        was_free = self.n_res[gpu] == 0
        if was_free and self.mode[gpu] != opt.mode:
            if opt.mode is SharingMode.MIG or self.mode[gpu] == SharingMode.MIG:
                delay += self.sharing.mig_mode_switch_s
                self.mig_instances[gpu] = []
            elif opt.mode is SharingMode.MPS:
                delay += self.sharing.mps_start_s
            self.mode[gpu] = int(opt.mode)
        if opt.mode is SharingMode.MIG:
            inst, created = self._mig_take(job, gpu, opt.mig_slices)
            if created:
                delay += self.sharing.mig_reconfig_s
        if opt.mode is SharingMode.MPS and self.mps_limit[gpu]:
            self.sm_used[gpu] += opt.sm_pct
        self.n_res[gpu] += 1
        self.mem_decl[gpu] += job.mem_gb
        self.mem_true[gpu] += job.true_mem_gb
        self.online_count[gpu] += int(job.online)
        self.residents[gpu].append(job.job_id)
        self.node_cpu_used[self.node_of[gpu]] += job.cpu_cores
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
        self.residents[gpu].remove(job.job_id)
        self.n_res[gpu] -= 1
        self.mem_decl[gpu] -= job.mem_gb
        self.mem_true[gpu] -= job.true_mem_gb
        self.online_count[gpu] -= int(job.online)
        self.node_cpu_used[self.node_of[gpu]] -= job.cpu_cores
        if opt.mode is SharingMode.MPS and self.mps_limit[gpu]:
            self.sm_used[gpu] -= opt.sm_pct
        if opt.mode is SharingMode.MIG:
            for inst in self.mig_instances[gpu]:
                if inst.job_id == job.job_id:
                    self._mig_mark(gpu, inst, busy=False)
                    inst.job_id = None
                    break
        if self.n_res[gpu] == 0:
            self.mem_decl[gpu] = 0.0  # drop float drift
            self.mem_true[gpu] = 0.0
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
