"""Schedulers: reference policies and re-implementations of published GPU-sharing schedulers.

``POLICIES[name]()`` builds a policy; every entry follows :class:`baselines.base.Policy`.
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
}


class UnknownPolicyError(ValueError):
    """The policy name is not registered; the message lists the names."""


def make_policy(name: str) -> Policy:
    """Build a registered policy by name, a planning agent (``agents.planner.PLANNERS``, e.g.
    ``planner``), or load a trained agent: a shipped name (``agents/pretrained/NAME.zip``, e.g.
    ``ppo_default``) or a path to a ``model.zip``."""
    if name in POLICIES:
        return POLICIES[name]()
    from agents.agent import AgentLoadError, is_agent_ref, load_agent, pretrained_names
    from agents.planner import PLANNERS

    if name in PLANNERS:
        return PLANNERS[name]()

    if is_agent_ref(name):
        try:
            return load_agent(name)
        except AgentLoadError as e:
            raise UnknownPolicyError(str(e)) from None
    known = [*sorted(POLICIES), *sorted(PLANNERS), *pretrained_names()]
    raise UnknownPolicyError(
        f"unknown policy {name!r} (known: {', '.join(known)}; or a path to an agent's model.zip)"
    )


__all__ = ["POLICIES", "HeuristicPolicy", "Policy", "UnknownPolicyError", "make_policy"]
