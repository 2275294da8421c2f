"""Prioritised replay of the pooled training seeds by the agent's regret against the paired
reference (``SeedReplay``, issue 25)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from gpu_sharing_gym.agents.envs import SeedReplay, TrainSeeds, make_vec_env, train_seed_pool


class _OneStep(gym.Env[np.ndarray, int]):
    """One-step episodes whose reward is minus a regret fixed per seed."""

    observation_space = spaces.Box(0.0, 1.0, (1,))
    action_space = spaces.Discrete(1)

    def __init__(self, regret: dict[int, float]) -> None:
        self.regret = regret
        self.seed_ = -1

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.seed_ = int(seed) if seed is not None else -1
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros(1, dtype=np.float32), -self.regret.get(self.seed_, 0.0), True, False, {}


def _counts(regret_of_index: dict[int, float], draws: int, rng_seed: int = 0) -> np.ndarray:
    pool = train_seed_pool(16)
    env = _OneStep({int(pool[i]): r for i, r in regret_of_index.items()})
    table = SeedReplay(pool)
    wrapped = TrainSeeds(env, seed_pool=16, replay=table)
    wrapped.reset(seed=rng_seed)
    counts = np.zeros(16, dtype=int)
    index = {int(s): i for i, s in enumerate(pool)}
    for _ in range(draws):
        wrapped.reset()
        counts[index[env.seed_]] += 1
        wrapped.step(0)
    return counts


def test_replay_goes_where_the_agent_trails() -> None:
    counts = _counts({3: 5.0, 7: 1.0}, 400)
    assert counts.min() >= 1  # every seed is played (each needs a score)
    assert counts.argmax() == 3 and counts[3] > counts[7] > np.median(counts)
    # staleness keeps the seeds it wins in play: each comes back
    assert np.sort(counts)[:14].min() >= 3
    # the same stream of draws from the same rng seed
    assert counts.tolist() == _counts({3: 5.0, 7: 1.0}, 400).tolist()


def test_scores_follow_the_latest_episode() -> None:
    table = SeedReplay(train_seed_pool(4))
    table.update(2, -3.0)
    table.update(1, 2.0)  # the agent beat the reference there: no regret
    assert table.score.tolist() == [0.0, 0.0, 3.0, 0.0]
    table.update(2, 0.5)
    assert table.score[2] == 0.0
    with pytest.raises(ValueError, match="beta"):
        SeedReplay(train_seed_pool(4), beta=0.0)


def test_replay_needs_a_pool_and_a_reference() -> None:
    with pytest.raises(ValueError, match="train_seed_pool"):
        TrainSeeds(_OneStep({}), seed_pool=0, replay=SeedReplay(train_seed_pool(4)))
    with pytest.raises(ValueError, match="seed_replay"):
        make_vec_env("default", 1, 0, seed_pool=4, seed_replay=True)
