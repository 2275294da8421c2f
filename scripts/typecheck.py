"""mypy over the project under its installed import names (``make typecheck``).

``pyproject.toml`` installs ``agents/`` as ``gpu_sharing_gym.agents`` (and likewise
``baselines/``, ``configs/``) through setuptools' package-dir. mypy's command line finds modules
by folder, so it would see ``agents.train`` and fail every ``gpu_sharing_gym.agents`` import.
This hands mypy each file with its installed module name instead, read from the same
``[tool.setuptools]`` table the wheel is built from, and mypy's settings from ``[tool.mypy]``.
Errors name the real files.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser from PyPI (dev extra)
    import tomli as tomllib
from mypy import build
from mypy.config_parser import parse_config_file
from mypy.errors import CompileError
from mypy.modulefinder import BuildSource
from mypy.options import Options

ROOT = Path(__file__).resolve().parents[1]


def sources() -> list[BuildSource]:
    """Every module of every package the wheel installs, as (real path, installed name)."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = tool.get("package-dir", {})
    out: list[BuildSource] = []
    for pkg in tool["packages"]:
        # A package's folder: its own mapping, else its parent's folder plus its last name.
        parts = pkg.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head in mapping:
                folder = ROOT / mapping[head] / Path(*parts[i:])
                break
        else:
            folder = ROOT / Path(*parts)
        for f in sorted(folder.glob("*.py")):
            name = pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"
            out.append(BuildSource(str(f.relative_to(ROOT)), name, None))
    return out


def main() -> int:
    opts = Options()
    parse_config_file(opts, lambda: None, str(ROOT / "pyproject.toml"), sys.stdout, sys.stderr)
    srcs = sources()
    try:
        messages = build.build(srcs, opts).errors
    except CompileError as e:
        messages = e.messages
    for m in messages:
        print(m)
    errors = sum(": error:" in m for m in messages)
    if errors:
        print(f"Found {errors} errors ({len(srcs)} source files)")
        return 1
    print(f"Success: no issues found in {len(srcs)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
