"""Schedulers: reference policies and re-implementations of published GPU-sharing schedulers.

``POLICIES[name]()`` builds a policy; every entry follows :class:`gpu_sharing_env.policy.Policy`.
The package registers these names in the ``gpu_sharing_gym.policies`` entry-point group (see
``pyproject.toml``), so ``gpu_sharing_env.registry.make_policy(name)`` and every command line
find them without this package being imported by anything below it.
"""

from __future__ import annotations

from collections.abc import Callable

from baselines.antman import AntMan
from baselines.base import HeuristicPolicy, Policy
from baselines.gandiva import Gandiva
from baselines.gpulet import GPULet
from baselines.gpupool import GPUPool
from baselines.horus import Horus
from baselines.muxflow import MuxFlow
from baselines.pai import LoadBalance, ReservePack, SjfPredicted
from baselines.reference import FifoExclusive, FirstFit, RandomPolicy, TimeSharing
from baselines.speed_sjf import SpeedSJF
from gpu_sharing_env.registry import UnknownPolicyError, make_policy

POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo_exclusive": FifoExclusive,
    "first_fit": FirstFit,
    "time_sharing": TimeSharing,
    "random": RandomPolicy,
    "muxflow": MuxFlow,
    "gpupool": GPUPool,
    "gpulet": GPULet,
    "horus": Horus,
    "gandiva": Gandiva,
    "antman": AntMan,
    "reserve_pack": ReservePack,
    "load_balance": LoadBalance,
    "sjf_predicted": SjfPredicted,
    "speed_sjf": SpeedSJF,
}


__all__ = ["POLICIES", "HeuristicPolicy", "Policy", "UnknownPolicyError", "make_policy"]
