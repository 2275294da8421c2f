"""The paired reward's reference curves are cached (memory and disk) without changing a reward,
and training seeds can come from a fixed pool (issue 22, item 7)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_gym.agents import envs
from gpu_sharing_gym.agents.config import resolve_hyperparams
from gpu_sharing_gym.agents.envs import (
    CURVES,
    TRAIN_SEED_MIN,
    PairedReward,
    TrainSeeds,
    curve_key,
    train_seed_pool,
)

SEEDS = (1_000_003, 1_000_004, 1_000_003, 1_000_004, 1_000_003)


def _rollout(env: gym.Env[Any, Any], seeds: tuple[int, ...]) -> list[tuple[float, ...]]:
    """Every reward (and the reference's return) of one episode per seed, random legal actions
    from a fixed stream."""
    rng = np.random.default_rng(5)
    out = []
    for seed in seeds:
        _, info = env.reset(seed=seed)
        rewards, done = [], False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            _, r, done, trunc, info = env.step(int(legal[rng.integers(legal.size)]))
            rewards.append(r)
            done = done or trunc
        out.append((*rewards, info.get("reference_jct_return", np.nan)))
    return out


def _paired(**kw: Any) -> PairedReward:
    return PairedReward(
        gym.make("GpuSharing-v0", scenario="default", reward="jct"), "speed_sjf", **kw
    )


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    CURVES.clear()
    yield
    CURVES.clear()


def test_cached_rewards_are_identical(tmp_path: Path) -> None:
    plain = _rollout(_paired(cache=False), SEEDS)
    assert len(CURVES) == 0

    cached = _rollout(_paired(), SEEDS)
    assert cached == plain  # bit for bit: the same floats
    assert (CURVES.misses, CURVES.hits) == (2, 3)

    # On disk: a first process fills the directory, a second (fresh memory) reads it.
    CURVES.clear()
    assert _rollout(_paired(cache_dir=tmp_path), SEEDS) == plain
    assert len(list(tmp_path.glob("*.npz"))) == 2
    CURVES.clear()
    assert _rollout(_paired(cache_dir=tmp_path), SEEDS) == plain
    assert (CURVES.misses, CURVES.disk_hits, CURVES.hits) == (0, 2, 3)


def test_bad_cache_file_is_recomputed(tmp_path: Path) -> None:
    plain = _rollout(_paired(cache=False), SEEDS[:1])
    _rollout(_paired(cache_dir=tmp_path), SEEDS[:1])
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not an npz")
    CURVES.clear()
    assert _rollout(_paired(cache_dir=tmp_path), SEEDS[:1]) == plain
    assert CURVES.misses == 1
    with np.load(path, allow_pickle=False) as f:  # rewritten, plain arrays
        assert f["times"].dtype == np.float64


def test_lru_is_bounded() -> None:
    cache = envs.ReferenceCurveCache(maxsize=2)
    for k in "abc":
        cache.get(k, lambda: (np.zeros(2), np.ones(2)))
    assert len(cache) == 2
    cache.get("a", lambda: (np.zeros(2), np.ones(2)))
    assert cache.misses == 4  # "a" was evicted first


def test_key_covers_what_the_curve_depends_on(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_scenario("default")
    key = curve_key(cfg, "speed_sjf", 1_000_003)
    assert key == curve_key(load_scenario("default"), "speed_sjf", 1_000_003)
    assert key != curve_key(cfg, "antman", 1_000_003)
    assert key != curve_key(cfg, "speed_sjf", 1_000_004)
    assert key != curve_key(dataclasses.replace(cfg, tick_s=cfg.tick_s * 2), "speed_sjf", 1_000_003)
    off = dataclasses.replace(cfg.workload.offline, max_jobs=7)
    other = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, offline=off))
    assert key != curve_key(other, "speed_sjf", 1_000_003)
    monkeypatch.setattr(envs, "MODEL_VERSION", envs.MODEL_VERSION + 1)
    assert key != curve_key(cfg, "speed_sjf", 1_000_003)


def test_training_seed_pool() -> None:
    pool = train_seed_pool(4)
    assert len(set(pool.tolist())) == 4 and pool.min() >= TRAIN_SEED_MIN
    assert train_seed_pool(6)[:4].tolist() == pool.tolist()  # fixed, a prefix
    env = TrainSeeds(gym.make("GpuSharing-v0", scenario="default"), seed_pool=4)
    seen = set()
    env.reset(seed=0)
    for _ in range(12):
        env.reset()
        seen.add(int(env.unwrapped.episode_seed))  # type: ignore[attr-defined]
    assert seen <= set(pool.tolist()) and len(seen) > 1
    settings, _, resolved = resolve_hyperparams(
        {"default": {"train_seed_pool": 64, "paired_cache_dir": "curves"}},
        "r.yaml",
        "default",
        "maskable_ppo",
    )
    assert settings.train_seed_pool == 64 and resolved["paired_cache_dir"] == "curves"
    with pytest.raises(Exception, match="train_seed_pool"):
        resolve_hyperparams({"default": {"train_seed_pool": -1}}, "r.yaml", "default", "ppo")
