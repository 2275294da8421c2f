"""RL agents: the training CLI, resume, TensorBoard tags, checkpoints, size-free weights."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from sb3_contrib import MaskablePPO

import gpu_sharing_env  # noqa: F401
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import evaluate
from gpu_sharing_gym.agents.agent import AgentLoadError, load_agent, pretrained_names
from gpu_sharing_gym.agents.callbacks import latest_checkpoint
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
  keep_models: true
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
    assert "validation at 512 timesteps on seeds 1000:" in r.stdout
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
    s = m["summary"]
    assert s["best_baseline"]["name"] == m["best_baseline"] and s["eval_seeds"] == [1000]
    assert s["agent"]["jct_mean_s"] == m["final_eval"]["jct_mean_s"]
    # only files that exist, best_model.zip only if some validation met the SLO target
    assert [Path(f["path"]).name for f in s["model_files"]] == ["model.zip"] + (
        ["best_model.zip"] if any(h["meets_slo"] for h in m["eval_history"]) else []
    )
    assert all(Path(f["path"]).is_file() for f in s["model_files"])


def test_kept_models_and_per_seed_validation(trained: Path) -> None:
    """``keep_models``: every checkpoint's model stays as ``models/step_<N>.zip`` and loads as an
    agent; each validation records its seeds' JCTs (the mean is theirs)."""
    m = json.loads((trained / "metrics.json").read_text())
    kept = sorted(p.name for p in (trained / "models").iterdir())
    steps = range(0, m["timesteps"] + 1, 128)  # 0: after pretraining, before PPO
    assert kept == [f"step_{n:010d}.zip" for n in steps]
    agent = load_agent(str(trained / "models" / kept[-1]))
    assert agent.meta["timesteps"] == m["timesteps"]
    for h in m["eval_history"]:
        assert len(h["jct_per_seed"]) == len(m["eval_seeds"])
        assert np.mean(h["jct_per_seed"]) == pytest.approx(h["jct_mean_s"])
    assert "jct_per_seed" not in m["final_eval"]


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


