"""`make setup` writes the project's bytecode (`compileall` over the Makefile's ``PKG_DIRS``), as
`pip install` of a wheel does: an editable install writes none, and a process that may not write
it (PYTHONDONTWRITEBYTECODE=1, a read-only checkout) compiled every interpreted module's source
at each start (docs/notes/2026-11-30-replay-bytecode.md)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _makefile() -> str:
    return (ROOT / "Makefile").read_text()


def _pkg_dirs(text: str) -> list[str]:
    (line,) = re.findall(r"^PKG_DIRS := (.*)$", text, flags=re.MULTILINE)
    return line.split()


def _recipe(text: str, target: str) -> list[str]:
    """The recipe lines (tab-indented) of ``target``'s rule."""
    lines = text.splitlines()
    (at,) = [i for i, s in enumerate(lines) if s.startswith(f"{target}:")]
    out = []
    for s in lines[at + 1 :]:
        if not s.startswith("\t"):
            break
        out.append(s.strip())
    return out


def test_the_bytecode_step_covers_every_package_directory() -> None:
    """Each package of pyproject.toml lies under one of ``PKG_DIRS`` (its ``package-dir``
    mapping where it has one, else its dotted path), and each of ``PKG_DIRS`` is one."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped: dict[str, str] = conf.get("package-dir", {})
    dirs = _pkg_dirs(_makefile())
    for pkg in conf["packages"]:
        where = mapped.get(pkg) or next(
            (f"{d}/{pkg[len(p) + 1 :].replace('.', '/')}" for p, d in mapped.items()
             if pkg.startswith(p + ".")),
            pkg.replace(".", "/"),
        )  # fmt: skip
        assert (ROOT / where / "__init__.py").is_file() or (ROOT / where).is_dir(), pkg
        assert where.split("/")[0] in dirs, f"{pkg} ({where}) is under none of PKG_DIRS {dirs}"
    for d in dirs:
        assert (ROOT / d).is_dir(), d


def test_setup_and_compiled_write_the_bytecode() -> None:
    """The install's rule and ``compiled`` (run by ``make test`` after an edit) both end with
    ``compileall`` over ``PKG_DIRS``: the first writes it all, the second the edited modules'
    (compileall skips a module whose bytecode is as new as its source)."""
    text = _makefile()
    step = "$(BIN)/python -m compileall -q $(PKG_DIRS)"
    assert step in _recipe(text, "$(STAMP)")
    assert step in _recipe(text, "compiled")
    # (after the install and the build: pip's editable install must not come after it)
    stamp = _recipe(text, "$(STAMP)")
    assert stamp.index(step) > max(i for i, s in enumerate(stamp) if "pip install" in s)
