"""Online services: latency as a function of load, speed and interference; SysMonitor.

**Latency model.** A service processes batches of ``b`` requests; one batch takes
``L = L_solo / f`` where ``L_solo`` is the solo, exclusive batch latency on the GPU type (speed
model) and ``f`` the service's current sharing fraction (SM share, interference, turn-taking).
With request rate ``λ`` the utilisation is ``ρ = λ·L/b``. Waiting time follows Kingman's
heavy-traffic approximation for a G/G/1 queue with deterministic-like service: a request waits
with probability ``ρ`` and then exponentially with mean ``m = L / (2(1-ρ))``. Hence

* mean latency ``L + ρ·m``,
* p99 latency ``L + m·ln(100ρ)`` (when ``ρ > 0.01``, else ``L``),
* the fraction of requests within the SLO ``S``: ``1 - ρ·exp(-(S-L)/m)`` for ``S > L``, else 0.

An unstable queue (``ρ >= 1``) misses the SLO for every request. This is the "queueing model is
fine" of DESIGN.md: it reproduces the knee of latency-vs-load curves that MuxFlow and GPULet
plan around, at the cost of per-request detail.

**SysMonitor** (MuxFlow, Sec. 4.1: "a state machine ... each state has a set of metric thresholds
for GPU utilisation, SM activity, SM clock and GPU memory usage; the thresholds are chosen
empirically; offline work is only scheduled to healthy GPUs"). The simulator reads, per GPU
hosting a running service, the device metrics it produces (:class:`DeviceMetrics`): GPU
utilisation and SM activity (the GPU's usage row, from the residents' duties and SM shares),
the SM clock as xCUDA models it (the service's kernel speed, :func:`kernel_speed`) and memory
used over capacity. States (:func:`next_health`): UNHEALTHY (offline work evicted) when memory
is used up or the clock is below ``sysmon_clock_evict``; OVERLOADED (offline work throttled)
when the clock is below ``sysmon_clock_throttle``; BUSY (no new offline work) when utilisation
or SM activity reaches ``sysmon_busy``; HEALTHY otherwise, and back
to HEALTHY from OVERLOADED or UNHEALTHY only once the clock is at ``sysmon_clock_recover``
(hysteresis). The paper has five states (their names are in a figure the notes do not carry);
the simulator keeps the four it can act on. Until 2026-11-28 the signal was the service's
latency slowdown (and up to physics version 1 its p99 over the SLO).

**xCUDA** (MuxFlow Sec. 4.1, physics version 5; ``sim.monitor``): where an offline client is
kernel-throttled (the ``kernel_priority`` mechanism), a feedback loop on a device metric sets its
launch fraction at every load tick: the largest of :data:`XCUDA_STEPS` at which the service's
kernel speed stays at or above ``xcuda_clock_min`` (:data:`XCUDA_CLOCK_MIN`). While xCUDA holds
the launches, SysMonitor's OVERLOADED state only closes the GPU to new offline work.

**Extra terms** (physics version 2, ``interference.AnalyticSpeedModel.latency_terms``): under
time-slicing a batch first waits for a co-runner's time slice (``wait_ms``, added to ``L``);
under MPS a co-runner's kernels in flight lengthen the tail (``tail_ms``, added to the p99 and
taken off the SLO headroom of the attainment).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

#: Latency reported for an unstable queue, as a multiple of the SLO.
UNSTABLE_LATENCY_X_SLO = 10.0


@dataclass(frozen=True, slots=True)
class LatencyStats:
    mean_ms: float
    p99_ms: float
    attainment: float  # fraction of requests within SLO
    rho: float


def latency(batch_ms: float, rps: float, batch_size: int, slo_ms: float) -> LatencyStats:
    """Latency statistics of a service (see module docstring)."""
    rho = rps * batch_ms / 1000.0 / batch_size
    if rho >= 1.0:
        cap = UNSTABLE_LATENCY_X_SLO * slo_ms
        return LatencyStats(cap, cap, 0.0, rho)
    m = batch_ms / (2.0 * (1.0 - rho))
    mean = batch_ms + rho * m
    p99 = batch_ms + (m * math.log(100.0 * rho) if rho > 0.01 else 0.0)
    att = 1.0 - rho * math.exp(-(slo_ms - batch_ms) / m) if slo_ms > batch_ms else 0.0
    return LatencyStats(mean, p99, max(0.0, att), rho)


def latency_tuple(
    batch_ms: float, rps: float, batch_size: int, slo_ms: float
) -> tuple[float, float, float]:
    """``(mean_ms, p99_ms, attainment)`` of :func:`latency` (the same arithmetic, no object)."""
    rho = rps * batch_ms / 1000.0 / batch_size
    if rho >= 1.0:
        cap = UNSTABLE_LATENCY_X_SLO * slo_ms
        return cap, cap, 0.0
    m = batch_ms / (2.0 * (1.0 - rho))
    p99 = batch_ms + (m * math.log(100.0 * rho) if rho > 0.01 else 0.0)
    att = 1.0 - rho * math.exp(-(slo_ms - batch_ms) / m) if slo_ms > batch_ms else 0.0
    return batch_ms + rho * m, p99, max(0.0, att)


#: xCUDA's feedback (MuxFlow Sec. 4.1, physics version 5): "when the SM clock is low we delay the
#: offline workload's kernel launches; when GPU utilisation is low we launch more kernels". The
#: simulator has no clock model; the device metric it reads instead is the service's *kernel
#: speed*: the time of one of its batches alone on its allocation over the time it takes beside
#: the offline client (``(L/alone) / (L/f + wait)``: 1 when nothing slows it, lower as the
#: co-runner's kernels stretch it or make it wait), what a dropping SM clock does to the service.
#: xCUDA keeps the largest offline launch fraction of :data:`XCUDA_STEPS` (launch more while the
#: GPU has room) at which that speed stays at or above this value (delay launches when it drops).
#: MuxFlow's thresholds are unpublished ("chosen empirically"): 0.9 is an ASSUMPTION in the spirit
#: of SysMonitor's BUSY state at a 1.1x slowdown; ``gsg reproduce --sweep xcuda_clock_min=...``
#: shows the claims against it (documented sweep 0.8-0.95, docs/fidelity.md).
XCUDA_CLOCK_MIN = 0.9

#: The launch fractions xCUDA chooses among (largest first): the share of its solo kernel launches
#: an offline client issues, applied like SysMonitor's throttle (``JobState.throttle``).
XCUDA_STEPS = (1.0, 0.8, 0.6, 0.45, 0.3, 0.2, 0.1, 0.05)


class Health(enum.IntEnum):
    HEALTHY = 0
    BUSY = 1
    OVERLOADED = 2
    UNHEALTHY = 3


#: SysMonitor's central thresholds (MuxFlow Sec. 4.1: "chosen empirically", none printed; each
#: a sweep parameter of ``gsg reproduce``, ``fidelity/muxflow.py``; docs/fidelity.md). Where each
#: value comes from:
#:
#: * BUSY at 0.6 GPU utilisation or SM activity: MuxFlow's measurement of its online GPUs
#:   (Sec. 2, Fig. 2: over 99 % below 60 % GPU utilisation and SM activity), read as the level
#:   above which a GPU is busier than its online fleet ever is (a GPU with no room left).
#: * OVERLOADED below a clock (kernel speed) of 1 / 1.2: the paper's bound on the services'
#:   slowdown under MuxFlow ("less than 20 %", Sec. 6.2) as a bound on their batches.
#: * UNHEALTHY below 1 / 1.5: the slowdown the paper reports for unprotected time-sharing ("up to
#:   50 %", Sec. 6.2): a service as slow as with no protection at all. UNHEALTHY, too, at memory
#:   used up (1.0 of the capacity: the next allocation fails, ``FaultCause.OOM``; xCUDA's memory
#:   quota, Sec. 4.1, has the same aim).
#: * Recovery at 1 / 1.05 and the throttle's launch share 0.5: ASSUMPTIONS kept from the
#:   latency-based monitor (no figure; not swept in the claims' runs).
SYSMON_BUSY = 0.6
SYSMON_CLOCK_THROTTLE = 1.0 / 1.2
SYSMON_CLOCK_EVICT = 1.0 / 1.5
SYSMON_CLOCK_RECOVER = 1.0 / 1.05
SYSMON_MEM_EVICT = 1.0


@dataclass(frozen=True, slots=True)
class MonitorThresholds:
    """SysMonitor's metric thresholds (:func:`next_health`, module docstring) and xCUDA's
    feedback target. A field's name is its ``gsg reproduce --sweep`` parameter."""

    sysmon_busy: float = SYSMON_BUSY
    """BUSY from this GPU utilisation (fraction of time a kernel runs) or SM activity (one
    value: the paper's figure is the same for both)."""
    sysmon_clock_throttle: float = SYSMON_CLOCK_THROTTLE
    """OVERLOADED below this SM clock (the service's kernel speed, :func:`kernel_speed`)."""
    sysmon_clock_evict: float = SYSMON_CLOCK_EVICT
    """UNHEALTHY below this SM clock."""
    sysmon_clock_recover: float = SYSMON_CLOCK_RECOVER
    """From OVERLOADED or UNHEALTHY, HEALTHY again only at or above this clock (else BUSY)."""
    sysmon_mem_evict: float = SYSMON_MEM_EVICT
    """UNHEALTHY from this share of the GPU's memory in use (its residents' true footprint)."""
    sysmon_throttle: float = 0.5
    """OVERLOADED's launch share for offline work SysMonitor throttles (half the GPU time)."""
    xcuda_clock_min: float = XCUDA_CLOCK_MIN
    """xCUDA's feedback target (physics version 5, :data:`XCUDA_CLOCK_MIN`)."""


