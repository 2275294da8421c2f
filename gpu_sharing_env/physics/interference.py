"""Speed and interference: how fast each job on a GPU progresses.

One pluggable interface, :class:`SpeedModel`. The simulator asks it, whenever the set of residents
of a GPU (or an online service's load) changes, for each resident's progress rate as a fraction
of that job's *solo, exclusive* speed on the same GPU type; and for solo speeds across GPU types
relative to the reference GPU (V100-16GB).

Implementations: :class:`AnalyticSpeedModel` (the default; closed forms whose coefficients are
calibrated in ``scripts/calibrate.py``, see ``docs/calibration.md``) and
:class:`TableSpeedModel` (measured pairwise slowdowns looked up from a table, falling back to
the analytic model for pairs the table lacks).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpu_sharing_env.physics.modes import SharingMode

# Defined in zoo (their home), re-exported here where callers have always found them.
from gpu_sharing_env.physics.zoo import REFERENCE_GPU as REFERENCE_GPU
from gpu_sharing_env.physics.zoo import UnknownModelError as UnknownModelError

if TYPE_CHECKING:
    from gpu_sharing_env.physics.zoo import ModelProfile


@dataclass(frozen=True, slots=True)
class Resident:
    """What the speed model needs to know about one job resident on a GPU.

    Attributes:
        model: Model class (key of ``gpu_sharing_env.physics.zoo.ZOO``).
        sm_frac: MPS active-thread fraction in (0, 1]; 1.0 outside MPS.
        mig_compute_slices: Compute slices of the job's MIG instance (of 7); 0 outside MIG.
        mig_mem_slices: Memory slices of the job's MIG instance (of 8); 0 outside MIG.
        duty: Fraction of wall time the job keeps the GPU busy when running alone (its solo SM
            activity). For an online service this is its current load-dependent utilisation.
        online: An online (latency-critical) service.
        priority: Time-sharing priority; larger runs first (AntMan / PB-time-sharing). Under
            MPS an offline resident with a lower priority than an online co-resident is
            *kernel-throttled* (Tally / MuxFlow's xCUDA class); MPS otherwise ignores it.
        batch: Inference batch size an online service runs with (sets its MPS SM-share curve,
            :func:`sm_share_k`); 0 (training, or unknown) takes the large-batch curve. Left out
            of the repr (profiling noise is seeded by it) so batch-blind callers draw as before.
        gpulet: Under MPS with gpulets (``SharingConfig.gpulets``): the index of the SM partition
            the resident shares in time with the other residents of the same index
            (:meth:`AnalyticSpeedModel.rates`); -1 (the default): a partition of its own. Left
            out of the repr like ``batch``.
    """

    model: str
    sm_frac: float = 1.0
    mig_compute_slices: int = 0
    mig_mem_slices: int = 0
    duty: float = 1.0
    online: bool = False
    priority: int = 0
    batch: int = field(default=0, repr=False)
    gpulet: int = field(default=-1, repr=False)


class SpeedModel(Protocol):
    """The interface the simulator uses; implement it to plug in another model."""

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """Exclusive-GPU throughput on ``gpu_type`` relative to the reference GPU (V100 = 1)."""
        ...

    def rates(self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]) -> list[float]:
        """Each resident's progress rate as a fraction of its solo exclusive speed on this GPU.

        Covers the SM-share curve under MPS, the MIG profile curve, co-runner interference
        (memory bandwidth / L2 under MPS, turn-taking under time-sharing) and context-switch
        overhead. Values are in (0, 1]; MIG instances do not interfere (or barely).
        """
        ...

    def batch_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        """Solo, exclusive latency of one inference batch on ``gpu_type``."""
        ...


# ------------------------------------------------------------------------------------------------
# Implementations. Everything below is additive; the protocol above is the engine's contract.
# ------------------------------------------------------------------------------------------------

#: Smallest rate any resident gets: rates must stay in (0, 1] (a starved low-priority
#: time-sharing context still makes a little progress between the others' kernels).
MIN_RATE = 0.01

#: Version of the sharing physics. Every evaluation record carries it (``runner``): results of
#: different versions are not comparable. 1: the 0.1-0.2 model (fluid, duty-conserving
#: time-sharing with an assumed 3 % switch cost; MPS fitted on iGniter + Gavel + Lucid). 2:
#: time-slicing as turn-taking with a fitted switch loss, priority sharing as TGS-style
#: throttling, MPS refitted with Tally, per-batch online inflation and an MPS tail term
#: (CHANGELOG 0.3.0, docs/fidelity.md). 3: kernel-level priority under MPS (MuxFlow's xCUDA,
#: Tally), fitted on Tally's own column; only policies deploying the ``kernel_priority``
#: mechanism (MuxFlow) see it (CHANGELOG 0.4.0). 4: a gang runs at its slowest member's rate
#: (each member's speed x share x CPU factor; was the product of three fleet-wide minima) and
#: the fidelity issue's changes (CHANGELOG 0.5.0, docs/fidelity.md). 5: MuxFlow's xCUDA as feedback
#: on a device metric (``sim.online.XCUDA_CLOCK_MIN``: offline launches delayed while the
#: service's kernel speed drops) and no dynamic-SM cap on a kernel-throttled client (the
#: protection was counted twice), and driver priority slicing as a second priority time-sharing
#: model (:func:`driver_priority_coefficients`, MuxFlow's PB-time-sharing baseline; the default
#: stays the TGS fit), issue 52 (docs/fidelity.md). 6: an online service moved to another GPU
#: (``Lifecycle.migrate``) is a new replica and serves nothing for ``sharing.migration_s``, an
#: outage charged as a fault's restart (was: served from its new GPU at once); only episodes
#: in which a service moves change (issue 53, CHANGELOG).
MODEL_VERSION = 6

# Global coefficients of the analytic model. "fitted by scripts/calibrate.py" means: least squares
# on log(predicted/measured) over the datasets named, then rounded and pasted here; the script
# reports the error of these shipped values (docs/calibration.md).
#: MPS SM-overlap contention: when two clients' SM limits overlap, each of j's busy fractions
#: costs i this much extra time per unit of i's GPU time. Fitted by scripts/calibrate.py jointly
#: on igniter_pairs + tally_pairs (MPS rows) + gavel_pairs + lucid_pairs (each dataset weighted
#: equally).
KAPPA_COMPUTE = 0.182
#: MPS memory-bandwidth / L2 contention, scaled by b_i * b_j (bw_intensity). Fitted by
#: scripts/calibrate.py in the same joint fit; iGniter's disjoint SM splits isolate this term.
KAPPA_BW = 1.352
#: Weight of the memory-slice fraction in a MIG instance's effective size, (c/7)^(1-w)*(m/8)^w.
#: Fitted by scripts/calibrate.py on miso_mig (MISO A100 MIG iteration times).
MIG_MEM_WEIGHT = 0.48
#: Residual cross-instance interference under MIG, per other occupied instance (of at most 6).
#: Stated assumption: MIG partitions SMs, L2 and memory controllers, so only shared power and
#: thermal headroom couple instances; we take 1 % per neighbour (nos' MIG runs, flat per-pod
#: throughput from 1 to 7 pods, bound it to a few percent).
MIG_CROSSTALK = 0.01
#: Time-slicing switch loss: the fraction of throughput lost whenever >= 2 contexts of the same
#: priority take turns on a GPU. Fitted by scripts/calibrate.py jointly on nos_sharing (nebuly-ai/nos,
#: A100 time-slicing, 3/5/7 YOLOS pods: aggregate throughput 0.90 of one pod alone) and
#: tally_pairs (training beside inference under time-slicing).
CONTEXT_SWITCH_OVERHEAD = 0.074
#: Time-slicing: weight of an online co-runner's load in the turn-taking stretch. An inference
#: context holds its time slice across the gaps between its kernels (it cannot fill the SMs,
#: MuxFlow's premise), so at utilisation u it holds the GPU for min(1, w * u) of the time. Fitted by
#: scripts/calibrate.py on tally_pairs (time-slicing rows: training beside inference at 50 %
#: load).
TS_ONLINE_WEIGHT = 1.697
#: Time-slicing: length of one time slice (ms). An online batch that arrives while a co-runner
#: holds the GPU waits for the slice to end: ``busy * TS_SLICE_MS / 2`` on average, a whole
#: slice at the tail (``busy``: the co-runners' summed utilisation, at most 1). Fitted by
#: scripts/calibrate.py on tally_pairs (time-slicing and TGS rows, p99 over mean latency, with
#: the zoo's batch-1 latency of the mapped model as the solo batch time).
TS_SLICE_MS = 4.758
#: Priority time-sharing (AntMan / PAI / TGS style: the low-priority context's kernel launches are
#: rate-limited whenever the high-priority one is active). Fraction of a high-priority online
#: context's load that blocks low-priority work (the rest are the gaps between its kernels, which
#: the throttled context fills). Fitted by scripts/calibrate.py on tally_pairs (TGS rows,
#: training throughput).
PRIO_BLOCK = 0.453
#: Priority time-sharing: residual slowdown of a high-priority context per unit of low-priority
#: demand (a low-priority kernel already running when a high-priority one arrives is not
#: preempted). Fitted by scripts/calibrate.py on tally_pairs (TGS rows, inference latency).
PRIO_RESIDUAL = 0.72
#: MPS kernel wait: an online batch that finds a co-runner's kernels occupying the SMs waits for
#: them (MPS does not preempt): half of this on average, all of it at the tail. In ms on the
#: reference GPU per unit of a co-runner's busy fraction, scaled by the co-runner's kernel length
#: relative to the reference (1 / its solo speed on this GPU) and by the share of i's SMs that
#: j's limit overlaps (disjoint SM splits: no wait). The zoo has no per-model kernel lengths,
#: so one constant stands for all training jobs. Fitted by scripts/calibrate.py on
#: tally_pairs (MPS rows, p99) and orion_mps (V100 ResNet50 inference beside training).
MPS_TAIL_MS = 12.776
#: Kernel-level priority under MPS (Tally, ASPLOS'25; MuxFlow's xCUDA is of this class: the
#: offline client's kernel launches are held back while the online service is active). Share of
#: a higher-priority online load that blocks a throttled offline client (above 1: the slicing
#: of its kernels costs it more than the service's busy time). Fitted by scripts/calibrate.py
#: on tally_priority (Tally's own column: training throughput beside inference at 50 % load).
KP_BLOCK = 1.191
#: Kernel-level priority: residual slowdown of the online service's batches per unit of
#: throttled offline demand (kernel slices already running when a batch arrives). Fitted by
#: scripts/calibrate.py on tally_priority (inference mean latency).
KP_RESIDUAL = 0.012
#: Kernel-level priority: the MPS kernel wait of an online batch behind a throttled client's
#: kernels in flight, as ``MPS_TAIL_MS`` is for an unthrottled one (ms on the reference GPU per
#: unit of the co-runner's busy fraction, scaled by its kernel length). Fitted by
#: scripts/calibrate.py on tally_priority (inference p99 latency).
KP_TAIL_MS = 0.483

#: xCUDA's protection level (physics version 4). MuxFlow's xCUDA is unpublished; Tally's
#: artifact (tally-bench ``priority-aware-perf.csv``, same 12 A100 pairs) measured two
#: kernel-level priority configurations that keep the service within MuxFlow's own bound (mean
#: latency under 1.2x solo, Sec. 6.2): Tally's default, whose best-effort kernels are sliced so
#: that they can be preempted within 31.6 us (``KP_*`` above: level 1, the most protective; mean
#: latency 1.016x, training 0.443 of solo), and Tally with kernel transformation disabled, which
#: holds back whole, unmodified best-effort kernels while the service runs (``KP_*_LOW``: level
#: 0, the least protective that still meets the bound; mean latency 1.068x, training 0.505).
#: Every other measured neighbour misses it (TGS 1.70x, MPS with priority 1.88x, Tally with
#: space sharing 2.17x). ``KP_*_LOW`` are fitted as ``KP_*`` are, in the same joint fit of
#: scripts/calibrate.py (``gsg calibrate``; median error 0.063 in sample, 0.086 leaving one model
#: out) on the dataset ``tally_no_transform``: the 36 derived ratios of that configuration's rows
#: (tally-bench commit aaa359a, ``disable_transformation=True``; ``data/sharing_pairs.csv``,
#: derived as ``data/PROVENANCE.md`` section 1 derives Tally's).
KP_BLOCK_LOW = 1.082
KP_RESIDUAL_LOW = 0.043
KP_TAIL_MS_LOW = 2.575
#: The documented central choice of the level: 1, Tally's default (as in physics version 3).
#: MuxFlow describes xCUDA as delaying or launching the offline workload's kernels (Sec. 4.1
#: and 7; ``../shared/seeds/000_*``), with no kernel slicing, which reads like level 0; but
#: MuxFlow runs every pair under MPS with SM percentages (dynamic SM allocation, Sec. 4.2): the
#: service's kernels run on SMs the offline client cannot occupy, so they do not queue behind
#: whole offline kernels as in Tally's level-0 measurement, where both share every SM (its
#: 2.58 ms tail term makes the 1 ms T4 services 1.6x slower in ``muxflow-online``). Level 1's
#: preemptible kernels are the measured mechanism nearest in effect to that isolation. Level 0
#: stays the bracket's low end (``gsg reproduce`` reports both); a measurement of whole-kernel
#: gating under partitioned SMs would replace this choice.
KP_LEVEL_CENTRAL = 1.0


def kp_coefficients(level: float) -> dict[str, float]:
    """The kernel-level priority coefficients (``kp_block``, ``kp_residual``, ``kp_tail_ms``
    keywords of :class:`AnalyticSpeedModel`) at protection ``level`` in [0, 1]: linear between
    Tally without kernel transformation (0) and Tally's default (1), see
    :data:`KP_LEVEL_CENTRAL`."""
    if not 0.0 <= level <= 1.0:
        raise ValueError(f"kernel-priority level {level}: must be in [0, 1]")
    if level == 1.0:
        return {"kp_block": KP_BLOCK, "kp_residual": KP_RESIDUAL, "kp_tail_ms": KP_TAIL_MS}
    if level == 0.0:
        return {
            "kp_block": KP_BLOCK_LOW,
            "kp_residual": KP_RESIDUAL_LOW,
            "kp_tail_ms": KP_TAIL_MS_LOW,
        }
    w = float(level)
    return {
        "kp_block": KP_BLOCK_LOW + w * (KP_BLOCK - KP_BLOCK_LOW),
        "kp_residual": KP_RESIDUAL_LOW + w * (KP_RESIDUAL - KP_RESIDUAL_LOW),
        "kp_tail_ms": KP_TAIL_MS_LOW + w * (KP_TAIL_MS - KP_TAIL_MS_LOW),
    }


def driver_priority_coefficients() -> dict[str, float]:
    """Priority time-sharing as driver-level time slicing (physics version 5, issue 52): the
    ``prio_block`` and ``prio_residual`` keywords of :class:`AnalyticSpeedModel` for the
    scheduler MuxFlow's PB-time-sharing baseline describes ("more time slices to the
    high-priority workload", AntMan and PAI; ``../shared/seeds/000_*``), as opposed to TGS's
    adaptive rate control that :data:`PRIO_BLOCK` and :data:`PRIO_RESIDUAL` are fitted on.
    The high-priority online context keeps every slice it holds under plain time-slicing
    (``TS_ONLINE_WEIGHT`` of its load, fitted on the time-slicing rows), the low-priority one
    runs in the rest; the online context is not stretched beyond waiting for a low-priority
    slice in flight (the time-slicing latency term, ``TS_SLICE_MS``). No coefficient is new:
    both come from the plain time-slicing fit."""
    return {"prio_block": TS_ONLINE_WEIGHT, "prio_residual": 0.0}


#: Batch dependence of the MPS SM-share curve: a service running batches of ``b`` saturates
#: with ``k(b) = sm_k * (1 + SM_BATCH_BETA / b)`` (``sm_k``, the model's large-batch value). Small
#: batches cannot fill many SMs, so their latency flattens early: on iGniter's V100 solo profile
#: ResNet-50 at batch 1 is 1.71x slower at 20 % SM than at 80 %, at batch 32 3.46x. Fitted by
#: scripts/calibrate.py on igniter_solo (per-network ``sm_k`` and this one global coefficient;
#: median error at batches 1-2: 0.136 with a batch-blind curve, 0.053 with it).
SM_BATCH_BETA = 2.24


def sm_share_k(k: float, batch: int, beta: float = SM_BATCH_BETA) -> float:
    """The SM-share curve's saturation ``k`` for batches of ``batch`` (0: ``k`` itself, the
    large-batch limit used for training and batch-blind callers)."""
    return k * (1.0 + beta / batch) if batch > 0 else k


def sm_share_curve(k: float, s: float) -> float:
    """Saturating speed of a job given a fraction ``s`` of the SMs: ``(1-e^{-ks})/(1-e^{-k})``.

    ``k`` -> 0 is linear (perfectly parallel, bandwidth-free); large ``k`` saturates early
    (the job cannot fill a whole GPU). Equals 1 at ``s = 1``.
    """
    if k < 1e-6:
        return s
    return (1.0 - math.exp(-k * s)) / (1.0 - math.exp(-k))


def mig_effective_fraction(compute_slices: int, mem_slices: int, mem_weight: float) -> float:
    """Effective size of a MIG instance: geometric mix of its SM and memory fractions."""
    return (compute_slices / 7.0) ** (1.0 - mem_weight) * (mem_slices / 8.0) ** mem_weight


#: The modes as module constants (compiled, a module global; ``SharingMode.X`` is a class
#: attribute look-up through the enum's metaclass at every use).
_EXCLUSIVE = SharingMode.EXCLUSIVE
_MPS = SharingMode.MPS
_TIME_SHARING = SharingMode.TIME_SHARING
_MIG = SharingMode.MIG


class AnalyticSpeedModel:
    """Closed-form speed model (the default).

    Per resident ``i`` with duty ``d_i`` (fraction of its solo wall time on the GPU; for an online
    service its load-dependent utilisation). An *offline* resident's rate is its throughput as a
    fraction of solo. An *online* resident's rate is per batch: solo batch time over the batch
    time while sharing (its GPU part is stretched in full, not diluted by its own idle time, which
    is what a request waits for); its load still enters its co-runners' rates as ``d_i``.

    - EXCLUSIVE: ``1``.
    - MPS: ``1 / ((1 - d_i) + d_i / g_i(s_i) * (1 + sum_j d_j (kc * ov_ij + kb * b_i * b_j)))``
      where ``g_i`` is the model's SM-share curve (:func:`sm_share_curve`, its ``k`` set by
      the service's batch size, :func:`sm_share_k`), ``ov_ij`` the
      fraction of i's SM limit that j's overlaps (0 for disjoint splits, 1 when both use 100 %;
      ``s_j`` for an unlimited i beside a j limited to ``s_j``), ``b`` the models' bandwidth
      intensity; online residents take ``d_i = 1``.
      On GPUs without MPS SM limiting (P100) every ``s`` is taken as 1. Online residents also
      get an extra p99 term (:meth:`latency_terms`). *Kernel-level priority* (an offline
      resident with a lower priority than an online one: Tally, MuxFlow's xCUDA): the offline
      resident gets ``avail = 1 - kp_block * sum_H d_j`` of the GPU (``H``: the higher-priority
      online residents, which are left out of its contention sum), and in the online
      resident's sum it counts ``kp_residual * d_j`` instead of the MPS terms.
    - TIME_SHARING: contexts take turns. Within one priority level, i's GPU part is stretched by
      ``1 + sum_j D_j`` (``D_j = min(1, ts_online_weight * d_j)`` for an online co-runner,
      else ``d_j``) and
      every rate is multiplied by ``1 - context_switch_overhead`` when the level holds >= 2
      contexts. Across levels (priority sharing, TGS-style throttling): a level gets
      ``avail = 1 - sum_higher beta_j d_j`` of the GPU (``beta`` = ``prio_block`` for an online
      higher-priority context, 1 for an offline one), and its contexts are slowed by
      ``1 + prio_residual * sum_lower d_j``. Online batches also wait for the slice
      (:meth:`latency_terms`).
    - MIG: ``h_m(c, m) * (1 - crosstalk * (n - 1))`` with ``h_m`` the model's saturating curve of
      the instance's effective size (:func:`mig_effective_fraction`).
    - MPS with gpulets (GPULet, ATC'22: residents with the same ``Resident.gpulet`` share one SM
      partition in time): ``rate_i = a_i * t_i``. ``a_i`` is i's MPS rate as the partition's
      only client beside the other partitions' residents (the MPS formula above, i's
      partition-mates left out); ``t_i`` is the TIME_SHARING formula above among the
      partition's residents, each entering with its *occupancy of the partition*
      (:meth:`gpulet_occupancy`: its duty at the partition's speed), i.e. the time-sharing
      model applied to the partition's capacity. Online batches wait for both (MPS terms from
      the other partitions, time-slice terms from the partition-mates, :meth:`latency_terms`).

    Args:
        profiles: Model profiles; defaults to ``gpu_sharing_env.physics.zoo.ZOO``.
        kappa_compute: MPS SM-overlap contention coefficient.
        kappa_bw: MPS bandwidth/L2 contention coefficient.
        mig_mem_weight: Weight of memory slices in a MIG instance's effective size.
        mig_crosstalk: Residual slowdown per other MIG instance resident on the GPU.
        context_switch_overhead: Time-slicing throughput loss when contexts of one level share.
        ts_online_weight: Weight of an online co-runner's load in the time-slicing stretch.
        ts_slice_ms: Time-slice length (ms) an online batch may wait for.
        prio_block: Share of a higher-priority online load that blocks lower-priority work.
        prio_residual: Slowdown of a higher-priority context per unit of lower-priority demand.
        mps_tail_ms: Extra p99 (ms, reference GPU) per unit of an MPS co-runner's busy fraction.
        kp_block: Kernel-level priority: share of a higher-priority online load that blocks a
            throttled offline client.
        kp_residual: Kernel-level priority: online slowdown per unit of throttled demand.
        kp_tail_ms: Kernel-level priority: ``mps_tail_ms`` for a throttled co-runner.
        sm_batch_beta: Batch dependence of the MPS SM-share curve (:func:`sm_share_k`).
    """

    def __init__(
        self,
        profiles: Mapping[str, ModelProfile] | None = None,
        *,
        kappa_compute: float = KAPPA_COMPUTE,
        kappa_bw: float = KAPPA_BW,
        mig_mem_weight: float = MIG_MEM_WEIGHT,
        mig_crosstalk: float = MIG_CROSSTALK,
        context_switch_overhead: float = CONTEXT_SWITCH_OVERHEAD,
        ts_online_weight: float = TS_ONLINE_WEIGHT,
        ts_slice_ms: float = TS_SLICE_MS,
        prio_block: float = PRIO_BLOCK,
        prio_residual: float = PRIO_RESIDUAL,
        mps_tail_ms: float = MPS_TAIL_MS,
        kp_block: float = KP_BLOCK,
        kp_residual: float = KP_RESIDUAL,
        kp_tail_ms: float = KP_TAIL_MS,
        sm_batch_beta: float = SM_BATCH_BETA,
    ) -> None:
        if profiles is None:
            from gpu_sharing_env.physics.zoo import ZOO

            profiles = ZOO
        for name, value, lo, hi in (
            ("kappa_compute", kappa_compute, 0.0, math.inf),
            ("kappa_bw", kappa_bw, 0.0, math.inf),
            ("mig_mem_weight", mig_mem_weight, 0.0, 1.0),
            ("mig_crosstalk", mig_crosstalk, 0.0, 0.1),
            ("context_switch_overhead", context_switch_overhead, 0.0, 0.5),
            ("ts_online_weight", ts_online_weight, 0.0, 10.0),
            ("ts_slice_ms", ts_slice_ms, 0.0, 100.0),
            ("prio_block", prio_block, 0.0, 2.0),
            ("prio_residual", prio_residual, 0.0, 10.0),
            ("mps_tail_ms", mps_tail_ms, 0.0, 1000.0),
            ("kp_block", kp_block, 0.0, 2.0),
            ("kp_residual", kp_residual, 0.0, 10.0),
            ("kp_tail_ms", kp_tail_ms, 0.0, 1000.0),
            ("sm_batch_beta", sm_batch_beta, 0.0, 100.0),
        ):
            if not lo <= value <= hi:
                raise ValueError(f"{name}={value}: must be in [{lo}, {hi}]")
        self.profiles: Mapping[str, ModelProfile] = profiles
        self.kappa_compute = kappa_compute
        self.kappa_bw = kappa_bw
        self.mig_mem_weight = mig_mem_weight
        self.mig_crosstalk = mig_crosstalk
        self.context_switch_overhead = context_switch_overhead
        self.ts_online_weight = ts_online_weight
        self.ts_slice_ms = ts_slice_ms
        self.prio_block = prio_block
        self.prio_residual = prio_residual
        self.mps_tail_ms = mps_tail_ms
        self.kp_block = kp_block
        self.kp_residual = kp_residual
        self.kp_tail_ms = kp_tail_ms
        self.sm_batch_beta = sm_batch_beta
        # (bw_intensity, sm_k, mig_k, duty) per model: the hot path reads tuples, not dataclass
        # attributes.
        self._p: dict[str, tuple[float, float, float, float]] = {
            name: (p.bw_intensity, p.sm_k, p.mig_k, p.duty) for name, p in profiles.items()
        }
        self._sm_limit: dict[str, bool] = {}
        self._cache: dict[tuple[object, ...], list[float]] = {}

    # -- protocol ---------------------------------------------------------------------------

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """Exclusive-GPU throughput on ``gpu_type`` relative to V100-16GB (see ``zoo``)."""
        prof = self.profile(model)
        try:
            return prof.solo_speed[gpu_type]
        except KeyError:
            known = ", ".join(prof.solo_speed)
            raise KeyError(f"no solo speed for GPU type {gpu_type!r}; known: {known}") from None

    def batch_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        """Solo latency ``(a + c * batch) / solo_speed`` of one inference batch."""
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}: must be >= 1")
        prof = self.profile(model)
        return (prof.batch_a_ms + prof.batch_c_ms * batch_size) / self.solo_speed(model, gpu_type)

    def rates(self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]) -> list[float]:
        """Each resident's progress rate as a fraction of its solo speed; see the class doc."""
        if not residents or mode is _EXCLUSIVE:
            return self.fresh_rates(gpu_type, mode, residents)
        key = (gpu_type, mode, *residents)
        hit = self._cache.get(key)
        if hit is not None:
            return list(hit)
        out = self.fresh_rates(gpu_type, mode, residents)
        if len(self._cache) >= 65_536:
            self._cache.clear()
        self._cache[key] = out
        return list(out)

    def fresh_rates(
        self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]
    ) -> list[float]:
        """:meth:`rates` computed afresh, without this model's own memo (a new list of the
        same values): for a caller that memoises the answers itself
        (:class:`~gpu_sharing_env.sim.speed.SpeedMemo`), which would otherwise pay for
        hashing every ``Resident`` into a second memo at each of its misses."""
        n = len(residents)
        if n == 0:
            return []
        if mode is _EXCLUSIVE:
            if n != 1:
                raise ValueError(f"EXCLUSIVE mode holds one job, got {n}")
            return [1.0]
        if mode is _MPS:
            for r in residents:  # (``any(...)`` as a loop: compiled, a generator is costly)
                if r.gpulet >= 0:
                    return self._gpulet_rates(gpu_type, residents)
            return self._mps(gpu_type, residents)
        if mode is _TIME_SHARING:
            return self._time_sharing(residents)
        if mode is _MIG:
            return self._mig(residents)
        raise ValueError(f"unknown sharing mode {mode!r}")  # pragma: no cover - exhaustive

    # -- helpers ----------------------------------------------------------------------------

    def profile(self, model: str) -> ModelProfile:
        """The profile of ``model``; raises :class:`UnknownModelError` listing known names."""
        try:
            return self.profiles[model]
        except KeyError:
            known = ", ".join(sorted(self.profiles))
            raise UnknownModelError(f"unknown model {model!r}; known: {known}") from None

    def _params(self, model: str) -> tuple[float, float, float, float]:
        p = self._p.get(model)
        if p is None:
            self.profile(model)  # raises UnknownModelError
            raise AssertionError("unreachable")
        return p

    def _honours_sm_limit(self, gpu_type: str) -> bool:
        ok = self._sm_limit.get(gpu_type)
        if ok is None:
            from gpu_sharing_env.physics.hardware import get_gpu_type

            ok = self._sm_limit[gpu_type] = get_gpu_type(gpu_type).mps_sm_limit
        return ok

    def _mps(self, gpu_type: str, residents: Sequence[Resident]) -> list[float]:
        # One pass over the residents for what the formula reads of each, no generator and no
        # method call per resident (``_throttled`` folded in; ``min``/``max`` of two as the
        # comparisons Python's make; the SM-share curve and its ``k`` inlined from
        # :func:`sm_share_curve` and :func:`sm_share_k`): the same operations in the same order.
        ok = self._sm_limit.get(gpu_type)  # ``_honours_sm_limit``, its memo inlined
        limit = ok if ok is not None else self._honours_sm_limit(gpu_type)
        kc, kb = self.kappa_compute, self.kappa_bw
        kp_block, kp_residual = self.kp_block, self.kp_residual
        beta = self.sm_batch_beta
        min_rate = MIN_RATE
        n = len(residents)
        shares: list[float] = []
        duties: list[float] = []
        params: list[tuple[float, float, float, float]] = []
        online: list[bool] = []
        prio: list[int] = []
        top = None  # ``_throttled``: the highest priority of an online resident
        p_of = self._p
        for i in range(n):
            r = residents[i]
            # ``max(a, b)`` as Python's: ``b if a < b else a``; ``min(a, b)``: ``b if b < a else a``
            if limit:
                x = r.sm_frac
                x = 1e-3 if x < 1e-3 else x
                shares.append(x if x < 1.0 else 1.0)
            else:
                shares.append(1.0)
            x = r.duty
            x = 0.0 if x < 0.0 else x
            duties.append(x if x < 1.0 else 1.0)
            p = p_of.get(r.model)  # ``_params``
            if p is None:
                p = self._params(r.model)
            params.append(p)
            online.append(r.online)
            prio.append(r.priority)
            if r.online and (top is None or r.priority > top):
                top = r.priority
        out = []
        for i in range(n):
            r = residents[i]
            s_i = shares[i]
            b_i = params[i][0]
            online_i = online[i]
            # ``_throttled``: offline, with a lower priority than an online co-resident
            throttled_i = top is not None and not online_i and prio[i] < top
            d_i = 1.0 if online_i else duties[i]  # online: per batch
            contention = 1.0
            avail = 1.0
            for j in range(n):
                if j == i:
                    continue
                if throttled_i and online[j] and prio[j] > prio[i]:
                    avail -= kp_block * duties[j]  # i runs in j's idle time
                    continue
                if (
                    top is not None
                    and not online[j]
                    and prio[j] < top
                    and online_i
                    and prio[i] > prio[j]
                ):  # j throttled
                    contention += kp_residual * duties[j]
                    continue
                # the share of i's SMs that j's limit overlaps (SM ranges of a split start at
                # opposite ends: the overlap of s_i and s_j is s_i + s_j - 1)
                ov = (s_i + shares[j] - 1.0) / s_i
                ov = 0.0 if ov < 0.0 else (1.0 if ov > 1.0 else ov)
                contention += duties[j] * (kc * ov + kb * b_i * params[j][0])
            g = sm_share_curve(sm_share_k(params[i][1], r.batch, beta), s_i)
            if avail <= min_rate:
                out.append(MIN_RATE)
                continue
            rate = 1.0 / ((1.0 - d_i) + d_i * contention / (g * avail))
            out.append(MIN_RATE if rate < min_rate else (1.0 if rate > 1.0 else rate))
        return out

    # -- gpulets (GPULet: temporal sharing inside an MPS partition) ---------------------------

    @staticmethod
    def gpulet_groups(residents: Sequence[Resident]) -> list[list[int]]:
        """Resident indices per SM partition, in first-appearance order (``gpulet`` -1: alone)."""
        groups: dict[int, list[int]] = {}
        for i, r in enumerate(residents):
            groups.setdefault(r.gpulet if r.gpulet >= 0 else -1 - i, []).append(i)
        return list(groups.values())

    def _gpulet_space(self, gpu_type: str, residents: Sequence[Resident]) -> list[float]:
        """``a_i``: each resident's MPS rate as its partition's only client, beside every
        resident of the other partitions."""
        out = [0.0] * len(residents)
        for group in self.gpulet_groups(residents):
            others = [o for j, o in enumerate(residents) if j not in group]
            for i in group:
                out[i] = self._mps(gpu_type, [residents[i], *others])[0]
        return out

    @staticmethod
    def gpulet_occupancy(r: Resident, a: float) -> float:
        """The fraction of its partition's time resident ``r`` keeps busy when it runs there at
        rate ``a`` (:meth:`rates` alone in the partition): an online service's load ``d / a``
        (its batches run ``1 / a`` times longer); an offline job's ``1 - (1 - d) a`` (its GPU
        part ``d`` stretched by the partition, its idle part not). Clipped to [0, 1]."""
        d = min(1.0, max(r.duty, 0.0))
        occ = d / a if r.online else 1.0 - (1.0 - d) * a
        return 0.0 if occ < 0.0 else (1.0 if occ > 1.0 else occ)

    def _gpulet_members(
        self, residents: Sequence[Resident], group: list[int], space: list[float]
    ) -> list[Resident]:
        """The partition's residents as the time-sharing formula takes them: duty = occupancy."""
        return [
            replace(residents[i], duty=self.gpulet_occupancy(residents[i], space[i])) for i in group
        ]

    def _gpulet_rates(self, gpu_type: str, residents: Sequence[Resident]) -> list[float]:
        space = self._gpulet_space(gpu_type, residents)
        out = list(space)
        for group in self.gpulet_groups(residents):
            if len(group) < 2:
                continue
            ts = self._time_sharing(self._gpulet_members(residents, group, space))
            for i, t in zip(group, ts, strict=True):
                rate = space[i] * t
                out[i] = MIN_RATE if rate < MIN_RATE else rate
        return out

    def gpulet_slices(self, gpu_type: str, residents: Sequence[Resident]) -> list[float]:
        """Each resident's time slice of its SM partition: its occupancy
        (:meth:`gpulet_occupancy`), scaled down in proportion when the partition's residents
        together ask for more than all of its time (the time-sharing stretch then slows every
        one of them). A partition's slices sum to at most 1. 1 for a resident alone."""
        space = self._gpulet_space(gpu_type, residents)
        out = [1.0] * len(residents)
        for group in self.gpulet_groups(residents):
            if len(group) < 2:
                continue
            occ = [self.gpulet_occupancy(residents[i], space[i]) for i in group]
            total = sum(occ)
            scale = 1.0 / total if total > 1.0 else 1.0
            for i, o in zip(group, occ, strict=True):
                out[i] = o * scale
        return out

    def _time_sharing(self, residents: Sequence[Resident]) -> list[float]:
        n = len(residents)
        duties = [min(1.0, max(r.duty, 0.0)) for r in residents]
        # an online context at utilisation u holds the GPU for min(1, w * u) of the time
        demand = [
            min(1.0, self.ts_online_weight * d) if r.online else d
            for r, d in zip(residents, duties, strict=True)
        ]
        levels = sorted({r.priority for r in residents}, reverse=True)
        out = [0.0] * n
        avail = 1.0
        for k, prio in enumerate(levels):
            group = [i for i, r in enumerate(residents) if r.priority == prio]
            keep = 1.0 - self.context_switch_overhead if len(group) > 1 else 1.0
            lower = sum(duties[i] for i, r in enumerate(residents) if r.priority < prio)
            resid = 1.0 + self.prio_residual * lower if k < len(levels) - 1 else 1.0
            busy = sum(demand[i] for i in group)
            for i in group:
                d_i = 1.0 if residents[i].online else duties[i]  # online: per batch
                stretch = (1.0 + busy - demand[i]) * resid
                if avail <= MIN_RATE:
                    rate = MIN_RATE
                else:
                    rate = keep / ((1.0 - d_i) + d_i * stretch / avail)
                # (1 - d) + d can round below 1: clamp into (0, 1]
                out[i] = MIN_RATE if rate < MIN_RATE else (1.0 if rate > 1.0 else rate)
            block = sum(
                (self.prio_block if residents[i].online else 1.0) * duties[i] for i in group
            )
            avail = max(0.0, avail - block)
        return out

    def latency_terms(
        self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]
    ) -> list[tuple[float, float]]:
        """Per resident ``(wait_ms, tail_ms)``: mean time an online batch waits before it runs
        (added to its batch time) and the extra wait at the p99 (added to the p99 only): for the
        co-runner's time slice (TIME_SHARING) or its kernels in flight (MPS). ``(0, 0)`` for
        offline residents and in the other modes."""
        n = len(residents)
        out = [(0.0, 0.0)] * n
        if n < 2 or mode not in (SharingMode.TIME_SHARING, SharingMode.MPS):
            return out
        if mode is SharingMode.MPS and any(r.gpulet >= 0 for r in residents):
            return self._gpulet_terms(gpu_type, residents)
        duties = [min(1.0, max(r.duty, 0.0)) for r in residents]
        throttled = _throttled(residents) if mode is SharingMode.MPS else [False] * n
        for i, r in enumerate(residents):
            if not r.online:
                continue
            if mode is SharingMode.TIME_SHARING:
                # a batch finds a co-runner's slice running with probability its busy fraction
                # (a lower-priority kernel in flight is not preempted either) and waits half a
                # slice on average, a whole one at the tail
                busy = min(1.0, sum(duties[j] for j in range(n) if j != i))
                half = busy * self.ts_slice_ms / 2.0
                out[i] = (half, half)
            else:
                # only where j's SM limit overlaps i's: a disjoint split leaves i's kernels SMs
                # to start on (iGniter's disjoint pairs fit with no wait at all)
                limit = self._honours_sm_limit(gpu_type)
                s_i = min(1.0, max(r.sm_frac, 1e-3)) if limit else 1.0
                tail = tail_kp = 0.0
                for j, o in enumerate(residents):
                    if j == i:
                        continue
                    s_j = min(1.0, max(o.sm_frac, 1e-3)) if limit else 1.0
                    ov = min(1.0, max(0.0, (s_i + s_j - 1.0) / s_i))
                    w = ov * duties[j] / self.solo_speed(o.model, gpu_type)
                    if throttled[j] and r.priority > o.priority:
                        tail_kp += w
                    else:
                        tail += w
                half = (self.mps_tail_ms * tail + self.kp_tail_ms * tail_kp) / 2.0
                out[i] = (half, half)
        return out

    def _gpulet_terms(
        self, gpu_type: str, residents: Sequence[Resident]
    ) -> list[tuple[float, float]]:
        """:meth:`latency_terms` with gpulets: an online batch waits for the kernels of the
        other partitions (the MPS terms, its partition-mates left out) and for its
        partition-mates' time slices (the TIME_SHARING terms at their occupancies)."""
        n = len(residents)
        out = [(0.0, 0.0)] * n
        space = self._gpulet_space(gpu_type, residents)
        plain = [replace(r, gpulet=-1) for r in residents]  # one client per partition
        for group in self.gpulet_groups(residents):
            others = [o for j, o in enumerate(plain) if j not in group]
            ts_terms = (
                self.latency_terms(
                    gpu_type,
                    SharingMode.TIME_SHARING,
                    self._gpulet_members(residents, group, space),
                )
                if len(group) > 1
                else [(0.0, 0.0)] * len(group)
            )
            for i, (tw, tt) in zip(group, ts_terms, strict=True):
                mw, mt = self.latency_terms(gpu_type, SharingMode.MPS, [plain[i], *others])[0]
                out[i] = (mw + tw, mt + tt)
        return out

    def _mig(self, residents: Sequence[Resident]) -> list[float]:
        w = self.mig_mem_weight
        crosstalk = 1.0 - self.mig_crosstalk * (len(residents) - 1)
        out = []
        for r in residents:
            if not (1 <= r.mig_compute_slices <= 7 and 1 <= r.mig_mem_slices <= 8):
                raise ValueError(
                    f"MIG resident {r.model!r} needs 1..7 compute and 1..8 memory slices, got "
                    f"{r.mig_compute_slices}/{r.mig_mem_slices}"
                )
            e = mig_effective_fraction(r.mig_compute_slices, r.mig_mem_slices, w)
            h = sm_share_curve(self._params(r.model)[2], min(1.0, e))
            out.append(max(MIN_RATE, h * crosstalk))
        return out


