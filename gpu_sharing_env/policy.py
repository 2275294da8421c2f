"""The one Policy protocol for everything that schedules (heuristics and RL agents alike).

A policy sees what a real scheduler could see: a read-only :class:`ClusterView` (estimates, never
the truth, never future arrivals), plus the env's observation and action mask, and returns an
action in the env's action space. Heuristics think in :class:`Decision` objects and let the
view's codec translate (:class:`HeuristicPolicy`).

The protocol lives in the core so that every layer above (``baselines``, ``agents``, the
evaluation harness ``gsg``) depends on it, and none on another for it. Policies are found by
name through :mod:`gpu_sharing_env.registry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView


@runtime_checkable
class Policy(Protocol):
    """Anything that schedules.

    Attributes:
        name: Registry name (leaderboard row).
        oracle: True if the policy reads hidden truth (marked on the leaderboard).
        mechanisms: Cluster mechanisms the policy deploys (``protection``, ``dynamic_sm``),
            switched on in the simulator before each episode.
    """

    @property
    def name(self) -> str: ...

    @property
    def oracle(self) -> bool: ...

    @property
    def mechanisms(self) -> Mapping[str, bool]: ...

    def reset(self, seed: int) -> None:
        """Called at the start of every episode."""
        ...

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        """Choose an action (0 = wait) given the snapshot, observation and action mask."""
        ...


class HeuristicPolicy:
    """Base class for heuristics: implement :meth:`decide`; ``act`` encodes it."""

    name: ClassVar[str] = "heuristic"
    oracle: ClassVar[bool] = False
    mechanisms: ClassVar[Mapping[str, bool]] = {}
    #: Which queued jobs ``decide`` may place when the runner drives it: ``"window"`` (the
    #: env's queue window) or ``"queue"`` (every queued job, ``ClusterView.decidable``; the
    #: runner sets ``Simulator.decision_scope`` to it). Under the Gymnasium env (``act``) it is
    #: always the window.
    decision_scope: ClassVar[str] = "window"
    #: The queue's order, so which jobs the window holds, when the runner drives it:
    #: ``"fifo"`` or ``"predicted"`` (``Simulator.window_order``; the runner sets it).
    window_order: str = "fifo"
    #: Whether :meth:`decide` reads duration estimates (``est_work_s``, ``est_remaining_s``,
    #: ``ClusterView.group_stats``, ``sjf_facts``, ``Simulator.migration_candidates``, the
    #: ``"predicted"`` window order). A class that declares False in its own body (the
    #: declaration is not inherited: a subclass may read what its base did not) is evaluated
    #: by ``evaluation.runner.evaluate`` without the duration predictor
    #: (``Simulator.reset(estimates=False)``): the same records, without the predictor's work.
    #: Nothing checks the declaration at run time beyond NaN estimates and the reads that raise
    #: ``NoEstimatesError``.
    reads_estimates: ClassVar[bool] = True

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def decide(self, view: ClusterView) -> Decision | None:
        """The next placement, or None to wait for the next event."""
        raise NotImplementedError

    def env_decision(self, view: ClusterView) -> Decision | None:
        """The decision :meth:`act` encodes: :meth:`decide`'s, for a policy whose decisions
        are all env actions (placements of window jobs). A policy that also decides what the
        action codec cannot express (Gandiva's migrations) returns what it does under the
        env instead, so a planner can roll it out as the env would run it."""
        return self.decide(view)

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        return view.action_of(self.env_decision(view))


__all__ = ["HeuristicPolicy", "Policy"]
