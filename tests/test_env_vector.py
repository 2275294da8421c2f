"""GpuSharing-v0 in vector envs: Gymnasium's make_vec (sync, async) and SB3's VecEnvs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import gpu_sharing_env  # noqa: F401
from gpu_sharing_env.envs import GpuSharingEnv


def _legal(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.array([int(rng.choice(np.flatnonzero(m))) for m in masks])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec(mode: str) -> None:
    envs = gym.make_vec("GpuSharing-v0", num_envs=2, vectorization_mode=mode)
    try:
        rng = np.random.default_rng(0)
        obs, info = envs.reset(seed=[3, 3])
        assert obs["gpus"].shape == (2, envs.single_observation_space["gpus"].shape[0])
        assert np.array_equal(obs["gpus"][0], obs["gpus"][1])  # same seed, same start
        masks = info["action_mask"]
        assert masks.shape == (2, envs.single_action_space.n) and masks.dtype == np.int8
        for _ in range(10):
            a = _legal(masks, rng)
            obs, r, _term, _trunc, info = envs.step(a)
            assert r.shape == (2,) and obs in envs.observation_space
            masks = info["action_mask"]
            assert masks[:, 0].tolist() == [1, 1]
    finally:
        envs.close()


def test_make_vec_same_seed_same_steps_as_single_env() -> None:
    envs = gym.make_vec("GpuSharing-v0", num_envs=2, vectorization_mode="sync")
    single = gym.make("GpuSharing-v0")
    obs_v, info_v = envs.reset(seed=[5, 6])
    obs_s, info_s = single.reset(seed=5)
    assert np.array_equal(obs_v["jobs"][0], obs_s["jobs"])
    for _ in range(8):
        a = int(np.flatnonzero(info_s["action_mask"])[-1])
        b = int(np.flatnonzero(info_v["action_mask"][1])[0])
        obs_v, r_v, *_, info_v = envs.step(np.array([a, b]))
        obs_s, r_s, term, _, info_s = single.step(a)
        if term:
            break
        assert np.array_equal(obs_v["gpus"][0], obs_s["gpus"]) and r_v[0] == r_s
    envs.close()


@pytest.mark.parametrize("vec_cls", [DummyVecEnv, SubprocVecEnv])
def test_sb3_vec_envs(vec_cls: type) -> None:
    venv = make_vec_env(GpuSharingEnv, n_envs=2, seed=0, vec_env_cls=vec_cls)
    try:
        rng = np.random.default_rng(1)
        obs = venv.reset()
        assert set(obs) == {"gpus", "jobs", "global"}
        for _ in range(10):
            masks = np.stack(venv.env_method("action_masks"))
            obs, rewards, _dones, infos = venv.step(_legal(masks, rng))
            assert rewards.shape == (2,) and len(infos) == 2
            for m, info in zip(np.stack(venv.env_method("action_masks")), infos, strict=True):
                if "terminal_observation" not in info:
                    assert np.array_equal(m, info["action_mask"])
    finally:
        venv.close()
