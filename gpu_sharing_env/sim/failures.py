"""Faults (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`): drawn fault events,
their causes and their propagation (the model: :mod:`~gpu_sharing_env.sim.faults`).

:class:`Faults` owns the fault stream and the fleet's fault rates. A fault on a running job is
counted, reported to the observers, and the job restarts (an online service, after
``faults.restart_delay_s``) or is preempted back to the queue (through the lifecycle); under MPS
it takes the co-located clients down with it unless mixed error handling stops it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

try:  # compiled (gpu_sharing_env._compile): numpy's C exponential (schedule); else no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.config import MechanismConfig, ScenarioConfig
from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.constants import _K_FAULT
from gpu_sharing_env.sim.faults import RANDOM_CAUSES, FaultCause, propagates
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.rates import Rates
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_env.workload.job import JobSpec

if cython.compiled:  # numpy's random_exponential on the generator's bit generator; C calls
    from cython.cimports.gpu_sharing_env.workload._npyrandom import exponential1
    from cython.cimports.gpu_sharing_env.workload.job import _take
    from cython.cimports.gpu_sharing_env.workload.synthetic import draw_capsule
else:
    from gpu_sharing_env.fleet.cluster import _slot_read as _take
    from gpu_sharing_env.workload.synthetic import draw_capsule

# ``JobSpec``'s slot descriptors ``schedule`` reads (``_take(spec, _S_JOB_ID)`` is
# ``spec.job_id``: compiled, a member read, ``job.pxd``'s ``_take``).
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_NUM_GPUS = JobSpec.__dict__["num_gpus"]

#: Infinity (compiled, a C double constant: ``schedule``'s test, no float object made).
_INF = float("inf")

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator
    from gpu_sharing_env.sim.lifecycle import Lifecycle


class Faults:
    """Fault events: scheduling, drawing a cause, failing a job and propagating."""

    __slots__ = (
        "_cfg",
        "_cluster",
        "_jobs",
        "_lifecycle",
        "_observers",
        "_rate_per_s",
        "_rates",
        "_rng",
        "_sim",
        "_w",
        "mechanisms",
    )

    def __init__(
        self,
        sim: Simulator,
        cluster: Cluster,
        rates: Rates,
        cfg: ScenarioConfig,
        mechanisms: MechanismConfig,
        observers: list[SimObserver],
    ) -> None:
        self._sim = sim
        #: The simulator's observers (its list: registrations show here).
        self._observers = observers
        self._cluster = cluster
        self._rates = rates
        #: The scenario (its ``faults`` section; shared, never copied).
        self._cfg = cfg
        #: The cluster mechanisms in force (``mixed_error_handling``).
        self.mechanisms = mechanisms
        per_h = cfg.faults.rate_per_gpu_h
        #: Per random cause: its rate per GPU-hour.
        self._w = np.array([per_h.get(c.value, 0.0) for c in RANDOM_CAUSES])
        self._rate_per_s = float(self._w.sum()) / 3600.0
        self._rng = np.random.default_rng(0)
        self._jobs: dict[int, JobState] = {}
        self._lifecycle: Lifecycle | None = None

    def connect(self, lifecycle: Lifecycle) -> None:
        """The lifecycle that preempts a failed offline job (built after this component)."""
        self._lifecycle = lifecycle

    def reset(
        self, jobs: dict[int, JobState], rng: np.random.Generator, mechanisms: MechanismConfig
    ) -> None:
        self._jobs = jobs
        self._rng = rng
        self.mechanisms = mechanisms

    def reseed(self, rng: np.random.Generator) -> None:
        """A fresh fault stream (a sampled future's own)."""
        self._rng = rng

    def set_mechanisms(self, mechanisms: MechanismConfig) -> None:
        self.mechanisms = mechanisms

    @cython.locals(scale=cython.double, dt=cython.double)
    def schedule(self, st: JobState) -> None:
        """Draw the time of running ``st``'s next fault (none where faults are off).
        Compiled, the scale and the draw are C doubles (the same IEEE quotient and sum: a
        GPU count converts to the double it is)."""
        if self._rate_per_s <= 0:
            return
        sim = self._sim
        spec = st.spec
        scale = 1.0 / (self._rate_per_s * _take(spec, _S_NUM_GPUS))
        # ``self._rng.exponential(scale)``; compiled, the C function it runs (the same double,
        # the same stream: ``workload.synthetic.draw_capsule``), without its ~4 k instructions
        dc = draw_capsule(self._rng) if cython.compiled else None
        if dc is not None and 0.0 < scale < _INF:
            dt = exponential1(dc, scale)
        else:
            dt = self._rng.exponential(scale)
        sim.events.push(sim.now + dt, _K_FAULT, _take(spec, _S_JOB_ID), st.run_id)

    def strike(self, st: JobState) -> None:
        """A FAULT event of running ``st`` fired: draw its cause and fail it (a service that
        keeps running gets its next fault drawn)."""
        w = self._w / self._w.sum()
        cause = RANDOM_CAUSES[int(self._rng.choice(len(w), p=w))]
        self.fail(st, cause)
        if st.spec.online and st.status is Status.RUNNING:
            self.schedule(st)

    def fail(self, st: JobState, cause: FaultCause, victim: bool = False) -> None:
        """Fail running ``st`` with ``cause`` (``victim``: propagated from a co-located client)."""
        sim = self._sim
        acc = sim.acc
        acc.errors_total += 1
        acc.errors_propagated += int(victim)
        acc.errors_by_cause[cause.value] = acc.errors_by_cause.get(cause.value, 0) + 1
        for o in self._observers:
            o.on_fault(sim, st.spec.job_id, cause, victim)
        gpus = list(st.gpus)
        c = self._cluster
        mode = SharingMode(int(c.mode[gpus[0]]))
        others = sorted({j for g in gpus for j in c.residents[g]} - {st.spec.job_id})
        cfg = self._cfg.faults
        if st.spec.online:
            st.serving.outage_until = sim.now + cfg.restart_delay_s
            acc.gpu_hours_lost += cfg.restart_delay_s * len(gpus) / 3600.0
        else:
            st.ledger.attempts += 1
            assert self._lifecycle is not None
            freed, lost_wall = self._lifecycle.preempt(st)
            acc.gpu_hours_lost += lost_wall * len(freed) / 3600.0
            self._rates.refresh(freed)
        mixed = cfg.mixed_handling or self.mechanisms.mixed_error_handling
        if not victim and propagates(cause, mode, mixed):
            jobs = self._jobs
            for jid in others:
                other = jobs[jid]
                if other.status is Status.RUNNING:
                    self.fail(other, cause, victim=True)

    def redraw(self) -> None:
        """Draw new fault events for the running jobs (in job id order; the caller dropped the
        pending ones)."""
        for st in sorted(self._jobs.values(), key=lambda st: st.spec.job_id):
            if st.status is Status.RUNNING:
                self.schedule(st)
