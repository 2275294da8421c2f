"""The episode's jobs (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`).

:class:`JobTable` owns the job records (``JobState`` by id), the arrival schedule, the counters
derived from the jobs' statuses (offline jobs left, offline jobs in the system, a version that
bumps at every status change) and the views' per-job cache. Every status change goes through
:meth:`JobTable.set_status`, which keeps the counters.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.sim.constants import _DONE, _FAILED, _K_ARRIVAL, _ONLINE, _QUEUED, _RUNNING
from gpu_sharing_env.sim.state import Status, new_record
from gpu_sharing_env.workload.job import JobSpec

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

if cython.compiled:  # the typed job record and event queue (state.pxd, events.pxd)
    from cython.cimports.gpu_sharing_env.sim.events import EventQueue
    from cython.cimports.gpu_sharing_env.sim.state import JobState
    from cython.cimports.gpu_sharing_env.workload.job import _take
else:
    from gpu_sharing_env.fleet.cluster import _slot_read as _take
    from gpu_sharing_env.sim.events import EventQueue
    from gpu_sharing_env.sim.state import JobState

#: ``JobSpec``'s slot descriptors an arrival reads (compiled, ``_take``: a C member read).
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_SUBMIT_S = JobSpec.__dict__["submit_s"]
_S_GPU_TYPES = JobSpec.__dict__["gpu_types"]
_S_MEM_GB = JobSpec.__dict__["mem_gb"]
_S_NUM_GPUS = JobSpec.__dict__["num_gpus"]

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator


class JobTable:
    """Job records, arrivals and the status counters of one episode."""

    __slots__ = (
        "_cluster",
        "_fit_count",
        "_sim",
        "arrivals",
        "in_system",
        "jobs",
        "next_arrival",
        "offline_left",
        "offline_total",
        "status_version",
        "view_cache",
    )

    def __init__(self, sim: Simulator, cluster: Cluster) -> None:
        self._sim = sim
        self._cluster = cluster
        #: GPUs of the fleet whose type and memory fit, by (gpu_types, mem_gb) (static).
        self._fit_count: dict[tuple[tuple[str, ...], float], int] = {}
        #: Job id -> its runtime record.
        self.jobs: dict[int, JobState] = {}
        #: The episode's specs by (submit_s, job_id); ``next_arrival`` indexes the next one.
        self.arrivals: list[JobSpec] = []
        self.next_arrival = 0
        self.offline_total = 0
        #: Offline jobs not yet done or failed.
        self.offline_left = 0
        #: Offline jobs queued or running.
        self.in_system = 0
        #: Bumps at every job status change (memos of the live services key on it).
        self.status_version = 0
        #: ``ClusterView.job``'s cache: job id -> (state, changing fields, JobView).
        self.view_cache: dict[Any, Any] = {}

    def __reduce__(self) -> tuple[Any, tuple[()], dict[str, Any]]:
        """A pickle or a deep copy starts with an empty views' cache: the cached views and the
        views' shared part read the original's cluster arrays, not the copy's. (Its own
        ``__reduce__``: compiled, an extension type's default pickling would not ask
        ``__getstate__``.)"""
        state = {k: getattr(self, k) for k in self.__slots__ if hasattr(self, k)}
        state["view_cache"] = {}
        return _new_table, (), state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)

    def reset(self, specs: list[JobSpec]) -> None:
        """A new episode's jobs (``specs`` sorted by submission)."""
        self.jobs = {s.job_id: new_record(s) for s in specs}  # (``JobState(s)``)
        self.arrivals = specs
        self.next_arrival = 0
        self.offline_total = sum(s.kind is not _ONLINE for s in specs)
        self.offline_left = self.offline_total
        self.in_system = 0
        self.status_version = 0
        self.view_cache = {}

    def copy_memo(self, memo: dict[int, Any]) -> None:
        """Prime ``copy.deepcopy``'s ``memo`` for ``Simulator.copy``: the frozen specs are
        shared, each job record is copied field by field (its three containers and its two
        sub-records anew; MIG instances through the memo: the cluster shares them) and the
        views' cache starts empty."""
        for sp in self.arrivals:
            memo[id(sp)] = sp
        for st in self.jobs.values():
            memo[id(st.spec)] = st.spec
            new = copy.copy(st)  # its own sub-records; numbers, enums, frozen specs, and:
            new.gpus, new.frac = list(st.gpus), dict(st.frac)
            new.mig = [None if m is None else copy.deepcopy(m, memo) for m in st.mig]
            memo[id(st)] = new
            memo[id(st.serving)], memo[id(st.ledger)] = new.serving, new.ledger
        memo[id(self.view_cache)] = {}
        memo[id(self._fit_count)] = self._fit_count  # (a memo of the static fleet: shared)

    @cython.locals(st=JobState)
    def set_status(self, st: JobState, status: Status) -> None:
        """Move ``st`` to ``status``, keeping the counters (offline jobs left and in the system,
        the status version)."""
        if not st.online:
            old = st.status
            self.in_system += (status is _QUEUED or status is _RUNNING) - (
                old is _QUEUED or old is _RUNNING
            )
            self.offline_left -= (status is _DONE or status is _FAILED) - (
                old is _DONE or old is _FAILED
            )
        st.status = status
        self.status_version += 1

    @cython.locals(events=EventQueue)
    def schedule_next_arrival(self) -> None:
        """Push the next submission's ARRIVAL event (one is pending at a time)."""
        if self.next_arrival < len(self.arrivals):
            s = self.arrivals[self.next_arrival]
            self.next_arrival += 1
            events = self._sim.events  # (compiled, typed: ``push`` is a C call)
            events.push(_take(s, _S_SUBMIT_S), _K_ARRIVAL, _take(s, _S_JOB_ID))

    def feasible(self, spec: JobSpec) -> bool:
        """Could the job ever run on this fleet (an empty cluster)? (Compiled, a C method the
        lifecycle calls at each arrival, the spec's slots read in C.)"""
        key = (_take(spec, _S_GPU_TYPES), _take(spec, _S_MEM_GB))
        n = self._fit_count.get(key)
        if n is None:
            c = self._cluster
            ok = c.type_ok(spec.gpu_types) & (c.mem_cap >= spec.mem_gb - 1e-9)
            if len(self._fit_count) >= 4096:
                self._fit_count.clear()
            n = self._fit_count[key] = int(ok.sum())
        return n >= _take(spec, _S_NUM_GPUS)

    def replace_future_offline(self, specs: Sequence[JobSpec], now: float) -> None:
        """Replace the offline jobs that have not arrived yet by ``specs`` (fresh ids after every
        id in use, in the given order; the caller has dropped the pending ARRIVAL event)."""
        future = Status.FUTURE
        jobs = self.jobs
        arrived = [sp for sp in self.arrivals if jobs[sp.job_id].status is not future]
        kept = [sp for sp in self.arrivals if jobs[sp.job_id].status is future and sp.online]
        for sp in self.arrivals:
            if jobs[sp.job_id].status is future and not sp.online:
                del jobs[sp.job_id]
        first = max(jobs) + 1
        fresh = [replace(sp, job_id=first + i) for i, sp in enumerate(specs)]
        for sp in fresh:
            jobs[sp.job_id] = new_record(sp)
        self.arrivals = arrived + sorted(kept + fresh, key=lambda sp: (sp.submit_s, sp.job_id))
        self.next_arrival = len(arrived)
        offline = [st for st in jobs.values() if not st.online]
        self.offline_total = len(offline)
        self.offline_left = sum(st.status not in (Status.DONE, Status.FAILED) for st in offline)
        self.schedule_next_arrival()


def _new_table() -> JobTable:
    """An empty table for :meth:`JobTable.__setstate__` to fill (a pickle's or a copy's)."""
    return JobTable.__new__(JobTable)
