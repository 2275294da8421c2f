# A numpy bit generator's next double, for synthetic.py compiled (``cimport`` only: no module).
# ``bitgen_t`` is numpy's C interface to its bit generators (numpy/random/bitgen.h, the struct
# ``numpy.random.bit_generator.pxd`` declares; stable since numpy 1.17): a ``BitGenerator``'s
# ``capsule`` attribute is a PyCapsule named "BitGenerator" holding a pointer to it.
# ``Generator.random()`` returns ``next_double(state)`` of it (``random_standard_uniform``,
# numpy/random/src/distributions/distributions.c): the same double, the same stream.
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport uint32_t, uint64_t

cdef struct bitgen:
    void *state
    uint64_t (*next_uint64)(void *st) noexcept nogil
    uint32_t (*next_uint32)(void *st) noexcept nogil
    double (*next_double)(void *st) noexcept nogil
    uint64_t (*next_raw)(void *st) noexcept nogil


cdef inline double next_double(object capsule) except? -1.0:
    """``Generator.random()`` of the generator whose bit generator's capsule this is."""
    cdef bitgen *bg = <bitgen *> PyCapsule_GetPointer(capsule, "BitGenerator")
    if bg is NULL:  # (not such a capsule: PyCapsule_GetPointer has set the error)
        return -1.0
    return bg.next_double(bg.state)
