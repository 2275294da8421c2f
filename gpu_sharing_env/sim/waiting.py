"""The queue and its window (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`).

:class:`Queue` owns the sorted queue of waiting jobs (``Simulator.queue``), its version and log,
the settings that shape it (the window's size, the decision scope, the window order) and the
count of queued jobs per mask signature (``legality.mask_signature``) with the signatures no
other one dominates (what "can anything in the queue be placed" needs to ask).
"""

from __future__ import annotations

import sys
from bisect import bisect_left, insort
from typing import Any

from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.sim.constants import _ONLINE, WINDOW_ORDERS
from gpu_sharing_env.sim.speed import SpeedMemo
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.workload.predictor import OnlinePredictor

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

if cython.compiled:  # the typed job record (state.pxd): its fields C reads; slot reads
    from cython.cimports.gpu_sharing_env.sim.state import JobState
    from cython.cimports.gpu_sharing_env.workload.job import _take
else:
    from gpu_sharing_env.fleet.cluster import _slot_read as _take
    from gpu_sharing_env.sim.state import JobState

# ``JobSpec``'s slot descriptors of the fields a queued job's entry reads (``_take(spec,
# _S_JOB_ID)`` is ``spec.job_id``: compiled, a member read, ``job.pxd``'s ``_take``, where each
# was a generic attribute read).
_S_EST_WORK_S = JobSpec.__dict__["est_work_s"]
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_KIND = JobSpec.__dict__["kind"]
_S_PRIORITY = JobSpec.__dict__["priority"]
_S_SUBMIT_S = JobSpec.__dict__["submit_s"]
#: The descriptors of the signature's other fields, in its order: memory, GPU types, gang size.
_SIG_SLOTS = tuple(JobSpec.__dict__[f] for f in ("mem_gb", "gpu_types", "num_gpus"))


def mask_signature(spec: JobSpec) -> tuple[Any, ...]:
    """What a job's placement mask depends on (``Cluster.placement_mask``): its memory, GPU
    types, kind and gang size. Jobs with equal signatures have equal masks."""
    mem, types, n = _SIG_SLOTS
    return (_take(spec, mem), _take(spec, types), _take(spec, _S_KIND) is _ONLINE, _take(spec, n))


def front(sigs: dict[tuple[Any, ...], list[Any]]) -> list[tuple[tuple[Any, ...], JobSpec]]:
    """The mask signatures of ``sigs`` (``mask_signature``: memory, GPU types, kind, gang size)
    that no other one dominates, with a spec of each. Of two signatures with the same GPU types
    and kind, the one with no more memory and no more GPUs fits wherever the other does (every
    memory test of ``Cluster.placement_mask`` is ``mem <= bound`` or ``x + mem <= bound``, a
    gang of ``n`` needs ``n`` legal GPUs under one option, and a single GPU job may also use
    MIG), so "does any of ``sigs`` fit" is "does any of the front fit"."""
    if len(sigs) <= 1:  # (a short queue's usual case: nothing to sort or compare)
        return [(sig, spec) for sig, (_, spec) in sigs.items()]
    out: list[tuple[tuple[Any, ...], JobSpec]] = []
    least: dict[tuple[Any, ...], float] = {}  # per (types, kind): the least memory kept
    for sig, (_, spec) in sorted(sigs.items(), key=lambda kv: (kv[0][3], kv[0][0])):
        group = (sig[1], sig[2])
        m = least.get(group)
        if m is None or sig[0] < m:  # (by gang size, then memory: earlier ones have <= GPUs)
            least[group] = sig[0]
            out.append((sig, spec))
    return out


def checked_order(order: str) -> str:
    """``order`` if it is one of :data:`WINDOW_ORDERS`; else a ValueError naming the rule."""
    if order not in WINDOW_ORDERS:
        raise ValueError(f"window_order={order!r}: must be one of {', '.join(WINDOW_ORDERS)}")
    return order


