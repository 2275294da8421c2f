"""Per-GPU rates (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`): sharing
fractions from the speed model (memoised: :class:`~gpu_sharing_env.sim.speed.SpeedMemo`), job
rates and their completion events, progress accrual, the nodes' CPU factors.

:class:`Rates` owns the set of GPUs whose fractions are stale, the nodes' CPU factors, the
static per-GPU and per-node facts it reads on the hot path and the job watchers
(``Simulator.watch_jobs``). It writes the rate fields of ``JobState`` (``rate``, ``solo_rate``,
``frac``, ``sm_eff``, the accrual fields, the ``serving`` record's ``alone_frac``, ``wait_ms``,
``tail_ms``) and each GPU's usage row (:meth:`FleetUsage.set_row <gpu_sharing_env.sim.usage.FleetUsage.set_row>`).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Any

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.config import MechanismConfig
from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.nodes import Interconnect
from gpu_sharing_env.sim.constants import (
    _K_COMPLETE,
    _MIG,
    _MODES,
    _MPS,
    _RUNNING,
    CROSS_NODE_FACTOR,
    PCIE_GANG_FACTOR,
)

if cython.compiled:  # the extension types (state.pxd, cluster.pxd, speed.pxd): C reads
    from cython.cimports.gpu_sharing_env.fleet.cluster import _StateViews, _views_of
    from cython.cimports.gpu_sharing_env.sim.events import EventQueue
    from cython.cimports.gpu_sharing_env.sim.speed import SpeedMemo
    from cython.cimports.gpu_sharing_env.sim.state import JobLedger, JobState, ServingState
    from cython.cimports.gpu_sharing_env.workload.job import _take
else:
    from gpu_sharing_env.fleet.cluster import _slot_read as _take
    from gpu_sharing_env.fleet.cluster import _StateViews, _views_of
    from gpu_sharing_env.sim.events import EventQueue
    from gpu_sharing_env.sim.speed import SpeedMemo
    from gpu_sharing_env.sim.state import JobLedger, JobState, ServingState
from gpu_sharing_env.sim.usage import FleetUsage
from gpu_sharing_env.workload.job import JobSpec

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator

_NO_SKIP: frozenset[int] = frozenset()

#: ``Rates._mech_bits``: the mechanism flags ``gpu_fractions`` reads, one bit each.
_KERNEL_PRIORITY = 1
_DYNAMIC_SM = 2
_LAUNCH_QUOTA = 4


def _mech_bits(mech: MechanismConfig) -> int:
    """``mech``'s ``kernel_priority``, ``dynamic_sm`` and ``launch_quota`` as bits."""
    return (
        (_KERNEL_PRIORITY if mech.kernel_priority else 0)
        | (_DYNAMIC_SM if mech.dynamic_sm else 0)
        | (_LAUNCH_QUOTA if mech.launch_quota else 0)
    )


# ``JobSpec``'s slot descriptors of the fields read per resident and per rate: ``_take(spec,
# _S_MODEL)`` is ``spec.model`` (compiled, CPython's member read, ``job.pxd``'s ``_take``, a C
# call: no attribute lookup through the type; interpreted, the descriptor's ``__get__``).
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_MODEL = JobSpec.__dict__["model"]
_S_PRIORITY = JobSpec.__dict__["priority"]
_S_SERVICE = JobSpec.__dict__["service"]
_S_WORK_S = JobSpec.__dict__["work_s"]


