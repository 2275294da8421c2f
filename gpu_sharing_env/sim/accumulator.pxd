# The compiled Accumulator (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of accumulator.py; the nine time integrals FleetUsage.integrate adds to (Python
# floats from the start, only floats added) are C doubles, every other field a Python object.
# Keep the two in step (tests/test_typed_components.py checks it).

cdef class Accumulator:
    cdef public double util_s
    cdef public double sm_s
    cdef public double mem_s
    cdef public double busy_gpu_s
    cdef public double stp_s
    cdef public double oversold_s
    cdef public double online_gpu_s
    cdef public double in_system_s
    cdef public double elapsed_s
    cdef public object frag_sum
    cdef public object frag_samples
    cdef public object requests
    cdef public object requests_ok
    cdef public object latency_weighted_ms
    cdef public object p99_weighted_ms
    cdef public object slowdown_weighted
    cdef public object errors_total
    cdef public object errors_propagated
    cdef public object errors_by_cause
    cdef public object gpu_hours_lost
    cdef public object evictions
    cdef public object suspensions
    cdef public object mig_reconfigs
    cdef public object migrations
    cdef public object decisions
