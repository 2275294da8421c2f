# Cython declarations for job.py (pure-Python mode: the .py runs as it is where not compiled).
cimport cython
from gpu_sharing_env.workload._slots cimport (
    plain_new, slot_copy, slot_get, slot_get_checked, slot_set,
)

cdef bint COMPILED
cdef object _ONLINE

cdef object _put(object obj, object slot, object value)
cdef object _take(object obj, object slot)
cdef object _copy(object dst, object src, object slot)
cdef object _alloc()
cdef tuple _SLOTS
cdef object _NEW_SPEC_PY

@cython.locals(i=Py_ssize_t, slots=tuple, est=Py_ssize_t)
cpdef object _copy_with_slots(object spec, object est_work_s)

@cython.locals(i=Py_ssize_t, values=tuple, slots=tuple)
cpdef object _new_spec_slots(object job_id, object kind, object model, object submit_s,
                             object num_gpus, object gpu_frac, object mem_gb, object cpu_cores,
                             object work_s, object est_work_s, object true_mem_gb,
                             object gpu_types, object checkpoint_interval_s, object group,
                             object user, object priority, object service)

cdef object _MODELS
cdef Py_ssize_t _TRUE_MEM

@cython.locals(s=double, f=double, m=double, c=double, w=double, e=double, k=double)
cdef bint _rules_hold(tuple v) except -1

# A service's noise-free request rate (ServiceSpec.rate_rps; the online load's ticks call it).
from libc.math cimport sin as _c_sin
cdef double _TWO_PI

@cython.locals(x=double, s=double, wave=double)
cpdef double wave_rps(double base, double span, double phase, double period, double t) noexcept
