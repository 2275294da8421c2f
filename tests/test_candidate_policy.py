"""The policy over candidates (``gpu_sharing_gym.agents.candidate_policy``): a candidate's score
does not depend on the candidates' order nor on the cluster's padding, the same weights run on
any cluster size, a short training run on ``default`` saves, logs agreement with each rule and
resumes, and its checkpoint acts zero-shot on ``pai-busy``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

th = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402

import gpu_sharing_env  # noqa: E402, F401
from gpu_sharing_env.envs.observation_v1 import (  # noqa: E402
    GPU_FEATURES_V1,
    HISTORY_FEATURES,
    PAIR_FEATURES,
)
from gpu_sharing_env.sim.view import ClusterView  # noqa: E402
from gpu_sharing_gym.agents.agent import load_agent  # noqa: E402
from gpu_sharing_gym.agents.candidate_policy import (  # noqa: E402
    RULES,
    RULES_KEY,
    CandidateActorCriticPolicy,
    RuleChoices,
)

TINY = """
default:
  env_id: GpuSharing-v1
  policy: candidate
  n_timesteps: 256
  policy_kwargs: {hidden: 16, n_layers: 1, cand_hidden: 16}
  env_kwargs:
    window_order: predicted
    job_history: true
    rule_inputs: [speed_sjf_queue, sjf_predicted, gandiva, antman]
  work_conserving: false
  paired_reference: speed_sjf_queue
  normalize_reward: true
  eval_freq: 256
  eval_seeds: [1000]
  eval_baselines: [speed_sjf_queue]
  checkpoint_freq: 128
  n_steps: 128
  batch_size: 64
  n_epochs: 1
  gamma: 1.0
"""


def _env(scenario: str = "default", **kw: Any) -> gym.Env[Any, Any]:
    base = gym.make("GpuSharing-v1", scenario=scenario, job_history=True, **kw)
    return RuleChoices(base, RULES)


def _busy_state(env: gym.Env[Any, Any], seed: int = 3, min_legal: int = 12) -> tuple[Any, Any]:
    """(obs, mask) at the first decision with at least ``min_legal`` legal placements and a
    few jobs in the window (following speed_sjf_queue's choices, obs["rules"][0])."""
    obs, info = env.reset(seed=seed)
    for _ in range(500):
        m = info["action_mask"].astype(bool)
        if m[1:].sum() >= min_legal and obs["jobs"].reshape(-1, _job_cols(obs))[:, 0].sum() > 1:
            return obs, m
        obs, _, done, _, info = env.step(int(obs[RULES_KEY][0]))
        assert not done
    raise AssertionError("no busy state found")


def _job_cols(obs: dict[str, np.ndarray]) -> int:
    g = obs["gpus"].size // len(GPU_FEATURES_V1)
    w = obs["pairs"].size // (g * len(PAIR_FEATURES))
    return obs["jobs"].size // w


def _policy(env: gym.Env[Any, Any], seed: int = 0) -> Any:
    th.manual_seed(seed)
    pol = CandidateActorCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3)
    pol.set_training_mode(False)
    return pol


