# Cython declarations for synthetic.py (pure-Python mode: the .py runs as it is where not
# compiled). Only the scalar draws of ``rng.random()`` are typed (``_bitgen.pxd``).
from gpu_sharing_env.workload._bitgen cimport next_double

cdef bint COMPILED

cpdef double _random(object rng, object cap) except? -1.0
