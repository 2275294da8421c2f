"""GPU type catalogue and NVIDIA MIG geometry.

Every figure cites its source. Datasheet figures are for the SKU named in the comment; tensor
throughput is *dense* FP16 (NVIDIA datasheets also print a 2x "with sparsity" figure).

MIG model (NVIDIA MIG User Guide, "Concepts" and "Supported MIG Profiles", v580): a MIG-capable GPU
has 8 memory slices and 7 compute (SM) slices. A GPU instance of a profile occupies
``mem_slices`` contiguous memory slices starting at one of the profile's legal start indices (the
placements printed by ``nvidia-smi mig -lgipp``) and ``compute_slices`` of the 7 SM slices. NVML
rejects a new instance whose memory slices overlap an existing one ("Creation of new GPU instance
will fail if there is overlap with the already occupied memory slices", NVML
``nvmlDeviceGetGpuInstancePossiblePlacements_v2``). Memory slice ``i`` is bit ``i`` of an 8-bit
occupancy mask. We follow drivers >= R510, which accept 4g + 3g side by side (the guide notes that
earlier drivers did not). Media-extension profiles (``+me``) are left out: they have the geometry of
the plain 1g profile and differ only in video engines, which the simulator does not model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gpu_sharing_env.physics.nodes import GPU_TYPE_NAMES

__all__ = [
    "GPU_ALIASES",
    "GPU_TYPES",
    "GPU_TYPE_NAMES",
    "MIG_COMPUTE_SLICES",
    "MIG_MEM_SLICES",
    "GpuType",
    "MigProfile",
    "UnknownGpuTypeError",
    "UnknownMigProfileError",
    "enumerate_max_layouts",
    "get_gpu_type",
    "mig_creatable",
    "mig_creatable_table",
    "mig_free_starts",
    "mig_layout_legal",
    "mig_occupancy",
]

MIG_MEM_SLICES = 8  # MIG User Guide, "GPU Memory Slice": roughly 1/8 of memory and bandwidth.
MIG_COMPUTE_SLICES = 7  # MIG User Guide, "GPU SM Slice": roughly 1/7 of the SMs in MIG mode.
_FULL_MASK = (1 << MIG_MEM_SLICES) - 1


class UnknownGpuTypeError(ValueError):
    """A GPU type name that is neither canonical nor a known alias."""


class UnknownMigProfileError(KeyError):
    """A MIG profile name the GPU type does not offer."""

    def __str__(self) -> str:  # KeyError would print the repr of the message.
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG GPU-instance profile (one row of ``nvidia-smi mig -lgip``).

    Attributes:
        name: Short profile name, e.g. ``"1g.5gb"``.
        profile_id: nvidia-smi GPU instance profile id.
        compute_slices: SM slices used, of 7.
        mem_slices: Memory slices occupied, of 8.
        mem_gb: Nominal memory (mem_slices/8 of the GPU's memory, as in the profile name).
        sms: SMs in the instance.
        max_instances: Most instances of this profile on one GPU.
        starts: Legal start memory-slice indices (``nvidia-smi mig -lgipp``).
    """

    name: str
    profile_id: int
    compute_slices: int
    mem_slices: int
    mem_gb: float
    sms: int
    max_instances: int
    starts: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 1 <= self.compute_slices <= MIG_COMPUTE_SLICES:
            raise ValueError(f"{self.name}: compute_slices must be in 1..{MIG_COMPUTE_SLICES}")
        if not self.starts or any(
            s < 0 or s + self.mem_slices > MIG_MEM_SLICES for s in self.starts
        ):
            raise ValueError(f"{self.name}: every start must leave the instance inside 8 slices")

    def slice_mask(self, start: int) -> int:
        """Bitmask of the memory slices an instance placed at ``start`` occupies.

        Raises:
            ValueError: ``start`` is not one of the profile's legal starts.
        """
        if start not in self.starts:
            raise ValueError(f"{self.name}: start {start} is not one of {self.starts}")
        return ((1 << self.mem_slices) - 1) << start


