"""The candidate moves of ``GpuSharing-v2`` (issue 53, items 1 and 2): every move the simulator
accepts now, enumerated from the state alone (never from a heuristic), with a feature row each.

**Which moves.** Candidate 0 is *hold* (wait for the next event). Then, in this order:

* **placements**: every queued job of the decision scope (``Simulator.decision_scope``; the
  env's default is ``"queue"``, the whole queue) in queue order, at every legal (first GPU,
  option) of its placement mask (``Simulator.mask``: GPU-major, then option), gangs included
  (a gang takes the first legal GPUs from its first GPU on, as everywhere);
* **migrations**: every running job (ascending job id) to every (GPU, option) of
  ``Simulator.migration_mask``: empty, ready GPUs where the legality function would place it;
  none while the job still sets up (just started, or resuming from its last move), so a job
  cannot move back and forth with no time passing.
  This is read-only; ``Simulator.check`` would also accept moves onto occupied GPUs, but it
  answers for a running job by taking it off its GPUs and putting it back (its GPUs' residents
  are re-added in another order), so asking it for every candidate would change the episode.
  Gandiva's migrations (the only heuristic that migrates) all go to empty GPUs.

* **suspensions** (only with ``suspend=True``): every running job ``Simulator.suspendable``
  names (offline, past its setup, run since its last (re)start; ascending job id) as
  ``Decision.suspend(job_id)`` (GPU and option -1): it keeps its progress, leaves its GPUs
  and is queued again, and a later placement resumes it.

Each candidate is a :class:`~gpu_sharing_env.sim.engine.Decision` (``batch_size`` 0), so a
heuristic's decision is found by equality (:meth:`Candidates.index_of`).

**Pruning** (``pruning="classes"``; the default ``"none"`` keeps every move). Per job, the
targets that are interchangeable for it collapse to the first of them (lowest GPU), so the
candidates are a subsequence of the full list (:class:`TargetClasses`): the same option on a
GPU of the same type, mode (an empty GPU's mode counts only where it saves a setup: MPS, MIG),
MIG layout, health and readiness, the same residents' signature (each resident's model,
request, priority and estimated work left to a power of two; empty is one), on a node of the
same size and interconnect whose free GPUs are one (this one), some or all, whose CPUs the job
fits (a node it would oversubscribe is its own class). A gang's class is the option, how many
nodes the GPUs it takes span and those GPUs' classes; a single-GPU job's migration
destinations collapse alike, its own node apart (a gang's are all kept: it may take back GPUs
it leaves, which its classes, read in place, do not see). Decisions passed as ``keep`` (the env's ``keep_moves``: the choices
of the rules an agent reads) stay candidates. On ``pai-busy`` 6-7x fewer candidates
(``scripts/bench_candidates.py``).

**Features** (:data:`CANDIDATE_FEATURES`, one row per candidate, each in [-1, 1]): the kind of
move; the job as the view gives it to a heuristic (:class:`~gpu_sharing_env.sim.view.JobView`:
size, request, the scenario's estimate of its work, i.e. the predictor's where the scenario has
one, the work left, its wait, priority, and its recurring group's history,
``ClusterView.group_stats``); the target GPU (type, node id, residents and what they have left,
free memory, SM and request share, online residents, health, readiness, utilisation) and
whether the move keeps a gang on one node; the option (mode, SM share, MIG slices); the job's
profiled solo speed on the target. With ``suspend=True`` each row gains a last column,
:data:`SUSPEND_FEATURE` (1 on a suspension; 0 elsewhere), and a suspension's row describes the
job on its own first GPU with its own option (``job_on_target`` 1, ``gang_one_node``: its GPUs
lie on one node), its kind columns (``hold``, ``place``, ``migrate``) 0. With
``pair_features=True`` each row gains :data:`PAIR_FEATURES` last (:func:`pair_columns`: the
co-location profile ``ClusterView.profile`` gives the rules, memoised per episode).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

try:  # compiled (gpu_sharing_env._compile): C types for the locals below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import SUSPEND, Decision, Simulator
from gpu_sharing_env.sim.lifecycle import mask_signature
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView, decidable_ids, episode_token
from gpu_sharing_env.workload.job import JobSpec

if cython.compiled:  # the extension types (.pxd): C reads of their fields; C calls (legality)
    from cython.cimports.cpython.buffer import (
        PyBUF_ND,
        PyBUF_SIMPLE,
        PyBuffer_Release,
        PyObject_GetBuffer,
    )
    from cython.cimports.gpu_sharing_env.fleet.cluster import _StateViews, _views_of
    from cython.cimports.gpu_sharing_env.sim.legality import Legality, _i64
    from cython.cimports.gpu_sharing_env.sim.state import JobState

    # C's log1p: the libm function ``math.log1p`` calls; memcpy: a row's runs of cells
    from cython.cimports.libc.math import log1p
    from cython.cimports.libc.string import memcpy, memset

    # numpy's C API (``setup.py``'s ``NUMPY_HEADERS``): a block's targets read from their
    # array's memory without a buffer request (``_block_rows``)
    from cython.cimports.numpy import (
        NPY_INT64,
        NPY_UINT8,
        PyArray_DATA,
        PyArray_DIM,
        PyArray_EMPTY,
        PyArray_IS_C_CONTIGUOUS,
        PyArray_NDIM,
        PyArray_TYPE,
        PyArray_ZEROS,
        import_array,
        ndarray,
        npy_intp,
    )

    import_array()
else:
    from math import log1p

    from gpu_sharing_env.fleet.cluster import _StateViews
    from gpu_sharing_env.sim.legality import Legality
    from gpu_sharing_env.sim.state import JobState

    # (only the compiled passes copy or clear runs of cells and read arrays' memory through
    # Python's buffer protocol: a block's targets, a gang's single-GPU legality)
    memcpy = memset = PyObject_GetBuffer = PyBuffer_Release = PyBUF_SIMPLE = PyBUF_ND = None
    _views_of = NPY_INT64 = PyArray_DATA = PyArray_DIM = PyArray_IS_C_CONTIGUOUS = None
    PyArray_EMPTY = PyArray_NDIM = PyArray_TYPE = ndarray = npy_intp = None
    NPY_UINT8 = PyArray_ZEROS = _i64 = None  # (``_i64``: legality's C function, compiled only)

#: Two statuses as module globals: an enum class's attribute read (``Status.RUNNING``) goes
#: through ``EnumType.__getattr__``'s hook in Python 3.11, a fresh method-wrapper each
#: (docs/notes/2026-12-01-step-object-overhead.md: ~9 such reads a step were here).
_RUNNING = Status.RUNNING
_QUEUED = Status.QUEUED

#: Feature names of a candidate row, in column order.
CANDIDATE_FEATURES: tuple[str, ...] = (
    # the move
    "hold",
    "place",
    "migrate",
    # the job (JobView, group history)
    "online",
    "gpus_log",
    "gpu_frac",
    "mem",
    "cpu",
    "est_work_log",
    "est_left_log",
    "wait_log",
    "attempts",
    "priority",
    "group_runs_log",
    "group_mean_log",
    "group_std_log",
    "group_period_log",
    "job_on_target",
    # the target GPU
    "type",
    "node",
    "residents",
    "residents_left_log",
    "mem_free",
    "frac_used",
    "sm_used",
    "online_residents",
    "healthy",
    "ready",
    "util",
    "gang_one_node",
    # the option
    *(f"mode_{m.name.lower()}" for m in SharingMode),
    "sm_pct",
    "mig_slices",
    # the pair
    "solo_speed",
)
N_FEATURES = len(CANDIDATE_FEATURES)
_COL = {n: i for i, n in enumerate(CANDIDATE_FEATURES)}
#: The column a row gains with ``suspend=True`` (after :data:`CANDIDATE_FEATURES`): 1 on a
#: suspension.
SUSPEND_FEATURE = "suspend"


#: The columns a row gains with ``pair_features=True`` (after :data:`CANDIDATE_FEATURES` and
#: :data:`SUSPEND_FEATURE`, if on), from ``ClusterView.profile`` (the noisy offline co-location
#: profile) of the target GPU's other residents with the job under the move's option
#: (:func:`pair_columns`): the job's profiled speed there relative to its solo speed on that
#: type; the mean profiled speed the other residents lose to it; their mean attained service
#: (seconds run so far, log-scaled); the job's own.
PAIR_FEATURES: tuple[str, ...] = ("pair_speed", "pair_slowdown", "res_attained_log", "attained_log")


def candidate_features(suspend: bool = False, pair_features: bool = False) -> tuple[str, ...]:
    """The names of a candidate row's columns: :data:`CANDIDATE_FEATURES`, then
    :data:`SUSPEND_FEATURE` with ``suspend``, then :data:`PAIR_FEATURES` with
    ``pair_features``."""
    out = (*CANDIDATE_FEATURES, SUSPEND_FEATURE) if suspend else CANDIDATE_FEATURES
    return (*out, *PAIR_FEATURES) if pair_features else out


#: ``pruning`` settings of ``GpuSharing-v2``: every legal move, or one per class of
#: interchangeable targets (module doc).
PRUNINGS = ("none", "classes")
#: log1p scale of durations (s): log1p(1e6 s) ~ 13.8.
_LOG_S = math.log1p(1e6)
#: The same double as a C constant of the compiled module (``_log_s``: no module look-up and
#: no unboxing a call).
_C_LOG_S = cython.declare(cython.double, _LOG_S)


class TooManyCandidates(ValueError):
    """More legal moves than the env's ``max_candidates``; one line, says how to fix it."""


class Candidates:
    """The moves now (index 0: hold, ``None``) and their feature rows (``len(moves)`` rows).

    The moves are held as three integer arrays (``job``, ``gpu``, ``option``; -1 at hold) and
    made :class:`~gpu_sharing_env.sim.engine.Decision` s only when :attr:`moves` is first read
    (an env step needs one: :meth:`move`). A build writes the rows straight into ``table``, a
    fresh zero-padded table of ``max_candidates`` rows, and ``features`` is its first
    ``len(moves)`` rows (a view): the env hands ``table`` out as the observation's
    ``candidates`` once (``CandidateMoves.observe``), so a caller that writes into that
    observation writes into ``features`` too. ``table`` is None where none was built.

    A build hands its integers over as one ``(3, n)`` int64 array (``ids``; the three
    arguments before it None, ``features`` None: ``table``'s first ``n`` rows): ``job``,
    ``gpu``, ``option`` are then its rows and ``features`` that slice, each made on first read
    (an env step reads none of them: :meth:`move` reads ``ids`` itself), where the four views
    made a build cost ~4 k instructions."""

    __slots__ = (
        "_features", "_gpu", "_ids", "_job", "_moves", "_n", "_option", "n_place", "table",
    )  # fmt: skip

    def __init__(
        self,
        job: np.ndarray | None,
        gpu: np.ndarray | None,
        option: np.ndarray | None,
        features: np.ndarray | None,
        n_place: int,
        table: np.ndarray | None = None,
        ids: np.ndarray | None = None,
    ) -> None:
        self._job, self._gpu, self._option = job, gpu, option
        self._features = features
        self._ids = ids
        self._n = len(job) if job is not None else ids.shape[1]  # type: ignore[union-attr]
        self.n_place = n_place
        self.table = table
        self._moves: list[Decision | None] | None = None

    @property
    def job(self) -> np.ndarray:
        """Each candidate's job id (-1 at hold)."""
        if self._job is None:
            self._job = self._ids[0]  # type: ignore[index]
        return self._job  # type: ignore[return-value]

    @property
    def gpu(self) -> np.ndarray:
        """Each candidate's (first) GPU (-1 at hold)."""
        if self._gpu is None:
            self._gpu = self._ids[1]  # type: ignore[index]
        return self._gpu  # type: ignore[return-value]

    @property
    def option(self) -> np.ndarray:
        """Each candidate's placement option (-1 at hold)."""
        if self._option is None:
            self._option = self._ids[2]  # type: ignore[index]
        return self._option  # type: ignore[return-value]

    @property
    def features(self) -> np.ndarray:
        """The candidates' feature rows (``table``'s first ``len(self)`` rows where built)."""
        if self._features is None:
            self._features = self.table[: self._n]  # type: ignore[index]
        return self._features  # type: ignore[return-value]

    @classmethod
    def hold_only(cls, n_features: int = N_FEATURES) -> Candidates:
        """Hold alone (the episode is over, or nothing was built yet), in rows of
        ``n_features`` columns (:func:`candidate_features`)."""
        none = np.full(1, -1, dtype=np.int64)
        row = np.zeros((1, n_features), dtype=np.float32)
        row[0, :N_FEATURES] = _HOLD_ROW
        return cls(none, none, none, row, 0)

    def __len__(self) -> int:
        return self._n  # type: ignore[no-any-return]

    @property
    def moves(self) -> list[Decision | None]:
        """Every candidate as a decision (``None`` at index 0, hold)."""
        m = self._moves
        if m is None:
            m = self._moves = [None]
            m.extend(
                map(
                    Decision, self.job[1:].tolist(), self.gpu[1:].tolist(), self.option[1:].tolist()
                )
            )
        return m

    def move(self, i: int) -> Decision | None:
        """``moves[i]``, without making the others."""
        if self._moves is not None:
            return self._moves[i]
        if i == 0:
            return None
        if cython.compiled and self._ids is not None and 0 < i < self._n:
            return _move_of(self._ids, i, self._n)  # type: ignore[no-any-return]
        return Decision(int(self.job[i]), int(self.gpu[i]), int(self.option[i]))

    def index_of(self, d: Decision | None) -> int | None:
        """The index of the candidate equal to ``d`` (hold for None), or None if none is."""
        if d is None:
            return 0
        if d.batch_size != 0:
            return None  # (every candidate keeps the configured batch size)
        job, gpu, option = self.job[1:], self.gpu[1:], self.option[1:]
        hit = np.flatnonzero((job == d.job_id) & (gpu == d.gpu) & (option == d.option))
        return int(hit[0]) + 1 if len(hit) else None


@cython.cfunc
@cython.locals(k=cython.Py_ssize_t, n=cython.Py_ssize_t, p=cython.p_longlong)
def _move_of(ids: np.ndarray, k: int, n: int) -> Decision:
    """``Candidates.move(k)`` of a build's integers ``ids`` (a ``(3, n)`` C-order int64 array,
    ``PyArray_EMPTY``'s: ``_ids_array``; 0 < ``k`` < ``n``, the caller checks) read from its
    memory (compiled only), where three numpy scalars and their ``int`` cost ~3 k
    instructions."""
    p = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, ids)))
    return Decision(p[k], p[n + k], p[2 * n + k])


@cython.ccall  # (C calls from the table's rows; the tests call it from Python)
@cython.locals(x=cython.double)
@cython.returns(cython.double)
def _log_s(x: float) -> float:
    """log1p of ``x`` (at least 0) over log1p(1e6); 0 where ``x`` is not finite (``x - x``
    is 0 exactly for finite doubles: NaN otherwise). Compiled, C's ``log1p``: the libm
    function ``math.log1p`` calls, without a Python call."""
    return log1p(x if x > 0.0 else 0.0) / _C_LOG_S if x - x == 0.0 else 0.0


#: The job's columns of a candidate row (:func:`_job_row`), from ``online`` on.
_JOB_COLS = CANDIDATE_FEATURES[_COL["online"] : _COL["job_on_target"]]


def _hold_row() -> np.ndarray:
    row = np.zeros((1, N_FEATURES))
    row[0, _COL["hold"]] = 1.0
    return row


#: Hold's row of the float32 table.
_HOLD_ROW = _hold_row()[0].astype(np.float32)

#: ``np.empty``, ``np.zeros`` and two dtypes as module globals: a build's arrays are made by
#: one positional call each, not an attribute read and a keyword call.
_EMPTY, _ZEROS = np.empty, np.zeros
_INT64, _FLOAT32 = np.dtype(np.int64), np.dtype(np.float32)


#: A job's group columns (the last four of :data:`_JOB_COLS`).
_GroupCols = tuple[float, float, float, float]


def _spec_cols(spec: JobSpec, legality: Legality | None = None) -> tuple[Any, ...]:
    """What a job's row reads from its spec alone (frozen: the same for every build of the
    episode): the spec, the ``num_gpus``, ``gpu_frac``, ``mem_gb`` and ``cpu_cores`` cells, the
    estimate ``est_work_s`` and its cell, the ``priority`` cell, the group, the model and
    whether it is a gang (``CandidateBuilder._assemble`` writes them), its mask signature
    (``mask_signature``: what ``CandidateBuilder.build`` asks the legality its targets by,
    :data:`_SIG`) and, with ``legality`` where its typed passes answer the signature
    (``Legality._pass``: compiled, a small fleet, no gpulets), the typed static parts those
    passes read (``Legality.static_parts``, a function of the signature and the fleet: handed back
    with each question, :data:`_JV`, where the legality looked them up by the signature's
    hash a pass), else None."""
    x = spec.est_work_s
    sig = mask_signature(spec)
    return (
        spec,
        math.log2(max(1, spec.num_gpus)) / 6.0,
        spec.gpu_frac,
        spec.mem_gb / 80.0,
        spec.cpu_cores / 64.0,
        x,
        _log_s(x),
        min(spec.priority, 10) / 10.0,
        spec.group,
        spec.model,
        spec.num_gpus > 1,
        sig,
        legality.static_parts(sig, spec) if legality is not None else None,
    )


@cython.cfunc
@cython.locals(fixed=dict, hit=tuple)
def _cells_of(
    fixed: dict[int, tuple[Any, ...]], jid: int, spec: JobSpec, legality: Legality
) -> tuple[Any, ...]:
    """Job ``jid``'s ``_spec_cols`` (with ``legality``'s static parts) kept in ``fixed``
    (made and kept where missing or of another spec)."""
    hit = fixed.get(jid)
    if hit is None or hit[0] is not spec:
        hit = fixed[jid] = _spec_cols(spec, legality)
    return hit


@cython.cfunc
@cython.locals(blocks=list, total=cython.Py_ssize_t, max_c=cython.Py_ssize_t, n=cython.Py_ssize_t)
@cython.returns(cython.Py_ssize_t)
@cython.exceptval(-2)
def _block_added(
    blocks: list[tuple[int, np.ndarray]], jid: int, flat: np.ndarray, total: int, max_c: int
) -> int:
    """``CandidateBuilder._add`` as a C call: the candidates counted so far with job ``jid``'s
    targets ``flat`` added to ``blocks`` as a block (none: ``total``), or -1 where they would
    pass ``max_c`` (the caller raises :class:`TooManyCandidates`)."""
    n = len(flat)
    if n:
        if total + n > max_c:
            return -1
        blocks.append((jid, flat))
    return total + n


@cython.cfunc
@cython.locals(total=cython.Py_ssize_t)
def _ids_array(total: int) -> np.ndarray:
    """``np.empty((3, total), dtype=np.int64)``: a build's job, GPU and option of each
    candidate (compiled, numpy's ``PyArray_EMPTY``: no Python call parsing its arguments;
    the same array, C order, its own data)."""
    if cython.compiled:
        dims = cython.declare(npy_intp[2])  # type: ignore[index]
        dims[0] = 3
        dims[1] = total
        out = PyArray_EMPTY(2, cython.address(dims[0]), NPY_INT64, 0)
    else:
        out = _EMPTY((3, total), _INT64)
    return out  # type: ignore[no-any-return]


#: Where ``_spec_cols`` holds the job's mask signature (and as a C constant of the compiled
#: module: an index, not a module look-up).
_SIG = 11
_C_SIG = cython.declare(cython.Py_ssize_t, _SIG)
#: Where ``_spec_cols`` holds the legality's typed static parts of the job (or None).
_JV = 12
_C_JV = cython.declare(cython.Py_ssize_t, _JV)


@cython.cfunc  # (a C call from ``_assemble``, where a Python call of five arguments cost ~0.4 k)
@cython.locals(groups=dict, known=dict, hit=tuple)
def _group_cols(
    sim: Simulator,
    spec: JobSpec,
    groups: dict[str, _GroupCols],
    known: dict[str, tuple[tuple[int, float, float, float], _GroupCols]],
    now: float | None = None,
) -> _GroupCols:
    """The job's group columns (the last four of :data:`_JOB_COLS`: what
    ``ClusterView.group_stats`` says of its group); ``groups``: the columns per group, as far
    as known (the predictor is asked for the others and they are added); ``known``: per group
    the predictor's last answer and its columns (the predictor gives the same tuple while its
    answer holds: ``OnlinePredictor.group_numbers``, ``group_stats``' numbers without the
    object, so the columns are not computed again); ``now``: the simulator's time, as the
    caller read it (None: read here). (Compiled, the two dictionaries typed: their look-ups
    are C calls.)"""
    group = spec.group
    cols = groups.get(group)
    if cols is None:
        pred = sim.predictor
        if now is None:
            now = sim.now
        g = pred.group_numbers(group, now) if pred is not None else None
        if g is None:
            cols = (0.0, 0.0, 0.0, 0.0)
        else:
            hit = known.get(group)
            if hit is not None and hit[0] is g:
                cols = hit[1]
            else:
                runs_seen, mean_log_s, std_log_s, period_s = g
                runs = math.log1p(runs_seen) / 5.0
                mean = mean_log_s / math.log(1e6) if math.isfinite(mean_log_s) else 0.0
                std = std_log_s / 5.0 if math.isfinite(std_log_s) else 0.0
                cols = (runs, mean, std, _log_s(period_s))
                known[group] = (g, cols)
        groups[group] = cols
    return cols


