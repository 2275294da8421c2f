"""The simulator: ``reset`` → (``apply`` a decision | ``advance`` to the next decision point)*.

A fluid, event-driven model. Each running offline job progresses at a rate (reference-GPU
seconds of work per second) that is recomputed only when something on its GPUs changes: a job
arrives or leaves, an online service's load moves, SysMonitor throttles. Completion events are
rescheduled lazily (an epoch number stales the old one), so an event costs O(GPUs it touches),
never O(cluster).

Decision points: after events, if some job in the visible queue window has a legal placement,
control returns to the caller (a policy or the Gymnasium env). ``advance`` runs events until the
next such point or the end of the episode.

Layout: :class:`Simulator` is the clock and event loop (``now``, the event queue, ``advance``,
event dispatch, ``reset``) over components that own their state, each in its module:

* :class:`~gpu_sharing_env.sim.jobs.JobTable` (``jobs.py``): job records, arrivals, status
  counters;
* :class:`~gpu_sharing_env.sim.waiting.Queue` (``waiting.py``): the queue, its window, order
  and decision scope;
* :class:`~gpu_sharing_env.sim.legality.Legality` (``legality.py``): masks, ``needs_decision``,
  ``check``;
* :class:`~gpu_sharing_env.sim.speed.SpeedMemo` (``speed.py``): the speed model and its memos;
* :class:`~gpu_sharing_env.sim.rates.Rates` (``rates.py``): sharing fractions, rates, accrual;
* :class:`~gpu_sharing_env.sim.usage.FleetUsage` (``usage.py``): per-GPU usage, fleet sums,
  timeseries, fragmentation;
* :class:`~gpu_sharing_env.sim.ticks.OnlineLoad` (``ticks.py``): load ticks, SLO accounting;
* :class:`~gpu_sharing_env.sim.monitor.Monitor` (``monitor.py``): SysMonitor and xCUDA;
* :class:`~gpu_sharing_env.sim.lifecycle.Lifecycle` (``lifecycle.py``): arrivals, starts, stops,
  preemption, eviction, migration;
* :class:`~gpu_sharing_env.sim.failures.Faults` (``failures.py``): fault events and propagation.

A component changes another's state only by calling it; settings (mechanisms, decision scope,
window order, thresholds, the speed model) come in through the constructor, :meth:`reset` and
the public setters. ``constants.py`` holds the model's constants (the public ones re-exported
here).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

try:  # compiled (gpu_sharing_env._compile): typed peers in ``advance``; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.config import MechanismConfig, ScenarioConfig
from gpu_sharing_env.evaluation.metrics import compute_metrics
from gpu_sharing_env.fleet.cluster import Cluster, PlacementOption
from gpu_sharing_env.physics.interference import AnalyticSpeedModel, SpeedModel, kp_coefficients
from gpu_sharing_env.physics.nodes import NodeSpec
from gpu_sharing_env.sim.accumulator import Accumulator
from gpu_sharing_env.sim.base import WorkloadFn
from gpu_sharing_env.sim.constants import (
    _DONE,
    _K_ARRIVAL,
    _K_COMPLETE,
    _K_END,
    _K_FAULT,
    _K_OOM,
    _K_READY,
    _K_TICK,
    _NOISE_SCALE,
    _RUNNING,
    CROSS_NODE_FACTOR,
    DUTY_STEP,
    NOISE_AR,
    PCIE_GANG_FACTOR,
)
from gpu_sharing_env.sim.events import EventKind
from gpu_sharing_env.sim.failures import Faults
from gpu_sharing_env.sim.faults import FaultCause
from gpu_sharing_env.sim.legality import MAX_BATCH_SIZE, SUSPEND
from gpu_sharing_env.sim.monitor import Monitor
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import MonitorThresholds
from gpu_sharing_env.sim.rates import Rates
from gpu_sharing_env.sim.speed import SpeedMemo
from gpu_sharing_env.sim.state import Status

if cython.compiled:  # the typed components (their .pxd): ``advance``'s calls are C calls
    from cython.cimports.gpu_sharing_env.sim.events import EventQueue
    from cython.cimports.gpu_sharing_env.sim.jobs import JobTable
    from cython.cimports.gpu_sharing_env.sim.legality import Legality
    from cython.cimports.gpu_sharing_env.sim.lifecycle import Lifecycle
    from cython.cimports.gpu_sharing_env.sim.state import JobState
    from cython.cimports.gpu_sharing_env.sim.ticks import OnlineLoad
    from cython.cimports.gpu_sharing_env.sim.usage import FleetUsage
    from cython.cimports.gpu_sharing_env.workload.job import _take
else:
    from gpu_sharing_env.fleet.cluster import _slot_read as _take
    from gpu_sharing_env.sim.events import EventQueue
    from gpu_sharing_env.sim.jobs import JobTable
    from gpu_sharing_env.sim.legality import Legality
    from gpu_sharing_env.sim.lifecycle import Lifecycle
    from gpu_sharing_env.sim.state import JobState
    from gpu_sharing_env.sim.ticks import OnlineLoad
    from gpu_sharing_env.sim.usage import FleetUsage
from gpu_sharing_env.sim.waiting import Queue, checked_order
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.workload.predictor import OnlinePredictor

__all__ = [
    "CROSS_NODE_FACTOR",
    "DUTY_STEP",
    "MAX_BATCH_SIZE",
    "NOISE_AR",
    "PCIE_GANG_FACTOR",
    "SUSPEND",
    "_NOISE_SCALE",
    "Decision",
    "IllegalDecision",
    "NoEstimatesError",
    "Simulator",
    "WorkloadFn",
]


#: A running job with less estimated work left is no migration candidate (Gandiva's
#: ``min_remaining_s`` default, ``baselines/gandiva.py``: a migration's checkpoint-restore pause,
#: ``sharing.migration_s``, would eat most of what is left).
MIGRATION_MIN_LEFT_S = 300.0


# How a frozen dataclass writes its fields (``Decision.__init__``): ``object.__setattr__``;
# compiled, the C function behind it, called without the slot wrapper and its argument tuple.
if cython.compiled:
    from cython.cimports.cpython.object import PyObject_GenericSetAttr as _setattr
else:
    _setattr = object.__setattr__


@dataclass(frozen=True, slots=True)
class Decision:
    """Place queued job ``job_id`` with its first GPU at ``gpu`` using option ``option``.

    About a running job: migrate it there (:meth:`Simulator.apply`); with ``gpu`` and
    ``option`` both :data:`SUSPEND` (-1; :meth:`suspend` makes one), suspend it.

    ``batch_size``: for an online service, the batch size it runs with on this placement
    (1..``MAX_BATCH_SIZE``; GPULet chooses it per placement); 0 (the default, and the only value
    for offline jobs) keeps the service's configured ``ServiceSpec.batch_size``. The Gymnasium
    env never sets it.
    """

    job_id: int
    gpu: int
    option: int
    batch_size: int = 0

    def __init__(self, job_id: int, gpu: int, option: int, batch_size: int = 0) -> None:
        # The dataclass's own ``__init__`` would be generated code, run interpreted; this one
        # (the dataclass keeps a class's own) is compiled with the module: the same four
        # ``object.__setattr__`` writes a frozen dataclass's ``__init__`` makes (compiled, C
        # calls of the function behind it: ~920 instructions a field through the slot wrapper).
        _setattr(self, "job_id", job_id)
        _setattr(self, "gpu", gpu)
        _setattr(self, "option", option)
        _setattr(self, "batch_size", batch_size)

    @classmethod
    def suspend(cls, job_id: int) -> Decision:
        """The decision that suspends running job ``job_id``: ``Decision(job_id, SUSPEND,
        SUSPEND)``."""
        return cls(job_id, SUSPEND, SUSPEND)

    @property
    def suspends(self) -> bool:
        """Whether this decision is a suspension (``gpu`` and ``option`` are :data:`SUSPEND`)."""
        return self.gpu == SUSPEND and self.option == SUSPEND


class IllegalDecision(ValueError):
    """A decision the legality function rejects; the message says why."""


class NoEstimatesError(RuntimeError):
    """A read of duration estimates in an episode run without them (``Simulator.reset(
    estimates=False)``: the evaluation runner's choice for a policy whose class declares
    ``reads_estimates = False``); ``what``: the read and why it needs estimates."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what}, but this episode runs without duration estimates: the policy's class"
            " declares reads_estimates = False (HeuristicPolicy.reads_estimates); a policy that"
            " reads estimates must leave it True"
        )


