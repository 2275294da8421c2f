"""Per-GPU rates of :class:`~gpu_sharing_env.sim.engine.Simulator`: sharing fractions from the
speed model (memoised), job rates and their completion events, progress accrual. A mixin:
``Simulator`` is assembled in ``engine.py`` (shared state: ``base.py``).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Any

from gpu_sharing_env.interference import Resident
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.base import SimulatorBase
from gpu_sharing_env.sim.constants import (
    _K_COMPLETE,
    _MIG,
    _MODES,
    _MPS,
    _RUNNING,
    CROSS_NODE_FACTOR,
    PCIE_GANG_FACTOR,
)
from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.zoo import ZOO

_NO_SKIP: frozenset[int] = frozenset()


class _Rates(SimulatorBase):
    """Sharing fractions, rates and accrual of the jobs on each GPU."""

    # ================================================================== rates
    def _accrue(self, st: JobState) -> None:
        if st.status is not _RUNNING:
            return
        if self._job_watchers:  # (``watch_jobs``: progress, rates or load about to change)
            jid = st.spec.job_id
            for w in self._job_watchers:
                w.add(jid)
        now = self.now
        t0 = max(st.last_t, st.setup_until)
        if now > t0 and st.rate > 0:
            dt = now - t0
            st.work_done += st.rate * dt
            st.norm_integral += (st.rate / st.solo_rate) * dt
            st.run_time_s += dt
        st.last_t = self.now

    def _residents(self, g: int) -> list[JobState]:
        return [self.jobs[j] for j in self.cluster.residents[g]]

    def _gated(self, g: int, res: Sequence[JobState]) -> list[bool]:
        """Which residents of ``g`` are kernel-throttled (xCUDA / Tally): with the
        ``kernel_priority`` mechanism under MPS, the offline ones with a lower priority than an
        online co-resident (as ``_gpu_fractions`` keys them for the speed model)."""
        if not self.mechanisms.kernel_priority or _MODES[self.cluster.mode.item(g)] is not _MPS:
            return [False] * len(res)
        bonus = 100 if self.cfg.sharing.online_priority else 0
        top = max((r.spec.priority + bonus for r in res if r.spec.online), default=None)
        if top is None:
            return [False] * len(res)
        return [not r.spec.online and r.spec.priority < top for r in res]

    def _sm_shares(self, g: int, res: list[JobState]) -> list[float]:
        opt_share = self._opt_share
        shares = [opt_share[r.option] for r in res]
        if (
            self.mechanisms.dynamic_sm
            and self.cluster.mode[g] == SharingMode.MPS
            and self.cluster.online_count[g] > 0
        ):
            # MuxFlow's dynamic SM allocation: the offline clients' SM limit follows the online
            # service's load (its solo SM activity, plus a 20% margin); the service itself is
            # never limited (a limit would stretch its batches). A kernel-throttled client
            # (xCUDA) is not capped as well (physics version 5): its launches already wait for
            # the service's idle time, the coefficients of which were measured with both clients
            # on every SM (Tally), so a cap on top would count the protection twice; the
            # dynamic allocation then leaves it every SM.
            gated = self._gated(g, res)
            online_duty = sum(r.duty for r in res if r.spec.online)
            n_off = sum(not r.spec.online and not x for r, x in zip(res, gated, strict=True))
            off_total = min(0.9, max(0.1, 1.0 - 1.2 * online_duty))
            shares = [
                1.0 if r.spec.online or x else off_total / n_off
                for r, x in zip(res, gated, strict=True)
            ]
        return shares

    def _refresh(self, gpus: Sequence[int]) -> None:
        """Recompute sharing fractions on ``gpus`` and the rates of every job they host.

        A node whose CPU factor moves has the rates of all its GPUs' residents set again; the
        fractions of such a GPU outside ``gpus`` are recomputed only when it is in ``_dirty``
        (its residents changed since they were last computed): otherwise they would come out
        as the same bits, and the fleet sums would move by ``x - x``, i.e. not at all.
        """
        c = self.cluster
        node_of = self._node_of
        factor = self._node_factor
        used_of = c.node_cpu_used
        vcpus_of = self._node_vcpus
        extra: list[int] | None = None
        for node in (node_of[gpus[0]],) if len(gpus) == 1 else {node_of[g] for g in gpus}:
            # Python floats (``.item``): the same values as the numpy scalars, cheaper to use
            used = used_of.item(node)
            f = min(1.0, vcpus_of[node] / used) if used > 1e-9 else 1.0
            if f != factor[node]:
                factor[node] = f
                if extra is None:
                    extra = []
                extra.extend(self._node_gpus[node])
        dirty = self._dirty
        jobs = self.jobs
        residents = c.residents
        accrue = self._accrue
        fractions = self._gpu_fractions
        affected: dict[int, JobState] = {}
        if extra is None:
            todo = gpus if len(gpus) == 1 else sorted(set(gpus))
            skip: Set[int] = _NO_SKIP
        else:
            own = set(gpus)
            todo = sorted(own.union(extra))
            if self._fr_mech is not self.mechanisms:  # (not mid-episode, as documented)
                self._fr_mech = self.mechanisms
                dirty.update(range(self.n_gpus))
            skip = {g for g in extra if g not in own and g not in dirty}
        for g in todo:
            res = [jobs[j] for j in residents[g]]
            for r in res:
                jid = r.spec.job_id
                if jid not in affected:
                    accrue(r)
                    affected[jid] = r
            if g in skip and not any(len(r.gpus) > 1 for r in res):
                # (a gang's ``sm_eff`` is its last computed GPU's: those are recomputed)
                continue
            fractions(g, res)
            if dirty:
                dirty.discard(g)
        set_rate = self._set_rate
        for st in affected.values():
            set_rate(st)

    def _gpu_fractions(self, g: int, res: list[JobState]) -> None:
        c = self.cluster
        util = sm = stp = over = 0.0
        n_online = c.online_count.item(g)
        if res:
            mode = _MODES[c.mode.item(g)]
            mech = self.mechanisms
            gpulet_of = c.gpulet_of(g) if c.gpulets and mode is _MPS else None
            # priorities matter under time-slicing, and under MPS only with kernel-level
            # priority deployed (Tally / MuxFlow's xCUDA); plain MPS shares without them
            prio_on = mode is not _MPS or mech.kernel_priority
            bonus = 100 if self.cfg.sharing.online_priority else 0
            keys: list[tuple[Any, ...]] = []
            add = keys.append
            if gpulet_of is not None:
                # gpulets: a resident's SM share is its partition's (``Resident.gpulet``)
                shares = [gpulet_of[r.spec.job_id][1] / 100.0 for r in res]
            elif mech.dynamic_sm:
                shares = self._sm_shares(g, res)
            elif mech.launch_quota and mode is _MPS and len(res) == 1:
                shares = [1.0]  # GPUPool: alone, a client launches with the solo quota
            else:  # ``_sm_shares`` without dynamic SM: each option's static share
                opt_share = self._opt_share
                shares = [opt_share[r.option] for r in res]
            is_mig = mode is _MIG
            for r, share in zip(res, shares, strict=True):
                inst = r.mig[r.gpus.index(g)] if is_mig else None
                spec = r.spec
                online = r.online
                duty = r.duty if online else ZOO[spec.model].duty * r.throttle
                r.sm_eff = share
                key: tuple[Any, ...] = (
                    spec.model,
                    share,
                    inst.compute if inst else 0,
                    bin(inst.mask).count("1") if inst else 0,
                    1e-3 if duty < 1e-3 else duty,  # max(duty, 1e-3)
                    online,
                    (spec.priority + (bonus if online else 0)) if prio_on else 0,
                    r.effective_batch_size if online else 0,  # its SM-share curve
                )
                if gpulet_of is not None:
                    key = (*key, gpulet_of[spec.job_id][0])
                add(key)
            gpu_type = c.type_name_of[g]
            fr = self._rates_cache.get((gpu_type, mode, *keys))  # ``_rates``' memo, inlined
            if fr is None:
                fr = self._rates(gpu_type, mode, keys)
            if n_online > 0:
                self._online_terms(g, gpu_type, mode, res, keys)
            for r, k, f in zip(res, keys, fr, strict=True):
                d = k[4]
                if r.online:  # ``f * 1.0`` is ``f``
                    r.frac[g] = f
                    # an online rate is per batch: its load ``d`` is served while it stays stable
                    util += d
                else:
                    f *= r.throttle
                    r.frac[g] = f
                    util += d * f
                    over += f
                sm += d * f * (k[2] / 7.0 if k[2] else k[1])
                stp += f
        # ``min(1.0, x)`` as ``x if x < 1.0 else 1.0`` (the same value, NaN included)
        util = util if util < 1.0 else 1.0
        sm = sm if sm < 1.0 else 1.0
        hosts_online = 1.0 if n_online > 0 else 0.0
        over = over if hosts_online else 0.0
        mem = c.mem_true.item(g) / self._mem_cap[g]
        mem = mem if mem < 1.0 else 1.0
        busy = 1.0 if res else 0.0
        new = (util, sm, mem, busy, stp, over, hosts_online)
        old = self._g_vals[g]
        s = self._sums
        # the fleet sums, updated element by element as before (unrolled)
        s[0] += util - old[0]
        s[1] += sm - old[1]
        s[2] += mem - old[2]
        s[3] += busy - old[3]
        s[4] += stp - old[4]
        s[5] += over - old[5]
        s[6] += hosts_online - old[6]
        self._g_vals[g] = new
        self._g_util[g] = util

    def _online_terms(
        self, g: int, gpu_type: str, mode: SharingMode, res: list[JobState], keys: list[Any]
    ) -> None:
        """Set the per-batch wait and extra p99 (``wait_ms``, ``tail_ms``) of the online
        residents of GPU ``g`` from the speed model's ``latency_terms`` (memoised; zero for a
        speed model without it)."""
        cache = self._rates_cache
        for r, k in zip(res, keys, strict=True):
            if r.online and r.gpus[0] == g:
                alone = cache.get((gpu_type, mode, k))  # ``_rates``' memo, inlined
                if alone is None:
                    alone = self._rates(gpu_type, mode, [k])
                r.alone_frac = alone[0]
        terms_of = getattr(self.speed, "latency_terms", None)
        if terms_of is None or len(res) < 2:
            for r in res:
                r.wait_ms = r.tail_ms = 0.0
            return
        key = (gpu_type, mode, *keys)
        terms = self._terms_cache.get(key)
        if terms is None:
            terms = terms_of(gpu_type, mode, [Resident(*k) for k in keys])
            if len(self._terms_cache) >= 65_536:
                self._terms_cache.clear()
            self._terms_cache[key] = terms
        for r, (wait, tail) in zip(res, terms, strict=True):
            if r.online and r.gpus[0] == g:  # a service's first GPU sets its latency
                r.wait_ms, r.tail_ms = wait, tail

    def _rates(self, gpu_type: str, mode: SharingMode, keys: list[tuple[Any, ...]]) -> list[float]:
        """``speed.rates`` for residents given as field tuples (memoised: a pure function)."""
        key = (gpu_type, mode, *keys)
        hit = self._rates_cache.get(key)
        if hit is None:
            residents = [Resident(*k) for k in keys]
            hit = self.speed.rates(gpu_type, mode, residents)
            if len(self._rates_cache) >= 65_536:
                self._rates_cache.clear()
            self._rates_cache[key] = hit
        return hit

    def _set_rate(self, st: JobState) -> None:
        spec = st.spec
        gpus = st.gpus
        node_of = self._node_of
        if len(gpus) == 1:
            g = gpus[0]
            solo = self._solo_cache.get((spec.model, self._type_of[g]))
            if solo is None:
                solo = self._solo_speed(spec.model, self._type_of[g])
            st.solo_rate = solo
            rate = st.rate = solo * st.frac[g] * self._node_factor[node_of[g]]
        else:
            # A gang is synchronous data-parallel: every step waits for its slowest worker, so
            # the whole job progresses at the least of its members' rates, each member's rate
            # its GPU type's solo speed x the gang factor x its sharing fraction on that GPU x
            # its node's CPU factor (Gavel, OSDI'20, and Sia, SOSP'23: throughput on a
            # heterogeneous allocation is bounded by the slowest worker). A member's rate is
            # multiplied in the single-GPU order, so a gang whose members differ only in
            # fraction gets the bits of ``solo * net * min(frac) * cpu``.
            net = 1.0
            nodes = {node_of[g] for g in gpus}
            if len(nodes) > 1:
                net = CROSS_NODE_FACTOR
            elif self._node_pcie[nodes.pop()]:
                net = PCIE_GANG_FACTOR
            solo_cache = self._solo_cache
            type_of = self._type_of
            solo_of = []
            for g in gpus:  # ``_solo_speed``, its memo inlined
                solo = solo_cache.get((spec.model, type_of[g]))
                if solo is None:
                    solo = self._solo_speed(spec.model, type_of[g])
                solo_of.append(solo)
            frac = st.frac
            factor = self._node_factor
            st.solo_rate = min(solo_of) * net  # alone and exclusive: its slowest GPU type
            rate = st.rate = min(
                s * net * frac[g] * factor[node_of[g]] for s, g in zip(solo_of, gpus, strict=True)
            )
        if not st.online:
            epoch = st.epoch = st.epoch + 1
            remaining = spec.work_s - st.work_done  # ``st.remaining``, inlined
            remaining = remaining if remaining > 0.0 else 0.0  # max(0.0, remaining)
            t_done = max(self.now, st.setup_until) + remaining / rate
            self.events.push(t_done, _K_COMPLETE, spec.job_id, epoch)

    # ================================================================== solo speeds
    def _solo_speed(self, model: str, gpu_type: str) -> float:
        """``speed.solo_speed`` (memoised: a pure function of its arguments)."""
        v = self._solo_cache.get((model, gpu_type))
        if v is None:
            v = self._solo_cache[model, gpu_type] = self.speed.solo_speed(model, gpu_type)
        return v

    def _solo_batch_ms(self, st: JobState) -> float:
        """Solo batch latency of online ``st`` on the type of its first GPU, at the batch size
        it runs with (``JobState.effective_batch_size``; cached)."""
        c = self.cluster
        assert st.spec.service is not None
        batch = st.effective_batch_size
        key = (st.spec.model, int(c.type_idx[st.gpus[0]]), batch)
        ms = self._batch_ms.get(key)
        if ms is None:
            gt = c.type_names[key[1]]
            ms = self._batch_ms[key] = self.speed.batch_latency_ms(key[0], gt, batch)
        return ms