@cython.cclass
class _Kept:
    """What :class:`_Runs` keeps of the GPUs' classes from one build to the next (compiled,
    pruned, the GPUs' nodes rising): per GPU whether it is free (empty and ready) and busy
    (residents or MIG mode), its residents' and MIG layout's key's number (``kid``: equal iff
    the keys ``TargetClasses`` held are; 0: none) and the residents' signatures it was made
    of; per node its GPUs, free GPUs and class (``nd``); and per GPU whether it starts a run
    of like columns (``head``: :func:`_gpu_codes`' runs) and whether it starts a run
    :func:`_class_reps` must look at (``brk``: a head, or a GPU whose fields are not the GPU
    before's). A build looks again only at the GPUs the cluster changed (``Cluster.watch``),
    the GPUs whose residents' key changed (a resident's work left past a power of two), and
    the first GPUs of the nodes whose class changed, each with the GPU after it; then finds
    the runs' first GPUs in one pass over the flags and the codes from those few
    (:func:`_head_codes`). The same classes, numbered alike, as from scratch."""

    n = cython.declare(cython.Py_ssize_t)
    nn = cython.declare(cython.Py_ssize_t)
    nv = cython.declare(cython.longlong[::1])  # (the GPUs' nodes, rising)
    pv = cython.declare(cython.longlong[::1])  # (the nodes' interconnects: ``_pcie``)
    ec = cython.declare(cython.uchar[::1])  # (``_Runs``' flags)
    er = cython.declare(cython.uchar[::1])
    #: Per node: its GPUs, its free GPUs, its class (``_gpu_codes``' ``nd``), the first GPU
    #: past it.
    nd = cython.declare(cython.longlong[::1])
    #: Per GPU, five rows: free, busy, watched now, head, brk.
    bits = cython.declare(cython.uchar[:, ::1])
    kid = cython.declare(cython.longlong[::1])
    #: Per key number, its number this build in order of sight (-1: none yet; key 0: 0).
    num = cython.declare(cython.longlong[::1])
    #: Work rows: the GPUs to look at again (``todo``, 6 x n + 8), the heads (n + 1), their
    #: residents' classes (n), the GPUs ``_class_reps`` visits (n) and work room (11 x n + 16).
    todo = cython.declare(cython.longlong[::1])
    hd = cython.declare(cython.longlong[::1])
    hh = cython.declare(cython.longlong[::1])
    cand = cython.declare(cython.longlong[::1])
    work = cython.declare(cython.longlong[::1])
    nh = cython.declare(cython.Py_ssize_t)
    nc = cython.declare(cython.Py_ssize_t)
    #: How many classes the last :meth:`refresh` found (its answer's maximum + 1).
    nk = cython.declare(cython.Py_ssize_t, visibility="readonly")
    #: Per GPU and resident slot (``rmax`` a GPU): the resident's estimated work and the
    #: least work left its signature holds for (``rng``), and the bound above (``rng_hi``).
    rng = cython.declare(cython.double[::1])
    rng_hi = cython.declare(cython.double[::1])
    rmax = cython.declare(cython.Py_ssize_t)
    keys = cython.declare(dict)  # (per key, its number)
    sigs = cython.declare(list)  # (per GPU, its residents' states as last seen; None: none)
    busy_l = cython.declare(list)  # (the busy GPUs, rising)

    @cython.locals(g=cython.Py_ssize_t, k=cython.Py_ssize_t, n=cython.Py_ssize_t)
    def __init__(self, c: Any, pcie: np.ndarray, flags: tuple[np.ndarray, np.ndarray]) -> None:
        n = self.n = c.n_gpus
        self.nn = c.n_nodes
        self.nv = c.node_of
        self.pv = pcie
        self.ec, self.er = flags
        self.nd = np.zeros(4 * self.nn, dtype=np.int64)
        for g in range(n):
            self.nd[self.nv[g]] += 1
        for k in range(self.nn):
            self.nd[2 * self.nn + k] = -1
            self.nd[3 * self.nn + k] = (self.nd[3 * self.nn + k - 1] if k else 0) + self.nd[k]
        self.bits = np.zeros((5, n), dtype=np.uint8)
        self.kid = np.zeros(n, dtype=np.int64)
        self.num = np.full(64, -1, dtype=np.int64)
        self.num[0] = 0
        self.todo = np.empty(6 * n + 8, dtype=np.int64)
        self.hd = np.empty(n + 1, dtype=np.int64)
        self.hh = np.empty(n + 1, dtype=np.int64)
        self.cand = np.empty(n + 1, dtype=np.int64)
        self.work = np.empty(11 * n + 16, dtype=np.int64)
        self.nh = self.nc = self.nk = 0
        self.rmax = max(1, int(c.sharing.max_residents))
        self.rng = np.zeros(2 * n * self.rmax)
        self.rng_hi = np.zeros(n * self.rmax)
        self.keys = {((), ()): 0}
        self.sigs = [None] * n
        self.busy_l = []

    @cython.locals(
        v=_StateViews, n=cython.Py_ssize_t, nn=cython.Py_ssize_t, i=cython.Py_ssize_t,
        top=cython.Py_ssize_t, g=cython.Py_ssize_t, k=cython.Py_ssize_t, d=cython.Py_ssize_t,
        f=cython.longlong, q=cython.longlong, b=cython.longlong, kd=cython.longlong,
        q0=cython.Py_ssize_t, e0=cython.Py_ssize_t, full=cython.bint, same=cython.bint,
        nres=cython.longlong[:], mode=cython.longlong[:], ready=cython.uchar[:],
        fr=cython.uchar[::1], bz=cython.uchar[::1], mk=cython.uchar[::1], hd_=cython.uchar[::1],
        br=cython.uchar[::1], mig=cython.longlong, nb=cython.Py_ssize_t, nh=cython.Py_ssize_t,
        nx=cython.longlong, mask=cython.Py_ssize_t, h=cython.bint,
        residents=list, instances=list, busy_l=list, sigs=list, keys=dict, here=list,
        old=tuple, jobs=dict, known=dict, st=JobState, x=cython.double, rmax=cython.Py_ssize_t,
    )  # fmt: skip
    @cython.boundscheck(False)  # (every index is in range: the fleet's GPUs and nodes)
    @cython.wraparound(False)
    def refresh(
        self, c: Any, changed: list[int] | None, jobs: dict[int, Any], known: dict[int, Any]
    ) -> np.ndarray | None:
        """The GPUs' classes (``TargetClasses.gid``) of cluster ``c`` now, from the kept
        state brought up to date for the GPUs ``changed`` since the last call (their flags
        already: ``_Runs``; None: every GPU, the first call); ``jobs``, ``known``: the
        simulator's jobs and the residents' signatures' memo (:func:`_resident_sig`). None
        where the codes' digits would pass 2**62: the caller takes the columns' path."""
        v = c.state_views()
        n, nn = self.n, self.nn
        q0, e0 = 2 * nn, 3 * nn
        nres, mode, ready = v.n_res, v.mode, v.ready
        fr, bz, mk, hd_, br = self.bits[0], self.bits[1], self.bits[2], self.bits[3], self.bits[4]
        residents, instances = c.residents, c.mig_instances
        busy_l, sigs, keys = self.busy_l, self.sigs, self.keys
        mig = _MIG
        rmax = self.rmax
        full = changed is None
        top = n if full else len(changed)  # type: ignore[arg-type]
        d = 0
        # the GPUs changed: free and busy again, their nodes' free counts and classes; each
        # and the GPU after it looked at again, and a node's first GPU and the next node's
        # where its class changed
        for i in range(top):
            g = i if full else changed[i]  # type: ignore[index]
            if not full:  # (its flags and the GPU after it's: ``_same_as_before``'s)
                _same_at(v, self.ec, self.er, g)
                if g + 1 < n:
                    _same_at(v, self.ec, self.er, g + 1)
            k = self.nv[g]
            f = 1 if nres[g] == 0 and ready[g] else 0
            if f != fr[g]:
                fr[g] = f
                self.nd[nn + k] += 1 if f else -1
            b = 1 if nres[g] != 0 or mode[g] == mig else 0
            if b != bz[g]:
                bz[g] = b
                if b:
                    busy_l.insert(bisect_left(busy_l, g), g)
                else:
                    busy_l.remove(g)
            if not b:
                self.kid[g] = 0
                sigs[g] = None
            mk[g] = 1
            self.todo[d] = g
            self.todo[d + 1] = g + 1
            d += 2
            f = self.nd[nn + k]
            q = (self.nd[k] * 2 + self.pv[k]) * 3 + (0 if f <= 1 else (2 if f == self.nd[k] else 1))
            if q != self.nd[q0 + k]:
                self.nd[q0 + k] = q
                self.todo[d] = self.nd[e0 + k - 1] if k else 0
                self.todo[d + 1] = self.nd[e0 + k]
                d += 2
        # the busy GPUs' keys: made again where the GPU changed or a resident's work left
        # passed a power of two (its signature's exponent: kept per resident with the range
        # of work left it holds for, read from the job's state in C; ``rmax`` residents a GPU
        # at most, else made again at every build)
        for g in busy_l:
            old = sigs[g]
            if not mk[g] and old is not None:
                same = True
                for i in range(len(old)):
                    st = old[i]
                    x = self.rng[2 * (g * rmax + i)] - st.work_done
                    if not (self.rng[2 * (g * rmax + i) + 1] <= x < self.rng_hi[g * rmax + i]):
                        same = False
                        break
                if same:
                    continue
            res = residents[g]
            mig_ = instances[g]
            kd = 0
            sigs[g] = ()
            if res or mig_:
                here = []  # type: ignore[var-annotated]
                sts = []
                for j in res:
                    st = jobs[j]
                    sig = _resident_sig(st, known)
                    if len(res) <= rmax:
                        _keep_range(self, g * rmax + len(here), st, sig, known)
                        sts.append(st)
                    here.append(sig)
                sigs[g] = tuple(sts) if len(res) <= rmax else None
                if len(here) > 1:
                    here.sort()
                key = (
                    tuple((x_.profile, x_.start, x_.job_id is None) for x_ in mig_) if mig_ else (),
                    tuple(here),
                )
                hit = keys.get(key)
                if hit is None:
                    hit = keys[key] = len(keys)
                kd = hit
            if kd != self.kid[g]:
                self.kid[g] = kd
                self.todo[d] = g
                self.todo[d + 1] = g + 1
                d += 2
        if full:
            memset(cython.address(mk[0]), 0, n)
        else:
            for i in range(top):
                g = changed[i]  # type: ignore[index]
                mk[g] = 0
        # heads and the GPUs ``_class_reps`` visits, looked at again
        for i in range(d):
            g = self.todo[i]
            if g >= n:
                continue
            h = (
                g == 0
                or not self.ec[g]
                or self.kid[g] != self.kid[g - 1]
                or self.nd[q0 + self.nv[g]] != self.nd[q0 + self.nv[g - 1]]
            )
            hd_[g] = h
            br[g] = h or not self.er[g]
        # the keys' numbers in order of sight (``TargetClasses``' ``held``)
        if len(keys) > self.num.shape[0]:
            self.num = np.full(2 * len(keys), -1, dtype=np.int64)
            self.num[0] = 0
        nx = 1
        for g in busy_l:
            kd = self.kid[g]
            if self.num[kd] < 0:
                self.num[kd] = nx
                nx += 1
        nb = nh = 0
        for g in range(n):
            if br[g]:
                self.cand[nb] = g
                nb += 1
                if hd_[g]:
                    self.hd[nh] = g
                    self.hh[nh] = self.num[self.kid[g]]
                    nh += 1
        self.hd[nh] = n
        self.nh, self.nc = nh, nb
        for g in busy_l:
            self.num[self.kid[g]] = -1
        self.num[0] = 0
        gid = _head_codes(v, self.nv, self.nd, q0, self.hd, self.hh, nh, self.work)
        self.nk = self.work[0]  # (``_head_codes``' count of codes)
        return gid

    @cython.locals(
        v=_StateViews, cv=cython.longlong[::1], wv=cython.longlong[::1], ev=cython.uchar[::1],
        n=cython.Py_ssize_t, m=cython.Py_ssize_t, g=cython.Py_ssize_t, r=cython.longlong,
        last=cython.longlong, b=cython.longlong, c=cython.Py_ssize_t, cmp=cython.Py_ssize_t,
        limit=cython.Py_ssize_t, same=cython.bint, nres=cython.longlong[:],
        mode=cython.longlong[:], ready=cython.uchar[:], healthy=cython.uchar[:],
        typ=cython.longlong[:], mem=cython.double[:], cap=cython.double[:],
        sm=cython.longlong[:], lim=cython.uchar[:], cap_mig=cython.uchar[:],
        occ=cython.longlong[:], used=cython.longlong[:], pr=cython.longlong,
        i=cython.Py_ssize_t, s=cython.Py_ssize_t, k=cython.longlong, x=cython.longlong,
        lo=cython.Py_ssize_t, pos=cython.Py_ssize_t, nc=cython.Py_ssize_t,
        nn=cython.Py_ssize_t, e0=cython.Py_ssize_t, xv=cython.Py_ssize_t, av=cython.Py_ssize_t,
        rv=cython.Py_ssize_t, op=cython.p_longlong, pp=cython.p_longlong, starts=cython.bint,
    )  # fmt: skip
    @cython.boundscheck(False)  # (every index is in range: the fleet's GPUs and their classes)
    @cython.wraparound(False)
    def reps(
        self, v: Any, cls: np.ndarray, n_cls: int, starts: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """:func:`_class_reps` of the classes ``cls`` (0 .. ``n_cls`` - 1) with the kept
        flags, visiting only the GPUs that may start a group's run (``brk``, and where
        ``starts``, every node's first GPU: ``cls`` is ``TargetClasses.gid`` with the nodes
        a job's CPUs oversubscribe apart): a GPU between two of them is alike in class and
        every field to the one before it, in that one's group, and a run of them in one group
        gives it its peer (its first GPU off the group's first GPU's node: the GPUs' nodes
        rise) at once. The same groups, peers and comparisons as :func:`_class_reps`."""
        n, nn = self.n, self.nn
        e0 = 3 * nn
        m = max(n_cls, 1)
        # (``_class_reps``' work array, in the kept work room: per class its list's first
        # group, and per group the next of its class's list, its peer and its first GPU)
        wv = self.work
        xv, av, rv = m, m + n, m + 2 * n
        for g in range(m):
            wv[g] = -1
        cv, ev = cls, self.er
        c = cmp = 0
        limit = 16 * n
        pr = -1  # (the group of the GPU before)
        lo = pos = 0  # (GPUs lo .. pos - 1: in group pr, their peer not yet looked for)
        i, s, nc = 0, 1, self.nc
        while True:
            g = self.cand[i] if i < nc else n
            if starts:
                while s < nn and self.nd[e0 + s - 1] < pos:
                    s += 1
                if s < nn and self.nd[e0 + s - 1] < g:
                    g = self.nd[e0 + s - 1]
            if g >= n:
                break
            while i < nc and self.cand[i] <= g:
                i += 1
            pos = g + 1
            b = cv[g]
            if pr >= 0 and ev[g] and b == cv[g - 1]:
                continue  # (the group of the GPU before: the run goes on)
            if lo < g and wv[av + pr] < 0:  # (the run's peer: its first GPU off the node)
                x = self.nv[wv[rv + pr]]
                if self.nv[lo] != x:
                    wv[av + pr] = lo
                elif self.nv[g - 1] != x:
                    wv[av + pr] = self.nd[e0 + x]
            k = wv[b]
            last = -1
            same = False
            while k >= 0:
                cmp += 1
                r = wv[rv + k]
                same = _alike(v, r, g)
                if same:
                    break
                last = k
                k = wv[xv + k]
            if same:
                if wv[av + k] < 0 and self.nv[g] != self.nv[r]:
                    wv[av + k] = g
                pr = k
            else:
                if cmp > limit:
                    return None
                wv[rv + c] = g
                wv[xv + c] = -1
                wv[av + c] = -1
                if last < 0:
                    wv[b] = c
                else:
                    wv[xv + last] = c
                pr = c
                c += 1
            lo = g + 1
        if lo < n and pr >= 0 and wv[av + pr] < 0:  # (the last run's peer)
            x = self.nv[wv[rv + pr]]
            if self.nv[lo] != x:
                wv[av + pr] = lo
            elif self.nv[n - 1] != x:
                wv[av + pr] = self.nd[e0 + x]
        reps_a = _int64_array(c)
        alts_a = _int64_array(c)
        op, pp = _data_of(reps_a), _data_of(alts_a)
        for i in range(c):
            op[i] = wv[rv + i]
            pp[i] = wv[av + i]
        return reps_a, alts_a

    def snapshot(self) -> tuple[np.ndarray, ...]:
        """Copies of what a build reads (for the tests): the per-GPU free, busy, head and
        ``brk`` rows, the nodes' GPUs, free GPUs and classes, the heads, the GPUs
        :meth:`reps` visits, and per GPU whether its key equals the GPU before's."""
        bits = np.asarray(self.bits)
        kid = np.asarray(self.kid)
        return (
            bits[[0, 1, 3, 4]].copy(),
            np.asarray(self.nd)[: 3 * self.nn].copy(),
            np.asarray(self.hd)[: self.nh].copy(),
            np.asarray(self.cand)[: self.nc].copy(),
            np.concatenate([[0], kid[1:] == kid[:-1]]).astype(np.uint8),
        )

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


class _Runs:
    """What a builder's builds keep of the GPUs from one build to the next (compiled,
    pruned): per GPU whether its fields equal the GPU before's, two ways (:func:`_same_as_before`: what
    :func:`_gpu_codes` and :func:`_class_reps` read to pass a run of like GPUs), brought up to
    date at each build for the GPUs the cluster changed since the last one only
    (``Cluster.watch``: every change of a GPU's residents, declared memory, mode, SM in use,
    MIG layout, health or readiness notes the GPU), not compared afresh at every build. Where
    the cluster's arrays are new (a reset; a copy's cluster), every GPU is compared again and
    a new watch set kept; also where over an eighth of the GPUs changed. With the GPUs' nodes
    rising, the classes themselves are kept too (:class:`_Kept`, :meth:`classes`)."""

    __slots__ = ("cluster", "flags", "kept", "views", "watched")

    def __init__(self) -> None:
        self.cluster: Any = None
        #: The typed views of the cluster's arrays the flags are of (new at a reset; a copy's
        #: are None).
        self.views: Any = None
        #: The GPUs changed since the last build (``Cluster.watch``), emptied at each.
        self.watched: set[int] | None = None
        self.flags: tuple[np.ndarray, np.ndarray] | None = None
        #: The classes kept (:meth:`classes`; None: made afresh at the next call).
        self.kept: _Kept | None = None

    def update(self, c: Any) -> tuple[np.ndarray, np.ndarray]:
        """The flags of cluster ``c`` now (callers must not write to them)."""
        v = c.state_views()
        w = self.watched
        if v is not self.views or w is None or self.flags is None:
            if self.cluster is not None and w is not None:
                self.cluster.unwatch(w)  # (a last reset's, or another cluster's)
            self.cluster, self.views = c, v
            self.watched = c.watch()
            self.flags = _same_as_before(v)
            self.kept = None
        elif w:
            if 8 * len(w) > c.n_gpus:
                _same_as_before(v, self.flags)
            else:
                _same_as_before(v, self.flags, np.fromiter(w, dtype=np.int64, count=len(w)))
            w.clear()
            self.kept = None  # (what changed is gone: :meth:`classes` starts afresh)
        return self.flags

    def classes(
        self, c: Any, pcie: np.ndarray, jobs: dict[int, Any], known: dict[int, Any]
    ) -> np.ndarray | None:
        """``TargetClasses.gid`` of cluster ``c`` now (its GPUs' nodes rising), from the kept
        classes brought up to date (:meth:`_Kept.refresh`); None where the columns' path must
        answer."""
        kept = self.kept
        w = self.watched
        if (
            kept is None
            or w is None
            or self.flags is None
            or c.state_views() is not self.views
            or 8 * len(w) > c.n_gpus
        ):
            flags = self.update(c)
            kept = self.kept = _Kept(c, pcie, flags)
            return kept.refresh(c, None, jobs, known)
        changed = list(w) if w else []
        w.clear()  # (the flags of these and the GPUs after them: :meth:`_Kept.refresh`)
        return kept.refresh(c, changed, jobs, known)


class TargetClasses:
    """Which targets are interchangeable now (``pruning="classes"``, module doc): a class per
    GPU of the state, refined per job and option by :meth:`keys`."""

    def __init__(
        self,
        sim: Simulator,
        pcie: np.ndarray | None = None,
        specs: dict[int, list[Any]] | None = None,
        rising: bool | None = None,
        opt_mode: np.ndarray | None = None,
        runs: _Runs | None = None,
    ) -> None:
        """``pcie``: :func:`_pcie` of the cluster's nodes, where already at hand; ``specs``:
        the request part of residents' signatures (:func:`_resident_sig`) by ``id`` of their
        spec, as far as known (the others are added); ``rising``: :func:`_rising` of the
        GPUs' nodes, ``opt_mode``: :func:`_opt_modes` of the options, where already at
        hand; ``runs``: the builder's :class:`_Runs` (compiled; None: the GPUs compared
        afresh)."""
        c = sim.cluster
        self._cluster = c
        self.node_of = c.node_of
        self.n_nodes = c.n_nodes
        if pcie is None:
            pcie = _pcie(c.nodes)
        jobs = sim.jobs
        known = {} if specs is None else specs
        #: Whether the GPUs' nodes rise with the GPU (a node's GPUs are contiguous, as
        #: ``Fleet`` numbers them): what :func:`_near_firsts` reads.
        self.rising = _rising(c.node_of) if rising is None else rising
        #: Per GPU whether its fields equal the GPU before's (``_Runs``; compiled only).
        self._same: tuple[np.ndarray, np.ndarray] | None = None
        #: The classes kept across builds that :meth:`reps` reads (``_Runs.classes``; None:
        #: the groups found afresh).
        self._kept: _Kept | None = None
        #: How many classes ``gid`` holds (-1: not known; ``_gpu_class`` finds it).
        self._n_gid = -1
        gid = None
        if cython.compiled and runs is not None and self.rising:
            # (kept across builds, brought up to date for what changed: :class:`_Kept`)
            gid = runs.classes(c, pcie, jobs, known)
            self._same = runs.flags
            kept = runs.kept
            if gid is not None and kept is not None:
                self._kept = kept
                self._n_gid = kept.nk
                self.gid = gid
        if gid is None:  # (the residents' classes and the columns afresh)
            # what only a loop reads, for the GPUs with residents or MIG instances: the instances'
            # layout and the residents' signatures (0: none of either). A GPU with MIG instances
            # is in MIG mode (``Cluster.add`` drops the layout of a GPU that leaves it), so the
            # loop visits only the GPUs with residents or in MIG mode.
            ids: dict[tuple[object, ...], int] = {((), ()): 0}
            held = np.zeros(c.n_gpus, dtype=np.int64)
            sigs: dict[int, tuple[object, ...]] = {}  # per resident (a gang's GPUs share it)
            residents, instances = c.residents, c.mig_instances
            if cython.compiled:
                v = c.state_views()
                busy = _busy_gpus(v)
            else:
                busy = np.flatnonzero((c.n_res != 0) | (c.mode == _MIG)).tolist()
            for g in busy:
                res = residents[g]
                mig = instances[g]
                if res or mig:
                    here: list[tuple[object, ...]] = []
                    for j in res:
                        sig = sigs.get(j)
                        if sig is None:
                            sig = sigs[j] = _resident_sig(jobs[j], known)
                        here.append(sig)
                    if len(here) > 1:
                        here.sort()
                    key = (
                        tuple((i.profile, i.start, i.job_id is None) for i in mig) if mig else (),
                        tuple(here),
                    )
                    held[g] = ids.setdefault(key, len(ids))
            # A GPU's class: equal for equal (type, mode, MIG layout, health, readiness, SM in use,
            # node class, residents' signatures). Only which GPUs share a class matters (keys
            # are compared for equality), not its number. The node's class: its size and
            # interconnect, and its free (empty, ready) GPUs: one, some or all. An empty GPU
            # switches mode (:meth:`keys` tells the cost apart); MIG's layout stays.
            if cython.compiled:
                same = self._same = runs.update(c) if runs is not None else _same_as_before(v)
                gid = _gpu_codes(v, c.node_of, pcie, held, c.n_nodes, same[0])
            if gid is None:
                free = (c.n_res == 0) & c.ready
                n_free = np.bincount(c.node_of[free], minlength=c.n_nodes)
                size = np.bincount(c.node_of, minlength=c.n_nodes)
                node = np.stack(
                    [size, pcie, np.where(n_free <= 1, 0, np.where(n_free == size, 2, 1))]
                )
                mode = np.where((c.n_res == 0) & (c.mode != _MIG), _FREE, c.mode)
                cols = (c.type_idx, mode, c.healthy, c.ready, c.sm_used, *node[:, c.node_of], held)
                self.gid = _class_ids(cols)
            else:  # (the same classes, numbered alike, from typed passes: :func:`_gpu_codes`)
                self.gid = gid
        self.mode = c.mode
        self.opt_mode = _opt_modes(sim.options) if opt_mode is None else opt_mode
        self._cpu_left = c.node_vcpus - c.node_cpu_used
        #: The least of ``_cpu_left`` (``_gpu_class``; found at its first call).
        self._least: float | None = None
        #: Per job CPU request: each GPU's class with the node apart where the job's CPUs
        #: would oversubscribe it, renumbered 0 .. n - 1, and n (:meth:`firsts`).
        self._with_cpu: dict[float, tuple[np.ndarray, int]] = {}
        #: Per targets and CPU classes (:meth:`firsts`): the targets, their keys but the node
        #: (:func:`_target_keys`), their GPUs' nodes, the number of such keys and this key.
        self._targets: dict[tuple[object, ...], tuple[Any, ...]] = {}
        #: Per targets and CPU classes (:meth:`first_index`): the targets and the indices of
        #: the firsts of their classes with no node apart.
        self._base: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        #: Per flat targets and CPU classes (:meth:`flat_first_index`): the targets, their
        #: keys but the node, their GPUs' nodes, the firsts with no node apart, the keys' range.
        self._flat: dict[tuple[object, ...], tuple[Any, ...]] = {}
        #: Per CPU classes (:meth:`reps`): the classes and the GPUs that stand for the fleet
        #: (a :class:`_Reps`, or None: too many to find).
        self._reps: dict[int, tuple[np.ndarray, Any]] = {}

    def reps(self, cls: np.ndarray, n_cls: int | None = None) -> _Reps | None:
        """:func:`_class_reps` of the GPU classes ``cls`` (``_gpu_class``) and what a job's
        picks among their targets read (:class:`_Reps`), kept per classes (compiled only)."""
        hit = self._reps.get(id(cls))
        if hit is None or hit[0] is not cls:
            if n_cls is None:
                n = int(cls.max()) + 1 if len(cls) else 0
            else:
                n = n_cls
            kept = self._kept
            if kept is not None:  # (the kept flags' runs: :meth:`_Kept.reps`)
                found = kept.reps(self._cluster.state_views(), cls, n, cls is not self.gid)
            else:
                same = None if self._same is None else self._same[1]
                found = _class_reps(self._cluster.state_views(), cls, self.node_of, n, same)
            reps = None
            if found is not None:
                n_opts = len(self.opt_mode)
                reps = _Reps(found, cls, self.mode, self.opt_mode, self.node_of, n * n_opts * 2)
            hit = self._reps[id(cls)] = (cls, reps)
        return hit[1]  # type: ignore[no-any-return]

    def _gpu_class(self, cpu_cores: float) -> tuple[np.ndarray, int]:
        """Per GPU, its class and, where a job of ``cpu_cores`` would oversubscribe the
        node's CPUs, the node (as :meth:`keys` tells them apart), renumbered 0 .. n - 1; and
        n."""
        hit = self._with_cpu.get(cpu_cores)
        if hit is None:
            x = cpu_cores - 1e-9
            if self._least is None:  # (the nodes' least CPUs left: one numpy call a build)
                self._least = float(self._cpu_left.min()) if len(self._cpu_left) else math.inf
            # (every node fits where the least does; a NaN fits none: the mask's path)
            fits = None if self._least >= x else self._cpu_left >= x
            if fits is None or fits.all():
                cls = self.gid
                n = self._n_gid if self._n_gid >= 0 else (int(cls.max()) + 1 if len(cls) else 0)
            else:
                node = self.node_of
                cls = self.gid * (self.n_nodes + 1) + np.where(fits[node], 0, node + 1)
                u, cls = np.unique(cls, return_inverse=True)
                cls = cls.reshape(-1)
                n = len(u)
            hit = self._with_cpu[cpu_cores] = (cls, n)
        return hit

    def firsts(self, spec: JobSpec, gs: np.ndarray, options: np.ndarray, here: int) -> np.ndarray:
        """Per (GPU, option) target of a single-GPU job with ``spec``: whether it is the
        first of its class (:meth:`keys`' classes, found in one pass without them). The
        targets' classes but the node ``here`` are kept for the build, per targets and CPUs:
        the running jobs of one mask on other nodes share them."""
        hit = self._keys_of(spec, gs, options)
        pick = np.zeros(len(gs), dtype=bool)
        _firsts(pick, np.zeros(2 * hit[4], dtype=np.uint8), hit[2], hit[3], here)
        return pick

    def first_index(
        self, spec: JobSpec, gs: np.ndarray, options: np.ndarray, here: int
    ) -> np.ndarray:
        """``np.flatnonzero(firsts(spec, gs, options, here))`` (rising; callers must not write
        to it). Compiled, a job on node ``here`` starts from the targets' firsts with no node
        apart (kept per targets and CPUs): only the targets on its own node are visited, and
        those after them until each class first met there has a first elsewhere
        (:func:`_near_firsts`)."""
        hit = self._keys_of(spec, gs, options)
        if not cython.compiled or not self.rising:
            return np.flatnonzero(self.firsts(spec, gs, options, here))
        at = hit[5]
        base = self._base.get(at)
        if base is None or base[0] is not gs or base[1] is not options:
            idx = np.flatnonzero(self.firsts(spec, gs, options, -1))
            base = self._base[at] = (gs, options, idx)
        if here < 0:
            return base[2]
        out = _near_firsts(hit[2], hit[3], base[2], here, hit[4])
        return base[2] if out is None else out

    def flat_first_index(self, spec: JobSpec, flat: np.ndarray, here: int) -> np.ndarray:
        """``first_index`` of the (GPU, option) pairs of rising flat targets ``flat`` (``gpu x
        n_options + option``), from ``flat`` itself (compiled, the GPUs' nodes rising only):
        one typed pass gives the keys, the targets' nodes and the firsts with no node apart
        (:func:`_flat_keys`, kept per targets and CPUs), then :func:`_near_firsts`."""
        cls, n = self._gpu_class(spec.cpu_cores)
        at = (id(flat), None if cls is self.gid else spec.cpu_cores)
        hit = self._flat.get(at)
        if hit is None or hit[0] is not flat:
            n_keys = n * len(self.opt_mode) * 2
            keys, nodes, base = _flat_keys(
                flat, len(self.opt_mode), cls, self.mode, self.opt_mode, self.node_of, n_keys
            )
            hit = self._flat[at] = (flat, keys, nodes, base, n_keys)
        if here < 0:
            return hit[3]
        out = _near_firsts(hit[1], hit[2], hit[3], here, hit[4])
        return hit[3] if out is None else out

    def _keys_of(self, spec: JobSpec, gs: np.ndarray, options: np.ndarray) -> tuple[Any, ...]:
        """The targets ``(gs, options)``' keys but the node (:func:`_target_keys`) for a job
        with ``spec``'s CPUs, their GPUs' nodes, the keys' range and the memo's key: kept per
        targets and CPUs."""
        cls, n = self._gpu_class(spec.cpu_cores)
        at = (id(gs), id(options), None if cls is self.gid else spec.cpu_cores)
        hit = self._targets.get(at)
        if hit is None or hit[0] is not gs or hit[1] is not options:
            n_opts = len(self.opt_mode)
            keys = _target_keys(gs, options, cls, n_opts, self.mode, self.opt_mode)
            hit = self._targets[at] = (gs, options, keys, self.node_of[gs], n * n_opts * 2, at)
        return hit

    def keys(self, spec: JobSpec, gpus: np.ndarray, options: np.ndarray, here: int) -> np.ndarray:
        """One integer per (GPU, option) target of a job with ``spec``, equal for
        interchangeable targets: the GPU's class, the option, whether the GPU is in the
        option's mode already where that saves a setup (MPS, MIG), and the node if the job's
        CPUs would oversubscribe it; a migrating job's own node (``here``; -1: none) apart."""
        fits = self._cpu_left >= spec.cpu_cores - 1e-9
        node = self.node_of[gpus]
        key = self.gid[gpus] * (self.n_nodes + 1) + np.where(fits[node], 0, node + 1)
        key = key * len(self.opt_mode) + options
        key = key * 4 + (self.mode[gpus] == self.opt_mode[options]) * 2 + (node == here)
        return key


def _opt_modes(options: Sequence[Any]) -> np.ndarray:
    """Per option, the mode an empty GPU must be set up for (the MPS daemon, MIG), else
    :data:`_FREE` (``TargetClasses.opt_mode``)."""
    setup = (SharingMode.MPS, SharingMode.MIG)
    return np.array([int(o.mode) if o.mode in setup else _FREE for o in options], dtype=np.int64)


def _rising(node_of: np.ndarray) -> bool:
    """Whether the GPUs' nodes ``node_of`` never fall (each node's GPUs contiguous)."""
    return bool((node_of[1:] >= node_of[:-1]).all())


def _pcie(nodes: Sequence[NodeSpec]) -> np.ndarray:
    """Per node: 1 if its GPUs talk over PCIe (``TargetClasses``' node class), else 0."""
    return np.array([n.interconnect is Interconnect.PCIE for n in nodes], dtype=np.int64)


def _class_ids(cols: Sequence[np.ndarray]) -> np.ndarray:
    """One integer per row of the integer columns ``cols``, equal iff the rows are (0 ..
    number of distinct rows - 1): the columns' values as digits of one number, renumbered."""
    code = np.zeros(len(cols[0]), dtype=np.int64)
    span = 1
    for col in cols:
        col = np.asarray(col, dtype=np.int64)
        if not len(col):
            break
        low = int(col.min())
        width = int(col.max()) - low + 1
        if span * width >= 1 << 62:  # (renumber first: fewer distinct rows than GPUs)
            code = np.unique(code, return_inverse=True)[1].reshape(-1)
            span = int(code.max()) + 1
        code = code * width + (col - low)
        span *= width
    return np.unique(code, return_inverse=True)[1].reshape(-1)


@cython.locals(
    v=_StateViews, nv=cython.longlong[::1], pv=cython.longlong[::1], hv=cython.longlong[::1],
    g=cython.Py_ssize_t, k=cython.Py_ssize_t, n=cython.Py_ssize_t, f=cython.longlong,
    mask=cython.longlong, nres=cython.longlong[:], ready=cython.uchar[:], hdv=cython.longlong[::1],
    nh=cython.Py_ssize_t, ec=cython.uchar[::1], nd=cython.longlong[::1], q0=cython.Py_ssize_t,
    nn=cython.Py_ssize_t, hh=cython.longlong[::1],
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs and their nodes)
@cython.wraparound(False)
def _gpu_codes(
    v: Any,
    node_of: np.ndarray,
    pcie: np.ndarray,
    held: np.ndarray,
    n_nodes: int,
    same: np.ndarray | None = None,
) -> np.ndarray | None:
    """Per GPU one integer, equal iff ``TargetClasses``' columns are (type, mode with an empty
    GPU outside MIG as :data:`_FREE`, health, readiness, SM in use, the node's size,
    interconnect ``pcie`` and free GPUs: one, some or all, and ``held``, the residents' and
    MIG layout's class): what :func:`_class_ids` renumbers, from the cluster's typed views
    (``v``; compiled only). Two passes over the GPUs: the nodes' counts, then the runs of
    GPUs whose columns are the previous GPU's (a fleet's idle GPUs are long runs); the codes
    come from the runs' first GPUs only (:func:`_head_codes`). None where the digits would
    pass 2**62 (or no GPU): the caller takes the columns' path. Returned renumbered 0 .. n -
    1 in the codes' order, as ``np.unique``'s inverse (the same numbers as
    :func:`_class_ids` gives the columns).

    ``same`` (uint8, per GPU; None: found here): :func:`_same_as_before`'s first answer, kept
    by :class:`_Runs` across builds for the GPUs the cluster did not change: then a GPU of a
    run costs that flag, its residents' class and its node's class, no field of its own.
    (:class:`_Kept` keeps the runs' first GPUs themselves across builds.)"""
    n = v.n_res.shape[0]
    if n == 0:
        return None
    if same is None:
        same = _same_as_before(v)[0]
    nres, ready = v.n_res, v.ready
    nv, pv, hv = node_of, pcie, held
    # per node (one array: three rows): its GPUs, its free ones, its class
    nn = n_nodes
    nd_a = np.zeros(3 * nn, dtype=np.int64)
    nd, ec = nd_a, same
    q0 = 2 * nn
    for g in range(n):
        k = nv[g]
        nd[k] += 1
        if nres[g] == 0 and ready[g]:
            nd[nn + k] += 1
    for k in range(nn):  # (pcie is 0 or 1; the free GPUs' class 0, 1 or 2)
        f = nd[nn + k]
        nd[q0 + k] = (nd[k] * 2 + pv[k]) * 3 + (0 if f <= 1 else (2 if f == nd[k] else 1))
    # the runs' first GPUs (``hdv``, and n after the last) and their residents' classes
    hd_a = np.empty(2 * n + 1, dtype=np.int64)
    hdv = hd_a
    hh = hdv[n + 1 :]
    nh = 0
    for g in range(n):
        if g and ec[g] and hv[g] == hv[g - 1] and nd[q0 + nv[g]] == nd[q0 + nv[g - 1]]:
            continue  # (its columns are the GPU before's)
        hdv[nh] = g
        hh[nh] = hv[g]
        nh += 1
    hdv[nh] = n
    mask = 0
    while mask < 2 * nh:
        mask = 2 * mask + 1 if mask else 1
    w_a = np.empty(2 * (mask + 1) + 3 * nh + 1, dtype=np.int64)
    return _head_codes(v, nv, nd, q0, hdv, hh, nh, w_a)


@cython.cfunc
@cython.locals(
    v=_StateViews, nv=cython.longlong[::1], nd=cython.longlong[::1], q0=cython.Py_ssize_t,
    hdv=cython.longlong[::1], hh=cython.longlong[::1], nh=cython.Py_ssize_t,
    g=cython.Py_ssize_t, k=cython.Py_ssize_t, n=cython.Py_ssize_t,
    t=cython.longlong, m=cython.longlong, s=cython.longlong,
    q=cython.longlong, h=cython.longlong, t_lo=cython.longlong, t_hi=cython.longlong,
    m_lo=cython.longlong, m_hi=cython.longlong, s_lo=cython.longlong, s_hi=cython.longlong,
    q_lo=cython.longlong, q_hi=cython.longlong, h_lo=cython.longlong, h_hi=cython.longlong,
    wm=cython.longlong, ws=cython.longlong, wq=cython.longlong, wh=cython.longlong,
    x=cython.longlong, mig=cython.longlong, free=cython.longlong, span=cython.double,
    ordv=cython.longlong[::1], gv=cython.p_longlong, i=cython.Py_ssize_t,
    size=cython.Py_ssize_t, mask=cython.longlong, nres=cython.longlong[:],
    mode=cython.longlong[:], ready=cython.uchar[:], healthy=cython.uchar[:],
    sm=cython.longlong[:], typ=cython.longlong[:], r=cython.longlong, hi=cython.Py_ssize_t,
    wv=cython.longlong[::1], o_si=cython.Py_ssize_t, o_at=cython.Py_ssize_t,
    o_seen=cython.Py_ssize_t, o_rank=cython.Py_ssize_t, j=cython.Py_ssize_t,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs, the runs, ``wv``)
@cython.wraparound(False)
def _head_codes(
    v: Any, nv: Any, nd: Any, q0: int, hdv: Any, hh: Any, nh: int, wv: Any
) -> np.ndarray | None:
    """:func:`_gpu_codes`' answer from the runs of GPUs whose columns are the GPU before's:
    their first GPUs ``hdv`` (rising, ``hdv[nh]``: the GPUs' count), their residents' classes
    ``hh``, the nodes' classes ``nd[q0 + node]`` (``nv``: the GPUs' nodes) and the cluster's
    typed views ``v``: the columns' ranges, the codes, their table (open addressing) and ranks
    from the runs' first GPUs only, and each run filled with its number. ``wv``: work room,
    at least 2 x the table's size (the least power of two >= 2 x ``nh``) + 3 x ``nh`` + 1.
    None where the digits would pass 2**62. (Compiled only: typed views passed as C
    structs, the answer made by numpy's C API and written through its data pointer.)"""
    n = hdv[nh]
    nres, mode, ready, healthy = v.n_res, v.mode, v.ready, v.healthy
    sm, typ = v.sm_used, v.type_idx
    mig, free = _MIG, _FREE
    t_lo = t_hi = m_lo = m_hi = s_lo = s_hi = q_lo = q_hi = h_lo = h_hi = 0
    for i in range(nh):
        g = hdv[i]
        t = typ[g]
        m = mode[g]
        if nres[g] == 0 and m != mig:
            m = free
        s = sm[g]
        q = nd[q0 + nv[g]]
        h = hh[i]
        if i:
            t_lo, t_hi = min(t_lo, t), max(t_hi, t)
            m_lo, m_hi = min(m_lo, m), max(m_hi, m)
            s_lo, s_hi = min(s_lo, s), max(s_hi, s)
            q_lo, q_hi = min(q_lo, q), max(q_hi, q)
            h_lo, h_hi = min(h_lo, h), max(h_hi, h)
        else:
            t_lo = t_hi = t
            m_lo = m_hi = m
            s_lo = s_hi = s
            q_lo = q_hi = q
            h_lo = h_hi = h
    wm, ws, wq, wh = m_hi - m_lo + 1, s_hi - s_lo + 1, q_hi - q_lo + 1, h_hi - h_lo + 1
    span = 1.0 * (t_hi - t_lo + 1) * wm * 4.0 * ws * wq * wh  # (a double: no overflow)
    if span >= 2.0**62:
        return None
    # each run's code, and at once its slot in a table of the distinct codes (open
    # addressing), numbered in order of sight: then ``np.unique(code, return_inverse=True)[1]``
    # from the ranks of those few. One work array: a slot's code (``size``), a slot's code's
    # number in order of sight (``size``, -1: none), each run's slot, the distinct codes in
    # order of sight and their ranks (``nh`` each: at most as many codes as runs).
    size = 1
    while size < 2 * nh:
        size *= 2
    mask = size - 1
    o_si, o_at, o_seen, o_rank = size, 2 * size, 2 * size + nh, 2 * size + 2 * nh
    for i in range(size):
        wv[o_si + i] = -1
    k = 0
    for i in range(nh):
        g = hdv[i]
        m = mode[g]
        if nres[g] == 0 and m != mig:
            m = free
        x = (typ[g] - t_lo) * wm + (m - m_lo)
        x = (x * 2 + healthy[g]) * 2 + ready[g]
        x = (x * ws + (sm[g] - s_lo)) * wq + (nd[q0 + nv[g]] - q_lo)
        x = x * wh + (hh[i] - h_lo)
        h = (x ^ (x >> 11) ^ (x >> 23) ^ (x >> 37)) & mask  # (x >= 0: no overflow)
        while wv[o_si + h] >= 0 and wv[h] != x:
            h = (h + 1) & mask
        if wv[o_si + h] < 0:
            wv[h] = x
            wv[o_si + h] = k
            wv[o_seen + k] = x
            k += 1
        wv[o_at + i] = h
    if k <= 64:  # (a code's rank: how many codes are below it; the codes are distinct)
        for i in range(k):
            r = 0
            x = wv[o_seen + i]
            for j in range(k):
                if wv[o_seen + j] < x:
                    r += 1
            wv[o_rank + i] = r
    else:
        order = np.argsort(np.asarray(wv[o_seen : o_seen + k]))
        ordv = order
        for i in range(k):
            wv[o_rank + ordv[i]] = i
    gid = _int64_array(n)
    gv = _data_of(gid)
    for i in range(nh):
        r = wv[o_rank + wv[o_si + wv[o_at + i]]]
        hi = hdv[i + 1]
        for g in range(hdv[i], hi):
            gv[g] = r
    wv[0] = k  # (the codes' count, for the caller)
    return gid


@cython.cfunc
@cython.locals(n=cython.Py_ssize_t)
def _int64_array(n: int) -> np.ndarray:
    """``np.empty(n, dtype=np.int64)`` (compiled, numpy's ``PyArray_EMPTY``: no Python call
    parsing its arguments; C order, its own data)."""
    if cython.compiled:
        dims = cython.declare(npy_intp[1])  # type: ignore[index]
        dims[0] = n
        out = PyArray_EMPTY(1, cython.address(dims[0]), NPY_INT64, 0)
    else:
        out = np.empty(n, dtype=np.int64)
    return out  # type: ignore[no-any-return]


@cython.cfunc
@cython.returns(cython.p_longlong)
def _data_of(a: np.ndarray) -> Any:
    """The data pointer of ``_int64_array``'s fresh array ``a`` (compiled only: written
    through it without a buffer request)."""
    return cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, a)))


