"""The online load (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`): load ticks
(AR(1) noise), SLO accounting and the tick's hand-offs to SysMonitor and xCUDA
(:mod:`~gpu_sharing_env.sim.monitor`), the fragmentation sample and the timeseries row
(:mod:`~gpu_sharing_env.sim.usage`).

:class:`OnlineLoad` owns the noise stream and its buffer, the online services that arrived and
their live list (memoised on ``JobTable.status_version``) and the count of service-ticks. It
writes the load fields of a ``JobState``'s ``serving`` record (``noise_z``, ``rps``, ``duty``,
``latency_ms``, ``p99_ms``) and the request accumulators of the episode's ``Accumulator``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

try:  # compiled (gpu_sharing_env._compile): C types for tick's locals; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]
if cython.compiled:  # C's exp and log: the same libm functions math's call
    from cython.cimports.libc.math import exp, log, rint
else:
    from math import exp, log  # type: ignore[assignment]

    # ``round(x) * step`` of a finite float is ``rint(x) * step`` (ties to even, exact below
    # 2**53): C's rint when compiled, without a Python call and an int per service and tick.
    rint = round

from gpu_sharing_env.config import MechanismConfig
from gpu_sharing_env.sim.constants import (
    _NOISE_CHUNK,
    _NOISE_SCALE,
    _QUEUED,
    _RUNNING,
    DUTY_STEP,
    NOISE_AR,
)
from gpu_sharing_env.sim.jobs import JobTable
from gpu_sharing_env.sim.monitor import Monitor
from gpu_sharing_env.sim.online import UNSTABLE_LATENCY_X_SLO
from gpu_sharing_env.sim.rates import Rates

if cython.compiled:  # the extension types (state.pxd, accumulator.pxd): C field reads
    from cython.cimports.gpu_sharing_env.sim.accumulator import Accumulator
    from cython.cimports.gpu_sharing_env.sim.state import JobState, ServingState
    from cython.cimports.gpu_sharing_env.workload.job import wave_rps  # (a C call)
else:
    from gpu_sharing_env.sim.accumulator import Accumulator
    from gpu_sharing_env.sim.state import JobState, ServingState
    from gpu_sharing_env.workload.job import wave_rps
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.usage import FleetUsage

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator


class _TickConsts:
    """What ``OnlineLoad.tick`` reads of a live service's (immutable) spec: its state, phase,
    period, base rate, ``peak_rps - base_rps`` (the same float at every tick, so computed
    once), noise fraction, batch size (the placement's, ``Decision.batch_size``, or the
    service's) and SLO. Compiled, an extension type (``ticks.pxd``) whose numbers are the C
    doubles the tick's typed loops read: no tuple unpacked and no float converted per service
    and tick (the tick converted each to a C double, so the values are the same). ``spec`` and
    ``bsz`` are the spec and the placement's batch size (``serving.batch_size``) they were
    read from: ``OnlineLoad.live`` keeps a record while both are the same objects."""

    __slots__ = (
        "base", "batch", "bsz", "noise_frac", "period", "phase", "slo_ms", "span", "spec", "st",
    )  # fmt: skip

    def __init__(self, st: JobState) -> None:
        spec = st.spec
        svc = spec.service
        assert svc is not None
        base = svc.base_rps
        self.st = st
        self.spec = spec
        self.bsz = st.serving.batch_size
        self.phase = svc.phase_s
        self.period = svc.period_s
        self.base = base
        self.span = svc.peak_rps - base
        self.noise_frac = svc.noise_frac
        self.batch = st.effective_batch_size
        self.slo_ms = svc.slo_ms


class OnlineLoad:
    """Online services' load ticks and SLO accounting."""

    __slots__ = (
        "_arrived",
        "_kernel_priority",
        "_live",
        "_live_c",
        "_live_version",
        "_noise_buf",
        "_noise_i",
        "_protection",
        "_rates",
        "_rng",
        "_sim",
        "_table",
        "_tick_s",
        "_usage",
        "mechanisms",
        "monitor",
        "n_service_ticks",
    )

    def __init__(
        self,
        sim: Simulator,
        table: JobTable,
        rates: Rates,
        usage: FleetUsage,
        monitor: Monitor,
        tick_s: float,
        mechanisms: MechanismConfig,
    ) -> None:
        self._sim = sim
        self._table = table
        self._rates = rates
        self._usage = usage
        #: SysMonitor and xCUDA, which the tick hands each running service and its GPU's row.
        self.monitor = monitor
        self._tick_s = tick_s
        #: The cluster mechanisms in force (``protection``, ``kernel_priority``).
        self.mechanisms = mechanisms
        #: Their two flags the tick reads (compiled, C flags: no attribute reads a tick).
        self._kernel_priority = bool(mechanisms.kernel_priority)
        self._protection = bool(mechanisms.protection)
        self._rng = np.random.default_rng(0)
        self._noise_buf: list[float] = []
        self._noise_i = 0
        #: Online services that arrived and have not ended, in arrival order.
        self._arrived: list[JobState] = []
        self._live: list[JobState] = []
        self._live_c: list[_TickConsts] = []
        self._live_version = -1
        #: Load ticks x live services at each (the online model's work; ``gsg bench``).
        self.n_service_ticks = 0

    def reset(self, rng: np.random.Generator, mechanisms: MechanismConfig) -> None:
        self.set_mechanisms(mechanisms)
        self._rng = rng
        self._noise_buf = []
        self._noise_i = 0
        self._arrived = []
        self._live = []
        self._live_c = []
        self._live_version = -1
        self.n_service_ticks = 0

    def reseed(self, rng: np.random.Generator) -> None:
        """A fresh noise stream (a sampled future's own)."""
        self._rng = rng
        self._noise_buf, self._noise_i = [], 0

    def set_mechanisms(self, mechanisms: MechanismConfig) -> None:
        self.mechanisms = mechanisms
        self._kernel_priority = bool(mechanisms.kernel_priority)
        self._protection = bool(mechanisms.protection)

    def arrived(self, st: JobState) -> None:
        """Online service ``st`` was submitted."""
        self._arrived.append(st)

    # ------------------------------------------------------------------ load
    def _next_normal(self) -> float:
        """The next standard normal of the noise stream (drawn in blocks, the same stream)."""
        i = self._noise_i
        if i == len(self._noise_buf):
            self._noise_buf = self._rng.standard_normal(_NOISE_CHUNK).tolist()
            i = 0
        self._noise_i = i + 1
        return self._noise_buf[i]

    @cython.locals(
        sv=ServingState, z=cython.double, now=cython.double,
        base=cython.double, rps=cython.double, duty=cython.double, q=cython.double,
        step=cython.double, batch=cython.double,
    )  # fmt: skip
    def update_load(self, st: JobState) -> None:
        """One load update of online ``st`` (``tick`` inlines the same arithmetic: compiled, C
        doubles, ``wave_rps`` (``ServiceSpec.rate_rps``'s function) and libm's ``exp``/``rint``,
        the same IEEE operations in the same order as ``math.exp`` and ``round``)."""
        svc = st.spec.service
        assert svc is not None
        sv = st.serving
        z = NOISE_AR * sv.noise_z + _NOISE_SCALE * self._next_normal()
        sv.noise_z = z
        now = self._sim.now
        base = svc.base_rps  # ``svc.rate_rps(now)``: the same function
        rps = sv.rps = wave_rps(base, svc.peak_rps - base, svc.phase_s, svc.period_s, now) * exp(
            svc.noise_frac * z
        )
        if st.gpus:
            batch = st.effective_batch_size
            duty = rps * sv.solo_batch_ms / 1000.0 / batch
            duty = duty if duty < 1.0 else 1.0  # min(1.0, duty)
            # Quantised to DUTY_STEP: co-runners' rates are recomputed only when the online
            # load moves by a step, not at every small wiggle (and the speed model's cache hits).
            step = DUTY_STEP
            q = rint(duty / step) * step
            sv.duty = q if q > step else step  # max(DUTY_STEP, q)

    @cython.locals(
        st=JobState, tc=_TickConsts, old=list, j=cython.Py_ssize_t, n_old=cython.Py_ssize_t,
        version=cython.Py_ssize_t,
    )  # fmt: skip
    def live(self) -> list[JobState]:
        """Online services queued or running now, in arrival order.

        Memoised until a job's status next changes (``JobTable.status_version``): at every
        tick the same list is used (a fresh list when it changes, so a caller may iterate the
        old one).
        """
        version = self._table.status_version
        if self._live_version == version:
            return self._live
        live: list[JobState] = []
        ended = False
        for st in self._arrived:
            status = st.status
            if status is _RUNNING or status is _QUEUED:
                live.append(st)
            elif status is not Status.FUTURE:
                ended = True  # DONE and FAILED are final
        if ended:
            self._arrived = [st for st in self._arrived if st.status in (_RUNNING, _QUEUED)]
        self._live = live
        # Per live service, the service's constants the tick reads: the last list's record
        # where its spec and batch size are the same objects (both lists in arrival order, the
        # new one the old one's services still live, then those that arrived since), else new
        old = self._live_c
        n_old = len(old)
        j = 0
        consts: list[_TickConsts] = []
        for st in live:
            while j < n_old:
                tc = old[j]
                if tc.st is st:
                    break
                j += 1
            if j < n_old and tc.spec is st.spec and tc.bsz is st.serving.batch_size:
                consts.append(tc)
                j += 1
            else:
                consts.append(_TickConsts(st))
        self._live_c = consts
        self._live_version = version
        return live

    @cython.locals(
        tick=cython.double, now=cython.double, i=cython.Py_ssize_t, n_buf=cython.Py_ssize_t,
        nz=cython.double,
        ar=cython.double, scale=cython.double, step=cython.double,
        z=cython.double, rps=cython.double, duty=cython.double,
        q=cython.double, batch=cython.double,
        slo_ms=cython.double, t_prev=cython.double, p99_max=cython.double,
        requests=cython.double, requests_ok=cython.double, lat_w=cython.double,
        p99_w=cython.double, slow_w=cython.double, req=cython.double, solo_ms=cython.double,
        f=cython.double, batch_ms=cython.double, rho=cython.double, mean_ms=cython.double,
        p99_ms=cython.double, attainment=cython.double, m=cython.double, slo_e=cython.double,
        att=cython.double, solo_mean=cython.double, out=cython.double, slowdown=cython.double,
        ratio=cython.double, unstable=cython.double, st=JobState, sv=ServingState,
        acc=Accumulator, tc=_TickConsts,
    )  # fmt: skip
    def tick(self) -> bool:
        """One load tick at ``now``: every live service's load, the running ones' latency and
        SLO accounting, SysMonitor (with ``protection``) and xCUDA (with ``kernel_priority``),
        the fragmentation sample and the timeseries row. True if what a scheduler could decide
        changed."""
        sim = self._sim
        tick = self._tick_s
        changed = False
        self.live()  # brings ``_live_c`` up to date as well
        live_c = self._live_c
        self.n_service_ticks += len(live_c)
        touched: list[int] = []
        now = sim.now
        # Load updates, inlined from ``update_load`` (the same operations in the same order,
        # so the same floats): this loop runs for every live service at every tick.
        buf = self._noise_buf
        i = self._noise_i
        n_buf = len(buf)
        ar, scale, step = NOISE_AR, _NOISE_SCALE, DUTY_STEP
        unstable = UNSTABLE_LATENCY_X_SLO
        for tc in live_c:  # (its numbers C doubles, compiled: read where used)
            st = tc.st
            if i == n_buf:
                buf = self._noise_buf = self._rng.standard_normal(_NOISE_CHUNK).tolist()
                i = 0
            sv = st.serving
            nz = buf[i]  # (a C double, compiled: no float made for ``scale`` and the product)
            z = ar * sv.noise_z + scale * nz
            i += 1
            sv.noise_z = z
            # ServiceSpec.rate_rps(now): the same function, called in C
            rps = sv.rps = wave_rps(tc.base, tc.span, tc.phase, tc.period, now) * exp(
                tc.noise_frac * z
            )
            if st.gpus:
                duty = rps * sv.solo_batch_ms / 1000.0 / tc.batch
                duty = duty if duty < 1.0 else 1.0
                q = rint(duty / step) * step
                q = q if q > step else step
                if q != sv.duty:
                    sv.duty = q
                    if st.status is _RUNNING:
                        touched.extend(st.gpus)
        self._noise_i = i
        if touched:
            self._rates.refresh(sorted(set(touched)))
        monitor = self.monitor
        if self._kernel_priority:
            for tc in live_c:
                st = tc.st
                if st.status is _RUNNING and len(st.gpus) == 1:
                    monitor.xcuda(st)
        acc = sim.acc
        usage = self._usage
        protection = self._protection
        t_prev = now - tick
        p99_max = 0.0
        requests = acc.requests
        requests_ok = acc.requests_ok
        lat_w = acc.latency_weighted_ms
        p99_w = acc.p99_weighted_ms
        slow_w = acc.slowdown_weighted
        for tc in live_c:
            st = tc.st
            batch = tc.batch
            slo_ms = tc.slo_ms
            sv = st.serving
            rps = sv.rps
            req = rps * tick
            requests += req
            if st.status is _QUEUED:
                continue
            # SLO accounting of a running service: ``latency_tuple`` inlined (same arithmetic)
            gpus = st.gpus
            solo_ms = sv.solo_batch_ms
            frac = st.frac
            if len(gpus) == 1:
                f = frac[gpus[0]]
            else:  # ``min(frac[x] for x in gpus)`` as a loop (no closure in a compiled cpdef)
                fm = None
                for x in gpus:
                    v = frac[x]
                    if fm is None or v < fm:
                        fm = v
                f = fm
            batch_ms = solo_ms / f + sv.wait_ms
            rho = rps * batch_ms / 1000.0 / batch
            if rho >= 1.0:
                mean_ms = p99_ms = unstable * slo_ms
                attainment = 0.0
            else:
                m = batch_ms / (2.0 * (1.0 - rho))
                p99_ms = batch_ms + (m * log(100.0 * rho) if rho > 0.01 else 0.0)
                slo_e = slo_ms - sv.tail_ms  # the MPS tail eats into the SLO headroom
                att = 1.0 - rho * exp(-(slo_e - batch_ms) / m) if slo_e > batch_ms else 0.0
                attainment = att if att > 0.0 else 0.0  # max(0.0, att)
                mean_ms = batch_ms + rho * m
                p99_ms += sv.tail_ms
            # x / 1.0 == x exactly: at full speed the solo statistics are the same numbers
            if f == 1.0 and sv.wait_ms == 0.0:
                solo_mean = mean_ms
            else:
                rho = rps * solo_ms / 1000.0 / batch
                if rho >= 1.0:
                    solo_mean = unstable * slo_ms
                else:
                    solo_mean = solo_ms + rho * (solo_ms / (2.0 * (1.0 - rho)))
            out = (sv.outage_until - t_prev) / tick
            out = 1.0 if out > 1.0 else (out if out > 0.0 else 0.0)  # min(1, max(0, out))
            requests_ok += req * (1.0 - out) * attainment
            lat_w += req * mean_ms
            p99_w += req * p99_ms
            slowdown = mean_ms / solo_mean
            slow_w += req * slowdown
            sv.latency_ms = mean_ms
            sv.p99_ms = p99_ms
            ratio = p99_ms / slo_ms
            if protection:
                # SysMonitor may evict or throttle (and accrue) but never touches the request
                # accumulators: write them back around it all the same.
                acc.requests = requests
                acc.requests_ok = requests_ok
                acc.latency_weighted_ms = lat_w
                acc.p99_weighted_ms = p99_w
                acc.slowdown_weighted = slow_w
                # on the GPU's device metrics (utilisation, SM activity, clock, memory)
                changed |= monitor.check(gpus[0], st, f, usage.row(gpus[0]))
            if ratio > p99_max:
                p99_max = ratio
        acc.requests = requests
        acc.requests_ok = requests_ok
        acc.latency_weighted_ms = lat_w
        acc.p99_weighted_ms = p99_w
        acc.slowdown_weighted = slow_w
        acc.frag_sum += usage.fragmentation()
        acc.frag_samples += 1
        usage.record(now, p99_max)
        return changed