def _throttled(residents: Sequence[Resident]) -> list[bool]:
    """Which residents are kernel-throttled under MPS: offline ones with a lower priority than
    an online co-resident (MPS with equal priorities, the usual case, throttles nobody)."""
    top = max((r.priority for r in residents if r.online), default=None)
    if top is None:
        return [False] * len(residents)
    return [not r.online and r.priority < top for r in residents]


class TableSpeedModel:
    """Measured pairwise slowdowns looked up from a table, falling back to another model.

    ``table[(model, corunner, mode)]`` is the *slowdown* of ``model`` when sharing a GPU with
    one ``corunner`` in ``mode`` (a :class:`SharingMode` name, case-insensitive): shared step
    time over solo step time, so the rate is ``1 / slowdown`` (capped at 1). With several
    co-runners the per-pair rates multiply (independent contention). A resident with any
    co-runner missing from the table, and every EXCLUSIVE or MIG placement, uses ``fallback``.
    The table is measured at the default SM share; ``sm_frac`` is not applied on top.
    """

    def __init__(self, fallback: SpeedModel, table: Mapping[tuple[str, str, str], float]) -> None:
        self.fallback = fallback
        self.table: dict[tuple[str, str, str], float] = {}
        for (model, corunner, mode), slowdown in table.items():
            mode_name = _mode_name(mode)
            if not (math.isfinite(slowdown) and slowdown > 0):
                raise ValueError(f"slowdown for {(model, corunner, mode)}: must be finite, > 0")
            self.table[(model, corunner, mode_name)] = float(slowdown)

    @classmethod
    def from_csv(cls, path: str | Path, fallback: SpeedModel | None = None) -> TableSpeedModel:
        """Read a CSV with header ``model,corunner,mode,slowdown``.

        Raises:
            ValueError: Missing columns or a bad row; the message names the file, the line and
                the field.
        """
        path = Path(path)
        table: dict[tuple[str, str, str], float] = {}
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            need = ("model", "corunner", "mode", "slowdown")
            missing = [c for c in need if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
            for line, row in enumerate(reader, start=2):
                for col in ("model", "corunner"):
                    if not (row[col] or "").strip():
                        raise ValueError(f"{path}:{line}: field {col!r} is empty")
                try:
                    mode = _mode_name(row["mode"] or "")
                except ValueError as exc:
                    raise ValueError(f"{path}:{line}: field 'mode': {exc}") from None
                try:
                    slowdown = float(row["slowdown"] or "")
                except ValueError:
                    raise ValueError(
                        f"{path}:{line}: field 'slowdown': {row['slowdown']!r} is not a number"
                    ) from None
                if not (math.isfinite(slowdown) and slowdown > 0):
                    raise ValueError(f"{path}:{line}: field 'slowdown': must be finite, > 0")
                table[(row["model"].strip(), row["corunner"].strip(), mode)] = slowdown
        return cls(fallback if fallback is not None else AnalyticSpeedModel(), table)

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """Delegated to the fallback model."""
        return self.fallback.solo_speed(model, gpu_type)

    def batch_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        """Delegated to the fallback model."""
        return self.fallback.batch_latency_ms(model, gpu_type, batch_size)

    def rates(self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]) -> list[float]:
        """Table rates where every co-runner pair is measured, the fallback's elsewhere."""
        out = self.fallback.rates(gpu_type, mode, residents)
        if mode in (SharingMode.EXCLUSIVE, SharingMode.MIG) or len(residents) < 2:
            return out
        for i, r in enumerate(residents):
            rate = 1.0
            for j, other in enumerate(residents):
                if j == i:
                    continue
                slowdown = self.table.get((r.model, other.model, mode.name))
                if slowdown is None:
                    break
                rate /= slowdown
            else:
                out[i] = min(1.0, max(MIN_RATE, rate))
        return out


def _mode_name(mode: str | SharingMode) -> str:
    if isinstance(mode, SharingMode):
        return mode.name
    name = mode.strip().upper()
    if name not in SharingMode.__members__:
        raise ValueError(f"{mode!r} is not one of {', '.join(SharingMode.__members__)}")
    return name
