# Cython declarations for cart.py (pure-Python mode: the .py runs as it is where not compiled).
cimport cython

# the sorts' key layout (C constants compiled: cart.py's _KEY_SHIFT)
cdef Py_ssize_t _KEY_SHIFT, _KEY_MASK, _MAX_ROWS

@cython.locals(s=Py_ssize_t, mask=Py_ssize_t, modulus=Py_ssize_t)
cpdef Py_ssize_t _rand_int(list state, Py_ssize_t high)

@cython.locals(f=Py_ssize_t, i=Py_ssize_t)
cpdef void _same_rows(const double[:, ::1] xt, unsigned char[::1] out)

@cython.locals(i=Py_ssize_t)
cpdef bint _has_negative_zero(const double[::1] y)

@cython.locals(nf=Py_ssize_t, f=Py_ssize_t, g=Py_ssize_t, i=Py_ssize_t, same=bint)
cpdef list _twins(const double[:, ::1] xt)

@cython.locals(nf=Py_ssize_t, f_i=Py_ssize_t, n_found=Py_ssize_t, f_j=Py_ssize_t,
               feat=Py_ssize_t, k=Py_ssize_t, is_const=bint)
cpdef list _visit(const double[:, ::1] xt, const double[:, ::1] xt_hi,
                  const Py_ssize_t[:, ::1] xcode, Py_ssize_t[::1] idx, Py_ssize_t[::1] keys,
                  double[:, ::1] xs, double[:, ::1] xs_hi, Py_ssize_t[:, ::1] order,
                  list feats, list rand, const unsigned char[::1] same,
                  const Py_ssize_t[:, ::1] pre, const unsigned char[::1] known)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t)
cpdef bint _take_sorted(const double[::1] xrow, const double[::1] xrow_hi,
                        const Py_ssize_t[::1] pre, Py_ssize_t[::1] idx, double[::1] vals,
                        double[::1] vals_hi, Py_ssize_t[::1] out)

@cython.locals(i=Py_ssize_t, t=Py_ssize_t)
cpdef Py_ssize_t _ties(const double[::1] vals, Py_ssize_t cap)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, r=Py_ssize_t, f=Py_ssize_t,
               m=Py_ssize_t, s=Py_ssize_t, ok=cython.uchar)
cpdef void _inherit(const Py_ssize_t[:, ::1] porder, list cand,
                    const Py_ssize_t[::1] idx, unsigned char[::1] mark,
                    const double[:, ::1] xt, Py_ssize_t[:, ::1] pre, unsigned char[::1] known)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, r=Py_ssize_t)
cpdef void _node_ranks(const double[::1] y, const Py_ssize_t[::1] by_y,
                       const Py_ssize_t[::1] idx, unsigned char[::1] mark,
                       Py_ssize_t[::1] rank, double[::1] ys)

@cython.locals(f=Py_ssize_t, i=Py_ssize_t, c=Py_ssize_t, r=Py_ssize_t)
cpdef void _dense_codes(const double[:, ::1] rows, const Py_ssize_t[:, ::1] order,
                        Py_ssize_t[:, ::1] out)

@cython.locals(f=Py_ssize_t, i=Py_ssize_t, b=int)
cpdef void _float_codes(const int[:, ::1] bits, Py_ssize_t[:, ::1] out)

cpdef void _sort_keys(Py_ssize_t[::1] keys, Py_ssize_t n)

@cython.locals(a=Py_ssize_t, b=Py_ssize_t, c=Py_ssize_t, pivot=Py_ssize_t, below=Py_ssize_t,
               above=Py_ssize_t, k=Py_ssize_t, i=Py_ssize_t, left=Py_ssize_t, r=Py_ssize_t,
               j=Py_ssize_t)
cdef void _introsort(Py_ssize_t[::1] keys, Py_ssize_t lo, Py_ssize_t n, Py_ssize_t maxd) noexcept

@cython.locals(start=Py_ssize_t, end=Py_ssize_t, k=Py_ssize_t)
cdef void _heapsort(Py_ssize_t[::1] keys, Py_ssize_t lo, Py_ssize_t n) noexcept

@cython.locals(root=Py_ssize_t, child=Py_ssize_t, maxind=Py_ssize_t, k=Py_ssize_t)
cdef void _sift_down(Py_ssize_t[::1] keys, Py_ssize_t lo, Py_ssize_t start,
                     Py_ssize_t end) noexcept

@cython.locals(ps=Py_ssize_t, pe=Py_ssize_t)
cpdef void _partition(const double[::1] xrow, Py_ssize_t[::1] idx, double thr)