@cython.locals(
    kv=cython.longlong[::1], gsv=cython.longlong[:], osv=cython.longlong[:],
    cv=cython.longlong[::1], mv=cython.longlong[::1], omv=cython.longlong[::1],
    i=cython.Py_ssize_t, g=cython.Py_ssize_t, o=cython.Py_ssize_t, no=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs and the options)
@cython.wraparound(False)
def _target_keys(
    gs: np.ndarray,
    os_: np.ndarray,
    cls: np.ndarray,
    n_opts: int,
    mode: np.ndarray,
    opt_mode: np.ndarray,
) -> np.ndarray:
    """Per target ``(gs, os_)``: its GPU's class ``cls`` (0 .. n - 1), the option (0 ..
    ``n_opts`` - 1) and whether the GPU is in the option's mode (``mode == opt_mode``) as one
    integer, 0 .. n x ``n_opts`` x 2 - 1 (compiled: one typed pass; interpreted: numpy's)."""
    if cython.compiled:
        keys = np.empty(len(gs), dtype=np.int64)
        kv, gsv, osv, cv, mv, omv = keys, gs, os_, cls, mode, opt_mode
        no = n_opts
        for i in range(gsv.shape[0]):
            g = gsv[i]
            o = osv[i]
            kv[i] = (cv[g] * no + o) * 2 + (1 if mv[g] == omv[o] else 0)
    else:
        keys = (cls[gs] * n_opts + os_) * 2 + (mode[gs] == opt_mode[os_])
    return keys


