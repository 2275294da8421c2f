# The compiled Rates (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of rates.py, the usage it writes typed (its calls are C calls), and the methods its
# loops call C-callable. Keep the two in step (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.engine cimport Simulator as _Simulator
from gpu_sharing_env.sim.state cimport JobState
from gpu_sharing_env.sim.speed cimport SpeedMemo as _SpeedMemo
from gpu_sharing_env.sim.usage cimport FleetUsage as _FleetUsage

# JobSpec's slot descriptors read through job.pxd's ``_take`` (C globals, set at import).
cdef object _S_JOB_ID
cdef object _S_MODEL
cdef object _S_PRIORITY
cdef object _S_SERVICE
cdef object _S_WORK_S

# The mechanism flags' bits in ``Rates._mech_bits`` (C constants, set at import).
cdef int _KERNEL_PRIORITY
cdef int _DYNAMIC_SM
cdef int _LAUNCH_QUOTA

cdef class Rates:
    cdef public object _bonus
    cdef public object _cluster
    cdef public set _dirty
    cdef public object _fr_mech
    cdef public Py_ssize_t _gpulets
    cdef public dict _jobs
    cdef public int _mech_bits
    cdef public list _mem_cap
    cdef public _SpeedMemo _memo
    cdef public list _node_factor
    cdef public list _node_gpus
    cdef public list _node_of
    cdef public list _node_pcie
    cdef public list _node_vcpus
    cdef public list _opt_share
    cdef public _Simulator _sim
    cdef public list _type_of
    cdef public _FleetUsage _usage
    cdef public list _watchers
    cdef public object mechanisms

    cpdef _state_views(self)
    cpdef mark_dirty(self, gpus)
    cpdef mem_cap(self, g)
    cpdef accrue(self, JobState st)
    cpdef refresh(self, gpus, fresh=*)
    cpdef gpu_fractions(self, g, res)
    cpdef _online_terms(self, g, gpu_type, mode, res, keys)
    cpdef set_rate(self, JobState st)
