"""The shipped training recipes (``configs/recipes/*.yaml``) by name, without torch.

What ``gsg train --list-configs`` and ``--config NAME`` need reads YAML files only, so it works
without the ``rl`` extra; :mod:`gpu_sharing_gym.agents.config` (which needs stable-baselines3)
re-exports it.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import yaml

from gpu_sharing_env.config import ConfigError
from gpu_sharing_env.configs import ROOT as CONFIG_ROOT

#: Training recipes (``configs/recipes/``; package data, rl-zoo style).
AGENT_CONFIG_DIR = CONFIG_ROOT / "recipes"


def default_config_path(algo: str) -> Path:
    return AGENT_CONFIG_DIR / f"{algo}.yaml"


def recipe_names() -> list[str]:
    """The shipped recipes (``configs/recipes/*.yaml``, in a checkout or the wheel) by name."""
    return sorted(p.stem for p in AGENT_CONFIG_DIR.glob("*.yaml"))


def recipe_description(path: Path) -> str:
    """A recipe's description: its leading comment up to the first blank comment line or
    command line, joined into one paragraph (or a top-level ``description:``)."""
    lines = path.read_text().splitlines()
    words: list[str] = []
    for line in lines:
        text = line.strip()
        if not text.startswith("#"):
            break
        text = text[1:].strip()
        if not text or text.startswith(("gsg ", "python ", "--")):
            if words:
                break
            continue
        words.append(text)
    if words:
        return " ".join(words)
    try:
        data = yaml.safe_load("\n".join(lines))
    except yaml.YAMLError:
        return ""
    desc = data.get("description") if isinstance(data, dict) else None
    return " ".join(str(desc).split()) if desc else ""


#: The end of a sentence: a full stop (or ! ?) after a word, before a space and a capital
#: letter, a backtick or a digit (not "e.g. a", not "docs/agents.md," nor "0.93").
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)`'\"][.!?])\s+(?=[A-Z`(0-9])")


def recipe_summary(path: Path) -> str:
    """A recipe's first sentence, whole (however long; :func:`recipes_table` wraps it)."""
    text = recipe_description(path)
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""


def recipes_table(width: int = 100) -> str:
    """The shipped recipes, each with its first sentence wrapped under the name column."""
    names = recipe_names()
    pad = max(map(len, names), default=0) + 2
    out: list[str] = []
    for n in names:
        body = textwrap.wrap(
            recipe_summary(AGENT_CONFIG_DIR / f"{n}.yaml"),
            max(40, width - pad),
            break_on_hyphens=False,
        ) or [""]
        out.append(f"{n:<{pad}}{body[0]}")
        out += [" " * pad + line for line in body[1:]]
    return "\n".join(out)


def resolve_config(ref: str) -> Path:
    """The recipe a ``--config`` value stands for: a shipped recipe's name (``maskable_ppo_v1``)
    or a path to a YAML file. ConfigError (one line, listing the shipped names) otherwise."""
    if ref in recipe_names():
        return AGENT_CONFIG_DIR / f"{ref}.yaml"
    path = Path(ref)
    looks_like_path = path.suffix in (".yaml", ".yml") or "/" in ref or "\\" in ref
    if looks_like_path or path.is_file():
        return path
    raise ConfigError(
        f"--config: no recipe named {ref!r} (shipped: {', '.join(recipe_names())}; "
        "or give a path to a YAML file)"
    )