@cython.locals(
    pv=cython.uchar[::1], sv=cython.uchar[::1], kv=cython.longlong[::1],
    nv=cython.longlong[::1], i=cython.Py_ssize_t, k=cython.Py_ssize_t, h=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: ``seen`` holds 2 x the keys' range)
@cython.wraparound(False)
def _firsts(
    pick: np.ndarray, seen: np.ndarray, keys: np.ndarray, nodes: np.ndarray, here: int
) -> None:
    """Marks in the bool ``pick`` the targets that are the first of their class: their
    ``keys`` (:func:`_target_keys`) and whether their GPU's node (``nodes``) is ``here``.
    ``seen``: zeros, 2 x the keys' range.

    Interpreted: the classes' numbers and ``np.unique``'s first of each; compiled: one typed
    pass that marks a class's first target (the same targets: ``np.unique`` sorts stably, so
    its index of a class is its first; ``tests/test_candidates_typed.py`` compares the two)."""
    if cython.compiled:
        pv, sv, kv, nv = pick, seen, keys, nodes
        h = here
        for i in range(kv.shape[0]):
            k = kv[i] * 2 + (1 if nv[i] == h else 0)
            if not sv[k]:
                sv[k] = 1
                pv[i] = 1
    else:
        pick[np.unique(keys * 2 + (nodes == here), return_index=True)[1]] = True


@cython.locals(
    fv=cython.longlong[::1], kv=cython.longlong[::1], nv=cython.longlong[::1],
    bv=cython.longlong[::1], cv=cython.longlong[::1], mv=cython.longlong[::1],
    omv=cython.longlong[::1], ndv=cython.longlong[::1], sv=cython.uchar[::1],
    i=cython.Py_ssize_t, c=cython.Py_ssize_t, g=cython.Py_ssize_t, o=cython.longlong,
    f=cython.longlong, at=cython.longlong, no=cython.longlong, k=cython.longlong,
    h=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the flat targets' GPUs and options)
@cython.wraparound(False)
def _flat_keys(
    flat: np.ndarray,
    n_opts: int,
    cls: np.ndarray,
    mode: np.ndarray,
    opt_mode: np.ndarray,
    node_of: np.ndarray,
    n_keys: int,
    here: int = -1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rising flat target ``gpu * n_opts + option`` of ``flat``: :func:`_target_keys`'
    key (the GPU's class ``cls``, the option, whether the GPU is in the option's mode) and the
    GPU's node; and the rising indices of the first target of each key (``_firsts``, with the
    node ``here`` apart; -1: none), in one typed pass (compiled only: the GPUs found as the
    indices pass each row's start, as :func:`_split` does). ``n_keys``: the keys' range."""
    n = len(flat)
    keys = np.empty(n, dtype=np.int64)
    nodes = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    seen = np.zeros(2 * n_keys, dtype=np.uint8)
    fv, kv, nv, bv, sv = flat, keys, nodes, first, seen
    cv, mv, omv, ndv = cls, mode, opt_mode, node_of
    no = n_opts
    h = here
    g = 0
    at = 0  # (g x n_opts: the first flat index of GPU g)
    c = 0
    for i in range(n):
        f = fv[i]
        while f >= at + no:
            at += no
            g += 1
        o = f - at
        k = (cv[g] * no + o) * 2 + (1 if mv[g] == omv[o] else 0)
        kv[i] = k
        nv[i] = ndv[g]
        k = k * 2 + (1 if ndv[g] == h else 0)
        if not sv[k]:
            sv[k] = 1
            bv[c] = i
            c += 1
    return keys, nodes, first[:c]


@cython.cfunc
@cython.locals(
    nv=cython.longlong[::1], h=cython.longlong, n=cython.Py_ssize_t, lo=cython.Py_ssize_t,
    hi=cython.Py_ssize_t, mid=cython.Py_ssize_t, top=cython.Py_ssize_t,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: ``lo`` .. ``top`` within ``nv``)
@cython.wraparound(False)
def _node_run(nv: Any, h: int) -> tuple[int, int]:
    """Where node ``h``'s run lies in the rising nodes ``nv``: the first index with node >=
    ``h`` and the first with node > ``h`` (binary searches; equal where none has ``h``)."""
    n = nv.shape[0]
    lo, top = 0, n
    while lo < top:
        mid = (lo + top) // 2
        if nv[mid] < h:
            lo = mid + 1
        else:
            top = mid
    hi, top = lo, n
    while hi < top:
        mid = (hi + top) // 2
        if nv[mid] <= h:
            hi = mid + 1
        else:
            top = mid
    return lo, hi


@cython.locals(
    kv=cython.longlong[::1], nv=cython.longlong[::1], bv=cython.longlong[::1],
    ov=cython.longlong[::1], sv=cython.uchar[::1], n=cython.Py_ssize_t, nb=cython.Py_ssize_t,
    lo=cython.Py_ssize_t, hi=cython.Py_ssize_t,
    i=cython.Py_ssize_t, j=cython.Py_ssize_t, c=cython.Py_ssize_t, miss=cython.Py_ssize_t,
    k=cython.longlong, h=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the targets', the keys' range)
@cython.wraparound(False)
def _near_firsts(
    keys: np.ndarray, nodes: np.ndarray, base: np.ndarray, here: int, n_keys: int
) -> np.ndarray | None:
    """The targets first of their class for a job on node ``here`` (``_firsts``' picks of
    ``keys`` with ``nodes == here`` apart), as rising indices, from ``base``: the rising
    indices of the first target of each key (no node apart). None where no target lies on
    ``here`` (``base`` answers). ``nodes`` must not fall (a node's targets are one run
    ``lo .. hi``); ``n_keys``: the keys' range.

    A key's first elsewhere is its first overall (in ``base``) unless that one lies on
    ``here``; then no target of the key comes before the run, and its first elsewhere is its
    first after the run. So the run is visited (the firsts on ``here``), then the targets after
    it only until each such key is met (compiled only; ``tests/test_candidates_typed.py``
    compares it with ``_firsts``)."""
    kv, nv, bv = keys, nodes, base
    n, nb, h = kv.shape[0], bv.shape[0], here
    lo, hi = _node_run(nv, h)
    if lo == hi:
        return None
    out = np.empty(nb + hi - lo, dtype=np.int64)
    seen = np.zeros(n_keys, dtype=np.uint8)  # (bit 1: met on ``here``; 2: wanted after it)
    ov, sv = out, seen
    c = 0
    miss = 0
    for i in range(nb):
        j = bv[i]
        if j < lo or j >= hi:
            ov[c] = j
            c += 1
        else:
            sv[kv[j]] |= 2
            miss += 1
    for j in range(lo, hi):
        k = kv[j]
        if not sv[k] & 1:
            sv[k] |= 1
            ov[c] = j
            c += 1
    j = hi
    while miss > 0 and j < n:
        k = kv[j]
        if sv[k] & 2:
            sv[k] &= 1
            ov[c] = j
            c += 1
            miss -= 1
        j += 1
    out = out[:c]
    out.sort()
    return out


@cython.locals(
    fv=cython.longlong[::1], gv=cython.longlong[::1], ov=cython.longlong[::1],
    n=cython.longlong, i=cython.Py_ssize_t, f=cython.longlong, g=cython.longlong,
    base=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: ``flat``'s, the outputs as long)
@cython.wraparound(False)
def _split(flat: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rising flat indices ``row * n + column`` as their rows and columns (int64 arrays;
    ``np.nonzero``'s order of their mask). Compiled, over 256 of them are split by a typed walk
    as the indices pass each row's start (``np.divmod``'s integer division costs ~6x more
    there); else ``np.divmod``."""
    if cython.compiled and len(flat) > 256:
        gs = np.empty(len(flat), dtype=np.int64)
        os_ = np.empty(len(flat), dtype=np.int64)
        fv, gv, ov = flat, gs, os_
        g = 0
        base = 0  # (g x n: the first flat index of row g)
        for i in range(fv.shape[0]):
            f = fv[i]
            while f >= base + n:
                base += n
                g += 1
            gv[i] = g
            ov[i] = f - base
        return gs, os_
    gs, os_ = np.divmod(flat, n)
    return gs, os_


@cython.locals(
    v=_StateViews, ec=cython.uchar[::1], er=cython.uchar[::1], n=cython.Py_ssize_t,
    g=cython.Py_ssize_t, p=cython.Py_ssize_t, i=cython.Py_ssize_t, top=cython.Py_ssize_t,
    gv=cython.longlong[::1], some=cython.bint, mig=cython.longlong, free=cython.longlong,
    m=cython.longlong,
    mp=cython.longlong, nres=cython.longlong[:], mode=cython.longlong[:],
    ready=cython.uchar[:], healthy=cython.uchar[:], typ=cython.longlong[:],
    mem=cython.double[:], cap=cython.double[:], sm=cython.longlong[:], lim=cython.uchar[:],
    cap_mig=cython.uchar[:], occ=cython.longlong[:], used=cython.longlong[:],
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs)
@cython.wraparound(False)
def _same_as_before(
    v: Any,
    out: tuple[np.ndarray, np.ndarray] | None = None,
    gpus: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU g > 0, whether its fields equal GPU g - 1's, two ways (uint8 arrays; GPU 0:
    0): :func:`_gpu_codes`' columns of its own (type, mode with an empty GPU outside MIG as
    :data:`_FREE`, health, readiness, SM in use), and every field :func:`_class_reps` compares
    (the cluster's typed views ``v``; compiled only). Written into ``out`` where given, for
    the GPUs ``gpus`` (int64) and those after them only (None: every GPU): what
    :class:`_Runs` keeps up to date."""
    n = v.n_res.shape[0]
    if out is None:
        out = (np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.uint8))
    ec, er = out
    nres, mode, ready, healthy, typ = v.n_res, v.mode, v.ready, v.healthy, v.type_idx
    mem, cap, sm, lim, cap_mig = v.mem_decl, v.cap_eps, v.sm_used, v.mps_limit, v.mig_capable
    occ, used = v.mig_occ, v.mig_used
    mig, free = _MIG, _FREE
    some = gpus is not None
    top = n
    if gpus is not None:
        gv = gpus
        top = 2 * gv.shape[0]
    for i in range(top):
        g = i
        if some:  # (each GPU changed, and the one after it: its flags compare with it)
            g = gv[i >> 1] + (i & 1)
            if g >= n:
                continue
        if g == 0:
            ec[0] = er[0] = 0
            continue
        p = g - 1
        m = mode[g]
        if nres[g] == 0 and m != mig:
            m = free
        mp = mode[p]
        if nres[p] == 0 and mp != mig:
            mp = free
        ec[g] = (
            typ[p] == typ[g]
            and m == mp
            and healthy[p] == healthy[g]
            and ready[p] == ready[g]
            and sm[p] == sm[g]
        )
        er[g] = (
            nres[p] == nres[g]
            and mode[p] == mode[g]
            and ready[p] == ready[g]
            and healthy[p] == healthy[g]
            and typ[p] == typ[g]
            and mem[p] == mem[g]
            and cap[p] == cap[g]
            and sm[p] == sm[g]
            and lim[p] == lim[g]
            and cap_mig[p] == cap_mig[g]
            and occ[p] == occ[g]
            and used[p] == used[g]
        )
    return out


@cython.cfunc
@cython.locals(
    v=_StateViews, ec=cython.uchar[::1], er=cython.uchar[::1], g=cython.Py_ssize_t,
    p=cython.Py_ssize_t, m=cython.longlong, mp=cython.longlong, mig=cython.longlong,
    free=cython.longlong,
)  # fmt: skip
@cython.returns(cython.int)
@cython.exceptval(check=False)  # (raises nothing)
@cython.boundscheck(False)  # (every index is in range: GPU g > 0 and the one before it)
@cython.wraparound(False)
def _same_at(v: Any, ec: Any, er: Any, g: int) -> int:
    """:func:`_same_as_before`'s two flags of GPU ``g`` (> 0) written into ``ec`` and ``er``
    (the same comparisons: ``tests/test_window_runs.py`` compares the kept flags with a
    fresh pass and numpy's; compiled only)."""
    if g == 0:
        ec[0] = er[0] = 0
        return 0
    p = g - 1
    mig, free = _MIG, _FREE
    m = v.mode[g]
    if v.n_res[g] == 0 and m != mig:
        m = free
    mp = v.mode[p]
    if v.n_res[p] == 0 and mp != mig:
        mp = free
    ec[g] = (
        v.type_idx[p] == v.type_idx[g]
        and m == mp
        and v.healthy[p] == v.healthy[g]
        and v.ready[p] == v.ready[g]
        and v.sm_used[p] == v.sm_used[g]
    )
    er[g] = _alike(v, p, g)
    return 0


@cython.cfunc
@cython.inline
@cython.locals(v=_StateViews, r=cython.Py_ssize_t, g=cython.Py_ssize_t)
@cython.returns(cython.bint)
@cython.exceptval(check=False)  # (raises nothing)
@cython.boundscheck(False)  # (every index is in range: two of the fleet's GPUs)
@cython.wraparound(False)
def _alike(v: Any, r: int, g: int) -> bool:
    """Whether GPUs ``r`` and ``g`` are equal in every field a single-GPU legality reads
    (:func:`_class_reps`' groups: residents, mode, readiness, health, type, declared memory
    and capacity, SM in use, the MPS limit, MIG capability and layout bits; a NaN equals
    nothing), from the cluster's typed views ``v`` (compiled only)."""
    return (
        v.n_res[r] == v.n_res[g]
        and v.mode[r] == v.mode[g]
        and v.ready[r] == v.ready[g]
        and v.healthy[r] == v.healthy[g]
        and v.type_idx[r] == v.type_idx[g]
        and v.mem_decl[r] == v.mem_decl[g]
        and v.cap_eps[r] == v.cap_eps[g]
        and v.sm_used[r] == v.sm_used[g]
        and v.mps_limit[r] == v.mps_limit[g]
        and v.mig_capable[r] == v.mig_capable[g]
        and v.mig_occ[r] == v.mig_occ[g]
        and v.mig_used[r] == v.mig_used[g]
    )


@cython.locals(
    v=_StateViews, cv=cython.longlong[::1], nv=cython.longlong[::1], hv=cython.longlong[::1],
    xv=cython.longlong[::1], av=cython.longlong[::1], rv=cython.longlong[::1],
    n=cython.Py_ssize_t, g=cython.Py_ssize_t, r=cython.longlong, last=cython.longlong,
    b=cython.longlong, c=cython.Py_ssize_t, cmp=cython.Py_ssize_t, limit=cython.Py_ssize_t,
    same=cython.bint, nres=cython.longlong[:], mode=cython.longlong[:], ready=cython.uchar[:],
    healthy=cython.uchar[:], typ=cython.longlong[:], mem=cython.double[:],
    cap=cython.double[:], sm=cython.longlong[:], lim=cython.uchar[:], cap_mig=cython.uchar[:],
    occ=cython.longlong[:], used=cython.longlong[:], pr=cython.longlong, ev=cython.uchar[::1],
    m=cython.Py_ssize_t, wv=cython.longlong[::1], ov=cython.longlong[::1],
    pv=cython.longlong[::1], i=cython.Py_ssize_t, k=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs and their classes)
@cython.wraparound(False)
def _class_reps(
    v: Any, cls: np.ndarray, node_of: np.ndarray, n_cls: int, like: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The GPUs that stand for the fleet in a single-GPU job's pruning: the first GPU (lowest)
    of each group of GPUs alike in their class ``cls`` (0 .. ``n_cls`` - 1) and in every
    field of the cluster's typed views ``v`` that a single-GPU legality reads (``legality.py``'s
    ``_single_targets``: residents, mode, readiness, health, type, declared memory and
    capacity, SM in use, the MPS limit, MIG capability and layout bits; the job's own parts,
    ``static_parts``, are functions of the type and capacity), rising; and for each, its
    group's first GPU on another node than its own (-1: none). (Compiled only: None
    interpreted, or where finding the groups would take over 16 comparisons a GPU.)

    Two GPUs of a group give the same legal options to every single-GPU job, and the same
    keys (``_flat_keys``: the class, the option, whether the GPU is in the option's mode): a
    later one's targets have each a key met earlier. So the first target of each key lies on
    a GPU of this list, and with a node apart (a migrating job's own) on that node or on a
    group's first GPU off it: the list's GPU, or its peer where the list's lies on that node
    (``_Reps.gpus``; the GPUs' nodes rise).

    A GPU alike in class and in every field to the one before it is in that one's group (no
    walk of its class's groups: a fleet's idle GPUs are long runs of such GPUs); only its
    group's peer is looked at. (Equal values are equal to the same group's first GPU: a NaN
    is equal to none, so a GPU with one takes the walk, as before.) Whether its fields are the
    GPU before's: ``like`` (uint8 per GPU, :func:`_same_as_before`'s second answer, kept by
    :class:`_Runs` across builds for the GPUs the cluster did not change; None: found here)."""
    if not cython.compiled:
        return None
    if like is None:
        like = _same_as_before(v)[1]
    n = v.n_res.shape[0]
    m = max(n_cls, 1)
    # one work array (typed slices of it, no array made for each): per class its list's
    # first group (-1: none), and per group (numbered as made; at most one a GPU) the next
    # group of its class's list, its peer and its first GPU: only the classes' heads are
    # cleared, a group's cells are written as it is made
    work = np.empty(m + 3 * n, dtype=np.int64)
    wv = work
    for g in range(m):
        wv[g] = -1
    hv, xv, av, rv = wv[:m], wv[m : m + n], wv[m + n : m + 2 * n], wv[m + 2 * n :]
    cv, nv, ev = cls, node_of, like
    c = 0
    cmp = 0
    limit = 16 * n
    pr = -1  # (the group of the GPU before)
    for g in range(n):
        b = cv[g]
        if pr >= 0 and ev[g] and b == cv[g - 1]:  # (the group of the GPU before)
            if av[pr] < 0 and nv[g] != nv[rv[pr]]:
                av[pr] = g
            continue
        k = hv[b]
        last = -1
        same = False
        while k >= 0:
            cmp += 1
            r = rv[k]
            same = _alike(v, r, g)
            if same:
                break
            last = k
            k = xv[k]
        if same:
            if av[k] < 0 and nv[g] != nv[r]:
                av[k] = g
            pr = k
        else:
            if cmp > limit:
                return None
            rv[c] = g
            xv[c] = -1
            av[c] = -1
            if last < 0:
                hv[b] = c
            else:
                xv[last] = c
            pr = c
            c += 1
    reps_a = np.empty(c, dtype=np.int64)
    alts_a = np.empty(c, dtype=np.int64)
    ov, pv = reps_a, alts_a
    for i in range(c):
        ov[i] = rv[i]
        pv[i] = av[i]
    return reps_a, alts_a


@cython.cfunc
@cython.locals(p=cython.p_longlong, c=cython.Py_ssize_t, n=npy_intp)
def _ints_of(p: Any, c: int) -> Any:
    """The first ``c`` int64 at ``p`` as a fresh int64 array (numpy's ``PyArray_EMPTY`` and one
    ``memcpy``: no Python call; compiled only)."""
    n = c
    out = PyArray_EMPTY(1, cython.address(n), NPY_INT64, 0)
    if c:
        memcpy(PyArray_DATA(cython.cast(ndarray, out)), p, c * 8)
    return out


@cython.cclass
class _Reps:
    """The GPUs that stand for the fleet for one set of GPU classes (``TargetClasses.reps``:
    :func:`_class_reps`' GPUs and each one's peer) and what a single-GPU job's picks among
    its targets on them read (the classes, the GPUs' modes and nodes, the options' modes),
    read through pointers into those arrays (kept here) for every job of a build, where typed
    views cost ~1.4 k instructions each to acquire; a kept table of the keys met, zeroed again
    after each use, and a kept buffer the answers are written to before they are copied out.
    Compiled only (``_class_reps`` answers None interpreted)."""

    reps = cython.declare(object)  # (the GPUs, rising: int64)
    alts = cython.declare(object)  # (each one's peer: its group's first GPU off its node; -1)
    arrays = cython.declare(tuple)  # (what the pointers read, kept alive: int64, C order)
    rp = cython.declare(cython.p_longlong)
    ap = cython.declare(cython.p_longlong)
    cp = cython.declare(cython.p_longlong)
    mp = cython.declare(cython.p_longlong)
    omp = cython.declare(cython.p_longlong)
    np_ = cython.declare(cython.p_longlong)
    nv = cython.declare(cython.longlong[::1])  # (the nodes as a view: ``_node_run``'s)
    seen = cython.declare(object)  # (the keys' table: uint8, 2 x 2 x keys)
    sp = cython.declare(cython.p_uchar)
    buf = cython.declare(object)  # (the answers' buffer: int64, grown as needed)
    bp = cython.declare(cython.p_longlong)
    keys = cython.declare(object)  # (the firsts' keys, beside them: int64, as long)
    kp = cython.declare(cython.p_longlong)
    cap = cython.declare(cython.Py_ssize_t)
    n = cython.declare(cython.Py_ssize_t)
    n_opts = cython.declare(cython.longlong)

    @cython.locals(d=npy_intp)
    def __init__(
        self,
        found: tuple[np.ndarray, np.ndarray],
        cls: np.ndarray,
        mode: np.ndarray,
        opt_mode: np.ndarray,
        node_of: np.ndarray,
        n_keys: int,
    ) -> None:
        """``found``: :func:`_class_reps` of the classes ``cls``; ``n_keys``: the range of
        :func:`_target_keys`' keys of those classes."""
        reps, alts = found
        self.reps, self.alts = reps, alts
        arrays = (_i64(reps), _i64(alts), _i64(cls), _i64(mode), _i64(opt_mode), _i64(node_of))
        self.arrays = arrays
        self.rp = cython.cast(cython.p_longlong, PyArray_DATA(arrays[0]))
        self.ap = cython.cast(cython.p_longlong, PyArray_DATA(arrays[1]))
        self.cp = cython.cast(cython.p_longlong, PyArray_DATA(arrays[2]))
        self.mp = cython.cast(cython.p_longlong, PyArray_DATA(arrays[3]))
        self.omp = cython.cast(cython.p_longlong, PyArray_DATA(arrays[4]))
        self.np_ = cython.cast(cython.p_longlong, PyArray_DATA(arrays[5]))
        self.nv = arrays[5]
        self.n = PyArray_DIM(arrays[0], 0)
        self.n_opts = PyArray_DIM(arrays[4], 0)
        d = 2 * n_keys + 1  # (one more: never empty)
        self.seen = PyArray_ZEROS(1, cython.address(d), NPY_UINT8, 0)
        self.sp = cython.cast(cython.p_uchar, PyArray_DATA(cython.cast(ndarray, self.seen)))
        self.buf = None
        self.cap = 0
        self._room(64)

    @cython.cfunc
    @cython.locals(d=npy_intp)
    @cython.returns(cython.int)
    @cython.exceptval(-1)
    def _room(self, k: cython.Py_ssize_t) -> int:
        """Room for ``k`` answers in the kept buffer (its contents not kept)."""
        if k > self.cap:
            d = max(k, 2 * self.cap)
            self.buf = PyArray_EMPTY(1, cython.address(d), NPY_INT64, 0)
            self.bp = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, self.buf)))
            self.keys = PyArray_EMPTY(1, cython.address(d), NPY_INT64, 0)
            self.kp = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, self.keys)))
            self.cap = d
        return 0

    @cython.locals(
        n=cython.Py_ssize_t, i=cython.Py_ssize_t, j=cython.Py_ssize_t, c=cython.Py_ssize_t,
        lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, h=cython.longlong, g=cython.longlong,
        x=cython.longlong,
        bp=cython.p_longlong, nv=cython.p_longlong,
    )  # fmt: skip
    def gpus(self, here: int) -> np.ndarray:
        """The GPUs that stand for the fleet for a job on node ``here`` (-1: queued, the GPUs
        themselves; callers must not write to them): each of them off ``here``, the peer of
        each on it (where it has one) and every GPU of ``here`` (the GPUs' nodes rise),
        rising (no GPU twice: a peer lies off ``here`` and is no group's first), a fresh
        array."""
        if here < 0:
            return self.reps  # type: ignore[no-any-return]
        n, h, nv = self.n, here, self.np_
        lo, hi = _node_run(self.nv, h)  # (where node ``h``'s run lies)
        self._room(n + hi - lo)
        bp = self.bp
        c = 0
        for i in range(n):
            g = self.rp[i]
            if nv[g] != h:
                x = g
            elif self.ap[i] >= 0:
                x = self.ap[i]
            else:
                continue
            j = c  # (in place, rising: a peer may lie before GPUs already listed)
            while j > 0 and bp[j - 1] > x:
                bp[j] = bp[j - 1]
                j -= 1
            bp[j] = x
            c += 1
        # the node's run: after the listed GPUs below ``lo`` (those above it moved up)
        j = c
        while j > 0 and bp[j - 1] >= lo:
            j -= 1
        for i in range(c - 1, j - 1, -1):
            bp[i + hi - lo] = bp[i]
        for i in range(lo, hi):
            bp[j + i - lo] = i
        return _ints_of(bp, c + hi - lo)  # type: ignore[no-any-return]

    @cython.locals(
        fp=cython.p_longlong, n=cython.Py_ssize_t, i=cython.Py_ssize_t, c=cython.Py_ssize_t,
        g=cython.longlong, o=cython.longlong, f=cython.longlong, no=cython.longlong,
        k=cython.longlong, h=cython.longlong, bp=cython.p_longlong, sp=cython.p_uchar,
        cp=cython.p_longlong, mp=cython.p_longlong, omp=cython.p_longlong,
        nv=cython.p_longlong, kp=cython.p_longlong,
    )  # fmt: skip
    @cython.cdivision(True)  # (``f // no`` of a target f >= 0, no > 0: C's division is floor's)
    def firsts(self, flat: np.ndarray, here: int) -> np.ndarray:
        """The first of each key among rising flat targets ``flat`` (``gpu * n_options +
        option``) with the node ``here`` apart (-1: none), as flat targets (a fresh array):
        what :func:`_flat_keys`' firsts index, from one pass that keeps no keys (each target's
        GPU by one division: the targets lie on a few GPUs spread over the fleet, where a walk
        GPU by GPU passed every GPU up to the last target's). ``flat``'s memory is read in
        place (int64, C order: what the legality's passes answer; else such a copy)."""
        flat = _i64(flat)
        fp = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, flat)))
        n = PyArray_DIM(cython.cast(ndarray, flat), 0)
        self._room(n)
        bp, sp, cp, mp, omp, nv = self.bp, self.sp, self.cp, self.mp, self.omp, self.np_
        kp = self.kp
        no = self.n_opts
        h = here
        c = 0
        for i in range(n):
            f = fp[i]
            g = f // no
            o = f - g * no
            k = (cp[g] * no + o) * 2 + (1 if mp[g] == omp[o] else 0)
            k = k * 2 + (1 if nv[g] == h else 0)
            if not sp[k]:
                sp[k] = 1
                bp[c] = f
                kp[c] = k
                c += 1
        for i in range(c):  # (the table zeroed again: the firsts' keys, kept beside them)
            sp[kp[i]] = 0
        return _ints_of(bp, c)  # type: ignore[no-any-return]


