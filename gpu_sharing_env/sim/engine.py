"""The simulator: ``reset`` → (``apply`` a decision | ``advance`` to the next decision point)*.

A fluid, event-driven model. Each running offline job progresses at a rate (reference-GPU
seconds of work per second) that is recomputed only when something on its GPUs changes: a job
arrives or leaves, an online service's load moves, SysMonitor throttles. Completion events are
rescheduled lazily (an epoch number stales the old one), so an event costs O(GPUs it touches),
never O(cluster).

Decision points: after events, if some job in the visible queue window has a legal placement,
control returns to the caller (a policy or the Gymnasium env). ``advance`` runs events until the
next such point or the end of the episode.

Layout: :class:`Simulator` is one class assembled from mixins. This module holds its public API
and the event loop (``reset``, ``advance``, event dispatch, masks, ``check``/``apply``,
``metrics``); ``lifecycle.py`` the job lifecycle (arrivals, starts, stops, faults, migration);
``rates.py`` per-GPU sharing fractions and job rates; ``ticks.py`` online load ticks, SLO
accounting, SysMonitor and time integration; ``base.py`` the state they share, declared for
type checkers; ``constants.py`` the model's constants (the public ones re-exported here).
"""

from __future__ import annotations

import copy
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from heapq import heapify, heappop
from typing import Any

import numpy as np

from gpu_sharing_env.cluster import Cluster
from gpu_sharing_env.config import MechanismConfig, ScenarioConfig
from gpu_sharing_env.interference import AnalyticSpeedModel, SpeedModel, kp_coefficients
from gpu_sharing_env.metrics import Accumulator, compute_metrics
from gpu_sharing_env.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.base import WorkloadFn
from gpu_sharing_env.sim.constants import (
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
    WINDOW_ORDERS,
)
from gpu_sharing_env.sim.events import EventKind, EventQueue
from gpu_sharing_env.sim.faults import RANDOM_CAUSES, FaultCause
from gpu_sharing_env.sim.lifecycle import _Lifecycle, mask_signature
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import MonitorThresholds
from gpu_sharing_env.sim.rates import _Rates
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_env.sim.ticks import _Ticks
from gpu_sharing_env.workload.job import JobSpec

__all__ = [
    "CROSS_NODE_FACTOR",
    "DUTY_STEP",
    "MAX_BATCH_SIZE",
    "NOISE_AR",
    "PCIE_GANG_FACTOR",
    "_NOISE_SCALE",
    "Decision",
    "IllegalDecision",
    "Simulator",
    "WorkloadFn",
]


#: The largest batch size a decision may give an online service (``Decision.batch_size``).
MAX_BATCH_SIZE = 256
#: A running job with less estimated work left is no migration candidate (Gandiva's
#: ``min_remaining_s`` default, ``baselines/gandiva.py``: a migration's checkpoint-restore pause,
#: ``sharing.migration_s``, would eat most of what is left).
MIGRATION_MIN_LEFT_S = 300.0


@dataclass(frozen=True, slots=True)
class Decision:
    """Place queued job ``job_id`` with its first GPU at ``gpu`` using option ``option``.

    ``batch_size``: for an online service, the batch size it runs with on this placement
    (1..``MAX_BATCH_SIZE``; GPULet chooses it per placement); 0 (the default, and the only value
    for offline jobs) keeps the service's configured ``ServiceSpec.batch_size``. The Gymnasium
    env never sets it.
    """

    job_id: int
    gpu: int
    option: int
    batch_size: int = 0


class IllegalDecision(ValueError):
    """A decision the legality function rejects; the message says why."""


