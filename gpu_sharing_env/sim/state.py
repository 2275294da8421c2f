"""Mutable per-job runtime state (the simulator's own; policies see read-only views).

:class:`JobState` is the one record the simulator's components share: the job's placement
and progress, with two sub-records, an online service's serving state (``st.serving``, a
:class:`ServingState`) and the run's accounting (``st.ledger``, a :class:`JobLedger`). Who
writes which field (everyone else only reads it; a field named twice is one quantity two
steps keep, e.g. ``work_done`` accrued by the rates and rolled back by the lifecycle):

==============================  ============================================================
component                       fields
==============================  ============================================================
``JobTable`` (``jobs.py``)      ``status`` (only through ``JobTable.set_status``)
``Lifecycle``                   ``spec`` (estimates), ``gpus``, ``option``, ``mig``,
                                ``epoch`` and ``run_id`` bumps, ``last_t`` at a start,
                                ``setup_until``, ``run_start_t``, ``run_work_start``,
                                ``work_done`` (a rollback or a migration's carry-over),
                                ``frac`` and ``rate`` cleared when it leaves its GPUs;
                                ``ledger.first_start_t``, ``.finish_t``, ``.enqueue_t``,
                                ``.attempts`` (a migration's carry-over), ``.evictions``;
                                ``serving.batch_size``, ``.solo_batch_ms``,
                                ``.outage_until`` (a moved service's new replica)
``Rates`` (``rates.py``)        ``rate``, ``solo_rate``, ``frac``, ``sm_eff``, ``epoch`` (a
                                rescheduled completion), ``work_done``, ``last_t``
                                (accrual); ``ledger.norm_integral``, ``.run_time_s``;
                                ``serving.alone_frac``, ``.wait_ms``, ``.tail_ms``
``OnlineLoad`` (``ticks.py``)   ``serving.noise_z``, ``.rps``, ``.duty``, ``.latency_ms``,
                                ``.p99_ms``
``Monitor`` (``monitor.py``)    ``throttle`` (SysMonitor's and xCUDA's launch fraction)
``Faults`` (``failures.py``)    ``serving.outage_until``, ``ledger.attempts`` (a fault's
                                count)
==============================  ============================================================

``Queue.reestimate`` gives a queued job a new estimate (``spec``); ``Simulator.set_true_spec``
replaces a job's hidden truth (``spec``) for a planner's sampled future.
"""

from __future__ import annotations

import enum
import math

try:  # compiled (gpu_sharing_env._compile): the copies' fields as C assignments; else no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.fleet.cluster import MigInstance
from gpu_sharing_env.workload.job import JobKind, JobSpec


class Status(enum.IntEnum):
    FUTURE = 0  # not yet submitted
    QUEUED = 1
    RUNNING = 2
    DONE = 3
    FAILED = 4


#: ``Status.FUTURE`` as a module global (every record starts so): an enum class's attribute
#: read goes through ``EnumType.__getattr__``'s hook in Python 3.11.
_FUTURE = Status.FUTURE
#: ``spec.online`` is ``spec.kind is _ONLINE`` (no property call per record made).
_ONLINE = JobKind.ONLINE
#: A ledger's unset times (compiled, the three above are C globals: ``state.pxd``).
_NAN = math.nan


# ``no_gc`` (compiled; above ``cclass``, as Cython takes it in pure-Python mode: in the .pxd it
# is ignored): the three records are outside the cyclic garbage collector. None can be in a
# reference cycle (a record holds numbers, its frozen spec, a Status, lists of GPU ids and of
# MigInstances, which refer to no record, a dict of floats and its own sub-records), so the ~60
# records a reset makes neither count toward a collection nor get traversed by one
# (docs/notes/2026-12-02-reset-and-env-layer.md).
@cython.no_gc
@cython.cclass
class ServingState:
    """An online service's serving state (``JobState.serving``; an offline job's stays as
    made). Compiled, an extension type (``state.pxd``), as :class:`JobState`."""

    __slots__ = (
        "alone_frac",
        "batch_size",
        "duty",
        "latency_ms",
        "noise_z",
        "outage_until",
        "p99_ms",
        "rps",
        "solo_batch_ms",
        "tail_ms",
        "wait_ms",
    )

    duty: float  # current load-dependent utilisation at full speed
    rps: float
    noise_z: float  # AR(1) state of the load noise
    outage_until: float
    latency_ms: float
    p99_ms: float
    solo_batch_ms: float  # solo batch latency on the type of its first GPU (set at start)
    wait_ms: float  # per-batch wait before it runs (time-slice wait; speed model)
    tail_ms: float  # extra p99 latency (MPS co-runners' kernels in flight; speed model)
    alone_frac: float  # per-batch rate it would have with no co-runner, same allocation
    batch_size: int  # the placement's batch size (``Decision.batch_size``; 0: the service's)

    def __init__(self) -> None:
        _fresh_serving(self)

    def __copy__(self) -> ServingState:
        return _copy_serving(self)