#: ``TargetClasses``' mode of an empty GPU outside MIG (``Cluster.mode`` is -1 unconfigured).
_FREE = -2
_MIG = int(SharingMode.MIG)


@cython.cfunc
@cython.locals(left=cython.double, hit=list)
def _resident_sig(st: JobState, specs: dict[int, list[Any]]) -> tuple[object, ...]:
    """What a resident brings to a newcomer on its GPU: its model, request, priority and its
    estimated work left (``JobView.est_remaining_s``) to a power of two. ``specs``: by ``id``
    of the spec, the spec, its request part, its estimated work and the last signature made
    of them with the range of work left it holds for (``[2**(e-1), 2**e)`` of ``frexp``'s
    exponent e; kept while the spec is, added where missing): a resident's signature is made
    again only when its work left passes a power of two."""
    spec = st.spec
    hit = specs.get(id(spec))
    if hit is None or hit[0] is not spec:
        part = (
            spec.model,
            spec.online,
            spec.num_gpus,
            spec.gpu_frac,
            spec.mem_gb,
            spec.cpu_cores,
            spec.priority,
        )
        hit = specs[id(spec)] = [spec, part, spec.est_work_s, 1.0, 0.0, None]
    left = hit[2] - st.work_done
    if hit[3] <= left < hit[4]:  # (the last one's power of two: ``frexp``'s exponent the same)
        return hit[5]  # type: ignore[no-any-return]
    e = math.frexp(left)[1] if left > 0 else 0
    sig = (*hit[1], e)
    if 0.0 < left < 1e300:  # (finite, its range's ends doubles: kept)
        hit[3] = math.ldexp(0.5, e)
        hit[4] = math.ldexp(1.0, e)
        hit[5] = sig
    return sig


@cython.cfunc
@cython.locals(kept=_Kept, at=cython.Py_ssize_t, st=JobState, hit=list, left=cython.double)
@cython.returns(cython.int)
@cython.exceptval(-1)
def _keep_range(
    kept: Any, at: int, st: JobState, sig: tuple[object, ...], known: dict[int, Any]
) -> int:
    """Keeps in ``kept``'s slot ``at`` the range of work left over which resident ``st``'s
    signature ``sig`` (just made by :func:`_resident_sig` with the memo ``known``) holds: its
    exponent's ``[2**(e-1), 2**e)`` where its work left was positive and finite, every
    value <= 0 but 0 itself where it was <= 0, none else (made again at every build)."""
    hit = known[id(st.spec)]
    left = hit[2] - st.work_done
    kept.rng[2 * at] = hit[2]
    if 0.0 < left < 1e300:
        kept.rng[2 * at + 1] = math.ldexp(0.5, int(sig[-1]))  # type: ignore[call-overload]
        kept.rng_hi[at] = math.ldexp(1.0, int(sig[-1]))  # type: ignore[call-overload]
    elif left <= 0.0:
        kept.rng[2 * at + 1] = -math.inf
        kept.rng_hi[at] = 0.0
    else:
        kept.rng[2 * at + 1] = 1.0
        kept.rng_hi[at] = 0.0
    return 0


@cython.locals(
    v=_StateViews, g=cython.Py_ssize_t, mig=cython.longlong, nres=cython.longlong[:],
    mode=cython.longlong[:], rp=cython.p_longlong, mp=cython.p_longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs)
@cython.wraparound(False)
def _busy_gpus(v: Any) -> list[int]:
    """``np.flatnonzero((n_res != 0) | (mode == MIG)).tolist()`` of the cluster's typed views
    ``v`` (the GPUs ``TargetClasses`` visits), in one typed pass (compiled only; through
    pointers where the views are contiguous, as the cluster keeps them)."""
    out = []
    mig = _MIG
    nres, mode = v.n_res, v.mode
    if nres.shape[0] and nres.strides[0] == 8 and mode.strides[0] == 8:
        rp = cython.address(nres[0])
        mp = cython.address(mode[0])
        for g in range(nres.shape[0]):
            if (rp[g] != 0) | (mp[g] == mig):
                out.append(g)
    else:
        for g in range(nres.shape[0]):
            if nres[g] != 0 or mode[g] == mig:
                out.append(g)
    return out


@cython.locals(
    v=_StateViews, g=cython.Py_ssize_t, nres=cython.longlong[:], rp=cython.p_longlong,
    n=cython.Py_ssize_t,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs)
@cython.wraparound(False)
@cython.locals(residents=list, out=list)
def _running_ids(c: Any) -> list[int]:
    """The jobs on cluster ``c``'s GPUs, ascending: compiled, each job once per GPU it holds
    (a gang's id repeats: the caller skips a repeat), from one typed pass over its residents'
    counts (``n_res``: the GPUs with residents; through a pointer where the view is
    contiguous, as the cluster keeps it) into a list sorted in place, where a set, its list
    and ``sorted`` cost ~3.8 k instructions a build; interpreted, numpy's, each once."""
    residents = c.residents
    if cython.compiled:
        v = _views_of(c)
        nres = v.n_res
        n = nres.shape[0]
        out = []
        if n and nres.strides[0] == 8:
            rp = cython.address(nres[0])
            for g in range(n):
                if rp[g]:
                    out.extend(residents[g])
        else:
            for g in range(n):
                if nres[g]:
                    out.extend(residents[g])
        out.sort()
    else:
        out = sorted({j for g in np.flatnonzero(c.n_res).tolist() for j in residents[g]})
    return out


@cython.cclass
class _GpuViews:
    """Typed views of the arrays a GPU's cells are read from (:func:`_gpu_table`'s, in its
    order: type, node, residents, declared memory, memory capacity, request share, SM in use,
    online residents, health, readiness, utilisation), acquired once and kept while the same
    arrays are passed (the cluster replaces its state arrays only at a reset, and mutates
    them in place otherwise), instead of a dozen buffer acquisitions a build. They share the
    arrays' memory, so they read the state as it is now."""

    src = cython.declare(tuple)  # (the arrays; :meth:`same` compares them)
    type_idx = cython.declare(cython.longlong[::1])
    node_of = cython.declare(cython.longlong[::1])
    n_res = cython.declare(cython.longlong[::1])
    mem_decl = cython.declare(cython.double[::1])
    mem_cap = cython.declare(cython.double[::1])
    frac = cython.declare(cython.double[::1])
    sm_used = cython.declare(cython.longlong[::1])
    online = cython.declare(cython.longlong[::1])
    healthy = cython.declare(cython.uchar[::1])
    ready = cython.declare(cython.uchar[::1])
    util = cython.declare(cython.double[::1])

    def __init__(self, arrays: tuple[np.ndarray, ...]) -> None:
        self.src = arrays
        (
            self.type_idx, self.node_of, self.n_res, self.mem_decl, self.mem_cap, self.frac,
            self.sm_used, self.online,
        ) = arrays[:8]  # fmt: skip
        self.healthy = np.asarray(arrays[8]).view(np.uint8)  # (bool or uint8: the same bytes)
        self.ready = np.asarray(arrays[9]).view(np.uint8)
        self.util = arrays[10]

    @cython.locals(i=cython.Py_ssize_t)
    def same(self, arrays: tuple[np.ndarray, ...]) -> bool:
        """Whether ``arrays`` are the arrays these views were made of (the same objects)."""
        src = self.src
        for i in range(len(arrays)):  # noqa: SIM110  (a loop: no generator made a build)
            if arrays[i] is not src[i]:
                return False
        return True

    def write(
        self,
        out: np.ndarray,
        log_left: np.ndarray,
        n_types: int,
        n_nodes: int,
        max_res: int,
        gpus: np.ndarray | None = None,
    ) -> None:
        """:func:`_gpu_table` of these arrays; compiled, with ``gpus`` (int64) the rows of
        those GPUs only (the others left as they are)."""
        if cython.compiled:
            m = len(gpus) if gpus is not None else len(out)
            self._cells(out, log_left, n_types, n_nodes, max_res, gpus, m, gpus is not None)
        else:
            type_idx, node_of, n_res, mem_decl, mem_cap, frac, sm_used, online = self.src[:8]
            healthy, ready, util = self.healthy, self.ready, self.util
            caps = np.maximum(np.asarray(mem_cap, dtype=np.float64), 1e-9)
            rows = np.stack(
                [
                    np.asarray(type_idx, dtype=np.float64) / n_types,
                    np.asarray(node_of, dtype=np.float64) / n_nodes,
                    np.asarray(n_res, dtype=np.float64) / max_res,
                    log_left / _LOG_S,
                    1.0 - np.asarray(mem_decl, dtype=np.float64) / caps,
                    np.asarray(frac, dtype=np.float64),
                    np.asarray(sm_used, dtype=np.float64) / 100.0,
                    np.asarray(online, dtype=np.float64) / max_res,
                    np.asarray(healthy, dtype=np.float64),
                    np.asarray(ready, dtype=np.float64),
                    np.asarray(util, dtype=np.float64),
                ],
                axis=1,
            )
            out[...] = np.clip(rows, -1.0, 1.0, out=rows)

    @cython.cfunc
    @cython.locals(
        dv=cython.float[:, ::1], ll=cython.double[::1], nt=cython.double, nn=cython.double,
        mr=cython.double, gv=cython.longlong[::1], m=cython.Py_ssize_t, some=cython.bint,
        log_s=cython.double, cap=cython.double, g=cython.Py_ssize_t, i=cython.Py_ssize_t,
    )  # fmt: skip
    @cython.returns(cython.int)
    @cython.exceptval(check=False)  # (raises nothing)
    @cython.boundscheck(False)  # (every index is in range: the arrays are the fleet's, ``dv`` too)
    @cython.wraparound(False)
    def _cells(
        self, dv: Any, ll: Any, nt: float, nn: float, mr: float, gv: Any, m: int, some: bool
    ) -> int:
        """:meth:`write`'s typed loop (compiled only): the cells of the first ``m`` GPUs of
        ``gv`` with ``some``, else of GPUs 0 .. ``m`` - 1, into the rows of ``dv``."""
        log_s = _LOG_S
        for i in range(m):
            g = gv[i] if some else i
            dv[g, 0] = _clip1(cython.cast(cython.double, self.type_idx[g]) / nt)
            dv[g, 1] = _clip1(cython.cast(cython.double, self.node_of[g]) / nn)
            dv[g, 2] = _clip1(cython.cast(cython.double, self.n_res[g]) / mr)
            dv[g, 3] = _clip1(ll[g] / log_s)
            cap = self.mem_cap[g]
            if not (cap >= 1e-9 or cap != cap):  # np.maximum(cap, 1e-9)
                cap = 1e-9
            dv[g, 4] = _clip1(1.0 - self.mem_decl[g] / cap)
            dv[g, 5] = _clip1(self.frac[g])
            dv[g, 6] = _clip1(cython.cast(cython.double, self.sm_used[g]) / 100.0)
            dv[g, 7] = _clip1(cython.cast(cython.double, self.online[g]) / mr)
            dv[g, 8] = 1.0 if self.healthy[g] else 0.0
            dv[g, 9] = 1.0 if self.ready[g] else 0.0
            dv[g, 10] = _clip1(self.util[g])
        return 0

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


@cython.cclass
class _Writer:
    """What a build's rows are written from besides the state's Python objects, kept by the
    builder while the cluster's arrays are the same (:class:`_GpuViews`, ``gpu``): each GPU's
    row of cells (``cells``, float32), the busy targets' GPUs (``busy``), their residents'
    estimated work left (``left``) and its log1p (``ll``), side by side, and that log1p per
    GPU (``lg``), the marks of the targets' GPUs and their list, the options' cells, the
    last speed cells seen, the last table written and its view (``GpuSharing-v3``'s kept
    table is the same every build) and the job rows (``jr``, float64, and ``jri``: id, own
    GPU, speed row), grown as needed: typed views acquired once, where a build acquired ~20 (each ~4 k
    instructions) and allocated ~7 arrays. Compiled only (:meth:`fill`)."""

    gpu = cython.declare(_GpuViews)
    n = cython.declare(cython.Py_ssize_t)
    left = cython.declare(object)
    ll = cython.declare(object)
    leftv = cython.declare(cython.double[::1])
    llv = cython.declare(cython.double[::1])
    lg = cython.declare(cython.double[::1])
    busy = cython.declare(cython.longlong[::1])
    nm = cython.declare(cython.longlong)  # (how many GPUs ``gpus`` lists, marked in ``mark``)
    cells = cython.declare(cython.float[:, ::1])
    mark = cython.declare(cython.uchar[::1])
    gpus = cython.declare(cython.longlong[::1])
    opt = cython.declare(object)
    optv = cython.declare(cython.float[:, ::1])
    spd = cython.declare(object)
    spdv = cython.declare(cython.float[:, ::1])
    jr = cython.declare(cython.double[:, ::1])
    jri = cython.declare(cython.longlong[:, ::1])
    cap = cython.declare(cython.Py_ssize_t)
    table = cython.declare(object)
    tablev = cython.declare(cython.float[:, ::1])
    marks = cython.declare(object)
    marksv = cython.declare(cython.uchar[:, ::1])
    #: The cluster's typed state views and the usage's utilisation array the writer's views
    #: were last checked against (``CandidateBuilder._assemble``: identity tests a build).
    sv = cython.declare(object, visibility="readonly")
    util = cython.declare(object, visibility="readonly")

    @cython.locals(views=_GpuViews)
    def __init__(self, views: _GpuViews, opt32: np.ndarray) -> None:
        self.gpu = views
        n = self.n = views.n_res.shape[0]
        self.left = np.zeros(n)
        self.leftv = self.left
        self.ll = np.zeros(n)
        self.llv = self.ll
        self.lg = np.zeros(n)
        self.busy = np.zeros(n, dtype=np.int64)
        self.nm = 0
        self.cells = np.zeros((n, len(_GPU_COLS)), dtype=np.float32)
        self.mark = np.zeros(n, dtype=np.uint8)
        self.gpus = np.zeros(n, dtype=np.int64)
        self.opt = opt32
        self.optv = opt32
        self.spd = None
        self.table = None
        self.marks = None
        self.sv = None
        self.util = None
        self.cap = 0
        self.room(8)

    @cython.ccall  # (a C call from ``_assemble``: no argument parsing)
    def room(self, n_blocks: int) -> None:
        """Room for ``n_blocks`` job rows."""
        if n_blocks > self.cap:
            self.cap = max(n_blocks, 2 * self.cap)
            self.jr = np.zeros((self.cap, len(_JOB_COLS)))
            self.jri = np.zeros((self.cap, 3), dtype=np.int64)

    @cython.ccall  # (a C call from ``_assemble``: no argument parsing)
    def same(self, arrays: tuple[np.ndarray, ...], opt32: np.ndarray) -> bool:
        """Whether these were made of ``arrays`` (:meth:`_GpuViews.same`) and ``opt32``."""
        return self.opt is opt32 and self.gpu.same(arrays)

    @cython.locals(
        rv=cython.float[:, ::1], iv=cython.longlong[:, ::1], i=cython.Py_ssize_t,
        ip=cython.p_longlong, nt=cython.Py_ssize_t,
        b=cython.Py_ssize_t, g=cython.Py_ssize_t, m=cython.Py_ssize_t, x=cython.double,
        total=cython.double, st=JobState, nb=cython.Py_ssize_t, k=cython.Py_ssize_t, fixed=dict,
        hit=tuple, x0=cython.Py_ssize_t, mp=cython.p_uchar, gp=cython.p_longlong,
        bp=cython.p_longlong,
        jrv=cython.double[:, ::1], jiv=cython.longlong[:, ::1], ov=cython.float[:, ::1],
        sv=cython.float[:, ::1], tv=cython.longlong[::1], mk=cython.uchar[::1],
    )  # fmt: skip
    @cython.ccall  # (a C call from ``_assemble``: no argument parsing)
    @cython.boundscheck(False)  # (every index is in range: the fleet's GPUs, the blocks' rows)
    @cython.wraparound(False)
    def fill(
        self,
        table: np.ndarray,
        ids: np.ndarray,
        blocks: list[tuple[int, np.ndarray]],
        n_place: int,
        n_opts: int,
        speed: np.ndarray,
        jobs: dict[int, JobState],
        residents: list[list[int]],
        n_types: int,
        n_nodes: int,
        max_res: int,
        owners: list[tuple[int, list[int]]],
        gangs: list[tuple[int, np.ndarray, int, bool]],
        fixed: dict[int, tuple[Any, ...]] | None = None,
    ) -> None:
        """:func:`_write_rows` of ``blocks`` with the job rows ``jr`` and ``jri`` (one per
        block) into ``table`` and ``ids``, the GPU cells those of the targets' GPUs only (listed
        from the rows' GPUs, not found among the fleet's): their residents' work left summed
        in order from 0 (as ``CandidateBuilder._gpu_rows``), its log1p numpy's (the same ufunc
        over the busy ones' side by side, contiguous float64 as the fleet's whole array was:
        the same loop, each value's own; an idle GPU's 0, its log1p), their cells
        :meth:`_GpuViews.write`'s. Then what only some blocks have (``_assemble``'s
        interpreted passes): ``owners``, (block, its job's GPUs) of a job on several GPUs
        (``job_on_target``: the target is one of them); ``gangs``, (block, the job's
        single-GPU legality per (option, GPU) or its legal single-GPU cells as rising flat
        indices, its GPUs, whether flat cells: ``CandidateBuilder._gang_rows``)
        (``gang_one_node``: :func:`_gang_one_node`). ``fixed``: the builder's per-job spec
        cells (``_spec_cols``), whose estimate a resident's work left reads where kept."""
        # (the table's typed view kept while the same table is passed: ``GpuSharing-v3``'s
        # kept table, where a view acquired a build cost ~2.4 k instructions)
        if table is not self.table:
            self.tablev = table
            self.table = table
        rv = self.tablev
        # (the integers through a pointer: ``_ids_array``'s array read in place, numpy's C
        # API; anything else through a typed view, as before)
        if _ids_ok(ids):
            ip = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, ids)))
            nt = PyArray_DIM(cython.cast(ndarray, ids), 1)
        else:
            iv = ids
            ip = cython.address(iv[0, 0])
            nt = iv.strides[0] // 8
        if speed is not self.spd:
            self.spd = speed
            self.spdv = speed
        _hold_cells(rv, ip, nt)
        i = 1
        starts = []
        # (the kept views as locals: one reference each a build, not one a block)
        jrv, jiv, ov, sv, tv, mk = (
            self.jr,
            self.jri,
            self.optv,
            self.spdv,
            self.gpu.type_idx,
            self.mark,
        )
        # the targets' GPUs, each once, listed by the row pass as it meets them (``gpus``,
        # marked in ``mark``; a block's rows lie GPU by GPU): a few dozen GPUs of the fleet's
        # 1,024, where a pass over every GPU's mark found them. The last build's marks are
        # cleared first (from its list: kept exact where a pass raised)
        mp = cython.address(mk[0])
        gp = cython.address(self.gpus[0])
        for k in range(self.nm):
            mp[gp[k]] = 0
        self.nm = 0
        for b in range(len(blocks)):
            starts.append(i)
            i = _block_rows(
                rv, ip, nt, i, blocks[b][1], n_opts, n_place, jrv, jiv, b, ov, sv, tv, mk, gp,
                cython.address(self.nm),
            )  # fmt: skip
        starts.append(i)
        m = self.nm
        for b, mine in owners:
            for k in range(starts[b], starts[b + 1]):
                rv[k, _C_ON] = 1.0 if ip[nt + k] in mine else 0.0
        for b, legal, k, flat in gangs:
            if flat:  # (flat cells: marked into the kept option-major rows first)
                legal = self._marks_of(legal, n_opts)
            _gang_cells(rv, ip, nt, starts[b], starts[b + 1], legal, self.gpu.node_of, k)
        bp = cython.address(self.busy[0])
        nb = 0
        for x0 in range(m):
            g = gp[x0]
            self.lg[g] = 0.0  # (an idle GPU's: ``log1p(0.0)``)
            res = residents[g]
            if res:
                # each resident's estimated work left (``JobView.est_remaining_s``), summed
                # in order from 0
                total = 0.0
                for j in res:
                    st = jobs[j]
                    # (the estimate kept with the job's cells, ``_spec_cols``, where kept
                    # for its spec: a dictionary look-up, not a read of the spec's field)
                    hit = fixed.get(j) if fixed is not None else None
                    if hit is not None and hit[0] is st.spec:
                        x = hit[5] - st.work_done
                    else:
                        x = st.spec.est_work_s - st.work_done
                    total += x if x > 0.0 else 0.0
                bp[nb] = g
                self.leftv[nb] = total
                nb += 1
        if nb:
            # (numpy's log1p of the busy ones' side by side: ``out`` positional, no keyword;
            # on a small fleet over the whole kept arrays, no slices made: the values past
            # ``nb`` are a past build's, finite and unread)
            if self.n <= 64:
                np.log1p(self.left, self.ll)
            else:
                np.log1p(self.left[:nb], self.ll[:nb])
            for x0 in range(nb):
                self.lg[bp[x0]] = self.llv[x0]
        self.gpu._cells(self.cells, self.lg, n_types, n_nodes, max_res, self.gpus, m, True)
        _copy_gpu_cells(rv, ip, nt, self.cells, 1, i)

    @cython.locals(
        mv=cython.uchar[:, ::1], fp=cython.p_longlong, n=cython.Py_ssize_t,
        k=cython.Py_ssize_t, f=cython.longlong, g=cython.longlong, no=cython.longlong,
    )  # fmt: skip
    @cython.boundscheck(False)  # (every index is in range: the fleet's (GPU, option) cells)
    @cython.wraparound(False)
    def _marks_of(self, cells: np.ndarray, n_opts: int) -> np.ndarray:
        """The rising flat cells ``cells`` (``gpu * n_opts + option``, int64) as option-major
        uint8 rows (``Cluster.single_rows``' layout: what :func:`_gang_cells` reads), in the
        writer's kept array (overwritten by the next call; compiled only)."""
        if self.marks is None or self.marks.shape[0] != n_opts:
            self.marks = np.zeros((n_opts, self.n), dtype=np.uint8)
            self.marksv = self.marks
        mv = self.marksv
        memset(cython.address(mv[0, 0]), 0, n_opts * self.n)
        view = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(cells, cython.address(view), PyBUF_SIMPLE)
        fp = cython.cast(cython.p_longlong, view.buf)
        n = view.len // 8
        no = n_opts
        for k in range(n):
            f = fp[k]
            g = f // no
            mv[f - g * no, g] = 1
        PyBuffer_Release(cython.address(view))
        return self.marks

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


