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

import numpy as np

from gpu_sharing_env.cluster import Cluster, PlacementOption
from gpu_sharing_env.config import MechanismConfig, ScenarioConfig
from gpu_sharing_env.interference import AnalyticSpeedModel, Resident, SpeedModel
from gpu_sharing_env.metrics import Accumulator, compute_metrics
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.events import EventKind, EventQueue
from gpu_sharing_env.sim.faults import RANDOM_CAUSES, FaultCause, propagates
from gpu_sharing_env.sim.online import Health, MonitorThresholds, latency, next_health
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
        self.speed: SpeedModel = speed if speed is not None else AnalyticSpeedModel()
        self.workload = workload
        self.mechanisms: MechanismConfig = cfg.mechanisms
        self.horizon_s = cfg.horizon_h * 3600.0
        self.thresholds = MonitorThresholds()
        rates = cfg.faults.rate_per_gpu_h
        self._fault_w = np.array([rates.get(c.value, 0.0) for c in RANDOM_CAUSES])
        self._fault_rate_per_s = float(self._fault_w.sum()) / 3600.0
        self.window = cfg.env.queue_window
        self.done = True
        self.now = 0.0
        self.n_events = 0

    # ================================================================== public API
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
        self._g_sm = np.zeros(g)
        self._g_stp = np.zeros(g)
        self._g_over = np.zeros(g)
        self._g_mem = np.zeros(g)
        self._g_busy = np.zeros(g)
        self._g_online = np.zeros(g)
        self._sums = np.zeros(7)  # util, sm, mem, busy, stp, oversold, online-hosting GPUs
        self._online_ids = [s.job_id for s in specs if s.online]
        self.health = np.zeros(g, dtype=np.int64)
        self._node_factor = np.ones(self.cluster.n_nodes)
        self._noise: dict[int, float] = {}
        self._offline_total = sum(not s.online for s in specs)
        self._offline_left = self._offline_total
        self._in_system = 0
        self._mask_cache: dict[int, tuple[int, np.ndarray]] = {}
        self.done = False
        self.n_events = 0
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
        hit = self._mask_cache.get(job_id)
        if hit is not None and hit[0] == self.cluster.version:
            return hit[1]
        m = self.cluster.placement_mask(self.jobs[job_id].spec)
        self._mask_cache[job_id] = (self.cluster.version, m)
        return m

    def needs_decision(self) -> bool:
        """True when some job in the window can be placed now."""
        if self.done:
            return False
        return any(self.mask(s.job_id).any() for s in self.window_jobs())

    def check(self, d: Decision) -> str | None:
        """Why ``d`` is illegal now, or None."""
        if self.done:
            return "the episode is over"
        st = self.jobs.get(d.job_id)
        if st is not None and st.status is Status.RUNNING:
            return self._check_migration(st, d.gpu, d.option)
        if st is None or st.status is not Status.QUEUED:
            return f"job {d.job_id} is neither queued nor running"
        if d.job_id not in {s.job_id for s in self.window_jobs()}:
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

    def advance(self) -> None:
        """Run events until the next decision point or the end of the episode."""
        while not self.done:
            t = self.events.peek_time()
            if t > self.horizon_s or not len(self.events):
                self._integrate(self.horizon_s)
                self.done = True
                return
            self._integrate(t)
            changed = False
            while len(self.events) and self.events.peek_time() == t:
                changed |= self._handle(*self.events.pop())
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
    def _handle(self, t: float, kind: EventKind, subject: int, stamp: int) -> bool:
        if kind is EventKind.ARRIVAL:
            self._arrive(self.jobs[subject])
            return True
        if kind is EventKind.TICK:
            return self._tick()
        if kind is EventKind.READY:
            self.cluster.ready[subject] = True
            self.cluster.version += 1
            return True
        st = self.jobs[subject]
        if st.status is not Status.RUNNING:
            return False
        if kind is EventKind.COMPLETE and stamp == st.epoch:
            self._finish(st, Status.DONE)
            return True
        if kind is EventKind.END:
            self._finish(st, Status.DONE)
            return True
        if kind is EventKind.FAULT and stamp == st.run_id:
            w = self._fault_w / self._fault_w.sum()
            cause = RANDOM_CAUSES[int(self.rng_fault.choice(len(w), p=w))]
            self._fail(st, cause)
            if st.spec.online and st.status is Status.RUNNING:
                self._schedule_fault(st)
            return True
        over = any(self.cluster.mem_true[g] > self.cluster.mem_cap[g] + 1e-9 for g in st.gpus)
        if kind is EventKind.OOM and stamp == st.run_id and over:
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
        if not self._feasible(st.spec):
            st.status = Status.FAILED
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
        c = self.cluster
        ok = c._type_ok(spec.gpu_types) & (c.mem_cap >= spec.mem_gb - 1e-9)
        return int(ok.sum()) >= spec.num_gpus

    def _enqueue(self, st: JobState) -> None:
        st.status = Status.QUEUED
        st.enqueue_t = self.now
        bisect.insort(self.queue, (st.spec.submit_s, st.spec.job_id))
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
            mode_before = int(self.cluster.mode[g])
            d, inst = self.cluster.add(spec, g, opt)
            st.mig.append(inst)
            if d > 0 and (opt.mode is SharingMode.MIG or mode_before == SharingMode.MIG):
                self.acc.mig_reconfigs += 1
            if d > 0:
                self.cluster.ready[g] = False
                self.events.push(self.now + d, EventKind.READY, g)
            delay = max(delay, d)
        self.queue.remove((spec.submit_s, spec.job_id))
        st.status = Status.RUNNING
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
            self._update_load(st)
            self.events.push(max(self.now, spec.submit_s + spec.work_s), EventKind.END, spec.job_id)
        self._schedule_fault(st)
        if any(self.cluster.mem_true[g] > self.cluster.mem_cap[g] + 1e-9 for g in gpus):
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
        if st.status is not Status.RUNNING:
            return
        t0 = max(st.last_t, st.setup_until)
        if self.now > t0 and st.rate > 0:
            dt = self.now - t0
            st.work_done += st.rate * dt
            st.norm_integral += (st.rate / st.solo_rate) * dt
            st.run_time_s += dt
        st.last_t = self.now

    def _residents(self, g: int) -> list[JobState]:
        return [self.jobs[j] for j in self.cluster.residents[g]]

    def _sm_shares(self, g: int, res: list[JobState]) -> list[float]:
        opts = self.options
        shares = [opts[r.option].sm_pct / 100.0 for r in res]
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
        for node in {int(c.node_of[g]) for g in gpus}:
            used = c.node_cpu_used[node]
            f = min(1.0, c.node_vcpus[node] / used) if used > 1e-9 else 1.0
            if f != self._node_factor[node]:
                self._node_factor[node] = f
                first = int(c.node_first_gpu[node])
                todo.update(range(first, first + c.nodes[node].num_gpus))
        affected: dict[int, JobState] = {}
        for g in sorted(todo):
            res = self._residents(g)
            for r in res:
                if r.spec.job_id not in affected:
                    self._accrue(r)
                    affected[r.spec.job_id] = r
            self._gpu_fractions(g, res)
        for st in affected.values():
            self._set_rate(st)

    def _gpu_fractions(self, g: int, res: list[JobState]) -> None:
        c = self.cluster
        mode = SharingMode(int(c.mode[g])) if res else SharingMode.EXCLUSIVE
        shares = self._sm_shares(g, res)
        prio_online = self.cfg.sharing.online_priority
        residents = []
        for r, share in zip(res, shares, strict=True):
            inst = r.mig[r.gpus.index(g)] if mode is SharingMode.MIG else None
            duty = r.duty if r.spec.online else ZOO[r.spec.model].duty * r.throttle
            r.sm_eff = share
            residents.append(
                Resident(
                    model=r.spec.model,
                    sm_frac=share,
                    mig_compute_slices=inst.compute if inst else 0,
                    mig_mem_slices=bin(inst.mask).count("1") if inst else 0,
                    duty=max(duty, 1e-3),
                    online=r.spec.online,
                    priority=r.spec.priority + (100 if r.spec.online and prio_online else 0),
                )
            )
        fr = self.speed.rates(c.type_names[int(c.type_idx[g])], mode, residents) if res else []
        util = sm = stp = over = 0.0
        for r, rs, f in zip(res, residents, fr, strict=True):
            f *= 1.0 if r.spec.online else r.throttle
            r.frac[g] = f
            util += rs.duty * f
            sm += (
                rs.duty * f * (rs.mig_compute_slices / 7.0 if rs.mig_compute_slices else rs.sm_frac)
            )
            stp += f
            if not r.spec.online:
                over += f
        util, sm = min(1.0, util), min(1.0, sm)
        hosts_online = float(c.online_count[g] > 0)
        over = over if hosts_online else 0.0
        mem = min(1.0, c.mem_true[g] / c.mem_cap[g])
        busy = float(len(res) > 0)
        new = (util, sm, mem, busy, stp, over, hosts_online)
        arrays = (
            self._g_util, self._g_sm, self._g_mem, self._g_busy, self._g_stp, self._g_over,
            self._g_online,
        )  # fmt: skip
        s = self._sums
        for i, (arr, v) in enumerate(zip(arrays, new, strict=True)):
            s[i] += v - arr[g]
            arr[g] = v

    def _set_rate(self, st: JobState) -> None:
        c = self.cluster
        spec = st.spec
        gpus = st.gpus
        solo = min(
            self.speed.solo_speed(spec.model, c.type_names[int(c.type_idx[g])]) for g in gpus
        )
        net = 1.0
        if len(gpus) > 1:
            nodes = {int(c.node_of[g]) for g in gpus}
            if len(nodes) > 1:
                net = CROSS_NODE_FACTOR
            elif c.nodes[nodes.pop()].interconnect is Interconnect.PCIE:
                net = PCIE_GANG_FACTOR
        cpu = min(self._node_factor[int(c.node_of[g])] for g in gpus)
        frac = min(st.frac[g] for g in gpus)
        st.solo_rate = solo * net
        st.rate = solo * net * frac * cpu
        if not spec.online:
            st.epoch += 1
            t_done = max(self.now, st.setup_until) + st.remaining / st.rate
            self.events.push(t_done, EventKind.COMPLETE, spec.job_id, st.epoch)

    # ================================================================== online services
    def _update_load(self, st: JobState) -> None:
        svc = st.spec.service
        assert svc is not None
        jid = st.spec.job_id
        z = self._noise.get(jid, 0.0)
        z = NOISE_AR * z + math.sqrt(1 - NOISE_AR**2) * float(self.rng_noise.standard_normal())
        self._noise[jid] = z
        st.rps = svc.rate_rps(self.now) * math.exp(svc.noise_frac * z)
        if st.gpus:
            gt = self.cluster.type_names[int(self.cluster.type_idx[st.gpus[0]])]
            batch_ms = self.speed.batch_latency_ms(st.spec.model, gt, svc.batch_size)
            duty = min(1.0, st.rps * batch_ms / 1000.0 / svc.batch_size)
            # Quantised to DUTY_STEP: co-runners' rates are recomputed only when the online
            # load moves by a step, not at every small wiggle (and the speed model's cache hits).
            st.duty = max(DUTY_STEP, round(duty / DUTY_STEP) * DUTY_STEP)

    def _tick(self) -> bool:
        tick = self.cfg.tick_s
        changed = False
        live = (Status.RUNNING, Status.QUEUED)
        online = [self.jobs[j] for j in self._online_ids if self.jobs[j].status in live]
        touched: set[int] = set()
        for st in online:
            before = st.duty
            self._update_load(st)
            if st.status is Status.RUNNING and st.duty != before:
                touched.update(st.gpus)
        if touched:
            self._refresh(sorted(touched))
        acc = self.acc
        for st in online:
            req = st.rps * tick
            acc.requests += req
            if st.status is Status.QUEUED:
                continue
            changed |= self._account(st, req, tick)
        self._sample_frag()
        g = float(self.n_gpus)
        s = self._sums
        p99 = [st.p99_ms / st.spec.service.slo_ms for st in online if st.spec.service and st.gpus]
        self.timeseries.append(
            (self.now, s[0] / g, s[1] / g, s[3] / g, s[2] / g, max(p99) if p99 else 0.0)
        )
        if self.now + tick <= self.horizon_s:
            self.events.push(self.now + tick, EventKind.TICK, 0)
        return changed

    def _account(self, st: JobState, req: float, tick: float) -> bool:
        svc = st.spec.service
        assert svc is not None
        g = st.gpus[0]
        gt = self.cluster.type_names[int(self.cluster.type_idx[g])]
        solo_ms = self.speed.batch_latency_ms(st.spec.model, gt, svc.batch_size)
        f = min(st.frac[x] for x in st.gpus)
        stats = latency(solo_ms / f, st.rps, svc.batch_size, svc.slo_ms)
        solo = latency(solo_ms, st.rps, svc.batch_size, svc.slo_ms)
        out = min(1.0, max(0.0, (st.outage_until - (self.now - tick)) / tick))
        acc = self.acc
        acc.requests_ok += req * (1.0 - out) * stats.attainment
        acc.latency_weighted_ms += req * stats.mean_ms
        acc.p99_weighted_ms += req * stats.p99_ms
        acc.slowdown_weighted += req * stats.mean_ms / solo.mean_ms
        st.latency_ms, st.p99_ms = stats.mean_ms, stats.p99_ms
        if not self.mechanisms.protection:
            return False
        return self._monitor(g, stats.p99_ms / svc.slo_ms)

    def _monitor(self, g: int, ratio: float) -> bool:
        """MuxFlow's SysMonitor on the GPU hosting an online service."""
        c = self.cluster
        old = Health(int(self.health[g]))
        new = next_health(old, ratio, self.thresholds)
        self.health[g] = int(new)
        healthy = new is Health.HEALTHY
        changed = bool(c.healthy[g] != healthy)
        if changed:
            c.healthy[g] = healthy
            c.version += 1
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
        """FGD-style fragmentation: free memory on partly used GPUs that no queued job fits."""
        c = self.cluster
        pending = [self.jobs[j].spec.mem_gb for _, j in self.queue if not self.jobs[j].spec.online]
        need = min(pending) if pending else 0.0
        free = c.mem_cap - c.mem_decl
        part = (c.n_res > 0) & (free > 1e-9) & (free < need)
        self.acc.frag_sum += float((free[part] / c.mem_cap[part]).sum())
        self.acc.frag_samples += 1

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