@dataclass(frozen=True, slots=True)
class GpuType:
    """One GPU model.

    Attributes:
        name: Canonical name (one of ``GPU_TYPE_NAMES``).
        arch: ``"pascal"``, ``"volta"``, ``"turing"``, ``"ampere"`` or ``"hopper"``.
        sms: Streaming multiprocessors.
        mem_gb: Device memory.
        mem_bw_gbps: Peak memory bandwidth, GB/s.
        fp32_tflops: Peak FP32 (non-tensor) TFLOPS.
        fp16_tensor_tflops: Dense FP16 tensor TFLOPS (P100, which has no tensor cores: its FP16).
        tdp_w: Board power.
        mps_sm_limit: ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` is honoured (Volta MPS and later).
        mps_max_clients: Most MPS clients per device.
        mig_profiles: MIG profiles; empty when MIG is not supported.
    """

    name: str
    arch: str
    sms: int
    mem_gb: float
    mem_bw_gbps: float
    fp32_tflops: float
    fp16_tensor_tflops: float
    tdp_w: float
    mps_sm_limit: bool
    mps_max_clients: int
    mig_profiles: tuple[MigProfile, ...] = ()

    @property
    def supports_mig(self) -> bool:
        """Whether the GPU can be partitioned with MIG."""
        return bool(self.mig_profiles)

    def mig_profile(self, name: str) -> MigProfile:
        """The MIG profile called ``name``.

        Raises:
            UnknownMigProfileError: No such profile on this GPU type (message lists legal names).
        """
        for prof in self.mig_profiles:
            if prof.name == name:
                return prof
        legal = ", ".join(p.name for p in self.mig_profiles) or "none (no MIG support)"
        raise UnknownMigProfileError(f"{self.name} has no MIG profile {name!r}; legal: {legal}")


# (compute slices, memory slices, profile id, legal starts, max instances) of the six non-"+me"
# profiles. MIG User Guide v580: Table 6 (A100) / Table 7 (H100) for fractions and instance counts,
# `nvidia-smi mig -lgipp` example ("Profile ID 19 {0,1,2,3,4,5,6}:1, 15 {0,2,4,6}:2,
# 14 {0,2,4}:2, 9 {0,4}:4, 5 {0}:4, 0 {0}:8") for ids and placements. Table 6 prints 1/8 memory
# for 1g.10gb, but its name (10 of 40 GB) and its {0,2,4,6}:2 placement make it 2 slices.
# A100-80GB and H100-80GB use the same geometry with doubled names (guide, Tables 6 and 7).
_GEOMETRY: tuple[tuple[int, int, int, tuple[int, ...], int], ...] = (
    (1, 1, 19, (0, 1, 2, 3, 4, 5, 6), 7),
    (1, 2, 15, (0, 2, 4, 6), 4),
    (2, 2, 14, (0, 2, 4), 3),
    (3, 4, 9, (0, 4), 2),
    (4, 4, 5, (0,), 1),
    (7, 8, 0, (0,), 1),
)


def _mig_profiles(mem_gb: float, sms: tuple[int, ...]) -> tuple[MigProfile, ...]:
    """Build the six profiles of an A100/H100-class GPU; ``sms`` is per row of ``_GEOMETRY``."""
    slice_gb = mem_gb / MIG_MEM_SLICES
    return tuple(
        MigProfile(f"{c}g.{m * slice_gb:g}gb", pid, c, m, m * slice_gb, n, mx, st)
        for (c, m, pid, st, mx), n in zip(_GEOMETRY, sms, strict=True)
    )


# A100 SM counts per profile: 14 SMs per compute slice; `nvidia-smi mig -lgip` on A100-SXM4-40GB
# prints 14/28/42/56/98 for 1g/2g/3g/4g/7g (NVIDIA developer forum thread "Why MIG instances can
# only sum up to 98 SMs instead of the 108 SMs available?"); the MIG guide's examples show 42 SMs per
# 3g.20gb and 14 per 1c compute instance. Only 98 of the 108 SMs are usable in MIG mode.
_A100_MIG_SMS = (14, 14, 28, 42, 56, 98)
# H100 SM counts per profile: the MIG guide v580 (MIG with CUDA MPS example, "H100 80GB HBM3") shows
# 60 SMs per 3g.40gb. 16/26/32/60/64 for 1g/1g-double/2g/3g/4g are `nvidia-smi mig -lgip` on other
# 132-SM GH100 boards (H100 NVL: NVIDIA/gpu-operator PR #900; H200: NVIDIA/mig-parted issue #120),
# assumed identical on H100 SXM5. 132 for 7g.80gb is the whole GPU: NOT verified against an lgip.
_H100_MIG_SMS = (16, 26, 32, 60, 64, 132)