class CandidateBuilder:
    """Enumerates the candidates of a simulator's state (module doc) and their features;
    ``pruning="classes"`` keeps one target of each class of interchangeable ones.

    A state's candidates are gathered as blocks (a job and its (GPU, option) targets as flat
    indices ``gpu * n_options + option`` of its mask: no Decision is made until one is asked
    for); one typed pass (:func:`_write_rows`) then writes the moves' integers and their
    feature rows straight into the observation's zero-padded table. Within one build, jobs
    that share a placement mask share its targets and, pruned, their choice of targets
    (``_Memo``)."""

    def __init__(
        self,
        sim: Simulator,
        max_candidates: int,
        pruning: str = "none",
        suspend: bool = False,
        pair_features: bool = False,
        env_id: str = "GpuSharing-v2",
    ) -> None:
        self.sim = sim
        self.max_candidates = max_candidates
        #: The env id :class:`TooManyCandidates` names (the interface's).
        self.env_id = env_id
        self.pruning = pruning
        #: Whether suspensions are candidates (and rows have :data:`SUSPEND_FEATURE`).
        self.suspend = suspend
        #: Whether rows have :data:`PAIR_FEATURES` (their profiles memoised per episode).
        self.pair_features = pair_features
        self._profiles = PairProfiles()
        self.n_features = len(candidate_features(suspend, pair_features))
        opts = sim.options
        #: How many placement options the simulator has (fixed with its cluster, as
        #: ``opt_rows``): a build's flat indices' divisor, read without ``Simulator.options``'
        #: property call.
        self._n_opts = len(opts)
        self.opt_rows = np.zeros((len(opts), len(SharingMode) + 2), dtype=np.float64)
        for k, o in enumerate(opts):
            self.opt_rows[k, int(o.mode)] = 1.0
            self.opt_rows[k, len(SharingMode)] = o.sm_pct / 100.0
            self.opt_rows[k, len(SharingMode) + 1] = o.mig_slices / 7.0
        #: ``opt_rows`` clipped to [-1, 1] as float32: the option's cells of a row.
        self._opt32 = np.clip(self.opt_rows, -1.0, 1.0).astype(np.float32)
        #: The job rows' group statistics of the last build, per group, and when they hold:
        #: (the episode, events run, the time); the predictor's log changes only in events.
        self._groups: tuple[object, int, float, dict[str, _GroupCols]] | None = None
        #: Per group, the predictor's last answer and its columns (``_group_cols``), for the
        #: episode (the token of ``_groups``).
        self._known: dict[str, tuple[tuple[int, float, float, float], _GroupCols]] = {}
        #: Per job id, its spec and the row cells that depend on the spec alone
        #: (``_spec_cols``), for the episode (the token of ``_groups``).
        self._fixed: dict[int, tuple[Any, ...]] = {}
        #: Typed views of the arrays the GPUs' cells are read from, while they are the same
        #: (interpreted, and ``_gpu_rows``).
        self._gpu_views: _GpuViews | None = None
        #: What the compiled build writes rows from (:class:`_Writer`), while the same.
        self._writer: _Writer | None = None
        #: The cluster's fixed facts the compiled build reads (``_fleet_facts``), as last seen.
        self._fleet_facts: tuple[Any, ...] | None = None
        #: The cluster's nodes, their interconnects and whether the GPUs' nodes rise
        #: (``TargetClasses``), as last seen.
        self._nodes: tuple[tuple[NodeSpec, ...], np.ndarray, bool] | None = None
        #: The simulator's options and their modes (``TargetClasses.opt_mode``), as last seen.
        self._opt_mode: tuple[object, np.ndarray] | None = None
        #: Each model's profiled solo speed per GPU type, as rows in order of first sight,
        #: those over 4 clipped to [-1, 1] as float32 (the ``solo_speed`` cell), and the row of
        #: each model: (the simulator's speed memo, rows, cells, models), kept while that memo
        #: is the same (a solo speed is a pure function of the model and the GPU type).
        self._speeds: tuple[object, np.ndarray, np.ndarray, dict[str, int]] | None = None
        #: The residents' request signatures by ``id`` of their spec (``TargetClasses``,
        #: ``_resident_sig``), for the episode: (the episode, the signatures).
        self._specs: tuple[object, dict[int, list[Any]]] | None = None
        #: What ``TargetClasses`` keeps of the GPUs from one build to the next (pruned).
        self._runs = _Runs()

    @cython.locals(
        g=cython.Py_ssize_t, i=cython.Py_ssize_t, m=cython.Py_ssize_t, x=cython.double,
        total=cython.double, st=JobState, gv=cython.longlong[::1], some=cython.bint,
    )  # fmt: skip
    def _gpu_rows(self, gpus: np.ndarray | None = None) -> np.ndarray:
        """The GPUs' cells of a row (:data:`_GPU_COLS`, :func:`_gpu_table`), one float32 row
        per GPU; with ``gpus`` (rising, int64; compiled) those GPUs' rows only, the others'
        left unwritten."""
        sim = self.sim
        c = sim.cluster
        n = c.n_gpus
        left = np.zeros(n)
        jobs = sim.jobs
        residents = c.residents
        m = n
        some = False
        if cython.compiled and gpus is not None:  # (no view acquired where none is given)
            gv, some = gpus, True
            m = gv.shape[0]
        for i in range(m):
            g = gv[i] if some else i
            res = residents[g]
            if res:
                # each resident's estimated work left (``JobView.est_remaining_s``), summed in
                # order from 0
                total = 0.0
                for j in res:
                    st = jobs[j]
                    x = st.spec.est_work_s - st.work_done
                    total += x if x > 0.0 else 0.0
                left[g] = total
        n_types = max(1, len(c.type_names) - 1)
        n_nodes = max(1, c.n_nodes - 1)
        # (the arrays ``ClusterView`` reads, writable: a typed loop reads them through views
        # kept while they are the same arrays)
        arrays = (
            c.type_idx, c.node_of, c.n_res, c.mem_decl, c.mem_cap, c.frac_decl, c.sm_used,
            c.online_count, c.healthy, c.ready, sim.usage.g_util,
        )  # fmt: skip
        views = self._gpu_views
        if views is None or not views.same(arrays):
            views = self._gpu_views = _GpuViews(arrays)
        out = np.empty((n, len(_GPU_COLS)), dtype=np.float32)
        max_res = max(1, c.sharing.max_residents)
        views.write(out, np.log1p(left), n_types, n_nodes, max_res, gpus if some else None)
        return out

    @cython.locals(
        legality=Legality, st=JobState, n=cython.Py_ssize_t, total=cython.Py_ssize_t,
        max_c=cython.Py_ssize_t, hit=tuple, fixed=dict,
    )  # fmt: skip
    def build(
        self, keep: Iterable[Decision | None] = (), out: np.ndarray | None = None, used: int = 0
    ) -> Candidates:
        """The candidates of the simulator's state now (raises :class:`TooManyCandidates`);
        with pruning, every legal move of ``keep`` is a candidate too.

        ``out`` (``GpuSharing-v3``'s kept table: float32, C order, ``max_candidates`` x
        ``n_features``; zero from row ``used`` on, its first ``used`` rows a build's): the
        rows are written there (``Candidates.table`` is ``out``) instead of into a fresh
        zero-padded table, and ``out`` is the zero-padded table of these candidates after.
        Only the cells no row write overwrites are zeroed first (a row's ``suspend``
        cell; both kind cells are written; hold's row is the same every build), and the rows the last build
        used beyond this one's after; where the build raises, ``out`` is left as it was.
        Without ``out`` (v2), a fresh table a build, and the episode's end is
        :meth:`Candidates.hold_only`."""
        sim = self.sim
        if sim.done:
            if out is None:
                return Candidates.hold_only(self.n_features)
            none = np.full(1, -1, dtype=np.int64)
            out[1:used] = 0.0
            out[0, :N_FEATURES] = _HOLD_ROW
            return Candidates(none, none, none, out[:1], 0, out)
        classes = None
        if self.pruning == "classes":
            nodes = sim.cluster.nodes
            if self._nodes is None or self._nodes[0] is not nodes:
                self._nodes = (nodes, _pcie(nodes), _rising(sim.cluster.node_of))
            if self._opt_mode is None or self._opt_mode[0] is not sim.options:
                self._opt_mode = (sim.options, _opt_modes(sim.options))
            episode = episode_token(sim)
            if self._specs is None or self._specs[0] is not episode:
                self._specs = (episode, {})
            classes = TargetClasses(
                sim, self._nodes[1], self._specs[1], self._nodes[2], self._opt_mode[1], self._runs
            )
        # (pruned only: what the jobs of one build share, and the kept moves; unpruned, no
        # memo is made and ``keep`` is not read: every legal move is a candidate)
        memo = _Memo(classes) if classes is not None else None
        if memo is not None:
            for d in keep:
                if d is not None:
                    memo.kept.setdefault(d.job_id, []).append((d.gpu, d.option))
        n_opts = self._n_opts
        max_c = self.max_candidates
        blocks: list[tuple[int, np.ndarray]] = []
        total = 1
        # (a job's targets as flat indices of its mask, shared by the jobs of one mask
        # signature for the cluster's version: ``Legality.sig_targets``, no per-job mask; the
        # signature kept with the job's spec cells, per job id for the episode: ``_spec_cols``,
        # whose memo the groups' memo starts afresh at an episode's first build)
        legality = sim.legality
        jobs = sim.jobs
        groups = self._group_stats()
        fixed = self._fixed
        for jid in decidable_ids(sim):
            # (pruned, a single-GPU job's picks from the GPUs that stand for the fleet:
            # ``_Memo.rep_picks``; None: the targets' path)
            flat = self._rep_picks(memo, jid, -1) if memo is not None else None
            if flat is None:
                st = jobs[jid]
                spec = st.spec
                hit = _cells_of(fixed, jid, spec, legality)
                # (``Legality.targets``; the static parts kept with the job's cells)
                flat = legality.sig_targets(hit[_C_SIG], spec, hit[_C_JV])
                if not len(flat):  # (nothing fits: ``placeable`` is false)
                    continue
                if memo is not None:
                    flat = self._prune_flat(memo, jid, flat, -1, n_opts)
            total = _block_added(blocks, jid, flat, total, max_c)  # (``_add``: a C call)
            if total < 0:
                raise self._too_many()
        n_place = total - 1
        c = sim.cluster
        # a migration goes to an empty, ready GPU (``Simulator.migration_mask``): none, none
        # (the legality's memo of them for the cluster's version, which the masks read too)
        idx = legality.empty_ready()
        running = _running_ids(c) if len(idx) > 0 else []
        now = sim.now
        prev = -1
        for jid in running:
            if jid == prev:  # (a gang's id, once per GPU it holds: ``_running_ids``)
                continue
            prev = jid
            st = jobs[jid]
            # (a job still setting up cannot move: its migration mask is empty)
            if st.status is not _RUNNING or st.setup_until > now:
                continue
            # (the running jobs of one mask signature share its targets, found once:
            # ``Legality.migration_targets``, of the signature kept with the job's cells)
            if memo is None:
                spec = st.spec
                hit = _cells_of(fixed, jid, spec, legality)
                flat = legality.sig_migration_targets(hit[_C_SIG], spec, idx, hit[_C_JV])
            else:  # (pruned: the job's node apart)
                here = int(c.node_of[st.gpus[0]])
                flat = self._rep_picks(memo, jid, here)
                if flat is None:
                    flat = legality.migration_targets(jid)
                    if len(flat):
                        flat = self._prune_flat(memo, jid, flat, here, n_opts)
            total = _block_added(blocks, jid, flat, total, max_c)  # (``_add``: a C call)
            if total < 0:
                raise self._too_many()
        if not self.suspend:
            cands = self._assemble(blocks, n_place, total, out, used, groups, jobs, now)
        else:
            # suspensions: each row first built as a move to the job's own first GPU and option
            moved = total
            for jid in sim.suspendable():
                st = jobs[jid]
                flat = np.array([g * n_opts + st.option for g in st.gpus[:1]], dtype=np.int64)
                total = self._add(jid, flat, blocks, total)
            cands = self._assemble(blocks, n_place, total, out, used, groups, jobs, now)
            self._suspensions(cands, moved)
        if out is not None and used > total:
            _zero_rows(out, total, used)  # (the rows the last build used beyond these)
        if self.pair_features and len(cands) > 1:
            at = self.n_features - len(PAIR_FEATURES)
            cands.features[1:, at:] = pair_columns(
                sim, cands.job[1:], cands.gpu[1:], cands.option[1:], self._profiles
            )
        return cands

    def _suspensions(self, cands: Candidates, lo: int) -> None:
        """Makes the candidates of ``cands`` from ``lo`` on suspensions, in place (GPU and
        option :data:`SUSPEND`; their rows as the module doc says, the
        :data:`SUSPEND_FEATURE` column 1)."""
        k = len(cands)
        if lo < k:
            feats = cands.features
            cands.gpu[lo:] = SUSPEND
            cands.option[lo:] = SUSPEND
            feats[lo:, _MIGRATE] = 0.0
            feats[lo:, N_FEATURES] = 1.0
            node_of = self.sim.cluster.node_of
            jobs = self.sim.jobs
            for i in range(lo, k):
                nodes = node_of[jobs[int(cands.job[i])].gpus]
                feats[i, _ONE] = 1.0 if bool((nodes == nodes[0]).all()) else 0.0

    def _add(
        self,
        jid: int,
        flat: np.ndarray,
        blocks: list[tuple[int, np.ndarray]],
        total: int,
    ) -> int:
        """Adds a job's targets (flat indices of its mask) as a block; the candidates counted
        so far, with them."""
        n = len(flat)
        if not n:
            return total
        if total + n > self.max_candidates:
            raise self._too_many()
        blocks.append((jid, flat))
        return total + n

    def _too_many(self) -> TooManyCandidates:
        """The error of a build with more than ``max_candidates`` legal moves."""
        return TooManyCandidates(
            f"more than max_candidates={self.max_candidates} legal moves at "
            f"t={self.sim.now:.0f}s (scenario {self.sim.cfg.name}); pass a larger "
            f"max_candidates to gymnasium.make('{self.env_id}', ...)"
        )

    def _rep_picks(self, memo: _Memo, jid: int, here: int) -> np.ndarray | None:
        """A job's pruned targets from ``_Memo.rep_picks`` where that path answers for it
        (compiled, pruned, a single-GPU job with no kept move, no gpulets, the GPUs' nodes
        rising), else None. The same targets as ``_prune_flat`` of its targets
        (``tests/test_candidates_typed.py`` compares them at every step of pruned
        rollouts)."""
        classes = memo.classes
        if (
            classes is None
            or not classes.rising
            or memo.kept.get(jid)
            or not self.sim.legality.typed_job(jid)  # (compiled, a single-GPU job, no gpulets)
        ):
            return None
        return memo.rep_picks(self, jid, here)

    def _prune_flat(
        self, memo: _Memo, jid: int, flat: np.ndarray, here: int, n_opts: int
    ) -> np.ndarray:
        """The targets of ``flat`` (rising flat indices) that stand for their class
        (:meth:`_prune`), as flat indices. Compiled, a single-GPU job's with no kept move come
        from the flat indices themselves (``_Memo.flat_picks``: no (GPU, option) arrays)."""
        spec = self.sim.jobs[jid].spec
        classes = memo.classes
        assert classes is not None
        if (
            cython.compiled
            and classes.rising
            and spec.num_gpus == 1
            and len(flat) > 1
            and not memo.kept.get(jid)
        ):
            return memo.flat_picks(spec, flat, here)
        gs, os_ = memo.split(flat, n_opts)
        gs, os_ = self._prune(memo, jid, gs, os_, here)
        return gs * n_opts + os_

    def _prune(
        self, memo: _Memo, jid: int, gs: np.ndarray, os_: np.ndarray, here: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The targets ``(gs, os_)`` (GPU-major) that stand for their class: the first (lowest
        GPU) of each (target class, option), and those kept for the job."""
        if len(gs) < 2:
            return gs, os_
        spec = self.sim.jobs[jid].spec
        if spec.num_gpus > 1 and here >= 0:
            # A gang's move is judged as if it had left its GPUs (``Lifecycle.check_migration``)
            # and may take some of them back, which the classes below (read with the gang in
            # place) do not see: every destination stays.
            return gs, os_
        idx, chosen = memo.picks(self, spec, gs, os_, here)
        keep = memo.kept.get(jid)
        if not keep:
            return chosen
        pick = np.zeros(len(gs), dtype=bool)
        pick[idx] = True
        for g, o in keep:
            pick |= (gs == g) & (os_ == o)
        return gs[pick], os_[pick]

    def _first_of_class(
        self, classes: TargetClasses, spec: JobSpec, gs: np.ndarray, os_: np.ndarray, here: int
    ) -> np.ndarray:
        """Per target of ``(gs, os_)``: whether it is the first of its class."""
        if spec.num_gpus == 1:
            return classes.firsts(spec, gs, os_, here)
        key = self._gang_keys(classes, spec, gs, os_, here)
        first = np.unique(key, return_index=True)[1]
        pick = np.zeros(len(gs), dtype=bool)
        pick[first] = True
        return pick

    def _gang_keys(
        self, classes: TargetClasses, spec: JobSpec, gs: np.ndarray, os_: np.ndarray, here: int
    ) -> np.ndarray:
        """A gang's class per (first GPU, option) pair: the option, how many nodes the GPUs it
        takes span and their classes (as a multiset). It takes the first ``num_gpus`` GPUs
        from the first one that the cluster's single-GPU legality allows (``gang_gpus``)."""
        c = self.sim.cluster
        k = spec.num_gpus
        rows = np.zeros((len(gs), 2 + k), dtype=np.int64)
        every = np.arange(c.n_gpus)
        for o in np.unique(os_).tolist():
            at = np.flatnonzero(os_ == o)
            legal = np.flatnonzero(c.single_row(spec, o))
            first = np.searchsorted(legal, gs[at])
            taken = legal[np.minimum(first[:, None] + np.arange(k), len(legal) - 1)]
            of = classes.keys(spec, every, np.full_like(every, o), here)
            nodes = np.sort(classes.node_of[taken], axis=1)
            rows[at, 0] = o
            rows[at, 1] = 1 + (np.diff(nodes, axis=1) != 0).sum(axis=1)
            rows[at, 2:] = np.sort(of[taken], axis=1)
        return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)

    def _group_stats(self) -> dict[str, _GroupCols]:
        """The job rows' group columns per group, memoised while no event runs."""
        sim = self.sim
        last = self._groups
        episode = episode_token(sim)
        if (
            last is not None
            and last[0] is episode
            and last[1] == sim.n_events
            and last[2] == sim.now
        ):
            return last[3]
        if last is None or last[0] is not episode:
            self._known = {}
            self._fixed = {}
        memo: dict[str, _GroupCols] = {}
        self._groups = (episode, sim.n_events, sim.now, memo)
        return memo

    def _speed_rows(
        self, models: Iterable[str]
    ) -> tuple[object, np.ndarray, np.ndarray, dict[str, int]]:
        """The simulator's speed memo, each model's profiled solo speed per GPU type
        (``ClusterView.solo_speed``: the simulator's memoised ``solo_speed``, a pure function
        of the model and the type), those over 4 clipped to [-1, 1] as float32 (the
        ``solo_speed`` cell), and the row of each model, ``models`` included; kept while the
        simulator's memo is the same (its cluster's and its model's life: across episodes,
        where each episode's first sight of a model cost a row), grown as new models appear."""
        sim = self.sim
        memo = sim.memo
        last = self._speeds
        if last is None or last[0] is not memo:
            none = np.zeros((0, len(sim.cluster.types)))
            last = self._speeds = (memo, none, none.astype(np.float32), {})
        row = last[3]
        new = [m for m in dict.fromkeys(models) if m not in row]
        if new:
            names = [t.name for t in sim.cluster.types]  # (``ClusterView.type_name`` per type)
            for m in new:
                row[m] = len(row)
            add = np.array([[sim.solo_speed(m, tn) for tn in names] for m in new])
            speed = np.concatenate([last[1], add])
            cells = np.clip(speed / 4.0, -1.0, 1.0).astype(np.float32)
            last = self._speeds = (memo, speed, cells, row)
        return last

    @cython.locals(
        b=cython.Py_ssize_t, n=cython.Py_ssize_t, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t,
        st=JobState, now=cython.double, x=cython.double, jr=cython.double[:, ::1],
        ji=cython.longlong[:, ::1], w=_Writer, row_of=dict, fixed=dict, groups=dict,
        known=dict, hit=tuple, cols=tuple, fx=tuple,
    )  # fmt: skip
    def _assemble(
        self,
        blocks: list[tuple[int, np.ndarray]],
        n_place: int,
        total: int,
        out: np.ndarray | None = None,
        used: int = 0,
        groups: dict[str, _GroupCols] | None = None,
        jobs: dict[int, JobState] | None = None,
        at: float | None = None,
    ) -> Candidates:
        """The candidates of ``blocks`` (placements first, ``n_place`` of them), their rows
        written into a fresh zero-padded table, or into ``out``'s first rows, whose first
        ``used`` a build wrote (:meth:`build`) (``Candidates.table``). ``groups``, ``jobs``,
        ``at``: what :meth:`build` read already (``_group_stats()``, the simulator's jobs and
        time; None: read here)."""
        sim = self.sim
        if out is None:
            table = _ZEROS((self.max_candidates, self.n_features), _FLOAT32)
        else:
            table = out
            if used > 1 and self.suspend:
                # the cell of a row that its write leaves as it is: ``suspend`` (hold's row:
                # the same every build; every cell of rows 1 .. total - 1 of
                # :data:`CANDIDATE_FEATURES` is written, both kind cells included:
                # ``_write_rows``, ``_Writer.fill``)
                table[1:used, N_FEATURES] = 0.0
        ids = _ids_array(total)  # job, GPU, option of each candidate
        n = len(blocks)
        if not n:
            table[0, :N_FEATURES] = _HOLD_ROW
            ids[:, 0] = -1
            return Candidates(None, None, None, None, n_place, table, ids)
        if jobs is None:
            jobs = sim.jobs
        now = sim.now if at is None else at
        if groups is None:
            groups = self._group_stats()
        known = self._known
        # The job's columns (``_JOB_COLS``), as ``ClusterView.job`` gives the job to a heuristic
        # (``JobView``: its request, estimate, work left, wait), read from its state; and per
        # job its id, its own GPU (job_on_target; -1: none) and its model's speed row
        c = sim.cluster
        if cython.compiled:  # (the writer's kept job rows: no arrays made, no views acquired)
            # (the fleet's facts, fixed with the cluster: ``_fleet_facts``, not a property
            # call each)
            fx = self._fleet_facts
            if fx is None or fx[0] is not c:
                fx = self._fleet_facts = _fleet_facts(c)
            # (the writer's arrays are the same while the cluster's typed state views are the
            # same object, a new one wherever its state arrays are replaced (a reset replaces
            # them together: ``_views_of``, which the cluster's own typed passes read by),
            # and the usage's utilisation the same array: two identity tests, where the
            # eleven arrays' reads and ``_Writer.same`` cost ~3 k instructions a build)
            sv = _views_of(c)
            util = sim.usage.g_util
            w = self._writer
            if w is None or w.sv is not sv or w.util is not util:
                arrays = (
                    fx[1], fx[2], c.n_res, c.mem_decl, fx[3], c.frac_decl, c.sm_used,
                    c.online_count, c.healthy, c.ready, util,
                )  # fmt: skip
                if w is None or not w.same(arrays, self._opt32):
                    w = self._writer = _Writer(_GpuViews(arrays), self._opt32)
                w.sv = sv
                w.util = util
            w.room(n)
            jr, ji = w.jr, w.jri
        else:
            job_rows = np.empty((n, len(_JOB_COLS)))
            job_ints = np.empty((n, 3), dtype=np.int64)
            jr, ji = job_rows, job_ints
        speeds = self._speeds
        # (kept while the simulator's speed memo is the same: ``_speed_rows``)
        if speeds is None or speeds[0] is not sim.memo:
            speeds = self._speed_rows(())
        row_of = speeds[3]  # (each model's speed row, as far as known: -1 below if not yet)
        unseen = False
        specs: list[JobSpec] = []
        owners: list[tuple[int, list[int]]] = []
        gangs: list[int] = []
        fixed = self._fixed
        for b in range(n):
            jid = blocks[b][0]
            st = jobs[jid]
            spec = st.spec
            specs.append(spec)
            # the columns that depend on the job's spec alone (frozen), computed at its first
            # build of the episode (``_spec_cols``)
            hit = fixed.get(jid)
            if hit is None or hit[0] is not spec:
                hit = fixed[jid] = _spec_cols(spec, sim.legality)
            _, c1, c2, c3, c4, x, c5, c9, group, model, gang, _, _ = hit
            ji[b, 0] = jid
            ji[b, 1] = -1
            ji[b, 2] = row_of.get(model, -1)
            if ji[b, 2] < 0:
                unseen = True
            jr[b, 0] = 1.0 if st.online else 0.0
            jr[b, 1] = c1
            jr[b, 2] = c2
            jr[b, 3] = c3
            jr[b, 4] = c4
            jr[b, 5] = c5
            jr[b, 6] = _log_s(max(0.0, x - st.work_done))
            jr[b, 7] = _log_s(now - st.ledger.enqueue_t if st.status is _QUEUED else 0.0)
            jr[b, 8] = min(st.ledger.attempts, 10) / 10.0
            jr[b, 9] = c9
            cols = groups.get(group)  # (``_group_cols``' own first look, without a call)
            if cols is None:
                cols = _group_cols(sim, spec, groups, known, now)
            jr[b, 10], jr[b, 11], jr[b, 12], jr[b, 13] = cols
            mine = st.gpus
            if len(mine) == 1:
                ji[b, 1] = mine[0]
            elif mine:
                owners.append((b, mine))
            if gang:
                gangs.append(b)
        # the job's profiled solo speed per GPU type (rows for the models not seen yet)
        if unseen:
            speeds = self._speed_rows([s.model for s in specs])
            row_of = speeds[3]
            for b in range(n):
                ji[b, 2] = row_of[specs[b].model]
        if not cython.compiled:
            return self._rows_interpreted(
                table, ids, blocks, n_place, total, job_rows, job_ints, speeds[2], owners, gangs,
                specs,
            )  # fmt: skip
        # (one typed pass over the blocks; the targets' GPUs' cells only)
        assert w is not None and fx is not None
        w.fill(
            table, ids, blocks, n_place, self._n_opts, speeds[2], jobs, c.residents,
            fx[4], fx[5], fx[6], owners,
            self._gang_rows(gangs, specs, blocks, sim.legality, c), fixed,
        )  # fmt: skip
        # (the integers as one array, ``ids``: their rows and the table's slice made on first
        # read, where none is read in an env step)
        return Candidates(None, None, None, None, n_place, table, ids)

    def _gang_rows(
        self,
        gangs: list[int],
        specs: list[JobSpec],
        blocks: list[tuple[int, np.ndarray]],
        legality: Legality,
        c: Any,
    ) -> list[tuple[int, np.ndarray, int, bool]]:
        """Per gang block: (block, its job's single-GPU legality, its GPUs, whether that is
        flat cells): compiled without gpulets the rising flat indices of its legal single-GPU
        cells (``Legality.single_cells``: one typed pass, its static parts kept per what its
        memory decides), else ``Cluster.single_rows`` (option-major booleans, memoised for the
        cluster's version; their static parts kept per memory value). What
        ``_Writer.fill``'s ``gang_one_node`` reads."""
        out = []
        fixed = self._fixed  # (each block's job's cells: ``_assemble`` has just kept them)
        for b in gangs:
            spec = specs[b]
            hit = fixed[blocks[b][0]]
            sig = hit[_C_SIG]
            cells = legality.single_cells(sig, spec, hit[_C_JV])
            if cells is None:
                out.append((b, c.single_rows(spec), sig[3], False))
            else:
                out.append((b, cells, sig[3], True))
        return out

    def _rows_interpreted(
        self,
        table: np.ndarray,
        ids: np.ndarray,
        blocks: list[tuple[int, np.ndarray]],
        n_place: int,
        total: int,
        job_rows: np.ndarray,
        job_ints: np.ndarray,
        speed: np.ndarray,
        owners: list[tuple[int, list[int]]],
        gangs: list[int],
        specs: list[JobSpec],
    ) -> Candidates:
        """``_assemble``'s rows interpreted: numpy passes (:func:`_write_rows`), every GPU's
        cells, then what only some blocks have (``_Writer.fill`` is the compiled pass)."""
        sim = self.sim
        c = sim.cluster
        flats = [blk[1] for blk in blocks]
        _write_rows(
            table, ids, n_place, flats, len(sim.options), job_rows, job_ints,
            self._gpu_rows(), self._opt32, speed, c.type_idx,
        )  # fmt: skip
        cands = Candidates(ids[0], ids[1], ids[2], table[:total], n_place, table)
        if not owners and not gangs:
            return cands
        # what only some blocks have: a job on several GPUs, a gang's nodes (rows after hold's)
        rows, gs, os_ = table[1:total], ids[1, 1:], ids[2, 1:]
        starts = [0]
        for f in flats:
            starts.append(starts[-1] + len(f))
        on = _COL["job_on_target"]
        for b, mine in owners:
            lo, hi = starts[b], starts[b + 1]
            rows[lo:hi, on] = [float(g in mine) for g in gs[lo:hi].tolist()]
        for b in gangs:
            spec = specs[b]
            lo, hi = starts[b], starts[b + 1]
            legal = c.single_rows(spec)  # (every option's row, as the compiled pass reads)
            _gang_one_node(rows[lo:hi], gs[lo:hi], os_[lo:hi], legal, c.node_of, spec.num_gpus)
        return cands


