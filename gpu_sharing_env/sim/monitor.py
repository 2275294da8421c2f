"""MuxFlow's SysMonitor and xCUDA (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`).

:class:`Monitor` owns each GPU's SysMonitor state (``health``) and the thresholds
(:class:`~gpu_sharing_env.sim.online.MonitorThresholds`); at every load tick the online load
(:mod:`~gpu_sharing_env.sim.ticks`) hands it each running service with its GPU's usage row, from
which it reads the device metrics (:meth:`Monitor.metrics`: utilisation, SM activity, the SM
clock as xCUDA models it, memory) and steps the state machine (:meth:`Monitor.check`); with
kernel-level priority deployed it lets xCUDA set the offline clients' launch fraction
(:meth:`Monitor.xcuda`). It evicts through the lifecycle and re-rates through the rates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.sim.constants import _HEALTHY
from gpu_sharing_env.sim.online import (
    XCUDA_STEPS,
    DeviceMetrics,
    Health,
    MonitorThresholds,
    kernel_speed,
    next_health,
)
from gpu_sharing_env.sim.rates import Rates
from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.sim.usage import GpuRow

if TYPE_CHECKING:
    from gpu_sharing_env.sim.lifecycle import Lifecycle


class Monitor:
    """Per-GPU SysMonitor states and xCUDA's launch control."""

    __slots__ = ("_cluster", "_jobs", "_lifecycle", "_rates", "health", "thresholds")

    def __init__(self, cluster: Cluster, rates: Rates, thresholds: MonitorThresholds) -> None:
        self._cluster = cluster
        self._rates = rates
        #: SysMonitor / xCUDA thresholds (a constructor argument of ``Simulator``).
        self.thresholds = thresholds
        self._lifecycle: Lifecycle | None = None
        self._jobs: dict[int, JobState] = {}
        #: Per GPU: its SysMonitor state (a :class:`~gpu_sharing_env.sim.online.Health` value).
        self.health = np.zeros(cluster.n_gpus, dtype=np.int64)

    def connect(self, lifecycle: Lifecycle) -> None:
        """The lifecycle that evicts (built after this component)."""
        self._lifecycle = lifecycle

    def reset(self, jobs: dict[int, JobState]) -> None:
        self._jobs = jobs
        self.health = np.zeros(self._cluster.n_gpus, dtype=np.int64)

    def metrics(self, g: int, st: JobState, frac: float, row: GpuRow) -> DeviceMetrics:
        """The device metrics of GPU ``g`` hosting running service ``st`` (sharing fraction
        ``frac``) with usage row ``row`` (``FleetUsage``: utilisation, SM activity, ...)."""
        sv = st.serving
        clock = kernel_speed(sv.solo_batch_ms, sv.alone_frac, frac, sv.wait_ms)
        mem = self._cluster.mem_true.item(g) / self._rates.mem_cap(g)
        return DeviceMetrics(row[0], row[1], clock, mem)

    def check(self, g: int, st: JobState, frac: float, row: GpuRow) -> bool:
        """MuxFlow's SysMonitor on GPU ``g`` hosting running online service ``st`` (its sharing
        fraction ``frac``), the GPU's usage row ``row``: one step of the state machine on the
        device metrics (:meth:`metrics`, ``online.next_health``). True if what a scheduler
        could decide changed."""
        c = self._cluster
        m = self.metrics(g, st, frac, row)
        new = next_health(Health(self.health.item(g)), m, self.thresholds)
        if new is Health.HEALTHY and self.health.item(g) == _HEALTHY and c.healthy.item(g):
            # HEALTHY stays HEALTHY: nothing changes unless an offline resident is still
            # throttled (then the general path below resets it).
            jobs = self._jobs
            for j in c.residents[g]:
                r = jobs[j]
                if r.throttle != 1.0 and not r.spec.online:
                    break
            else:
                return False
        self.health[g] = int(new)
        healthy = new is Health.HEALTHY
        changed = bool(c.healthy[g] != healthy)
        if changed:
            c.set_healthy(g, healthy)
        rates = self._rates
        offline = [r for r in rates.residents(g) if not r.spec.online]
        if new is Health.UNHEALTHY:
            assert self._lifecycle is not None
            for r in offline:
                self._lifecycle.evict(r.spec.job_id)
            return bool(offline) or changed
        if self.kernel_throttled(g, offline):
            # One mechanism throttles (physics version 4): with kernel-level priority deployed
            # (xCUDA) the offline client's launches are held back by xCUDA's own feedback
            # (:meth:`xcuda`), MuxFlow's workload-level protection; SysMonitor's OVERLOADED
            # state then only closes the GPU to new offline work (``healthy``), and it evicts
            # (UNHEALTHY) only if the service is still slowed by what remains.
            return changed
        throttle = self.thresholds.sysmon_throttle if new is Health.OVERLOADED else 1.0
        if any(r.throttle != throttle for r in offline):
            for r in offline:
                rates.accrue(r)
                r.throttle = throttle
            rates.refresh([g])
        return changed

    def kernel_throttled(self, g: int, offline: list[JobState]) -> bool:
        """Whether kernel-level priority already throttles every offline resident of ``g``:
        the mechanism is deployed, the GPU shares by MPS and each offline resident has a lower
        priority than an online co-resident (as ``Rates.gpu_fractions`` keys them for the speed
        model)."""
        if not offline:
            return False
        res = self._rates.residents(g)
        gated = dict(zip((r.spec.job_id for r in res), self._rates.gated(g, res), strict=True))
        return all(gated[r.spec.job_id] for r in offline)

    def xcuda(self, st: JobState) -> None:
        """xCUDA's launch control on the GPU of online service ``st`` (MuxFlow Sec. 4.1;
        physics version 5, ``sim.online.XCUDA_CLOCK_MIN``): the offline clients' launch
        fraction (``throttle``) becomes the largest of ``XCUDA_STEPS`` at which the service's
        kernel speed, the time of its batch alone on its allocation over its time beside them
        (``(L / alone) / (L / f + wait)``), stays at or above ``thresholds.xcuda_clock_min``:
        launches are delayed while that speed (the device metric standing for the SM clock) is
        low and go back up while the GPU has room. xCUDA acts per kernel, far faster than a
        load tick, so the loop is taken at its fixed point for the tick's load."""
        g = st.gpus[0]
        rates = self._rates
        res = rates.residents(g)
        offline = [r for r in res if not r.spec.online]
        if not offline or not self.kernel_throttled(g, offline):
            return
        target = self.thresholds.xcuda_clock_min
        old = [r.throttle for r in offline]
        best = XCUDA_STEPS[-1]
        sv = st.serving
        for x in XCUDA_STEPS:
            for r in offline:
                r.throttle = x
            rates.gpu_fractions(g, res)  # sets ``frac``, ``serving.wait_ms``, ``.alone_frac``
            if kernel_speed(sv.solo_batch_ms, sv.alone_frac, st.frac[g], sv.wait_ms) >= target:
                best = x
                break
        for r, t in zip(offline, old, strict=True):
            r.throttle = t
        if all(t == best for t in old):
            rates.gpu_fractions(g, res)  # as they were
            return
        for r in offline:
            rates.accrue(r)
            r.throttle = best
        rates.refresh([g])
