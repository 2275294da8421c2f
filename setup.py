"""Build of the compiled hot path: the modules listed in ``gpu_sharing_env/_compile.py``,
cythonized from their ``.py`` sources (Cython's pure-Python mode). Everything else about the
package is in ``pyproject.toml``.

The extensions are optional: without Cython, or when the C compiler fails, the install still
succeeds and those modules run as the Python they are (one warning line at import says so).
``GSG_NO_COMPILE=1`` skips the compilation on purpose.
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


@functools.cache
def _compile_py() -> dict:
    """``gpu_sharing_env/_compile.py``'s names, run as a file without importing the package
    (its dependencies need not be installed when it is built; the file imports nothing)."""
    return runpy.run_path(str(ROOT / "gpu_sharing_env" / "_compile.py"))


def compiled_modules() -> tuple[str, ...]:
    """``MODULES`` of ``gpu_sharing_env/_compile.py``."""
    return tuple(_compile_py()["MODULES"])


def source_of(name: str) -> str:
    """The ``.py`` of listed module ``name`` in this checkout (``_compile.source_stem``)."""
    return str(_compile_py()["source_stem"](name)) + ".py"


class OptionalBuildExt(build_ext):
    """Every extension optional: a failed compile (no compiler, no headers) leaves that module
    as Python and says so, instead of failing the install."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # compile the modules side by side (pip passes no -j)
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # the compiler itself missing fails before any extension
            print(f"gpu-sharing-gym: compiled modules not built ({exc}); running as Python")

    def build_extension(self, ext):  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"gpu-sharing-gym: {ext.name} not compiled ({exc}); it runs as Python")


#: The modules that call numpy's C distributions (``gpu_sharing_env/workload/_npyrandom.pxd``,
#: numpy's "Extending via Cython"): built with numpy's headers and linked with its static
#: ``numpy/random/lib/libnpyrandom.a``. They check at import that those draw what the
#: installed numpy's ``Generator`` draws (``workload.synthetic._init_c_draws``).
NPYRANDOM = ("gpu_sharing_env.workload.synthetic", "gpu_sharing_env.sim.failures")


def npyrandom_args() -> dict:
    """The ``Extension`` arguments of a :data:`NPYRANDOM` module (none without numpy: the
    module's compile then fails and it runs as Python)."""
    try:
        import numpy
    except ImportError:
        return {}
    return {
        "include_dirs": [numpy.get_include()],
        "library_dirs": [str(Path(numpy.__file__).resolve().parent / "random" / "lib")],
        "libraries": ["npyrandom", "m"],
        "define_macros": [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    }


#: The modules that make arrays through numpy's C API (``cimport numpy``: ``PyArray_EMPTY`` and
#: ``PyArray_DATA``, where ``np.empty`` was a Python call and its memory a buffer request):
#: built with numpy's headers only (none without numpy: the module's compile then fails and it
#: runs as Python).
NUMPY_HEADERS = ("gpu_sharing_env.sim.legality", "gpu_sharing_env.envs.candidates")


def numpy_args() -> dict:
    """The ``Extension`` arguments of a :data:`NUMPY_HEADERS` module."""
    try:
        import numpy
    except ImportError:
        return {}
    return {
        "include_dirs": [numpy.get_include()],
        "define_macros": [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    }


def _args_of(name: str) -> dict:
    if name in NPYRANDOM:
        return npyrandom_args()
    return numpy_args() if name in NUMPY_HEADERS else {}


def extensions() -> list:
    if os.environ.get("GSG_NO_COMPILE", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("gpu-sharing-gym: Cython not installed; the compiled modules run as Python")
        return []
    from setuptools import Extension

    # IEEE double arithmetic in Python's order: no fused multiply-add contraction, no fast-math.
    flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]
    exts = [
        Extension(
            name,
            [source_of(name)],
            extra_compile_args=flags,
            optional=True,
            **_args_of(name),
        )
        for name in compiled_modules()
    ]
    return cythonize(
        exts,
        build_dir="build/cython",
        compiler_directives={
            "language_level": 3,
            "binding": True,
            # Typing is explicit (cython.locals, .pxd): ``x: float`` stays a Python object.
            "annotation_typing": False,
            # Python semantics for ZeroDivisionError, integer floor division and modulo. Not for
            # C doubles' ``//``: Cython compiles it to ``floor(a / b)`` (``7.0 // 0.1`` is 70.0,
            # Python's 69.0), so no compiled module floor-divides typed doubles
            # (``baselines/pai.py``'s ``_floordiv`` is CPython's algorithm where one must).
            "cdivision": False,
        },
        quiet=True,
        nthreads=os.cpu_count() or 1,
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
