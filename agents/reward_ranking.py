"""Does the training reward rank policies as the leaderboard does?

The leaderboard ranks policies by mean ``jct_mean_s`` among those whose **mean** SLO attainment
over the seeds meets the scenario's target (DESIGN.md). The ``jct`` reward
(:mod:`gpu_sharing_env.envs.rewards`) charges every **episode** whose attainment falls short,
``λ · max(0, target − A)``. By Jensen's inequality the mean of that hinge is at least the hinge of
the mean, so a policy that meets the target on average still pays for each heavy episode it
lets through, and a reward can prefer a policy that the leaderboard ranks lower: one that
protects the services in every episode at a higher JCT.

:func:`episode_returns` runs each policy over a set of seeds and records, per episode, the
metrics and the ``jct`` reward's return for several SLO weights λ. The ``jct`` reward is a
difference of potentials (the offline job-seconds in the system and the SLO shortfall), so its
return over an episode is one call of the reward at the end after ``reset`` at the start: the
sum of the per-step rewards the env hands out (tested). The paired reward
(``agents.envs.PairedReward``) adds the reference heuristic's return on the same seed, the same
for every policy, so it ranks policies as the plain reward does.

:func:`rank_table` puts the two rankings side by side. ``python scripts/reward_ranking.py``
is the command line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.envs.rewards import JctReward
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_gym.agents.envs import train_seed_pool

#: The SLO weights compared by default: the ``jct`` reward's own (``rewards.SLO_WEIGHT``), half
#: and a quarter of it.
DEFAULT_SLO_WEIGHTS = (100.0, 50.0, 25.0)


def pool_seeds(n: int, pool: int = 512) -> list[int]:
    """The first ``n`` seeds of the training pool of ``pool`` seeds (``train_seed_pool``): the
    episodes an agent trained with ``train_seed_pool: pool`` sees."""
    if not 1 <= n <= pool:
        raise ValueError(f"seeds: must be between 1 and the pool's {pool} (got {n})")
    return [int(s) for s in train_seed_pool(pool)[:n]]


def return_column(slo_weight: float) -> str:
    """The column of :func:`episode_returns` holding the return at ``slo_weight``."""
    return f"return_{slo_weight:g}"


def episode_returns(
    policies: Sequence[str],
    scenario: ScenarioConfig,
    seeds: Iterable[int],
    slo_weights: Sequence[float] = DEFAULT_SLO_WEIGHTS,
) -> pd.DataFrame:
    """One row per (policy, seed): ``policy``, ``seed``, ``jct_mean_s``, ``slo_attainment``,
    and the ``jct`` reward's episode return at each SLO weight (:func:`return_column`).

    ``policies`` are :func:`gpu_sharing_env.registry.make_policy` specs (a registered name,
    ``module:Class`` or a checkpoint path).
    """
    seeds = list(seeds)
    sim = make_simulator(scenario)
    rows: list[dict[str, Any]] = []
    for spec in policies:
        policy = make_policy(spec)
        for seed in seeds:
            rewards = [JctReward(slo_weight=w) for w in slo_weights]

            def start(s: Simulator, rewards: list[JctReward] = rewards) -> None:
                for r in rewards:
                    r.reset(s)

            m = run_episode(policy, sim, seed, on_reset=start)
            row: dict[str, Any] = {
                "policy": spec,
                "seed": seed,
                "jct_mean_s": m["jct_mean_s"],
                "slo_attainment": m["slo_attainment"],
            }
            for w, r in zip(slo_weights, rewards, strict=True):
                row[return_column(w)] = r(sim)
            rows.append(row)
    return pd.DataFrame(rows)


def rank_table(returns: pd.DataFrame, slo_target: float) -> pd.DataFrame:
    """Per policy: mean ``jct_mean_s``, mean ``slo_attainment``, episodes below the target,
    whether the mean meets it, the leaderboard's rank (``gpu_sharing_gym.leaderboard``'s rule:
    meeting the target first, then mean JCT) and, per SLO weight, the mean return and the rank
    it gives (1 = highest return)."""
    ret_cols = [c for c in returns.columns if c.startswith("return_")]
    g = returns.groupby("policy", sort=False)
    out = pd.DataFrame(
        {
            "jct_mean_s": g["jct_mean_s"].mean(),
            "slo_attainment": g["slo_attainment"].mean(),
            "episodes_below": g["slo_attainment"].apply(lambda a: int((a < slo_target).sum())),
            "n": g.size(),
        }
    )
    # NaN attainment (no services) meets the target, as on the leaderboard
    out["meets_slo"] = out["slo_attainment"].isna() | (out["slo_attainment"] >= slo_target)
    key = pd.DataFrame({"miss": ~out["meets_slo"], "jct": out["jct_mean_s"]})
    out["rank_leaderboard"] = (
        key.apply(tuple, axis=1).rank(method="min").astype(int)
        if len(key)
        else pd.Series(dtype=int)
    )
    for c in ret_cols:
        out[c] = g[c].mean()
        out[f"rank_{c.removeprefix('return_')}"] = (
            out[c].rank(ascending=False, method="min").astype(int)
        )
    return out.reset_index()
