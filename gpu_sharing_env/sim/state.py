"""Mutable per-job runtime state (the simulator's own; policies see read-only views)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from gpu_sharing_env.cluster import MigInstance
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
