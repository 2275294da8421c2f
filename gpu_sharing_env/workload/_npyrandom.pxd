# numpy's own C distributions on a generator's bit generator, for synthetic.py and
# sim/failures.py compiled (``cimport`` only: no module). numpy documents this interface in
# "Extending via Cython" (numpy/random/c_distributions.pxd, the static libnpyrandom.a under
# numpy/random/lib, which setup.py links into these two modules only). Each function below is
# the C function a ``numpy.random.Generator`` method runs for its scalar-parameter case
# (numpy/random/_generator.pyx, _common.pyx ``cont``/``disc``/``double_fill``,
# _bounded_integers.pyx.in): called here element by element in the order the method calls it,
# it draws the same values from the same stream. The modules check that at import against the
# methods (``synthetic._init_c_draws``): a numpy at run time whose distributions differ from
# the build's turns these paths off.
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport int64_t, uint64_t
from numpy cimport npy_intp
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport (
    random_exponential,
    random_geometric,
    random_poisson,
    random_standard_normal,
    random_standard_normal_fill,
    random_uniform,
)


cdef extern from "numpy/random/distributions.h":
    # (not in c_distributions.pxd: ``Generator.integers``' int64 fill, _rand_int64's call)
    void random_bounded_uint64_fill(bitgen_t *bitgen_state, uint64_t off, uint64_t rng,
                                    npy_intp cnt, bint use_masked, uint64_t *out) nogil


cdef inline bitgen_t *bitgen_of(object capsule) except NULL:
    """The ``bitgen_t`` of a bit generator's ``capsule`` ("BitGenerator")."""
    return <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")


# The draws into an array (its length), each as the method's call runs it:
cdef inline int normal_fill(object capsule, double[::1] out) except -1:
    """``Generator.standard_normal(n)``: ``random_standard_normal_fill``."""
    if out.shape[0] > 0:
        random_standard_normal_fill(bitgen_of(capsule), out.shape[0], &out[0])
    return 0


cdef inline int cont_fill(object capsule, bint uniform, double a, double b,
                          double[::1] out) except -1:
    """``cont``'s loop: ``Generator.uniform(a, a + b, n)`` (``uniform``: ``random_uniform(a,
    b)`` an element, ``b`` the method's ``high - low``) or ``Generator.exponential(a, n)``
    (``random_exponential(a)`` an element)."""
    cdef bitgen_t *bg = bitgen_of(capsule)
    cdef Py_ssize_t i
    if uniform:
        for i in range(out.shape[0]):
            out[i] = random_uniform(bg, a, b)
    else:
        for i in range(out.shape[0]):
            out[i] = random_exponential(bg, a)
    return 0


cdef inline int geometric_fill(object capsule, double p, int64_t[::1] out) except -1:
    """``Generator.geometric(p, n)``: ``random_geometric(p)`` an element (``disc``'s loop)."""
    cdef bitgen_t *bg = bitgen_of(capsule)
    cdef Py_ssize_t i
    for i in range(out.shape[0]):
        out[i] = random_geometric(bg, p)
    return 0


cdef inline int integers_fill(object capsule, uint64_t rng, int64_t[::1] out) except -1:
    """``Generator.integers(0, rng + 1, n)`` (int64, not masked): one
    ``random_bounded_uint64_fill`` of the whole array (``_rand_int64``'s call: below 2**32 it
    takes two draws from each 64-bit word, a buffer inside the call)."""
    if out.shape[0] > 0:
        random_bounded_uint64_fill(bitgen_of(capsule), 0, rng, out.shape[0], False,
                                   <uint64_t *> &out[0])
    return 0


# One draw (the method's ``size=None`` call):
cdef inline double normal1(object capsule) except? -1.0:
    """``Generator.standard_normal()``."""
    return random_standard_normal(bitgen_of(capsule))


cdef inline double exponential1(object capsule, double scale) except? -1.0:
    """``Generator.exponential(scale)``."""
    return random_exponential(bitgen_of(capsule), scale)


cdef inline int64_t poisson1(object capsule, double lam) except? -1:
    """``Generator.poisson(lam)``."""
    return random_poisson(bitgen_of(capsule), lam)
