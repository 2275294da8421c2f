# A double rounded to n decimals as ``float(f"{x:.{n}f}")`` rounds it, for synthetic.py compiled
# (``cimport`` only: no module). The f-string's ``float.__format__`` with type ``f`` calls
# ``PyOS_double_to_string(x, 'f', n, 0, NULL)`` (CPython's Python/formatter_unicode.c,
# ``format_float_internal``: flags 0 without ``#`` or ``z``) and ``float()`` of the text calls
# ``PyOS_string_to_double(text, &end, NULL)`` (Objects/floatobject.c,
# ``float_from_string_inner``): the same two C calls without the string objects between them.
from cpython.mem cimport PyMem_Free
from cpython.object cimport PyObject


cdef extern from "Python.h":
    char *PyOS_double_to_string(double val, char format_code, int precision, int flags,
                                int *ptype) except NULL
    double PyOS_string_to_double(const char *s, char **endptr,
                                 PyObject *overflow_exception) except? -1.0


cdef inline double fixed(double x, int n) except? -1.0:
    """``float(f"{x:.{n}f}")``: ``x``'s correctly rounded ``n``-decimal text, read back."""
    cdef char *text = PyOS_double_to_string(x, b'f', n, 0, NULL)
    try:
        return PyOS_string_to_double(text, NULL, NULL)
    finally:
        PyMem_Free(text)
