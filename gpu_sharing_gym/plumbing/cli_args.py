"""What every ``gsg`` subcommand parses alike: one parser class, one error format, checked values.

Every command-line error is one line, ``gsg SUBCOMMAND: error: --option: the rule (got 'x')``,
and a usage error exits with status 2. :class:`Parser` makes argparse's own errors (unknown
option, missing value, a value its ``type`` refused) take that form; :func:`fail` prints one
found later (a scenario that does not load) the same way. The ``type`` factories below check a
value's range and, for output options, that the path can be written, before the command runs:
a long run must not end in an error it could have given at the start.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

#: A usage error's exit status (argparse's, and every command's for bad input).
USAGE_EXIT = 2
_ARGUMENT = re.compile(r"^argument ([^:]+): ")


def _option_name(names: str) -> str:
    """``-o/--out`` -> ``--out`` (the long name, as the messages name options)."""
    parts = names.split("/")
    return max(parts, key=lambda p: (p.startswith("--"), len(p)))


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line, ``PROG: error: MESSAGE``, exit 2.

    ``prog`` is the full command (``gsg evaluate``), so ``--help`` says ``usage: gsg evaluate``
    whichever way the command was started. argparse's "argument --seeds: ..." becomes
    "--seeds: ...". Subparsers (``gsg trace stats``) are of this class too.
    """

    def error(self, message: str) -> NoReturn:
        message = _ARGUMENT.sub(lambda m: f"{_option_name(m.group(1))}: ", message)
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message}\n")


def fail(prog: str, message: str, code: int = USAGE_EXIT) -> int:
    """Print ``PROG: error: MESSAGE`` (its first line) on stderr and return ``code``."""
    lines = str(message).strip().splitlines() or [""]
    print(f"{prog}: error: {lines[0]}", file=sys.stderr)
    return code


# ============================================================================ the rl extra
#: Top-level packages of the ``rl`` extra (torch, stable-baselines3, sb3-contrib, TensorBoard).
RL_PACKAGES = ("torch", "stable_baselines3", "sb3_contrib", "tensorboard")
#: How to get them, as every message says it.
RL_INSTALL = "pip install 'gpu-sharing-gym[rl]'"


def missing_rl(e: ImportError) -> str | None:
    """The package of the ``rl`` extra whose absence raised ``e``, or None if it is another."""
    missing = getattr(e, "name", "") or ""
    return missing if missing.split(".")[0] in RL_PACKAGES else None


def rl_missing() -> str | None:
    """The first package of the ``rl`` extra that cannot be imported here, or None (all can).
    Only looks the packages up; imports none of them."""
    import importlib.util

    for pkg in RL_PACKAGES[:3]:  # (TensorBoard's absence only costs the tb/ logs)
        try:
            if importlib.util.find_spec(pkg) is None:
                return pkg
        except (ImportError, ValueError):
            return pkg
    return None


# ============================================================================ value types
def _number(kind: type[int] | type[float], text: str) -> int | float:
    try:
        return kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {noun} (got {text!r})") from None


def int_range(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[lo, hi]`` (either bound may be None)."""

    def parse(text: str) -> int:
        v = int(_number(int, text))
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"must be {_bounds(lo, hi)} (got {text!r})")
        return v

    parse.__name__ = "integer"
    return parse


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite number > 0."""
    v = float(_number(float, text))
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0 (got {text!r})")
    return v


def non_negative_float(text: str) -> float:
    """An argparse ``type``: a finite number >= 0."""
    v = float(_number(float, text))
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (got {text!r})")
    return v


def _bounds(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"an integer from {lo} to {hi}"
    return f"an integer >= {lo}" if lo is not None else f"an integer <= {hi}"


#: ``--workers``, ``--seeds N``, ``--timesteps``...: an integer >= 1.
positive_int = int_range(1)
#: ``--seed``, ``--max-jobs 0``...: an integer >= 0.
non_negative_int = int_range(0)


def seed_spec(text: str) -> list[int]:
    """``800-859``, ``1,2,5`` or both (``1-3,9``): the seeds, in order.

    Raises ValueError, its message the rule broken, unless they are distinct integers >= 0.
    """
    seeds: list[int] = []
    for part in text.split(","):
        a, sep, b = part.strip().partition("-")
        try:
            lo, hi = int(a), int(b) if sep else int(a)
        except ValueError:
            raise ValueError("integers or ranges expected, e.g. 800-859 or 1,2,5") from None
        if hi < lo:
            raise ValueError(f"range {part.strip()} runs backwards")
        seeds += range(lo, hi + 1)
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct and >= 0")
    return seeds


def seeds(text: str) -> list[int]:
    """An argparse ``type`` for ``--seeds``: ``N`` (seeds 0..N-1, N >= 1) or a list of seeds
    (``0,1,2``, ``800-859``, ``1-3,9``)."""
    t = text.strip()
    if t.isdigit():
        n = int(t)
        if n < 1:
            raise argparse.ArgumentTypeError(f"must be >= 1 (got {text!r})")
        return list(range(n))
    try:
        return seed_spec(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer N (seeds 0..N-1) or a list like 0,1,2 or 800-859 (got {text!r})"
        ) from None


def describe_seeds(seeds: list[int]) -> str:
    """``seed 0``, ``seeds 0..9`` or ``seeds 3,5,8``: how a summary names its seeds."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}..{seeds[-1]}"
    return "seeds " + ",".join(map(str, seeds))


# ============================================================================ output paths
def _writable_dir_above(path: Path) -> str | None:
    """Why ``path``'s missing directories could not be made: None if they can be (the nearest
    existing ancestor is a directory we may write in)."""
    p = path.absolute()
    while not p.exists():
        if p.parent == p:
            return f"no existing directory above {path}"
        p = p.parent
    if not p.is_dir():
        return f"{p} is a file, not a directory"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p}: no permission to write there"
    return None


def output_file(text: str) -> Path:
    """An argparse ``type`` for an output file (``--json``, ``-o``): not a directory, and its
    directory exists or can be made, writable; checked before the command runs."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file path (got '')")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"must be a file path, not a directory (got {text!r}; e.g. {path / 'out.json'})"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: no permission to write it")
    why = _writable_dir_above(path.parent)
    if why is not None:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {why}")
    return path


def output_dir(text: str) -> Path:
    """An argparse ``type`` for an output directory (``--out``): not an existing file, and it
    exists or can be made, writable; checked before the command runs."""
    if not text:
        raise argparse.ArgumentTypeError("expected a directory path (got '')")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"must be a directory, and {text} is a file")
    why = _writable_dir_above(path)
    if why is not None:
        raise argparse.ArgumentTypeError(f"cannot write in {text}: {why}")
    return path


__all__ = [
    "RL_INSTALL",
    "RL_PACKAGES",
    "USAGE_EXIT",
    "Parser",
    "describe_seeds",
    "fail",
    "int_range",
    "missing_rl",
    "non_negative_float",
    "non_negative_int",
    "output_dir",
    "output_file",
    "positive_float",
    "positive_int",
    "rl_missing",
    "seed_spec",
    "seeds",
]
