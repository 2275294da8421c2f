"""Schedulers: reference policies and re-implementations of published GPU-sharing schedulers.

``POLICIES[name]()`` builds a policy; every entry follows :class:`gpu_sharing_env.policy.Policy`.
The package registers these names in the ``gpu_sharing_gym.policies`` entry-point group (see
``pyproject.toml``), so ``gpu_sharing_env.registry.make_policy(name)`` and every command line
find them without this package being imported by anything below it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpu_sharing_env.registry import UnknownPolicyError, make_policy
from gpu_sharing_gym.baselines.base import HeuristicPolicy, Policy

if TYPE_CHECKING:
    from gpu_sharing_gym.baselines.antman import AntMan
    from gpu_sharing_gym.baselines.gandiva import Gandiva
    from gpu_sharing_gym.baselines.gpulet import GPULet
    from gpu_sharing_gym.baselines.gpupool import GPUPool
    from gpu_sharing_gym.baselines.horus import Horus
    from gpu_sharing_gym.baselines.muxflow import MuxFlow
    from gpu_sharing_gym.baselines.pai import LoadBalance, ReservePack, SjfPredicted
    from gpu_sharing_gym.baselines.reference import (
        FifoExclusive,
        FirstFit,
        RandomPolicy,
        TimeSharing,
    )
    from gpu_sharing_gym.baselines.speed_sjf import SpeedSJF, SpeedSJFQueue

#: Registry name -> ``module:class`` (the same table as the entry points in ``pyproject.toml``).
#: Imported on first use only: importing this package (which every ``gpu_sharing_gym.baselines.*``
#: module does) must not pull in sklearn, scipy or networkx, which some policies need and a
#: trace replay of ``first_fit`` does not (``python -X importtime`` on ``gsg evaluate``).
_SPECS: dict[str, str] = {
    "fifo_exclusive": "reference:FifoExclusive",
    "first_fit": "reference:FirstFit",
    "time_sharing": "reference:TimeSharing",
    "random": "reference:RandomPolicy",
    "muxflow": "muxflow:MuxFlow",
    "gpupool": "gpupool:GPUPool",
    "gpulet": "gpulet:GPULet",
    "horus": "horus:Horus",
    "gandiva": "gandiva:Gandiva",
    "antman": "antman:AntMan",
    "reserve_pack": "pai:ReservePack",
    "load_balance": "pai:LoadBalance",
    "sjf_predicted": "pai:SjfPredicted",
    "speed_sjf": "speed_sjf:SpeedSJF",
    "speed_sjf_queue": "speed_sjf:SpeedSJFQueue",
}
_CLASSES = {spec.partition(":")[2]: spec for spec in _SPECS.values()}


def _load(spec: str) -> Any:
    import importlib

    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), attr)


def __getattr__(name: str) -> Any:
    """``POLICIES`` and the policy classes, imported when first asked for (PEP 562)."""
    if name == "POLICIES":
        table: dict[str, Callable[[], Policy]] = {k: _load(v) for k, v in _SPECS.items()}
        globals()["POLICIES"] = table
        return table
    if name in _CLASSES:
        cls = globals()[name] = _load(_CLASSES[name])
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "POLICIES",
    "AntMan",
    "FifoExclusive",
    "FirstFit",
    "GPULet",
    "GPUPool",
    "Gandiva",
    "HeuristicPolicy",
    "Horus",
    "LoadBalance",
    "MuxFlow",
    "Policy",
    "RandomPolicy",
    "ReservePack",
    "SjfPredicted",
    "SpeedSJF",
    "SpeedSJFQueue",
    "TimeSharing",
    "UnknownPolicyError",
    "make_policy",
]
