"""The fast learning loop (issue 22): candidate scoring, one-pass masked distribution, in-process
batched envs, the wall-clock limit and the user cache of reference curves."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

import gpu_sharing_env  # noqa: F401
from gpu_sharing_gym.agents.callbacks import TorchThreads, WallClockLimit
from gpu_sharing_gym.agents.config import TrainSettings, load_hyperparams, resolve_config
from gpu_sharing_gym.agents.envs import make_vec_env, resolve_cache_dir, user_cache_dir
from gpu_sharing_gym.agents.policy import SetActorCriticPolicy
from gpu_sharing_gym.agents.vec import TwoProcessVecEnv, WorkerError


@pytest.fixture(scope="module")
def states() -> tuple[MaskablePPO, dict[str, th.Tensor], th.Tensor]:
    """A small model on ``default`` and 60 observations with their masks, from its own play."""
    env = gym.make("GpuSharing-v0", scenario="default")
    model = MaskablePPO(SetActorCriticPolicy, env, policy_kwargs={"hidden": 16}, device="cpu",
                        seed=0)  # fmt: skip
    return (model, *_play(env, model, 60, seed=3))


def _play(env: gym.Env, model: MaskablePPO, n: int, seed: int) -> tuple[dict, th.Tensor]:
    """``n`` observations (batched) and their masks from ``model`` playing ``env``."""
    obs, _ = env.reset(seed=seed)
    rows, masks = [], []
    for _ in range(n):
        mask = env.unwrapped.action_masks().astype(bool)  # type: ignore[attr-defined]
        rows.append(obs)
        masks.append(mask)
        a, _ = model.predict(obs, action_masks=mask)
        obs, _, done, _, _ = env.step(a)
        if done:
            obs, _ = env.reset(seed=seed + 1)
    batch = {k: th.as_tensor(np.stack([o[k] for o in rows])) for k in rows[0]}
    return batch, th.as_tensor(np.stack(masks))


def test_candidate_logits_equal_the_dense_ones_on_legal_actions(
    states: tuple[MaskablePPO, dict[str, th.Tensor], th.Tensor],
) -> None:
    model, obs, masks = states
    pol = model.policy
    assert int(masks[:, 1:].sum(1).max()) < masks.shape[1] - 1  # some actions are illegal
    with th.no_grad():
        feats = pol.extract_features(obs)
        dense = pol.mlp_extractor.forward_actor(feats)
        with pol.mlp_extractor.candidates(masks):
            cand = pol.mlp_extractor.forward_actor(feats)
    np.testing.assert_allclose(cand[masks].numpy(), dense[masks].numpy(), rtol=1e-5, atol=1e-6)
    assert bool((cand[~masks] <= -1e7).all())  # illegal: left out, not scored


def test_masked_policy_paths_equal_sb3s(
    states: tuple[MaskablePPO, dict[str, th.Tensor], th.Tensor],
) -> None:
    """The candidate path with its one-pass distribution gives SB3's values, log-probabilities,
    entropies and action probabilities (SB3's own methods run the dense scorer)."""
    model, obs, masks = states
    pol = model.policy
    legal = [int(np.flatnonzero(m)[-1]) for m in masks.numpy()]
    actions = th.as_tensor(legal)
    with th.no_grad():
        ours = pol.evaluate_actions(obs, actions, masks)
        sb3 = MaskableActorCriticPolicy.evaluate_actions(pol, obs, actions, masks)
        for a, b in zip(ours, sb3, strict=True):
            assert a is not None and b is not None
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
        p1 = pol.get_distribution(obs, masks).distribution.probs
        p2 = MaskableActorCriticPolicy.get_distribution(pol, obs, masks).distribution.probs
    np.testing.assert_allclose(p1.numpy(), p2.numpy(), rtol=1e-5, atol=1e-7)
    assert float(p1[~masks].max()) == 0.0


def test_gradients_reach_the_pair_scorer_through_the_candidates(
    states: tuple[MaskablePPO, dict[str, th.Tensor], th.Tensor],
) -> None:
    model, obs, masks = states
    pol = model.policy
    pol.zero_grad()
    actions = th.as_tensor([int(np.flatnonzero(m)[0]) for m in masks.numpy()])
    _, log_prob, entropy = pol.evaluate_actions(obs, actions, masks)
    assert entropy is not None
    (log_prob.mean() + entropy.mean()).backward()
    for layer in (pol.mlp_extractor.pair_out, pol.mlp_extractor.p_gpu, pol.mlp_extractor.p_job):
        assert layer.weight.grad is not None and float(layer.weight.grad.abs().sum()) > 0


def test_in_process_envs_are_one_dummy_vec_env_and_bad_kinds_are_refused() -> None:
    venv = make_vec_env("default", 2, seed=0, vec_env="in_process")
    try:
        assert isinstance(venv, DummyVecEnv) and venv.num_envs == 2
    finally:
        venv.close()
    with pytest.raises(
        ValueError, match="vec_env 'threads': one of in_process, two_process, subprocess"
    ):
        make_vec_env("default", 2, seed=0, vec_env="threads")


def _first_legal(venv: VecEnv) -> np.ndarray:
    return np.array([int(np.flatnonzero(m)[0]) for m in venv.env_method("action_masks")])


def test_two_process_envs_play_the_in_process_episodes() -> None:
    """Half the envs in a worker process: the same observations, rewards, masks and episode
    ends as ``DummyVecEnv``, env by env, in order; per-env access reaches both halves."""
    kw = {"env_id": "GpuSharing-v1", "hint": "speed_sjf", "seed_pool": 4}
    here = make_vec_env("default", 3, seed=5, vec_env="in_process", **kw)
    split = make_vec_env("default", 3, seed=5, vec_env="two_process", **kw)
    try:
        assert isinstance(split, TwoProcessVecEnv) and split.n_local == 2
        a, b = here.reset(), split.reset()
        ends = 0
        for _ in range(150):
            assert isinstance(a, dict) and isinstance(b, dict)
            for k in a:
                np.testing.assert_array_equal(a[k], b[k])
            masks = _first_legal(here)
            np.testing.assert_array_equal(masks, _first_legal(split))
            a, ra, da, _ = here.step(masks)
            b, rb, db, _ = split.step(masks)
            np.testing.assert_array_equal(ra, rb)
            np.testing.assert_array_equal(da, db)
            ends += int(da.sum())
        assert ends > 0  # auto-reset on both sides
        assert split.has_attr("action_masks") and not split.has_attr("no_such_attribute")
        assert split.get_attr("spec", [0, 2])[1].id == "GpuSharing-v1"
        split.set_attr("marker", 7, indices=[2])
        assert split.get_attr("marker", [2]) == [7]
        # an error in the worker is raised here, with its traceback, and the worker carries on
        with pytest.raises(WorkerError, match="AttributeError"):
            split.env_method("no_such_method", indices=[2])
        # the mask asked of the worker (the cache is dropped after set_attr) is the env's own
        np.testing.assert_array_equal(
            split.env_method("action_masks", indices=[2])[0],
            here.env_method("action_masks", indices=[2])[0],
        )
    finally:
        here.close()
        split.close()
    split.close()  # twice: nothing left to close


def test_two_process_worker_that_cannot_build_its_envs_says_why() -> None:
    def cartpole() -> gym.Env:
        return gym.make("CartPole-v1")

    def broken() -> gym.Env:
        raise ValueError("no such env")

    before = set(mp.active_children())
    # VecEnv's constructor asks every env for its render mode: the worker answers with why
    with pytest.raises(WorkerError, match=r"could not be built(?s:.)*no such env"):
        TwoProcessVecEnv([cartpole, broken])
    assert set(mp.active_children()) <= before  # the worker was closed, not left behind


def test_torch_threads_one_for_rollouts_more_for_the_update() -> None:
    """``update_threads``: one torch thread while collecting, N while updating, and the count
    from before after learning."""
    seen: dict[str, set[int]] = {"rollout": set(), "update": set()}

    class Spy(BaseCallback):
        def _on_step(self) -> bool:
            seen["rollout"].add(th.get_num_threads())
            return True

        def _on_rollout_end(self) -> None:
            seen["update"].add(th.get_num_threads())

    env = gym.make("GpuSharing-v0", scenario="default")
    model = MaskablePPO(SetActorCriticPolicy, env, policy_kwargs={"hidden": 8}, n_steps=32,
                        batch_size=32, n_epochs=1, device="cpu", seed=0)  # fmt: skip
    th.set_num_threads(1)
    model.learn(64, callback=[TorchThreads(2), Spy()])
    assert seen == {"rollout": {1}, "update": {2}}
    assert th.get_num_threads() == 1


def test_default_recipe_is_the_fast_loop() -> None:
    settings, _kwargs, _ = load_hyperparams(resolve_config("maskable_ppo"), "default",
                                           "maskable_ppo")  # fmt: skip
    assert isinstance(settings, TrainSettings)
    assert settings.n_envs > 1 and settings.vec_env == "two_process"
    assert settings.paired_reference and settings.paired_cache_dir == "user"


def test_wall_clock_limit_stops_learning_at_once() -> None:
    """No time budget left: learning stops at the first step (no timing involved)."""
    env = gym.make("GpuSharing-v0", scenario="default")
    model = MaskablePPO(SetActorCriticPolicy, env, policy_kwargs={"hidden": 8}, n_steps=64,
                        batch_size=64, n_epochs=1, device="cpu", seed=0)  # fmt: skip
    model.learn(10_000, callback=WallClockLimit(0.0))
    assert model.num_timesteps <= 64


def test_user_cache_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GSG_CACHE_DIR", str(tmp_path / "c"))
    assert user_cache_dir() == tmp_path / "c"
    assert resolve_cache_dir("user") == tmp_path / "c" / "reference-curves"
    monkeypatch.delenv("GSG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert user_cache_dir() == tmp_path / "x" / "gpu-sharing-gym"
    assert resolve_cache_dir(None) is None
    assert resolve_cache_dir("~/curves") == Path("~/curves").expanduser()


TINY = """
default:
  n_timesteps: 100000
  policy_kwargs: {hidden: 8, n_layers: 1}
  eval_freq: 50000
  eval_seeds: [1000]
  eval_baselines: [first_fit]
  checkpoint_freq: 50000
  n_steps: 64
  batch_size: 64
  n_epochs: 1
"""


def test_train_max_minutes_stops_saves_and_evaluates(tmp_path: Path) -> None:
    """``--max-minutes 0``: learning stops at its first step (no timing involved), the model is
    saved and evaluated as at the end, and evaluations carry the run's wall-clock."""
    import json
    import subprocess
    import sys

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "gpu_sharing_gym.cli", "train", "--config", str(cfg),
           "--no-pretrain", "--max-minutes", "0", "--quiet", "--out", str(out)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 < metrics["timesteps"] <= 64 < metrics["target_timesteps"]
    assert (out / "model.zip").is_file()
    last = metrics["eval_history"][-1]
    assert last["timesteps"] == metrics["timesteps"] and last["wall_s"] >= 0


@pytest.mark.parametrize("critic_pairs", [True, False])
def test_option_policy_scores_only_legal_candidates_with_the_dense_result(
    critic_pairs: bool,
) -> None:
    """``GpuSharing-v1``'s option-agnostic policy: the candidate path (the legal pairs' rows
    only) gives the log-probabilities, entropies and values of SB3's path over the dense
    scorer (every pair's row), with either critic."""
    from gpu_sharing_gym.agents.option_policy import OptionActorCriticPolicy

    env = gym.make("GpuSharing-v1", scenario="default")
    kwargs = {"hidden": 16, "pair_hidden": 8, "critic_pairs": critic_pairs}
    model = MaskablePPO(OptionActorCriticPolicy, env, device="cpu", seed=0, policy_kwargs=kwargs)
    assert hasattr(model.policy.mlp_extractor.critic, "p_pair") is critic_pairs
    batch, m = _play(env, model, 40, seed=5)
    pol = model.policy
    actions = th.as_tensor([int(np.flatnonzero(r)[-1]) for r in m.numpy()])
    with th.no_grad():
        feats = pol.extract_features(batch)
        dense = pol.mlp_extractor.forward_actor(feats)
        with pol.mlp_extractor.candidates(m):
            cand = pol.mlp_extractor.forward_actor(feats)
        ours = pol.evaluate_actions(batch, actions, m)
        sb3 = MaskableActorCriticPolicy.evaluate_actions(pol, batch, actions, m)
    np.testing.assert_allclose(cand[m].numpy(), dense[m].numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(ours, sb3, strict=True):
        assert a is not None and b is not None
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
