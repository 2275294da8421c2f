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