@dataclass(frozen=True, slots=True)
class DeviceMetrics:
    """What SysMonitor reads of one GPU at a load tick (module docstring)."""

    util: float
    """GPU utilisation (the usage row's: residents' duties, offline ones at their fraction)."""
    sm: float
    """SM activity (the same, weighted by each resident's SM share)."""
    clock: float
    """The SM clock as xCUDA reads it: the hosted service's kernel speed (:func:`kernel_speed`)."""
    mem: float
    """Memory in use over capacity (the residents' true footprint; above 1 when over-committed)."""


def kernel_speed(solo_ms: float, alone_frac: float, frac: float, wait_ms: float) -> float:
    """A service's kernel speed (the device metric standing for the SM clock, :data:`XCUDA_CLOCK_MIN`):
    the time of its batch alone on its allocation (``solo_ms / alone_frac``) over its time
    beside its co-runners (``solo_ms / frac + wait_ms``); 1 when nothing slows it."""
    if frac == alone_frac and wait_ms == 0.0:
        return 1.0
    return (solo_ms / alone_frac) / (solo_ms / frac + wait_ms)


def next_health(current: Health, m: DeviceMetrics, th: MonitorThresholds) -> Health:
    """One transition of the SysMonitor state machine on GPU metrics ``m``."""
    if m.mem >= th.sysmon_mem_evict or m.clock < th.sysmon_clock_evict:
        return Health.UNHEALTHY
    if m.clock < th.sysmon_clock_throttle:
        return Health.OVERLOADED
    if m.util >= th.sysmon_busy or m.sm >= th.sysmon_busy:
        return Health.BUSY
    if current >= Health.OVERLOADED and m.clock < th.sysmon_clock_recover:
        return Health.BUSY  # not yet recovered
    return Health.HEALTHY