def _check_batch(st: JobState, batch_size: int) -> str | None:
    """Why a decision may not give ``st`` batch size ``batch_size`` (non-zero), or None."""
    if not st.spec.online:
        return (
            f"batch_size={batch_size}: only online services take a batch size "
            f"(job {st.spec.job_id} is offline)"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        return f"batch_size={batch_size!r}: must be an int"
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        return f"batch_size={batch_size}: must be in 1..{MAX_BATCH_SIZE} (0: the service's own)"
    return None


def _front(sigs: dict[tuple[Any, ...], list[Any]]) -> list[tuple[tuple[Any, ...], JobSpec]]:
    """The mask signatures of ``sigs`` (``mask_signature``: memory, GPU types, kind, gang size)
    that no other one dominates, with a spec of each. Of two signatures with the same GPU types
    and kind, the one with no more memory and no more GPUs fits wherever the other does (every
    memory test of ``Cluster.placement_mask`` is ``mem <= bound`` or ``x + mem <= bound``, a
    gang of ``n`` needs ``n`` legal GPUs under one option, and a single GPU job may also use
    MIG), so "does any of ``sigs`` fit" is "does any of the front fit"."""
    out: list[tuple[tuple[Any, ...], JobSpec]] = []
    least: dict[tuple[Any, ...], float] = {}  # per (types, kind): the least memory kept
    for sig, (_, spec) in sorted(sigs.items(), key=lambda kv: (kv[0][3], kv[0][0])):
        group = (sig[1], sig[2])
        m = least.get(group)
        if m is None or sig[0] < m:  # (by gang size, then memory: earlier ones have <= GPUs)
            least[group] = sig[0]
            out.append((sig, spec))
    return out


#: Source of ``Simulator.uid``.
_UIDS = itertools.count()


def _checked_order(order: str) -> str:
    """``order`` if it is one of :data:`WINDOW_ORDERS`; else a ValueError naming the rule."""
    if order not in WINDOW_ORDERS:
        raise ValueError(f"window_order={order!r}: must be one of {', '.join(WINDOW_ORDERS)}")
    return order


class Simulator(_Lifecycle, _Rates, _Ticks):
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
    """

    def __init__(
        self,
        cfg: ScenarioConfig,
        nodes: Sequence[NodeSpec],
        workload: WorkloadFn,
        speed: SpeedModel | None = None,
        thresholds: MonitorThresholds | None = None,
    ) -> None:
        self.cfg = cfg
        self.cluster = Cluster(nodes, cfg.sharing)
        self.options = self.cluster.options
        self.speed = (
            speed
            if speed is not None
            else AnalyticSpeedModel(None, **kp_coefficients(cfg.mechanisms.kernel_priority_level))
        )
        self.workload = workload
        self.mechanisms = cfg.mechanisms
        self.horizon_s = cfg.horizon_h * 3600.0
        self.thresholds = thresholds if thresholds is not None else MonitorThresholds()
        c = self.cluster
        # Static per-GPU facts as Python lists (scalar reads on the hot path).
        self._node_of = c.node_of.tolist()
        self._type_of = list(c.type_name_of)
        self._node_gpus = [
            range(int(first), int(first) + n.num_gpus)
            for first, n in zip(c.node_first_gpu, c.nodes, strict=True)
        ]
        self._node_pcie = [n.interconnect is Interconnect.PCIE for n in c.nodes]
        self._node_vcpus = c.node_vcpus.tolist()
        self._mem_cap = c.mem_cap.tolist()
        self._n_gpus_f = float(c.n_gpus)
        #: Per placement option: its MPS SM share as a fraction (``sm_pct / 100.0``).
        self._opt_share = [o.sm_pct / 100.0 for o in self.options]
        #: GPUs of the fleet whose type and memory fit, by (gpu_types, mem_gb) (static).
        self._fit_count = {}
        rates = cfg.faults.rate_per_gpu_h
        self._fault_w = np.array([rates.get(c.value, 0.0) for c in RANDOM_CAUSES])
        self._fault_rate_per_s = float(self._fault_w.sum()) / 3600.0
        self.window = cfg.env.queue_window
        self.set_decision_scope("window")
        self._window_order = "fifo"
        self.done = True
        self.now = 0.0
        self.n_events = 0
        self.n_service_ticks = 0
        #: This simulator object's own number (unique in the process, never reused; copies get
        #: their own): what a cache keyed on "the same simulator" may use.
        self.uid = next(_UIDS)
        #: Registered :class:`~gpu_sharing_env.sim.observe.SimObserver` objects (kept across
        #: resets; not copied by :meth:`copy`).
        self._observers: list[SimObserver] = []

    # ================================================================== public API
    @property
    def speed(self) -> SpeedModel:
        """The speed/interference model (its answers are memoised until it is replaced)."""
        return self._speed

    @speed.setter
    def speed(self, model: SpeedModel) -> None:
        self._speed = model
        self._rates_cache = {}
        self._solo_cache = {}
        self._batch_ms = {}
        self._terms_cache = {}

    def add_observer(self, observer: SimObserver) -> None:
        """Call ``observer`` back on starts, stops, faults, evictions, re-partitions and ticks
        of every later event (:mod:`gpu_sharing_env.sim.observe`)."""
        if observer not in self._observers:
            self._observers.append(observer)

    def remove_observer(self, observer: SimObserver) -> None:
        """Stop calling ``observer`` back (no error if it is not registered)."""
        if observer in self._observers:
            self._observers.remove(observer)

    def watch_jobs(self) -> set[int]:
        """A set that every running job whose progress, rate or online load may change is added
        to (by id) from now on, until :meth:`reset`: what is derived from a running job's state
        (``work_done``, ``last_t``, ``rate``, ``duty``) changes only for jobs in it or for jobs
        that start or stop (their GPUs change: ``Cluster.watch``). Every such change is preceded
        by the job's accrual, which adds it. Its owner reads and empties it. Copies
        (:meth:`copy`) do not carry it."""
        w: set[int] = set()
        self._job_watchers.append(w)
        return w

    def unwatch_jobs(self, w: set[int]) -> None:
        """Stop adding to ``w`` (a set :meth:`watch_jobs` returned; nothing if it is not
        watching, e.g. after a reset)."""
        self._job_watchers[:] = [x for x in self._job_watchers if x is not w]

    @property
    def observers(self) -> tuple[SimObserver, ...]:
        """The registered observers, in the order they are called."""
        return tuple(self._observers)

    def set_mechanisms(self, **flags: bool) -> None:
        """Switch cluster mechanisms (``protection``, ``dynamic_sm``) for the next reset."""
        self.mechanisms = replace(self.mechanisms, **flags)

    def reset(
        self,
        seed: int,
        *,
        mechanisms: MechanismConfig | None = None,
        decision_scope: str | None = None,
        window_order: str | None = None,
    ) -> None:
        """Start an episode; the same seed gives the same episode, bit for bit.

        Args:
            seed: The episode's seed.
            mechanisms: The cluster mechanisms from this episode on (e.g. the scenario's with a
                policy's switched on); None keeps the current ones.
            decision_scope: ``"window"`` or ``"queue"`` (:attr:`decision_scope`); None keeps it.
            window_order: ``"fifo"`` or ``"predicted"`` (:attr:`window_order`); None keeps it.
        """
        if mechanisms is not None:
            self.mechanisms = mechanisms
        if decision_scope is not None:
            self.set_decision_scope(decision_scope)
        if window_order is not None:
            self._window_order = _checked_order(window_order)  # (the queue is rebuilt below)
        ss = np.random.SeedSequence(seed)
        w_ss, f_ss, n_ss = ss.spawn(3)
        drawn = self.workload(np.random.default_rng(w_ss))
        specs = sorted(drawn, key=lambda s: (s.submit_s, s.job_id))
        #: The duration predictor of this episode (``workload.predictor``; None: estimates come
        #: with the specs): asked at each offline arrival, fed each finished offline run.
        self.predictor = getattr(drawn, "predictor", None)
        ids = [s.job_id for s in specs]
        if len(set(ids)) != len(ids):
            raise ValueError("workload: job_id values must be unique")
        self.rng_fault = np.random.default_rng(f_ss)
        self.rng_noise = np.random.default_rng(n_ss)
        self.cluster.reset()
        self.jobs = {s.job_id: JobState(s) for s in specs}
        self._arrivals = specs
        self._next_arrival = 0
        self.queue = []  # sorted ``_queue_entry``s: (submit_s, job_id) in FIFO order
        #: Per (model, gpu_types): its fastest solo speed on the fleet (``_queue_entry``).
        self._best_speed: dict[tuple[str, tuple[str, ...]], float] = {}
        self.events = EventQueue()
        self.now = 0.0
        self.acc = Accumulator()
        g = self.cluster.n_gpus
        self._g_util = np.zeros(g)
        #: Per GPU (Python floats, read on the hot path): util, sm, mem, busy, stp, oversold,
        #: hosts-online; ``_g_util`` mirrors the first for views.
        self._g_vals = [(0.0,) * 7] * g
        self._sums = [0.0] * 7  # their sums over the fleet
        self._online_ids = [s.job_id for s in specs if s.online]
        self.health = np.zeros(g, dtype=np.int64)
        self._node_factor = [1.0] * self.cluster.n_nodes
        #: GPUs whose residents changed since their fractions were last computed (``_refresh``)
        self._dirty = set()
        self._fr_mech = self.mechanisms  # the mechanisms those fractions were computed under
        self._noise_buf = []
        self._noise_i = 0
        #: Online services that arrived and have not ended, in arrival (= ``_online_ids``) order.
        self._online_arrived = []
        self._frag_cv = self._frag_qv = -1  # (cluster, queue) versions of ``_frag_val``
        self._status_version = 0  # bumps at every job status change (``_live_online``)
        self._live = []
        self._live_c = []
        self._live_version = -1
        self._queue_version = 0
        #: Job ids in the order they entered the queue this episode (append-only; a re-queued
        #: job appears again): lets a policy keep its own ordered queue in O(log n) per change.
        self._queue_log = []
        self._frag_val = 0.0
        self._offline_total = sum(not s.online for s in specs)
        self._offline_left = self._offline_total
        self._in_system = 0
        self._mask_cache = {}
        #: Mask entries shared by the jobs of one ``mask_signature`` (for cluster version
        #: ``_sig_version``), and the queued jobs' signatures: signature -> [count, a spec].
        self._sig_masks = {}
        #: Whether a signature's mask allows anything, for ``_sig_version`` (without the mask).
        self._sig_ok = {}
        self._sig_version = -1
        self._queue_sigs = {}
        #: ``_front(_queue_sigs)``, or None when the signatures in the queue have changed.
        self._queue_front = None
        #: ``ClusterView.job``'s cache: job id -> (state, changing fields, JobView).
        self._view_cache = {}
        #: Sets of running jobs whose progress, rate or load may have changed (``watch_jobs``).
        self._job_watchers = []
        self.done = False
        self.n_events = 0
        #: Load ticks x live services at each (the online model's work; ``scripts/bench.py``).
        self.n_service_ticks = 0
        #: Per tick: (t_s, gpu_util, sm_activity, busy_gpu_frac, gpu_mem_util, max p99/SLO).
        self.timeseries = []
        self._schedule_next_arrival()
        self.events.push(self.cfg.tick_s, EventKind.TICK, 0)
        for o in self._observers:
            o.on_reset(self)
        self.advance()

    @property
    def decision_scope(self) -> str:
        """Which queued jobs a decision may place: ``"window"`` (the first ``queue_window``,
        the env's action window; the default) or ``"queue"`` (any queued job: heuristics that
        order the whole queue, e.g. PAI's SJF; the runner sets it from the policy's
        ``decision_scope``). Decision points (``needs_decision``) follow the same scope. Set by
        :meth:`reset` or :meth:`set_decision_scope`."""
        return self._decision_scope

    def set_decision_scope(self, scope: str) -> None:
        """Set :attr:`decision_scope` (``"window"`` or ``"queue"``), from the next decision on."""
        if scope not in ("window", "queue"):
            raise ValueError(f"decision_scope={scope!r}: must be 'window' or 'queue'")
        self._decision_scope = scope
        #: How many jobs from the head of the queue a decision may place.
        self._scope_n = self.window if scope == "window" else sys.maxsize

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
        return self._window_order

    def set_window_order(self, order: str) -> None:
        """Set :attr:`window_order` now: the queued jobs are re-keyed in the new order."""
        order = _checked_order(order)
        if order == self._window_order:
            return
        self._window_order = order
        if getattr(self, "queue", None):  # re-key the queued jobs
            self.queue = sorted(self._queue_entry(self.jobs[jid]) for _, jid in self.queue)
            self._queue_version += 1

    def _queue_entry(self, st: JobState) -> tuple[Any, int]:
        """The entry of queued job ``st`` in ``queue`` (sorted): ``(submit_s, job_id)`` in FIFO
        order, ``((class, predicted_s, submit_s), job_id)`` in predicted order (a job's entry
        never changes while it is queued: its estimate and progress are fixed there)."""
        spec = st.spec
        if self._window_order == "fifo":
            return (spec.submit_s, spec.job_id)
        if spec.online or spec.priority > 0:
            return ((0, 0.0, spec.submit_s), spec.job_id)
        key = (spec.model, spec.gpu_types)
        best = self._best_speed.get(key)
        if best is None:
            names = set(spec.gpu_types) if spec.gpu_types else None
            speeds = [
                self._solo_speed(spec.model, t)
                for t in self.cluster.type_names
                if names is None or t in names
            ]
            best = self._best_speed[key] = max(speeds, default=1.0)
        remaining = spec.est_work_s - st.work_done
        pred = (remaining if remaining > 0.0 else 0.0) / (best if best > 1e-9 else 1e-9)
        return ((1, pred, spec.submit_s), spec.job_id)

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

    @property
    def offline_jobs(self) -> tuple[int, int]:
        """(offline jobs in the episode, of which not yet done or failed); (0, 0) before the
        first ``reset``."""
        if not hasattr(self, "jobs"):
            return 0, 0
        return self._offline_total, self._offline_left

    def window_jobs(self) -> list[JobSpec]:
        """The first ``queue_window`` queued jobs: the ones a decision may place."""
        return [self.jobs[jid].spec for _, jid in self.queue[: self.window]]

    def queued_jobs(self) -> list[JobSpec]:
        return [self.jobs[jid].spec for _, jid in self.queue]

    def mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) placements of a queued job, from the cluster's legality function."""
        return self._mask_entry(job_id)[1]

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
        c = self.cluster
        jobs, now = self.jobs, self.now
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
        spec = self.jobs[job_id].spec
        m = self._sig_entry(mask_signature(spec), spec)[1]
        c = self.cluster
        empty = (c.n_res == 0) & c.ready
        out = m & empty[:, None]
        out.flags.writeable = False
        return out

    def placeable(self, job_id: int) -> bool:
        """Whether ``mask(job_id)`` allows anything (the mask itself is not built for it)."""
        hit = self._mask_cache.get(job_id)
        if hit is not None and hit[0] == self.cluster.version:
            return hit[2]
        spec = self.jobs[job_id].spec
        return self._sig_placeable(mask_signature(spec), spec)

    def _sig_placeable(self, sig: tuple[Any, ...], spec: JobSpec) -> bool:
        """``_sig_entry(sig, spec)[2]`` without building the mask where there is none yet
        (``Cluster.placeable``: a gang's mask is not needed to know whether it fits)."""
        if self._sig_version != self.cluster.version:
            self._sig_masks, self._sig_ok = {}, {}
            self._sig_version = self.cluster.version
        ok = self._sig_ok.get(sig)
        if ok is None:
            hit = self._sig_masks.get(sig)
            ok = self._sig_ok[sig] = hit[2] if hit is not None else self.cluster.placeable(spec)
        return ok

    def _mask_entry(self, job_id: int) -> tuple[int, np.ndarray, bool]:
        version = self.cluster.version
        hit = self._mask_cache.get(job_id)
        if hit is not None and hit[0] == version:
            return hit
        spec = self.jobs[job_id].spec
        hit = self._mask_cache[job_id] = self._sig_entry(mask_signature(spec), spec)
        return hit

    def _sig_entry(self, sig: tuple[Any, ...], spec: JobSpec) -> tuple[int, np.ndarray, bool]:
        """The mask entry of every job with mask signature ``sig`` (``spec`` one of them), memoised
        for the cluster's current version (the masks are read-only and shared)."""
        version = self.cluster.version
        if self._sig_version != version:
            self._sig_masks, self._sig_ok = {}, {}
            self._sig_version = version
        hit = self._sig_masks.get(sig)
        if hit is None:
            m = self.cluster.placement_mask(spec)
            hit = self._sig_masks[sig] = (version, m, bool(m.any()))
        return hit

    def needs_decision(self) -> bool:
        """True when some job in the window (the decision scope) can be placed now."""
        if self.done:
            return False
        if self._scope_n > self.window:
            # The whole queue: one question per signature of the queued jobs (counted as they
            # enter and leave the queue), not one per job, and only for the signatures no
            # other one dominates (``_queue_front``).
            front = self._queue_front
            if front is None:
                front = self._queue_front = _front(self._queue_sigs)
            ok = self._sig_placeable
            return any(ok(sig, spec) for sig, spec in front)
        # ``any(self.placeable(jid) ...)`` with the mask cache's hit test inlined (no mask is
        # built to answer: ``_sig_placeable``)
        version = self.cluster.version
        cache = self._mask_cache
        jobs = self.jobs
        for _, jid in self.queue[: self._scope_n]:
            hit = cache.get(jid)
            if hit is not None and hit[0] == version:
                if hit[2]:
                    return True
                continue
            spec = jobs[jid].spec
            if self._sig_placeable(mask_signature(spec), spec):
                return True
        return False

    def check(self, d: Decision) -> str | None:
        """Why ``d`` is illegal now, or None."""
        if self.done:
            return "the episode is over"
        st = self.jobs.get(d.job_id)
        if d.batch_size and st is not None:
            why = _check_batch(st, d.batch_size)
            if why is not None:
                return why
        if st is not None and st.status is Status.RUNNING:
            return self._check_migration(st, d.gpu, d.option)
        if st is None or st.status is not Status.QUEUED:
            return f"job {d.job_id} is neither queued nor running"
        n = self._scope_n
        if n < len(self.queue) and d.job_id not in [jid for _, jid in self.queue[:n]]:
            return f"job {d.job_id} is queued but outside the window of {self.window}"
        # A mask at hand answers; else the cluster's legality (its fit index: no mask built)
        hit = self._mask_cache.get(d.job_id)
        in_range = 0 <= d.gpu < self.n_gpus and 0 <= d.option < len(self.options)
        if (
            in_range
            and hit is not None
            and hit[0] == self.cluster.version
            and hit[1][d.gpu, d.option]
        ):
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
            self._migrate(st, d.gpu, d.option, d.batch_size)
        else:
            self._start(st, d.gpu, d.option, d.batch_size)
        self.acc.decisions += 1

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
        tick = self._observed_tick if self._observers else self._tick
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

    # ================================================================== lookahead
    # What a planner needs to imagine futures on a copy of the world (``agents.planner``): the
    # copy, and the steps that replace its hidden future with a sampled one. The caller decides
    # what to sample (what a scheduler may know); these keep the engine's state consistent.
    def copy(self) -> Simulator:
        """An independent copy of the simulator in its current state (``copy.deepcopy``
        semantics), sharing what never changes (the scenario, the speed model, the workload
        generator, frozen job specs, pure memo tables) and leaving out the views' caches and
        the observers: about 3-4x cheaper than a plain deep copy on ``default``."""
        memo: dict[int, object] = {id(x): x for x in (self.cfg, self.speed, self.workload)}
        for name in ("_speed", "_rates_cache", "_solo_cache"):
            if hasattr(self, name):
                memo[id(getattr(self, name))] = getattr(self, name)
        memo[id(self._observers)] = []
        clone_uid = next(_UIDS)
        if not hasattr(self, "jobs"):
            fresh = copy.deepcopy(self, memo)  # never reset: nothing else to share
            fresh.uid = clone_uid
            return fresh
        for sp in self._arrivals:
            memo[id(sp)] = sp
        for st in self.jobs.values():
            memo[id(st.spec)] = st.spec
            new = copy.copy(st)  # fields are numbers, enums, frozen specs, and these three:
            new.gpus, new.frac = list(st.gpus), dict(st.frac)
            new.mig = [None if m is None else copy.deepcopy(m, memo) for m in st.mig]
            memo[id(st)] = new  # (MIG instances through the memo: the cluster shares them)
        memo[id(self._view_cache)] = {}
        memo[id(self._job_watchers)] = []
        memo[id(self._mask_cache)] = {}
        memo[id(self.timeseries)] = list(self.timeseries)  # tuples of floats: immutable
        clone = copy.deepcopy(self, memo)
        clone.uid = clone_uid
        return clone

    def reseed(self, fault_seed: int, noise_seed: int) -> None:
        """Fresh random streams for faults and online-load noise (a sampled future's own)."""
        self.rng_fault = np.random.default_rng(fault_seed)
        self.rng_noise = np.random.default_rng(noise_seed)
        self._noise_buf, self._noise_i = [], 0

    def progress(self, job_id: int) -> float:
        """Work done by a job so far (in solo-V100 seconds), brought up to ``now``."""
        st = self.jobs[job_id]
        if st.status is Status.RUNNING:
            self._accrue(st)
        return st.work_done

    def set_true_spec(self, job_id: int, spec: JobSpec) -> None:
        """Replace a job's hidden truth (``work_s``, ``true_mem_gb``: a sampled belief); a
        running job's completion is rescheduled at its new duration."""
        st = self.jobs[job_id]
        if replace(spec, work_s=st.spec.work_s, true_mem_gb=st.spec.true_mem_gb) != st.spec:
            raise ValueError(
                f"set_true_spec: job {job_id}: only work_s and true_mem_gb (the hidden truth) "
                f"may change"
            )
        if st.status is Status.RUNNING:
            self._accrue(st)
            st.spec = spec
            self._set_rate(st)  # reschedules the completion (lazily stales the old event)
        else:
            st.spec = spec

    def inject_fault(self, job_id: int, cause: FaultCause) -> None:
        """Fail running job ``job_id`` now with ``cause``, as a drawn fault does: the error
        propagates to co-located jobs by sharing mode, work since the last checkpoint is lost,
        the job is re-queued or given up (``faults.max_attempts``). Draws nothing from the fault
        stream (the job's pending fault event, if any, stays)."""
        st = self.jobs[job_id]
        if st.status is not Status.RUNNING:
            raise ValueError(f"inject_fault: job {job_id} is not running ({st.status.name})")
        self._fail(st, cause)

    def redraw_faults(self) -> None:
        """Drop the pending fault events and draw new ones for the running jobs (in job id
        order) from the fault stream (after :meth:`reseed`: a sampled future's faults)."""
        heap = [e for e in self.events.heap if e[1] != _K_FAULT]
        heapify(heap)
        self.events.heap = heap
        for st in sorted(self.jobs.values(), key=lambda st: st.spec.job_id):
            if st.status is Status.RUNNING:
                self._schedule_fault(st)

    def replace_future_offline(self, specs: Sequence[JobSpec]) -> None:
        """Replace the offline jobs that have not arrived yet by ``specs`` (a sampled future;
        each must arrive after ``now``). They get fresh job ids after every id in use, in the
        given order; future online arrivals are kept."""
        if any(sp.online or sp.submit_s <= self.now for sp in specs):
            raise ValueError("replace_future_offline: offline jobs arriving after now only")
        future = Status.FUTURE
        heap = [e for e in self.events.heap if e[1] != _K_ARRIVAL]
        heapify(heap)
        self.events.heap = heap
        arrived = [sp for sp in self._arrivals if self.jobs[sp.job_id].status is not future]
        kept = [sp for sp in self._arrivals if self.jobs[sp.job_id].status is future and sp.online]
        for sp in self._arrivals:
            if self.jobs[sp.job_id].status is future and not sp.online:
                del self.jobs[sp.job_id]
        first = max(self.jobs) + 1
        fresh = [replace(sp, job_id=first + i) for i, sp in enumerate(specs)]
        for sp in fresh:
            self.jobs[sp.job_id] = JobState(sp)
        self._arrivals = arrived + sorted(kept + fresh, key=lambda sp: (sp.submit_s, sp.job_id))
        self._next_arrival = len(arrived)
        offline = [st for st in self.jobs.values() if not st.online]
        self._offline_total = len(offline)
        self._offline_left = sum(st.status not in (Status.DONE, Status.FAILED) for st in offline)
        self._schedule_next_arrival()

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """A model class's solo speed on a GPU type (memoised ``speed.solo_speed``)."""
        return self._solo_speed(model, gpu_type)

    def _observed_tick(self) -> bool:
        changed = self._tick()
        for o in self._observers:
            o.on_tick(self, changed)
        return changed

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
