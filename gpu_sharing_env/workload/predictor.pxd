# Cython declarations for predictor.py (pure-Python mode: the .py runs as it is where not
# compiled). Only the estimate's path is typed: the tree walk and a tag's encoding.
cimport cython

@cython.locals(node=Py_ssize_t)
cpdef object _leaf(list left, list right, list feat, list thr, list x)

@cython.locals(n=double)
cpdef object _encode(list e, object mean, list x)

@cython.locals(i=Py_ssize_t, j=Py_ssize_t, row=list)
cpdef void _write_rows(float[:, ::1] x32, double[::1] y64, Py_ssize_t start, list rows,
                       list ys, Py_ssize_t first)

cpdef object _fit_exp(object fit, list x)

@cython.locals(e=list)
cpdef void _count(dict table, object key, object y)

# The warm start's typed passes (the same doubles as the numpy expressions they replace).
@cython.locals(n=Py_ssize_t, i=Py_ssize_t, acc=double)
cpdef double _prior_means(const double[::1] y, double[::1] mean)

@cython.locals(n=Py_ssize_t, m=Py_ssize_t, i=Py_ssize_t, p=Py_ssize_t, c=Py_ssize_t,
               s=Py_ssize_t, k=Py_ssize_t, prior=double, nk=double, fill=Py_ssize_t[::1],
               pos=Py_ssize_t[::1])
cpdef void _tag_pass(const Py_ssize_t[::1] inv, const double[::1] y, const double[::1] mean,
                     bint empty_first, double[::1] col, double[::1] prior_n,
                     double[:, ::1] sums, double[::1] ys, double[::1] cs)

@cython.locals(n=Py_ssize_t, m=Py_ssize_t, i=Py_ssize_t, c=Py_ssize_t, seen=Py_ssize_t[::1])
cpdef void _count_sort(const Py_ssize_t[::1] inv, Py_ssize_t[::1] first, Py_ssize_t[::1] pos)

@cython.locals(j=Py_ssize_t, i=Py_ssize_t, c=Py_ssize_t, got=list, order=list)
cpdef list _subs_by_code(const Py_ssize_t[::1] codes, const double[::1] times,
                         const Py_ssize_t[::1] sub, list lists)

@cython.locals(c=Py_ssize_t)
cpdef void _fill_table(dict table, list codes, list cnt, list tot, list sq)

# OnlinePredictor.group_stats' kept answer: the submissions' bisection and the look-ups in C.
@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, t=double)
cpdef Py_ssize_t _bisect_left(list times, double x) except -1

@cython.locals(e=list, times=list, k=Py_ssize_t, runs=double, hit=tuple)
cpdef object _stats_hit(dict g, dict subs, dict stats, object group, double now)

# OnlinePredictor._median_gap's new gaps: C doubles, the NaN check in C.
@cython.locals(i=Py_ssize_t, g=double, t=double, prev=double, new=list)
cpdef object _new_gaps(list times, Py_ssize_t done, Py_ssize_t k)

# JobSpec's slot descriptors the estimates read through job.pxd's ``_take`` (C globals).
cdef object _S_JOB_ID
cdef object _S_GROUP
cdef object _S_USER
cdef object _S_NUM_GPUS
cdef object _S_GPU_FRAC
cdef object _S_WORK_S

# The predictor itself: an extension type whose fields are predictor.py's __slots__ (public:
# tests and tools read them), its per-job work (an estimate at each arrival, a row at each
# finished run, a submission noted) C methods the lifecycle calls typed, and the tree it
# walks kept as typed lists (``_set_fit``). Keep the two in step (tests check it).
cdef class OnlinePredictor:
    cdef public object cfg
    cdef public bint exact
    cdef public bint _use_g
    cdef public bint _use_u
    cdef public bint _use_r
    cdef public list _rows_y
    cdef public dict _g
    cdef public dict _u
    cdef public double _sum
    cdef public object _fit
    cdef public object _fit_src
    cdef public list _fit_base
    cdef public list _fit_left
    cdef public list _fit_right
    cdef public list _fit_feat
    cdef public list _fit_thr
    cdef public list _fit_expv
    cdef public Py_ssize_t _since_fit
    cdef public list observed
    cdef public dict made
    cdef public Py_ssize_t n_fits
    cdef public dict _subs
    cdef public object _subs_hist
    cdef public list _subs_todo
    cdef public list _subs_base
    cdef public dict _periods
    cdef public dict _gaps
    cdef public dict _stats
    cdef public dict _nums
    cdef public object _hist_x
    cdef public object _hist_y
    cdef public Py_ssize_t _n_hist
    cdef public object _x32
    cdef public object _y64
    cdef public list _pending
    cdef public bint _stale

    cpdef _add(self, group, user, gpus, work_s)
    cpdef observe(self, spec, job_id)
    cpdef note_submit(self, spec, now)
    cpdef list _features(self, group, user, r)
    cpdef _refit(self)
    cpdef _set_fit(self, fit)
    cpdef estimate(self, spec, now)
