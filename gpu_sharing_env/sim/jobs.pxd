# The compiled JobTable (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of jobs.py, its counters C integers, ``set_status`` C-callable (by the typed
# lifecycle) on a typed job record. Keep the two in step (tests/test_typed_components.py
# checks it).

from gpu_sharing_env.sim.state cimport JobState, new_record

cdef class JobTable:
    cdef public object _cluster
    cdef public dict _fit_count
    cdef public object _sim
    cdef public list arrivals
    cdef public Py_ssize_t in_system
    cdef public dict jobs
    cdef public Py_ssize_t next_arrival
    cdef public Py_ssize_t offline_left
    cdef public Py_ssize_t offline_total
    cdef public Py_ssize_t status_version
    cdef public dict view_cache

    cpdef set_status(self, JobState st, status)
    cpdef schedule_next_arrival(self)
    cpdef feasible(self, spec)

# JobSpec's slot descriptors, read through job.pxd's ``_take`` (C globals).
cdef object _S_JOB_ID
cdef object _S_SUBMIT_S
cdef object _S_GPU_TYPES
cdef object _S_MEM_GB
cdef object _S_NUM_GPUS