class Rates:
    """Sharing fractions, rates and accrual of the jobs on each GPU."""

    __slots__ = (
        "_bonus",
        "_cluster",
        "_dirty",
        "_fr_mech",
        "_gpulets",
        "_jobs",
        "_mech_bits",
        "_mem_cap",
        "_memo",
        "_node_factor",
        "_node_gpus",
        "_node_of",
        "_node_pcie",
        "_node_vcpus",
        "_opt_share",
        "_sim",
        "_type_of",
        "_usage",
        "_watchers",
        "mechanisms",
    )

    def __init__(
        self,
        sim: Simulator,
        cluster: Cluster,
        memo: SpeedMemo,
        usage: FleetUsage,
        mechanisms: MechanismConfig,
        online_priority: bool,
    ) -> None:
        c = cluster
        self._sim = sim
        self._cluster = c
        self._memo = memo
        self._usage = usage
        #: The cluster mechanisms in force (``Simulator.reset``/``set_mechanisms``).
        self.mechanisms = mechanisms
        #: Their three flags ``gpu_fractions`` reads (compiled, a C integer: one typed read
        #: where each flag was a generic attribute read of the config): :func:`_mech_bits`.
        self._mech_bits: int = _mech_bits(mechanisms)
        self._fr_mech = mechanisms  # the mechanisms the fractions were computed under
        #: The priority bonus of an online service (``sharing.online_priority``).
        self._bonus = 100 if online_priority else 0
        #: The cluster's gpulets (``Cluster.gpulets``, fixed: compiled, a C read where the
        #: cluster's property was a Python call at every ``gpu_fractions``).
        self._gpulets: int = c.gpulets
        # Static per-GPU facts as Python lists (scalar reads on the hot path).
        self._node_of: list[int] = c.node_of.tolist()
        self._type_of = list(c.type_name_of)
        self._node_gpus = [
            range(int(first), int(first) + n.num_gpus)
            for first, n in zip(c.node_first_gpu, c.nodes, strict=True)
        ]
        self._node_pcie = [n.interconnect is Interconnect.PCIE for n in c.nodes]
        self._node_vcpus: list[float] = c.node_vcpus.tolist()
        self._mem_cap: list[float] = c.mem_cap.tolist()
        #: Per placement option: its MPS SM share as a fraction (``sm_pct / 100.0``).
        self._opt_share = [o.sm_pct / 100.0 for o in c.options]
        self._jobs: dict[int, JobState] = {}
        #: Per node: its CPU factor (``min(1, vCPUs / used)``).
        self._node_factor = [1.0] * c.n_nodes
        #: GPUs whose residents changed since their fractions were last computed (``refresh``)
        self._dirty: set[int] = set()
        #: Sets of running jobs whose progress, rate or load may have changed (``watch``).
        self._watchers: list[set[int]] = []

    def reset(self, jobs: dict[int, JobState], mechanisms: MechanismConfig) -> None:
        self._jobs = jobs
        self.mechanisms = mechanisms
        self._mech_bits = _mech_bits(mechanisms)
        self._node_factor = [1.0] * self._cluster.n_nodes
        self._dirty = set()
        self._fr_mech = mechanisms
        self._watchers = []

    def set_mechanisms(self, mechanisms: MechanismConfig) -> None:
        """The mechanisms from now on (a change mid-episode recomputes every GPU's fractions at
        the next node-factor change, as documented by ``refresh``)."""
        self.mechanisms = mechanisms
        self._mech_bits = _mech_bits(mechanisms)

    # ------------------------------------------------------------------ watchers
    def watch(self) -> set[int]:
        """A new job watch (``Simulator.watch_jobs``)."""
        w: set[int] = set()
        self._watchers.append(w)
        return w

    def unwatch(self, w: set[int]) -> None:
        self._watchers[:] = [x for x in self._watchers if x is not w]

    def watcher_count(self) -> int:
        """How many job watches are active."""
        return len(self._watchers)

    def copy_memo(self, memo: dict[int, Any]) -> None:
        """``Simulator.copy`` carries no job watches and shares the static fleet facts."""
        memo[id(self._watchers)] = []
        for static in (
            self._node_of,
            self._type_of,
            self._node_gpus,
            self._node_pcie,
            self._node_vcpus,
            self._mem_cap,
            self._opt_share,
        ):
            memo[id(static)] = static

    def mark_dirty(self, gpus: Sequence[int]) -> None:
        """``gpus``' residents changed: their fractions are to be recomputed (``refresh``)."""
        if len(gpus) == 1:  # (one GPU, most calls: ``set.add``, a C call, no method lookup)
            self._dirty.add(gpus[0])
        else:
            self._dirty.update(gpus)

    def _state_views(self) -> _StateViews:
        """The cluster's typed views of its current state arrays (:meth:`Cluster.state_views`;
        compiled, ``cluster.pxd``'s ``_views_of``, a C call that keeps the last cluster's)."""
        return _views_of(self._cluster)  # type: ignore[no-any-return]

    def mem_cap(self, g: int) -> float:
        """GPU ``g``'s memory (GB, a Python float)."""
        return self._mem_cap[g]

    # ------------------------------------------------------------------ rates
    @cython.locals(
        now=cython.double, t0=cython.double, dt=cython.double, st=JobState, led=JobLedger
    )
    def accrue(self, st: JobState) -> None:
        """Bring a running job's progress up to ``now`` at its current rate."""
        if st.status is not _RUNNING:
            return
        if self._watchers:  # (``watch``: progress, rates or load about to change)
            jid = st.spec.job_id
            for w in self._watchers:
                w.add(jid)
        now = self._sim.now
        t0 = max(st.last_t, st.setup_until)
        if now > t0 and st.rate > 0:
            dt = now - t0
            st.work_done += st.rate * dt
            led = st.ledger
            led.norm_integral += (st.rate / st.solo_rate) * dt
            led.run_time_s += dt
        st.last_t = now

    def residents(self, g: int) -> list[JobState]:
        """The records of GPU ``g``'s residents, in the cluster's order."""
        jobs = self._jobs
        return [jobs[j] for j in self._cluster.residents[g]]

    def gated(self, g: int, res: Sequence[JobState]) -> list[bool]:
        """Which residents of ``g`` are kernel-throttled (xCUDA / Tally): with the
        ``kernel_priority`` mechanism under MPS, the offline ones with a lower priority than an
        online co-resident (as :meth:`gpu_fractions` keys them for the speed model)."""
        if not self.mechanisms.kernel_priority or _MODES[self._cluster.mode.item(g)] is not _MPS:
            return [False] * len(res)
        bonus = self._bonus
        top = max((r.spec.priority + bonus for r in res if r.spec.online), default=None)
        if top is None:
            return [False] * len(res)
        return [not r.spec.online and r.spec.priority < top for r in res]

    def _sm_shares(self, g: int, res: list[JobState]) -> list[float]:
        opt_share = self._opt_share
        shares = [opt_share[r.option] for r in res]
        c = self._cluster
        if self.mechanisms.dynamic_sm and c.mode[g] == SharingMode.MPS and c.online_count[g] > 0:
            # MuxFlow's dynamic SM allocation: the offline clients' SM limit follows the online
            # service's load (its solo SM activity, plus a 20% margin); the service itself is
            # never limited (a limit would stretch its batches). A kernel-throttled client
            # (xCUDA) is not capped as well (physics version 5): its launches already wait for
            # the service's idle time, the coefficients of which were measured with both clients
            # on every SM (Tally), so a cap on top would count the protection twice; the
            # dynamic allocation then leaves it every SM.
            gated = self.gated(g, res)
            online_duty = sum(r.serving.duty for r in res if r.spec.online)
            n_off = sum(not r.spec.online and not x for r, x in zip(res, gated, strict=True))
            off_total = min(0.9, max(0.1, 1.0 - 1.2 * online_duty))
            shares = [
                1.0 if r.spec.online or x else off_total / n_off
                for r, x in zip(res, gated, strict=True)
            ]
        return shares

    @cython.locals(
        r=JobState, st=JobState, sv=_StateViews, used=cython.double, f=cython.double,
        node=cython.Py_ssize_t,
    )  # fmt: skip
    def refresh(self, gpus: Sequence[int], fresh: Sequence[int] | None = None) -> None:
        """Recompute sharing fractions on ``gpus`` and the rates of every job they host.

        A node whose CPU factor moves has the rates of all its GPUs' residents set again; the
        fractions of such a GPU outside ``gpus`` are recomputed only when it is dirty (its
        residents changed since they were last computed): otherwise they would come out as the
        same bits, and the fleet sums would move by ``x - x``, i.e. not at all. The same holds
        of the GPUs of ``gpus`` in ``fresh``: the caller's word that their fractions were
        computed by an earlier ``refresh`` and that nothing they are computed from (residents,
        their options, loads, throttles, batch sizes, the GPU's mode, memory and services)
        changed since (``Lifecycle.migrate``: the new GPUs, just refreshed by its ``start``);
        their residents' rates are set again all the same. A fresh GPU that is dirty, or that
        hosts a gang (whose ``sm_eff`` is its last computed GPU's), is recomputed.
        """
        c = self._cluster
        node_of = self._node_of
        factor = self._node_factor
        vcpus_of = self._node_vcpus
        extra: list[int] | None = None
        if cython.compiled:
            sv = _views_of(c)
        for node in (node_of[gpus[0]],) if len(gpus) == 1 else {node_of[g] for g in gpus}:
            # Python floats (``.item``), compiled C doubles (the cluster's typed views): the
            # same values as the numpy scalars, cheaper to use (``f`` a C double: the same
            # IEEE quotient, ``min`` of two doubles as ``min`` of the floats)
            used = sv.node_cpu[node] if cython.compiled else c.node_cpu_used.item(node)
            f = min(1.0, vcpus_of[node] / used) if used > 1e-9 else 1.0
            if f != factor[node]:
                factor[node] = f
                if extra is None:
                    extra = []
                extra.extend(self._node_gpus[node])
        dirty = self._dirty
        jobs = self._jobs
        residents = c.residents
        if extra is None and fresh is None and len(gpus) == 1:
            # One GPU, no node factor moved (a start or an end on one GPU, most of a replay's):
            # the loop below over it, without the record of the jobs met (a GPU's residents are
            # distinct jobs), in the same order: accrue each, the fractions, each one's rate
            g = gpus[0]
            res = [jobs[j] for j in residents[g]]
            for r in res:
                self.accrue(r)
            self.gpu_fractions(g, res)
            if dirty:
                dirty.discard(g)
            for r in res:
                self.set_rate(r)
            return
        affected: dict[int, JobState] = {}
        if extra is None:
            # (two GPUs already in order, a migration's: ``sorted(set(gpus))`` is ``gpus``)
            if len(gpus) == 1 or (len(gpus) == 2 and gpus[0] < gpus[1]):
                todo = gpus
            else:
                todo = sorted(set(gpus))
            skip: Set[int] = _NO_SKIP
        else:
            own = set(gpus)
            todo = sorted(own.union(extra))
            if self._fr_mech is not self.mechanisms:  # (not mid-episode, as documented)
                self._fr_mech = self.mechanisms
                dirty.update(range(c.n_gpus))
            skip = {g for g in extra if g not in own and g not in dirty}
        for g in todo:
            res = [jobs[j] for j in residents[g]]
            for r in res:
                jid = _take(r.spec, _S_JOB_ID)
                if jid not in affected:
                    self.accrue(r)  # (compiled: a C call, rates.pxd)
                    affected[jid] = r
            if g in skip or (fresh is not None and g in fresh and g not in dirty):
                # (a gang's ``sm_eff`` is its last computed GPU's: those are recomputed)
                for r in res:  # (a loop, not ``any``: no closure in a compiled cpdef)
                    if len(r.gpus) > 1:
                        break
                else:
                    continue
            self.gpu_fractions(g, res)
            if dirty:
                dirty.discard(g)
        for st in affected.values():
            self.set_rate(st)  # (compiled: a C call, rates.pxd)

    @cython.locals(
        util=cython.double, sm=cython.double, stp=cython.double, over=cython.double,
        d=cython.double, f=cython.double, hosts_online=cython.double, mem=cython.double,
        busy=cython.double, r=JobState, i=cython.Py_ssize_t, n=cython.Py_ssize_t,
        sv=_StateViews, cache=dict, memo=SpeedMemo, duty_of=dict, duty=cython.double,
        bits=cython.int, full=tuple,
    )  # fmt: skip
    def gpu_fractions(self, g: int, res: list[JobState]) -> None:
        """Set the sharing fractions (``frac``, ``sm_eff``) of GPU ``g``'s residents ``res``
        from the speed model, the online ones' latency terms, and the GPU's usage row.
        Compiled, the GPU's state is read through the cluster's typed views
        (:meth:`Cluster.state_views`: C reads of the same values, no ``.item`` calls)."""
        c = self._cluster
        util = sm = stp = over = 0.0
        if cython.compiled:
            sv = _views_of(c)
            n_online = sv.online_count[g]
        else:
            n_online = c.online_count.item(g)
        if res:
            mode = _MODES[sv.mode[g] if cython.compiled else c.mode.item(g)]
            bits = self._mech_bits
            gpulet_of = c.gpulet_of(g) if self._gpulets and mode is _MPS else None
            # priorities matter under time-slicing, and under MPS only with kernel-level
            # priority deployed (Tally / MuxFlow's xCUDA); plain MPS shares without them
            prio_on = mode is not _MPS or (bits & _KERNEL_PRIORITY) != 0
            bonus = self._bonus
            keys: list[tuple[Any, ...]] = []
            add = keys.append
            if gpulet_of is not None:
                # gpulets: a resident's SM share is its partition's (``Resident.gpulet``)
                shares = [gpulet_of[_take(r.spec, _S_JOB_ID)][1] / 100.0 for r in res]
            elif bits & _DYNAMIC_SM:
                shares = self._sm_shares(g, res)
            elif bits & _LAUNCH_QUOTA and mode is _MPS and len(res) == 1:
                shares = [1.0]  # GPUPool: alone, a client launches with the solo quota
            else:  # ``_sm_shares`` without dynamic SM: each option's static share
                opt_share = self._opt_share
                shares = [opt_share[r.option] for r in res]
            is_mig = mode is _MIG
            memo = self._memo
            duty_of = memo.model_duty  # (``ZOO[model].duty`` per model)
            # (index loops, not ``zip(..., strict=True)``: compiled, a zip with a keyword is a
            # generic call of ~3 k instructions; the lists are built here, of one length)
            n = len(res)
            for i in range(n):
                r = res[i]
                share = shares[i]
                inst = r.mig[r.gpus.index(g)] if is_mig else None
                spec = r.spec
                model = _take(spec, _S_MODEL)
                online = r.online
                # (compiled, a C double: the same IEEE product, or the record's own double)
                duty = r.serving.duty if online else duty_of[model] * r.throttle
                r.sm_eff = share
                batch = 0
                if online:  # ``r.effective_batch_size``, inlined (a property: a generic read)
                    batch = r.serving.batch_size
                    if not batch:
                        svc = _take(spec, _S_SERVICE)
                        batch = svc.batch_size if svc is not None else 0
                key: tuple[Any, ...] = (
                    model,
                    share,
                    inst.compute if inst else 0,
                    bin(inst.mask).count("1") if inst else 0,
                    1e-3 if duty < 1e-3 else duty,  # max(duty, 1e-3)
                    online,
                    (_take(spec, _S_PRIORITY) + (bonus if online else 0)) if prio_on else 0,
                    batch,  # its SM-share curve
                )
                if gpulet_of is not None:
                    key = (*key, gpulet_of[_take(spec, _S_JOB_ID)][0])
                add(key)
            gpu_type = self._type_of[g]  # (``c.type_name_of``'s strings, a list read)
            cache = memo.rates_cache  # (compiled, typed: a dictionary lookup, no method call)
            full = (gpu_type, mode, *keys)
            fr = cache.get(full)  # ``SpeedMemo.rates``, inlined
            if fr is None:  # (a miss: the key neither built nor looked up again)
                fr = memo.rates_miss(full, keys)
            if len(fr) != n:  # (what ``zip(..., strict=True)`` checked of the model's answer)
                raise ValueError(f"speed model: {len(fr)} rates for {n} residents")
            if n_online > 0:
                self._online_terms(g, gpu_type, mode, res, keys)
            for i in range(n):
                r = res[i]
                k = keys[i]
                f = fr[i]
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
        mem = (sv.mem_true[g] if cython.compiled else c.mem_true.item(g)) / self._mem_cap[g]
        mem = mem if mem < 1.0 else 1.0
        busy = 1.0 if res else 0.0
        self._usage.set_row(g, util, sm, mem, busy, stp, over, hosts_online)  # (a C call)

    @cython.locals(
        i=cython.Py_ssize_t, n=cython.Py_ssize_t, r=JobState, sv=ServingState, memo=SpeedMemo
    )
    def _online_terms(
        self, g: int, gpu_type: str, mode: SharingMode, res: list[JobState], keys: list[Any]
    ) -> None:
        """Set the per-batch wait and extra p99 (``serving.wait_ms``, ``.tail_ms``) of the online
        residents of GPU ``g`` from the speed model's ``latency_terms`` (memoised; zero for a
        speed model without it)."""
        memo = self._memo
        cache = memo.rates_cache
        n = len(res)
        for i in range(n):  # (index loops: see ``gpu_fractions``)
            r = res[i]
            k = keys[i]
            if r.online and r.gpus[0] == g:
                alone = cache.get((gpu_type, mode, k))  # ``SpeedMemo.rates``, inlined
                if alone is None:
                    alone = memo.rates(gpu_type, mode, [k])
                r.serving.alone_frac = alone[0]
        if not memo.has_terms or len(res) < 2:
            for r in res:
                sv = r.serving
                sv.wait_ms = sv.tail_ms = 0.0
            return
        terms = memo.terms_cache.get((gpu_type, mode, *keys))  # ``SpeedMemo.terms``, inlined
        if terms is None:
            terms = memo.terms(gpu_type, mode, keys)
        if len(terms) != n:  # (what ``zip(..., strict=True)`` checked of the model's answer)
            raise ValueError(f"speed model: {len(terms)} latency terms for {n} residents")
        for i in range(n):
            r = res[i]
            if r.online and r.gpus[0] == g:  # a service's first GPU sets its latency
                wait, tail = terms[i]
                sv = r.serving
                sv.wait_ms, sv.tail_ms = wait, tail

    @cython.locals(
        st=JobState, i=cython.Py_ssize_t, solo_cache=dict, events=EventQueue, memo=SpeedMemo,
        one=cython.double, solo_d=cython.double, frac_d=cython.double, cpu_d=cython.double,
        work=cython.double, remaining=cython.double, net_d=cython.double, v=cython.double,
        rate=cython.double, now=cython.double, t0=cython.double,
    )  # fmt: skip
    def set_rate(self, st: JobState) -> None:
        """Set running ``st``'s rate from its fractions; an offline job's completion event is
        rescheduled (a new epoch stales the old one)."""
        spec = st.spec
        model = _take(spec, _S_MODEL)
        gpus = st.gpus
        node_of = self._node_of
        memo = self._memo
        # (compiled, typed: its lookups are dictionary lookups, no method calls)
        solo_cache = memo.solo_cache
        if len(gpus) == 1:
            g = gpus[0]
            solo = solo_cache.get((model, self._type_of[g]))
            if solo is None:
                solo = memo.solo_speed(model, self._type_of[g])
            st.solo_rate = solo
            # (compiled, C doubles: the same two IEEE products, left to right, no float objects)
            solo_d = solo
            frac_d = st.frac[g]
            cpu_d = self._node_factor[node_of[g]]
            one = solo_d * frac_d * cpu_d
            st.rate = one
            rate = one
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
            type_of = self._type_of
            solo_of = []
            for g in gpus:  # ``SpeedMemo.solo_speed``, its memo inlined
                solo = solo_cache.get((model, type_of[g]))
                if solo is None:
                    solo = memo.solo_speed(model, type_of[g])
                solo_of.append(solo)
            frac = st.frac
            factor = self._node_factor
            st.solo_rate = min(solo_of) * net  # alone and exclusive: its slowest GPU type
            # ``min`` of the members' rates, as a loop (no closure in a compiled cpdef): the
            # first of the least, as ``min`` keeps it
            # (an index loop, not ``zip(..., strict=True)``: compiled, a zip with a keyword is a
            # generic call; ``solo_of`` was built from ``gpus``, of one length)
            rate = 0.0
            net_d = net
            for i in range(len(gpus)):
                g = gpus[i]
                # (compiled, C doubles: the same three IEEE products, left to right)
                solo_d = solo_of[i]
                frac_d = frac[g]
                cpu_d = factor[node_of[g]]
                v = solo_d * net_d * frac_d * cpu_d
                if i == 0 or v < rate:  # (the first, then a lesser one: ``min``'s pick)
                    rate = v
            st.rate = rate
        if not st.online:
            epoch = st.epoch = st.epoch + 1
            work = _take(spec, _S_WORK_S)
            remaining = work - st.work_done  # ``st.remaining``, inlined
            remaining = remaining if remaining > 0.0 else 0.0  # max(0.0, remaining)
            sim = self._sim
            # (C doubles: ``max`` of two is Python's, the second only where it is greater)
            now = sim.now
            t0 = st.setup_until
            t_done = (t0 if t0 > now else now) + remaining / rate
            events = sim.events  # (compiled, typed: ``push`` is a C call)
            events.push(t_done, _K_COMPLETE, _take(spec, _S_JOB_ID), epoch)
