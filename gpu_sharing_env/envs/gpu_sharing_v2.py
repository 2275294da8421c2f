"""``GpuSharing-v2``: the action is one of the moves the simulator accepts now (candidates)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.envs.candidates import (
    N_FEATURES,
    CandidateBuilder,
    Candidates,
)
from gpu_sharing_env.envs.gpu_sharing import _SEED_BOUND, GpuSharingEnv, Obs
from gpu_sharing_env.sim.engine import Decision

#: The default ``max_candidates``: above the most legal moves seen on ``default`` (parity test).
DEFAULT_MAX_CANDIDATES = 4096
#: ``global`` features: time / horizon, queued jobs (log), offline jobs left (share), empty
#: ready GPUs (share), candidates / ``max_candidates``.
GLOBAL_FEATURES_V2 = ("time", "queued_log", "offline_left", "empty_gpus", "candidates")
DECISION_SCOPES = ("queue", "window")


class GpuSharingEnvV2(GpuSharingEnv):
    """GPU-cluster scheduling where the action picks one candidate move (issue 53, item 1).

    ## Action Space

    ``Discrete(max_candidates)``. Each decision point enumerates, from the state alone, every
    move the simulator accepts (``gpu_sharing_env.envs.candidates``): index 0 holds (waits for
    the next event); then every queued job of the decision scope at every legal (first GPU,
    option), gangs included; then every running job to every empty, ready GPU and option where
    it may go (a migration: checkpoint, ``sharing.migration_s`` pause, progress kept).
    ``action_masks()`` marks the real candidates (``env.unwrapped.candidates.moves`` lists
    them as ``Decision`` s; ``index_of(decision)`` finds one); indices beyond them are illegal. More legal moves than ``max_candidates``
    raise ``TooManyCandidates`` (one line; pass a larger ``max_candidates``).

    ## Observation Space

    ``candidates``: ``max_candidates × len(CANDIDATE_FEATURES)`` float32 in [-1, 1], one row per
    candidate (the move's kind, the job as ``ClusterView`` gives it to a heuristic with its
    group history, the target GPU's type, node, residents and free capacity, the option, solo
    speed), zero rows beyond them; ``candidate_mask``: 1 for the real rows; ``global``:
    ``GLOBAL_FEATURES_V2``.

    ## Arguments

    v0's ``scenario``, ``reward``, ``reward_kwargs``, ``invalid_action``, ``render_mode`` and
    ``window_order``, plus ``max_candidates`` (default :data:`DEFAULT_MAX_CANDIDATES`),
    ``decision_scope`` (``"queue"``, the default: any queued job; ``"window"``: the first
    ``queue_window`` only, as under v0/v1 and for window heuristics) and ``mechanisms`` (cluster
    mechanisms such as ``{"protection": True}`` switched on at every reset, as the runner does
    for a policy that deploys them). Dynamics and rewards as v0: after a move that leaves
    nothing to decide, time advances to the next decision point.

    ## Version History

    * v2: candidate actions over the whole queue and migrations; candidate feature rows.
    * v1: option-agnostic observations. v0: initial version.
    """

    def __init__(
        self,
        scenario: str | os.PathLike[str] | ScenarioConfig = "default",
        reward: str = "jct",
        reward_kwargs: Mapping[str, Any] | None = None,
        invalid_action: Literal["noop", "raise"] = "noop",
        render_mode: str | None = None,
        window_order: str = "fifo",
        max_candidates: int = DEFAULT_MAX_CANDIDATES,
        decision_scope: str = "queue",
        mechanisms: Mapping[str, bool] | None = None,
    ) -> None:
        super().__init__(
            scenario, reward, reward_kwargs, invalid_action, render_mode, 0, window_order
        )
        n = max_candidates
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
            raise ValueError(f"max_candidates: must be an integer >= 2 (got {max_candidates!r})")
        if decision_scope not in DECISION_SCOPES:
            raise ValueError(
                f"decision_scope: must be one of {', '.join(DECISION_SCOPES)} "
                f"(got {decision_scope!r})"
            )
        try:
            self.mech = replace(self.cfg.mechanisms, **dict(mechanisms or {}))
        except TypeError as e:
            raise ValueError(f"mechanisms: {e}") from None
        self.max_candidates = n = int(n)
        self.decision_scope = decision_scope
        self.builder = CandidateBuilder(self.sim, n)
        self.candidates = Candidates([None], np.zeros((1, N_FEATURES), np.float32), 0)
        self.action_space = spaces.Discrete(n)
        self.observation_space = spaces.Dict(
            {
                "candidates": spaces.Box(-1.0, 1.0, (n, N_FEATURES), np.float32),
                "candidate_mask": spaces.Box(0.0, 1.0, (n,), np.float32),
                "global": spaces.Box(-1.0, 1.0, (len(GLOBAL_FEATURES_V2),), np.float32),
            }
        )
        self._mask = np.zeros(n, dtype=np.int8)
        self._mask[0] = 1

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Start an episode; ``seed`` seeds the simulator (the runner's episode for that seed
        with the same decision scope, window order and mechanisms)."""
        super(GpuSharingEnv, self).reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(_SEED_BOUND))
        self.episode_seed = int(seed)
        self.sim.reset(
            self.episode_seed,
            mechanisms=self.mech,
            decision_scope=self.decision_scope,
            window_order=self.window_order,
        )
        self.reward_fn.reset(self.sim)
        self._mask = self._build_mask()
        return self._observe(), self._info(invalid=None)

    def _decision(self, action: int) -> Decision:
        """The candidate move ``action`` (not hold) stands for (``step`` is v0's)."""
        d = self.candidates.moves[action]
        assert d is not None
        return d

    def index_of(self, d: Decision | None) -> int | None:
        """The action that carries out decision ``d`` now (0 for None), or None if ``d`` is
        not among the candidates."""
        return self.candidates.index_of(d)

    def explain(self, action: int) -> str | None:
        """Why ``action`` is illegal now, or None if it is legal."""
        if not 0 <= action < self.max_candidates:
            return f"action {action} out of range 0..{self.max_candidates - 1}"
        if action == 0:
            return None
        if self.sim.done:
            return "the episode is over"
        n = len(self.candidates.moves)
        if action >= n:
            return f"candidate {action} is padding ({n} candidates now)"
        return None

    def _build_mask(self) -> np.ndarray:
        self.candidates = self.builder.build()
        mask = np.zeros(self.max_candidates, dtype=np.int8)
        mask[: len(self.candidates.moves)] = 1
        return mask

    def _observe(self) -> Obs:
        sim = self.sim
        n = self.max_candidates
        k = len(self.candidates.moves)
        feats = np.zeros((n, N_FEATURES), dtype=np.float32)
        feats[:k] = self.candidates.features
        total, left = sim.offline_jobs
        c = sim.cluster
        empty = float(np.mean((c.n_res == 0) & c.ready)) if c.n_gpus else 0.0
        glob = np.array(
            [
                min(1.0, sim.now / max(sim.horizon_s, 1e-9)),
                min(1.0, math.log1p(len(sim.queue)) / math.log1p(1e4)),
                left / max(1, total),
                empty,
                k / n,
            ],
            dtype=np.float32,
        )
        return {
            "candidates": feats,
            "candidate_mask": self._mask.astype(np.float32),
            "global": glob,
        }