@cython.no_gc
@cython.cclass
class JobLedger:
    """A job's accounting over its runs (``JobState.ledger``): when it was queued, first
    started and finished, its attempts and evictions, the integrals of its running time.
    Compiled, an extension type (``state.pxd``), as :class:`JobState`."""

    __slots__ = (
        "attempts",
        "enqueue_t",
        "evictions",
        "finish_t",
        "first_start_t",
        "norm_integral",
        "run_time_s",
    )

    first_start_t: float
    finish_t: float
    enqueue_t: float
    attempts: int
    evictions: int
    norm_integral: float  # integral of rate / solo_rate over running time
    run_time_s: float

    def __init__(self) -> None:
        _fresh_ledger(self)

    def __copy__(self) -> JobLedger:
        return _copy_ledger(self)


# A new record's fields, in one place for the constructors and :func:`new_record` (compiled: C
# functions on the typed records).
@cython.locals(s=ServingState)
def _fresh_serving(s: ServingState) -> None:
    """``ServingState()``'s fields."""
    s.duty = 0.0
    s.rps = 0.0
    s.noise_z = 0.0
    s.outage_until = 0.0
    s.latency_ms = 0.0
    s.p99_ms = 0.0
    s.solo_batch_ms = 0.0
    s.wait_ms = 0.0
    s.tail_ms = 0.0
    s.alone_frac = 1.0
    s.batch_size = 0


@cython.locals(led=JobLedger)
def _fresh_ledger(led: JobLedger) -> None:
    """``JobLedger()``'s fields."""
    led.first_start_t = _NAN
    led.finish_t = _NAN
    led.enqueue_t = 0.0
    led.attempts = 0
    led.evictions = 0
    led.norm_integral = 0.0
    led.run_time_s = 0.0


@cython.locals(old=ServingState, new=ServingState)
def _copy_serving(old: ServingState) -> ServingState:
    """A new ``ServingState`` with ``old``'s field values (compiled: C assignments)."""
    new = ServingState.__new__(ServingState)
    new.duty = old.duty
    new.rps = old.rps
    new.noise_z = old.noise_z
    new.outage_until = old.outage_until
    new.latency_ms = old.latency_ms
    new.p99_ms = old.p99_ms
    new.solo_batch_ms = old.solo_batch_ms
    new.wait_ms = old.wait_ms
    new.tail_ms = old.tail_ms
    new.alone_frac = old.alone_frac
    new.batch_size = old.batch_size
    return new


@cython.locals(old=JobLedger, new=JobLedger)
def _copy_ledger(old: JobLedger) -> JobLedger:
    """A new ``JobLedger`` with ``old``'s field values (compiled: C assignments)."""
    new = JobLedger.__new__(JobLedger)
    new.first_start_t = old.first_start_t
    new.finish_t = old.finish_t
    new.enqueue_t = old.enqueue_t
    new.attempts = old.attempts
    new.evictions = old.evictions
    new.norm_integral = old.norm_integral
    new.run_time_s = old.run_time_s
    return new