#: Columns of a candidate row (:data:`CANDIDATE_FEATURES`) that :func:`_write_rows` writes.
_HOLD, _PLACE, _MIGRATE = _COL["hold"], _COL["place"], _COL["migrate"]
_JOB0, _ON, _GPU0 = _COL["online"], _COL["job_on_target"], _COL["type"]
_ONE, _OPT0, _SOLO = (
    _COL["gang_one_node"],
    _COL["mode_" + SharingMode(0).name.lower()],
    _COL["solo_speed"],
)
#: The same columns as C constants of the compiled passes (no module look-up in a loop).
_C_HOLD = cython.declare(cython.Py_ssize_t, _HOLD)
_C_PLACE = cython.declare(cython.Py_ssize_t, _PLACE)
_C_MIGRATE = cython.declare(cython.Py_ssize_t, _MIGRATE)
_C_JOB0 = cython.declare(cython.Py_ssize_t, _JOB0)
_C_ON = cython.declare(cython.Py_ssize_t, _ON)
_C_GPU0 = cython.declare(cython.Py_ssize_t, _GPU0)
_C_ONE = cython.declare(cython.Py_ssize_t, _ONE)
_C_OPT0 = cython.declare(cython.Py_ssize_t, _OPT0)
_C_SOLO = cython.declare(cython.Py_ssize_t, _SOLO)


#: The target GPU's columns of a candidate row (:func:`_gpu_table`), from ``type`` on.
_GPU_COLS = CANDIDATE_FEATURES[_COL["type"] : _COL["gang_one_node"]]

#: The widths of a row's runs of cells (job, target GPU, option) as literals the C compiler
#: sees (``_block_rows``, ``_copy_gpu_cells``: a run of a known size is copied by a few moves,
#: not a ``memcpy`` call); checked against the columns here, and the passes fall back to the
#: general copy where a width differs. ``_ROW_CAP``: room for a block's job cells.
#: (The passes write the same numbers as literals: a module global is a C variable to the C
#: compiler, not a constant.)
_NJ, _NG, _NOP, _ROW_CAP = 14, 11, 6, 16
assert (len(_JOB_COLS), len(_GPU_COLS), len(SharingMode) + 2) == (_NJ, _NG, _NOP), "row widths"
#: Whether a row's columns lie as ``_block_rows``' literals say (hold, place, migrate, the job's
#: 14, ``job_on_target`` at 0 .. 17; ``gang_one_node``, the option's 6, ``solo_speed`` at
#: 29 .. 36): its head of cells (0 .. 17) copied in one run; else each cell by its column.
_RUNS = (_HOLD, _PLACE, _MIGRATE, _JOB0, _ON, _ONE, _OPT0, _SOLO) == (0, 1, 2, 3, 17, 29, 30, 36)
_C_RUNS = cython.declare(cython.bint, _RUNS)


def _fleet_facts(c: Any) -> tuple[Any, ...]:
    """What the compiled build reads of cluster ``c`` that is fixed with it (its fleet's and its
    option layout's: ``Fleet``, ``OptionLayout``, read once, where each was a property call a
    build): ``c``, its GPUs' types, nodes and memory capacities (the fleet's arrays), and the
    scales of the type, node and residents cells (``_gpu_table``'s ``n_types``, ``n_nodes``,
    ``max_res``)."""
    f = c.fleet
    return (
        c, f.type_idx, f.node_of, f.mem_cap, max(1, len(f.type_names) - 1),
        max(1, f.n_nodes - 1), max(1, c.layout.sharing.max_residents),
    )  # fmt: skip


def _no_views() -> None:
    """What a pickled or deep-copied :class:`_GpuViews` becomes: None (a copy's builder makes
    views of its own simulator's arrays)."""
    return None


def _gpu_table(
    out: np.ndarray,
    log_left: np.ndarray,
    type_idx: np.ndarray,
    node_of: np.ndarray,
    n_res: np.ndarray,
    mem_decl: np.ndarray,
    mem_cap: np.ndarray,
    frac: np.ndarray,
    sm_used: np.ndarray,
    online: np.ndarray,
    healthy: np.ndarray,
    ready: np.ndarray,
    util: np.ndarray,
    n_types: int,
    n_nodes: int,
    max_res: int,
) -> None:
    """Writes the GPUs' columns (:data:`_GPU_COLS`), each clipped to [-1, 1], into the
    float32 table ``out`` (GPU x column, C order): type and node index over ``n_types`` and
    ``n_nodes``, residents over ``max_res``, ``log_left`` (log1p of the residents' estimated
    work left: numpy's, over the whole array) over log1p(1e6), free memory share (capacity at
    least 1e-9, as ``np.maximum``), request share, SM share, online residents over
    ``max_res``, healthy, ready, utilisation (``healthy`` and ``ready`` as uint8 or bool).

    Interpreted: a numpy pass per column into a float64 table, clipped and cast in one pass;
    compiled: one typed loop over the GPUs (:class:`_GpuViews`, which the builder keeps), the
    same IEEE operations on each (an integer converted to a double first, as numpy's mixed
    operations do), each cell clipped as ``np.clip`` does (:func:`_clip1`) and cast to float
    as numpy does (``tests/test_candidates_typed.py`` compares the two)."""
    arrays = (type_idx, node_of, n_res, mem_decl, mem_cap, frac, sm_used, online, healthy)
    _GpuViews((*arrays, ready, util)).write(out, log_left, n_types, n_nodes, max_res)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)  # (raises nothing)
@cython.locals(x=cython.double)
@cython.returns(cython.double)
def _clip1(x: float) -> float:
    """``np.clip(x, -1.0, 1.0)`` on one double: NaN kept (with its sign and payload), -0.0
    kept (numpy's ``max(x, lo)`` then ``min(., hi)``, each keeping a NaN first operand)."""
    if x != x:
        return x
    if not x > -1.0:
        x = -1.0
    if not x < 1.0:
        x = 1.0
    return x


@cython.locals(
    fv=cython.longlong[::1], mv=cython.uchar[::1], b=cython.Py_ssize_t, k=cython.Py_ssize_t,
    no=cython.longlong,
)  # fmt: skip
@cython.boundscheck(False)  # (every index is in range: the targets' GPUs are the fleet's)
@cython.wraparound(False)
def _target_gpus(flats: list[np.ndarray], n_opts: int, n_gpus: int) -> np.ndarray:
    """The GPUs of the flat targets ``flats`` (``gpu * n_opts + option``), rising, each once
    (int64): the GPUs whose cells a build's rows read (:func:`_write_rows`)."""
    mark = np.zeros(n_gpus, dtype=np.uint8)
    mv = mark
    no = n_opts
    for b in range(len(flats)):
        fv = flats[b]
        for k in range(fv.shape[0]):
            mv[fv[k] // no] = 1
    return np.flatnonzero(mark)


@cython.cfunc
@cython.locals(
    lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, row=cython.Py_ssize_t, r=cython.Py_ssize_t
)
@cython.returns(cython.int)
@cython.exceptval(-1)
def _zero_rows(out: np.ndarray, lo: int, hi: int) -> int:
    """``out[lo:hi] = 0.0`` of a 2-D table in C order (``GpuSharing-v3``'s kept table: the
    rows the last build used beyond this one's). Compiled, one ``memset`` of those rows'
    memory, read through Python's buffer protocol (its shape: ``PyBUF_ND``, which a table
    not in C order refuses), where the slice and its scalar assignment cost ~6 k
    instructions; a float's 0.0 is all zero bits."""
    if not cython.compiled:
        out[lo:hi] = 0.0
        return 0
    view = cython.declare(cython.Py_buffer)
    PyObject_GetBuffer(out, cython.address(view), PyBUF_ND)
    if view.ndim != 2 or hi > view.shape[0] or lo < 0 or lo > hi:
        PyBuffer_Release(cython.address(view))
        raise ValueError("candidate table: rows out of range")
    row = view.shape[1] * view.itemsize
    # (a row at a time: a few vector stores each, where one call over every row takes the
    # C library's string-store path, which callgrind counts a byte at a time)
    for r in range(lo, hi):
        memset(cython.cast(cython.p_uchar, view.buf) + r * row, 0, row)
    PyBuffer_Release(cython.address(view))
    return 0


@cython.cfunc
@cython.locals(rv=cython.float[:, ::1], ip=cython.p_longlong, nt=cython.Py_ssize_t)
@cython.returns(cython.int)
@cython.exceptval(check=False)  # (raises nothing)
def _hold_cells(rv: Any, ip: Any, nt: int) -> int:
    """Hold's integers (-1) and its row's one cell (compiled only); the integers' rows (job,
    GPU, option) at ``ip``, ``ip + nt`` and ``ip + 2 * nt``."""
    ip[0] = ip[nt] = ip[2 * nt] = -1
    rv[0, _C_HOLD] = 1.0
    return 0


@cython.cfunc
@cython.returns(cython.bint)
@cython.exceptval(check=False)  # (raises nothing)
def _ids_ok(ids: Any) -> bool:
    """Whether ``ids`` is a build's integers as ``_ids_array`` makes them, a ``(3, n)``
    C-order int64 numpy array: ``_Writer.fill`` then reads its memory through numpy's C API
    (its rows ``n`` elements apart), where a typed view acquired a build cost ~2 k
    instructions (compiled only)."""
    return (
        isinstance(ids, ndarray)
        and PyArray_NDIM(cython.cast(ndarray, ids)) == 2
        and PyArray_TYPE(cython.cast(ndarray, ids)) == NPY_INT64
        and PyArray_IS_C_CONTIGUOUS(cython.cast(ndarray, ids))
        and PyArray_DIM(cython.cast(ndarray, ids), 0) == 3
    )


@cython.cfunc
@cython.locals(
    rv=cython.float[:, ::1], ip=cython.p_longlong, nt=cython.Py_ssize_t, i=cython.Py_ssize_t,
    n_opts=cython.longlong, n_place=cython.Py_ssize_t, jv=cython.double[:, ::1],
    jiv=cython.longlong[:, ::1], b=cython.Py_ssize_t, ov=cython.float[:, ::1],
    sv=cython.float[:, ::1], tv=cython.longlong[::1], mark=cython.uchar[::1],
    fp=cython.p_longlong, n=cython.Py_ssize_t, k=cython.Py_ssize_t, c=cython.Py_ssize_t,
    f=cython.longlong, g=cython.longlong, o=cython.longlong, jid=cython.longlong,
    own=cython.longlong, m=cython.longlong, nj=cython.Py_ssize_t, nop=cython.Py_ssize_t,
    marks=cython.bint, rp=cython.p_float, i0=cython.p_longlong, i1=cython.p_longlong,
    i2=cython.p_longlong, fixed=cython.bint, place=cython.float, held=cython.bint,
    cp=cython.Py_ssize_t, cm=cython.Py_ssize_t, cj=cython.Py_ssize_t, co=cython.Py_ssize_t,
    con=cython.Py_ssize_t, cone=cython.Py_ssize_t, cs=cython.Py_ssize_t, r0=cython.p_float,
    rw=cython.Py_ssize_t, op=cython.p_float, sp=cython.p_float, tp=cython.p_longlong,
    head=cython.bint, straddle=cython.bint, gl=cython.p_longlong, pm=cython.p_longlong,
    last=cython.longlong,
)  # fmt: skip
@cython.returns(cython.Py_ssize_t)
@cython.exceptval(-1)
@cython.boundscheck(False)  # (every index is in range: the caller's blocks, GPUs and options)
@cython.wraparound(False)
@cython.cdivision(True)  # (``f // n_opts`` of a target f >= 0, n_opts > 0: C's division is floor's)
def _block_rows(
    rv: Any,
    ip: Any,
    nt: int,
    i: int,
    flat: np.ndarray,
    n_opts: int,
    n_place: int,
    jv: Any,
    jiv: Any,
    b: int,
    ov: Any,
    sv: Any,
    tv: Any,
    mark: Any,
    gl: Any,
    pm: Any,
) -> int:
    """:func:`_write_rows`' typed pass over block ``b`` (compiled only): its candidates from
    row ``i`` on, all their cells but the target GPU's (:func:`_copy_gpu_cells` copies those),
    the targets read from the memory of ``flat`` (a C-order int64 numpy array through numpy's
    C API, anything else contiguous int64 through Python's buffer protocol; not a typed view,
    whose acquisition costs ~4x more); the next row. With ``mark`` (not None), each target's
    GPU not marked there yet is marked (1) and listed at ``gl[pm[0]]``, ``pm[0]`` counting
    them (the block's rows lie GPU by GPU: one comparison a row). A row is written through its own pointer (no 2-D index a
    cell), the block's job cells clipped once into a C array; where the block's widths are
    :data:`_NJ`, :data:`_NOP` and the columns lie as :data:`_RUNS` says, a row's first 18
    cells (hold 0, the kind, the job's, ``job_on_target`` 0) are built once a block and copied
    into each row with sizes known to the C compiler (a few moves, not a ``memcpy`` call),
    else each run by its column."""
    view = cython.declare(cython.Py_buffer)
    # (a C-order int64 numpy array, as the legality's passes answer: its memory read in
    # place, numpy's C API, no buffer request (~270 instructions a block); else the buffer)
    held = not (
        isinstance(flat, ndarray)
        and PyArray_NDIM(cython.cast(ndarray, flat)) == 1
        and PyArray_TYPE(cython.cast(ndarray, flat)) == NPY_INT64
        and PyArray_IS_C_CONTIGUOUS(cython.cast(ndarray, flat))
    )
    if held:
        PyObject_GetBuffer(flat, cython.address(view), PyBUF_SIMPLE)
        if view.itemsize != 8:
            PyBuffer_Release(cython.address(view))
            raise TypeError("candidate targets: int64 flat indices expected")
        fp = cython.cast(cython.p_longlong, view.buf)
        n = view.len // 8
    else:
        fp = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, flat)))
        n = PyArray_DIM(cython.cast(ndarray, flat), 0)
    marks = mark is not None
    last = -1
    nj, nop = jv.shape[1], ov.shape[1]
    if nj > 16:  # (never: ``_JOB_COLS`` has ``_NJ`` columns; 16: ``_ROW_CAP``)
        if held:
            PyBuffer_Release(cython.address(view))
        raise ValueError("candidate rows: more job columns than _ROW_CAP")
    fixed = nj == 14 and nop == 6  # (``_NJ``, ``_NOP``)
    jc = cython.declare(cython.float[16])  # (the block's job cells; 16: ``_ROW_CAP``)
    jid, own, m = jiv[b, 0], jiv[b, 1], jiv[b, 2]
    for c in range(nj):
        jc[c] = _clip1(jv[b, c])
    i0 = ip  # (the integers' three rows, ``nt`` apart)
    i1 = ip + nt
    i2 = ip + 2 * nt
    # (the cells' columns, the rows' width and the tables' first cells as C locals: a store
    # through a row's pointer may alias a module's C variable, which is then read again)
    cp, cm, cj, co, con, cone, cs = _C_PLACE, _C_MIGRATE, _C_JOB0, _C_OPT0, _C_ON, _C_ONE, _C_SOLO
    r0 = cython.address(rv[0, 0])
    rw = rv.shape[1]
    op = cython.address(ov[0, 0])  # (read only where the options have cells: ``nop``)
    sp = cython.address(sv[m, 0])  # (the job's model's speed row; ``m`` >= 0 here)
    tp = cython.address(tv[0])
    # (the fixed widths and the columns' usual layout: a row's first cells, hold to
    # ``job_on_target``, from one head the block shares, copied in one run: ``_C_RUNS``)
    head = fixed and _C_RUNS
    straddle = False
    if head and n:
        hd = cython.declare(cython.float[18])  # (``_ON`` + 1 cells)
        place = 1.0 if i <= n_place else 0.0
        # (a block's rows are all placements or all migrations; else each row's kind below)
        straddle = (i <= n_place) != (i + n - 1 <= n_place)
        hd[0] = 0.0  # (``hold``: 0 in every row but hold's, a kept table's too)
        hd[1] = place
        hd[2] = 1.0 - place
        memcpy(cython.address(hd[3]), cython.address(jc[0]), 14 * cython.sizeof(cython.float))
        hd[17] = 0.0
    for k in range(n):
        f = fp[k]
        g = f // n_opts
        o = f - g * n_opts
        i0[i] = jid
        i1[i] = g
        i2[i] = o
        rp = r0 + i * rw
        if head:
            memcpy(rp, cython.address(hd[0]), 18 * cython.sizeof(cython.float))
            if straddle:
                place = 1.0 if i <= n_place else 0.0
                rp[1] = place
                rp[2] = 1.0 - place
            if g == own:
                rp[17] = 1.0
            rp[29] = 1.0
            memcpy(rp + 30, op + o * 6, 6 * cython.sizeof(cython.float))
            rp[36] = sp[tp[g]]
        else:
            # (both kind cells: a kept table's row may hold the other kind from a past build)
            place = 1.0 if i <= n_place else 0.0
            rp[cp] = place
            rp[cm] = 1.0 - place
            memcpy(rp + cj, cython.address(jc[0]), nj * cython.sizeof(cython.float))
            if nop:
                memcpy(rp + co, op + o * nop, nop * cython.sizeof(cython.float))
            rp[con] = 1.0 if g == own else 0.0
            rp[cone] = 1.0
            rp[cs] = sp[tp[g]]
        if marks and g != last:
            last = g
            if not mark[g]:
                mark[g] = 1
                gl[pm[0]] = g
                pm[0] += 1
        i += 1
    if held:
        PyBuffer_Release(cython.address(view))
    return i