def test_init_from_starts_with_the_saved_weights(trained: Path, tmp_path: Path) -> None:
    """``--init-from`` fine-tunes: the run starts from the saved agent's weights (with a zero
    learning rate they come out unchanged), skips the warm start, and says so in config.yaml;
    a network that differs from the checkpoint's, or a resume, is refused in one line."""
    from gpu_sharing_gym.agents.agent import read_checkpoint

    cfg = tmp_path / "tiny0.yaml"
    cfg.write_text(TINY + "  learning_rate: 0.0\n")
    out = tmp_path / "ft"
    src = trained / "model.zip"
    r = run(["--config", str(cfg), "--init-from", str(src), "--out", str(out),
             "--timesteps", "128", "--quiet"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["init_from"] == str(src) and saved["hyperparams"]["pretrain"] is None
    (_, before), (_, after) = read_checkpoint(src), read_checkpoint(out / "model.zip")
    assert before.keys() == after.keys()
    assert all(th.equal(before[k], after[k]) for k in before)

    wide = tmp_path / "wide.yaml"
    wide.write_text(TINY.replace("hidden: 16", "hidden: 32"))
    r = run(["--config", str(wide), "--init-from", str(src), "--out", str(tmp_path / "w"),
             "--quiet"])  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.startswith("gsg train: error: --init-from: ") and "policy_kwargs" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # a checkpoint trained with the window in predicted order does not fine-tune under FIFO
    import json
    import shutil
    import zipfile

    from gpu_sharing_gym.agents.agent import META_NAME, write_metadata

    other = tmp_path / "predicted.zip"
    shutil.copy(src, other)
    with zipfile.ZipFile(other) as z:
        meta = json.loads(z.read(META_NAME))
    write_metadata(other, {**meta, "window_order": "predicted"})
    r = run(["--config", str(cfg), "--init-from", str(other), "--out", str(tmp_path / "p"),
             "--quiet"])  # fmt: skip
    assert r.returncode == 2 and "window_order is 'predicted'" in r.stderr, r.stderr
    r = run(["--out", str(out), "--resume", "--init-from", str(src), "--quiet"])
    assert r.returncode == 2 and "--init-from" in r.stderr


def saved_steps(out: Path) -> int | None:
    """Timesteps of the run's latest *complete* checkpoint (None while there is none): the
    pointer ``last.json`` is replaced atomically and names a directory whose manifest is
    written last, so a checkpoint being written is never read."""
    ckpt = latest_checkpoint(out / "checkpoints")
    return None if ckpt is None else ckpt.timesteps


def duplicate_points(tb: Path) -> dict[tuple[str, int], int]:
    """(tag, step) pairs written more than once across a run's TensorBoard event files."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    seen: Counter[tuple[str, int]] = Counter()
    for f in sorted(tb.glob("events.out.tfevents.*")):
        for ev in EventFileLoader(str(f)).Load():
            for v in ev.summary.value:
                seen[(v.tag, ev.step)] += 1
    assert seen, f"no events in {tb}"
    return {k: n for k, n in seen.items() if n > 1}


def test_resume_after_kill_continues_step_count(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY.replace("n_timesteps: 512", "n_timesteps: 100000"))
    out = tmp_path / "run"
    args = [*TRAIN, "--algo", "maskable_ppo", "--out", str(out), "--config", str(cfg), "--quiet",
            "--no-pretrain"]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while (saved_steps(out) or 0) < 256:
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(
                f"no checkpoint at 256+ timesteps (exit {proc.returncode}): {err[-2000:]!r}"
            )
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # no chance to save: the last checkpoint must do
    proc.communicate()
    saved = saved_steps(out)
    assert saved is not None and saved >= 256
    ckpt = latest_checkpoint(out / "checkpoints")
    assert ckpt is not None and ckpt.model.is_file()
    r = run(["--algo", "maskable_ppo", "--out", str(out), "--resume", "--timesteps",
             str(saved + 256)])  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"resuming {out} at {saved} timesteps" in r.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert saved + 256 <= m["timesteps"] <= saved + 256 + 128
    assert len((out / "command.txt").read_text().splitlines()) == 2
    # what the killed run logged after its checkpoint is logged again once, not twice
    assert duplicate_points(out / "tb") == {}


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
    while not first.exists():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"no first checkpoint (exit {proc.returncode}): {err[-2000:]}")
        time.sleep(0.2)  # polling for the file that says it started, not a fixed wait
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"no exit 300 s after Ctrl-C; stderr: {err[-2000:]}")
    assert proc.returncode == 130, err
    assert "continue with --resume" in err
    assert latest_checkpoint(out / "checkpoints") is not None


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

    # (seed 1: on workload version 3's seeds 1-6 the labels win on 1, 2, 4, 5 and 6, and lose
    # 6.7 % on 3, version 2's seed here: the improvement is not guaranteed where the base
    # heuristic is not sequentially consistent; docs/notes/2026-12-01-workload-v3-shared-past.md)
    demos, stats = lookahead_demonstrations(
        "default", {}, "antman", 1, 0.99, seed=1, horizon=0, conserving=True, hint=True
    )
    seed = int(np.random.default_rng(1).integers(TRAIN_SEED_MIN, 2**31 - 1))
    (base,) = evaluate(make_policy("antman"), load_scenario("default"), [seed])
    (m,) = demos.episode_metrics
    assert m["jct_mean_s"] <= base["jct_mean_s"] + 1e-6
    assert m["slo_attainment"] >= min(base["slo_attainment"], 0.95) - 1e-9
    assert demos.masks[np.arange(len(demos)), demos.actions].all()
    assert stats["lookahead_rollouts"] > 0
    assert demos.obs["hint"].sum(axis=1).tolist() == [1.0] * len(demos)


# ------------------------------------------------------------------ recipes by name, summary
def test_list_configs_names_every_shipped_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_sharing_gym.agents import train
    from gpu_sharing_gym.agents.config import AGENT_CONFIG_DIR

    assert train.main(["--list-configs"]) == 0
    # (a name's first line; a long first sentence wraps onto indented lines)
    lines = [x for x in capsys.readouterr().out.splitlines() if not x.startswith(" ")]
    shipped = sorted(p.stem for p in AGENT_CONFIG_DIR.glob("*.yaml"))
    assert [line.split()[0] for line in lines] == shipped
    (v1,) = [line for line in lines if line.split()[0] == "maskable_ppo_v1"]
    assert "GpuSharing-v1" in v1  # the first line of the recipe's comment


def test_unknown_config_name_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpu_sharing_gym.agents import train

    assert train.main(["--config", "maskable_ppo_v9", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "'maskable_ppo_v9'" in err[0] and "maskable_ppo_v1," in err[0]
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def missed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A tiny run on a scenario whose SLO target (0.95) no policy meets (an Xid fault per GPU
    every half hour, services down an hour each time), resumed twice from its 256-step
    checkpoint: the second resume redoes steps the first one logged, as after a kill."""
    d = tmp_path_factory.mktemp("missed")
    scenario = (ROOT / "configs" / "scenarios" / "default.yaml").read_text()
    faults = "rate_per_gpu_h: {user_signal: 0.002, app_error: 0.001, xid: 0.0002}"
    assert faults in scenario
    scenario = scenario.replace(
        faults, "rate_per_gpu_h: {user_signal: 0.0, app_error: 0.0, xid: 2.0}\n"
        "  restart_delay_s: 3600"
    )  # fmt: skip
    (d / "faulty.yaml").write_text(scenario)
    (d / "tiny.yaml").write_text(TINY.replace("n_timesteps: 512", "n_timesteps: 256"))
    out = d / "run"
    r = run(["--config", str(d / "tiny.yaml"), "--scenario", str(d / "faulty.yaml"),
             "--out", str(out), "--no-pretrain", "--quiet"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr  # --quiet: errors and the summary only
    shutil.copytree(out / "checkpoints", d / "at256")
    r = run(["--out", str(out), "--resume", "--timesteps", "512", "--quiet"])
    assert r.returncode == 0, r.stderr
    shutil.rmtree(out / "checkpoints")  # as if killed after logging up to 512
    shutil.copytree(d / "at256", out / "checkpoints")
    r = run(["--out", str(out), "--resume", "--quiet"])
    assert r.returncode == 0, r.stderr
    return out, r.stdout


def test_summary_says_the_run_misses_its_slo_target(missed: tuple[Path, str]) -> None:
    out, stdout = missed
    m = json.loads((out / "metrics.json").read_text())
    s = m["summary"]
    assert s["meets_slo"] is False and s["slo_target"] == 0.95 and s["timesteps"] == 512
    assert s["agent"]["slo_attainment"] == m["final_eval"]["slo_attainment"] < 0.95
    assert s["best_baseline"]["name"] in ("first_fit", "time_sharing")
    assert "MISSES the SLO target 0.95" in stdout
    assert f"best baseline {s['best_baseline']['name']}: jct_mean_s" in stdout
    # no validation met the target: no best_model.zip, and the summary names none
    assert not (out / "best_model.zip").exists()
    assert [f["path"] for f in s["model_files"]] == [str(out / "model.zip")]
    assert str(out / "model.zip") in stdout and "best_model.zip  (" not in stdout
    assert yaml.safe_load((out / "config.yaml").read_text())["hyperparams"]["pretrain"] is None


def test_tensorboard_one_point_per_tag_and_step_after_resume(missed: tuple[Path, str]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, _ = missed
    assert duplicate_points(out / "tb") == {}
    ea = EventAccumulator(str(out / "tb"))
    ea.Reload()
    assert [e.step for e in ea.Scalars("eval/jct_mean_s")] == [256, 512]
    assert [e.step for e in ea.Scalars("sim/jct_mean_s")] == sorted(
        {e.step for e in ea.Scalars("sim/jct_mean_s")}
    )
    assert not any(t.startswith("pretrain/") for t in ea.Tags()["scalars"])  # --no-pretrain


def test_recipe_name_picks_its_algorithm() -> None:
    """``--config dqn`` trains DQN without ``--algo dqn``: a shipped recipe's name says its
    algorithm (rl-zoo style, one file per algorithm and variant)."""
    from gpu_sharing_gym.agents.config import ALGOS, recipe_names
    from gpu_sharing_gym.agents.train import _recipe_algo

    assert _recipe_algo("dqn", ALGOS) == "dqn"
    assert _recipe_algo("maskable_ppo_v1", ALGOS) == "maskable_ppo"
    assert _recipe_algo(None, ALGOS) == _recipe_algo("my/recipe.yaml", ALGOS) == "maskable_ppo"
    assert all(_recipe_algo(n, ALGOS) in ALGOS for n in recipe_names())
