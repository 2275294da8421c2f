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

**SysMonitor** (MuxFlow, Sec. 4.1: a per-GPU state machine with metric thresholds; offline work
only goes to healthy GPUs). States by the online service's *slowdown*: its mean latency over the
mean latency it would have alone at the current load (MuxFlow's rule: protect the online
service's solo performance, not a possibly lenient SLO). HEALTHY below ``busy_at``; BUSY (no new
offline work) from ``busy_at``; OVERLOADED (offline work throttled) from ``throttle_at``;
UNHEALTHY (offline work evicted) from ``evict_at``; back to HEALTHY only below ``recover_at``
(hysteresis). MuxFlow's five states also watch SM clock and memory; this model keeps the
latency signal. (Up to version 1 of the physics the signal was p99 over the SLO.)

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


@dataclass(frozen=True, slots=True)
class MonitorThresholds:
    """Slowdown thresholds of the SysMonitor state machine (mean latency over solo mean latency
    at the current load). MuxFlow keeps online latency within 20 % of solo (Sec. 6.2): OVERLOADED
    from 1.2. Its thresholds were chosen empirically and are not published: BUSY from 1.1,
    UNHEALTHY from 1.5 and recovery below 1.05 are assumptions of the same spirit."""

    busy_at: float = 1.1
    throttle_at: float = 1.2
    evict_at: float = 1.5
    recover_at: float = 1.05
    throttle_factor: float = 0.5  # offline kernel launches delayed: half the GPU time
    xcuda_clock_min: float = XCUDA_CLOCK_MIN
    """xCUDA's feedback target (physics version 5, :data:`XCUDA_CLOCK_MIN`)."""


def next_health(current: Health, slowdown: float, th: MonitorThresholds) -> Health:
    """One transition of the SysMonitor state machine."""
    r = slowdown
    if r >= th.evict_at:
        return Health.UNHEALTHY
    if r >= th.throttle_at:
        return Health.OVERLOADED
    if r >= th.busy_at:
        return max(current, Health.BUSY) if current != Health.HEALTHY else Health.BUSY
    if current != Health.HEALTHY and r >= th.recover_at:
        return Health.BUSY
    return Health.HEALTHY