# MPS client limits: CUDA MPS documentation, "Limitations": up to 48 clients per device on Volta and
# later, 16 on pre-Volta. Active-thread-percentage provisioning is a Volta-MPS feature (MPS docs,
# "Volta MPS": "supports limited execution resource provisioning for Quality of Service").
_MPS_VOLTA, _MPS_PRE_VOLTA = 48, 16


def _gpu(name: str, arch: str, sms: int, *figures: float, mig_sms: tuple[int, ...] = ()) -> GpuType:
    """Catalogue row; MPS capabilities follow from the architecture (pre-Volta = Pascal here)."""
    mem, bw, fp32, fp16t, tdp = figures  # GB, GB/s, TFLOPS, dense FP16 tensor TFLOPS, W
    volta_plus = arch != "pascal"
    profiles = _mig_profiles(mem, mig_sms) if mig_sms else ()
    mps_clients = _MPS_VOLTA if volta_plus else _MPS_PRE_VOLTA
    return GpuType(name, arch, sms, mem, bw, fp32, fp16t, tdp, volta_plus, mps_clients, profiles)


_CATALOGUE: tuple[GpuType, ...] = (
    # NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s, 8.1 FP32, 65 FP16 mixed-precision, 70 W;
    # 40 SMs (2,560 CUDA cores / 64 per Turing SM; Turing architecture whitepaper).
    _gpu("T4", "turing", 40, 16.0, 320.0, 8.1, 65.0, 70.0),
    # NVIDIA Tesla P100 PCIe 16GB datasheet: 732 GB/s, 9.3 FP32, 18.7 FP16 (no tensor cores),
    # 250 W; 56 SMs (Pascal GP100 whitepaper). Pre-Volta MPS: no SM limiting, 16 clients.
    _gpu("P100", "pascal", 56, 16.0, 732.0, 9.3, 18.7, 250.0),
    # NVIDIA V100 Tensor Core GPU datasheet (SXM2): 900 GB/s, 15.7 FP32, 125 tensor, 300 W;
    # 80 SMs (Volta GV100 whitepaper). 16 GB and 32 GB versions differ only in capacity.
    _gpu("V100-16GB", "volta", 80, 16.0, 900.0, 15.7, 125.0, 300.0),
    _gpu("V100-32GB", "volta", 80, 32.0, 900.0, 15.7, 125.0, 300.0),
    # NVIDIA A10 Tensor Core GPU datasheet: 24 GB GDDR6, 600 GB/s, 31.2 FP32, 125 FP16 tensor
    # (250 with sparsity), 150 W; 72 SMs (9,216 CUDA cores / 128 per GA102 SM). No MIG (MIG guide,
    # "Supported GPUs").
    _gpu("A10", "ampere", 72, 24.0, 600.0, 31.2, 125.0, 150.0),
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4): 40 GB 1,555 GB/s / 80 GB 2,039 GB/s, 19.5 FP32,
    # 312 FP16 tensor (624 with sparsity), 400 W; 108 SMs (NVIDIA A100 architecture whitepaper).
    _gpu("A100-40GB", "ampere", 108, 40.0, 1555.0, 19.5, 312.0, 400.0, mig_sms=_A100_MIG_SMS),
    _gpu("A100-80GB", "ampere", 108, 80.0, 2039.0, 19.5, 312.0, 400.0, mig_sms=_A100_MIG_SMS),
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5): 80 GB, 3.35 TB/s, 67 FP32, 989 FP16 tensor
    # (1,979 with sparsity), 700 W; 132 SMs (NVIDIA H100 Tensor Core GPU architecture whitepaper).
    _gpu("H100-80GB", "hopper", 132, 80.0, 3350.0, 67.0, 989.0, 700.0, mig_sms=_H100_MIG_SMS),
)

GPU_TYPES: dict[str, GpuType] = {g.name: g for g in _CATALOGUE}
if tuple(GPU_TYPES) != GPU_TYPE_NAMES:  # pragma: no cover - guards edits to either list
    raise RuntimeError("hardware catalogue out of step with nodes.GPU_TYPE_NAMES")

