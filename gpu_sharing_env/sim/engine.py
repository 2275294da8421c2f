"""The simulator: ``reset`` → (``apply`` a decision | ``advance`` to the next decision point)*.

A fluid, event-driven model. Each running offline job progresses at a rate (reference-GPU
seconds of work per second) that is recomputed only when something on its GPUs changes: a job
arrives or leaves, an online service's load moves, SysMonitor throttles. Completion events are
rescheduled lazily (an epoch number stales the old one), so an event costs O(GPUs it touches),
never O(cluster).

Decision points: after events, if some job in the visible queue window has a legal placement,
control returns to the caller (a policy or the Gymnasium env). ``advance`` runs events until the
next such point or the end of the episode.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from heapq import heappop
from typing import Any

import numpy as np

from gpu_sharing_env.cluster import Cluster, PlacementOption
from gpu_sharing_env.config import MechanismConfig, ScenarioConfig
from gpu_sharing_env.interference import AnalyticSpeedModel, Resident, SpeedModel
from gpu_sharing_env.metrics import Accumulator, compute_metrics
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.events import EventKind, EventQueue
from gpu_sharing_env.sim.faults import RANDOM_CAUSES, FaultCause, propagates
from gpu_sharing_env.sim.online import (
    UNSTABLE_LATENCY_X_SLO,
    Health,
    MonitorThresholds,
    next_health,
)
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.zoo import ZOO

#: Gang jobs spanning nodes synchronise over the network (assumption: 15% slower than one
#: NVLink node; Sia's placement profiles show multi-node step times 10-30% above single-node).
CROSS_NODE_FACTOR = 0.85
#: Gang jobs inside a PCIe node (assumption: 5% slower than NVLink).
PCIE_GANG_FACTOR = 0.95
#: Resolution of an online service's utilisation as seen by co-runners (2 %).
DUTY_STEP = 0.02
#: Smoothness of the online load noise (AR(1) coefficient per tick): smooth over minutes.
NOISE_AR = 0.9
#: Innovation scale of the AR(1) noise (stationary variance 1).
_NOISE_SCALE = math.sqrt(1 - NOISE_AR**2)
#: Standard normals are drawn from ``rng_noise`` this many at a time (the same stream, in the
#: same order, as one draw per use: numpy's generators fill arrays element by element).
_NOISE_CHUNK = 512
#: ``2.0 * math.pi``: ``ServiceSpec.rate_rps`` evaluates ``2.0 * math.pi * x`` as ``(2.0 * pi) * x``.
_TWO_PI = 2.0 * math.pi
_RUNNING = Status.RUNNING
_QUEUED = Status.QUEUED
_MODES = tuple(SharingMode)  # indexed by value
_MIG = SharingMode.MIG
#: Event kinds as plain ints (``EventQueue.pop_raw``): no enum construction per event.
_K_COMPLETE = int(EventKind.COMPLETE)
_K_END = int(EventKind.END)
_K_FAULT = int(EventKind.FAULT)
_K_OOM = int(EventKind.OOM)
_K_READY = int(EventKind.READY)
_K_TICK = int(EventKind.TICK)
_K_ARRIVAL = int(EventKind.ARRIVAL)
assert all(m.value == i for i, m in enumerate(_MODES))
_HEALTHY = int(Health.HEALTHY)


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
        svc.batch_size,
        svc.slo_ms,
    )


WorkloadFn = Callable[[np.random.Generator], list[JobSpec]]


@dataclass(frozen=True, slots=True)
class Decision:
    """Place queued job ``job_id`` with its first GPU at ``gpu`` using option ``option``."""

    job_id: int
    gpu: int
    option: int


class IllegalDecision(ValueError):
    """A decision the legality function rejects; the message says why."""


class Simulator:
    """Event-driven GPU cluster simulator (no Gymnasium, torch or YAML here).

    Args:
        cfg: The scenario.
        nodes: The fleet.
        workload: Called at every ``reset`` with a seeded generator; returns the jobs.
        speed: Speed/interference model (default: the calibrated analytic model).
    """

    def __init__(
        self,
        cfg: ScenarioConfig,
        nodes: Sequence[NodeSpec],
        workload: WorkloadFn,
        speed: SpeedModel | None = None,
    ) -> None:
        self.cfg = cfg
        self.cluster = Cluster(nodes, cfg.sharing)
        self.options: tuple[PlacementOption, ...] = self.cluster.options
        self.speed = speed if speed is not None else AnalyticSpeedModel()
        self.workload = workload
        self.mechanisms: MechanismConfig = cfg.mechanisms
        self.horizon_s = cfg.horizon_h * 3600.0
        self.thresholds = MonitorThresholds()
        c = self.cluster
        # Static per-GPU facts as Python lists (scalar reads on the hot path).
        self._node_of: list[int] = c.node_of.tolist()
        self._type_of: list[str] = list(c.type_name_of)
        self._node_gpus: list[range] = [
            range(int(first), int(first) + n.num_gpus)
            for first, n in zip(c.node_first_gpu, c.nodes, strict=True)
        ]
        self._node_pcie = [n.interconnect is Interconnect.PCIE for n in c.nodes]
        self._node_vcpus: list[float] = c.node_vcpus.tolist()
        self._mem_cap: list[float] = c.mem_cap.tolist()
        self._n_gpus_f = float(c.n_gpus)
        #: Per placement option: its MPS SM share as a fraction (``sm_pct / 100.0``).
        self._opt_share = [o.sm_pct / 100.0 for o in self.options]
        #: GPUs of the fleet whose type and memory fit, by (gpu_types, mem_gb) (static).
        self._fit_count: dict[tuple[tuple[str, ...], float], int] = {}
        rates = cfg.faults.rate_per_gpu_h
        self._fault_w = np.array([rates.get(c.value, 0.0) for c in RANDOM_CAUSES])
        self._fault_rate_per_s = float(self._fault_w.sum()) / 3600.0
        self.window = cfg.env.queue_window
        self.done = True
        self.now = 0.0
        self.n_events = 0
        self.n_service_ticks = 0

    # ================================================================== public API
    @property
    def speed(self) -> SpeedModel:
        """The speed/interference model (its answers are memoised until it is replaced)."""
        return self._speed

    @speed.setter
    def speed(self, model: SpeedModel) -> None:
        self._speed = model
        self._rates_cache: dict[tuple[Any, ...], list[float]] = {}
        self._solo_cache: dict[tuple[str, str], float] = {}
        self._batch_ms: dict[tuple[str, int, int], float] = {}

    def set_mechanisms(self, **flags: bool) -> None:
        """Switch cluster mechanisms (``protection``, ``dynamic_sm``) for the next reset."""
        self.mechanisms = replace(self.mechanisms, **flags)

    def reset(self, seed: int) -> None:
        """Start an episode; the same seed gives the same episode, bit for bit."""
        ss = np.random.SeedSequence(seed)
        w_ss, f_ss, n_ss = ss.spawn(3)
        specs = sorted(
            self.workload(np.random.default_rng(w_ss)), key=lambda s: (s.submit_s, s.job_id)
        )
        ids = [s.job_id for s in specs]
        if len(set(ids)) != len(ids):
            raise ValueError("workload: job_id values must be unique")
        self.rng_fault = np.random.default_rng(f_ss)
        self.rng_noise = np.random.default_rng(n_ss)
        self.cluster.reset()
        self.jobs: dict[int, JobState] = {s.job_id: JobState(s) for s in specs}
        self._arrivals = specs
        self._next_arrival = 0
        self.queue: list[tuple[float, int]] = []  # sorted (submit_s, job_id)
        self.events = EventQueue()
        self.now = 0.0
        self.acc = Accumulator()
        g = self.cluster.n_gpus
        self._g_util = np.zeros(g)
        #: Per GPU (Python floats, read on the hot path): util, sm, mem, busy, stp, oversold,
        #: hosts-online; ``_g_util`` mirrors the first for views.
        self._g_vals: list[tuple[float, ...]] = [(0.0,) * 7] * g
        self._sums = [0.0] * 7  # their sums over the fleet
        self._online_ids = [s.job_id for s in specs if s.online]
        self.health = np.zeros(g, dtype=np.int64)
        self._node_factor = [1.0] * self.cluster.n_nodes
        self._noise_buf: list[float] = []
        self._noise_i = 0
        #: Online services that arrived and have not ended, in arrival (= ``_online_ids``) order.
        self._online_arrived: list[JobState] = []
        self._frag_cv = self._frag_qv = -1  # (cluster, queue) versions of ``_frag_val``
        self._status_version = 0  # bumps at every job status change (``_live_online``)
        self._live: list[JobState] = []
        self._live_c: list[tuple[Any, ...]] = []
        self._live_version = -1
        self._queue_version = 0
        self._frag_val = 0.0
        self._offline_total = sum(not s.online for s in specs)
        self._offline_left = self._offline_total
        self._in_system = 0
        self._mask_cache: dict[int, tuple[int, np.ndarray, bool]] = {}
        #: ``ClusterView.job``'s cache: job id -> (state, changing fields, JobView).
        self._view_cache: dict[int, tuple[Any, ...]] = {}
        self.done = False
        self.n_events = 0
        #: Load ticks x live services at each (the online model's work; ``scripts/bench.py``).
        self.n_service_ticks = 0
        #: Per tick: (t_s, gpu_util, sm_activity, busy_gpu_frac, gpu_mem_util, max p99/SLO).
        self.timeseries: list[tuple[float, float, float, float, float, float]] = []
        self._schedule_next_arrival()
        self.events.push(self.cfg.tick_s, EventKind.TICK, 0)
        self.advance()

    @property
    def n_gpus(self) -> int:
        return self.cluster.n_gpus

    @property
    def gpu_util(self) -> np.ndarray:
        """Per-GPU utilisation now (fraction of time a kernel runs), read-only."""
        v = self._g_util.view()
        v.flags.writeable = False
        return v

    @property
    def util_sum(self) -> float:
        """Sum of ``gpu_util`` over the fleet."""
        return float(self._sums[0])

    @property
    def offline_in_system(self) -> int:
        """Offline jobs queued or running now."""
        return self._in_system

    def window_jobs(self) -> list[JobSpec]:
        """The first ``queue_window`` queued jobs: the ones a decision may place."""
        return [self.jobs[jid].spec for _, jid in self.queue[: self.window]]

    def queued_jobs(self) -> list[JobSpec]:
        return [self.jobs[jid].spec for _, jid in self.queue]

    def mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) placements of a queued job, from the cluster's legality function."""
        return self._mask_entry(job_id)[1]

    def placeable(self, job_id: int) -> bool:
        """Whether ``mask(job_id)`` allows anything."""
        return self._mask_entry(job_id)[2]

    def _mask_entry(self, job_id: int) -> tuple[int, np.ndarray, bool]:
        version = self.cluster.version
        hit = self._mask_cache.get(job_id)
        if hit is not None and hit[0] == version:
            return hit
        m = self.cluster.placement_mask(self.jobs[job_id].spec)
        hit = self._mask_cache[job_id] = (version, m, bool(m.any()))
        return hit

    def needs_decision(self) -> bool:
        """True when some job in the window can be placed now."""
        if self.done:
            return False
        # ``any(self.placeable(jid) ...)`` with the mask cache's hit test inlined
        version = self.cluster.version
        cache = self._mask_cache
        for _, jid in self.queue[: self.window]:
            hit = cache.get(jid)
            if hit is None or hit[0] != version:
                hit = self._mask_entry(jid)
            if hit[2]:
                return True
        return False

    def check(self, d: Decision) -> str | None:
        """Why ``d`` is illegal now, or None."""
        if self.done:
            return "the episode is over"
        st = self.jobs.get(d.job_id)
        if st is not None and st.status is Status.RUNNING:
            return self._check_migration(st, d.gpu, d.option)
        if st is None or st.status is not Status.QUEUED:
            return f"job {d.job_id} is neither queued nor running"
        if d.job_id not in [jid for _, jid in self.queue[: self.window]]:
            return f"job {d.job_id} is queued but outside the window of {self.window}"
        in_range = 0 <= d.gpu < self.n_gpus and 0 <= d.option < len(self.options)
        if in_range and self.mask(d.job_id)[d.gpu, d.option]:
            return None
        return self.cluster.check(st.spec, d.gpu, d.option)

    def apply(self, d: Decision) -> None:
        """Carry out a decision (raises :class:`IllegalDecision` if illegal).

        A decision about a queued job places it; about a running job, migrates it (Gandiva's
        introspective migration): the job checkpoints, moves and resumes after
        ``sharing.migration_s`` without losing progress.
        """
        why = self.check(d)
        if why is not None:
            raise IllegalDecision(why)
        st = self.jobs[d.job_id]
        if st.status is Status.RUNNING:
            self._migrate(st, d.gpu, d.option)
        else:
            self._start(st, d.gpu, d.option)
        self.acc.decisions += 1

    def _check_migration(self, st: JobState, gpu: int, option: int) -> str | None:
        if not (0 <= gpu < self.n_gpus and 0 <= option < len(self.options)):
            return self.cluster.check(st.spec, gpu, option)
        c = self.cluster
        old = self.options[st.option]
        for g in st.gpus:  # legality as if the job had left its GPUs
            c.remove(st.spec, g, old)
        why = c.check(st.spec, gpu, option)
        mig = []
        for g in st.gpus:
            _, inst = c.add(st.spec, g, old)
            mig.append(inst)
        st.mig = mig
        return why

    def _migrate(self, st: JobState, gpu: int, option: int) -> None:
        self._accrue(st)
        work, attempts, first = st.work_done, st.attempts, st.first_start_t
        freed = self._remove(st)
        self._queue_insert(st)
        self._start(st, gpu, option)
        st.work_done, st.attempts, st.first_start_t = work, attempts, first
        st.run_work_start = work
        st.setup_until = max(st.setup_until, self.now + self.cfg.sharing.migration_s)
        self.acc.migrations += 1
        self._refresh(sorted(set(freed) | set(st.gpus)))

    def _queue_insert(self, st: JobState) -> None:
        """Put a running job back in the queue without counting it as re-queued work."""
        bisect.insort(self.queue, (st.spec.submit_s, st.spec.job_id))
        self._queue_version += 1

    def advance(self) -> None:
        """Run events until the next decision point or the end of the episode."""
        # The hot loop of the simulator (~11 events per env step on ``default``): events are
        # popped from the heap here, ticks and stale completions are dispatched inline and the
        # rest goes through ``_handle``.
        #
        # Fused ticks: the next load tick is pushed when the instant of the current one ends,
        # and when no other event comes at or before it, it is run right here as its own
        # instant instead of going through the heap (the same instants in the same order: a
        # tick is the only event of its kind, so its sequence number never breaks a tie).
        heap = self.events.heap
        handle = self._handle
        tick = self._tick
        tick_s = self.cfg.tick_s
        jobs = self.jobs
        horizon = self.horizon_s
        while not self.done:
            if not heap or heap[0][0] > horizon:
                self._integrate(horizon)
                self.done = True
                return
            t = heap[0][0]
            self._integrate(t)
            changed = False
            ticked = False
            while heap and heap[0][0] == t:
                _, kind, _, subject, stamp = heappop(heap)
                if kind == _K_TICK:
                    changed |= tick()
                    ticked = True
                elif kind == _K_COMPLETE:
                    # ``_handle``'s COMPLETE case; a stale one (older epoch) changes nothing
                    st = jobs[subject]
                    if st.status is _RUNNING and stamp == st.epoch:
                        self._finish(st, Status.DONE)
                        changed = True
                else:
                    changed |= handle(t, kind, subject, stamp)
                self.n_events += 1
            while ticked:
                nxt = t + tick_s
                if nxt > horizon:
                    break
                if (
                    changed
                    or (heap and heap[0][0] <= nxt)
                    or (self._offline_total and not self._offline_left)
                ):
                    self.events.push(nxt, _K_TICK, 0)
                    break
                # nothing to decide and no other event up to the next tick: run it now
                t = nxt
                self._integrate(t)
                changed = tick()
                self.n_events += 1
            if self._offline_total and not self._offline_left:
                self.done = True
                return
            if changed and self.needs_decision():
                return

    def metrics(self) -> dict[str, float]:
        """Episode metrics under the schema's names (final once ``done``)."""
        return compute_metrics(self.jobs.values(), self.acc, self.n_gpus, self.now)

    # ================================================================== events
    def _handle(self, t: float, kind: int, subject: int, stamp: int) -> bool:
        """Handle one event other than a load tick (``kind`` an :class:`EventKind` value; ticks
        and their rescheduling are :meth:`advance`'s own); True if the state changed."""
        if kind == _K_ARRIVAL:
            self._arrive(self.jobs[subject])
            return True
        if kind == _K_READY:
            self.cluster.set_ready(subject, True)
            return True
        st = self.jobs[subject]
        if st.status is not _RUNNING:
            return False
        if kind == _K_COMPLETE and stamp == st.epoch:
            self._finish(st, Status.DONE)
            return True
        if kind == _K_END:
            self._finish(st, Status.DONE)
            return True
        if kind == _K_FAULT and stamp == st.run_id:
            w = self._fault_w / self._fault_w.sum()
            cause = RANDOM_CAUSES[int(self.rng_fault.choice(len(w), p=w))]
            self._fail(st, cause)
            if st.spec.online and st.status is Status.RUNNING:
                self._schedule_fault(st)
            return True
        if (
            kind == _K_OOM
            and stamp == st.run_id
            and any(self.cluster.mem_true[g] > self.cluster.mem_cap[g] + 1e-9 for g in st.gpus)
        ):
            self._fail(st, FaultCause.OOM)
            return True
        return False

    def _schedule_next_arrival(self) -> None:
        if self._next_arrival < len(self._arrivals):
            s = self._arrivals[self._next_arrival]
            self._next_arrival += 1
            self.events.push(s.submit_s, EventKind.ARRIVAL, s.job_id)

    def _arrive(self, st: JobState) -> None:
        self._schedule_next_arrival()
        if st.spec.online:
            self._online_arrived.append(st)
        if not self._feasible(st.spec):
            st.status = Status.FAILED
            self._status_version += 1
            st.finish_t = self.now
            self.acc.errors_by_cause["unschedulable"] = (
                self.acc.errors_by_cause.get("unschedulable", 0) + 1
            )
            if not st.spec.online:
                self._offline_left -= 1
            return
        self._enqueue(st)

    def _feasible(self, spec: JobSpec) -> bool:
        """Could the job ever run on this fleet (an empty cluster)?"""
        key = (spec.gpu_types, spec.mem_gb)
        n = self._fit_count.get(key)
        if n is None:
            c = self.cluster
            ok = c._type_ok(spec.gpu_types) & (c.mem_cap >= spec.mem_gb - 1e-9)
            if len(self._fit_count) >= 4096:
                self._fit_count.clear()
            n = self._fit_count[key] = int(ok.sum())
        return n >= spec.num_gpus

    def _enqueue(self, st: JobState) -> None:
        st.status = Status.QUEUED
        self._status_version += 1
        st.enqueue_t = self.now
        bisect.insort(self.queue, (st.spec.submit_s, st.spec.job_id))
        self._queue_version += 1
        if not st.spec.online:
            self._in_system += 1

    # ================================================================== start / stop
    def _start(self, st: JobState, first_gpu: int, option: int) -> None:
        spec = st.spec
        opt = self.options[option]
        gpus = self.cluster.gang_gpus(spec, first_gpu, option)
        delay = 0.0
        st.mig = []
        for g in gpus:
            mode_before = self.cluster.mode.item(g)
            d, inst = self.cluster.add(spec, g, opt)
            st.mig.append(inst)
            if d > 0 and (opt.mode is SharingMode.MIG or mode_before == SharingMode.MIG):
                self.acc.mig_reconfigs += 1
            if d > 0:
                self.cluster.set_ready(g, False)
                self.events.push(self.now + d, EventKind.READY, g)
            delay = max(delay, d)
        self.queue.remove((spec.submit_s, spec.job_id))
        self._queue_version += 1
        # Only queued jobs have masks: a started job's would be kept for nothing (at 6,500 GPUs
        # an entry is 40 kB; 20,000 of them were most of a replay's memory).
        self._mask_cache.pop(spec.job_id, None)
        st.status = Status.RUNNING
        self._status_version += 1
        st.gpus = gpus
        st.option = option
        st.last_t = self.now
        st.setup_until = self.now + delay
        st.run_start_t = self.now
        st.run_work_start = st.work_done
        st.run_id += 1
        st.throttle = 1.0
        st.frac = {}
        if math.isnan(st.first_start_t):
            st.first_start_t = self.now
        if spec.online:
            st.solo_batch_ms = self._solo_batch_ms(st)
            self._update_load(st)
            self.events.push(max(self.now, spec.submit_s + spec.work_s), EventKind.END, spec.job_id)
        self._schedule_fault(st)
        mem_true = self.cluster.mem_true
        if any(mem_true.item(g) > self._mem_cap[g] + 1e-9 for g in gpus):
            t_oom = self.now + delay + self.cfg.faults.oom_delay_s
            self.events.push(t_oom, EventKind.OOM, spec.job_id, st.run_id)
        self._refresh(gpus)

    def _schedule_fault(self, st: JobState) -> None:
        if self._fault_rate_per_s <= 0:
            return
        dt = self.rng_fault.exponential(1.0 / (self._fault_rate_per_s * st.spec.num_gpus))
        self.events.push(self.now + dt, EventKind.FAULT, st.spec.job_id, st.run_id)

    def _remove(self, st: JobState) -> list[int]:
        self._accrue(st)
        opt = self.options[st.option]
        for g in st.gpus:
            self.cluster.remove(st.spec, g, opt)
        gpus, st.gpus = st.gpus, []
        st.epoch += 1
        st.run_id += 1
        st.frac = {}
        st.rate = 0.0
        return gpus

    def _finish(self, st: JobState, status: Status) -> None:
        gpus = self._remove(st)
        st.status = status
        self._status_version += 1
        st.finish_t = self.now
        if not st.spec.online:
            self._offline_left -= 1
            self._in_system -= 1
        self._refresh(gpus)

    def _lose_since_checkpoint(self, st: JobState) -> float:
        """Roll back to the last checkpoint; returns the wall seconds of progress lost."""
        ran = max(0.0, self.now - max(st.run_start_t, st.setup_until))
        if ran <= 0:
            return 0.0
        lost_wall = ran % st.spec.checkpoint_interval_s
        gained = st.work_done - st.run_work_start
        st.work_done -= gained * (lost_wall / ran)
        return lost_wall

    def _preempt(self, st: JobState) -> tuple[list[int], float]:
        """Stop a running offline job, roll it back and re-queue or give it up."""
        self._accrue(st)
        lost_wall = self._lose_since_checkpoint(st)
        gpus = self._remove(st)
        self._in_system -= 1
        if st.attempts >= self.cfg.faults.max_attempts:
            st.status = Status.FAILED
            self._status_version += 1
            st.finish_t = self.now
            self._offline_left -= 1
        else:
            self._enqueue(st)
        return gpus, lost_wall

    def _fail(self, st: JobState, cause: FaultCause, victim: bool = False) -> None:
        acc = self.acc
        acc.errors_total += 1
        acc.errors_propagated += int(victim)
        acc.errors_by_cause[cause.value] = acc.errors_by_cause.get(cause.value, 0) + 1
        gpus = list(st.gpus)
        mode = SharingMode(int(self.cluster.mode[gpus[0]]))
        others = sorted({j for g in gpus for j in self.cluster.residents[g]} - {st.spec.job_id})
        if st.spec.online:
            st.outage_until = self.now + self.cfg.faults.restart_delay_s
            acc.gpu_hours_lost += self.cfg.faults.restart_delay_s * len(gpus) / 3600.0
        else:
            st.attempts += 1
            freed, lost_wall = self._preempt(st)
            acc.gpu_hours_lost += lost_wall * len(freed) / 3600.0
            self._refresh(freed)
        mixed = self.cfg.faults.mixed_handling or self.mechanisms.mixed_error_handling
        if not victim and propagates(cause, mode, mixed):
            for jid in others:
                other = self.jobs[jid]
                if other.status is Status.RUNNING:
                    self._fail(other, cause, victim=True)

    def evict(self, job_id: int) -> None:
        """Evict a running offline job (SysMonitor, or a policy's preemption)."""
        st = self.jobs[job_id]
        st.evictions += 1
        self.acc.evictions += 1
        gpus, _ = self._preempt(st)
        self._refresh(gpus)

    # ================================================================== rates
    def _accrue(self, st: JobState) -> None:
        if st.status is not _RUNNING:
            return
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

    def _sm_shares(self, g: int, res: list[JobState]) -> list[float]:
        opt_share = self._opt_share
        shares = [opt_share[r.option] for r in res]
        if (
            self.mechanisms.dynamic_sm
            and self.cluster.mode[g] == SharingMode.MPS
            and self.cluster.online_count[g] > 0
        ):
            # MuxFlow's dynamic SM allocation: the offline clients get what the online service
            # leaves at its current load (its solo SM activity, plus a 20% margin).
            online_duty = sum(r.duty for r in res if r.spec.online)
            n_off = sum(not r.spec.online for r in res)
            if n_off:
                off_total = min(0.9, max(0.1, 1.0 - 1.2 * online_duty))
                n_on = len(res) - n_off
                shares = [
                    (1.0 - off_total) / n_on if r.spec.online else off_total / n_off for r in res
                ]
        return shares

    def _refresh(self, gpus: Sequence[int]) -> None:
        """Recompute sharing fractions on ``gpus`` and the rates of every job they host."""
        c = self.cluster
        todo = set(gpus)
        node_of = self._node_of
        used_of = c.node_cpu_used
        vcpus_of = self._node_vcpus
        factor = self._node_factor
        for node in {node_of[g] for g in gpus}:
            # Python floats (``.item``): the same values as the numpy scalars, cheaper to use
            used = used_of.item(node)
            f = min(1.0, vcpus_of[node] / used) if used > 1e-9 else 1.0
            if f != factor[node]:
                factor[node] = f
                todo.update(self._node_gpus[node])
        affected: dict[int, JobState] = {}
        jobs = self.jobs
        residents = c.residents
        accrue = self._accrue
        fractions = self._gpu_fractions
        for g in sorted(todo):
            res = [jobs[j] for j in residents[g]]
            for r in res:
                jid = r.spec.job_id
                if jid not in affected:
                    accrue(r)
                    affected[jid] = r
            fractions(g, res)
        set_rate = self._set_rate
        for st in affected.values():
            set_rate(st)

    def _gpu_fractions(self, g: int, res: list[JobState]) -> None:
        c = self.cluster
        util = sm = stp = over = 0.0
        if res:
            mode = _MODES[c.mode.item(g)]
            if self.mechanisms.dynamic_sm:
                shares = self._sm_shares(g, res)
            else:  # ``_sm_shares`` without dynamic SM: each option's static share
                opt_share = self._opt_share
                shares = [opt_share[r.option] for r in res]
            prio_online = self.cfg.sharing.online_priority
            is_mig = mode is _MIG
            keys = []
            for r, share in zip(res, shares, strict=True):
                inst = r.mig[r.gpus.index(g)] if is_mig else None
                spec = r.spec
                online = r.online
                duty = r.duty if online else ZOO[spec.model].duty * r.throttle
                r.sm_eff = share
                keys.append(
                    (
                        spec.model,
                        share,
                        inst.compute if inst else 0,
                        bin(inst.mask).count("1") if inst else 0,
                        1e-3 if duty < 1e-3 else duty,  # max(duty, 1e-3)
                        online,
                        spec.priority + (100 if online and prio_online else 0),
                    )
                )
            gpu_type = c.type_name_of[g]
            fr = self._rates_cache.get((gpu_type, mode, *keys))  # ``_rates``' memo, inlined
            if fr is None:
                fr = self._rates(gpu_type, mode, keys)
            for r, k, f in zip(res, keys, fr, strict=True):
                online = r.online
                f *= 1.0 if online else r.throttle
                r.frac[g] = f
                d = k[4]
                util += d * f
                sm += d * f * (k[2] / 7.0 if k[2] else k[1])
                stp += f
                if not online:
                    over += f
        # ``min(1.0, x)`` as ``x if x < 1.0 else 1.0`` (the same value, NaN included)
        util = util if util < 1.0 else 1.0
        sm = sm if sm < 1.0 else 1.0
        hosts_online = 1.0 if c.online_count.item(g) > 0 else 0.0
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
            net = 1.0
            cpu = self._node_factor[node_of[g]]
            frac = st.frac[g]
        else:
            solo = min(self._solo_speed(spec.model, self._type_of[g]) for g in gpus)
            net = 1.0
            nodes = {node_of[g] for g in gpus}
            if len(nodes) > 1:
                net = CROSS_NODE_FACTOR
            elif self._node_pcie[nodes.pop()]:
                net = PCIE_GANG_FACTOR
            cpu = min(self._node_factor[node_of[g]] for g in gpus)
            frac = min(st.frac[g] for g in gpus)
        st.solo_rate = solo * net
        rate = st.rate = solo * net * frac * cpu
        if not st.online:
            epoch = st.epoch = st.epoch + 1
            remaining = spec.work_s - st.work_done  # ``st.remaining``, inlined
            remaining = remaining if remaining > 0.0 else 0.0  # max(0.0, remaining)
            t_done = max(self.now, st.setup_until) + remaining / rate
            self.events.push(t_done, _K_COMPLETE, spec.job_id, epoch)

    # ================================================================== online services
    def _solo_speed(self, model: str, gpu_type: str) -> float:
        """``speed.solo_speed`` (memoised: a pure function of its arguments)."""
        v = self._solo_cache.get((model, gpu_type))
        if v is None:
            v = self._solo_cache[model, gpu_type] = self.speed.solo_speed(model, gpu_type)
        return v

    def _solo_batch_ms(self, st: JobState) -> float:
        """Solo batch latency of online ``st`` on the type of its first GPU (cached)."""
        c = self.cluster
        svc = st.spec.service
        assert svc is not None
        key = (st.spec.model, int(c.type_idx[st.gpus[0]]), svc.batch_size)
        ms = self._batch_ms.get(key)
        if ms is None:
            gt = c.type_names[key[1]]
            ms = self._batch_ms[key] = self.speed.batch_latency_ms(key[0], gt, svc.batch_size)
        return ms

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
            duty = st.rps * batch_ms / 1000.0 / svc.batch_size
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
            batch_ms = solo_ms / f
            rho = rps * batch_ms / 1000.0 / batch
            if rho >= 1.0:
                mean_ms = p99_ms = UNSTABLE_LATENCY_X_SLO * slo_ms
                attainment = 0.0
            else:
                m = batch_ms / (2.0 * (1.0 - rho))
                p99_ms = batch_ms + (m * log(100.0 * rho) if rho > 0.01 else 0.0)
                att = 1.0 - rho * exp(-(slo_ms - batch_ms) / m) if slo_ms > batch_ms else 0.0
                attainment = att if att > 0.0 else 0.0  # max(0.0, att)
                mean_ms = batch_ms + rho * m
            # x / 1.0 == x exactly: at full speed the solo statistics are the same numbers
            if f == 1.0:
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
            slow_w += req * mean_ms / solo_mean
            st.latency_ms, st.p99_ms = mean_ms, p99_ms
            ratio = p99_ms / slo_ms
            if protection:
                # SysMonitor may evict or throttle (and accrue) but never touches the request
                # accumulators: write them back around it all the same.
                acc.requests, acc.requests_ok = requests, requests_ok
                acc.latency_weighted_ms, acc.p99_weighted_ms = lat_w, p99_w
                acc.slowdown_weighted = slow_w
                changed |= self._monitor(gpus[0], ratio)
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
        """MuxFlow's SysMonitor on the GPU hosting an online service."""
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
        throttle = self.thresholds.throttle_factor if new is Health.OVERLOADED else 1.0
        if any(r.throttle != throttle for r in offline):
            for r in offline:
                self._accrue(r)
                r.throttle = throttle
            self._refresh([g])
        return changed

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
