# The compiled Legality (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of legality.py, its mask lookups C-callable (by the typed lifecycle and among
# themselves). Keep the two in step (tests/test_typed_components.py checks it).

cdef class Legality:
    cdef public object _cluster
    cdef public dict _jobs
    cdef public object _lifecycle
    cdef public dict _mask_cache
    cdef public object _mig_empty
    cdef public dict _mig_masks
    cdef public object _mig_version
    cdef public Py_ssize_t _n_options
    cdef public object _queue
    cdef public dict _sig_masks
    cdef public dict _sig_ok
    cdef public object _sig_version
    cdef public object _sim

    cpdef forget(self, job_id)
    cpdef cached(self, job_id)
    cpdef mask(self, job_id)
    cpdef entry(self, job_id)
    cpdef sig_entry(self, sig, spec)
    cpdef placeable(self, job_id)
    cpdef sig_placeable(self, sig, spec)
    cpdef needs_decision(self)
