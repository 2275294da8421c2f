"""A stand-in for Cython's ``cython`` module where Cython is not installed.

The compiled modules (:mod:`gpu_sharing_env._compile`) are typed in Cython's pure-Python mode::

    try:
        import cython
    except ModuleNotFoundError:  # no Cython at run time: the same no-ops
        from gpu_sharing_env import _cython as cython

Compiled, ``import cython`` is Cython's own; interpreted, the decorators below change nothing
and the type names are plain markers, so the source runs as ordinary Python.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

compiled = False


class _CType:
    """A C type's name: ``cython.double`` in ``locals``, ``cython.double[:, :]`` (a typed
    memoryview: the array itself when interpreted), ``cython.double(x)`` (a cast)."""

    def __init__(self, name: str, py: type) -> None:
        self.name, self.py = name, py

    def __getitem__(self, _axes: Any) -> _CType:
        return self

    def __call__(self, *args: Any) -> Any:
        return self.py(*args)

    def __repr__(self) -> str:
        return self.name


bint = _CType("bint", bool)
double = _CType("double", builtins.float)
float = _CType("float", builtins.float)  # Cython's C float (single precision; a marker here)
int = _CType("int", builtins.int)  # Cython's C int (a marker here)
long = _CType("long", builtins.int)
longlong = _CType("longlong", builtins.int)
Py_ssize_t = _CType("Py_ssize_t", builtins.int)
uchar = _CType("uchar", builtins.int)
# ``const`` element types of typed memoryviews of read-only arrays (``cython.const_double[:]``)
const_double = _CType("const double", builtins.float)
const_longlong = _CType("const longlong", builtins.int)
const_uchar = _CType("const uchar", builtins.int)
# pointers to long long, unsigned char and float (``cython.p_longlong``) and Python's buffer struct
# (``cython.declare(cython.Py_buffer)``): where a compiled pass reads an array's memory
p_longlong = _CType("longlong *", builtins.int)
p_uchar = _CType("uchar *", builtins.int)
p_float = _CType("float *", builtins.int)  # (a row of a float32 table: ``candidates._block_rows``)
Py_buffer = _CType("Py_buffer", object)


def _identity(f: Any) -> Any:
    return f


def _decorator_factory(*_args: Any, **_kwargs: Any) -> Callable[[Any], Any]:
    return _identity


class _Directive:
    """Both a decorator (``@cython.cfunc``) and a decorator factory or context manager
    (``@cython.boundscheck(False)``, ``with cython.boundscheck(False):``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _identity

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


cfunc = ccall = cclass = inline = final = no_gc = _Directive()
boundscheck = wraparound = cdivision = initializedcheck = nonecheck = _Directive()
locals = returns = exceptval = _decorator_factory


def cast(_type: Any, value: Any, *_args: Any, **_kwargs: Any) -> Any:
    return value


def address(value: Any) -> Any:
    """``cython.address(x)`` (C's ``&x``): the value itself (only compiled code takes one)."""
    return value


#: Bytes of the C types on LP64 platforms (64-bit Linux, macOS): only compiled code, which has
#: Cython's own ``sizeof``, takes a size, so these never reach C.
_SIZES = {
    "bint": 4,
    "double": 8,
    "float": 4,
    "int": 4,
    "long": 8,
    "longlong": 8,
    "Py_ssize_t": 8,
    "uchar": 1,
}


def sizeof(c_type: Any) -> builtins.int:
    """``cython.sizeof(t)``: the bytes of a C type of this module."""
    return _SIZES[c_type.name]


def declare(_type: Any = None, value: Any = None, **_kwargs: Any) -> Any:
    return value