@cython.locals(max_pow2=Py_ssize_t, total_w=double, total_wy=double, p=Py_ssize_t,
               rank=Py_ssize_t, yv=double, i=Py_ssize_t, j=Py_ssize_t, done=Py_ssize_t)
cpdef void _fenwick_aes(const double[::1] sorted_y, const Py_ssize_t[::1] ranks, Py_ssize_t n,
                        Py_ssize_t first, Py_ssize_t step, const Py_ssize_t[::1] counts,
                        double[::1] out, double[::1] tree_w, double[::1] tree_wy)

@cython.locals(target=double, cur=Py_ssize_t, cum_w=double, cum_wy=double, bit=Py_ssize_t,
               equal_bit=Py_ssize_t, equal_target=double, nxt=Py_ssize_t, node_w=double,
               prev=Py_ssize_t, median=double, w_right=double, wy_right=double)
cdef double _fenwick_query(const double[::1] sorted_y, Py_ssize_t n, Py_ssize_t max_pow2,
                           double total_w, double total_wy, const double[::1] tree_w,
                           const double[::1] tree_wy) noexcept

@cython.locals(n=Py_ssize_t, m=Py_ssize_t, j=Py_ssize_t, w_left=double, w_right=double,
               imp_left=double, imp_right=double)
cpdef void _exact_proxies(const double[::1] sorted_y, const Py_ssize_t[::1] ranks,
                          const Py_ssize_t[::1] ps, double[::1] out, double[::1] tree_w,
                          double[::1] tree_wy, double[::1] ae_left, double[::1] ae_right,
                          Py_ssize_t[::1] counts)

@cython.locals(i=Py_ssize_t)
cpdef bint _has_ties(const double[::1] ys)

@cython.locals(n=Py_ssize_t, n_features=Py_ssize_t, i=Py_ssize_t, f=Py_ssize_t,
               direction=Py_ssize_t, k=Py_ssize_t, odd=Py_ssize_t, lo=Py_ssize_t,
               half=Py_ssize_t, r=Py_ssize_t, a=Py_ssize_t, b=Py_ssize_t,
               total=double, low0=double, t=double, low=double, w=Py_ssize_t,
               step=Py_ssize_t, at=Py_ssize_t, out=double[::1])
cpdef void _scan_node(const double[::1] ys, const Py_ssize_t[::1] rank,
                      const Py_ssize_t[:, ::1] order, double[:, ::1] ae_left,
                      double[:, ::1] ae_right, const Py_ssize_t[::1] src,
                      Py_ssize_t[::1] nxt, Py_ssize_t[::1] prv)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, s=Py_ssize_t, done=bint)
cpdef bint _sort_by(const double[::1] xrow, const double[::1] xrow_hi, const Py_ssize_t[::1] code,
                    Py_ssize_t[::1] idx, Py_ssize_t[::1] keys, double[::1] vals,
                    double[::1] vals_hi, Py_ssize_t[::1] out)

@cython.locals(k=Py_ssize_t, n=Py_ssize_t, f=Py_ssize_t, p=Py_ssize_t, m=Py_ssize_t,
               i=Py_ssize_t, j=Py_ssize_t, top=double, v=double, floor=double, found=bint)
cpdef Py_ssize_t _near(const double[:, ::1] ae_left, const double[:, ::1] ae_right,
                       const double[:, ::1] xs, const double[:, ::1] xs_hi, double margin,
                       Py_ssize_t[::1] out, Py_ssize_t[::1] cand, double[::1] score)

@cython.locals(i=Py_ssize_t, a=double, b=double)
cpdef bint _same_targets(const double[::1] y, const Py_ssize_t[:, ::1] order, Py_ssize_t f,
                         Py_ssize_t g)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, p=Py_ssize_t)
cpdef void _ranks_into(const double[::1] y, const Py_ssize_t[::1] ycode,
                       const Py_ssize_t[::1] rows, double[::1] sorted_y, Py_ssize_t[::1] keys,
                       Py_ssize_t[::1] rk)

@cython.locals(i=Py_ssize_t)
cpdef void _gather_int(const Py_ssize_t[::1] src, const Py_ssize_t[::1] at, Py_ssize_t[::1] out)

