"""An episode's start on a scenario: the reset's CPU time and the predictor's fits, per episode.

One whole warm-up episode first (seed 999: with workload version 3 the cluster's past is drawn
and its warm start fitted once, here), then ``N`` episodes (seeds 1000, 1001, ...) of random
legal actions from ``default_rng(0)``, ``GpuSharing-v2``; the predictor's fits (``_fit_tree``,
module-level: ``OnlinePredictor`` is an extension type where compiled) are timed.
``PYTHONPATH`` picks the tree, so two trees alternate with the same interpreter. Prints one
line::

    PYTHONPATH=$PWD python scripts/bench_episode_start.py [N=40] [SCENARIO=default]

(``reset+firstfit_ms``: the reset and the episode's first fit, per episode; the figures of
docs/notes/2026-12-01-workload-v3-shared-past.md.)
"""

from __future__ import annotations

import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.workload import predictor


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    name = sys.argv[2] if len(sys.argv) > 2 else "default"
    env = gym.make("GpuSharing-v2", scenario=load_scenario(name))
    fits = [0.0, 0, 0.0]  # seconds in fits, fits, seconds in first fits
    first = [True]  # (the episode's first fit is still to come)
    fit_tree = predictor._fit_tree

    def timed(*args: Any) -> Any:
        t = time.process_time()
        out = fit_tree(*args)
        d = time.process_time() - t
        fits[0] += d
        fits[1] += 1
        if first[0]:
            fits[2] += d
            first[0] = False
        return out

    predictor._fit_tree = timed
    rng = np.random.default_rng(0)

    def episode(seed: int) -> tuple[float, int]:
        first[0] = True
        t0 = time.process_time()
        _, info = env.reset(seed=seed)
        reset_s = time.process_time() - t0
        steps, done = 0, False
        while not done:
            legal = np.flatnonzero(info["action_mask"].view(bool))
            _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
            steps += 1
            done = te or tr
        return reset_s, steps

    t = time.process_time()
    episode(999)
    first_s = time.process_time() - t
    fits[:] = [0.0, 0, 0.0]
    reset_s = 0.0
    steps = 0
    t = time.process_time()
    for seed in range(1000, 1000 + n):
        r, k = episode(seed)
        reset_s += r
        steps += k
    total_s = time.process_time() - t
    step_s = total_s - reset_s
    print(
        f"{name} first_episode_ms {first_s * 1e3:.1f} eps {n} steps/ep {steps / n:.1f}"
        f" reset_ms {reset_s / n * 1e3:.2f} fits/ep {fits[1] / n:.2f}"
        f" first_fit_ms/ep {fits[2] / n * 1e3:.2f} fit_ms/ep {fits[0] / n * 1e3:.2f}"
        f" step_us {step_s / steps * 1e6:.1f} reset+firstfit_ms {(reset_s + fits[2]) / n * 1e3:.2f}"
    )


if __name__ == "__main__":
    main()
