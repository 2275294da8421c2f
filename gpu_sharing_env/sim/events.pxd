# The compiled EventQueue (gpu_sharing_env/_compile.py): an extension type whose heap is
# parallel C arrays (typed memoryviews over numpy arrays); the fields are events.py's
# __slots__, readable (tests scan the simulator's parts). Keep the two in step
# (tests/test_events.py checks it).

cimport cython

cdef long long _SEQ_BITS
cdef long long _KIND_LIMIT
cdef long long _SEQ_MASK

@cython.final
cdef class EventQueue:
    cdef readonly double[::1] _t
    cdef readonly long long[::1] _ks
    cdef readonly long long[::1] _subject
    cdef readonly long long[::1] _stamp
    cdef readonly unsigned char[::1] _flag
    cdef readonly Py_ssize_t _n
    cdef readonly long long _seq
    cdef public dict _odd
    cdef readonly object _popped_subject
    cdef readonly object _popped_stamp

    cdef _put(self, Py_ssize_t i, time_s, kind, long long seq, subject, stamp)
    cdef tuple _item(self, Py_ssize_t i)
    cdef inline bint _less(self, Py_ssize_t i, Py_ssize_t j) except -1
    cdef inline void _move(self, Py_ssize_t dst, Py_ssize_t src) noexcept
    cdef void _sift_down(self, Py_ssize_t start, Py_ssize_t pos)
    cdef void _sift_up(self, Py_ssize_t pos)
    cpdef push(self, time_s, kind, subject, stamp=*)
    cpdef tuple pop_raw(self)
    cpdef Py_ssize_t pop_kind(self) except? -1
    cpdef peek_time(self)
    cpdef bint peek_is(self, t) except -1
    cpdef bint peek_le(self, t) except -1
    cpdef bint peek_gt(self, t) except -1
