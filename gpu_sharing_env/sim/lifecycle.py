"""Job lifecycle of :class:`~gpu_sharing_env.sim.engine.Simulator`: arrivals and the queue,
starts, stops, preemption with checkpoint rollback, faults (and their propagation), eviction and
migration. A mixin: ``Simulator`` is assembled in ``engine.py`` (shared state: ``base.py``).
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING, Any, cast

from gpu_sharing_env.cluster import PlacementOption
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.base import SimulatorBase
from gpu_sharing_env.sim.events import EventKind
from gpu_sharing_env.sim.faults import FaultCause, propagates
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_env.workload.job import JobSpec

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator


def mask_signature(spec: JobSpec) -> tuple[Any, ...]:
    """What a job's placement mask depends on (``Cluster.placement_mask``): its memory, GPU
    types, kind and gang size. Jobs with equal signatures have equal masks."""
    return (spec.mem_gb, spec.gpu_types, spec.online, spec.num_gpus)


class _Lifecycle(SimulatorBase):
    """Arrivals, starts, stops, faults, eviction and migration of jobs."""

    # ================================================================== arrivals
    def _schedule_next_arrival(self) -> None:
        if self._next_arrival < len(self._arrivals):
            s = self._arrivals[self._next_arrival]
            self._next_arrival += 1
            self.events.push(s.submit_s, EventKind.ARRIVAL, s.job_id)

    def _arrive(self, st: JobState) -> None:
        self._schedule_next_arrival()
        if self.predictor is not None and not st.spec.online:
            self.predictor.note_submit(st.spec, self.now)
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
        if self.predictor is not None and not st.spec.online:
            # the estimate in force while it waits: the predictor's, made now
            st.spec = st.spec.with_estimate(self.predictor.estimate(st.spec, self.now))
        st.status = Status.QUEUED
        self._status_version += 1
        st.enqueue_t = self.now
        bisect.insort(self.queue, self._queue_entry(st))
        self._queue_version += 1
        self._queue_log.append(st.spec.job_id)
        self._sig_add(st.spec)
        if not st.spec.online:
            self._in_system += 1

    # ================================================================== migration
    def _check_migration(self, st: JobState, gpu: int, option: int) -> str | None:
        if not (0 <= gpu < self.n_gpus and 0 <= option < len(self.options)):
            return self.cluster.check(st.spec, gpu, option)
        c = self.cluster
        old = self.options[st.option]
        # gpulets: the partitions as they were (leaving may free one; rejoining it is undone)
        saved = (
            [([[p, list(m)] for p, m in c.parts[g]], c.sm_used.item(g)) for g in st.gpus]
            if c.gpulets and old.mode is SharingMode.MPS
            else None
        )
        # its GPUs' residents are re-added in a new order: fractions to recompute (``_refresh``)
        self._dirty.update(st.gpus)
        for g in st.gpus:  # legality as if the job had left its GPUs
            c.remove(st.spec, g, old)
        why = c.check(st.spec, gpu, option)
        mig = []
        back = PlacementOption(SharingMode.MPS, sm_pct=0) if saved is not None else old
        for g in st.gpus:
            _, inst = c.add(st.spec, g, back)
            mig.append(inst)
        if saved is not None:
            for g, (parts, sm) in zip(st.gpus, saved, strict=True):
                c.parts[g] = parts
                c.n_parts[g] = len(c.parts[g])
                c.sm_used[g] = sm
        st.mig = mig
        return why

    def _migrate(self, st: JobState, gpu: int, option: int, batch_size: int = 0) -> None:
        self._accrue(st)
        work, attempts, first = st.work_done, st.attempts, st.first_start_t
        freed = self._remove(st)
        self._queue_insert(st)
        self._start(st, gpu, option, batch_size)
        st.work_done, st.attempts, st.first_start_t = work, attempts, first
        st.run_work_start = work
        st.setup_until = max(st.setup_until, self.now + self.cfg.sharing.migration_s)
        self.acc.migrations += 1
        self._refresh(sorted(set(freed) | set(st.gpus)))

    def _queue_insert(self, st: JobState) -> None:
        """Put a running job back in the queue without counting it as re-queued work."""
        bisect.insort(self.queue, self._queue_entry(st))
        self._queue_version += 1
        self._queue_log.append(st.spec.job_id)
        self._sig_add(st.spec)

    def _sig_add(self, spec: JobSpec) -> None:
        """Count a job entering the queue under its mask signature (``_queue_sigs``)."""
        sig = mask_signature(spec)
        e = self._queue_sigs.get(sig)
        if e is None:
            self._queue_sigs[sig] = [1, spec]
            self._queue_front = None
        else:
            e[0] += 1

    def _sig_remove(self, spec: JobSpec) -> None:
        sig = mask_signature(spec)
        e = self._queue_sigs[sig]
        e[0] -= 1
        if not e[0]:
            del self._queue_sigs[sig]
            self._queue_front = None

    # ================================================================== start / stop
    def _start(self, st: JobState, first_gpu: int, option: int, batch_size: int = 0) -> None:
        """Place ``st``; an online service runs with ``batch_size`` (0: its configured one)."""
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
                for o in self._observers:
                    o.on_repartition(cast("Simulator", self), g, d)
            delay = max(delay, d)
        # (sorted, entries unique: found by bisection, not by a scan of the queue)
        key = self._queue_entry(st)
        i = bisect.bisect_left(self.queue, key)
        if i == len(self.queue) or self.queue[i] != key:
            raise ValueError(f"job {spec.job_id} is not queued")
        del self.queue[i]
        self._queue_version += 1
        self._sig_remove(spec)
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
            # ``_start`` bumped ``_status_version``: the tick's per-service constants
            # (``ticks._tick_consts``, which hold the batch size) are rebuilt.
            st.batch_size = batch_size
            st.solo_batch_ms = self._solo_batch_ms(st)
            self._update_load(st)
            self.events.push(max(self.now, spec.submit_s + spec.work_s), EventKind.END, spec.job_id)
        self._schedule_fault(st)
        mem_true = self.cluster.mem_true
        if any(mem_true.item(g) > self._mem_cap[g] + 1e-9 for g in gpus):
            t_oom = self.now + delay + self.cfg.faults.oom_delay_s
            self.events.push(t_oom, EventKind.OOM, spec.job_id, st.run_id)
        self._refresh(gpus)
        for o in self._observers:
            o.on_start(cast("Simulator", self), spec.job_id, list(gpus), option)

    def _schedule_fault(self, st: JobState) -> None:
        if self._fault_rate_per_s <= 0:
            return
        dt = self.rng_fault.exponential(1.0 / (self._fault_rate_per_s * st.spec.num_gpus))
        self.events.push(self.now + dt, EventKind.FAULT, st.spec.job_id, st.run_id)

    def _remove(self, st: JobState) -> list[int]:
        for o in self._observers:
            o.on_stop(cast("Simulator", self), st.spec.job_id)
        self._accrue(st)
        opt = self.options[st.option]
        for g in st.gpus:
            self.cluster.remove(st.spec, g, opt)
        gpus, st.gpus = st.gpus, []
        self._dirty.update(gpus)  # fractions to recompute (``_refresh``)
        st.epoch += 1
        st.run_id += 1
        st.frac = {}
        st.rate = 0.0
        st.batch_size = 0  # a batch size belongs to a placement
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
        if self.predictor is not None and status is Status.DONE and not st.spec.online:
            self._learn(st)
        for o in self._observers:
            o.on_finish(cast("Simulator", self), st.spec.job_id, status)

    def _learn(self, st: JobState) -> None:
        """Hand a finished run to the predictor; re-estimate the queued jobs its new knowledge
        touches (all of them after a refit, else those of the run's group)."""
        pred = self.predictor
        assert pred is not None
        refit = pred.observe(st.spec, st.spec.job_id)
        group = st.spec.group
        if not refit and not group:
            return
        jobs, now = self.jobs, self.now
        fifo = self._window_order == "fifo"
        moved = False
        for _, jid in list(self.queue):
            q = jobs[jid]
            if q.online or not (refit or q.spec.group == group):
                continue
            est = pred.estimate(q.spec, now)
            if est == q.spec.est_work_s:
                continue
            if not fifo:  # the predicted order's entry holds the estimate: re-key it
                self.queue.remove(self._queue_entry(q))
            q.spec = q.spec.with_estimate(est)
            if not fifo:
                bisect.insort(self.queue, self._queue_entry(q))
            # it enters the queue log again: a policy keeping its own ordered queue
            # (``ClusterView.queue_log``) re-keys it with the new estimate
            self._queue_log.append(jid)
            moved = True
        if moved:
            self._queue_version += 1

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
        for o in self._observers:
            o.on_fault(cast("Simulator", self), st.spec.job_id, cause, victim)
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
        for o in self._observers:
            o.on_evict(cast("Simulator", self), job_id)
        gpus, _ = self._preempt(st)
        self._refresh(gpus)
