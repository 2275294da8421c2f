"""Leaderboard suites: a named set of scenarios, policies and seeds (``configs/leaderboards/``).

    gsg leaderboard --suite standard --out runs/standard
    gsg leaderboard --suite demo --seeds 1 --out runs/quick     # flags override the suite

A suite is YAML validated like every other config (unknown keys and bad values are one-line
errors naming the file and the key)::

    description: the standard scenarios and the held-out set, every heuristic, 10 seeds
    scenarios: [default, default-x2, heldout_load]
    policies: [all]
    seeds: 10            # seeds 0..N-1; or seed_list: [0, 1, 2]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpu_sharing_env.config import CONFIG_ROOT, ConfigError, from_dict, rule

#: The shipped suites (package data, like the scenarios).
SUITE_DIR = CONFIG_ROOT / "leaderboards"


def _names(v: tuple[str, ...]) -> bool:
    return len(v) > 0 and all(isinstance(s, str) and s.strip() for s in v)


@dataclass(frozen=True)
class Suite:
    """A leaderboard run's scenarios × policies × seeds."""

    description: str = ""
    scenarios: tuple[str, ...] = field(
        default=(), metadata=rule(_names, "must be a non-empty list of scenario names or paths")
    )
    policies: tuple[str, ...] = field(
        default=("all",), metadata=rule(_names, "must be a non-empty list of policy names")
    )
    seeds: int | None = field(
        default=None, metadata=rule(lambda v: v is None or v >= 1, "must be >= 1")
    )
    seed_list: tuple[int, ...] | None = field(
        default=None,
        metadata=rule(
            lambda v: v is None or (len(v) > 0 and len(set(v)) == len(v) and min(v) >= 0),
            "must be distinct seeds >= 0",
        ),
    )

    def __post_init__(self) -> None:
        if self.seeds is not None and self.seed_list is not None:
            raise ValueError("give seeds or seed_list, not both")


def suite_names() -> list[str]:
    return sorted(p.stem for p in SUITE_DIR.glob("*.yaml"))


def load_suite(name_or_path: str) -> Suite:
    """A shipped suite by name (``standard``) or a YAML path."""
    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = SUITE_DIR / f"{name_or_path}.yaml"
        if not p.is_file():
            known = ", ".join(suite_names())
            raise ConfigError(
                f"suite {name_or_path!r}: not found (known: {known}; or a .yaml path)"
            )
    elif not p.is_file():
        raise ConfigError(f"{p}: suite file not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: <top>: must be a mapping")
    if "scenarios" not in data:
        raise ConfigError(f"{p}: scenarios: required")
    return from_dict(Suite, data, src=str(p))
