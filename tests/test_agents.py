"""RL agents: the training CLI, resume, TensorBoard tags, checkpoints, size-free weights."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO

import gpu_sharing_env  # noqa: F401
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.runner import evaluate
from gpu_sharing_gym.agents.agent import AgentLoadError, load_agent, pretrained_names
from gpu_sharing_gym.agents.envs import TRAIN_SEED_MIN, make_env
from gpu_sharing_gym.agents.policy import SetActorCriticPolicy
from gpu_sharing_gym.baselines import UnknownPolicyError, make_policy

ROOT = Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, str(ROOT / "scripts" / "train.py")]
TINY = """
default:
  n_timesteps: 512
  policy_kwargs: {hidden: 16, n_layers: 1}
  expert_hint: antman
  pretrain: {expert: antman, episodes: 2, epochs: 1, dagger_rounds: 1, dagger_episodes: 1}
  eval_freq: 256
  eval_seeds: [1000]
  eval_baselines: [first_fit, time_sharing]
  checkpoint_freq: 128
  n_steps: 128
  batch_size: 64
  n_epochs: 1
"""


def run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=ROOT, **kw
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny training run through the real CLI."""
    d = tmp_path_factory.mktemp("agent")
    cfg = d / "tiny.yaml"
    cfg.write_text(TINY)
    out = d / "run"
    r = run(["--algo", "maskable_ppo", "--scenario", "default", "--out", str(out),
             "--config", str(cfg), "--quiet"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "validation jct_mean_s" in r.stdout
    return out


def test_cli_run_directory(trained: Path) -> None:
    for name in ("config.yaml", "command.txt", "model.zip", "metrics.json", "baselines.json"):
        assert (trained / name).is_file(), name
    assert list((trained / "tb").glob("events.out.tfevents.*"))
    m = json.loads((trained / "metrics.json").read_text())
    assert m["timesteps"] >= 512
    assert m["eval_history"], "periodic evaluation ran"
    assert m["final_eval"]["jobs_submitted"] > 0
    assert m["best_baseline"] in ("first_fit", "time_sharing")
    assert "--config" in (trained / "command.txt").read_text()


def test_tensorboard_tags(trained: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(trained / "tb"), size_guidance={"images": 0})
    ea.Reload()
    scalars = set(ea.Tags()["scalars"])
    for tag in ("sim/jct_mean_s", "sim/slo_attainment", "sim/gpu_util", "sim/errors_propagated",
                "eval/jct_mean_s", "eval/slo_attainment", "eval/best_baseline_jct_mean_s",
                "train/value_loss", "pretrain/bc_accuracy"):  # fmt: skip
        assert tag in scalars, tag
    assert "eval/occupancy" in ea.Tags()["images"]
    # hparams: TensorBoard's hparams plugin data is in the event files
    from tensorboard.backend.event_processing import event_file_loader

    plugins = set()
    for f in (trained / "tb").glob("events.out.tfevents.*"):
        for ev in event_file_loader.EventFileLoader(str(f)).Load():
            for v in ev.summary.value:
                plugins.add(v.metadata.plugin_data.plugin_name)
    assert "hparams" in plugins


def test_save_load_round_trip_same_actions(trained: Path) -> None:
    model = MaskablePPO.load(trained / "model.zip", device="cpu")
    agent = load_agent(trained / "model.zip")
    env = make_env("default", conserving=True, hint="antman")
    obs, _ = env.reset(seed=3)
    done, n = False, 0
    while not done and n < 40:
        mask = env.get_wrapper_attr("action_masks")()
        a_sb3, _ = model.predict(obs, deterministic=True, action_masks=mask)
        a_agent = agent.predict(obs, mask)
        assert int(a_sb3) == a_agent
        obs, _, done, _, _ = env.step(a_agent)
        n += 1
    assert n > 10


def test_resume_after_kill_continues_step_count(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY.replace("n_timesteps: 512", "n_timesteps: 100000").replace(
        "pretrain: {expert: antman, episodes: 2, epochs: 1, dagger_rounds: 1, dagger_episodes: 1}",
        "pretrain: null"))  # fmt: skip
    out = tmp_path / "run"
    args = [*TRAIN, "--algo", "maskable_ppo", "--out", str(out), "--config", str(cfg), "--quiet"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    last = out / "checkpoints" / "last.json"
    deadline = time.time() + 240
    while time.time() < deadline and not (
        last.exists() and json.loads(last.read_text())["timesteps"] >= 256
    ):
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # no chance to save: the last checkpoint must do
    proc.wait()
    saved = json.loads(last.read_text())["timesteps"]
    assert saved >= 256
    r = run(["--algo", "maskable_ppo", "--out", str(out), "--resume", "--timesteps",
             str(saved + 256), "--quiet"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"resuming {out} at {saved} timesteps" in r.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert saved + 256 <= m["timesteps"] <= saved + 256 + 128
    assert len((out / "command.txt").read_text().splitlines()) == 2


def test_ctrl_c_saves_checkpoint(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY.replace("n_timesteps: 512", "n_timesteps: 100000")
                   .replace("checkpoint_freq: 128", "checkpoint_freq: 100000"))  # fmt: skip
    out = tmp_path / "run"
    # A test run started in the background (``make test &``, CI runners) inherits SIGINT as
    # *ignored*, and Python keeps it ignored: give the child the default Ctrl-C handling.
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    args = [sys.executable, "-c", start, *TRAIN[1:], "--algo", "maskable_ppo", "--out", str(out),
            "--config", str(cfg), "--quiet"]  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # The first checkpoint is written after pretraining; from then on Ctrl-C saves one.
    first = out / "checkpoints" / "last.json"
    deadline = time.time() + 480
    while time.time() < deadline and not first.exists() and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"no exit 300 s after Ctrl-C; stderr: {err[-2000:]}")
    assert proc.returncode == 130, err
    assert "continue with --resume" in err
    assert (out / "checkpoints" / "last.zip").is_file()


def test_bad_inputs_are_one_line_errors(tmp_path: Path, trained: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("default:\n  n_timesteps: 10\n  learning_rat: 0.1\n")
    r = run(["--out", str(tmp_path / "x"), "--config", str(bad)])
    assert r.returncode == 2
    assert "bad.yaml: default.learning_rat: not a setting" in r.stderr
    assert "Traceback" not in r.stderr
    r = run(["--out", str(tmp_path / "nothing"), "--resume"])
    assert r.returncode == 2 and "nothing to resume" in r.stderr
    r = run(["--out", str(trained), "--config", str(bad)])
    assert r.returncode == 2 and "already holds a run" in r.stderr

    corrupt = tmp_path / "corrupt.zip"
    corrupt.write_bytes(b"not a zip at all")
    with pytest.raises(AgentLoadError, match=r"corrupt.zip: corrupt or unreadable checkpoint"):
        load_agent(corrupt)
    with pytest.raises(AgentLoadError, match=r"no such checkpoint file"):
        load_agent(tmp_path / "missing.zip")
    with pytest.raises(UnknownPolicyError, match=r"corrupt\.zip"):
        make_policy(str(corrupt))
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--policy", str(corrupt),
         "--seeds", "1"], capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "corrupt.zip" in r.stderr


def test_same_weights_on_a_cluster_twice_as_large(trained: Path) -> None:
    cfg = load_scenario("default")
    nodes = tuple(dataclasses.replace(n, count=2 * n.count) for n in cfg.cluster.nodes)
    big = dataclasses.replace(cfg, name="default-x2",
                              cluster=dataclasses.replace(cfg.cluster, nodes=nodes))  # fmt: skip
    agent = make_policy(str(trained / "model.zip"))
    (rec,) = evaluate(agent, big, [0])
    assert rec["jobs_submitted"] > 0 and rec["jobs_completed"] > 0
    assert 0.0 <= rec["slo_attainment"] <= 1.0


def test_set_policy_is_permutation_equivariant() -> None:
    """Swapping two GPU rows swaps their action logits: the weights know no GPU positions."""
    env = gym.make("GpuSharing-v0", scenario="default")
    model = MaskablePPO(SetActorCriticPolicy, env, policy_kwargs={"hidden": 16}, device="cpu")
    obs, _ = env.reset(seed=0)
    g = env.unwrapped.max_gpus
    rows = obs["gpus"].reshape(g, -1)
    perm = np.arange(g)
    perm[[0, 5]] = [5, 0]
    obs2 = {**obs, "gpus": rows[perm].ravel()}

    def logits(o: dict[str, np.ndarray]) -> np.ndarray:
        t = {k: th.as_tensor(v)[None] for k, v in o.items()}
        with th.no_grad():
            return model.policy.mlp_extractor.forward_actor(model.policy.extract_features(t))[
                0
            ].numpy()

    a, b = logits(obs), logits(obs2)
    w, n_opt = env.unwrapped.sim.window, len(env.unwrapped.sim.options)
    pa = a[1:].reshape(w, g, n_opt)
    pb = b[1:].reshape(w, g, n_opt)
    np.testing.assert_allclose(pa[:, perm], pb, rtol=1e-5, atol=1e-5)
    assert a[0] == pytest.approx(b[0], abs=1e-5)


def test_training_seeds_are_disjoint_from_evaluation_seeds() -> None:
    env = make_env("default")
    seeds = set()
    for s in range(5):
        env.reset(seed=s if s == 0 else None)
        seeds.add(env.unwrapped.episode_seed)
    assert min(seeds) >= TRAIN_SEED_MIN


@pytest.mark.skipif("ppo_default" not in pretrained_names(), reason="no shipped agent")
def test_shipped_agent_loads_by_name() -> None:
    size = (ROOT / "agents" / "pretrained" / "ppo_default.zip").stat().st_size
    assert size < 5 * 2**20
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--policy", "ppo_default",
         "--seeds", "1"], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "ppo_default" in r.stdout


def test_rollout_labels_never_lose_to_the_base_heuristic() -> None:
    """With one-step candidates (horizon 0) the labelled episode is a rollout policy over the
    base heuristic on a deterministic episode: it does at least as well (Bertsekas' sequential
    improvement), and labels stay legal."""
    from gpu_sharing_gym.agents.lookahead import lookahead_demonstrations

    demos, stats = lookahead_demonstrations(
        "default", {}, "antman", 1, 0.99, seed=3, horizon=0, conserving=True, hint=True
    )
    seed = int(np.random.default_rng(3).integers(TRAIN_SEED_MIN, 2**31 - 1))
    (base,) = evaluate(make_policy("antman"), load_scenario("default"), [seed])
    (m,) = demos.episode_metrics
    assert m["jct_mean_s"] <= base["jct_mean_s"] + 1e-6
    assert m["slo_attainment"] >= min(base["slo_attainment"], 0.95) - 1e-9
    assert demos.masks[np.arange(len(demos)), demos.actions].all()
    assert stats["lookahead_rollouts"] > 0
    assert demos.obs["hint"].sum(axis=1).tolist() == [1.0] * len(demos)
