"""Legality: masks and decision points (a component of
:class:`~gpu_sharing_env.sim.engine.Simulator`).

:class:`Legality` owns the placement masks' memos: per queued job (for the cluster's version),
per mask signature (shared by the jobs of one signature) and whether a signature's mask allows
anything (answered without building the mask). It answers ``mask``, ``placeable``,
``needs_decision`` (can a job of the decision scope be placed now) and ``check`` (why a
decision is illegal: a placement, a migration or a suspension, :data:`SUSPEND`). A candidate
builder reads ``targets`` and ``migration_targets``: the masks' legal cells as rising flat
indices, per signature. Compiled on a fleet under ``_MASK_LOOP_GPUS`` without gpulets, a
signature's targets, a single-GPU job's or a gang's, come from one typed pass over the GPUs
(``_single_targets``) without a mask, and the same pass answers whether it fits (so a decision
point's question and the build that follows share it); on a larger fleet a single-GPU job's
come from that pass too, a gang's from the mask in one typed walk (``_mask_targets``), and
whether a signature fits from ``Cluster.placeable`` (its fit index). The pass reads the job's
static parts kept per what its memory decides (its ranks among the GPUs' capacities and the
MIG profiles' memories: ``_jv_of``), not per memory value. Pruned, a builder reads a
single-GPU job's targets on the few GPUs that stand for the fleet only (``targets_on``: the
same typed pass over given GPUs), and ``check`` answers such a job's placement from that pass
on its GPU alone. A builder that keeps each job's mask signature asks by it
(``sig_targets``, ``sig_migration_targets``: no per-job look-up), and, on a fleet under
``_MASK_LOOP_GPUS``, reads a gang's single-GPU cells from the same pass (``single_cells``, where
``Cluster.single_rows`` built the cluster's rows). Compiled, the passes' answers are made through numpy's C API (``_copy_out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_sharing_env.fleet.cluster import (
    _EPS,
    _MASK_LOOP_GPUS,
    _MIG,
    _MPS,
    _TS,
    Cluster,
    _no_views,
)
from gpu_sharing_env.sim.constants import _QUEUED, _RUNNING
from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.sim.waiting import Queue
from gpu_sharing_env.workload.job import JobSpec

try:
    import cython
except ModuleNotFoundError:  # no Cython at run time: the same no-ops
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

# compiled: the cluster's typed views of its state and the mask signature, C-callable
# (cluster.pxd, waiting.pxd)
if cython.compiled:
    from cython.cimports.cpython.buffer import PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
    from cython.cimports.gpu_sharing_env.fleet.cluster import _views_of
    from cython.cimports.gpu_sharing_env.sim.waiting import mask_signature
    from cython.cimports.libc.string import memcpy

    # numpy's C API (``setup.py``'s ``NUMPY_HEADERS``): a pass's answer made without a Python
    # call (``_copy_out``, ``_empty_ready``)
    from cython.cimports.numpy import (
        NPY_INT64,
        PyArray_DATA,
        PyArray_DIM,
        PyArray_EMPTY,
        PyArray_IS_C_CONTIGUOUS,
        PyArray_NDIM,
        PyArray_TYPE,
        import_array,
        ndarray,
        npy_intp,
    )

    import_array()
else:
    from gpu_sharing_env.fleet.cluster import _views_of
    from gpu_sharing_env.sim.waiting import mask_signature

    # (only the compiled ``_holds`` and ``_copy_out`` read or write an array's memory through
    # Python's buffer protocol or numpy's C API)
    PyObject_GetBuffer = PyBuffer_Release = PyBUF_SIMPLE = memcpy = None
    NPY_INT64 = PyArray_DATA = PyArray_EMPTY = ndarray = npy_intp = None
    PyArray_DIM = PyArray_IS_C_CONTIGUOUS = PyArray_NDIM = PyArray_TYPE = None

#: ``_holds`` walks the targets' memory for an index of this magnitude or less (a C integer).
_BIG = 1 << 62

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Decision, Simulator
    from gpu_sharing_env.sim.lifecycle import Lifecycle

#: The largest batch size a decision may give an online service (``Decision.batch_size``).
MAX_BATCH_SIZE = 256

#: ``Decision.gpu`` and ``Decision.option`` of a suspension: ``Decision(job_id, SUSPEND,
#: SUSPEND)`` (``Decision.suspend(job_id)``) suspends running offline job ``job_id`` (no GPU
#: nor option is -1 otherwise, so no placement or migration reads as one).
SUSPEND = -1

MaskEntry = tuple[int, np.ndarray, bool]


#: No targets (read-only, shared): a signature that fits nowhere, a job still setting up.
_NO_TARGETS = np.zeros(0, dtype=np.int64)
_NO_TARGETS.setflags(write=False)


@cython.cclass
class _Scratch:
    """A kept int64 buffer (``arr``, room for every (GPU, option) cell) and its typed view
    (``buf``), acquired once: where ``_single_targets`` writes before its answer is copied
    out; and per option the legal GPUs left of a gang's pass (``left``).
    A pickle or deep copy of one is None (its owner makes another)."""

    arr: object
    buf: cython.longlong[:]
    left: cython.longlong[:]

    def __init__(self, arr: np.ndarray, n_opts: int) -> None:
        self.arr = arr
        self.buf = arr
        self.left = np.zeros(n_opts, dtype=np.int64)

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_no_views, ())


@cython.boundscheck(False)  # (every index is in range by construction)
@cython.wraparound(False)
def _single_targets(
    s: Any,
    v: Any,
    jv: Any,
    online: bool,
    mem: float,
    max_res: int,
    n_excl: int,
    n_ts: int,
    mps0: int,
    join0: int,
    mig0: int,
    n_mig: int,
    n_opts: int,
    empty: bool,
    some: bool,
    gpus: Any,
    gang: int,
) -> np.ndarray:
    """A single-GPU job's legal placements as flat indices ``gpu * n_opts + option``, rising
    (int64; compiled only, no gpulets): on every GPU, or with ``some`` on the rising GPUs
    ``gpus`` only; with ``empty``, of those the empty, ready ones only (a migration's
    destinations). Written to the kept buffer ``s`` (a :class:`_Scratch`),
    then copied out. The rules of the cluster's own mask loop (``fleet.cluster._single_rows``,
    not a gang) read through the cluster's typed views of its state (``v``) and of the job's
    static parts (``jv``): the same integer comparisons and the same double addition and
    comparison for memory (``mem_decl + mem <= cap_eps``). The options are visited in the
    layout's order (exclusive, time-sharing, the MPS shares, MIG), so the indices rise.

    A gang of ``gang`` (> 1) GPUs (``n_mig`` 0: no MIG; every GPU): its placement mask is
    ``fleet.cluster._gang_starts`` of those single-GPU cells, so of the cells listed on every
    GPU (``empty`` not applied to them) a second walk keeps those with ``gang`` or more
    legal GPUs of their option from theirs on (counted per option in ``s.left``), and with
    ``empty`` on an empty, ready GPU only (a migration's: the mask's rows of those GPUs).
    Declared in ``legality.pxd``; ``Legality.targets``, ``Legality.migration_targets`` and
    ``Legality.sig_placeable`` call it."""
    buf = s.buf
    m_ts, m_mps, m_mig = _TS, _MPS, _MIG
    n = v.n_res.shape[0]
    gp = cython.cast(cython.p_longlong, 0)  # (NULL: unread where not ``some``)
    if some:  # (the GPUs' memory read in place: a pointer, no typed view acquired; ``_i64``)
        gpus = _i64(gpus)
        gp = cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, gpus)))
        n = PyArray_DIM(cython.cast(ndarray, gpus), 0)
    skip = empty and gang == 1
    c = 0
    for i in range(n):  # (the views' fields indexed in place: no view taken out of them)
        g = gp[i] if some else i
        n_r = v.n_res[g]
        if skip and (n_r != 0 or not v.ready[g]):
            continue
        at = g * n_opts
        md = v.mode[g]
        free = n_r == 0
        room = n_r < max_res
        b = jv.type_ok[g] & v.ready[g]
        if not online:
            b = b & v.healthy[g]
        if n_excl and b & free & jv.excl[g]:
            buf[c] = at
            c += 1
        sh_room = b & (v.mem_decl[g] + mem <= v.cap_eps[g]) & room
        if n_ts and sh_room & (free | (md == m_ts)):
            buf[c] = at + n_excl
            c += 1
        if join0 > mps0 and sh_room & (free | (md == m_mps)):
            no_limit = not v.mps_limit[g]
            sm = v.sm_used[g]
            for k in range(mps0, join0):
                if (sm <= 100 - v.pcts[k - mps0]) | no_limit:
                    buf[c] = at + k
                    c += 1
        if n_mig and b & room & v.mig_capable[g] & (free | (md == m_mig)):
            mbits = v.creatable[v.type_idx[g], v.mig_occ[g], v.mig_used[g]]
            for k in range(n_mig):
                if (mbits & jv.bits[k, g]) != 0:
                    buf[c] = at + mig0 + k
                    c += 1
    if gang > 1:  # a gang's starts, kept in place (the buffer's order: rising)
        left = s.left
        for k in range(n_opts):
            left[k] = 0
        for i in range(c):
            left[buf[i] % n_opts] += 1
        kept = 0
        for i in range(c):
            e = buf[i]
            g = e // n_opts
            k = e - g * n_opts
            if left[k] >= gang and (not empty or (v.n_res[g] == 0 and v.ready[g] != 0)):
                buf[kept] = e
                kept += 1
            left[k] -= 1
        c = kept
    return _copy_out(s, c)  # (none: the shared empty answer)


def _i64(x: Any) -> np.ndarray:
    """``x`` where it is a 1-D C-order int64 numpy array (what the builder passes: its
    representatives, ``_one_gpu``), else such a copy of it (compiled only: the typed passes
    and the builder's ``_Reps`` read its memory through a pointer). Declared in
    ``legality.pxd``."""
    if (
        isinstance(x, ndarray)
        and PyArray_NDIM(cython.cast(ndarray, x)) == 1
        and PyArray_TYPE(cython.cast(ndarray, x)) == NPY_INT64
        and PyArray_IS_C_CONTIGUOUS(cython.cast(ndarray, x))
    ):
        return x
    return np.ascontiguousarray(x, dtype=np.int64).reshape(-1)


@cython.boundscheck(False)  # (index 0 of a buffer with room for every cell)
@cython.wraparound(False)
def _copy_out(s: Any, c: int) -> np.ndarray:
    """The first ``c`` indices of the kept buffer ``s`` (a :class:`_Scratch`) as a fresh
    int64 array, or the shared empty answer (compiled only: numpy's ``PyArray_EMPTY`` and one
    ``memcpy`` into its ``PyArray_DATA``, where ``np.empty`` was a Python call parsing its
    arguments and the memory a buffer request, and before that ``s.arr[:c].copy()`` made a
    view and called a method: the same array, C order, its own data). Declared in
    ``legality.pxd``; the typed passes return it."""
    if not c:
        return _NO_TARGETS
    n = cython.declare(npy_intp, c)
    out = PyArray_EMPTY(1, cython.address(n), NPY_INT64, 0)
    memcpy(PyArray_DATA(cython.cast(ndarray, out)), cython.address(s.buf[0]), c * 8)
    return out


@cython.boundscheck(False)  # (every index is in range by construction)
@cython.wraparound(False)
def _empty_ready(s: Any, v: Any) -> np.ndarray:
    """``np.flatnonzero((n_res == 0) & ready)`` of the cluster's typed views of its state
    (``v``), in one pass written to the kept buffer ``s`` (a :class:`_Scratch`), then copied
    out (compiled only: no temporary arrays; where a counting pass and a filling pass read
    every GPU twice); ascending, int64 (none: the shared empty answer). Declared in
    ``legality.pxd``; ``Legality.empty_ready`` calls it."""
    n = v.n_res.shape[0]
    nres = v.n_res
    ready = v.ready
    buf = s.buf
    k = 0
    if n and nres.strides[0] == 8 and ready.strides[0] == 1 and buf.strides[0] == 8:
        # (contiguous, as the cluster keeps them: pointers, each GPU written and the count
        # moved on where it is empty and ready, no branch a GPU; ~5 instructions a GPU where
        # the views' strided reads took ~15)
        rp = cython.address(nres[0])
        yp = cython.address(ready[0])
        bp = cython.address(buf[0])
        for g in range(n):
            bp[k] = g
            k += (rp[g] == 0) & (yp[g] != 0)
    else:
        for g in range(n):
            if nres[g] == 0 and ready[g]:
                buf[k] = g
                k += 1
    return _copy_out(s, k)


@cython.boundscheck(False)  # (every index is in range: the mask's own)
@cython.wraparound(False)
def _mask_targets(s: Any, m: Any) -> np.ndarray:
    """``m.ravel().nonzero()[0]`` of a (GPU, option) mask ``m`` (read as uint8; compiled only):
    its legal cells as rising flat indices ``gpu * n_options + option``, in one typed walk
    written to the kept buffer ``s`` (a :class:`_Scratch`), then copied out, where ``ravel``
    copied the option-major mask cell by cell and ``nonzero`` walked the copy. Declared in
    ``legality.pxd``; ``Legality.targets`` calls it."""
    buf = s.buf
    n_g = m.shape[0]
    n_o = m.shape[1]
    c = 0
    for g in range(n_g):
        for o in range(n_o):
            if m[g, o]:
                buf[c] = g * n_o + o
                c += 1
    return _copy_out(s, c)  # (none: the shared empty answer)


def check_batch(st: JobState, batch_size: int) -> str | None:
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


def _rank(sorted_vals: list[float], x: float) -> int:
    """How many of ``sorted_vals`` (rising, distinct) are below ``x``: what every comparison
    ``value >= x`` over them decides (``bisect_left``)."""
    r = 0
    for y in sorted_vals:
        if y < x:
            r += 1
        else:
            break
    return r


def _one_gpu(gpu: int) -> np.ndarray:
    """``gpu`` as the rising GPUs (int64) of ``targets_on``' typed pass (compiled: numpy's
    ``PyArray_EMPTY`` and one store, where ``np.array`` of a list was ~3.7 k instructions a
    1,024-GPU step). Declared in ``legality.pxd``."""
    if cython.compiled:
        n = cython.declare(npy_intp, 1)
        out = PyArray_EMPTY(1, cython.address(n), NPY_INT64, 0)
        cython.cast(cython.p_longlong, PyArray_DATA(cython.cast(ndarray, out)))[0] = gpu
    else:
        out = np.array([gpu], dtype=np.int64)
    return out


def _holds(flat: np.ndarray, x: int) -> bool:
    """Whether the rising flat targets ``flat`` hold ``x`` (listed iff legal). Compiled, for
    an int ``x``, one walk of ``flat``'s memory (contiguous int64, read through Python's
    buffer protocol: the typed passes' copies, ``_NO_TARGETS``, the mask's indices) up to the
    first index not below ``x``, where ``searchsorted`` is a method call and a scalar."""
    if cython.compiled and type(x) is int and -_BIG < x < _BIG:
        view = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(flat, cython.address(view), PyBUF_SIMPLE)
        fp = cython.cast(cython.p_longlong, view.buf)
        n = view.len // 8
        xx = x
        found = False
        for i in range(n):
            if fp[i] >= xx:
                found = fp[i] == xx
                break
        PyBuffer_Release(cython.address(view))
        return found
    at = flat.searchsorted(x)
    return bool(at < len(flat) and flat[at] == x)


class Legality:
    """Placement masks (memoised per job and per signature) and the legality of decisions."""

    __slots__ = (
        "_cluster",
        "_fit_kept",
        "_jobs",
        "_jv",
        "_jv_sig",
        "_lay",
        "_lifecycle",
        "_mask_cache",
        "_mig_empty",
        "_mig_masks",
        "_mig_targets",
        "_mig_version",
        "_n_options",
        "_queue",
        "_scratch",
        "_sig_masks",
        "_sig_ok",
        "_sig_targets",
        "_sig_version",
        "_sim",
    )

    def __init__(self, sim: Simulator, cluster: Cluster, queue: Queue) -> None:
        self._sim = sim
        self._cluster = cluster
        self._queue = queue
        self._n_options = len(cluster.options)
        lay = cluster.layout  # (the cluster's, fixed at its construction)
        #: The option layout's integers the typed pass reads (``_typed_targets``): residents
        #: at most, the exclusive and time-sharing options, the first MPS, join and MIG options,
        #: the MIG profiles, whether gpulets are on (``_typed``), whether the fleet is
        #: small enough for the typed passes to answer every signature (``_pass``), and
        #: (``_lay[9]``) what a memory value decides of a job's static mask parts
        #: (``Masks.static_parts``): the GPUs' distinct capacities (``mem <= cap_eps``: its
        #: exclusive fit) and the MIG profiles' distinct memories (``prof >= mem - _EPS``:
        #: its profile bits), rising; a memory's rank among each picks its parts (``_jv_of``).
        #: All fixed with the fleet.
        f = cluster.fleet
        ranks = (
            sorted({float(x) for x in f.cap_eps.tolist()}),
            sorted({float(x) for x in f.mig.mem_gb.ravel().tolist()}),
        )
        self._lay = (
            lay.sharing.max_residents, lay.n_excl, lay.n_ts, lay.mps0, lay.join0, lay.mig0,
            len(lay.mig_slices), bool(lay.gpulets), cluster.n_gpus < _MASK_LOOP_GPUS, ranks,
        )  # fmt: skip
        #: Per (GPU types, the two ranks of a memory), the typed static parts
        #: (``Masks.static_parts``) of a job of those, and the buffer the typed passes write to
        #: (``_single_targets``; made on first use).
        self._jv: dict[tuple[Any, ...], Any] = {}
        #: The same parts per mask signature (``_jv_of``'s first look-up: a queued or running
        #: job's signature recurs at every step until it starts or ends).
        self._jv_sig: dict[tuple[Any, ...], Any] = {}
        self._scratch: _Scratch | None = None
        self._lifecycle: Lifecycle | None = None
        self._jobs: dict[int, JobState] = {}
        #: Per queued job: (cluster version, mask, mask allows anything).
        self._mask_cache: dict[int, MaskEntry] = {}
        #: Mask entries shared by the jobs of one ``mask_signature`` (for cluster version
        #: ``_sig_version``).
        self._sig_masks: dict[tuple[Any, ...], MaskEntry] = {}
        #: Whether a signature's mask allows anything, for ``_sig_version`` (without the mask).
        self._sig_ok: dict[tuple[Any, ...], bool] = {}
        #: A signature's legal targets as flat indices (``targets``), for ``_sig_version``.
        self._sig_targets: dict[tuple[Any, ...], np.ndarray] = {}
        self._sig_version = -1
        #: Migration masks per mask signature (read-only, shared by the running jobs of one
        #: signature), their targets as flat indices (``migration_targets``) and the empty,
        #: ready GPUs, for cluster version ``_mig_version``.
        self._mig_masks: dict[tuple[Any, ...], np.ndarray] = {}
        self._mig_targets: dict[tuple[Any, ...], np.ndarray] = {}
        self._mig_empty: np.ndarray | None = None
        self._mig_version = -1
        #: The last placement :meth:`first_legal_in` found: (cluster version, the job's spec,
        #: GPU, option); legal while the version is that one (``check``'s first answer).
        self._fit_kept: tuple[Any, ...] = (-1, None, -1, -1)

    def connect(self, lifecycle: Lifecycle) -> None:
        """The lifecycle that judges migrations (built after this component)."""
        self._lifecycle = lifecycle

    def reset(self, jobs: dict[int, JobState]) -> None:
        self._jobs = jobs
        self._mask_cache = {}
        self._sig_masks = {}
        self._sig_ok = {}
        self._sig_targets = {}
        self._sig_version = -1
        self._mig_masks = {}
        self._mig_targets = {}
        self._mig_empty = None
        self._mig_version = -1
        self._fit_kept = (-1, None, -1, -1)  # (a new episode's versions count afresh)

    def copy_memo(self, memo: dict[int, Any]) -> None:
        """``Simulator.copy`` starts with no per-job masks nor migration masks (rebuilt on
        demand: a deep copy of a read-only array would be writeable)."""
        memo[id(self._mask_cache)] = {}
        memo[id(self._mig_masks)] = {}

    def forget(self, job_id: int) -> None:
        """Drop a job's mask (it left the queue). Only queued jobs have masks: a started job's
        would be kept for nothing (at 6,500 GPUs an entry is 40 kB; 20,000 of them were most of
        a replay's memory)."""
        self._mask_cache.pop(job_id, None)

    def first_legal_in(self, spec: JobSpec, options: Sequence[int]) -> tuple[int, int]:
        """:meth:`Cluster.first_legal_in <gpu_sharing_env.fleet.cluster.Cluster.first_legal_in>`
        of ``spec`` (a queued job's), its answer kept for the cluster's version: a decision
        made of it (first-fit's) is then legal at :meth:`check` without a second question."""
        c = self._cluster
        found = c.first_legal_in(spec, options)
        if found[0] >= 0:
            self._fit_kept = (c.version, spec, found[0], found[1])
        return found  # type: ignore[no-any-return]

    def cached(self, job_id: int) -> MaskEntry | None:
        """The job's memoised mask entry (cluster version, mask, allows anything), or None;
        the entry may be stale (compare its version with ``Cluster.version``)."""
        return self._mask_cache.get(job_id)

    # ------------------------------------------------------------------ masks
    def mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) placements of a queued job, from the cluster's legality function."""
        return self.entry(job_id)[1]

    def entry(self, job_id: int) -> MaskEntry:
        version = self._cluster.version
        hit = self._mask_cache.get(job_id)
        if hit is not None and hit[0] == version:
            return hit
        spec = self._jobs[job_id].spec
        hit = self._mask_cache[job_id] = self.sig_entry(mask_signature(spec), spec)
        return hit

    def sig_entry(self, sig: tuple[Any, ...], spec: JobSpec) -> MaskEntry:
        """The mask entry of every job with mask signature ``sig`` (``spec`` one of them), memoised
        for the cluster's current version (the masks are read-only and shared)."""
        version = self._cluster.version
        if self._sig_version != version:
            self._renew(version)
        hit = self._sig_masks.get(sig)
        if hit is None:
            m = self._cluster.placement_mask(spec)
            hit = self._sig_masks[sig] = (version, m, bool(m.any()))
        return hit

    def _renew(self, version: int) -> None:
        """Empties the per-signature memos for cluster version ``version``."""
        self._sig_masks, self._sig_ok, self._sig_targets = {}, {}, {}
        self._sig_version = version

    def targets(self, job_id: int) -> np.ndarray:
        """``mask(job_id)``'s legal (gpu, option) cells as flat indices ``gpu * n_options +
        option``, rising (int64; empty where ``placeable(job_id)`` is false): what a candidate
        builder enumerates. Memoised per mask signature for the cluster's version (shared by
        the queued jobs of one signature; callers must not write to it): a job costs its
        signature and one look-up (``sig_targets``)."""
        spec = self._jobs[job_id].spec
        return self.sig_targets(mask_signature(spec), spec)

    def sig_targets(self, sig: tuple[Any, ...], spec: JobSpec, jv: Any = None) -> np.ndarray:
        """``targets`` of the jobs of mask signature ``sig`` (``spec`` one of them), memoised
        for the cluster's version. Compiled on a small fleet without gpulets, one typed pass
        over the GPUs (``_typed_targets``: a single-GPU job's or a gang's, no mask; it answers
        ``sig_placeable`` too); else a ``placeable`` question and, where the signature fits,
        its mask's nonzero cells (compiled, one typed walk of the mask: ``_mask_targets``).
        ``jv``: ``_jv_of(sig, spec)`` where the caller keeps it (None: looked up)."""
        if self._sig_version != self._cluster.version:
            self._renew(self._cluster.version)
        flat = self._sig_targets.get(sig)
        if flat is None:
            if self._pass(spec):
                if self._sig_ok.get(sig, True):
                    flat = self._typed_targets(sig, spec, False, None, jv)
                    self._sig_ok[sig] = len(flat) > 0
                else:
                    flat = _NO_TARGETS
            elif self.sig_placeable(sig, spec):
                m = self.sig_entry(sig, spec)[1]
                if cython.compiled:  # (one typed walk of the mask: ``_mask_targets``)
                    flat = _mask_targets(self._kept_buffer(), m.view(np.uint8))
                else:  # (``np.flatnonzero``'s own two steps, as methods: ~4x fewer instructions)
                    flat = m.ravel().nonzero()[0]
            else:
                flat = _NO_TARGETS
            self._sig_targets[sig] = flat
        return flat

    def placeable(self, job_id: int) -> bool:
        """Whether ``mask(job_id)`` allows anything (the mask itself is not built for it)."""
        hit = self._mask_cache.get(job_id)
        if hit is not None and hit[0] == self._cluster.version:
            return hit[2]
        spec = self._jobs[job_id].spec
        return self.sig_placeable(mask_signature(spec), spec)

    def sig_placeable(self, sig: tuple[Any, ...], spec: JobSpec) -> bool:
        """``sig_entry(sig, spec)[2]`` without building the mask where there is none yet
        (``Cluster.placeable``: a gang's mask is not needed to know whether it fits)."""
        if self._sig_version != self._cluster.version:
            self._renew(self._cluster.version)
        ok = self._sig_ok.get(sig)
        if ok is None:
            hit = self._sig_masks.get(sig)
            if hit is not None:
                ok = self._sig_ok[sig] = hit[2]
            elif self._pass(spec):  # (its targets, which a build reads next: one typed pass)
                ok = len(self.sig_targets(sig, spec)) > 0
            else:
                ok = self._sig_ok[sig] = self._cluster.placeable(spec)
        return ok

    def migration_mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) destinations of migration candidate ``job_id``: empty, ready GPUs
        where the cluster's legality function would place the job (read-only).

        Memoised per mask signature for the cluster's version (the mask depends on the
        signature and the GPUs' state only, which changes only with the version), so the running
        jobs of one signature share one array; a job still setting up gets zeros. Compiled, a
        single-GPU job's is set from its targets on the empty, ready GPUs
        (``migration_targets``: no whole ``placement_mask``); else it is ``placement_mask`` of
        the signature on those rows."""
        st = self._jobs[job_id]
        spec = st.spec
        idx = self.empty_ready()  # (first: it starts the memo of a new version afresh)
        sig = mask_signature(spec)
        out = self._mig_masks.get(sig)
        if out is None:
            c = self._cluster
            if self._typed(spec):
                out8 = np.zeros((c.n_gpus, self._n_options), dtype=np.uint8)
                out8.reshape(-1)[self._sig_migration_targets(sig, spec, idx)] = 1
                out = out8.view(bool)
            else:
                m = self.sig_entry(sig, spec)[1]
                out = np.zeros(m.shape, dtype=bool)
                out[idx] = m[idx]
            out.setflags(write=False)  # (``flags.writeable = False`` costs ~3x more)
            self._mig_masks[sig] = out
        if st.setup_until > self._sim.now:  # still setting up: cannot move (check_migration)
            out = np.zeros_like(out)
            out.setflags(write=False)
        return out

    def migration_targets(self, job_id: int) -> np.ndarray:
        """``migration_mask(job_id)``'s legal cells as flat indices ``gpu * n_options +
        option``, rising (int64; empty while the job sets up), memoised per mask signature for
        the cluster's version (callers must not write to it). Compiled, a single-GPU job's come
        from one typed pass over the empty, ready GPUs (``_single_targets``: no mask); else from
        the migration mask."""
        st = self._jobs[job_id]
        if st.setup_until > self._sim.now:  # still setting up: cannot move (check_migration)
            return _NO_TARGETS
        spec = st.spec
        idx = self.empty_ready()  # (first: it starts the memo of a new version afresh)
        return self._sig_migration_targets(mask_signature(spec), spec, idx)

    def sig_migration_targets(
        self, sig: tuple[Any, ...], spec: JobSpec, idx: np.ndarray, jv: Any = None
    ) -> np.ndarray:
        """``migration_targets`` of a running job past its setup, of mask signature ``sig``
        (``spec`` its spec), ``idx`` this version's ``empty_ready()`` (asked first: it
        starts the memo of a new version afresh): what a candidate builder that holds the
        job's signature, its time and the empty GPUs asks (no per-job look-up; the same memo).
        ``jv``: ``_jv_of(sig, spec)`` where the caller keeps it (None: looked up)."""
        return self._sig_migration_targets(sig, spec, idx, jv)

    def _typed(self, spec: JobSpec) -> bool:
        """Whether the targets of ``spec`` come from the typed pass (``_single_targets``):
        compiled, a single-GPU job, no gpulets."""
        return bool(cython.compiled and spec.num_gpus == 1 and not self._lay[7])

    def _pass(self, spec: JobSpec) -> bool:
        """Whether ``sig_targets`` of ``spec`` come from a typed pass over every GPU
        (``_typed_targets``): compiled, no gpulets, a fleet under ``_MASK_LOOP_GPUS``."""
        return bool(cython.compiled and self._lay[8] and not self._lay[7])

    def static_parts(self, sig: tuple[Any, ...], spec: JobSpec) -> Any:
        """The typed static parts a builder keeps with a job's cells and hands back to the
        passes as their ``jv`` (``_jv_of(sig, spec)``), or None where ``spec``'s targets take
        no typed pass (``_pass``)."""
        return self._jv_of(sig, spec) if self._pass(spec) else None

    def _jv_of(self, sig: tuple[Any, ...], spec: JobSpec) -> Any:
        """The typed static parts of ``spec`` (signature ``sig``; ``Masks.static_parts``),
        kept per what its memory decides of them (``_lay[9]``: the parts of every memory of
        the same two ranks are equal) and its GPU types, so a new memory value is a look-up."""
        jv = self._jv_sig.get(sig)  # (a signature seen before: its memory's parts)
        if jv is not None:
            return jv
        mem = float(spec.mem_gb)
        caps, profs = self._lay[9]
        if mem == mem:
            key: tuple[Any, ...] = (sig[1], _rank(caps, mem), _rank(profs, mem - _EPS))
        else:  # (NaN: no rank decides; kept per signature)
            key = sig
        jv = self._jv.get(key)
        if jv is None:
            jv = self._jv[key] = self._cluster.masks.static_parts(spec)[3]
        if len(self._jv_sig) >= 4096:  # (one entry per memory value seen: bounded)
            self._jv_sig.clear()
        self._jv_sig[sig] = jv
        return jv

    def _typed_targets(
        self, sig: tuple[Any, ...], spec: JobSpec, empty: bool, gpus: Any = None, jv: Any = None
    ) -> np.ndarray:
        """``_single_targets`` of ``spec`` (signature ``sig``): on every GPU or on the rising
        GPUs ``gpus`` (int64; a single-GPU job), and of those on the empty, ready ones only
        (``empty``); a gang's (no MIG) on every GPU (``_pass``). ``jv``: ``_jv_of(sig,
        spec)`` where the caller keeps it (a candidate builder, per job: no look-up by the
        signature, whose hash and dictionary look-up cost ~0.9 k instructions a pass); None:
        looked up here."""
        max_res, n_excl, n_ts, mps0, join0, mig0, n_mig, _, _, _ = self._lay
        gang = sig[3]  # (``spec.num_gpus``; the signature's items are the spec's own objects)
        if jv is None:
            jv = self._jv_of(sig, spec)
        return _single_targets(
            self._kept_buffer(), _views_of(self._cluster), jv, sig[2],
            float(sig[0]), max_res, n_excl, n_ts, mps0, join0, mig0,
            n_mig if gang == 1 else 0, self._n_options, empty, gpus is not None, gpus, gang,
        )  # fmt: skip

    def targets_on(self, job_id: int, gpus: np.ndarray, empty: bool) -> np.ndarray:
        """``targets(job_id)``' targets on the rising GPUs ``gpus`` (int64) only, or with
        ``empty`` ``migration_targets(job_id)``' (the empty, ready ones of them), from one
        typed pass over those GPUs (``_single_targets``; compiled only, a single-GPU job with
        no gpulets: ``typed_job``), not memoised: what a candidate builder reads where a few
        GPUs stand for the fleet (``envs/candidates.py``, ``_class_reps``)."""
        spec = self._jobs[job_id].spec
        if empty and self._jobs[job_id].setup_until > self._sim.now:
            return _NO_TARGETS  # (still setting up: cannot move, as ``migration_targets``)
        return self._typed_targets(mask_signature(spec), spec, empty, gpus)

    def single_cells(
        self, sig: tuple[Any, ...], spec: JobSpec, jv: Any = None
    ) -> np.ndarray | None:
        """A gang's single-GPU legality (``spec``, of mask signature ``sig``) as the rising
        flat indices ``gpu * n_options + option`` of the cells ``Cluster.single_rows(spec)``
        holds (a gang's MIG cells none): compiled without gpulets, one typed pass over the
        GPUs (``_single_targets`` of the cells alone: no gang's starts, no MIG), from the
        static parts kept per what its memory decides (``_jv_of``), not per memory value as
        the cluster's are, on a fleet under ``_MASK_LOOP_GPUS`` (``_pass``: there a gang's
        targets come from the typed pass, so nothing else builds its rows); else None (the
        cluster's rows answer: on a larger fleet the gang's mask has just memoised them for
        the version, and a pass over every GPU per gang cost more than the look-up: v3's
        ``1024w`` step 288 -> 400 µs). What a candidate builder reads of a gang's targets
        (``gang_one_node``); not memoised."""
        lay = self._lay
        if not (cython.compiled and lay[8]) or lay[7]:
            return None
        if jv is None:  # (``jv``: ``_jv_of(sig, spec)`` where the caller keeps it)
            jv = self._jv_of(sig, spec)
        return _single_targets(
            self._kept_buffer(), _views_of(self._cluster), jv, sig[2],
            float(sig[0]), lay[0], lay[1], lay[2], lay[3], lay[4], lay[5], 0,
            self._n_options, False, False, None, 1,
        )  # fmt: skip

    def typed_job(self, job_id: int) -> bool:
        """Whether ``targets_on`` answers for ``job_id`` (``_typed``)."""
        return self._typed(self._jobs[job_id].spec)

    def _kept_buffer(self) -> _Scratch:
        """The buffer the typed passes write their targets to (room for every (GPU, option)
        cell; made on first use)."""
        if self._scratch is None:
            self._scratch = _Scratch(
                np.empty(self._cluster.n_gpus * self._n_options, dtype=np.int64), self._n_options
            )
        return self._scratch

    def _sig_migration_targets(
        self, sig: tuple[Any, ...], spec: JobSpec, idx: np.ndarray, jv: Any = None
    ) -> np.ndarray:
        """``migration_targets`` of the jobs of signature ``sig`` (``spec`` one of them), past
        setup; ``idx``: ``empty_ready()`` (called first); ``jv``: ``_jv_of(sig, spec)``
        where the caller keeps it (None: looked up)."""
        # (a version's memo starts empty: its first question hashes no signature to miss)
        flat = self._mig_targets.get(sig) if self._mig_targets else None
        if flat is None:
            n = len(idx)
            if not n:
                flat = _NO_TARGETS
            elif (  # (``_typed(spec)`` of its signature's gang size; a gang: on a small fleet)
                cython.compiled and sig[3] == 1 and not self._lay[7]
            ) or self._pass(spec):
                flat = self._typed_targets(sig, spec, True, None, jv)
            else:  # the placement mask's rows of the empty, ready GPUs (rising: ``idx`` is)
                rows, opts = self.sig_entry(sig, spec)[1][idx].nonzero()
                flat = idx[rows] * self._n_options + opts
            self._mig_targets[sig] = flat
        return flat

    def empty_ready(self) -> np.ndarray:
        """The empty, ready GPUs (ascending, int64): where a migration may go. Memoised for the
        cluster's version (``n_res`` and ``ready`` change only where it is bumped, as for the
        migration masks, whose memo a new version empties here); callers must not write to
        it."""
        c = self._cluster
        if self._mig_version != c.version:
            self._mig_masks = {}
            self._mig_targets = {}
            self._mig_empty = None
            self._mig_version = c.version
        idx = self._mig_empty
        if idx is None:
            if cython.compiled:  # (the same indices from the typed views: ``_empty_ready``)
                idx = self._mig_empty = _empty_ready(self._kept_buffer(), _views_of(c))
            else:
                idx = self._mig_empty = np.flatnonzero((c.n_res == 0) & c.ready)
        return idx

    # ------------------------------------------------------------------ decisions
    def needs_decision(self) -> bool:
        """True when some job in the decision scope can be placed now."""
        q = self._queue
        if q.scope_n > q.window:
            # The whole queue: one question per signature of the queued jobs (counted as they
            # enter and leave the queue), not one per job, and only for the signatures no
            # other one dominates (``Queue.front``).
            for sig, spec in q.front():  # noqa: SIM110 (a loop: no closure in a compiled cpdef)
                if self.sig_placeable(sig, spec):
                    return True
            return False
        # ``any(self.placeable(jid) ...)`` with the mask cache's hit test inlined (no mask is
        # built to answer: ``sig_placeable``)
        version = self._cluster.version
        cache = self._mask_cache
        jobs = self._jobs
        for _, jid in q.entries[: q.scope_n]:
            hit = cache.get(jid)
            if hit is not None and hit[0] == version:
                if hit[2]:
                    return True
                continue
            spec = jobs[jid].spec
            if self.sig_placeable(mask_signature(spec), spec):
                return True
        return False

    def listed_migration(self, spec: JobSpec, gpu: int, option: int) -> bool:
        """Whether ``(gpu, option)`` is among the migration targets of ``spec``'s mask
        signature: those memoised for the cluster's version (a build has just listed them:
        the empty, ready cells its placement mask allows); where none are memoised (a pruned
        build reads its targets on a few GPUs only: ``targets_on``), compiled, for a
        single-GPU job with no gpulets (``_typed``), the typed pass that lists them on that
        GPU alone (``_single_targets`` of the empty, ready GPU: the same cells, where the
        caller's slow path built the job's whole mask); else False."""
        sig = mask_signature(spec)
        at = gpu * self._n_options + option
        if self._mig_version == self._cluster.version:
            flat = self._mig_targets.get(sig)
            if flat is not None:
                return _holds(flat, at)
        if self._typed(spec) and 0 <= gpu < self._cluster.n_gpus and 0 <= option < self._n_options:
            return _holds(self._typed_targets(sig, spec, True, _one_gpu(gpu)), at)
        return False

    def check(self, d: Decision) -> str | None:
        """Why ``d`` is illegal now, or None."""
        return self.check_fields(d.job_id, d.gpu, d.option, d.batch_size, d.suspends)

    def check_fields(
        self, job_id: int, gpu: int, option: int, batch_size: int, suspends: bool
    ) -> str | None:
        """:meth:`check` of a decision given by its fields (``job_id``, ``gpu``, ``option``,
        ``batch_size`` and whether it ``suspends``): ``Simulator.apply`` reads them as slots
        (compiled, a C call with no attribute read of the decision)."""
        if self._sim.done:
            return "the episode is over"
        st = self._jobs.get(job_id)
        if batch_size and st is not None:
            why = check_batch(st, batch_size)
            if why is not None:
                return why
        if suspends:
            assert self._lifecycle is not None
            return self._lifecycle.check_suspend(job_id, st)
        if st is not None and st.status is _RUNNING:
            assert self._lifecycle is not None
            return self._lifecycle.check_migration(st, gpu, option)
        if st is None or st.status is not _QUEUED:
            return f"job {job_id} is neither queued nor running"
        q = self._queue
        n = q.scope_n
        if n < len(q.entries):  # ``job_id in`` the scope's ids, as a loop (no list built)
            for _, jid in q.entries[:n]:
                if jid == job_id:
                    break
            else:
                return f"job {job_id} is queued but outside the window of {q.window}"
        c = self._cluster
        spec = st.spec
        # The placement ``first_legal_in`` found for this job at this version: legal (its
        # answer is a cell its mask allows)
        kept = self._fit_kept
        if kept[0] == c.version and kept[1] is spec and kept[2] == gpu and kept[3] == option:
            return None
        # A mask at hand answers; else the cluster's legality (its fit index: no mask built)
        hit = self._mask_cache.get(job_id)
        in_range = 0 <= gpu < c.n_gpus and 0 <= option < self._n_options
        if in_range and hit is not None and hit[0] == c.version and hit[1][gpu, option]:
            return None
        if in_range and self._sig_version == c.version:  # (or the targets a build read)
            flat = self._sig_targets.get(mask_signature(spec))
            if flat is not None and _holds(flat, gpu * self._n_options + option):
                return None
        if in_range and self._typed(spec):
            # (compiled, a single-GPU job with no gpulets: its targets on that GPU alone, the
            # typed pass that lists them (``_single_targets``), where the cluster's answer
            # builds the job's whole mask for an option its fit index does not hold)
            flat = self._typed_targets(mask_signature(spec), spec, False, _one_gpu(gpu))
            if _holds(flat, gpu * self._n_options + option):
                return None
        return c.check(spec, gpu, option)
