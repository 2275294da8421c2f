"""The floor under a ``GpuSharing-v2`` step: an env that computes nothing and returns v2's
observation (fresh copies of one real observation's arrays) and action mask through
``gymnasium.make``'s wrappers, stepped as ``scripts/bench_step_cartpole.py`` steps v2 (a random
legal action drawn from the mask), beside CartPole-v1 in the same process (least CPU time over
``R`` repeats of ``K`` steps). What is left of issue 51's 0.2x CartPole bar for the simulator
and the candidate builder is ``5 x CartPole's step - the floor``. Prints one JSON line::

    PYTHONPATH=. R=3 K=20000 python scripts/bench_step_floor.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
from bench_step_cartpole import cartpole_once  # (scripts/ is on the path when run)

import gpu_sharing_env  # noqa: F401  (registers GpuSharing-v2)
from gpu_sharing_env.config import load_scenario

R, K = int(os.environ.get("R", "3")), int(os.environ.get("K", "20000"))
real = gym.make("GpuSharing-v2", scenario=load_scenario("default"))
OBS, INFO = real.reset(seed=0)


class Floor(gym.Env[Any, Any]):
    """v2's spaces; every step returns fresh copies of one real observation and its mask."""

    def __init__(self) -> None:
        self.observation_space = real.observation_space
        self.action_space = real.action_space

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return {k: v.copy() for k, v in OBS.items()}, {"action_mask": INFO["action_mask"].copy()}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs = {k: v.copy() for k, v in OBS.items()}
        return obs, 0.0, False, False, {"action_mask": INFO["action_mask"].copy()}


gym.register("GpuSharingFloor-v0", entry_point=Floor)  # type: ignore[arg-type]


def masked(env: gym.Env[Any, Any], k: int) -> float:
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    t0 = time.process_time()
    for _ in range(k):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        if te or tr:
            _, info = env.reset()
    return (time.process_time() - t0) / k * 1e6


def main() -> None:
    cp, fl = gym.make("CartPole-v1"), gym.make("GpuSharingFloor-v0")
    c = min(cartpole_once(cp, K) for _ in range(R))
    f = min(masked(fl, K) for _ in range(R))
    c = min(c, min(cartpole_once(cp, K) for _ in range(R)))
    shapes = {k: list(v.shape) for k, v in OBS.items()}
    print(
        json.dumps(
            {
                "obs": shapes,
                "cartpole_us": round(c, 2),
                "floor_us": round(f, 2),
                "floor_x": round(c / f, 3),
                "left_for_the_step_at_0.2x_us": round(5 * c - f, 1),
                "load": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
