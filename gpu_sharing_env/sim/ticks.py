"""Online services of :class:`~gpu_sharing_env.sim.engine.Simulator` and time: load ticks (AR(1)
noise), SLO accounting, MuxFlow's SysMonitor, fragmentation samples and the integration of the
fleet's sums over time. A mixin: ``Simulator`` is assembled in ``engine.py`` (shared state:
``base.py``).
"""

from __future__ import annotations

import math
from typing import Any

from gpu_sharing_env.sim.base import SimulatorBase
from gpu_sharing_env.sim.constants import (
    _HEALTHY,
    _NOISE_CHUNK,
    _NOISE_SCALE,
    _QUEUED,
    _RUNNING,
    _TWO_PI,
    DUTY_STEP,
    NOISE_AR,
)
from gpu_sharing_env.sim.online import UNSTABLE_LATENCY_X_SLO, XCUDA_STEPS, Health, next_health
from gpu_sharing_env.sim.state import JobState, Status


def _tick_consts(st: JobState) -> tuple[Any, ...]:
    """What ``Simulator._tick`` reads of a live service's (immutable) spec, in one tuple:
    (state, phase_s, period_s, base_rps, peak_rps - base_rps, noise_frac, batch_size, slo_ms)."""
    svc = st.spec.service
    assert svc is not None
    base = svc.base_rps
    return (
        st,
        svc.phase_s,
        svc.period_s,
        base,
        svc.peak_rps - base,
        svc.noise_frac,
        st.effective_batch_size,  # the placement's (``Decision.batch_size``) or the service's
        svc.slo_ms,
    )


