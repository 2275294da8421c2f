# Cython declarations for predictor.py (pure-Python mode: the .py runs as it is where not
# compiled). Only the estimate's path is typed: the tree walk and a tag's encoding.
cimport cython

@cython.locals(node=Py_ssize_t)
cpdef object _leaf(list left, list right, list feat, list thr, list x)

@cython.locals(n=double)
cpdef object _encode(list e, object mean, list x)
