# The compiled Simulator (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of engine.py, the clock a C double, the event count a C integer, ``done`` a C
# flag, and the leaf components it drives (the event heap, the accumulator, the job table,
# the usage) typed, so the components that cimport it (lifecycle.pxd, rates.pxd) read the
# clock, the heap and the accumulator as C fields. Only leaf .pxd files are cimported here
# (none of them cimports this one). Keep the two in step (tests/test_typed_components.py
# checks it).

from gpu_sharing_env.sim.accumulator cimport Accumulator
from gpu_sharing_env.sim.events cimport EventQueue
from gpu_sharing_env.sim.jobs cimport JobTable
from gpu_sharing_env.sim.usage cimport FleetUsage

# Decision's slot descriptors (``apply`` reads them through job.pxd's ``_take``; C globals).
cdef object _D_BATCH_SIZE
cdef object _D_GPU
cdef object _D_JOB_ID
cdef object _D_OPTION

cdef class Simulator:
    cdef public list _observers
    cdef public Accumulator acc
    cdef public object cfg
    cdef public object cluster
    cdef public bint done
    cdef public EventQueue events
    cdef public object faults
    cdef public object legality
    cdef public object lifecycle
    cdef public object load
    cdef public object memo
    cdef public Py_ssize_t n_events
    cdef public double now
    cdef public object rates
    cdef public JobTable table
    cdef public object uid
    cdef public FleetUsage usage
    cdef public object waiting
    cdef public object window
    cdef public object workload

    cpdef _handle(self, t, kind, subject, stamp)
