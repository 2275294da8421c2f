# The compiled FleetUsage (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of usage.py, declared here with C types where a field is a Python float (a C double
# holds the same IEEE value), and its hot methods callable from C by the typed components.
# Keep the two in step (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.accumulator cimport Accumulator

cdef class _UtilView:
    cdef object src
    cdef double[:] v
    cdef double[:, ::1] rows
    cdef double[::1] sums

cdef class FleetUsage:
    cdef public list _caps
    cdef public object _cluster
    cdef public object _frag_cv
    cdef public object _frag_qv
    cdef public double _frag_val
    cdef public dict _jobs
    cdef public double _n_gpus_f
    cdef public object _queue
    cdef public object _rows
    cdef public object _sums
    cdef public list _ts
    cdef public _UtilView _util_view
    cdef public object g_util

    cpdef sums_item(self, Py_ssize_t k)
    cpdef _UtilView _views(self)
    cpdef set_gpu(self, g, new)
    cpdef set_row(self, Py_ssize_t g, double util, double sm, double mem, double busy,
                  double stp, double over, double hosts)
    cpdef row(self, g)
    cpdef integrate(self, Accumulator acc, double dt, Py_ssize_t in_system)
    cpdef record(self, now, p99_max)
    cpdef fragmentation(self)
