# The compiled OnlineLoad (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of ticks.py, the peers it calls typed (their calls are C calls), the tick length a
# C double. Keep the two in step (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.engine cimport Simulator as _Simulator
from gpu_sharing_env.sim.jobs cimport JobTable as _JobTable
from gpu_sharing_env.sim.rates cimport Rates as _Rates
from gpu_sharing_env.sim.usage cimport FleetUsage as _FleetUsage

cdef class _TickConsts:
    cdef readonly object st
    cdef readonly object spec
    cdef readonly object bsz
    cdef readonly double phase
    cdef readonly double period
    cdef readonly double base
    cdef readonly double span
    cdef readonly double noise_frac
    cdef readonly double batch
    cdef readonly double slo_ms

cdef class OnlineLoad:
    cdef public list _arrived
    cdef public list _live
    cdef public bint _kernel_priority
    cdef public list _live_c
    cdef public Py_ssize_t _live_version
    cdef public list _noise_buf
    cdef public Py_ssize_t _noise_i
    cdef public bint _protection
    cdef public _Rates _rates
    cdef public object _rng
    cdef public _Simulator _sim
    cdef public _JobTable _table
    cdef public double _tick_s
    cdef public _FleetUsage _usage
    cdef public object mechanisms
    cdef public object monitor
    cdef public Py_ssize_t n_service_ticks

    cpdef live(self)
    cpdef update_load(self, st)
    cpdef tick(self)