GPU_ALIASES: dict[str, str] = {
    # Alibaba openb v2023 node list and PAI v2020 machine spec: V100M16 / V100M32 name the 16 and
    # 32 GB V100; PAI's bare "V100" sits beside "V100M32", so it is the 16 GB part.
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
    "V100": "V100-16GB",
    "V100-SXM2-16GB": "V100-16GB",
    "V100-SXM2-32GB": "V100-32GB",
    # nvidia-smi product names (Alibaba v2026 spot node list uses the A100/A800 ones).
    "A100-SXM4-40GB": "A100-40GB",
    "A100-SXM4-80GB": "A100-80GB",
    # A800 / H800: export variants of A100 / H100 with cut-down NVLink; same SMs, memory and MIG.
    "A800-SXM4-80GB": "A100-80GB",
    "H800": "H100-80GB",
    # Bare family names: the launch capacities (A100 launched as 40 GB; H100 ships as 80 GB).
    "A100": "A100-40GB",
    "H100": "H100-80GB",
    "H100-SXM5-80GB": "H100-80GB",
    "TESLA-T4": "T4",
    "TESLA-P100": "P100",
}
_LOOKUP: dict[str, str] = {k.upper(): v for k, v in GPU_ALIASES.items()} | {
    n.upper(): n for n in GPU_TYPE_NAMES
}


def get_gpu_type(name: str) -> GpuType:
    """Look a GPU type up by canonical name or alias (case-insensitive).

    Raises:
        UnknownGpuTypeError: Unknown name; the one-line message lists the legal names.
    """
    canonical = _LOOKUP.get(str(name).strip().upper())
    if canonical is None:
        raise UnknownGpuTypeError(
            f"unknown GPU type {name!r}; legal names: {', '.join(GPU_TYPE_NAMES)} "
            f"(aliases: {', '.join(GPU_ALIASES)})"
        )
    return GPU_TYPES[canonical]


def mig_occupancy(gpu: GpuType, layout: Iterable[tuple[str, int]]) -> tuple[int, int]:
    """``(occupied memory-slice mask, used compute slices)`` of a layout.

    Overlaps and the compute budget are not checked (see :func:`mig_layout_legal`).

    Raises:
        UnknownMigProfileError: Unknown profile.
        ValueError: A start that is not a legal placement of its profile.
    """
    mask = used = 0
    for name, start in layout:
        prof = gpu.mig_profile(name)
        mask |= prof.slice_mask(start)
        used += prof.compute_slices
    return mask, used


def mig_layout_legal(gpu: GpuType, layout: Sequence[tuple[str, int]]) -> bool:
    """Whether NVIDIA would accept this set of GPU instances on one GPU.

    Args:
        gpu: The GPU type.
        layout: ``[(profile_name, start), ...]``; order does not matter.

    Returns:
        True iff the GPU supports MIG, every profile exists and starts at a legal placement, no two
        instances share a memory slice, compute slices total at most 7 and no profile exceeds its
        ``max_instances``.
    """
    if not gpu.supports_mig:
        return False
    mask = used = 0
    counts: Counter[str] = Counter()
    for name, start in layout:
        try:
            prof = gpu.mig_profile(name)
            slices = prof.slice_mask(start)
        except (UnknownMigProfileError, ValueError):
            return False
        if mask & slices:
            return False
        mask |= slices
        used += prof.compute_slices
        counts[name] += 1
        if counts[name] > prof.max_instances:
            return False
    return used <= MIG_COMPUTE_SLICES


def _check_state(occupied_mask: int, used_compute: int) -> None:
    if not 0 <= occupied_mask <= _FULL_MASK:
        raise ValueError(f"occupied_mask {occupied_mask} is not an 8-bit mask")
    if not 0 <= used_compute <= MIG_COMPUTE_SLICES:
        raise ValueError(f"used_compute {used_compute} is not in 0..{MIG_COMPUTE_SLICES}")


