"""agents/reward_ranking.py: the jct reward's episode return as one call, and the two rankings."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("stable_baselines3")

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.rewards import JctReward
from gpu_sharing_gym.agents.reward_ranking import (
    episode_returns,
    pool_seeds,
    rank_table,
)

ROOT = Path(__file__).resolve().parents[1]


def test_episode_return_is_the_sum_of_the_step_rewards() -> None:
    """The jct reward telescopes: reset at the start and one call at the end give the return
    the env hands out step by step (what episode_returns relies on)."""
    env = gym.make("GpuSharing-v0", scenario="default", reward="jct")
    rng = np.random.default_rng(3)
    for seed in (5, 6):
        _, info = env.reset(seed=seed)
        sim = env.unwrapped.sim  # type: ignore[attr-defined]
        whole = JctReward()
        whole.reset(sim)
        total, done = 0.0, False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            _, r, term, trunc, info = env.step(int(rng.choice(legal)))
            total += float(r)
            done = term or trunc
        assert math.isclose(whole(sim), total, rel_tol=1e-9, abs_tol=1e-9)


def test_rank_table_puts_the_rankings_side_by_side() -> None:
    # A meets the target on average (0.96) with one heavy episode below it; B protects every
    # episode at a higher JCT. The leaderboard ranks A first; a large enough λ ranks B first.
    rows = []
    for seed, (ja, aa, jb, ab) in enumerate([(3600, 0.99, 4000, 1.0), (3600, 0.93, 4400, 0.99)]):
        for pol, jct, att in (("A", ja, aa), ("B", jb, ab)):
            row = {"policy": pol, "seed": seed, "jct_mean_s": jct, "slo_attainment": att}
            for w in (100.0, 0.0):
                row[f"return_{w:g}"] = -jct / 3600 - w * max(0.0, 0.95 - att)
            rows.append(row)
    t = rank_table(pd.DataFrame(rows), 0.95).set_index("policy")
    assert t.loc["A", "episodes_below"] == 1 and t.loc["B", "episodes_below"] == 0
    assert bool(t.loc["A", "meets_slo"]) and bool(t.loc["B", "meets_slo"])
    assert t.loc["A", "rank_leaderboard"] == 1 and t.loc["B", "rank_leaderboard"] == 2
    assert t.loc["B", "rank_100"] == 1 and t.loc["A", "rank_100"] == 2
    assert t.loc["A", "rank_0"] == 1
    assert math.isclose(t.loc["A", "return_100"], (-1 - 1 - 100 * 0.02) / 2)


def test_episode_returns_differ_by_the_slo_term() -> None:
    seeds = pool_seeds(2)
    assert seeds == pool_seeds(3)[:2] and min(seeds) >= 1_000_000
    df = episode_returns(["speed_sjf", "gandiva"], load_scenario("default"), seeds, (100.0, 0.0))
    assert len(df) == 4 and set(df["policy"]) == {"speed_sjf", "gandiva"}
    for _, r in df.iterrows():
        # the JCT part alone is minus the mean hours in system (all jobs finish on default)
        assert math.isclose(r["return_0"], -r["jct_mean_s"] / 3600, rel_tol=0.05)
        slo = r["return_100"] - r["return_0"]
        assert math.isclose(slo, -100 * max(0.0, 0.95 - r["slo_attainment"]), abs_tol=1e-9)


def test_cli_bad_policy_is_one_line() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "reward_ranking.py"), "--policy", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reward_ranking:") and "nope" in lines[0]
