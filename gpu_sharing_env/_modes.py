"""Compiled or pure Python: which of the compiled modules (:mod:`gpu_sharing_env._compile`)
this process loads from their extension modules, decided once when the package is imported.

* ``GSG_PURE_PYTHON=1``: every listed module is loaded from its ``.py`` source, even where its
  compiled extension sits beside it (Python's own import system prefers the extension).
* A module whose ``.py`` is newer than its extension in a source checkout (edited since the last
  ``make setup``) is loaded from the source too: the edit runs, not the stale build.
* No extension at all for a listed module (no compiler or no Cython at install): the source
  runs, and one warning line says so.
* A module joined by a ``cimport`` (its ``.pxd``'s ``cimport``, its source's
  ``cython.cimports``), either way, to one running from source runs from source too: a
  compiled module cannot use a type its peer does not define as an extension type, and a
  module from source cannot import the C-only functions of its peer's extension.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from gpu_sharing_env._compile import MODULES, source_stem

PACKAGE_DIR = Path(__file__).resolve().parent
#: The environment variable that forces the Python sources.
PURE_ENV = "GSG_PURE_PYTHON"


class PurePythonWarning(RuntimeWarning):
    """The compiled modules are missing: the package runs as (slower) pure Python."""


class SourceFinder(importlib.abc.MetaPathFinder):
    """Loads the named modules from their ``.py`` files, ahead of Python's path finder (which
    would take the extension module beside them)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path or ():
            src = Path(entry) / f"{leaf}.py"
            if src.is_file():
                return importlib.util.spec_from_file_location(fullname, src)
        return None


@functools.cache
def _checkout() -> bool:
    """A source checkout: ``pyproject.toml`` beside the package (not an installed wheel)."""
    return (PACKAGE_DIR.parent / "pyproject.toml").is_file()


def _base(name: str) -> Path:
    """A listed module's path without its suffix: in a source checkout where its package's
    sources lie (``_compile.SOURCE_DIRS``), installed at its dotted path."""
    return PACKAGE_DIR.parent / source_stem(name, checkout=_checkout())


def _extension(name: str) -> Path | None:
    """The compiled extension of a listed module beside its source, if built for this Python."""
    base = _base(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        ext = base.with_name(base.name + suffix)
        if ext.is_file():
            return ext
    return None


def _stale(name: str, ext: Path) -> bool:
    """In a source checkout (``pyproject.toml`` beside the package), the ``.py`` was edited
    after its extension was built. (Installed wheels are not checked: their files' times are
    those of the unpacking.)"""
    if not _checkout():
        return False
    base = _base(name)
    built = ext.stat().st_mtime
    return any(
        src.is_file() and src.stat().st_mtime > built
        for src in (base.with_suffix(".py"), base.with_suffix(".pxd"))
    )


def _cimported(name: str) -> set[str]:
    """The listed modules whose extension types ``name`` cimports."""
    base = _base(name)
    found: set[str] = set()
    for suffix, pattern in (
        (".pxd", r"from\s+([\w.]+)\s+cimport"),
        (".py", r"cython\.cimports\.([\w.]+)"),
    ):
        src = base.with_suffix(suffix)
        if src.is_file():
            found.update(re.findall(pattern, src.read_text(encoding="utf-8")))
    return found & set(MODULES) - {name}


def _with_dependents(source: list[str]) -> list[str]:
    """``source`` and every listed module joined to one of them by a ``cimport``, either way,
    transitively: a compiled module cannot use a type its peer does not define as an extension
    type, and a module running from source cannot import a peer's C-only (``cdef``) function
    from that peer's extension (``sim.lifecycle`` edited: ``fleet.cluster``'s
    ``_cluster_add``)."""
    if not source or len(source) == len(MODULES):
        return source
    edges = {name: _cimported(name) for name in MODULES}
    out = set(source)
    grew = True
    while grew:
        more = {
            name
            for name, d in edges.items()
            if name not in out and (d & out or any(name in edges[o] for o in out))
        }
        out |= more
        grew = bool(more)
    return [name for name in MODULES if name in out]


def pure_forced() -> bool:
    return os.environ.get(PURE_ENV, "").strip() not in ("", "0")


def select() -> tuple[str, ...]:
    """Install the source finder for the modules that must run as Python; return the names of
    those that run compiled."""
    if pure_forced():
        compiled: tuple[str, ...] = ()
        source = list(MODULES)
    else:
        exts = {name: _extension(name) for name in MODULES}
        missing = [name for name, ext in exts.items() if ext is None]
        source = [name for name, ext in exts.items() if ext is None or _stale(name, ext)]
        source = _with_dependents(source)
        compiled = tuple(name for name in MODULES if name not in source)
        if missing:
            what = (
                f"none of its {len(MODULES)} compiled modules are built"
                if len(missing) == len(MODULES)
                else f"{len(missing)} of its {len(MODULES)} compiled modules are not built"
            )
            warnings.warn_explicit(
                f"gpu_sharing_env runs as pure Python: {what} (no C compiler or no Cython at "
                f"install; `make setup` builds them; {PURE_ENV}=1 silences this)",
                PurePythonWarning,
                filename="gpu_sharing_env",
                lineno=0,
            )
    if source and not any(isinstance(f, SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFinder(source))
    return compiled


def describe(compiled: Sequence[str]) -> str:
    """One line for benchmark output: which mode ``compiled`` (``gpu_sharing_env.COMPILED``)
    means."""
    if pure_forced():
        return f"pure Python ({PURE_ENV}=1)"
    if not compiled:
        return "pure Python (no compiled modules built)"
    return f"compiled ({len(compiled)} of {len(MODULES)} modules)"
