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
    cdef tuple lists

cdef class _JobViews:
    cdef tuple arrays
    cdef unsigned char[:] type_ok
    cdef unsigned char[:] excl
    cdef long long[:, :] bits

# The fit index: an extension type whose state is the __slots__ of cluster.py's _FitIndex
# (tests/test_fit_index.py checks the two are in step), its sync, trees, first and walk
# C-callable from the masks' questions (cluster.py's _fit_index and _masks_* bodies).
cdef class _FitIndex:
    cdef public tuple _fixed
    cdef public dict _thr
    cdef public tuple _thr_last
    cdef public tuple _walk_memo
    cdef public dict _xs
    cdef public list arrays
    cdef public list cur
    cdef public list cur_mig
    cdef public set dirty
    cdef public list fit_rows
    cdef public list gpus_of
    cdef public list keep_vals
    cdef public object m
    cdef public list mig
    cdef public list pending
    cdef public list pending_arr
    cdef public list pos_l
    cdef public list trees
    cdef public list type_l
    cdef public list vals

    cpdef sync(self)
    cpdef list _trees(self, Py_ssize_t row)
    cpdef Py_ssize_t first(self, list thr, Py_ssize_t row, Py_ssize_t lo=*) except? -2
    cpdef list walk(self, list thr, Py_ssize_t row, Py_ssize_t lo, Py_ssize_t n)

# JobSpec's slot descriptors ``add``, ``remove`` and ``gang_gpus`` read through job.pxd's
# ``_take`` (C globals, set at import).
cdef object _S_CPU_CORES
cdef object _S_GPU_FRAC
cdef object _S_JOB_ID
cdef object _S_KIND
cdef object _S_MEM_GB
cdef object _S_NUM_GPUS
cdef object _S_TRUE_MEM_GB
cdef object _O_MIG_SLICES
cdef object _O_MODE
cdef object _O_SM_PCT

# The cluster's C-callable bodies the compiled lifecycle cimports (``Cluster.state_views``,
# ``add``, ``remove`` and ``gang_gpus`` delegate to them).
cdef object _last_cluster
cdef _StateViews _last_views
cdef _StateViews _views_of(object self)
cdef tuple _cluster_add(object self, object job, object gpu, object opt)
cdef object _cluster_remove(object self, object job, object gpu, object opt)
cdef list _cluster_gang_gpus(object self, object job, object first_gpu, object option)
# ``Masks.legal``'s body (``Cluster.legal`` delegates to it): for a compiled caller that asks
# one placement's legality per call (``ClusterView.legal``: ``_masks_legal(cluster.masks, ...)``)
cdef object _masks_legal(object self, object job, object gpu, object option)