@cython.no_gc
@cython.cclass
class JobState:
    """A job's progress. Work is in seconds of solo exclusive running on the reference GPU.

    Compiled, an extension type whose float fields are C doubles (``state.pxd``): the
    components' hot loops read them without a Python object; interpreted, a class with
    ``__slots__``. Either way a float field holds a Python float's value (an ``int`` or a numpy
    float written to one reads back as a ``float`` when compiled: the same IEEE double). Its
    sub-records are typed fields there (a read is one pointer hop).
    """

    __slots__ = (
        "epoch",
        "frac",
        "gpus",
        "last_t",
        "ledger",
        "mig",
        "online",
        "option",
        "rate",
        "run_id",
        "run_start_t",
        "run_work_start",
        "serving",
        "setup_until",
        "sm_eff",
        "solo_rate",
        "spec",
        "status",
        "throttle",
        "work_done",
    )

    spec: JobSpec
    status: Status
    gpus: list[int]
    option: int
    mig: list[MigInstance | None]
    work_done: float
    rate: float  # reference-seconds of work per second
    solo_rate: float  # rate it would have alone, exclusive, on the same GPUs
    frac: dict[int, float]  # per-GPU sharing fraction
    sm_eff: float  # effective SM share (dynamic SM may change it)
    throttle: float  # SysMonitor throttle factor for offline work
    last_t: float
    setup_until: float
    epoch: int  # bumps when the completion time is rescheduled
    run_id: int  # bumps at every (re)start; stales fault events
    run_start_t: float
    run_work_start: float
    online: bool  # ``spec.online``, read on the hot path
    serving: ServingState  # an online service's load, latency and batch
    ledger: JobLedger  # times, attempts, evictions, running-time integrals

    def __init__(self, spec: JobSpec) -> None:
        _fresh_record(self, spec)

    def __repr__(self) -> str:
        return f"JobState(job_id={self.spec.job_id}, status={self.status.name})"

    def __copy__(self) -> JobState:
        """A shallow copy (the containers shared, as ``copy.copy`` of a plain object) with
        sub-records of its own (their fields are the record's: a copy's accrual or load never
        moves the original's)."""
        return _copy_record(self)

    @property
    def effective_batch_size(self) -> int:
        """The batch size an online service runs with: its placement's, else its configured one
        (0 for offline jobs)."""
        batch = self.serving.batch_size
        if batch:
            return batch
        svc = self.spec.service
        return svc.batch_size if svc is not None else 0

    def work_done_at(self, now: float) -> float:
        """Work done by ``now`` at the current rate (``work_done`` is as of ``last_t``)."""
        return self.work_done + (self.rate * (now - self.last_t) if now > self.last_t else 0.0)

    @property
    def remaining(self) -> float:
        return max(0.0, self.spec.work_s - self.work_done)


@cython.locals(st=JobState, sv=ServingState, led=JobLedger)
def _fresh_record(st: JobState, spec: JobSpec) -> None:
    """``JobState(spec)``'s fields (its two sub-records made as :func:`new_record` makes it:
    without their constructors' calls)."""
    st.spec = spec
    st.status = _FUTURE
    st.gpus = []
    st.option = -1
    st.mig = []
    st.work_done = 0.0
    st.rate = 0.0
    st.solo_rate = 0.0
    st.frac = {}
    st.sm_eff = 1.0
    st.throttle = 1.0
    st.last_t = 0.0
    st.setup_until = 0.0
    st.epoch = 0
    st.run_id = 0
    st.run_start_t = 0.0
    st.run_work_start = 0.0
    st.online = spec.kind is _ONLINE
    sv = ServingState.__new__(ServingState)
    _fresh_serving(sv)
    st.serving = sv
    led = JobLedger.__new__(JobLedger)
    _fresh_ledger(led)
    st.ledger = led


@cython.locals(st=JobState)
def new_record(spec: JobSpec) -> JobState:
    """``JobState(spec)``: compiled, the types' ``__new__`` and C assignments, without the three
    constructors' calls (``JobTable.reset`` makes a record per episode job)."""
    st = JobState.__new__(JobState)
    _fresh_record(st, spec)
    return st


@cython.locals(old=JobState, new=JobState)
def _copy_record(old: JobState) -> JobState:
    """``copy.copy(old)``: a new ``JobState`` with ``old``'s field values (its containers
    shared) and copies of its sub-records (compiled: C assignments)."""
    new = JobState.__new__(JobState)
    new.spec = old.spec
    new.status = old.status
    new.gpus = old.gpus
    new.option = old.option
    new.mig = old.mig
    new.work_done = old.work_done
    new.rate = old.rate
    new.solo_rate = old.solo_rate
    new.frac = old.frac
    new.sm_eff = old.sm_eff
    new.throttle = old.throttle
    new.last_t = old.last_t
    new.setup_until = old.setup_until
    new.epoch = old.epoch
    new.run_id = old.run_id
    new.run_start_t = old.run_start_t
    new.run_work_start = old.run_work_start
    new.online = old.online
    new.serving = _copy_serving(old.serving)
    new.ledger = _copy_ledger(old.ledger)
    return new
