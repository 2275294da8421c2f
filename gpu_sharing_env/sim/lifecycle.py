"""The job lifecycle (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`): arrivals,
starts, stops, preemption with checkpoint rollback, eviction, migration and suspension.

:class:`Lifecycle` owns the episode's duration predictor; everything else it changes belongs to
another component and is changed through it: statuses (``JobTable.set_status``), the queue
(``Queue.add``/``take``/``pass_through``/``reestimate``), masks (``Legality.forget``), rates
(``Rates.accrue``/``mark_dirty``/``refresh``), an online service's load
(``OnlineLoad.update_load``) and fault events (``Faults.schedule``). It writes the placement
fields of ``JobState`` (``gpus``, ``option``, ``mig``, ``epoch``, ``run_id``, the run's times),
its ``ledger``'s times and counts, its ``serving`` record's batch, and the ``Cluster``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.fleet.cluster import Cluster, PlacementOption
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.constants import _DONE, _K_END, _K_OOM, _K_READY, _MIG, _QUEUED, _RUNNING
from gpu_sharing_env.sim.failures import Faults
from gpu_sharing_env.sim.jobs import JobTable
from gpu_sharing_env.sim.legality import Legality
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.rates import Rates
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_env.sim.ticks import OnlineLoad
from gpu_sharing_env.sim.waiting import Queue, mask_signature

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

# compiled: the cluster's typed views and C-callable bodies (cluster.pxd), the event queue
# (events.pxd)
if cython.compiled:
    from cython.cimports.gpu_sharing_env.fleet.cluster import (
        _cluster_add,
        _cluster_gang_gpus,
        _cluster_remove,
        _StateViews,
        _views_of,
    )
    from cython.cimports.gpu_sharing_env.sim.events import EventQueue
    from cython.cimports.gpu_sharing_env.sim.speed import SpeedMemo
    from cython.cimports.gpu_sharing_env.workload.job import _take
    from cython.cimports.gpu_sharing_env.workload.predictor import OnlinePredictor
else:
    from gpu_sharing_env.fleet.cluster import (
        _cluster_add,
        _cluster_gang_gpus,
        _cluster_remove,
        _StateViews,
        _views_of,
    )
    from gpu_sharing_env.fleet.cluster import _slot_read as _take
    from gpu_sharing_env.sim.events import EventQueue
    from gpu_sharing_env.sim.speed import SpeedMemo
    from gpu_sharing_env.workload.predictor import OnlinePredictor
from gpu_sharing_env.workload.job import JobSpec

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator

#: ``JobSpec.job_id``'s slot descriptor: ``_take(spec, _S_JOB_ID)`` is ``spec.job_id``
#: (compiled, CPython's member read, ``job.pxd``'s ``_take``: no lookup through the type).
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_SUBMIT_S = JobSpec.__dict__["submit_s"]
_S_WORK_S = JobSpec.__dict__["work_s"]

__all__ = ["Lifecycle", "mask_signature"]

#: A job's status in a reason (``Lifecycle.check_suspend``).
_STATUS_WORDS = {
    Status.FUTURE: "not yet submitted",
    Status.QUEUED: "queued",
    Status.RUNNING: "running",
    Status.DONE: "done",
    Status.FAILED: "failed",
}


class Lifecycle:
    """Arrivals, starts, stops, preemption, eviction, migration and suspension of jobs."""

    __slots__ = (
        "_cfg",
        "_cluster",
        "_faults",
        "_jobs",
        "_legality",
        "_load",
        "_memo",
        "_migration_s",
        "_observers",
        "_options",
        "_queue",
        "_rates",
        "_sim",
        "_suspended",
        "_table",
        "estimates",
        "predictor",
    )

    def __init__(
        self,
        sim: Simulator,
        cfg: ScenarioConfig,
        cluster: Cluster,
        table: JobTable,
        queue: Queue,
        legality: Legality,
        rates: Rates,
        memo: SpeedMemo,
        load: OnlineLoad,
        faults: Faults,
        observers: list[SimObserver],
    ) -> None:
        self._sim = sim
        self._cfg = cfg
        #: ``sharing.migration_s`` (static; compiled, a C double: the same IEEE value).
        self._migration_s: float = cfg.sharing.migration_s
        self._cluster = cluster
        self._options = cluster.options
        self._table = table
        self._queue = queue
        self._legality = legality
        self._rates = rates
        self._memo = memo
        self._load = load
        self._faults = faults
        #: The simulator's observers (its list: registrations show here).
        self._observers = observers
        self._jobs: dict[int, JobState] = {}
        #: Per suspended job not yet resumed: the GPUs it left (``suspend``, ``restore``).
        self._suspended: dict[int, list[int]] = {}
        #: The duration predictor of this episode (``workload.predictor``; None: estimates come
        #: with the specs): asked at each offline arrival, fed each finished offline run.
        self.predictor: OnlinePredictor | None = None
        #: False: the episode runs without duration estimates (``Simulator.reset(estimates=
        #: False)``): no predictor, and every offline job queues with a NaN estimate.
        self.estimates = True

    def reset(
        self, jobs: dict[int, JobState], predictor: OnlinePredictor | None, estimates: bool = True
    ) -> None:
        self._jobs = jobs
        self.predictor = predictor if estimates else None
        self.estimates = estimates
        self._suspended = {}

    # ================================================================== arrivals
    @cython.locals(pred=OnlinePredictor)  # (compiled: ``note_submit`` a C call)
    def arrive(self, st: JobState) -> None:
        """``st`` is submitted now: queued, or failed if it could never run on this fleet."""
        self._table.schedule_next_arrival()
        now = self._sim.now
        pred = self.predictor
        if pred is not None and not st.online:
            pred.note_submit(st.spec, now)
        if st.online:
            self._load.arrived(st)
        if not self._table.feasible(st.spec):
            self._table.set_status(st, Status.FAILED)
            st.ledger.finish_t = now
            acc = self._sim.acc
            acc.errors_by_cause["unschedulable"] = acc.errors_by_cause.get("unschedulable", 0) + 1
            return
        self.enqueue(st)

    @cython.locals(pred=OnlinePredictor)  # (compiled: ``estimate`` a C call)
    def enqueue(self, st: JobState) -> None:
        """Queue ``st`` (an offline job with the predictor's estimate, made now; without
        estimates, a NaN one: the spec's own may be a placeholder that is the truth)."""
        now = self._sim.now
        pred = self.predictor
        if pred is not None and not st.online:
            # the estimate in force while it waits: the predictor's, made now
            st.spec = st.spec.with_estimate(pred.estimate(st.spec, now))
        elif not self.estimates and not st.online:
            st.spec = st.spec.without_estimate()
        self._table.set_status(st, _QUEUED)
        st.ledger.enqueue_t = now
        self._queue.add(st)

    # ================================================================== migration
    def check_migration(self, st: JobState, gpu: int, option: int) -> str | None:
        """Why running ``st`` may not move to ``(gpu, option)``, or None. A job still setting up
        (starting, or resuming from its last move) cannot checkpoint, so it cannot move: without
        this rule a job could move back and forth between two GPUs with no time passing."""
        if st.setup_until > self._sim.now:
            return f"job {st.spec.job_id} is still setting up until t={st.setup_until:g} s"
        c = self._cluster
        if not (0 <= gpu < c.n_gpus and 0 <= option < len(self._options)):
            return c.check(st.spec, gpu, option)
        # Listed among the targets a build has just read for this version: the job is past its
        # setup and the cell is empty, ready and allowed by its placement mask with the job
        # still on its GPUs; leaving them only frees resources, so the check below would
        # answer None as well (tests/test_migration_listed.py). Its removal and re-adding
        # change nothing the migration then reads (``migrate`` removes the job again).
        if self._legality.listed_migration(st.spec, gpu, option):
            return None
        old = self._options[st.option]
        # gpulets: the partitions as they were (leaving may free one; rejoining it is undone)
        saved = (
            [c.gpulet_state(g) for g in st.gpus]
            if c.gpulets and old.mode is SharingMode.MPS
            else None
        )
        # its GPUs' residents are re-added in a new order: fractions to recompute (``refresh``)
        self._rates.mark_dirty(st.gpus)
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
                c.restore_gpulets(g, parts, sm)
        st.mig = mig
        return why

    def migrate(self, st: JobState, gpu: int, option: int, batch_size: int = 0) -> None:
        """Move running ``st``: it checkpoints, moves and resumes after ``migration_s``.

        An online service moved is a new replica on its new GPU (a process start, a CUDA
        context, the model's weights loaded): it serves nothing for ``migration_s``, charged
        as a fault's restart is (``serving.outage_until``; physics v6). 30 s is the figure
        the repository assumes for a migration and a restart; for these services (hundreds
        of MB of weights) a guess on the high side: ServerlessLLM (Fu et al., OSDI'24,
        arXiv:2401.14351) loads 30-70 B-parameter LLMs in tens of seconds (OPT-30B 34 s)."""
        rates = self._rates
        rates.accrue(st)
        led = st.ledger
        work, attempts, first = st.work_done, led.attempts, led.first_start_t
        freed = self.remove(st)
        if self._observers:  # (an observer's ``on_repartition`` may see the job queued)
            self._queue.add(st)  # back in the queue, not counted as re-queued work
            self.start(st, gpu, option, batch_size)
        else:
            # the queue as ``add`` then ``start``'s ``take`` leave it, without the two
            self._queue.pass_through(st)
            self._place(st, gpu, option, batch_size, False)
        st.work_done, led.attempts, led.first_start_t = work, attempts, first
        st.run_work_start = work
        now = self._sim.now
        delay = self._migration_s
        st.setup_until = max(st.setup_until, now + delay)
        if st.online:  # a new replica: no requests served until it is up
            sv = st.serving
            sv.outage_until = max(sv.outage_until, now + delay)
        self._sim.acc.migrations += 1
        # (the new GPUs' fractions are ``start``'s, nothing they are computed from moved since:
        # only the GPUs left are recomputed, every resident's rate set again)
        gpus = st.gpus
        if len(freed) == 1 and len(gpus) == 1:  # ``sorted(set(freed) | set(gpus))`` of two
            a, b = freed[0], gpus[0]
            both = [a] if a == b else ([a, b] if a < b else [b, a])
        else:
            both = sorted(set(freed) | set(gpus))
        rates.refresh(both, gpus)

    # ================================================================== suspension
    def check_suspend(self, job_id: int, st: JobState | None) -> str | None:
        """Why job ``job_id`` (its state ``st``; None: no such job) may not be suspended now,
        or None. Only a running offline job that has run since its last (re)start may be: a
        job still setting up has not reached a mini-batch boundary to stop at, and without the
        second rule a job could be suspended and resumed over and over with no time passing
        (its resume is a start at this instant)."""
        if st is None or st.status is not Status.RUNNING:
            state = "not in this episode" if st is None else _STATUS_WORDS[st.status]
            return f"job {job_id} is {state}: only a running job can be suspended"
        if st.online:
            return f"job {job_id} is an online service: services cannot be suspended"
        now = self._sim.now
        if st.setup_until > now:
            return (
                f"job {job_id} is still setting up until t={st.setup_until:g} s: it can be "
                "suspended once its setup ends"
            )
        if st.run_start_t >= now:
            return (
                f"job {job_id} (re)started at this instant (t={now:g} s): it can be suspended "
                "once it has run"
            )
        return None

    def suspend(self, st: JobState) -> None:
        """Suspend running offline ``st`` (a policy's move: Gandiva's suspend-resume, Xiao et
        al., OSDI'18): it stops at a mini-batch boundary, where its GPU memory is
        smallest, so it keeps all its progress (no rollback, unlike :meth:`preempt`; no attempt
        counted, so it is never given up for it), leaves its GPUs and is queued again (with the
        predictor's estimate, made now). An ordinary placement resumes it: a :meth:`start`, with
        the setup a start pays, then :meth:`restore`. The copy of its memory to the host and
        back is not charged."""
        sim = self._sim
        for o in self._observers:
            o.on_suspend(sim, st.spec.job_id)
        gpus = self.remove(st)
        self._suspended[st.spec.job_id] = list(gpus)
        self.enqueue(st)
        sim.acc.suspensions += 1
        self._rates.refresh(gpus)

    def restore(self, st: JobState) -> None:
        """``st`` was just started: if it is a suspended job resumed on GPUs other than those it
        left, its state moves there, a checkpoint-restore as in a migration, so it pauses
        ``sharing.migration_s`` (a suspension and a resume elsewhere cost what a migration
        costs; on its own GPUs, Gandiva's time-slicing, only the start's setup)."""
        if not self._suspended:
            return
        left = self._suspended.pop(st.spec.job_id, None)
        if left is None or left == st.gpus:
            return
        st.setup_until = max(st.setup_until, self._sim.now + self._migration_s)
        self._rates.refresh(st.gpus)

    # ================================================================== start / stop
    def start(self, st: JobState, first_gpu: int, option: int, batch_size: int = 0) -> None:
        """Place queued ``st``; an online service runs with ``batch_size`` (0: its configured
        one)."""
        self._place(st, first_gpu, option, batch_size, True)

    @cython.locals(views=_StateViews, mem=cython.double, events=EventQueue, queued=cython.bint)
    def _place(
        self, st: JobState, first_gpu: int, option: int, batch_size: int, queued: bool
    ) -> None:
        """:meth:`start`'s body; ``queued`` False: ``st`` is not in the queue (``migrate``: the
        queue's add and take are its ``Queue.pass_through``). Compiled, the GPUs' mode and true
        memory are read through the cluster's typed views (:meth:`Cluster.state_views`: the
        same values as ``.item``)."""
        sim = self._sim
        now = sim.now
        events = sim.events
        c = self._cluster
        spec = st.spec
        opt = self._options[option]
        # (``c.gang_gpus``, ``c.state_views()`` and ``c.add``: compiled, C calls)
        gpus = _cluster_gang_gpus(c, spec, first_gpu, option)
        delay = 0.0
        st.mig = []
        rates = self._rates
        if cython.compiled:
            views = _views_of(c)
        for g in gpus:
            mode_before = views.mode[g] if cython.compiled else c.mode.item(g)
            d, inst = _cluster_add(c, spec, g, opt)
            st.mig.append(inst)
            if d > 0 and (opt.mode is _MIG or mode_before == _MIG):
                sim.acc.mig_reconfigs += 1
            if d > 0:
                c.set_ready(g, False)
                events.push(now + d, _K_READY, g)
                for o in self._observers:
                    o.on_repartition(sim, g, d)
            delay = max(delay, d)
        if queued:
            self._queue.take(st)
        self._legality.forget(_take(spec, _S_JOB_ID))
        self._table.set_status(st, _RUNNING)
        st.gpus = gpus
        st.option = option
        st.last_t = now
        st.setup_until = now + delay
        st.run_start_t = now
        st.run_work_start = st.work_done
        st.run_id += 1
        st.throttle = 1.0
        st.frac = {}
        led = st.ledger
        if math.isnan(led.first_start_t):
            led.first_start_t = now
        if st.online:
            # ``set_status`` bumped the status version: the tick's per-service constants
            # (``ticks._TickConsts``, which hold the batch size) are rebuilt.
            sv = st.serving
            sv.batch_size = batch_size
            sv.solo_batch_ms = self._memo.solo_batch_ms(st)
            self._load.update_load(st)
            end = _take(spec, _S_SUBMIT_S) + _take(spec, _S_WORK_S)
            events.push(max(now, end), _K_END, _take(spec, _S_JOB_ID))
        self._faults.schedule(st)
        mem_true = c.mem_true
        for g in gpus:  # ``any(...)`` as a loop (compiled, a generator is costly)
            mem = views.mem_true[g] if cython.compiled else mem_true.item(g)
            if mem > rates.mem_cap(g) + 1e-9:
                t_oom = now + delay + self._cfg.faults.oom_delay_s
                events.push(t_oom, _K_OOM, spec.job_id, st.run_id)
                break
        rates.refresh(gpus)
        for o in self._observers:
            o.on_start(sim, spec.job_id, list(gpus), option)

    def remove(self, st: JobState) -> list[int]:
        """Take running ``st`` off its GPUs (its status is the caller's); returns them."""
        sim = self._sim
        for o in self._observers:
            o.on_stop(sim, st.spec.job_id)
        rates = self._rates
        rates.accrue(st)
        opt = self._options[st.option]
        c = self._cluster
        for g in st.gpus:
            _cluster_remove(c, st.spec, g, opt)  # (``c.remove``: compiled, a C call)
        gpus, st.gpus = st.gpus, []
        rates.mark_dirty(gpus)  # fractions to recompute (``refresh``)
        st.epoch += 1
        st.run_id += 1
        st.frac = {}
        st.rate = 0.0
        st.serving.batch_size = 0  # a batch size belongs to a placement
        return gpus

    def finish(self, st: JobState, status: Status) -> None:
        """Running ``st`` ends with ``status`` (its work done, or an online service's life)."""
        gpus = self.remove(st)
        self._table.set_status(st, status)
        sim = self._sim
        st.ledger.finish_t = sim.now
        self._rates.refresh(gpus)
        if self.predictor is not None and status is _DONE and not st.online:
            self._learn(st)
        for o in self._observers:
            o.on_finish(sim, st.spec.job_id, status)

    def _learn(self, st: JobState) -> None:
        """Hand a finished run to the predictor; re-estimate the queued jobs its new knowledge
        touches (all of them after a refit, else those of the run's group)."""
        pred = self.predictor
        assert pred is not None
        refit = pred.observe(st.spec, st.spec.job_id)
        group = st.spec.group
        if not refit and not group:
            return
        self._queue.reestimate(pred, refit, group, self._sim.now)

    def _lose_since_checkpoint(self, st: JobState) -> float:
        """Roll back to the last checkpoint; returns the wall seconds of progress lost."""
        ran = max(0.0, self._sim.now - max(st.run_start_t, st.setup_until))
        if ran <= 0:
            return 0.0
        lost_wall = ran % st.spec.checkpoint_interval_s
        gained = st.work_done - st.run_work_start
        st.work_done -= gained * (lost_wall / ran)
        return lost_wall

    def preempt(self, st: JobState) -> tuple[list[int], float]:
        """Stop a running offline job, roll it back and re-queue or give it up; returns the
        GPUs it left and the wall seconds of progress lost."""
        self._rates.accrue(st)
        lost_wall = self._lose_since_checkpoint(st)
        gpus = self.remove(st)
        led = st.ledger
        if led.attempts >= self._cfg.faults.max_attempts:
            self._table.set_status(st, Status.FAILED)
            led.finish_t = self._sim.now
        else:
            self.enqueue(st)
        return gpus, lost_wall

    def evict(self, job_id: int) -> None:
        """Evict a running offline job (SysMonitor, or a policy's preemption)."""
        st = self._jobs[job_id]
        st.ledger.evictions += 1
        sim = self._sim
        sim.acc.evictions += 1
        for o in self._observers:
            o.on_evict(sim, job_id)
        gpus, _ = self.preempt(st)
        self._rates.refresh(gpus)
