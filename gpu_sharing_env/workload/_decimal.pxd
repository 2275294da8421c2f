# A double rounded to n decimals as ``float(f"{x:.{n}f}")`` rounds it, for synthetic.py compiled
# (``cimport`` only: no module). The f-string's ``float.__format__`` with type ``f`` calls
# ``PyOS_double_to_string(x, 'f', n, 0, NULL)`` (CPython's Python/formatter_unicode.c,
# ``format_float_internal``: flags 0 without ``#`` or ``z``) and ``float()`` of the text calls
# ``PyOS_string_to_double(text, &end, NULL)`` (Objects/floatobject.c,
# ``float_from_string_inner``): the same two C calls without the string objects between them.
from cpython.mem cimport PyMem_Free
from cpython.object cimport PyObject
from libc.math cimport fabs, fma, rint


cdef extern from "Python.h":
    char *PyOS_double_to_string(double val, char format_code, int precision, int flags,
                                int *ptype) except NULL
    double PyOS_string_to_double(const char *s, char **endptr,
                                 PyObject *overflow_exception) except? -1.0


cdef inline double fixed_text(double x, int n) except? -1.0:
    """``float(f"{x:.{n}f}")``: ``x``'s correctly rounded ``n``-decimal text, read back."""
    cdef char *text = PyOS_double_to_string(x, b'f', n, 0, NULL)
    try:
        return PyOS_string_to_double(text, NULL, NULL)
    finally:
        PyMem_Free(text)


cdef extern from *:
    """
    /* 10 ** n, exact as doubles up to n = 22 (each literal's double is the integer itself) */
    static const double __gsg_pow10[23] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
        1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    """
    const double *_POW10 "__gsg_pow10"


cdef inline double fixed(double x, int n) except? -1.0:
    """``float(f"{x:.{n}f}")`` without the text where that is exact: the text's digits are
    ``x * 10 ** n`` (``x``'s exact value) rounded to the nearest integer ``k``, ties to even
    (``_Py_dg_dtoa`` mode 3), and reading ``k / 10 ** n`` back gives the double nearest it,
    which is the IEEE quotient of the two exact doubles ``k`` and ``10 ** n``. The product's
    exact value is ``p + e`` (``p`` the rounded product, ``e = fma(x, 10 ** n, -p)`` its exact
    error, ``|e| <= ulp(p) / 2``); with ``r = rint(p)`` (ties to even), ``d = p - r`` is exact
    and a multiple of ``ulp(p)``, so ``|d + e| < 1/2`` unless ``d`` is ``+-1/2``, where the
    sign of ``e`` decides (0: the tie ``rint`` broke to even). Where ``|p| >= 2 ** 52``, the
    product is tiny (its error not exact), ``x`` is not finite or ``n`` is not in 0 .. 22:
    the text's way (:func:`fixed_text`)."""
    cdef double big, p, e, r, d, ap
    if n < 0 or n > 22:
        return fixed_text(x, n)
    big = _POW10[n]
    p = x * big
    ap = fabs(p)
    if not (ap < 4503599627370496.0) or (ap != 0.0 and ap < 1e-280):  # (2 ** 52; nan: text)
        return fixed_text(x, n)
    e = fma(x, big, -p)
    r = rint(p)
    d = p - r
    if d == 0.5 and e > 0.0:
        r = r + 1.0
    elif d == -0.5 and e < 0.0:
        r = r - 1.0
    return r / big
