"""Training environments: ``GpuSharing-v0`` with a training seed range, monitored, vectorised.

Episode seeds below :data:`TRAIN_SEED_MIN` are reserved for evaluation: the leaderboard and
``scripts/evaluate.py`` use seeds ``0..N-1``, the training script's periodic evaluation uses
``1000..``. Training episodes draw their seeds from ``[TRAIN_SEED_MIN, 2**31)``, so an agent
never trains on an episode it is later evaluated on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import gpu_sharing_env  # noqa: F401  (registers GpuSharing-v0)
from agents.policy import HINT
from baselines.base import HeuristicPolicy
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.view import ClusterView

#: Smallest training episode seed; every seed below it is held out for evaluation.
TRAIN_SEED_MIN = 1_000_000
_SEED_BOUND = 2**31 - 1


def work_conserving(mask: np.ndarray) -> np.ndarray:
    """``mask`` without *wait* when some placement is legal (a fresh array)."""
    out = np.array(mask, copy=True)
    if out[1:].any():
        out[0] = 0
    return out


def expert_hint(expert: HeuristicPolicy, env: Any, mask: np.ndarray) -> np.ndarray:
    """One-hot (float32) of the action ``expert`` would take now in ``env`` (unwrapped)."""
    hint = np.zeros(mask.shape[0], dtype=np.float32)
    hint[expert.act(ClusterView(env.sim, env.codec), None, mask)] = 1.0
    return hint


def make_expert(name: str) -> HeuristicPolicy:
    policy = make_policy(name)
    if not isinstance(policy, HeuristicPolicy) or policy.mechanisms:
        raise ValueError(
            f"expert {name!r}: must be a heuristic without cluster mechanisms (its decisions "
            f"must be expressible as env actions)"
        )
    return policy


class ExpertHint(gym.ObservationWrapper[Any, Any, Any]):
    """Adds ``obs["hint"]``: a heuristic's proposed action, one-hot over the action space.

    The agent's logits add ``hint_gain x hint`` (residual policy learning: Silver et al.,
    "Residual Policy Learning", 2018), so the agent starts from the heuristic and learns when
    to deviate from it. The heuristic sees only what any policy sees (``ClusterView``).
    """

    def __init__(self, env: gym.Env[Any, Any], expert: str) -> None:
        super().__init__(env)
        self.expert = make_expert(expert)
        base = env.observation_space
        n = int(env.action_space.n)  # type: ignore[attr-defined]
        self.observation_space = spaces.Dict(
            {**base.spaces, HINT: spaces.Box(0.0, 1.0, (n,), np.float32)}  # type: ignore[attr-defined]
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.expert.reset(int(self.env.unwrapped.episode_seed))  # type: ignore[attr-defined]
        return self.observation(obs), info

    def observation(self, observation: Any) -> Any:
        env = self.env.unwrapped
        mask = env.action_masks()  # type: ignore[attr-defined]
        return {**observation, HINT: expert_hint(self.expert, env, mask)}


class TrainSeeds(gym.Wrapper[Any, Any, Any, Any]):
    """``reset()`` without a seed draws the episode seed from the training range.

    With ``conserving``, the action mask also hides *wait* whenever a job can be placed (a
    work-conserving scheduler; see :func:`work_conserving`).
    """

    def __init__(self, env: gym.Env[Any, Any], conserving: bool = False) -> None:
        super().__init__(env)
        self._rng = np.random.default_rng(0)
        self.conserving = conserving

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            # A seed here seeds the stream of training seeds (SB3 seeds each env once).
            self._rng = np.random.default_rng(seed)
        episode_seed = int(self._rng.integers(TRAIN_SEED_MIN, _SEED_BOUND))
        return self.env.reset(seed=episode_seed, options=options)

    def action_masks(self) -> np.ndarray:
        mask: np.ndarray = self.env.unwrapped.action_masks()  # type: ignore[attr-defined]
        return work_conserving(mask) if self.conserving else mask


def make_env(
    scenario: str,
    env_kwargs: Mapping[str, Any] | None = None,
    conserving: bool = False,
    hint: str | None = None,
) -> gym.Env[Any, Any]:
    """One monitored training env (episode seeds from the training range)."""
    env: gym.Env[Any, Any] = gym.make("GpuSharing-v0", scenario=scenario, **dict(env_kwargs or {}))
    if hint:
        env = ExpertHint(env, hint)
    return Monitor(TrainSeeds(env, conserving))


def make_vec_env(
    scenario: str,
    n_envs: int,
    seed: int,
    env_kwargs: Mapping[str, Any] | None = None,
    conserving: bool = False,
    hint: str | None = None,
) -> VecEnv:
    """``n_envs`` training envs: in this process for 1, in subprocesses for more."""
    fns: list[Callable[[], gym.Env[Any, Any]]] = [
        lambda: make_env(scenario, env_kwargs, conserving, hint) for _ in range(n_envs)
    ]
    venv: VecEnv = DummyVecEnv(fns) if n_envs == 1 else SubprocVecEnv(fns, start_method="spawn")
    venv.seed(seed)
    return venv