cdef class _Node:
    cdef public Py_ssize_t node_id
    cdef public Py_ssize_t start
    cdef public Py_ssize_t end
    cdef public double value
    cdef public _Node parent
    cdef public bint is_left
    cdef public Py_ssize_t depth
    cdef public Py_ssize_t kind
    cdef public double improvement
    cdef public bint exact
    cdef public Py_ssize_t feature
    cdef public double threshold
    cdef public Py_ssize_t pos
    cdef public double ae_left
    cdef public double ae_right
    cdef public object post
    cdef public list inherit

cdef class _Builder:
    # the training set, typed (xt, xt_hi: (F, N), y, samples: N) and as numpy arrays
    cdef double[:, ::1] xt
    cdef double[:, ::1] xt_hi
    cdef double[::1] y
    cdef public object y_np
    cdef Py_ssize_t[::1] samples
    cdef public object samples_np
    cdef public Py_ssize_t n
    cdef public Py_ssize_t n_features
    cdef public list features
    cdef public list rand
    cdef public double tol_ae
    cdef public double tol_imp
    cdef public double tol_gap
    cdef public Py_ssize_t next_id
    cdef unsigned char[::1] same
    cdef public list twin
    cdef Py_ssize_t[::1] by_y
    cdef unsigned char[::1] mark
    cdef public bint signed_zero
    # the nodes' work arrays (_Builder.__init__)
    cdef public object rank_np
    cdef Py_ssize_t[::1] rank
    cdef public object ys_np
    cdef double[::1] ys
    cdef public object orders_np
    cdef Py_ssize_t[:, :, ::1] orders
    cdef double[:, ::1] xs
    cdef double[:, ::1] xs_hi
    cdef Py_ssize_t[:, ::1] pre
    cdef unsigned char[::1] known
    cdef double[:, ::1] ae_l
    cdef double[:, ::1] ae_r
    cdef Py_ssize_t[::1] near
    cdef Py_ssize_t[::1] cand
    cdef double[::1] score
    cdef Py_ssize_t[::1] src
    cdef Py_ssize_t[::1] nxt
    cdef Py_ssize_t[::1] prv
    cdef double[::1] tree_w
    cdef double[::1] tree_wy
    cdef double[::1] yo
    cdef Py_ssize_t[::1] rks
    cdef Py_ssize_t[::1] ps
    cdef double[::1] got
    cdef double[::1] ae_a
    cdef double[::1] ae_b
    cdef Py_ssize_t[::1] counts
    cdef Py_ssize_t[:, ::1] xcode
    cdef Py_ssize_t[::1] ycode
    cdef Py_ssize_t[::1] keys
    cpdef double impurity(self, _Node nd)
    cpdef void exact_improvement(self, _Node nd)
    cpdef bint is_split(self, _Node nd)
    cpdef bint less(self, _Node a, _Node b)

cdef class _Heap:
    cdef public _Builder b
    cdef public list items
    cpdef void push(self, _Node nd)
    @cython.locals(a=list, parent=Py_ssize_t)
    cpdef void _sift_up(self, Py_ssize_t hole, Py_ssize_t top, _Node nd)
    @cython.locals(a=list, last=Py_ssize_t, hole=Py_ssize_t, child=Py_ssize_t, nd=_Node)
    cpdef _Node pop(self)

@cython.locals(n=Py_ssize_t, h=Py_ssize_t, k=Py_ssize_t, n_near=Py_ssize_t, depth=Py_ssize_t,
               f=Py_ssize_t, p=Py_ssize_t, c=Py_ssize_t, j=Py_ssize_t, m=Py_ssize_t,
               best=Py_ssize_t, t=Py_ssize_t, cap=Py_ssize_t, distinct=bint,
               ae=double, w=double, a_l=double, a_r=double, imp=double, v=double,
               best_val=double,
               idx=Py_ssize_t[::1], rank=Py_ssize_t[::1], ys=double[::1], y=double[::1],
               order=Py_ssize_t[:, ::1], xs=double[:, ::1], xs_hi=double[:, ::1],
               ae_l=double[:, ::1], ae_r=double[:, ::1], near=Py_ssize_t[::1],
               known=cython.uchar[::1], pre=Py_ssize_t[:, ::1], porder=Py_ssize_t[:, ::1],
               src=Py_ssize_t[::1], rks=Py_ssize_t[::1], sorted_y=double[::1],
               psv=Py_ssize_t[::1], got=double[::1], nd=_Node)
cpdef _Node _node(_Builder b, Py_ssize_t start, Py_ssize_t end, _Node parent, bint is_left)

@cython.locals(root=_Node, nd=_Node, left=_Node, right=_Node, heap=_Heap, budget=Py_ssize_t)
cpdef object _build(_Builder b, Py_ssize_t max_leaf_nodes)
