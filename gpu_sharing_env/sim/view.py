"""Read-only snapshots for policies: what a real scheduler could see.

A :class:`ClusterView` exposes the queue (submitted fields and *estimates*, never the true
duration or true memory peak), the GPUs' sharing state, residents and their observable progress,
and online services' observed load and latency. Arrays are read-only views (no copies on the hot
path). Policies that need hidden truth must call :meth:`ClusterView.oracle_spec` and declare
themselves oracles (they are marked on the leaderboard).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np

from gpu_sharing_env.fleet.cluster import MigInstance, PlacementOption
from gpu_sharing_env.physics.hardware import GpuType
from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.constants import _QUEUED
from gpu_sharing_env.sim.engine import Decision, NoEstimatesError, Simulator
from gpu_sharing_env.sim.lifecycle import mask_signature
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.workload.job import JobKind, JobSpec, ServiceSpec
from gpu_sharing_env.workload.predictor import GroupStats

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:  # pragma: no cover
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

if cython.compiled:  # the extension type (state.pxd): its float fields read as C doubles
    from cython.cimports.gpu_sharing_env.sim.state import JobState
else:
    from gpu_sharing_env.sim.state import JobState

# ``Masks.legal``'s body (cluster.pxd): compiled, :meth:`ClusterView.legal` calls it in C
if cython.compiled:
    from cython.cimports.gpu_sharing_env.fleet.cluster import _masks_legal
else:
    from gpu_sharing_env.fleet.cluster import _masks_legal

E = TypeVar("E")

_ONLINE = JobKind.ONLINE


@dataclass(frozen=True, slots=True)
class JobView:
    """A job as a scheduler sees it (no ground truth)."""

    job_id: int
    kind: JobKind
    model: str
    submit_s: float
    num_gpus: int
    gpu_frac: float
    mem_gb: float
    cpu_cores: float
    est_work_s: float
    gpu_types: tuple[str, ...]
    priority: int
    group: str
    service: ServiceSpec | None
    status: Status
    gpus: tuple[int, ...]
    option: int
    work_done: float
    attempts: int
    wait_s: float
    rps: float
    p99_ms: float
    #: The batch size an online service runs with: its placement's (``Decision.batch_size``)
    #: while placed with one, else its configured ``service.batch_size``; 0 for offline jobs.
    batch_size: int = 0
    #: The submitting user ("" when unknown).
    user: str = ""

    @property
    def online(self) -> bool:
        return self.kind is _ONLINE

    @property
    def est_remaining_s(self) -> float:
        """Estimated remaining reference-GPU seconds (estimate minus observed progress).
        :class:`NoEstimatesError` for a job with no estimate (NaN: ``Simulator.estimates``)."""
        left = self.est_work_s - self.work_done
        if left != left:
            raise NoEstimatesError(f"JobView.est_remaining_s of job {self.job_id}")
        return max(0.0, left)


def _make_new_view() -> Callable[..., JobView]:
    """``JobView(*values)`` (every field, in the class's order) without ``__init__``, generated
    as ``dataclasses`` generates one: each field written through its slot's descriptor. A
    frozen dataclass's ``__init__`` writes its 23 fields with ``object.__setattr__`` (a bound
    method made and called per field: ~4 us a view, most of a ``first_fit`` decision in a
    replay); the descriptors' setters are looked up once here. The same object, field for
    field (``tests/test_view_builder.py``)."""
    names = [f.name for f in fields(JobView)]
    env: dict[str, Any] = {f"_set_{n}": getattr(JobView, n).__set__ for n in names}
    env.update(_new=object.__new__, _cls=JobView)
    lines = [f"def new_view({', '.join(names)}):", "    v = _new(_cls)"]
    lines += [f"    _set_{n}(v, {n})" for n in names]
    lines.append("    return v")
    exec("\n".join(lines), env)
    return env["new_view"]  # type: ignore[no-any-return]


#: :func:`_make_new_view`'s builder (``ClusterView.job``).
_new_view = _make_new_view()


#: ``ClusterView.profile_latency_ms`` per speed model: id -> (the model, (model, type, batch) ->
#: latency).
_LATENCY: dict[int, tuple[Any, dict[tuple[str, str, int], float]]] = {}


#: The key of the episode token in the simulator's ``table.view_cache`` (reset with the episode,
#: emptied in copies of the simulator; job ids are ints, so it is no job's).
_EPISODE_KEY = "episode"


#: The key of the episode's :class:`_Fixed` part in the simulator's ``table.view_cache`` (see
#: ``_EPISODE_KEY``).
_FIXED_KEY = "fixed"


def episode_token(sim: Simulator) -> object:
    """``ClusterView(sim).episode`` without the view: an object that identifies the simulator's
    episode (compare with ``is``), new at every reset and in every copy of the simulator."""
    cache: dict[Any, Any] = sim.table.view_cache
    tok = cache.get(_EPISODE_KEY)
    if tok is None:
        tok = cache[_EPISODE_KEY] = object()
    return tok


def decidable_ids(sim: Simulator) -> list[int]:
    """``ClusterView(sim).decidable_ids()`` without the view: the job ids a decision may place
    now, in queue order (the window, or the whole queue under ``decision_scope="queue"``):
    the simulator's queue's ``head`` (without ``Simulator.queue``'s and ``decision_scope``'s
    property calls)."""
    return sim.waiting.head()


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


#: Read-only views of the simulator's state arrays, shared by its snapshots: id -> (the array,
#: its view). The arrays are updated in place, so a view stays current.
_SHARED_RO: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _ro_shared(a: np.ndarray) -> np.ndarray:
    hit = _SHARED_RO.get(id(a))
    if hit is None or hit[0] is not a:
        if len(_SHARED_RO) > 256:
            _SHARED_RO.clear()
        hit = _SHARED_RO[id(a)] = (a, _ro(a))
    return hit[1]


class _Fixed:
    """What every :class:`ClusterView` of one episode shares, built at its first view: the
    fleet's facts, the episode's token and the read-only views of the state arrays (allocated
    at reset and updated in place, so a view of them stays current). Kept in the simulator's
    ``table.view_cache`` (emptied at reset and in a copy of the simulator)."""

    __slots__ = (
        "arrays",
        "episode",
        "gpu_types",
        "max_residents",
        "mem_cap_gb",
        "n_gpus",
        "node_of",
        "options",
        "simulator_id",
        "slo_target",
        "type_idx",
        "type_name",
        "type_names",
    )

    def __init__(self, sim: Simulator) -> None:
        c = sim.cluster
        self.n_gpus: int = c.n_gpus
        self.options: tuple[PlacementOption, ...] = sim.options
        self.gpu_types: tuple[GpuType, ...] = c.gpu_type_of
        self.type_name: tuple[str, ...] = c.type_name_of
        self.type_names: tuple[str, ...] = c.type_names
        self.type_idx = _ro_shared(c.type_idx)
        self.node_of = _ro_shared(c.node_of)
        self.mem_cap_gb = _ro_shared(c.mem_cap)
        self.max_residents: int = c.sharing.max_residents
        self.slo_target: float = sim.cfg.slo_target
        self.episode = episode_token(sim)
        self.simulator_id: int = sim.uid
        #: The state arrays' read-only views, in the order ``ClusterView`` unpacks them.
        self.arrays: tuple[np.ndarray, ...] = tuple(
            _ro_shared(a)
            for a in (
                c.mode, c.n_res, c.mem_decl, c.frac_decl, c.sm_used, c.online_count, c.healthy,
                c.ready, sim.usage.g_util,
            )
        )  # fmt: skip


def _shared(name: str) -> Any:
    """A read-only ``ClusterView`` attribute read from its episode's :class:`_Fixed` part."""
    return property(attrgetter(f"_fixed.{name}"))


