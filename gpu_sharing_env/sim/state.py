"""Mutable per-job runtime state (the simulator's own; policies see read-only views).

:class:`JobState` is the one record the simulator's components share. Who writes which
field (everyone else only reads it; a field named twice is one quantity two steps keep, e.g.
``work_done`` accrued by the rates and rolled back by the lifecycle):

==============================  ============================================================
component                       fields
==============================  ============================================================
``JobTable`` (``jobs.py``)      ``status`` (only through ``JobTable.set_status``)
``Lifecycle``                   ``spec`` (estimates), ``gpus``, ``option``, ``mig``,
                                ``epoch`` and ``run_id`` bumps, ``last_t`` at a start,
                                ``setup_until``, ``run_start_t``, ``run_work_start``,
                                ``first_start_t``, ``finish_t``, ``enqueue_t``, ``attempts``,
                                ``evictions``, ``batch_size``, ``solo_batch_ms``,
                                ``work_done`` (a rollback or a migration's carry-over),
                                ``frac`` and ``rate`` cleared when it leaves its GPUs
``Rates`` (``rates.py``)        ``rate``, ``solo_rate``, ``frac``, ``sm_eff``, ``epoch`` (a
                                rescheduled completion), ``work_done``, ``norm_integral``,
                                ``run_time_s``, ``last_t`` (accrual), ``alone_frac``,
                                ``wait_ms``, ``tail_ms``
``OnlineLoad`` (``ticks.py``)   ``noise_z``, ``rps``, ``duty``, ``latency_ms``, ``p99_ms``
``Monitor`` (``monitor.py``)    ``throttle`` (SysMonitor's and xCUDA's launch fraction)
``Faults`` (``failures.py``)    ``outage_until``, ``attempts`` (a fault's count)
==============================  ============================================================

``Queue.reestimate`` gives a queued job a new estimate (``spec``); ``Simulator.set_true_spec``
replaces a job's hidden truth (``spec``) for a planner's sampled future.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from gpu_sharing_env.fleet.cluster import MigInstance
from gpu_sharing_env.workload.job import JobSpec


class Status(enum.IntEnum):
    FUTURE = 0  # not yet submitted
    QUEUED = 1
    RUNNING = 2
    DONE = 3
    FAILED = 4


@dataclass(slots=True)
class JobState:
    """A job's progress. Work is in seconds of solo exclusive running on the reference GPU."""

    spec: JobSpec
    status: Status = Status.FUTURE
    gpus: list[int] = field(default_factory=list)
    option: int = -1
    mig: list[MigInstance | None] = field(default_factory=list)
    work_done: float = 0.0
    rate: float = 0.0  # reference-seconds of work per second
    solo_rate: float = 0.0  # rate it would have alone, exclusive, on the same GPUs
    frac: dict[int, float] = field(default_factory=dict)  # per-GPU sharing fraction
    sm_eff: float = 1.0  # effective SM share (dynamic SM may change it)
    throttle: float = 1.0  # SysMonitor throttle factor for offline work
    last_t: float = 0.0
    setup_until: float = 0.0
    epoch: int = 0  # bumps when the completion time is rescheduled
    run_id: int = 0  # bumps at every (re)start; stales fault events
    run_start_t: float = 0.0
    run_work_start: float = 0.0
    first_start_t: float = math.nan
    finish_t: float = math.nan
    enqueue_t: float = 0.0
    attempts: int = 0
    evictions: int = 0
    norm_integral: float = 0.0  # integral of rate / solo_rate over running time
    run_time_s: float = 0.0
    # online services
    duty: float = 0.0  # current load-dependent utilisation at full speed
    rps: float = 0.0
    noise_z: float = 0.0  # AR(1) state of the load noise
    outage_until: float = 0.0
    latency_ms: float = 0.0
    p99_ms: float = 0.0
    solo_batch_ms: float = 0.0  # solo batch latency on the type of its first GPU (set at start)
    wait_ms: float = 0.0  # per-batch wait before it runs (time-slice wait; speed model)
    tail_ms: float = 0.0  # extra p99 latency (MPS co-runners' kernels in flight; speed model)
    alone_frac: float = 1.0  # per-batch rate it would have with no co-runner, same allocation
    online: bool = False  # ``spec.online``, read on the hot path
    batch_size: int = 0  # the placement's batch size (``Decision.batch_size``; 0: the service's)

    def __post_init__(self) -> None:
        self.online = self.spec.online

    @property
    def effective_batch_size(self) -> int:
        """The batch size an online service runs with: its placement's, else its configured one
        (0 for offline jobs)."""
        if self.batch_size:
            return self.batch_size
        svc = self.spec.service
        return svc.batch_size if svc is not None else 0

    def work_done_at(self, now: float) -> float:
        """Work done by ``now`` at the current rate (``work_done`` is as of ``last_t``)."""
        return self.work_done + (self.rate * (now - self.last_t) if now > self.last_t else 0.0)

    @property
    def remaining(self) -> float:
        return max(0.0, self.spec.work_s - self.work_done)
