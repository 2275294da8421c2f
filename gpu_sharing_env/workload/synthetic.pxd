# Cython declarations for synthetic.py (pure-Python mode: the .py runs as it is where not
# compiled). Typed: the scalar draws of ``rng.random()`` (``_bitgen.pxd``), the job loop's
# decimal rounding (``_decimal.pxd``), the thinning's arithmetic, numpy's C distributions
# (``_npyrandom.pxd``: the draws of :func:`draw_capsule`).
cimport cython
from libc.math cimport floor as c_floor
from gpu_sharing_env.workload._bitgen cimport next_double
from gpu_sharing_env.workload._decimal cimport fixed
from gpu_sharing_env.workload._npyrandom cimport (
    cont_fill, geometric_fill, integers_fill, normal1, normal_fill, poisson1,
)

cdef bint COMPILED

# (``new_spec`` compiled: job.py's ``_new_spec_slots``, a C call; interpreted, the module's
# import, the same spec)
from gpu_sharing_env.workload.job cimport _new_spec_slots as new_spec

cpdef object draw_capsule(object rng)
cpdef double _std_normal(object rng, object dc) except? -1.0
cpdef object _std_normals(object rng, object dc, Py_ssize_t n)
@cython.locals(r=double)
cpdef object _uniforms(object rng, object dc, double lo, double hi, Py_ssize_t n)
cpdef object _exponentials(object rng, object dc, double scale, Py_ssize_t n)
cpdef object _geometrics(object rng, object dc, double p, Py_ssize_t n)

cpdef double _random(object rng, object cap) except? -1.0

cpdef double _fixed(double x, int n) except? -1.0

@cython.locals(i=Py_ssize_t, k=double, day=double)
cpdef void _phases(const double[::1] t, double shift, double[::1] out)

@cython.locals(i=Py_ssize_t, m=Py_ssize_t, day=double, q=double, fl=double, d=double,
               lvl=double, rate=double)
cpdef Py_ssize_t _thin(const double[::1] t, const double[::1] u, const double[::1] c,
                       double week, double weekend, double r0, double amp, double scale,
                       double[::1] out) except -1

@cython.locals(i=Py_ssize_t, out=list)
cpdef list _names_at(list names, const Py_ssize_t[::1] idx)

@cython.locals(row=Py_ssize_t, m=Py_ssize_t, g=Py_ssize_t)
cpdef Py_ssize_t _slot_times(list phases, list k0s, list periods, list jitters,
                             const double[::1] z, list sizes, double t0_s, double t1_s,
                             double[::1] t_out, Py_ssize_t[::1] g_out) except -1

@cython.locals(j=Py_ssize_t, kf=double, t=double)
cpdef Py_ssize_t _group_slots(double ph, Py_ssize_t k0, double per, double jit,
                              const double[::1] z, Py_ssize_t row, Py_ssize_t size,
                              double t0_s, double t1_s, double[::1] t_out,
                              Py_ssize_t[::1] g_out, Py_ssize_t g, Py_ssize_t m) except -1

@cython.locals(top=double, rate0=double, amp=double, peak_s=double, ph=double, u=double)
cpdef double _periodic_phase(object cfg, object rng, double period_s, object cap) except? -1.0

@cython.locals(z=double[::1], m=Py_ssize_t, g=Py_ssize_t, per=double, ph=double,
               k0=Py_ssize_t, size=Py_ssize_t)
cpdef Py_ssize_t _periodic_pass(object cfg, object rng, list periods, list jitters,
                                double t0_s, double t1_s, object cap, object dc,
                                double[::1] t_out, Py_ssize_t[::1] g_out) except -1

@cython.locals(i=Py_ssize_t)
cpdef void _scaled_at(const double[::1] a, const Py_ssize_t[::1] lab, const double[::1] z,
                      double[::1] out)

@cython.locals(i=Py_ssize_t, v=double)
cpdef void _clipped_at(const double[::1] a, const Py_ssize_t[::1] lab, const double[::1] e,
                       double lo, double hi, double[::1] out)

@cython.locals(i=Py_ssize_t, v=double)
cpdef void _mem_use(const double[::1] e, double med, const double[::1] r, double p,
                    const double[::1] over, double[::1] out)

@cython.locals(m=Py_ssize_t, at=Py_ssize_t, s=Py_ssize_t, j=Py_ssize_t, size=Py_ssize_t,
               acc=double, t=double)
cpdef Py_ssize_t _sweep_times(const double[::1] starts, const Py_ssize_t[::1] sizes,
                              const double[::1] gaps, const Py_ssize_t[::1] owner,
                              double t1_s, double[::1] t_out, Py_ssize_t[::1] g_out) except -1