def _scores(pol: Any, obs: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
    """Raw scores (wait, then every placement; illegal ones -1e8) under the mask."""
    t = {k: th.as_tensor(v, dtype=th.float32)[None] for k, v in obs.items()}
    with th.no_grad(), pol.mlp_extractor.candidates(mask[None]):
        return pol.mlp_extractor.forward_actor(pol.extract_features(t))[0].numpy()


def _layout(obs: dict[str, np.ndarray], n_actions: int) -> tuple[int, int, int]:
    g = obs["gpus"].size // len(GPU_FEATURES_V1)
    w = obs["pairs"].size // (g * len(PAIR_FEATURES))
    return g, w, (n_actions - 1) // (w * g)


def _permute(
    obs: dict[str, np.ndarray], mask: np.ndarray, gperm: np.ndarray, wperm: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The same state with GPU rows reordered by ``gperm`` and window slots by ``wperm`` (new
    row i is old row perm[i]); the rules' actions and the mask follow."""
    g, w, o = _layout(obs, mask.size)
    out = dict(obs)
    out["gpus"] = obs["gpus"].reshape(g, -1)[gperm].ravel()
    out["nodes"] = obs["nodes"][gperm]
    cols = _job_cols(obs)
    out["jobs"] = obs["jobs"].reshape(w, cols)[wperm].ravel()
    out["history"] = obs["history"].reshape(w, len(HISTORY_FEATURES))[wperm].ravel()
    out["pairs"] = obs["pairs"].reshape(w, g, -1)[wperm][:, gperm].ravel()
    m = mask[1:].reshape(w, g, o)[wperm][:, gperm]
    new_mask = np.concatenate([mask[:1], m.ravel()])
    ginv, winv = np.argsort(gperm), np.argsort(wperm)
    rules = obs[RULES_KEY].astype(np.int64)
    new_rules = rules.copy()
    for i, a in enumerate(rules):
        if a > 0:
            slot, rest = divmod(int(a) - 1, g * o)
            gpu, opt = divmod(rest, o)
            new_rules[i] = 1 + (winv[slot] * g + ginv[gpu]) * o + opt
    out[RULES_KEY] = new_rules.astype(np.float32)
    return out, new_mask


def test_scores_are_permutation_equivariant() -> None:
    env = _env(window_order="predicted")
    obs, mask = _busy_state(env)
    pol = _policy(env)
    g, w, o = _layout(obs, mask.size)
    rng = np.random.default_rng(0)
    gperm, wperm = rng.permutation(g), rng.permutation(w)
    obs2, mask2 = _permute(obs, mask, gperm, wperm)
    s1 = _scores(pol, obs, mask)
    s2 = _scores(pol, obs2, mask2)
    assert s1[0] == pytest.approx(s2[0], rel=1e-5, abs=1e-6)  # wait: a pooled quantity
    p1 = s1[1:].reshape(w, g, o)[wperm][:, gperm]
    legal = mask2[1:].reshape(w, g, o)
    assert legal.sum() >= 12
    np.testing.assert_allclose(p1[legal], s2[1:].reshape(w, g, o)[legal], rtol=1e-5, atol=1e-6)


def test_scores_do_not_depend_on_padding_and_weights_fit_any_cluster() -> None:
    small = _env(window_order="predicted")
    # (GPUs and options: a padded window changes the observation itself, whose predicted-duration
    # rank is divided by the window's size)
    padded = _env(window_order="predicted", max_gpus=20, max_options=13)
    obs, mask = _busy_state(small)
    obs_p, mask_p = _busy_state(padded)
    pol = _policy(small)
    pol_p = _policy(padded, seed=1)
    pol_p.load_state_dict(pol.state_dict())  # no weight's shape depends on the layout
    g, w, o = _layout(obs, mask.size)
    gp, wp, op = _layout(obs_p, mask_p.size)
    assert (gp, wp, op) == (20, w, 13)
    s = _scores(pol, obs, mask)[1:].reshape(w, g, o)
    sp = _scores(pol_p, obs_p, mask_p)[1:].reshape(wp, gp, op)[:w, :g, :o]
    legal = mask[1:].reshape(w, g, o).astype(bool)
    np.testing.assert_array_equal(legal, mask_p[1:].reshape(wp, gp, op)[:w, :g, :o])
    np.testing.assert_allclose(s[legal], sp[legal], rtol=1e-5, atol=1e-6)
    # and the same weights score a 226-GPU fleet (only its legal candidates)
    big = _env("pai-busy", window_order="predicted")
    obs_b, info = big.reset(seed=0)
    pol_b = _policy(big, seed=2)
    pol_b.load_state_dict(pol.state_dict())
    mask_b = info["action_mask"].astype(bool)
    sb = _scores(pol_b, obs_b, mask_b)
    assert np.isfinite(sb).all() and (sb[1:][mask_b[1:]] > -1e7).all()
    assert (sb[1:][~mask_b[1:]] <= -1e7).all()


def test_training_smoke_logs_agreement_resumes_and_runs_zero_shot(tmp_path: Path) -> None:
    from gpu_sharing_gym.agents.train import main

    recipe = tmp_path / "cand.yaml"
    recipe.write_text(TINY)
    out = tmp_path / "run"
    assert main(["--config", str(recipe), "--out", str(out), "--quiet"]) == 0
    progress = (out / "tb" / "progress.csv").read_text().splitlines()
    header = progress[0].split(",")
    for r in RULES:
        assert f"rules/agree_{r}" in header
    agree = float(progress[-1].split(",")[header.index("rules/agree_speed_sjf_queue")])
    assert 0.0 <= agree <= 1.0
    assert main(["--out", str(out), "--resume", "--timesteps", "384", "--quiet"]) == 0
    assert (out / "checkpoints" / "last.json").read_text().count("384") >= 1

    agent = load_agent(out / "model.zip")
    # zero-shot on pai-busy, the env's observation and the runner's (obs=None) agree
    env = _env("pai-busy", window_order="predicted")
    obs, info = env.reset(seed=0)
    agent.reset(0)
    base: Any = env.unwrapped
    for _ in range(3):
        mask = info["action_mask"]
        a = agent.act(ClusterView(base.sim, base.codec), obs, mask)
        assert mask[a]
        assert agent.act(ClusterView(base.sim, base.codec), None, mask) == a
        obs, _, done, _, info = env.step(a)
        assert not done
