# The compiled SpeedMemo (gpu_sharing_env/_compile.py): an extension type whose state is the
# __slots__ of speed.py (its memo tables typed: the rates' reads of them are C reads) and its
# methods C-callable by the typed components. Keep the two in step
# (tests/test_typed_components.py checks it).

from gpu_sharing_env.sim.state cimport JobState

cdef class SpeedMemo:
    cdef public object _fresh
    cdef public dict _residents
    cdef public object _type_idx
    cdef public object _type_names
    cdef public dict batch_ms
    cdef public bint has_terms
    cdef public object model
    cdef public dict model_duty
    cdef public dict rates_cache
    cdef public dict solo_cache
    cdef public dict terms_cache

    cpdef list _resident_list(self, list keys)
    cpdef rates(self, gpu_type, mode, list keys)
    cpdef rates_miss(self, tuple key, list keys)
    cpdef terms(self, gpu_type, mode, list keys)
    cpdef solo_speed(self, model, gpu_type)
    cpdef solo_batch_ms(self, JobState st)
