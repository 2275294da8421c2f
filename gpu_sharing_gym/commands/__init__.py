"""The ``gsg`` subcommands, and what several of them parse alike."""

from __future__ import annotations


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