@cython.cfunc
@cython.locals(
    rv=cython.float[:, ::1], ip=cython.p_longlong, nt=cython.Py_ssize_t, lo=cython.Py_ssize_t,
    hi=cython.Py_ssize_t, node_v=cython.longlong[::1], k=cython.Py_ssize_t,
    lp=cython.p_uchar, i=cython.Py_ssize_t, x=cython.Py_ssize_t, n_gpus=cython.Py_ssize_t,
    found=cython.Py_ssize_t, first=cython.longlong, same=cython.bint, o=cython.Py_ssize_t,
)  # fmt: skip
@cython.returns(cython.int)
@cython.exceptval(-1)
@cython.boundscheck(False)  # (every index is in range: the fleet's GPUs and the options)
@cython.wraparound(False)
def _gang_cells(
    rv: Any, ip: Any, nt: int, lo: int, hi: int, legal: np.ndarray, node_v: Any, k: int
) -> int:
    """:func:`_gang_one_node` of the candidates in rows ``lo`` .. ``hi`` - 1 (compiled only),
    their first GPU and option read from the integers at ``ip`` (rows ``nt`` apart), ``legal`` (bool, option-major, C order:
    ``Cluster.single_rows``) read from its memory (Python's buffer protocol)."""
    view = cython.declare(cython.Py_buffer)
    PyObject_GetBuffer(legal, cython.address(view), PyBUF_SIMPLE)
    lp = cython.cast(cython.p_uchar, view.buf)
    n_gpus = node_v.shape[0]
    for i in range(lo, hi):
        o = ip[2 * nt + i]
        found = 0
        first = -1
        same = True
        x = ip[nt + i]
        while x < n_gpus and found < k:
            if lp[o * n_gpus + x]:
                if found == 0:
                    first = node_v[x]
                elif node_v[x] != first:
                    same = False
                found += 1
            x += 1
        rv[i, _C_ONE] = 1.0 if same and found > 0 else 0.0
    PyBuffer_Release(cython.address(view))
    return 0


@cython.cfunc
@cython.locals(
    rv=cython.float[:, ::1], ip=cython.p_longlong, nt=cython.Py_ssize_t,
    gv=cython.float[:, ::1], lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, i=cython.Py_ssize_t,
    ng=cython.Py_ssize_t, i1=cython.p_longlong,
)  # fmt: skip
@cython.returns(cython.int)
@cython.exceptval(check=False)  # (raises nothing)
@cython.boundscheck(False)  # (every index is in range: the candidates' GPUs are the fleet's)
@cython.wraparound(False)
def _copy_gpu_cells(rv: Any, ip: Any, nt: int, gv: Any, lo: int, hi: int) -> int:
    """The target GPU's cells (its row of ``gv``) into the rows ``lo`` .. ``hi`` - 1 of
    ``rv`` (compiled only), that GPU read from the candidates' integers at ``ip`` (rows
    ``nt`` apart; the run's size known to the C compiler where it is :data:`_NG`: a few
    moves, not a ``memcpy`` call)."""
    ng = gv.shape[1]
    i1 = ip + nt
    if ng == 11:  # (``_NG``)
        for i in range(lo, hi):
            memcpy(
                cython.address(rv[i, _C_GPU0]),
                cython.address(gv[i1[i], 0]),
                11 * cython.sizeof(cython.float),
            )
    elif ng:
        for i in range(lo, hi):
            memcpy(
                cython.address(rv[i, _C_GPU0]),
                cython.address(gv[i1[i], 0]),
                ng * cython.sizeof(cython.float),
            )
    return 0


@cython.locals(
    rv=cython.float[:, ::1], iv=cython.longlong[:, ::1], jv=cython.double[:, ::1],
    jiv=cython.longlong[:, ::1], gv=cython.float[:, ::1], ov=cython.float[:, ::1],
    sv=cython.float[:, ::1], tv=cython.longlong[::1], i=cython.Py_ssize_t,
    b=cython.Py_ssize_t, nj=cython.Py_ssize_t, ng=cython.Py_ssize_t, nop=cython.Py_ssize_t,
    ip=cython.p_longlong, nt=cython.Py_ssize_t,
)  # fmt: skip
def _write_rows(
    out: np.ndarray,
    ids: np.ndarray,
    n_place: int,
    flats: list[np.ndarray],
    n_opts: int,
    job_rows: np.ndarray,
    job_ints: np.ndarray,
    gpu_rows: np.ndarray,
    opt_rows: np.ndarray,
    speed: np.ndarray,
    type_idx: np.ndarray,
) -> None:
    """Writes hold and the candidates of the blocks into ``ids`` (int64, 3 x candidates: job,
    GPU, option; -1 at hold) and their rows into the zeroed float32 table ``out`` (C order;
    rows from 0, columns :data:`CANDIDATE_FEATURES`; any further column and row left as
    they are). Block ``b``'s candidates are ``flats[b]`` (flat indices ``gpu * n_opts +
    option``), its job ``job_ints[b, 0]``, its own GPU ``job_ints[b, 1]`` (-1: none; a job on
    several GPUs is the caller's) and its model's row of ``speed`` ``job_ints[b, 2]``. A row:
    the kind (placements first, ``n_place`` of them; both kind cells written: ``out`` may be
    a kept table), the block's job row clipped to [-1, 1] (``job_rows[b]``, float64), whether the target is the job's own GPU, the target GPU's
    cells (``gpu_rows``), ``gang_one_node`` 1 (a gang's is the caller's), the option's cells
    (``opt_rows``) and the solo speed cell ``speed[model, type_idx[gpu]]`` (those three
    float32 and clipped already).

    Interpreted: numpy passes over all candidates; compiled: one typed pass over the blocks'
    targets (``tests/test_candidates_typed.py`` compares the two on random inputs, NaN and
    -0.0 included)."""
    nj, ng, nop = job_rows.shape[1], gpu_rows.shape[1], opt_rows.shape[1]
    if not (
        _JOB0 + nj == _ON
        and _ON + 1 == _GPU0
        and _GPU0 + ng == _ONE
        and _ONE + 1 == _OPT0
        and _OPT0 + nop == _SOLO
        and out.shape[1] > _SOLO
    ):
        raise ValueError("candidate rows: the column blocks do not tile the row")
    if cython.compiled:
        rv, iv, jv, jiv, gv = out, ids, job_rows, job_ints, gpu_rows
        ov, sv, tv = opt_rows, speed, type_idx
        ip = cython.address(iv[0, 0])
        nt = iv.strides[0] // 8  # (the rows' distance in elements: C order within a row)
        _hold_cells(rv, ip, nt)
        i = 1
        for b in range(len(flats)):
            i = _block_rows(
                rv, ip, nt, i, flats[b], n_opts, n_place, jv, jiv, b, ov, sv, tv, None,
                cython.cast(cython.p_longlong, 0), cython.cast(cython.p_longlong, 0),
            )  # fmt: skip
        _copy_gpu_cells(rv, ip, nt, gv, 1, i)
    else:
        flat = np.concatenate(flats) if flats else np.zeros(0, dtype=np.int64)
        at = np.repeat(np.arange(len(flats)), [len(f) for f in flats])
        gs, os_ = np.divmod(flat, n_opts)
        n = len(flat)
        ids[:, 0] = -1
        ids[0, 1 : n + 1] = job_ints[at, 0]
        ids[1, 1 : n + 1] = gs
        ids[2, 1 : n + 1] = os_
        out[0, _HOLD] = 1.0
        rows = out[1 : n + 1]
        rows[:n_place, _PLACE] = 1.0
        rows[:n_place, _MIGRATE] = 0.0
        rows[n_place:, _PLACE] = 0.0
        rows[n_place:, _MIGRATE] = 1.0
        rows[:, _JOB0:_ON] = np.clip(job_rows, -1.0, 1.0)[at]
        rows[:, _ON] = gs == job_ints[at, 1]
        rows[:, _GPU0:_ONE] = gpu_rows[gs]
        rows[:, _ONE] = 1.0
        rows[:, _OPT0:_SOLO] = opt_rows[os_]
        rows[:, _SOLO] = speed[job_ints[at, 2], type_idx[gs]]


def _gang_one_node(
    out: np.ndarray,
    gs: np.ndarray,
    os_: np.ndarray,
    legal: np.ndarray,
    node_of: np.ndarray,
    k: int,
) -> None:
    """Writes the ``gang_one_node`` column of a gang's candidates at ``(gs, os_)`` into their
    float32 rows ``out``: 1 if the GPUs it takes lie on one node. It takes the first ``k``
    GPUs from its first one that its single-GPU legality under the option (``legal[option]``:
    ``Cluster.single_row``) allows, as ``Cluster.gang_gpus`` does (``ClusterView.gang_gpus``).
    The interpreted build's (the compiled one's: :func:`_gang_cells`)."""
    for i, (x, o) in enumerate(zip(gs.tolist(), os_.tolist(), strict=True)):
        taken = x + np.flatnonzero(legal[o, x:])[:k]
        nodes = node_of[taken]
        out[i, _ONE] = 1.0 if len(nodes) and bool((nodes == nodes[0]).all()) else 0.0


class _Memo:
    """What one build shares between jobs: the (GPU, option) pairs of each array of targets
    (the jobs of one mask signature share the array: ``Legality.targets``) and, pruned, each
    (targets, request) pair's choice of targets before the kept moves are added."""

    __slots__ = ("_picks", "_rep_picks", "_split", "classes", "kept")

    def __init__(self, classes: TargetClasses | None) -> None:
        self.classes = classes
        self.kept: dict[int, list[tuple[int, int]]] = {}
        self._split: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._picks: dict[tuple[object, ...], tuple[Any, ...]] = {}
        self._rep_picks: dict[tuple[object, ...], np.ndarray] = {}

    def split(self, flat: np.ndarray, n_opts: int) -> tuple[np.ndarray, np.ndarray]:
        """The (GPU, option) pairs of rising flat targets ``gpu * n_opts + option``, as int64
        arrays, GPU-major (``np.nonzero`` of their mask: the same order); shared by the jobs of
        one ``flat`` (its :meth:`picks` are keyed by these arrays)."""
        hit = self._split.get(id(flat))
        if hit is None or hit[0] is not flat:
            gs, os_ = _split(flat, n_opts)
            hit = self._split[id(flat)] = (flat, gs, os_)
        return hit[1], hit[2]

    def flat_picks(self, spec: JobSpec, flat: np.ndarray, here: int) -> np.ndarray:
        """``picks``' targets of a single-GPU job like ``spec`` on node ``here`` (-1: queued),
        as flat indices of ``flat`` (rising flat targets), found from ``flat`` itself
        (``TargetClasses.flat_first_index``); shared by jobs of the same targets, CPUs and
        node (callers must not write to it)."""
        assert self.classes is not None
        key = (id(flat), spec.cpu_cores, here)
        hit = self._picks.get(key)
        if hit is None or hit[0] is not flat:
            hit = self._picks[key] = (flat, flat[self.classes.flat_first_index(spec, flat, here)])
        return hit[1]

    def rep_picks(self, builder: CandidateBuilder, jid: int, here: int) -> np.ndarray | None:
        """``flat_picks``' targets of single-GPU job ``jid`` on node ``here`` (-1: queued; a
        running job's migrations) as flat indices, found on the GPUs that stand for the fleet
        only (:func:`_class_reps`, ``_Reps.gpus``): its targets there
        (``Legality.targets_on``), then the first of each key (``_Reps.firsts``, the node
        ``here`` apart); shared by jobs of the same mask signature, CPUs and node. None where
        the groups are not at hand (interpreted, too many): the caller takes the targets'
        path."""
        classes = self.classes
        assert classes is not None
        spec = builder.sim.jobs[jid].spec
        cls, n = classes._gpu_class(spec.cpu_cores)
        reps = classes.reps(cls, n)
        if reps is None:
            return None
        key = (mask_signature(spec), spec.cpu_cores, here)
        flat = self._rep_picks.get(key)
        if flat is None:
            flat = builder.sim.legality.targets_on(jid, reps.gpus(here), here >= 0)
            if len(flat) > 1:
                flat = reps.firsts(flat, here)
            self._rep_picks[key] = flat
        return flat

    def picks(
        self,
        builder: CandidateBuilder,
        spec: JobSpec,
        gs: np.ndarray,
        os_: np.ndarray,
        here: int,
    ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Which of the targets ``(gs, os_)`` stand for their class, for a job like ``spec``
        (rising indices), and those targets; shared by jobs of the same targets (the same
        arrays), CPUs and node (and, for a gang, mask signature)."""
        assert self.classes is not None
        if spec.num_gpus == 1:  # (a single GPU's classes read the job's CPUs alone)
            key: tuple[object, ...] = (id(gs), id(os_), spec.cpu_cores, here)
        else:
            key = (id(gs), id(os_), mask_signature(spec), spec.cpu_cores, here)
        hit = self._picks.get(key)
        if hit is None or hit[0] is not gs or hit[1] is not os_:
            if spec.num_gpus == 1:
                idx = self.classes.first_index(spec, gs, os_, here)
            else:
                idx = np.flatnonzero(builder._first_of_class(self.classes, spec, gs, os_, here))
            hit = self._picks[key] = (gs, os_, idx, (gs[idx], os_[idx]))
        return hit[2], hit[3]


# ------------------------------------------------------------------ pair features (opt-in)
def _attained_s(st: JobState, now: float) -> float:
    """Seconds ``st`` has run so far (``ledger.run_time_s`` brought up to ``now`` as
    ``Rates.accrue`` would, without changing the state)."""
    run = float(st.ledger.run_time_s)
    if st.status is _RUNNING and st.rate > 0.0:
        t0 = max(st.last_t, st.setup_until)
        if now > t0:
            run += now - t0
    return run


def _resident(st: JobState, opt: Any, inst: Any = None) -> Resident:
    """What a profiling run would co-locate for job ``st`` under placement option ``opt``: its
    model, the option's SM share (MPS) or MIG instance (``inst``, the job's own where it has
    one; else the smallest MIG profile of the option's compute slices), its solo duty (a
    service's current load), online flag and priority."""
    spec = st.spec
    mode = opt.mode
    mig_c = mig_m = 0
    if mode is SharingMode.MIG:
        if inst is not None:
            mig_c, mig_m = int(inst.compute), bin(inst.mask).count("1")
        else:
            mig_c, mig_m = int(opt.mig_slices), _mig_mem(int(opt.mig_slices))
    online = bool(st.online)
    return Resident(
        spec.model,
        sm_frac=opt.sm_pct / 100.0 if mode is SharingMode.MPS else 1.0,
        mig_compute_slices=mig_c,
        mig_mem_slices=mig_m,
        duty=float(st.serving.duty) if online else ZOO[spec.model].duty,
        online=online,
        priority=int(spec.priority),
    )


def _mig_mem(compute: int) -> int:
    """Memory slices of the smallest MIG profile with ``compute`` compute slices
    (``observation_v1._mig_mem_slices``: 1g -> 1, 2g -> 2, 3g -> 4, 4g -> 4, 7g -> 8)."""
    from gpu_sharing_env.envs.observation_v1 import _mig_mem_slices

    return _mig_mem_slices(compute)


class PairProfiles:
    """``ClusterView.profile`` per (GPU type, mode, residents), memoised for an episode (a
    profile is a pure function of its arguments: its noise is seeded by them)."""

    def __init__(self) -> None:
        self._episode: object = None
        self._memo: dict[tuple[Any, ...], list[float]] = {}
        self._view: ClusterView | None = None
        #: The simulator ``_view`` reads.
        self._of: Simulator | None = None

    def rates(
        self, sim: Simulator, gpu_type: str, mode: SharingMode, res: tuple[Resident, ...]
    ) -> list[float]:
        episode = episode_token(sim)
        if episode is not self._episode:
            self._episode, self._memo, self._view = episode, {}, None
        key = (gpu_type, mode, res)
        hit = self._memo.get(key)
        if hit is None:
            if self._view is None or self._of is not sim:
                self._view, self._of = ClusterView(sim), sim
            hit = self._memo[key] = self._view.profile(gpu_type, mode, list(res))
        return hit


def pair_columns(
    sim: Simulator,
    job: np.ndarray,
    gpu: np.ndarray,
    option: np.ndarray,
    profiles: PairProfiles | None = None,
) -> np.ndarray:
    """The :data:`PAIR_FEATURES` of candidates (job, first GPU, option; a suspension, GPU -1:
    the job where it runs), one float32 row each: with ``others`` the target GPU's residents
    but the job (in the GPU's order) and ``mode`` the option's, the job's profiled speed
    (``ClusterView.profile(type, mode, others + [job])``' last rate: relative to its solo
    speed on the type); the mean over ``others`` of their profiled speed alone together minus
    with the job (0 without others); their mean attained service and the job's own
    (``_log_s`` of seconds run). ``profiles`` memoises the profiles (None: none kept)."""
    profiles = profiles if profiles is not None else PairProfiles()
    c = sim.cluster
    jobs = sim.jobs
    opts = sim.options
    now = float(sim.now)
    names = c.type_names
    out = np.zeros((len(job), len(PAIR_FEATURES)), dtype=np.float32)
    own: dict[int, float] = {}
    for i in range(len(job)):
        jid, g, o = int(job[i]), int(gpu[i]), int(option[i])
        st = jobs[jid]
        if g < 0:  # a suspension: the job on its own first GPU, with its own option
            g, o = st.gpus[0], int(st.option)
        opt = opts[o]
        others = [jobs[r] for r in c.residents[g] if r != jid]
        mine = st.mig[st.gpus.index(g)] if opt.mode is SharingMode.MIG and g in st.gpus else None
        res = tuple(
            _resident(r, opts[int(r.option)], r.mig[r.gpus.index(g)] if r.mig else None)
            for r in others
        )
        tname = names[int(c.type_idx[g])]
        with_me = profiles.rates(sim, tname, opt.mode, (*res, _resident(st, opt, mine)))
        row = out[i]
        row[0] = _clip1(with_me[-1])
        if others:
            before = profiles.rates(sim, tname, opt.mode, res)
            row[1] = _clip1(sum(b - a for b, a in zip(before, with_me, strict=False)) / len(res))
            row[2] = _clip1(_log_s(sum(_attained_s(r, now) for r in others) / len(others)))
        a = own.get(jid)
        if a is None:
            a = own[jid] = _clip1(_log_s(_attained_s(st, now)))
        row[3] = a
    return out


__all__ = [
    "CANDIDATE_FEATURES",
    "N_FEATURES",
    "PAIR_FEATURES",
    "PRUNINGS",
    "SUSPEND_FEATURE",
    "CandidateBuilder",
    "Candidates",
    "PairProfiles",
    "TargetClasses",
    "TooManyCandidates",
    "candidate_features",
    "pair_columns",
]
