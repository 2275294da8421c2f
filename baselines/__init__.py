"""Schedulers: reference policies and re-implementations of published GPU-sharing schedulers.

``POLICIES[name]()`` builds a policy; every entry follows :class:`gpu_sharing_env.policy.Policy`.
The package registers these names in the ``gpu_sharing_gym.policies`` entry-point group (see
``pyproject.toml``), so ``gpu_sharing_env.registry.make_policy(name)`` and every command line
find them without this package being imported by anything below it.
"""

from __future__ import annotations

from collections.abc import Callable

from gpu_sharing_env.registry import UnknownPolicyError, make_policy
from gpu_sharing_gym.baselines.antman import AntMan
from gpu_sharing_gym.baselines.base import HeuristicPolicy, Policy
from gpu_sharing_gym.baselines.gandiva import Gandiva
from gpu_sharing_gym.baselines.gpulet import GPULet
from gpu_sharing_gym.baselines.gpupool import GPUPool
from gpu_sharing_gym.baselines.horus import Horus
from gpu_sharing_gym.baselines.muxflow import MuxFlow
from gpu_sharing_gym.baselines.pai import LoadBalance, ReservePack, SjfPredicted
from gpu_sharing_gym.baselines.reference import FifoExclusive, FirstFit, RandomPolicy, TimeSharing
from gpu_sharing_gym.baselines.speed_sjf import SpeedSJF

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
