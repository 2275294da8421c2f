# The compiled Legality (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of legality.py, its mask lookups C-callable (by the typed lifecycle and among
# themselves). Keep the two in step (tests/test_typed_components.py checks it).
cimport cython

from gpu_sharing_env.fleet.cluster cimport _JobViews as _JV, _StateViews as _SV
from gpu_sharing_env.sim.waiting cimport Queue as _Queue

cdef class Legality:
    cdef public object _cluster
    cdef public tuple _fit_kept
    cdef public dict _jobs
    cdef public dict _jv
    cdef public dict _jv_sig
    cdef public tuple _lay
    cdef public object _lifecycle
    cdef public dict _mask_cache
    cdef public object _mig_empty
    cdef public dict _mig_masks
    cdef public dict _mig_targets
    cdef public object _mig_version
    cdef public Py_ssize_t _n_options
    cdef public _Queue _queue
    cdef public object _scratch
    cdef public dict _sig_masks
    cdef public dict _sig_ok
    cdef public dict _sig_targets
    cdef public object _sig_version
    cdef public object _sim

    cpdef forget(self, job_id)
    cpdef first_legal_in(self, spec, options)
    cpdef cached(self, job_id)
    cpdef mask(self, job_id)
    cpdef entry(self, job_id)
    cpdef sig_entry(self, sig, spec)
    cpdef _renew(self, version)
    cpdef targets(self, job_id)
    cpdef sig_targets(self, sig, spec, jv=*)
    cpdef placeable(self, job_id)
    cpdef sig_placeable(self, sig, spec)
    cpdef needs_decision(self)
    cpdef migration_targets(self, job_id)
    cpdef sig_migration_targets(self, sig, spec, idx, jv=*)
    cpdef bint _typed(self, spec)
    cpdef bint _pass(self, spec)
    cpdef _jv_of(self, sig, spec)
    cpdef static_parts(self, sig, spec)
    cpdef _typed_targets(self, sig, spec, bint empty, object gpus=*, object jv=*)
    cpdef _kept_buffer(self)
    cpdef _sig_migration_targets(self, sig, spec, idx, jv=*)
    cpdef empty_ready(self)
    cpdef bint listed_migration(self, spec, gpu, option)
    cpdef single_cells(self, sig, spec, jv=*)
    cpdef check(self, d)
    cpdef check_fields(self, job_id, gpu, option, batch_size, bint suspends)

# A kept buffer and its typed view (``_single_targets`` writes there), and a gang's pass's
# counts per option.
cdef class _Scratch:
    cdef object arr
    cdef long long[:] buf
    cdef long long[:] left

# A single-GPU job's legal placements on every GPU (or on the GPUs ``gpus``, with ``some``:
# a 1-D int64 array, read through a pointer to its memory, not a typed view acquired a call)
# or on the empty, ready ones of them, from the
# cluster's typed views (its own extension types: fleet/cluster.pxd), as flat indices; with
# ``gang`` > 1, a gang's starts of those cells.
@cython.locals(i=Py_ssize_t, g=Py_ssize_t, k=Py_ssize_t, n=Py_ssize_t, c=Py_ssize_t, at=Py_ssize_t,
               n_r=cython.longlong, md=cython.longlong, free=cython.uchar, room=cython.uchar,
               b=cython.uchar, sh_room=cython.uchar, no_limit=cython.uchar, sm=cython.longlong,
               mbits=cython.longlong, m_ts=cython.longlong, m_mps=cython.longlong,
               m_mig=cython.longlong, buf=cython.longlong[:], skip=cython.bint,
               left=cython.longlong[:], kept=Py_ssize_t, e=cython.longlong,
               gp=cython.p_longlong)
cdef object _single_targets(_Scratch s, _SV v, _JV jv, bint online, double mem,
                            long long max_res, Py_ssize_t n_excl, Py_ssize_t n_ts,
                            Py_ssize_t mps0, Py_ssize_t join0, Py_ssize_t mig0,
                            Py_ssize_t n_mig, Py_ssize_t n_opts, bint empty, bint some,
                            object gpus, Py_ssize_t gang)

# ``x`` as a 1-D C-order int64 numpy array (itself where it is one; else a copy): an array
# whose memory the typed passes read through a pointer.
cdef object _i64(object x)

# A GPU as a one-element int64 array (``check``, ``listed_migration``).
cdef object _one_gpu(object gpu)

# The first ``c`` indices of a kept buffer as a fresh int64 array (the typed passes' answers).
cdef object _copy_out(_Scratch s, Py_ssize_t c)

# The empty, ready GPUs from the cluster's typed views (``Legality.empty_ready``).
@cython.locals(n=Py_ssize_t, g=Py_ssize_t, k=Py_ssize_t, nres=cython.longlong[:],
               ready=cython.uchar[:], buf=cython.longlong[:], rp=cython.p_longlong,
               yp=cython.p_uchar, bp=cython.p_longlong)
cdef object _empty_ready(_Scratch s, _SV v)

# A mask's legal cells as rising flat indices, one typed walk (``Legality.targets``, where the
# targets come from the cluster's mask): the mask is read-only, hence ``const``.
@cython.locals(g=Py_ssize_t, o=Py_ssize_t, c=Py_ssize_t, n_g=Py_ssize_t, n_o=Py_ssize_t,
               buf=cython.longlong[:])
cdef object _mask_targets(_Scratch s, const unsigned char[:, :] m)

# How many of a rising list of floats lie below ``x`` (``Legality._jv_of``'s ranks).
@cython.locals(r=Py_ssize_t, y=double)
cdef Py_ssize_t _rank(list sorted_vals, double x) except -1

# Whether rising flat targets hold an index (``check``, ``listed_migration``).
@cython.locals(fp=cython.p_longlong, n=Py_ssize_t, i=Py_ssize_t, found=bint, xx=cython.longlong)
cdef bint _holds(object flat, object x) except -1
