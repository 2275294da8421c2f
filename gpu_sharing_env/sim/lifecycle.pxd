# The compiled Lifecycle (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of lifecycle.py, the typed peers it calls (legality, rates, online load: C calls).
# Keep the two in step (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.engine cimport Simulator as _Simulator
from gpu_sharing_env.sim.failures cimport Faults as _Faults
from gpu_sharing_env.sim.jobs cimport JobTable as _JobTable
from gpu_sharing_env.sim.state cimport JobState
from gpu_sharing_env.sim.legality cimport Legality as _Legality
from gpu_sharing_env.sim.rates cimport Rates as _Rates
from gpu_sharing_env.sim.speed cimport SpeedMemo as _SpeedMemo
from gpu_sharing_env.sim.ticks cimport OnlineLoad as _OnlineLoad
from gpu_sharing_env.sim.waiting cimport Queue as _Queue

# JobSpec.job_id's slot descriptor, read through job.pxd's ``_take`` (a C global).
cdef object _S_JOB_ID
cdef object _S_SUBMIT_S
cdef object _S_WORK_S

cdef class Lifecycle:
    cdef public object _cfg
    cdef public object _cluster
    cdef public _Faults _faults
    cdef public dict _jobs
    cdef public _Legality _legality
    cdef public _OnlineLoad _load
    cdef public _SpeedMemo _memo
    cdef public double _migration_s
    cdef public list _observers
    cdef public object _options
    cdef public _Queue _queue
    cdef public _Rates _rates
    cdef public _Simulator _sim
    cdef public dict _suspended
    cdef public _JobTable _table
    cdef public bint estimates
    cdef public object predictor

    cpdef arrive(self, JobState st)
    cpdef enqueue(self, JobState st)
    cpdef remove(self, JobState st)
    cpdef finish(self, JobState st, status)
    cpdef start(self, JobState st, first_gpu, option, batch_size=*)
    cpdef _place(self, JobState st, first_gpu, option, batch_size, bint queued)
    cpdef migrate(self, JobState st, gpu, option, batch_size=*)
    cpdef restore(self, JobState st)
    cpdef _learn(self, JobState st)
