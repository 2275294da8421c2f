# The compiled Faults (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of failures.py, the fault rate a C double, the simulator typed (its clock and event
# heap C reads) and ``schedule`` C-callable by the typed lifecycle (a start's fault draw).
# Keep the two in step (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.engine cimport Simulator as _Simulator
from gpu_sharing_env.sim.state cimport JobState

# JobSpec's slot descriptors ``schedule`` reads through job.pxd's ``_take`` (C globals).
cdef object _S_JOB_ID
cdef object _S_NUM_GPUS
# Infinity (``schedule``'s test of the scale: a C double).
cdef double _INF

cdef class Faults:
    cdef public object _cfg
    cdef public object _cluster
    cdef public dict _jobs
    cdef public object _lifecycle
    cdef public list _observers
    cdef public double _rate_per_s
    cdef public object _rates
    cdef public object _rng
    cdef public _Simulator _sim
    cdef public object _w
    cdef public object mechanisms

    cpdef schedule(self, JobState st)