@cython.cclass
class ClusterView:
    """A read-only snapshot of the simulator for policies (valid until the next step).

    What does not change within an episode (the fleet's facts, the episode's identity) is
    read from one part every view of the episode shares (built once per episode, not per
    snapshot); the rest is the snapshot's own (fields: a view is built at every decision). The
    shared facts that policies read at most decisions (the episode, each GPU's type, type
    name and node) are copied into the view's own fields when it is built: a field is read
    without the shared part's property call."""

    # Compiled, an extension type: its fields C struct slots (a view is built at every
    # decision: its fields written without a Python attribute call each), public (policies
    # read them); interpreted, a plain class. Fields annotated with a type Cython knows
    # (``int``, ``float``, ``tuple``) would be typed by it, so those are left unannotated.
    _fixed = cython.declare(object, visibility="public")
    #: job id -> (cluster version, read-only mask): policies ask for a mask per GPU.
    _masks = cython.declare(object, visibility="public")
    _sim = cython.declare(object, visibility="public")
    #: (the key it was built for, :attr:`window`'s views), or None.
    _window = cython.declare(object, visibility="public")
    codec = cython.declare(object, visibility="public")
    #: The simulated time of the snapshot (s).
    now_s = cython.declare(object, visibility="public")
    #: The cluster's state counter: it changes whenever a GPU's residents, mode, health or
    #: readiness change (equal within one simulator: the same GPU state).
    version = cython.declare(object, visibility="public")

    #: The number of GPUs.
    n_gpus = _shared("n_gpus")
    #: The placement options (an action's option index points here).
    options = _shared("options")
    #: Each GPU's type (the shared part's).
    gpu_types = cython.declare(object, visibility="public")
    #: Each GPU's type name (the shared part's).
    type_name = cython.declare(object, visibility="public")
    #: The fleet's GPU type names (sorted) and each GPU's index into them (static).
    type_names = _shared("type_names")
    type_idx: np.ndarray = _shared("type_idx")
    #: Each GPU's node (the shared part's).
    node_of: np.ndarray = cython.declare(object, visibility="public")
    #: Each GPU's memory (GB).
    mem_cap_gb: np.ndarray = _shared("mem_cap_gb")
    #: The most residents a GPU may host (``SharingConfig.max_residents``).
    max_residents = _shared("max_residents")
    #: The SLO attainment a policy must reach to rank by JCT (``ScenarioConfig.slo_target``).
    slo_target = _shared("slo_target")
    #: Identifies the simulator's episode (compare with ``is``): a new object at every reset
    #: and in every copy of the simulator. Facts about a job that never change (its model,
    #: its request) may be cached under it. (The shared part's.)
    episode = cython.declare(object, visibility="public")
    #: Identifies the simulator object (``Simulator.uid``: never reused): the same across its
    #: episodes (an encoder built for it may be reused after its ``reset``).
    simulator_id = _shared("simulator_id")

    # The snapshot's own: read-only views of the state arrays (the episode's, updated in
    # place: see ``_Fixed``), per GPU.
    #: Its sharing mode (a ``SharingMode`` value; ``MODE_NONE`` while it has none).
    mode: np.ndarray = cython.declare(object, visibility="public")
    #: Its number of residents.
    n_res: np.ndarray = cython.declare(object, visibility="public")
    #: Declared GPU memory in use per GPU (what a scheduler's accounting sees).
    mem_used_gb: np.ndarray = cython.declare(object, visibility="public")
    #: Sum of the residents' requested GPU fractions (``JobView.gpu_frac``) per GPU.
    frac_used: np.ndarray = cython.declare(object, visibility="public")
    #: The SM percentage its residents' MPS placements take.
    sm_used_pct: np.ndarray = cython.declare(object, visibility="public")
    #: Its number of online residents.
    online_count: np.ndarray = cython.declare(object, visibility="public")
    #: Whether SysMonitor lets new offline work on it.
    healthy: np.ndarray = cython.declare(object, visibility="public")
    #: Whether it is ready (False while its mode or MIG layout is being set up).
    ready: np.ndarray = cython.declare(object, visibility="public")
    #: Observed GPU utilisation per GPU (nvidia-smi style).
    util: np.ndarray = cython.declare(object, visibility="public")

    def __init__(self, sim: Simulator, codec: ActionCodec | None = None) -> None:
        self._sim = sim
        self.codec = codec
        #: job id -> (cluster version, read-only mask): policies ask for a mask per GPU.
        self._masks = {}
        self._window = None
        self.now_s = sim.now
        cache: dict[Any, Any] = sim.table.view_cache
        fixed = cache.get(_FIXED_KEY)
        if fixed is None:
            fixed = cache[_FIXED_KEY] = _Fixed(sim)
        self._fixed = fixed
        self.episode = fixed.episode
        self.gpu_types = fixed.gpu_types
        self.type_name = fixed.type_name
        self.node_of = fixed.node_of
        (
            self.mode,
            self.n_res,
            self.mem_used_gb,
            self.frac_used,
            self.sm_used_pct,
            self.online_count,
            self.healthy,
            self.ready,
            self.util,
        ) = fixed.arrays
        self.version = sim.cluster.version

    def job(self, job_id: int) -> JobView:
        st = self._sim.jobs[job_id]
        status = st.status
        sv, led = st.serving, st.ledger
        wait_s = self.now_s - led.enqueue_t if status is _QUEUED else 0.0
        # Every field that can change, with the state object itself (ids repeat across
        # episodes): an unchanged job gets the JobView built last time (they are immutable).
        key = (
            status,
            st.run_id,
            st.work_done,
            led.attempts,
            sv.rps,
            sv.p99_ms,
            wait_s,
            sv.batch_size,
            st.spec,  # (a new estimate is a new spec)
        )
        cache = self._sim.table.view_cache
        hit = cache.get(job_id)
        if hit is not None and hit[0] is st and hit[1] == key:
            return hit[2]
        s = st.spec
        # ``JobView(job_id=..., ..., user=...)``, every field in the class's order
        # (``_new_view``: no ``__init__``)
        jv = _new_view(
            s.job_id,
            s.kind,
            s.model,
            s.submit_s,
            s.num_gpus,
            s.gpu_frac,
            s.mem_gb,
            s.cpu_cores,
            s.est_work_s,
            s.gpu_types,
            s.priority,
            s.group,
            s.service,
            status,
            tuple(st.gpus),
            st.option,
            st.work_done,
            led.attempts,
            wait_s,
            sv.rps,
            sv.p99_ms,
            # ``st.effective_batch_size``, inlined (views are built on the hot path)
            sv.batch_size or (s.service.batch_size if s.service is not None else 0),
            s.user,
        )
        cache[job_id] = (st, key, jv)
        return jv

    @property
    def window(self) -> list[JobView]:
        """The queued jobs a decision may place, in queue order (built once per snapshot while
        no event ran and the queue and the cluster are unchanged)."""
        sim = self._sim
        key = (sim.n_events, sim.queue_version, sim.cluster.version)
        if self._window is None or self._window[0] != key:
            self._window = (key, [self.job(s.job_id) for s in sim.window_jobs()])
        return list(self._window[1])

    @property
    def queue(self) -> list[JobView]:
        """Every queued job in queue order (the window is its first ``queue_window``)."""
        return [self.job(s.job_id) for s in self._sim.queued_jobs()]

    @property
    def decidable(self) -> list[JobView]:
        """The queued jobs a decision may place now, in queue order: :attr:`window`, or the
        whole :attr:`queue` when the simulator's ``decision_scope`` is ``"queue"`` (the runner
        sets it for a heuristic that declares ``decision_scope = "queue"``; the Gymnasium env
        never does, so there it is the window)."""
        return self.queue if self._sim.decision_scope == "queue" else self.window

    def iter_decidable(self) -> Iterator[JobView]:
        """:attr:`decidable`, built lazily (a policy that stops at the first job that fits
        builds few views of a long queue or a full window)."""
        for jid in self.decidable_ids():
            yield self.job(jid)

    def decidable_ids(self) -> list[int]:
        """The job ids of :attr:`decidable`, in queue order (no JobViews built)."""
        return decidable_ids(self._sim)

    @cython.locals(now=cython.double, st=JobState)
    def queued_wait_s(self, ids: Sequence[int]) -> list[float]:
        """``JobView.wait_s`` of queued jobs ``ids``, without building views."""
        jobs = self._sim.table.jobs  # (``Simulator.jobs`` without the property's call)
        now = self.now_s
        out = []
        for i in ids:
            st = jobs[i]
            out.append(now - st.ledger.enqueue_t)  # (the same double subtraction)
        return out

    def queue_taken(self) -> int:
        """How many times a job left the queue this episode (a start): a job queued at two
        reads with the same count stayed queued between them (the same enqueue time)."""
        return self._sim.waiting.taken  # type: ignore[no-any-return]

    @cython.locals(st=JobState)
    def queued_enqueue_t(self, ids: Sequence[int]) -> list[float]:
        """When queued jobs ``ids`` entered the queue (``now_s`` minus it is
        :meth:`queued_wait_s`, the same double); a re-queued job's is the time it came back."""
        jobs = self._sim.table.jobs
        out = []
        for i in ids:
            st = jobs[i]
            out.append(st.ledger.enqueue_t)
        return out

    def request(self, job_id: int) -> tuple[bool, str, int, float, float, tuple[str, ...]]:
        """Job ``job_id``'s request as its :class:`JobView` gives it, without building the
        view: ``(online, model, num_gpus, gpu_frac, mem_gb, gpu_types)`` (fields that never
        change while the job lives; a policy reading only these of each new job, as
        ``reserve_pack`` does, skips :meth:`job`'s build)."""
        s = self._sim.table.jobs[job_id].spec
        return s.kind is _ONLINE, s.model, s.num_gpus, s.gpu_frac, s.mem_gb, s.gpu_types

    def est_remaining_s(self, ids: Sequence[int]) -> np.ndarray:
        """``JobView.est_remaining_s`` of jobs ``ids``, without building views."""
        if not self._sim.estimates:
            raise NoEstimatesError("ClusterView.est_remaining_s")
        jobs = self._sim.jobs
        return np.array(
            [max(0.0, jobs[i].spec.est_work_s - jobs[i].work_done) for i in ids], dtype=np.float64
        )

    def online_flags(self, ids: Sequence[int]) -> np.ndarray:
        """``JobView.online`` of jobs ``ids``, without building views."""
        jobs = self._sim.jobs
        return np.array([jobs[i].online for i in ids], dtype=bool)

    def placeable(self, job_id: int) -> bool:
        """Whether ``mask(job_id)`` allows anything."""
        return self._sim.placeable(job_id)

    def queue_log(self, start: int = 0) -> list[int]:
        """Job ids in the order they entered the queue this episode, from position ``start``
        (append-only; a job re-queued after a fault, an eviction or a migration, or re-estimated
        while queued by the duration predictor, appears again).
        A policy that keeps its own ordered queue reads only what is new since its last look
        and drops entries that :meth:`is_queued` no longer holds."""
        return self._sim.queue_log(start)

    @property
    def decision_scope(self) -> str:
        """``"queue"`` when :meth:`decidable_ids` is the whole queue, else ``"window"``."""
        return "queue" if self._sim.decision_scope == "queue" else "window"

    def submit_times(self, ids: Sequence[int]) -> list[float]:
        """``JobView.submit_s`` of jobs ``ids`` (the queue's order: by submission, then id)."""
        jobs = self._sim.jobs
        return [jobs[i].spec.submit_s for i in ids]

    def is_queued(self, job_id: int) -> bool:
        """Whether job ``job_id`` waits in the queue now."""
        return self._sim.jobs[job_id].status is _QUEUED

    def mask_signatures(self, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """What the placement masks of jobs ``ids`` depend on (their request): jobs with equal
        signatures have equal :meth:`mask` and :meth:`placeable` in every snapshot."""
        jobs = self._sim.jobs
        return [mask_signature(jobs[i].spec) for i in ids]

    def sjf_facts(self, ids: Sequence[int]) -> list[tuple[bool, float, float, tuple[Any, ...]]]:
        """For each of jobs ``ids``, in order: ``(not online, est_remaining_s, submit_s, mask
        signature)``, the values of :meth:`online_flags` (negated), :meth:`est_remaining_s`,
        :meth:`submit_times` and :meth:`mask_signatures` as Python objects, in one pass and
        without numpy arrays (``SjfPredicted`` reads them for the one or two jobs new in the
        queue at a decision; ``tests/test_sjf_facts.py`` compares them with those methods')."""
        if not self._sim.estimates:
            raise NoEstimatesError("ClusterView.sjf_facts")
        jobs = self._sim.jobs
        out = []
        for i in ids:
            st = jobs[i]
            spec = st.spec
            # ``float`` is ``est_remaining_s``'s float64 array element made a Python float
            est = float(max(0.0, spec.est_work_s - st.work_done))
            out.append((not st.online, est, spec.submit_s, mask_signature(spec)))
        return out

    def residents(self, gpu: int) -> list[JobView]:
        return [self.job(j) for j in self._sim.cluster.residents[gpu]]

    def resident_ids(self, gpu: int) -> tuple[int, ...]:
        """The job ids of ``residents(gpu)`` (no JobViews built)."""
        return tuple(self._sim.cluster.residents[gpu])

    def first_resident_ids(self, gpus: np.ndarray) -> np.ndarray:
        """The first resident's job id on each of ``gpus`` (each must host one)."""
        res = self._sim.cluster.residents
        return np.array([res[g][0] for g in gpus.tolist()], dtype=np.int64)

    def request_rates(self, ids: Sequence[int]) -> np.ndarray:
        """The observed request rates (``JobView.rps``) of jobs ``ids``, without building views."""
        jobs = self._sim.jobs
        return np.array([jobs[i].serving.rps for i in ids], dtype=np.float64)

    def gpulets(self, gpu: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """The MPS partitions (gpulets) of ``gpu`` in creation order, as (SM percentage, job
        ids); empty unless the scenario enables gpulets (``SharingConfig.gpulets``)."""
        return tuple((p, tuple(m)) for p, m in self._sim.cluster.parts[gpu])

    def mig_instances(self, gpu: int) -> tuple[MigInstance, ...]:
        return tuple(
            MigInstance(i.profile, i.start, i.mask, i.compute, i.job_id)
            for i in self._sim.cluster.mig_instances[gpu]
        )

    def mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) placements of a queued job (read-only)."""
        version = self._sim.cluster.version
        hit = self._masks.get(job_id)
        if hit is None or hit[0] != version:
            hit = self._masks[job_id] = (version, _ro(self._sim.mask(job_id)))
        return hit[1]

    def migration_mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) destinations of running job ``job_id`` moved now: empty, ready
        GPUs where the legality function would place it; none while it is still setting up
        (just started or moved, it cannot checkpoint: ``Simulator.check``). Read-only."""
        return self._sim.migration_mask(job_id)

    def suspendable(self) -> list[int]:
        """The running jobs a decision may suspend now (``Decision.suspend``), ascending job
        id: offline jobs past their setup that have run since their last (re)start
        (``Simulator.suspendable``: from the job's observable state, no truth)."""
        return self._sim.suspendable()

    def mask_column(self, job_id: int, option: int) -> np.ndarray:
        """``mask(job_id)[:, option]`` (read-only). When the whole mask is not at hand (neither
        here nor in the simulator's cache), only that option's column is computed: the cluster's
        single-GPU legality (shared by jobs of one memory size and type constraint) and, for a
        gang, its rule on that option alone (each option's row is computed on its own)."""
        version = self._sim.cluster.version
        hit = self._masks.get(job_id)
        entry = self._sim.legality.cached(job_id)
        if (hit is not None and hit[0] == version) or (entry is not None and entry[0] == version):
            return self.mask(job_id)[:, option]
        c = self._sim.cluster
        spec = self._sim.jobs[job_id].spec
        single = c.single_row(spec, option)  # (from the cluster's fit index where it answers)
        if spec.num_gpus == 1:
            return _ro(single)
        return _ro(c.gang_mask(single[None], spec.num_gpus)[0])

    def single_column(self, job_id: int, option: int) -> np.ndarray:
        """Per GPU: queued ``job_id`` may take that GPU alone under ``option`` (read-only). A
        single-GPU job's :meth:`mask_column` is this; a gang may start at ``g`` iff ``g`` is
        legal here and ``num_gpus`` legal GPUs, not necessarily adjacent, lie from ``g`` on
        (``Cluster.gang_mask``)."""
        return _ro(self._sim.cluster.single_row(self._sim.jobs[job_id].spec, option))

    @cython.locals(st=JobState)
    def legal(self, job_id: int, gpu: int, option: int) -> bool:
        """``mask(job_id)[gpu, option]`` of queued ``job_id`` (``gpu`` in range), without
        building the mask or a column where the cluster's fit index answers
        (``Cluster.legal``: one GPU's value against its type's threshold)."""
        sim = self._sim
        cluster = sim.cluster
        hit = self._masks.get(job_id)
        if hit is not None and hit[0] == cluster.version:
            return bool(hit[1][gpu, option])
        # (``Cluster.legal``'s body without its method call; ``sim.table.jobs``: ``sim.jobs``
        # without the property's call)
        st = sim.table.jobs[job_id]
        return _masks_legal(cluster.masks, st.spec, gpu, option)  # type: ignore[no-any-return]

    def single_legal(self, job_id: int, gpu: int, option: int) -> bool:
        """``single_column(job_id, option)[gpu]`` without the column (``Cluster.single_legal``:
        where the fit index answers, one GPU's value against its type's threshold)."""
        return self._sim.cluster.single_legal(self._sim.jobs[job_id].spec, gpu, option)

    def watch_gpus(self) -> set[int]:
        """A set the simulator's cluster adds every GPU whose state changes to, from now until
        the episode ends (``Cluster.watch``): a policy that keeps something per GPU or node
        across decisions (compare ``episode`` to know it is the same one) updates only those
        GPUs and empties the set."""
        return self._sim.cluster.watch()

    def first_legal(self, job_id: int, option: int) -> int:
        """The lowest GPU ``g`` with ``mask(job_id)[g, option]`` (-1: none), without building the
        mask where the cluster's fit index answers (``Cluster.first_legal``)."""
        hit = self._masks.get(job_id)
        if hit is not None and hit[0] == self._sim.cluster.version:
            col = hit[1][:, option]
            g = int(col.argmax())
            return g if col[g] else -1
        return self._sim.cluster.first_legal(self._sim.jobs[job_id].spec, option)

    def first_legal_in(self, job_id: int, options: Sequence[int]) -> tuple[int, int]:
        """The first of ``options`` (in their order) under which ``mask(job_id)`` allows a GPU,
        with the lowest such GPU: ``(gpu, option)``, or ``(-1, -1)`` when none does. What
        :meth:`first_legal` over the options one by one gives, in one call
        (``Legality.first_legal_in``: no mask where the cluster's fit index answers)."""
        hit = self._masks.get(job_id)
        if hit is not None and hit[0] == self._sim.cluster.version:
            for o in options:
                g = self.first_legal(job_id, o)
                if g >= 0:
                    return g, o
            return -1, -1
        # (the legality's: it keeps the answer, which ``check`` then knows legal)
        return self._sim.legality.first_legal_in(self._sim.jobs[job_id].spec, options)

    def gpu_frac(self, job_id: int) -> float:
        """``JobView.gpu_frac`` of job ``job_id`` (its requested GPU fraction), without
        building its view."""
        return self._sim.jobs[job_id].spec.gpu_frac

    def gang_gpus(self, job_id: int, gpu: int, option: int) -> list[int]:
        """The GPUs a legal placement of queued ``job_id`` at (``gpu``, ``option``) takes: the
        first ``num_gpus`` GPUs from ``gpu`` that are legal for it one by one (``[gpu]`` for a
        single-GPU job). A gang runs at its slowest member's rate (``docs/simulator.md``)."""
        return self._sim.cluster.gang_gpus(self._sim.jobs[job_id].spec, gpu, option)

    def solo_speed(self, model: str, gpu: int) -> float:
        """Profiled solo speed of a model class on a GPU (relative to V100): public profiles."""
        return self._sim.solo_speed(model, self.type_name[gpu])  # memoised speed.solo_speed

    def profile(
        self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident], noise: float = 0.03
    ) -> list[float]:
        """An offline profiling run: co-locate ``residents`` and measure their normalised speeds.

        This is what the papers' predictors are trained on (MuxFlow, GPUPool, GPULet profile
        pairs before scheduling). Measurements carry multiplicative noise (default 3%),
        deterministic per input, so predictors see data, not the model's formulas.
        """
        rates = self._sim.speed.rates(gpu_type, mode, residents)
        rng = np.random.default_rng(zlib.crc32(repr((gpu_type, int(mode), residents)).encode()))
        return [min(1.0, max(1e-3, r * (1.0 + noise * rng.standard_normal()))) for r in rates]

    def profile_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        """Profiled solo latency of one inference batch (GPULet's offline profiles); memoised
        per speed model (a pure function of its arguments there)."""
        speed = self._sim.speed
        hit = _LATENCY.get(id(speed))
        if hit is None or hit[0] is not speed:
            if len(_LATENCY) > 16:
                _LATENCY.clear()
            hit = _LATENCY[id(speed)] = (speed, {})
        memo = hit[1]
        key = (model, gpu_type, batch_size)
        v = memo.get(key)
        if v is None:
            v = memo[key] = speed.batch_latency_ms(model, gpu_type, batch_size)
        return v

    def action_of(self, d: Decision | None) -> int:
        """The env action that stands for decision ``d`` (wait: ``d`` None or no codec)."""
        if d is None or self.codec is None:
            return 0  # ``codec.WAIT``
        return self.codec.from_decision(self._sim, d)

    def lookahead_copy(self) -> Simulator:
        """A copy of the world for planning (:meth:`Simulator.copy`): changing it never touches
        the episode. It holds the hidden truth too; a planner that may not read it replaces it
        first (``set_true_spec``, ``redraw_faults``, ``replace_future_offline``, ``reseed``), as
        :func:`gpu_sharing_gym.agents.planner.sample_belief` does."""
        return self._sim.copy()

    def make_encoder(self, encoder_cls: Callable[[Simulator, int], E], max_gpus: int) -> E:
        """An observation encoder of ``gpu_sharing_env.envs`` for this simulator's layout."""
        return encoder_cls(self._sim, max_gpus)

    def encode(self, encoder: Any) -> dict[str, np.ndarray]:
        """The env's observation of the current state through ``encoder`` (as the env's own
        ``step`` would return it)."""
        return encoder.encode(self._sim)  # type: ignore[no-any-return]

    def group_stats(self, job_id: int) -> GroupStats | None:
        """What the cluster's log says about the job's recurring group now: finished runs seen,
        their mean and spread of log run time, the group's last submission and its median gap
        (the estimated period); ``None`` when the scenario has no online predictor
        (``estimator: noise``). Only finished runs and past submissions: no truth.
        :class:`NoEstimatesError` in an episode without estimates (``Simulator.estimates``)."""
        pred = self._sim.predictor
        if pred is None:
            if not self._sim.estimates:
                raise NoEstimatesError("ClusterView.group_stats")
            return None
        return pred.group_stats(self._sim.jobs[job_id].spec, self.now_s)

    def oracle_spec(self, job_id: int) -> JobSpec:
        """The true job spec (duration, true memory). Only for policies marked ``oracle``."""
        return self._sim.jobs[job_id].spec