def mig_free_starts(
    gpu: GpuType, occupied_mask: int, used_compute: int, profile: str
) -> tuple[int, ...]:
    """Starts at which ``profile`` can be created next to the existing instances (reference rule).

    Args:
        gpu: The GPU type.
        occupied_mask: Bit ``i`` set iff memory slice ``i`` belongs to an existing instance.
        used_compute: Compute slices held by the existing instances.
        profile: Profile name.

    Returns:
        Legal starts whose memory slices are all free, in increasing order; empty if the
        compute slices would exceed 7. Exact without instance counts: for every catalogued
        profile ``max_instances`` equals the most disjoint placements, so geometry implies it.

    Raises:
        UnknownMigProfileError: No such profile (or no MIG) on this GPU.
        ValueError: ``occupied_mask`` / ``used_compute`` out of range.
    """
    _check_state(occupied_mask, used_compute)
    prof = gpu.mig_profile(profile)
    if used_compute + prof.compute_slices > MIG_COMPUTE_SLICES:
        return ()
    return tuple(s for s in prof.starts if not occupied_mask & prof.slice_mask(s))


_CreatableRows = tuple[tuple[tuple[str, int], ...], ...]
_TABLES: dict[str, tuple[GpuType, _CreatableRows, np.ndarray]] = {}


def _tables(gpu: GpuType) -> tuple[_CreatableRows, np.ndarray]:
    hit = _TABLES.get(gpu.name)
    if hit is None or (hit[0] is not gpu and hit[0] != gpu):
        rows: list[tuple[tuple[str, int], ...]] = []
        arr = np.zeros((_FULL_MASK + 1, MIG_COMPUTE_SLICES + 1, len(gpu.mig_profiles)), dtype=bool)
        for occ in range(_FULL_MASK + 1):
            for used in range(MIG_COMPUTE_SLICES + 1):
                row = [
                    (p.name, s)
                    for p in gpu.mig_profiles
                    for s in mig_free_starts(gpu, occ, used, p.name)
                ]
                rows.append(tuple(row))
                for i, p in enumerate(gpu.mig_profiles):
                    arr[occ, used, i] = any(name == p.name for name, _ in row)
        arr.setflags(write=False)
        hit = (gpu, tuple(rows), arr)
        _TABLES[gpu.name] = hit
    return hit[1], hit[2]


def mig_creatable(
    gpu: GpuType, occupied_mask: int, used_compute: int
) -> tuple[tuple[str, int], ...]:
    """Every ``(profile, start)`` that can be created now: an O(1) precomputed lookup.

    Same answer as :func:`mig_free_starts` over all profiles (profiles in ``gpu.mig_profiles``
    order, starts increasing). Tables are built on first use per GPU type (256 masks x 8 compute
    levels) and cached by name.
    Empty for GPUs without MIG.

    Raises:
        ValueError: ``occupied_mask`` / ``used_compute`` out of range.
    """
    _check_state(occupied_mask, used_compute)
    return _tables(gpu)[0][occupied_mask * (MIG_COMPUTE_SLICES + 1) + used_compute]


def mig_creatable_table(gpu: GpuType) -> np.ndarray:
    """Read-only bool array ``[occupied_mask, used_compute, profile_index]`` for vectorised masks.

    ``profile_index`` follows ``gpu.mig_profiles``; True iff the profile has a free legal start.
    """
    return _tables(gpu)[1]


def enumerate_max_layouts(
    gpu: GpuType, profiles: Iterable[str] | None = None
) -> list[tuple[tuple[str, int], ...]]:
    """All maximal legal layouts: legal layouts to which no further instance can be added.

    Args:
        gpu: The GPU type.
        profiles: Restrict to these profile names (default: all of the GPU's profiles).

    Returns:
        Layouts with instances sorted by start, the list sorted; empty without MIG support.
    """
    allowed = [gpu.mig_profile(n) for n in profiles] if profiles is not None else gpu.mig_profiles
    places = [(p, s) for p in allowed for s in p.starts]
    found: list[tuple[tuple[str, int], ...]] = []

    def fits(layout: list[tuple[str, int]], cand: tuple[MigProfile, int]) -> bool:
        return mig_layout_legal(gpu, [*layout, (cand[0].name, cand[1])])

    def walk(first: int, layout: list[tuple[str, int]]) -> None:
        grew = False
        for i in range(first, len(places)):
            if fits(layout, places[i]):
                grew = True
                walk(i + 1, [*layout, (places[i][0].name, places[i][1])])
        if not grew and not any(fits(layout, c) for c in places[:first]):
            found.append(tuple(sorted(layout, key=lambda x: (x[1], x[0]))))

    if gpu.supports_mig:
        walk(0, [])
    return sorted(found, key=lambda lay: [(s, n) for n, s in lay])