class Queue:
    """The queue of waiting jobs, its window and its settings."""

    __slots__ = (
        "_best_speed",
        "_front",
        "_jobs",
        "_memo",
        "_sigs",
        "_type_names",
        "entries",
        "log",
        "order",
        "scope",
        "scope_n",
        "taken",
        "version",
        "window",
    )

    def __init__(self, cluster: Cluster, memo: SpeedMemo, window: int) -> None:
        self._memo = memo
        self._type_names = cluster.type_names
        #: How many queued jobs the env's action window holds (``queue_window``).
        self.window = window
        #: ``"fifo"`` or ``"predicted"`` (``Simulator.window_order``).
        self.order = "fifo"
        #: ``"window"`` or ``"queue"`` (``Simulator.decision_scope``).
        self.scope = "window"
        #: How many jobs from the queue's head a decision may place.
        self.scope_n = window
        self._jobs: dict[int, JobState] = {}
        #: Sorted queue entries (:meth:`entry`): ``(submit_s, job_id)`` in FIFO order.
        self.entries: list[tuple[Any, int]] = []
        #: Bumps at every change of the queue.
        self.version = 0
        #: How many times a job left the queue this episode (:meth:`take`: a start). A job
        #: queued at two times with the same count stayed queued between them, so its enqueue
        #: time is the same (it changes only when the job enters the queue again).
        self.taken = 0
        #: Job ids in the order they entered the queue this episode (append-only; a re-queued
        #: job appears again): lets a policy keep its own ordered queue in O(log n) per change.
        self.log: list[int] = []
        #: Per (model, gpu_types): its fastest solo speed on the fleet (:meth:`entry`).
        self._best_speed: dict[tuple[str, tuple[str, ...]], float] = {}
        #: The queued jobs' mask signatures: signature -> [count, a spec].
        self._sigs: dict[tuple[Any, ...], list[Any]] = {}
        #: ``front(_sigs)``, or None when the signatures in the queue have changed.
        self._front: list[tuple[tuple[Any, ...], JobSpec]] | None = None

    def reset(self, jobs: dict[int, JobState], order: str | None) -> None:
        """An empty queue for a new episode (``order``: the window order; None keeps it)."""
        if order is not None:
            self.order = checked_order(order)
        self._jobs = jobs
        self.entries = []
        self.version = 0
        self.taken = 0
        self.log = []
        self._best_speed = {}
        self._sigs = {}
        self._front = None

    # ------------------------------------------------------------------ settings
    def set_scope(self, scope: str) -> None:
        """Set the decision scope (``"window"`` or ``"queue"``)."""
        if scope not in ("window", "queue"):
            raise ValueError(f"decision_scope={scope!r}: must be 'window' or 'queue'")
        self.scope = scope
        self.scope_n = self.window if scope == "window" else sys.maxsize

    def set_order(self, order: str) -> None:
        """Set the window order now: the queued jobs are re-keyed in the new order."""
        order = checked_order(order)
        if order == self.order:
            return
        self.order = order
        if self.entries:  # re-key the queued jobs
            self.entries = sorted(self.entry(self._jobs[jid]) for _, jid in self.entries)
            self.version += 1

    # ------------------------------------------------------------------ entries
    def entry(self, st: JobState) -> tuple[Any, int]:
        """The entry of queued job ``st`` in ``entries`` (sorted): ``(submit_s, job_id)`` in FIFO
        order, ``((class, predicted_s, submit_s), job_id)`` in predicted order (a job's entry
        never changes while it is queued: its estimate and progress are fixed there)."""
        spec = st.spec
        submit, jid = _take(spec, _S_SUBMIT_S), _take(spec, _S_JOB_ID)
        if self.order == "fifo":
            return (submit, jid)
        if _take(spec, _S_KIND) is _ONLINE or _take(spec, _S_PRIORITY) > 0:  # (``spec.online``)
            return ((0, 0.0, submit), jid)
        key = (spec.model, spec.gpu_types)
        best = self._best_speed.get(key)
        if best is None:
            names = set(spec.gpu_types) if spec.gpu_types else None
            speeds = [
                self._memo.solo_speed(spec.model, t)
                for t in self._type_names
                if names is None or t in names
            ]
            best = self._best_speed[key] = max(speeds, default=1.0)
        remaining = _take(spec, _S_EST_WORK_S) - st.work_done
        pred = (remaining if remaining > 0.0 else 0.0) / (best if best > 1e-9 else 1e-9)
        return ((1, pred, submit), jid)

    def add(self, st: JobState) -> None:
        """Put ``st`` in the queue (it enters the log and its signature's count)."""
        insort(self.entries, self.entry(st))
        self.version += 1
        spec = st.spec
        self.log.append(_take(spec, _S_JOB_ID))
        sig = mask_signature(spec)
        e = self._sigs.get(sig)
        if e is None:
            self._sigs[sig] = [1, spec]
            self._front = None
        else:
            e[0] += 1

    def pass_through(self, st: JobState) -> None:
        """What :meth:`add` then :meth:`take` of ``st`` leave (a migration: the job checkpoints,
        re-enters the queue and is placed again at once): the version, the log and the count
        taken move; the entries and the signatures' counts come back as they were (the
        signatures' front is forgotten where ``st``'s was not queued, as the two do)."""
        self.version += 2
        self.log.append(_take(st.spec, _S_JOB_ID))
        self.taken += 1
        if mask_signature(st.spec) not in self._sigs:
            self._front = None

    def take(self, st: JobState) -> None:
        """Take queued ``st`` out of the queue (found by bisection: entries are unique)."""
        key = self.entry(st)
        i = bisect_left(self.entries, key)
        if i == len(self.entries) or self.entries[i] != key:
            raise ValueError(f"job {st.spec.job_id} is not queued")
        del self.entries[i]
        self.version += 1
        self.taken += 1
        sig = mask_signature(st.spec)
        e = self._sigs[sig]
        e[0] -= 1
        if not e[0]:
            del self._sigs[sig]
            self._front = None

    def reestimate(self, pred: OnlinePredictor, refit: bool, group: str, now: float) -> None:
        """Re-estimate the queued offline jobs a finished run taught ``pred`` about (all of them
        after a refit, else those of ``group``); a moved estimate re-keys the job's entry in
        predicted order and logs it again."""
        jobs = self._jobs
        fifo = self.order == "fifo"
        moved = False
        todo = [jobs[jid] for _, jid in self.entries]
        todo = [q for q in todo if not q.online and (refit or q.spec.group == group)]
        # (one call for all: the estimates, made at one instant, do not depend on each other)
        ests = pred.estimate_many([q.spec for q in todo], now)
        for i in range(len(todo)):
            q = todo[i]
            est = ests[i]
            jid = q.spec.job_id
            if est == q.spec.est_work_s:
                continue
            if not fifo:  # the predicted order's entry holds the estimate: re-key it
                self.entries.remove(self.entry(q))
            q.spec = q.spec.with_estimate(est)
            if not fifo:
                insort(self.entries, self.entry(q))
            # it enters the queue log again: a policy keeping its own ordered queue
            # (``ClusterView.queue_log``) re-keys it with the new estimate
            self.log.append(jid)
            moved = True
        if moved:
            self.version += 1

    # ------------------------------------------------------------------ reads
    def front(self) -> list[tuple[tuple[Any, ...], JobSpec]]:
        """The queued jobs' mask signatures that no other one dominates, with a spec of each
        (memoised until the set of signatures in the queue changes)."""
        f = self._front
        if f is None:
            f = self._front = front(self._sigs)
        return f

    def signatures(self) -> dict[tuple[Any, ...], int]:
        """How many queued jobs have each mask signature."""
        return {sig: e[0] for sig, e in self._sigs.items()}

    def least_offline_mem(self) -> float:
        """The least declared memory (GB) of a queued offline job (0.0: none queued), read off
        the signatures (``mask_signature``: memory first, the kind third), one per distinct
        signature instead of one per queued job."""
        least = None
        for sig in self._sigs:
            if not sig[2] and (least is None or sig[0] < least):
                least = sig[0]
        return 0.0 if least is None else least

    def head(self) -> list[int]:
        """The ids of the queued jobs a decision may place (the decision scope's)."""
        return [jid for _, jid in self.entries[: self.scope_n]]

    def window_jobs(self) -> list[JobSpec]:
        """The first ``window`` queued jobs."""
        jobs = self._jobs
        return [jobs[jid].spec for _, jid in self.entries[: self.window]]

    def queued_jobs(self) -> list[JobSpec]:
        jobs = self._jobs
        return [jobs[jid].spec for _, jid in self.entries]