class _Ticks(SimulatorBase):
    """Online load ticks, SLO accounting, SysMonitor and time integration."""

    # ================================================================== online services
    def _next_normal(self) -> float:
        """The next standard normal of ``rng_noise`` (drawn in blocks, the same stream)."""
        i = self._noise_i
        if i == len(self._noise_buf):
            self._noise_buf = self.rng_noise.standard_normal(_NOISE_CHUNK).tolist()
            i = 0
        self._noise_i = i + 1
        return self._noise_buf[i]

    def _update_load(self, st: JobState) -> None:
        """One load update of online ``st`` (``_tick`` inlines the same arithmetic)."""
        svc = st.spec.service
        assert svc is not None
        z = NOISE_AR * st.noise_z + _NOISE_SCALE * self._next_normal()
        st.noise_z = z
        st.rps = svc.rate_rps(self.now) * math.exp(svc.noise_frac * z)
        if st.gpus:
            batch_ms = st.solo_batch_ms
            duty = st.rps * batch_ms / 1000.0 / st.effective_batch_size
            duty = duty if duty < 1.0 else 1.0  # min(1.0, duty)
            # Quantised to DUTY_STEP: co-runners' rates are recomputed only when the online
            # load moves by a step, not at every small wiggle (and the speed model's cache hits).
            q = round(duty / DUTY_STEP) * DUTY_STEP
            st.duty = q if q > DUTY_STEP else DUTY_STEP  # max(DUTY_STEP, q)

    def _live_online(self) -> list[JobState]:
        """Online services queued or running now, in ``_online_ids`` order.

        Memoised until a job's status next changes (``_status_version``): at every tick the
        same list is used (a fresh list when it changes, so a caller may iterate the old one).
        """
        if self._live_version == self._status_version:
            return self._live
        live: list[JobState] = []
        ended = False
        for st in self._online_arrived:
            status = st.status
            if status is _RUNNING or status is _QUEUED:
                live.append(st)
            elif status is not Status.FUTURE:
                ended = True  # DONE and FAILED are final
        if ended:
            self._online_arrived = [
                st for st in self._online_arrived if st.status in (_RUNNING, _QUEUED)
            ]
        self._live = live
        # Per live service, the service's constants the tick reads (``peak - base`` is the
        # same float at every tick, so computing it once changes nothing).
        self._live_c = [_tick_consts(st) for st in live]
        self._live_version = self._status_version
        return live

    def _tick(self) -> bool:
        tick = self.cfg.tick_s
        changed = False
        self._live_online()  # brings ``_live_c`` up to date as well
        live_c = self._live_c
        self.n_service_ticks += len(live_c)
        touched: list[int] = []
        now = self.now
        # Load updates, inlined from ``_update_load`` (the same operations in the same order,
        # so the same floats): this loop runs for every live service at every tick.
        buf = self._noise_buf
        i = self._noise_i
        n_buf = len(buf)
        exp = math.exp
        sin = math.sin
        log = math.log
        for st, phase, period, base, span, noise_frac, batch, _ in live_c:
            if i == n_buf:
                buf = self._noise_buf = self.rng_noise.standard_normal(_NOISE_CHUNK).tolist()
                i = 0
            z = NOISE_AR * st.noise_z + _NOISE_SCALE * buf[i]
            i += 1
            st.noise_z = z
            # ServiceSpec.rate_rps(now), inlined
            wave = (1.0 + sin(_TWO_PI * (now - phase) / period)) / 2.0
            rps = st.rps = (base + span * wave) * exp(noise_frac * z)
            if st.gpus:
                duty = rps * st.solo_batch_ms / 1000.0 / batch
                duty = duty if duty < 1.0 else 1.0
                q = round(duty / DUTY_STEP) * DUTY_STEP
                q = q if q > DUTY_STEP else DUTY_STEP
                if q != st.duty:
                    st.duty = q
                    if st.status is _RUNNING:
                        touched.extend(st.gpus)
        self._noise_i = i
        if touched:
            self._refresh(sorted(set(touched)))
        if self.mechanisms.kernel_priority:
            for c in live_c:
                st = c[0]
                if st.status is _RUNNING and len(st.gpus) == 1:
                    self._xcuda(st)
        acc = self.acc
        protection = self.mechanisms.protection
        t_prev = now - tick
        p99_max = 0.0
        requests = acc.requests
        requests_ok = acc.requests_ok
        lat_w = acc.latency_weighted_ms
        p99_w = acc.p99_weighted_ms
        slow_w = acc.slowdown_weighted
        for st, _, _, _, _, _, batch, slo_ms in live_c:
            rps = st.rps
            req = rps * tick
            requests += req
            if st.status is _QUEUED:
                continue
            # SLO accounting of a running service: ``latency_tuple`` inlined (same arithmetic)
            gpus = st.gpus
            solo_ms = st.solo_batch_ms
            frac = st.frac
            f = frac[gpus[0]] if len(gpus) == 1 else min(frac[x] for x in gpus)
            batch_ms = solo_ms / f + st.wait_ms
            rho = rps * batch_ms / 1000.0 / batch
            if rho >= 1.0:
                mean_ms = p99_ms = UNSTABLE_LATENCY_X_SLO * slo_ms
                attainment = 0.0
            else:
                m = batch_ms / (2.0 * (1.0 - rho))
                p99_ms = batch_ms + (m * log(100.0 * rho) if rho > 0.01 else 0.0)
                slo_e = slo_ms - st.tail_ms  # the MPS tail eats into the SLO headroom
                att = 1.0 - rho * exp(-(slo_e - batch_ms) / m) if slo_e > batch_ms else 0.0
                attainment = att if att > 0.0 else 0.0  # max(0.0, att)
                mean_ms = batch_ms + rho * m
                p99_ms += st.tail_ms
            # x / 1.0 == x exactly: at full speed the solo statistics are the same numbers
            if f == 1.0 and st.wait_ms == 0.0:
                solo_mean = mean_ms
            else:
                rho = rps * solo_ms / 1000.0 / batch
                if rho >= 1.0:
                    solo_mean = UNSTABLE_LATENCY_X_SLO * slo_ms
                else:
                    solo_mean = solo_ms + rho * (solo_ms / (2.0 * (1.0 - rho)))
            out = (st.outage_until - t_prev) / tick
            out = 1.0 if out > 1.0 else (out if out > 0.0 else 0.0)  # min(1, max(0, out))
            requests_ok += req * (1.0 - out) * attainment
            lat_w += req * mean_ms
            p99_w += req * p99_ms
            slowdown = mean_ms / solo_mean
            slow_w += req * slowdown
            st.latency_ms, st.p99_ms = mean_ms, p99_ms
            ratio = p99_ms / slo_ms
            if protection:
                # SysMonitor may evict or throttle (and accrue) but never touches the request
                # accumulators: write them back around it all the same.
                acc.requests, acc.requests_ok = requests, requests_ok
                acc.latency_weighted_ms, acc.p99_weighted_ms = lat_w, p99_w
                acc.slowdown_weighted = slow_w
                # MuxFlow's rule: slowdown against the latency the service would have at the
                # current load without co-runners (on its own allocation: what evicting or
                # throttling offline work can restore)
                alone = st.alone_frac
                if alone != f or st.wait_ms:
                    a_ms = solo_ms / alone
                    rho = rps * a_ms / 1000.0 / batch
                    ref = a_ms + rho * (a_ms / (2.0 * (1.0 - rho))) if rho < 1.0 else mean_ms
                    changed |= self._monitor(gpus[0], mean_ms / ref)
                else:
                    changed |= self._monitor(gpus[0], 1.0)
            if ratio > p99_max:
                p99_max = ratio
        acc.requests, acc.requests_ok = requests, requests_ok
        acc.latency_weighted_ms, acc.p99_weighted_ms = lat_w, p99_w
        acc.slowdown_weighted = slow_w
        # ``_sample_frag``: recomputed only when its inputs changed
        if self.cluster.version != self._frag_cv or self._queue_version != self._frag_qv:
            self._sample_frag()
        acc.frag_sum += self._frag_val
        acc.frag_samples += 1
        g = self._n_gpus_f
        s = self._sums
        self.timeseries.append((now, s[0] / g, s[1] / g, s[3] / g, s[2] / g, p99_max))
        return changed

    def _monitor(self, g: int, ratio: float) -> bool:
        """MuxFlow's SysMonitor on the GPU hosting an online service; ``ratio`` is the
        service's mean-latency slowdown against its solo latency at the current load."""
        c = self.cluster
        th = self.thresholds
        if (
            ratio < th.busy_at
            and ratio < th.throttle_at
            and ratio < th.evict_at
            and self.health.item(g) == _HEALTHY
            and c.healthy.item(g)
        ):
            # HEALTHY stays HEALTHY (``next_health``): nothing changes unless an offline
            # resident is still throttled (then the general path below resets it).
            jobs = self.jobs
            for j in c.residents[g]:
                r = jobs[j]
                if r.throttle != 1.0 and not r.spec.online:
                    break
            else:
                return False
        old = Health(int(self.health[g]))
        new = next_health(old, ratio, self.thresholds)
        self.health[g] = int(new)
        healthy = new is Health.HEALTHY
        changed = bool(c.healthy[g] != healthy)
        if changed:
            c.set_healthy(g, healthy)
        offline = [r for r in self._residents(g) if not r.spec.online]
        if new is Health.UNHEALTHY:
            for r in offline:
                self.evict(r.spec.job_id)
            return bool(offline) or changed
        if self._kernel_throttled(g, offline):
            # One mechanism throttles (physics version 4): with kernel-level priority deployed
            # (xCUDA) the offline client's launches are held back by xCUDA's own feedback
            # (:meth:`_xcuda`), MuxFlow's workload-level protection; SysMonitor's OVERLOADED
            # state then only closes the GPU to new offline work (``healthy``), and it evicts
            # (UNHEALTHY) only if the service is still slowed by what remains.
            return changed
        throttle = self.thresholds.throttle_factor if new is Health.OVERLOADED else 1.0
        if any(r.throttle != throttle for r in offline):
            for r in offline:
                self._accrue(r)
                r.throttle = throttle
            self._refresh([g])
        return changed

    def _kernel_throttled(self, g: int, offline: list[JobState]) -> bool:
        """Whether kernel-level priority already throttles every offline resident of ``g``:
        the mechanism is deployed, the GPU shares by MPS and each offline resident has a lower
        priority than an online co-resident (as ``_gpu_fractions`` keys them for the speed
        model)."""
        if not offline:
            return False
        res = self._residents(g)
        gated = dict(zip((r.spec.job_id for r in res), self._gated(g, res), strict=True))
        return all(gated[r.spec.job_id] for r in offline)

    def _xcuda(self, st: JobState) -> None:
        """xCUDA's launch control on the GPU of online service ``st`` (MuxFlow Sec. 4.1;
        physics version 5, ``sim.online.XCUDA_CLOCK_MIN``): the offline clients' launch
        fraction (``throttle``) becomes the largest of ``XCUDA_STEPS`` at which the service's
        kernel speed, the time of its batch alone on its allocation over its time beside them
        (``(L / alone) / (L / f + wait)``), stays at or above ``thresholds.xcuda_clock_min``:
        launches are delayed while that speed (the device metric standing for the SM clock) is
        low and go back up while the GPU has room. xCUDA acts per kernel, far faster than a
        load tick, so the loop is taken at its fixed point for the tick's load."""
        g = st.gpus[0]
        res = self._residents(g)
        offline = [r for r in res if not r.spec.online]
        if not offline or not self._kernel_throttled(g, offline):
            return
        target = self.thresholds.xcuda_clock_min
        old = [r.throttle for r in offline]
        best = XCUDA_STEPS[-1]
        for x in XCUDA_STEPS:
            for r in offline:
                r.throttle = x
            self._gpu_fractions(g, res)  # sets ``frac``, ``wait_ms``, ``alone_frac``
            f = st.frac[g]
            alone_ms = st.solo_batch_ms / st.alone_frac
            if alone_ms / (st.solo_batch_ms / f + st.wait_ms) >= target:
                best = x
                break
        for r, t in zip(offline, old, strict=True):
            r.throttle = t
        if all(t == best for t in old):
            self._gpu_fractions(g, res)  # as they were
            return
        for r in offline:
            self._accrue(r)
            r.throttle = best
        self._refresh([g])

    def _sample_frag(self) -> None:
        """FGD-style fragmentation: free memory on partly used GPUs that no queued job fits
        (``_frag_val``; ``_tick`` adds it to the accumulator).

        The sample depends only on the cluster's memory state (``version``) and the queue
        (``_queue_version``): ``_tick`` calls this only when either changed.
        """
        c = self.cluster
        jobs = self.jobs
        pending = [spec.mem_gb for _, j in self.queue if not (spec := jobs[j].spec).online]
        need = min(pending) if pending else 0.0
        free = c.mem_cap - c.mem_decl
        part = (c.n_res > 0) & (free > 1e-9) & (free < need)
        self._frag_val = float((free[part] / c.mem_cap[part]).sum())
        self._frag_cv = c.version
        self._frag_qv = self._queue_version

    # ================================================================== time
    def _integrate(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            acc = self.acc
            s = self._sums
            acc.util_s += s[0] * dt
            acc.sm_s += s[1] * dt
            acc.mem_s += s[2] * dt
            acc.busy_gpu_s += s[3] * dt
            acc.stp_s += s[4] * dt
            acc.oversold_s += s[5] * dt
            acc.online_gpu_s += s[6] * dt
            acc.in_system_s += self._in_system * dt
            acc.elapsed_s += dt
        self.now = max(self.now, t)
