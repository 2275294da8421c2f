"""Policies by name: one registry for baselines, agents and third-party schedulers.

Nothing here imports a policy package. Policies come from four places, looked up in this order:

1. :func:`register` — in-process registration (a notebook, a test, a script):
   ``register("mine", MyPolicy)``.
2. Package entry points. A distribution declares, in its ``pyproject.toml``::

       [project.entry-points."gpu_sharing_gym.policies"]
       my_policy = "my_pkg.sched:MyPolicy"        # a heuristic or any Policy factory

       [project.entry-points."gpu_sharing_gym.agents"]
       my_agent = "my_pkg.agents:load_my_agent"   # learned / planning agents

   gpu-sharing-gym's own baselines and agents register themselves this way (see its
   ``pyproject.toml``), so the registry treats them exactly like a third party's.
3. ``module:attr`` — any importable factory, e.g. ``--policy my_pkg.sched:MyPolicy``.
4. A checkpoint path: loaders declared in ``gpu_sharing_gym.checkpoints`` by file suffix
   (``zip = "gpu_sharing_gym.agents.agent:load_agent"``) load it; nothing is loaded unless named.

A factory is called with no arguments and must return a :class:`~gpu_sharing_env.policy.Policy`
(an object with ``name``, ``oracle``, ``mechanisms``, ``reset(seed)`` and
``act(view, obs, mask)``; subclassing :class:`~gpu_sharing_env.policy.HeuristicPolicy` gives
all but ``decide``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from gpu_sharing_env.policy import Policy

#: Entry-point group of heuristic (non-learned) policies; ``--policies all`` means these.
POLICY_GROUP = "gpu_sharing_gym.policies"
#: Entry-point group of learned and planning agents (by name, e.g. ``ppo_default``).
AGENT_GROUP = "gpu_sharing_gym.agents"
#: Entry-point group of checkpoint loaders, keyed by file suffix without the dot (``zip``).
CHECKPOINT_GROUP = "gpu_sharing_gym.checkpoints"

PolicyFactory = Callable[[], Any]

_REGISTERED: dict[str, tuple[str, PolicyFactory]] = {}


class UnknownPolicyError(ValueError):
    """A policy name, ``module:attr`` or path that cannot be resolved; one line, listing names."""


def register(name: str, factory: PolicyFactory, *, kind: str = "policy") -> None:
    """Register ``factory`` (called with no arguments) under ``name`` for this process.

    Args:
        name: Leaderboard name; must not contain ``:`` or a path separator.
        factory: Returns a Policy.
        kind: ``"policy"`` (counts in ``all``) or ``"agent"``.
    """
    if not name or ":" in name or os.sep in name or name.endswith(".zip"):
        raise ValueError(f"policy name {name!r}: must be non-empty, without ':' or '/', no .zip")
    if kind not in ("policy", "agent"):
        raise ValueError(f"kind={kind!r}: must be 'policy' or 'agent'")
    if not callable(factory):
        raise TypeError(f"register({name!r}): factory must be callable")
    _REGISTERED[name] = (kind, factory)


def unregister(name: str) -> None:
    """Remove an in-process registration (no error if absent)."""
    _REGISTERED.pop(name, None)


def _entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    out: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=group):
        out.setdefault(ep.name, ep)  # the first distribution on sys.path wins
    return out


def policy_names(kind: str | None = None) -> list[str]:
    """Every name :func:`make_policy` resolves (``kind``: ``"policy"``, ``"agent"`` or all).

    Heuristics first in declaration order is not guaranteed by entry points, so names are
    sorted within each kind; in-process registrations come after the entry points.
    """
    names: list[str] = []
    for k, group in (("policy", POLICY_GROUP), ("agent", AGENT_GROUP)):
        if kind in (None, k):
            names += sorted(_entry_points(group))
            names += sorted(n for n, (kk, _) in _REGISTERED.items() if kk == k and n not in names)
    return names


def _check_policy(obj: Any, src: str) -> Policy:
    missing = [a for a in ("name", "act", "reset") if not hasattr(obj, a)]
    if missing:
        raise UnknownPolicyError(
            f"{src}: built a {type(obj).__name__}, not a Policy (missing {', '.join(missing)}); "
            "subclass gpu_sharing_env.policy.HeuristicPolicy or implement the protocol"
        )
    for attr, default in (("oracle", False), ("mechanisms", {})):
        if not hasattr(obj, attr):
            try:
                setattr(obj, attr, default)
            except AttributeError:
                raise UnknownPolicyError(f"{src}: Policy has no {attr!r} attribute") from None
    return obj  # type: ignore[no-any-return]


def _load_attr(spec: str) -> Any:
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise UnknownPolicyError(f"{spec!r}: write module:attr, e.g. my_pkg.sched:MyPolicy")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as e:
        raise UnknownPolicyError(f"{spec!r}: cannot import module {mod_name!r} ({e})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownPolicyError(f"{spec!r}: module {mod_name!r} has no {attr!r}") from None
    return obj


def _build(factory: Any, src: str) -> Policy:
    if not callable(factory):
        raise UnknownPolicyError(f"{src}: {factory!r} is not callable (want a Policy factory)")
    return _check_policy(factory(), src)


def make_policy(spec: str) -> Policy:
    """A fresh policy for ``spec``: a registered name, ``module:attr`` or a checkpoint path.

    Raises:
        UnknownPolicyError: Nothing by that name; the message lists the known names. Errors
            raised by a loader (e.g. an incompatible checkpoint) propagate with their own text.
    """
    hit = _REGISTERED.get(spec)
    if hit is not None:
        return _build(hit[1], spec)
    for group in (POLICY_GROUP, AGENT_GROUP):
        ep = _entry_points(group).get(spec)
        if ep is not None:
            try:
                factory = ep.load()
            except ImportError as e:
                extra = " (pip install 'gpu-sharing-gym[rl]')" if group == AGENT_GROUP else ""
                raise UnknownPolicyError(
                    f"policy {spec!r}: cannot import {ep.value} ({e}){extra}"
                ) from None
            return _build(factory, f"{spec} ({ep.value})")
    if ":" in spec and not Path(spec).exists() and not (len(spec) > 1 and spec[1] == ":"):
        return _build(_load_attr(spec), spec)
    if os.sep in spec or "." in Path(spec).name:
        suffix = Path(spec).suffix.lstrip(".")
        loader = _entry_points(CHECKPOINT_GROUP).get(suffix)
        if loader is None:
            known = ", ".join(f".{s}" for s in sorted(_entry_points(CHECKPOINT_GROUP))) or "none"
            raise UnknownPolicyError(
                f"{spec}: no checkpoint loader for this suffix (known: {known})"
            )
        try:
            load = loader.load()
        except ImportError as e:
            raise UnknownPolicyError(
                f"{spec}: cannot import the checkpoint loader {loader.value} ({e}); "
                "pip install 'gpu-sharing-gym[rl]'"
            ) from None
        try:
            return _check_policy(load(spec), spec)
        except UnknownPolicyError:
            raise
        except ValueError as e:  # the loader's one-line reason (e.g. AgentLoadError)
            raise UnknownPolicyError(str(e)) from None
    names = policy_names()
    if not names:
        raise UnknownPolicyError(
            f"unknown policy {spec!r}: no policies are registered; is gpu-sharing-gym installed "
            "(pip install -e .)?"
        )
    raise UnknownPolicyError(
        f"unknown policy {spec!r} (known: {', '.join(names)}; or module:Class, or a path to an "
        "agent's model.zip)"
    )


__all__ = [
    "AGENT_GROUP",
    "CHECKPOINT_GROUP",
    "POLICY_GROUP",
    "UnknownPolicyError",
    "make_policy",
    "policy_names",
    "register",
    "unregister",
]
