"""Resets of ``default`` for instruction counts: an episode's start, reset and first fit.

One whole warm-up episode (seed 999, random legal actions: with workload version 3 the cluster's
past is drawn and fitted once, here), then ``K`` resets of ``GpuSharing-v2`` (seeds 1000, ...),
each followed with ``F=1`` by the predictor's first fit (as the episode's first estimate makes
it). Run it under callgrind with ``K=20`` and ``K=0``; the difference over 20 is a reset (with
``F=1``: and its first fit)::

    PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 PYTHONPATH=$PWD K=20 F=1 \\
        valgrind --tool=callgrind python scripts/callgrind_resets.py

(docs/notes/2026-12-01-workload-v3-shared-past.md's figures.)
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import sklearn.tree  # noqa: F401  (imported before counting starts, as the predictor does)

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario


def main() -> None:
    env = gym.make("GpuSharing-v2", scenario=load_scenario("default"))
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=999)
    done = False
    while not done:
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        done = te or tr
    k = int(os.environ.get("K", "20"))
    fit = os.environ.get("F", "0") == "1"
    sim = env.unwrapped.sim  # type: ignore[attr-defined]
    for seed in range(1000, 1000 + k):
        env.reset(seed=seed)
        pred = sim.predictor
        if fit and pred is not None and pred._stale:
            pred._refit()


if __name__ == "__main__":
    main()
