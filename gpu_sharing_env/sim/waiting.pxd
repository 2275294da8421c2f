# The compiled Queue (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of waiting.py, its counters C integers, ``add`` / ``take`` C-callable (by the typed
# lifecycle) on a typed job record, its fields C reads for the typed legality. Keep the two
# in step (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.state cimport JobState

cpdef tuple mask_signature(spec)

# JobSpec's slot descriptors read through job.pxd's ``_take`` (C globals, set at import).
cdef object _S_EST_WORK_S
cdef object _S_JOB_ID
cdef object _S_KIND
cdef object _S_PRIORITY
cdef object _S_SUBMIT_S
cdef tuple _SIG_SLOTS

cdef class Queue:
    cdef public dict _best_speed
    cdef public object _front
    cdef public dict _jobs
    cdef public object _memo
    cdef public dict _sigs
    cdef public object _type_names
    cdef public list entries
    cdef public list log
    cdef public object order
    cdef public object scope
    cdef public Py_ssize_t scope_n
    cdef public Py_ssize_t taken
    cdef public Py_ssize_t version
    cdef public Py_ssize_t window

    cpdef tuple entry(self, JobState st)
    cpdef add(self, JobState st)
    cpdef take(self, JobState st)
    cpdef pass_through(self, JobState st)
    cpdef list front(self)
