# The compiled cluster (gpu_sharing_env/_compile.py): its typed views, extension types whose
# fields are typed memoryviews (annotations are not types in this build: setup.py), read by the
# mask loop (``_single_rows``) and the fit index's sync. ``Cluster`` itself stays a Python class.

cdef class _StateViews:
    cdef object src
    cdef long long[:] n_res
    cdef long long[:] mode
    cdef long long[:] sm_used
    cdef double[:] mem_decl
    cdef double[:] mem_true
    cdef double[:] frac_decl
    cdef long long[:] online_count
    cdef double[:] node_cpu
    cdef unsigned char[:] ready
    cdef unsigned char[:] healthy
    cdef long long[:] mig_occ
    cdef long long[:] mig_used
    cdef double[:] cap_eps
    cdef unsigned char[:] mps_limit
    cdef unsigned char[:] mig_capable
    cdef long long[:] type_idx
    cdef long long[:, :, :] creatable
    cdef long long[:] pcts

cdef class _JobViews:
    cdef tuple arrays
    cdef unsigned char[:] type_ok
    cdef unsigned char[:] excl
    cdef long long[:, :] bits