def _fifo_without_estimates(order: str) -> None:
    """An episode without duration estimates keeps its queue in FIFO order: any other order
    ranks jobs by their estimates (:class:`NoEstimatesError`)."""
    if order != "fifo":
        raise NoEstimatesError(f"window_order={order!r} orders the queue by estimates")


#: ``Decision``'s slot descriptors: ``apply`` reads a decision's fields with them
#: (``_take``: compiled, CPython's member read, no attribute lookup through the type).
_D_BATCH_SIZE = Decision.__dict__["batch_size"]
_D_GPU = Decision.__dict__["gpu"]
_D_JOB_ID = Decision.__dict__["job_id"]
_D_OPTION = Decision.__dict__["option"]


def _episode_rngs(seed: int) -> list[np.random.Generator]:
    """The episode's three generators (i = 0 workload, 1 faults, 2 load noise):
    ``SeedSequence(seed).spawn(3)``'s children, made directly: ``spawn`` makes child ``i`` as
    ``SeedSequence(entropy, spawn_key=spawn_key + (i,), pool_size=pool_size)`` (numpy's
    bit_generator.pyx), here from an unspawned parent with the default pool."""
    seq = np.random.SeedSequence
    return [np.random.default_rng(seq(seed, spawn_key=(i,))) for i in range(3)]


#: Source of ``Simulator.uid``.
_UIDS = itertools.count()


def _new_simulator(cls: type[Simulator]) -> Simulator:
    """A bare simulator of class ``cls`` (no ``__init__``): what a pickle or a deep copy of
    one (``Simulator.__reduce__``) starts from before ``__setstate__`` sets its slots."""
    return cls.__new__(cls)


class Simulator:
    """Event-driven GPU cluster simulator (no Gymnasium, torch or YAML here).

    Args:
        cfg: The scenario.
        nodes: The fleet.
        workload: Called at every ``reset`` with a seeded generator; returns the jobs.
        speed: Speed/interference model (default: the calibrated analytic model).
        thresholds: SysMonitor / xCUDA thresholds (default: ``MonitorThresholds()``).

    Settings are passed in, never assigned from outside ``sim/``: the scenario, fleet, speed
    model and thresholds here; the mechanisms, decision scope and window order per episode
    through :meth:`reset` (or, mid-episode, :meth:`set_decision_scope`,
    :meth:`set_window_order`).

    The simulator is the clock and the event loop; what it simulates lives in its components
    (the module doc lists them), readable as attributes (``sim.rates``, ``sim.usage``, ...)
    and changed only through their methods.
    """

    __slots__ = (
        "_observers",
        "acc",
        "cfg",
        "cluster",
        "done",
        "events",
        "faults",
        "legality",
        "lifecycle",
        "load",
        "memo",
        "n_events",
        "now",
        "rates",
        "table",
        "uid",
        "usage",
        "waiting",
        "window",
        "workload",
    )

    def __init__(
        self,
        cfg: ScenarioConfig,
        nodes: Sequence[NodeSpec],
        workload: WorkloadFn,
        speed: SpeedModel | None = None,
        thresholds: MonitorThresholds | None = None,
    ) -> None:
        self.cfg = cfg
        self.cluster = c = Cluster(nodes, cfg.sharing)
        self.workload = workload
        mech = cfg.mechanisms
        #: Registered :class:`~gpu_sharing_env.sim.observe.SimObserver` objects (kept across
        #: resets; not copied by :meth:`copy`; the components that call them share this list).
        self._observers: list[SimObserver] = []
        model = (
            speed
            if speed is not None
            else AnalyticSpeedModel(None, **kp_coefficients(cfg.mechanisms.kernel_priority_level))
        )
        # The components (the module doc), each built with the peers it calls.
        self.memo = memo = SpeedMemo(model, c)
        self.table = table = JobTable(self, c)
        self.waiting = queue = Queue(c, memo, cfg.env.queue_window)
        self.legality = legality = Legality(self, c, queue)
        self.usage = usage = FleetUsage(c, queue)
        self.rates = rates = Rates(self, c, memo, usage, mech, cfg.sharing.online_priority)
        monitor = Monitor(c, rates, thresholds if thresholds is not None else MonitorThresholds())
        self.load = load = OnlineLoad(self, table, rates, usage, monitor, cfg.tick_s, mech)
        self.faults = faults = Faults(self, c, rates, cfg, mech, self._observers)
        self.lifecycle = life = Lifecycle(
            self, cfg, c, table, queue, legality, rates, memo, load, faults, self._observers
        )
        legality.connect(life)
        monitor.connect(life)
        faults.connect(life)
        #: How many queued jobs the action window holds (``env.queue_window``; static).
        self.window = queue.window
        self.events = EventQueue()
        self.acc = Accumulator()
        self.done = True
        self.now = 0.0
        self.n_events = 0
        #: This simulator object's own number (unique in the process, never reused; copies get
        #: their own): what a cache keyed on "the same simulator" may use.
        self.uid = next(_UIDS)

    # ================================================================== settings
    @property
    def speed(self) -> SpeedModel:
        """The speed/interference model (its answers are memoised: ``memo``)."""
        return self.memo.model

    @property
    def thresholds(self) -> MonitorThresholds:
        """SysMonitor / xCUDA thresholds (a constructor argument)."""
        return self.load.monitor.thresholds

    @property
    def mechanisms(self) -> MechanismConfig:
        """The cluster mechanisms in force (set by :meth:`reset` or :meth:`set_mechanisms`;
        the components that read them hold them: rates, online load, faults)."""
        return self.rates.mechanisms

    def set_mechanisms(self, **flags: bool) -> None:
        """Switch cluster mechanisms (``protection``, ``dynamic_sm``) for the next reset."""
        self._use_mechanisms(replace(self.rates.mechanisms, **flags))

    def _use_mechanisms(self, mech: MechanismConfig) -> None:
        self.rates.set_mechanisms(mech)
        self.load.set_mechanisms(mech)
        self.faults.set_mechanisms(mech)

    @property
    def decision_scope(self) -> str:
        """Which queued jobs a decision may place: ``"window"`` (the first ``queue_window``,
        the env's action window; the default) or ``"queue"`` (any queued job: heuristics that
        order the whole queue, e.g. PAI's SJF; the runner sets it from the policy's
        ``decision_scope``). Decision points (``needs_decision``) follow the same scope. Set by
        :meth:`reset` or :meth:`set_decision_scope`."""
        return self.waiting.scope

    def set_decision_scope(self, scope: str) -> None:
        """Set :attr:`decision_scope` (``"window"`` or ``"queue"``), from the next decision on."""
        self.waiting.set_scope(scope)

    @property
    def window_order(self) -> str:
        """The order of the queue, and so which jobs the window holds: ``"fifo"`` (submission
        order; the default) or ``"predicted"`` (jobs with a service commitment first, i.e.
        online services and prioritised jobs, in submission order; then the best-effort jobs,
        shortest predicted duration first: the scenario's estimate of the remaining work over
        the job's solo speed on the fastest GPU type it may use, what any scheduler may know).
        The runner sets it from a policy's ``window_order``, the env from its own argument
        (through :meth:`reset`; mid-episode, :meth:`set_window_order`).
        The window of a long queue is then its shortest jobs, as in Tiresias' and PAI's
        shortest-predicted-first (Gu et al., NSDI'19; Weng et al., NSDI'22, Sec. 5)."""
        return self.waiting.order

    def set_window_order(self, order: str) -> None:
        """Set :attr:`window_order` now: the queued jobs are re-keyed in the new order."""
        if not self.lifecycle.estimates:
            _fifo_without_estimates(checked_order(order))
        self.waiting.set_order(order)

    # ================================================================== observers, watches
    def add_observer(self, observer: SimObserver) -> None:
        """Call ``observer`` back on starts, stops, faults, evictions, re-partitions and ticks
        of every later event (:mod:`gpu_sharing_env.sim.observe`)."""
        if observer not in self._observers:
            self._observers.append(observer)

    def remove_observer(self, observer: SimObserver) -> None:
        """Stop calling ``observer`` back (no error if it is not registered)."""
        if observer in self._observers:
            self._observers.remove(observer)

    @property
    def observers(self) -> tuple[SimObserver, ...]:
        """The registered observers, in the order they are called."""
        return tuple(self._observers)

    def watch_jobs(self) -> set[int]:
        """A set that every running job whose progress, rate or online load may change is added
        to (by id) from now on, until :meth:`reset`: what is derived from a running job's state
        (``work_done``, ``last_t``, ``rate``, ``duty``) changes only for jobs in it or for jobs
        that start or stop (their GPUs change: ``Cluster.watch``). Every such change is preceded
        by the job's accrual, which adds it. Its owner reads and empties it. Copies
        (:meth:`copy`) do not carry it."""
        return self.rates.watch()

    def unwatch_jobs(self, w: set[int]) -> None:
        """Stop adding to ``w`` (a set :meth:`watch_jobs` returned; nothing if it is not
        watching, e.g. after a reset)."""
        self.rates.unwatch(w)

    # ================================================================== episode
    def reset(
        self,
        seed: int,
        *,
        mechanisms: MechanismConfig | None = None,
        decision_scope: str | None = None,
        window_order: str | None = None,
        estimates: bool = True,
    ) -> None:
        """Start an episode; the same seed gives the same episode, bit for bit.

        Args:
            seed: The episode's seed.
            mechanisms: The cluster mechanisms from this episode on (e.g. the scenario's with a
                policy's switched on); None keeps the current ones.
            decision_scope: ``"window"`` or ``"queue"`` (:attr:`decision_scope`); None keeps it.
            window_order: ``"fifo"`` or ``"predicted"`` (:attr:`window_order`); None keeps it.
            estimates: False: an episode without duration estimates (:attr:`estimates`), for a
                policy that reads none (``HeuristicPolicy.reads_estimates``; the evaluation
                runner's choice, never the env's). Every other record is the same bit for bit.
        """
        if mechanisms is not None:
            self._use_mechanisms(mechanisms)
        if decision_scope is not None:
            self.waiting.set_scope(decision_scope)
        if window_order is not None:
            checked_order(window_order)  # (the queue is rebuilt below)
        if not estimates:
            _fifo_without_estimates(window_order or self.waiting.order)
        w_rng, f_rng, n_rng = _episode_rngs(seed)
        if estimates:
            drawn = self.workload(w_rng)
        else:  # (the same draw; a workload that can skips building its predictor)
            draw = getattr(self.workload, "without_predictor", self.workload)
            drawn = draw(w_rng)
        specs = sorted(drawn, key=lambda s: (s.submit_s, s.job_id))
        predictor: OnlinePredictor | None = getattr(drawn, "predictor", None)
        ids = [s.job_id for s in specs]
        if len(set(ids)) != len(ids):
            raise ValueError("workload: job_id values must be unique")
        self.cluster.reset()
        self.events = EventQueue()
        self.now = 0.0
        self.acc = Accumulator()
        mech = self.rates.mechanisms
        table = self.table
        table.reset(specs)
        jobs = table.jobs
        self.waiting.reset(jobs, window_order)
        self.legality.reset(jobs)
        self.usage.reset(jobs)
        self.rates.reset(jobs, mech)
        self.load.monitor.reset(jobs)
        self.load.reset(n_rng, mech)
        self.faults.reset(jobs, f_rng, mech)
        self.lifecycle.reset(jobs, predictor, estimates)
        self.done = False
        self.n_events = 0
        table.schedule_next_arrival()
        self.events.push(self.cfg.tick_s, EventKind.TICK, 0)
        for o in self._observers:
            o.on_reset(self)
        self.advance()

    # ================================================================== reads
    @property
    def jobs(self) -> dict[int, JobState]:
        """Every job of the episode by id (its runtime record; read-only outside ``sim/``)."""
        return self.table.jobs

    @property
    def queue(self) -> list[tuple[Any, int]]:
        """The queued jobs' entries, sorted (``(key, job_id)``: FIFO or predicted order)."""
        return self.waiting.entries

    @property
    def queue_version(self) -> int:
        """Bumps at every change of the queue."""
        return self.waiting.version

    def queue_log(self, start: int = 0) -> list[int]:
        """Job ids in the order they entered the queue this episode, from entry ``start`` (a
        re-queued or re-estimated job appears again)."""
        return self.waiting.log[start:]

    @property
    def options(self) -> tuple[PlacementOption, ...]:
        return self.cluster.options

    @property
    def horizon_s(self) -> float:
        return self.cfg.horizon_h * 3600.0

    @property
    def predictor(self) -> OnlinePredictor | None:
        """The episode's duration predictor (None: estimates come with the specs, or there are
        none: :attr:`estimates`)."""
        return self.lifecycle.predictor

    @property
    def estimates(self) -> bool:
        """Whether this episode has duration estimates (``reset(estimates=...)``). Without,
        there is no predictor, every queued offline job's ``est_work_s`` is NaN, and the reads
        of estimates (``ClusterView.est_remaining_s``, ``sjf_facts``, ``group_stats``,
        ``JobView.est_remaining_s``, :meth:`migration_candidates`, the ``"predicted"`` window
        order) raise :class:`NoEstimatesError`."""
        return self.lifecycle.estimates

    @property
    def health(self) -> np.ndarray:
        """Per GPU: its SysMonitor state (``sim.online.Health`` values)."""
        return self.load.monitor.health

    @property
    def timeseries(self) -> list[tuple[float, float, float, float, float, float]]:
        """Per tick: (t_s, gpu_util, sm_activity, busy_gpu_frac, gpu_mem_util, max p99/SLO)."""
        return self.usage.timeseries

    @property
    def n_service_ticks(self) -> int:
        """Load ticks x live services at each this episode (the online model's work)."""
        return self.load.n_service_ticks

    @property
    def n_gpus(self) -> int:
        return self.cluster.n_gpus

    @property
    def gpu_util(self) -> np.ndarray:
        """Per-GPU utilisation now (fraction of time a kernel runs), read-only."""
        v = self.usage.g_util.view()
        v.flags.writeable = False
        return v

    @property
    def util_sum(self) -> float:
        """Sum of ``gpu_util`` over the fleet."""
        return float(self.usage.sums_item(0))

    @property
    def offline_in_system(self) -> int:
        """Offline jobs queued or running now."""
        return self.table.in_system

    @property
    def offline_jobs(self) -> tuple[int, int]:
        """(offline jobs in the episode, of which not yet done or failed); (0, 0) before the
        first ``reset``."""
        return self.table.offline_total, self.table.offline_left

    def window_jobs(self) -> list[JobSpec]:
        """The first ``queue_window`` queued jobs: the ones a decision may place."""
        return self.waiting.window_jobs()

    def queued_jobs(self) -> list[JobSpec]:
        return self.waiting.queued_jobs()

    def mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) placements of a queued job, from the cluster's legality function."""
        return self.legality.mask(job_id)

    def placeable(self, job_id: int) -> bool:
        """Whether ``mask(job_id)`` allows anything (the mask itself is not built for it)."""
        return self.legality.placeable(job_id)

    def needs_decision(self) -> bool:
        """True when some job in the window (the decision scope) can be placed now."""
        if self.done:
            return False
        return self.legality.needs_decision()

    def check(self, d: Decision) -> str | None:
        """Why ``d`` is illegal now, or None."""
        return self.legality.check(d)

    # ------------------------------------------------------------------ migration slots
    def migration_candidates(self, n: int) -> list[int]:
        """Up to ``n`` running jobs an agent may migrate now (``GpuSharing-v1``'s migration
        slots): offline single-GPU jobs past their setup that share their GPU with another job
        and have at least :data:`MIGRATION_MIN_LEFT_S` of estimated work left (the jobs
        ``baselines/gandiva.py`` may move, with its default of 300 s), longest estimated time left at
        the current rate first (ties: job id). Legal destinations: :meth:`migration_mask`. A
        function of the state: asked twice at one decision point, the same list."""
        if n <= 0 or self.done:
            return []
        if not self.lifecycle.estimates:
            raise NoEstimatesError("migration_candidates ranks running jobs by estimated work left")
        c = self.cluster
        jobs, now = self.table.jobs, self.now
        scored: list[tuple[float, int]] = []
        for g in np.flatnonzero(c.n_res >= 2).tolist():
            for jid in c.residents[g]:
                st = jobs[jid]
                spec = st.spec
                if spec.online or spec.num_gpus != 1 or st.setup_until > now:
                    continue
                left = spec.est_work_s - st.work_done_at(now)
                if left < MIGRATION_MIN_LEFT_S:
                    continue
                scored.append((-left / max(st.rate, 1e-6), jid))
        scored.sort()
        return [jid for _, jid in scored[:n]]

    def migration_mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) destinations of migration candidate ``job_id``: empty, ready GPUs
        where the cluster's legality function would place the job (read-only)."""
        return self.legality.migration_mask(job_id)

    # ------------------------------------------------------------------ suspension
    def suspendable(self) -> list[int]:
        """The running jobs a policy may suspend now (``Decision.suspend``), ascending job id:
        offline jobs past their setup that have run since their last (re)start (so a job
        suspended and resumed at one instant is not suspended again before time passes). A
        function of the state, from the legality function (``Simulator.check``)."""
        if self.done:
            return []
        jobs = self.table.jobs
        life = self.lifecycle
        running = sorted({j for res in self.cluster.residents for j in res})
        return [j for j in running if life.check_suspend(j, jobs[j]) is None]

    # ================================================================== decisions, time
    @cython.locals(life=Lifecycle, legality=Legality, table=JobTable)
    def apply(self, d: Decision) -> None:
        """Carry out a decision (raises :class:`IllegalDecision` if illegal).

        A decision about a queued job places it; about a running job, migrates it (Gandiva's
        introspective migration): the job checkpoints, moves and resumes after
        ``sharing.migration_s`` without losing progress (an online service, a new replica,
        serves nothing for that time: ``Lifecycle.migrate``). ``Decision.suspend(job_id)`` suspends
        a running offline job (Gandiva's suspend-resume): it keeps its progress, leaves its
        GPUs and is queued again, to be resumed by a later placement, which on other GPUs
        than those it left also pauses ``sharing.migration_s`` (``Lifecycle.suspend``,
        ``Lifecycle.restore``; legal for :meth:`suspendable` jobs).
        """
        legality = self.legality  # (compiled, typed: ``check_fields`` a C call)
        if type(d) is Decision:  # its slots (``suspends`` as its property has it)
            job_id, gpu, option = _take(d, _D_JOB_ID), _take(d, _D_GPU), _take(d, _D_OPTION)
            batch_size = _take(d, _D_BATCH_SIZE)
            suspends = gpu == SUSPEND and option == SUSPEND
        else:  # (a subclass: its own attributes)
            job_id, gpu, option, batch_size = d.job_id, d.gpu, d.option, d.batch_size
            suspends = d.suspends
        why = legality.check_fields(job_id, gpu, option, batch_size, suspends)  # ``check(d)``
        if why is not None:
            raise IllegalDecision(why)
        life = self.lifecycle
        table = self.table  # (compiled, typed: ``jobs`` a C read)
        st = table.jobs[job_id]
        if suspends:
            life.suspend(st)
        elif st.status is _RUNNING:
            life.migrate(st, gpu, option, batch_size)
        else:
            life.start(st, gpu, option, batch_size)
            life.restore(st)  # (a resume elsewhere pays a migration's pause)
        self.acc.decisions += 1

    @cython.locals(
        load=OnlineLoad, life=Lifecycle, legality=Legality, st=JobState, usage=FleetUsage,
        events=EventQueue, table=JobTable, kind=cython.Py_ssize_t, k_tick=cython.Py_ssize_t,
        k_complete=cython.Py_ssize_t, k_arrival=cython.Py_ssize_t,
    )  # fmt: skip
    def advance(self) -> None:
        """Run events until the next decision point or the end of the episode."""
        # The hot loop of the simulator (~11 events per env step on ``default``): events are
        # popped from the heap here, ticks, completions and arrivals are dispatched inline and
        # the rest goes through ``_handle``.
        #
        # Fused ticks: the next load tick is pushed when the instant of the current one ends,
        # and when no other event comes at or before it, it is run right here as its own
        # instant instead of going through the heap (the same instants in the same order: a
        # tick is the only event of its kind, so its sequence number never breaks a tie).
        #
        # Compiled, the components are typed (their ``.pxd``): the tick, the finish, the usage
        # integral and the decision test are C calls, and so is the clock's move
        # (:func:`_clock_to`, where ``_integrate`` was a Python method call at every instant).
        events = self.events
        usage = self.usage
        observed = bool(self._observers)  # (``_observed_tick`` instead of the plain tick)
        load = self.load
        life = self.lifecycle
        legality = self.legality
        done = _DONE
        table = self.table
        tick_s = self.cfg.tick_s
        jobs = table.jobs
        acc = self.acc  # (replaced only by ``reset``)
        horizon = self.horizon_s
        # the kinds the loop dispatches on (compiled, C integers: C comparisons with ``kind``)
        k_tick, k_complete, k_arrival = _K_TICK, _K_COMPLETE, _K_ARRIVAL
        if self.done:
            return
        while True:  # (``done`` is set only below, each time before a return, and by reset)
            if not len(events) or events.peek_gt(horizon):
                _clock_to(self, usage, acc, table, horizon)
                self.done = True
                return
            t = events.peek_time()
            _clock_to(self, usage, acc, table, t)
            changed = False
            ticked = False
            while events.peek_is(t):  # (``len(events) and events.peek_time() == t``)
                kind = events.pop_kind()  # (``pop_raw`` without the tuple; the time is ``t``)
                subject = events._popped_subject
                stamp = events._popped_stamp
                if kind == k_tick:
                    changed |= self._observed_tick() if observed else load.tick()
                    ticked = True
                elif kind == k_complete:
                    # ``_handle``'s COMPLETE case; a stale one (older epoch) changes nothing
                    st = jobs[subject]
                    if st.status is _RUNNING and stamp == st.epoch:
                        life.finish(st, done)
                        changed = True
                elif kind == k_arrival:  # ``_handle``'s ARRIVAL case (compiled, a C call)
                    life.arrive(jobs[subject])
                    changed = True
                else:
                    changed |= self._handle(t, kind, subject, stamp)  # (compiled, a C call)
                self.n_events += 1
            while ticked:
                nxt = t + tick_s
                if nxt > horizon:
                    break
                if (
                    changed
                    or events.peek_le(nxt)  # (``len(events) and events.peek_time() <= nxt``)
                    or (table.offline_total and not table.offline_left)
                ):
                    events.push(nxt, _K_TICK, 0)
                    break
                # nothing to decide and no other event up to the next tick: run it now
                t = nxt
                _clock_to(self, usage, acc, table, t)
                changed = self._observed_tick() if observed else load.tick()
                self.n_events += 1
            if table.offline_total and not table.offline_left:
                self.done = True
                return
            if changed and legality.needs_decision():
                return

    def _integrate(self, t: float) -> None:
        """Bring the clock to ``t``, integrating the fleet's usage over the interval."""
        _clock_to(self, self.usage, self.acc, self.table, t)

    def run_until(self, t: float) -> None:
        """Move the clock to ``t`` without running the events before it (the usage integrals
        follow): for tests that check the integrals between two known instants."""
        self._integrate(t)

    def _observed_tick(self) -> bool:
        changed = self.load.tick()
        for o in self._observers:
            o.on_tick(self, changed)
        return changed

    def _handle(self, t: float, kind: int, subject: int, stamp: int) -> bool:
        """Handle one event other than a load tick (``kind`` an :class:`EventKind` value; ticks
        and their rescheduling are :meth:`advance`'s own); True if the state changed."""
        jobs = self.table.jobs
        if kind == _K_ARRIVAL:
            self.lifecycle.arrive(jobs[subject])
            return True
        if kind == _K_READY:
            self.cluster.set_ready(subject, True)
            return True
        st = jobs[subject]
        if st.status is not _RUNNING:
            return False
        if kind == _K_COMPLETE and stamp == st.epoch:
            self.lifecycle.finish(st, _DONE)
            return True
        if kind == _K_END:
            self.lifecycle.finish(st, _DONE)
            return True
        if kind == _K_FAULT and stamp == st.run_id:
            self.faults.strike(st)
            return True
        if kind == _K_OOM and stamp == st.run_id:
            c = self.cluster
            for g in st.gpus:  # ``any(...)`` as a loop (compiled, a cpdef: no closure in it)
                if c.mem_true[g] > c.mem_cap[g] + 1e-9:
                    self.faults.fail(st, FaultCause.OOM)
                    return True
        return False

    # ================================================================== lookahead
    # What a planner needs to imagine futures on a copy of the world (``agents.planner``): the
    # copy, and the steps that replace its hidden future with a sampled one. The caller decides
    # what to sample (what a scheduler may know); these keep the engine's state consistent.
    def copy(self) -> Simulator:
        """An independent copy of the simulator in its current state (``copy.deepcopy``
        semantics), sharing what never changes (the scenario, the speed model and its pure memo
        tables, the workload generator, frozen job specs) and leaving out the views' caches,
        the job watches and the observers: about 3-4x cheaper than a plain deep copy on
        ``default``."""
        shared = (self.cfg, self.memo, self.memo.model, self.workload)
        memo: dict[int, Any] = {id(x): x for x in shared}
        memo[id(self._observers)] = []
        self.table.copy_memo(memo)
        self.rates.copy_memo(memo)
        self.legality.copy_memo(memo)
        self.usage.copy_memo(memo)
        return copy.deepcopy(self, memo)  # (a new ``uid``: ``__setstate__``)

    def __reduce__(self) -> tuple[Any, tuple[type[Simulator]], dict[str, Any]]:
        """A pickle or a deep copy: a bare object of this class (:func:`_new_simulator`) and its
        slots, in ``__slots__`` order (as a slotted class's default pickling gives them).
        (Its own ``__reduce__``: compiled, an extension type's default pickling would not call
        ``__setstate__``.)"""
        return _new_simulator, (type(self),), {k: getattr(self, k) for k in Simulator.__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy, a deep copy or an unpickled simulator is another object: it gets its own
        ``uid`` (views and agents key their caches on it)."""
        for k, v in state.items():
            object.__setattr__(self, k, v)  # (its own slots back, as pickle would set them)
        self.uid = next(_UIDS)

    def reseed(self, fault_seed: int, noise_seed: int) -> None:
        """Fresh random streams for faults and online-load noise (a sampled future's own)."""
        self.faults.reseed(np.random.default_rng(fault_seed))
        self.load.reseed(np.random.default_rng(noise_seed))

    def progress(self, job_id: int) -> float:
        """Work done by a job so far (in solo-V100 seconds), brought up to ``now``."""
        st = self.table.jobs[job_id]
        if st.status is Status.RUNNING:
            self.rates.accrue(st)
        return st.work_done

    def set_true_spec(self, job_id: int, spec: JobSpec) -> None:
        """Replace a job's hidden truth (``work_s``, ``true_mem_gb``: a sampled belief); a
        running job's completion is rescheduled at its new duration."""
        st = self.table.jobs[job_id]
        if replace(spec, work_s=st.spec.work_s, true_mem_gb=st.spec.true_mem_gb) != st.spec:
            raise ValueError(
                f"set_true_spec: job {job_id}: only work_s and true_mem_gb (the hidden truth) "
                f"may change"
            )
        if st.status is Status.RUNNING:
            self.rates.accrue(st)
            st.spec = spec
            self.rates.set_rate(st)  # reschedules the completion (lazily stales the old event)
        else:
            st.spec = spec

    def inject_fault(self, job_id: int, cause: FaultCause) -> None:
        """Fail running job ``job_id`` now with ``cause``, as a drawn fault does: the error
        propagates to co-located jobs by sharing mode, work since the last checkpoint is lost,
        the job is re-queued or given up (``faults.max_attempts``). Draws nothing from the fault
        stream (the job's pending fault event, if any, stays)."""
        st = self.table.jobs[job_id]
        if st.status is not Status.RUNNING:
            raise ValueError(f"inject_fault: job {job_id} is not running ({st.status.name})")
        self.faults.fail(st, cause)

    def redraw_faults(self) -> None:
        """Drop the pending fault events and draw new ones for the running jobs (in job id
        order) from the fault stream (after :meth:`reseed`: a sampled future's faults)."""
        self.events.drop_kind(_K_FAULT)
        self.faults.redraw()

    def replace_future_offline(self, specs: Sequence[JobSpec]) -> None:
        """Replace the offline jobs that have not arrived yet by ``specs`` (a sampled future;
        each must arrive after ``now``). They get fresh job ids after every id in use, in the
        given order; future online arrivals are kept."""
        if any(sp.online or sp.submit_s <= self.now for sp in specs):
            raise ValueError("replace_future_offline: offline jobs arriving after now only")
        self.events.drop_kind(_K_ARRIVAL)
        self.table.replace_future_offline(specs, self.now)

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """A model class's solo speed on a GPU type (memoised ``speed.solo_speed``)."""
        return self.memo.solo_speed(model, gpu_type)

    def metrics(self) -> dict[str, float]:
        """Episode metrics under the schema's names (final once ``done``)."""
        return compute_metrics(self.table.jobs.values(), self.acc, self.n_gpus, self.now)


# (after the class: compiled, ``self`` is typed by it; interpreted, the name exists when the
# decorator runs)
@cython.cfunc
@cython.locals(
    self=Simulator, usage=FleetUsage, table=JobTable, t=cython.double, now=cython.double,
    dt=cython.double,
)  # fmt: skip
def _clock_to(
    self: Simulator, usage: FleetUsage, acc: Accumulator, table: JobTable, t: float
) -> None:
    """:meth:`Simulator._integrate`'s body, C-callable (from ``advance`` when compiled): the
    clock brought to ``t``, the fleet's usage integrated over the interval into ``acc``
    (``usage``, ``acc`` and ``table`` the simulator's own, passed by the caller: compiled,
    typed reads where each was a generic attribute read of the simulator; the times C
    doubles: ``max`` of two doubles is Python's, the second only where it is greater)."""
    now = self.now
    dt = t - now
    if dt > 0:
        usage.integrate(acc, dt, table.in_system)
    self.now = max(now, t)
