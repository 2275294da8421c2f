"""Option-agnostic agents (``GpuSharing-v1``): the env, the two-level wait-or-place
distribution, paired rewards, expert labels, legality on other scenarios, and resume."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO

import gpu_sharing_env  # noqa: F401
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.gpu_sharing_v1 import GpuSharingEnvV1
from gpu_sharing_env.envs.observation_v1 import time_left_s
from gpu_sharing_env.evaluation.runner import evaluate
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.agent import (
    AgentLoadError,
    load_agent,
    pretrained_names,
    write_metadata,
)
from gpu_sharing_gym.agents.envs import PairedReward
from gpu_sharing_gym.agents.expert import label_episodes
from gpu_sharing_gym.agents.option_policy import OptionActorCriticPolicy, two_level_logits
from gpu_sharing_gym.baselines import make_policy

ROOT = Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, str(ROOT / "scripts" / "train.py")]
TINY_V1 = """
default:
  env_id: GpuSharing-v1
  n_timesteps: 384
  policy_kwargs: {hidden: 16, n_layers: 1, pair_hidden: 8}
  work_conserving: false
  paired_reference: speed_sjf
  normalize_reward: true
  eval_freq: 256
  eval_seeds: [1000]
  eval_baselines: [speed_sjf, time_sharing]
  checkpoint_freq: 128
  n_steps: 128
  batch_size: 64
  n_epochs: 1
  gamma: 1.0
"""
#: Scenarios whose option sets and cluster sizes differ from `default`'s (10 options, 12 GPUs).
OTHER_SCENARIOS = ("default-x2", "muxflow-t4", "mig-a100", "pai-hetero")


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


# ---------------------------------------------------------------------------------- the env
def test_v1_env_passes_both_checkers_and_v0_is_unchanged() -> None:
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(GpuSharingEnvV1("default"), skip_render_check=True)
        sb3_check_env(GpuSharingEnvV1("default"))
    v0 = gym.make("GpuSharing-v0", scenario="default")
    v1 = gym.make("GpuSharing-v1", scenario="default")
    assert set(v0.observation_space.spaces) == {"gpus", "jobs", "global"}
    assert set(v1.observation_space.spaces) == {"gpus", "jobs", "global", "options", "pairs"}
    # same dynamics and action layout: v1's observation extends v0's columns
    o0, i0 = v0.reset(seed=4)
    o1, i1 = v1.reset(seed=4)
    np.testing.assert_array_equal(i0["action_mask"], i1["action_mask"])
    np.testing.assert_array_equal(o0["gpus"].reshape(12, -1), o1["gpus"].reshape(12, -1)[:, :26])
    np.testing.assert_array_equal(o0["global"], o1["global"][:11])


def test_padded_v1_env_masks_padding_and_runs_the_same_episode() -> None:
    own = GpuSharingEnvV1("muxflow-t4")
    pad = GpuSharingEnvV1("muxflow-t4", max_window=10, max_options=12, max_gpus=70)
    assert pad.action_space.n == 1 + 10 * 70 * 12
    with pytest.raises(ValueError, match=r"max_options: must be None, 0 or an integer >= the"):
        GpuSharingEnvV1("muxflow-t4", max_options=3)
    _, info_a = own.reset(seed=1)
    _, info_b = pad.reset(seed=1)
    for _ in range(40):
        legal = np.flatnonzero(info_a["action_mask"])
        a = int(legal[len(legal) // 2])
        slot, gpu, option = own.codec.decode(a) if a else (0, 0, 0)
        b = pad.codec.encode(slot, gpu, option) if a else 0
        assert info_b["action_mask"][b] == 1 and info_b["action_mask"].sum() == len(legal)
        _, r_a, done, _, info_a = own.step(a)
        _, r_b, _, _, info_b = pad.step(b)
        assert r_a == r_b
        if done:
            break
    assert pad.explain(pad.codec.encode(0, 0, 11)) == "option 11 is padding (the scenario has 6)"


def test_time_until_free_uses_the_estimate_and_the_observed_rate() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(7)  # (a seed with offline jobs running after the first hour: workload v3's 6, 7)
    policy = make_policy("speed_sjf")
    policy.reset(7)
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
    while sim.now < 3600.0:  # an hour of speed_sjf's scheduling
        d = policy.decide(ClusterView(sim, codec)) if sim.needs_decision() else None  # type: ignore[attr-defined]
        sim.advance() if d is None else sim.apply(d)
    running = [st for st in sim.jobs.values() if st.status.name == "RUNNING" and not st.online]
    assert running
    for st in running:
        t0 = max(st.last_t, st.setup_until)
        done = st.work_done + st.rate * max(0.0, sim.now - t0)
        left = st.spec.est_work_s - done
        left = left if left > 0 else 0.1 * st.spec.est_work_s  # past its estimate
        expected = max(0.0, st.setup_until - sim.now) + left / st.rate
        assert time_left_s(st, sim.now) == pytest.approx(expected)
    # the GPU table's time until free is the log of its residents' longest time left
    env = GpuSharingEnvV1("default")
    env.sim = sim
    enc = env.encoder
    gpus = enc.encode(sim)["gpus"].reshape(sim.n_gpus, -1)  # type: ignore[union-attr]
    col = len(gpus[0]) - 5
    for g, res in enumerate(sim.cluster.residents):
        longest = max((time_left_s(sim.jobs[j], sim.now) for j in res), default=0.0)
        assert gpus[g, col] == pytest.approx(min(1.0, math.log10(1 + longest) / 6), abs=1e-6)


# ------------------------------------------------------------------- the two-level choice
def test_two_level_distribution_by_hand() -> None:
    # wait logit 0 -> P(wait) = 1/2; placements scored 0, ln 3 and 5, the last one illegal.
    raw = th.tensor([[0.0, 0.0, math.log(3.0), 5.0]])
    mask = th.tensor([[True, True, True, False]])
    p = two_level_logits(raw, mask).exp()[0]
    np.testing.assert_allclose(p.numpy(), [0.5, 0.125, 0.375, 0.0], atol=1e-6)
    # P(wait) does not shrink as legal placements are added
    raw2 = th.cat([raw, th.zeros(1, 100)], dim=1)
    mask2 = th.ones_like(raw2, dtype=th.bool)
    assert two_level_logits(raw2, mask2).exp()[0, 0].item() == pytest.approx(0.5)
    # nothing placeable: wait is certain
    none = th.tensor([[True, False, False, False]])
    assert two_level_logits(raw, none).exp()[0, 0].item() == pytest.approx(1.0)


def _v1_model(scenario: str = "default") -> MaskablePPO:
    env = GpuSharingEnvV1(scenario)
    kwargs = {"hidden": 16, "n_layers": 1, "pair_hidden": 8}
    return MaskablePPO(OptionActorCriticPolicy, env, policy_kwargs=kwargs, device="cpu", seed=0)


def _raw_scores(model: MaskablePPO, obs: dict[str, np.ndarray]) -> np.ndarray:
    t = {k: th.as_tensor(v)[None] for k, v in obs.items()}
    with th.no_grad():
        pol = model.policy
        return pol.mlp_extractor.forward_actor(pol.extract_features(t))[0].numpy()  # type: ignore[operator]


def test_network_is_equivariant_in_gpus_and_options() -> None:
    """Permuting GPU rows (with their pair columns) or option rows permutes the scores: no
    weight knows a GPU's or an option's position."""
    model = _v1_model()
    env = GpuSharingEnvV1("default")
    obs, _ = env.reset(seed=0)
    g, w, o = env.max_gpus, env.max_window, env.max_options
    base = _raw_scores(model, obs)
    pg = np.arange(g)
    pg[[0, 5]] = [5, 0]
    po = np.arange(o)[::-1].copy()
    perm = {
        **obs,
        "gpus": obs["gpus"].reshape(g, -1)[pg].ravel(),
        "pairs": obs["pairs"].reshape(w, g, -1)[:, pg].ravel(),
        "options": obs["options"].reshape(o, -1)[po].ravel(),
    }
    got = _raw_scores(model, perm)
    np.testing.assert_allclose(
        base[1:].reshape(w, g, o)[:, pg][:, :, po], got[1:].reshape(w, g, o), atol=1e-5
    )
    assert base[0] == pytest.approx(got[0], abs=1e-5)


def test_light_critic_is_saved_with_the_checkpoint(tmp_path: Path) -> None:
    """``critic_pairs: false`` (the critic without a pair table) is a constructor argument
    saved in the checkpoint: the loaded policy has the same layers and the same values. A
    checkpoint saved before the argument existed loads with the pair-table critic."""
    env = GpuSharingEnvV1("default")
    kwargs = {"hidden": 16, "n_layers": 1, "pair_hidden": 8, "critic_pairs": False}
    model = MaskablePPO(OptionActorCriticPolicy, env, policy_kwargs=kwargs, device="cpu", seed=0)
    model.save(tmp_path / "light.zip")
    back = MaskablePPO.load(tmp_path / "light.zip", device="cpu")
    assert not hasattr(back.policy.mlp_extractor.critic, "p_pair")
    obs, _ = env.reset(seed=3)
    t = {k: th.as_tensor(v)[None] for k, v in obs.items()}
    with th.no_grad():
        assert back.policy.predict_values(t).item() == model.policy.predict_values(t).item()
    # the default (and every checkpoint saved without the argument): the pair-table critic
    assert hasattr(_v1_model().policy.mlp_extractor.critic, "p_pair")


@pytest.fixture(scope="module")
def v1_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An (untrained) option-agnostic agent saved as a checkpoint of `default`."""
    path = tmp_path_factory.mktemp("v1") / "model.zip"
    model = _v1_model("default")
    model.save(path)
    write_metadata(
        path,
        {
            "algo": "maskable_ppo",
            "env_id": "GpuSharing-v1",
            "policy": "OptionActorCriticPolicy",
            "policy_kwargs": {"hidden": 16, "n_layers": 1, "pair_hidden": 8},
            "n_options": None,
            "options": [o.label for o in model.env.get_attr("sim")[0].options],  # type: ignore[union-attr]
            "work_conserving": False,
            "expert_hint": None,
        },
    )
    return path


@pytest.mark.parametrize("scenario", OTHER_SCENARIOS)
def test_agent_from_default_acts_legally_on_other_option_sets(
    v1_checkpoint: Path, scenario: str
) -> None:
    agent = load_agent(v1_checkpoint, deterministic=False)  # sampling reaches more actions
    sim = make_simulator(load_scenario(scenario))
    sim.reset(3)
    agent.reset(3)
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
    placed = waited = 0
    while not sim.done and placed < 25:
        if not sim.needs_decision():
            sim.advance()
            continue
        mask = codec.mask(sim)
        a = agent.act(ClusterView(sim, codec), None, mask)
        assert mask[a] == 1, f"{scenario}: illegal action {a}"
        d = codec.to_decision(sim, a)
        if d is None:
            waited += 1
            sim.advance()
        else:
            sim.apply(d)
            placed += 1
    assert placed > 0
    assert waited > 0  # wait is the agent's own choice, even with placements legal


@pytest.mark.skipif("ppo_default" not in pretrained_names(), reason="no shipped agent")
def test_v0_agent_still_refuses_other_option_sets_and_runs_on_default() -> None:
    agent = load_agent("ppo_default")
    (rec,) = evaluate(agent, load_scenario("default"), [0])
    assert rec["jobs_completed"] > 0
    with pytest.raises(AgentLoadError, match="trained with 10 placement options"):
        evaluate(load_agent("ppo_default"), load_scenario("muxflow-t4"), [0])


@pytest.mark.parametrize(
    ("agent", "scenario"),
    [("ppo", "muxflow-t4"), ("ppo", "mig-a100"), ("ppo_v1", "mig-a100")],
)
def test_shipped_v1_agent_runs_zero_shot_on_other_option_sets(agent: str, scenario: str) -> None:
    """The option-agnostic agents (``ppo``, trained on ``default`` only, and ``ppo_v1``) run on
    other option sets and cluster sizes without retraining."""
    from gpu_sharing_gym.agents.agent import PRETRAINED_DIR

    if agent not in pretrained_names():
        pytest.skip(f"{agent} is not shipped")
    assert (PRETRAINED_DIR / f"{agent}.zip").stat().st_size < 5_000_000  # the bound
    cfg = load_scenario(scenario)
    assert cfg.name != "default"
    (rec,) = evaluate(load_agent(agent), cfg, [0])  # an illegal action would raise
    assert rec["jobs_completed"] > 0.5 * rec["jobs_submitted"]


# ------------------------------------------------------------------- paired rewards, labels
def test_paired_return_is_the_gap_to_the_reference() -> None:
    """Driven by time_sharing against speed_sjf, the paired return is (their JCT gap in hours)
    and the SLO term; speed_sjf against itself earns exactly the SLO term (0 here)."""
    # (seed 3: workload version 4's `default` has no recurring group its fleet cannot run, so
    # a job fails only where a one-off job asks for what no node holds; at seed 3 an 8-GPU
    # gpt2 job does, so the two normalisations below differ; version 3's seed 7 failed a run
    # of the 8-GPU bert group every episode had)
    seed = 3
    cfg = load_scenario("default")
    (ts,) = evaluate(make_policy("time_sharing"), cfg, [seed])
    (sjf,) = evaluate(make_policy("speed_sjf"), cfg, [seed])
    for driver, rec in (("time_sharing", ts), ("speed_sjf", sjf)):
        env = PairedReward(GpuSharingEnvV1("default"), "speed_sjf")
        pol = make_policy(driver)
        obs, info = env.reset(seed=seed)
        pol.reset(seed)
        total, done = 0.0, False
        base = env.unwrapped
        while not done:
            a = pol.act(ClusterView(base.sim, base.codec), obs, info["action_mask"])  # type: ignore[attr-defined]
            obs, r, done, _, info = env.step(a)
            total += float(r)
        assert rec["slo_attainment"] >= 0.95 and sjf["slo_attainment"] >= 0.95
        # (the returns are the offline job-seconds in the system over every offline job, N;
        # ``jct_mean_s`` is the same seconds over the completed ones: at this seed one job
        # fails, an 8-GPU one-off job no node holds)
        n = sum(not st.spec.online for st in base.sim.jobs.values())  # type: ignore[attr-defined]
        assert sjf["jobs_completed"] < n  # (so the two normalisations differ here)

        ref_h = sjf["jct_mean_s"] * sjf["jobs_completed"] / n / 3600
        rec_h = rec["jct_mean_s"] * rec["jobs_completed"] / n / 3600
        assert info["reference_jct_return"] == pytest.approx(-ref_h)
        assert total == pytest.approx(-(rec_h - ref_h), abs=1e-9)


def test_labelled_episodes_are_cached_and_independent_of_workers(tmp_path: Path) -> None:
    seeds = [1_000_123, 1_000_456]
    kw = {"env_id": "GpuSharing-v1", "paired": "speed_sjf"}
    a = label_episodes("default", {}, "speed_sjf", seeds, cache_dir=tmp_path, workers=2, **kw)  # type: ignore[arg-type]
    files = sorted(p.name for p in next(tmp_path.iterdir()).glob("*.npz"))
    assert files == [f"{s}.npz" for s in sorted(seeds)]
    b = label_episodes("default", {}, "speed_sjf", seeds, cache_dir=tmp_path, workers=1, **kw)  # type: ignore[arg-type]
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.masks, b.masks)
    np.testing.assert_allclose(a.obs["pairs"], b.obs["pairs"])
    assert a.masks[np.arange(len(a)), a.actions].all()
    # the labelled episode is speed_sjf's own: its paired returns are 0 up to the SLO term
    (rec,) = evaluate(make_policy("speed_sjf"), load_scenario("default"), [seeds[0]])
    assert a.episode_metrics[0]["jct_mean_s"] == pytest.approx(rec["jct_mean_s"])


def test_cloning_a_heuristic_then_a_dagger_round_with_the_student_driving(tmp_path: Path) -> None:
    from gpu_sharing_gym.agents.bc import Demos, pretrain

    model = _v1_model()
    seeds = [1_000_777]
    demos = label_episodes("default", {}, "speed_sjf", seeds, cache_dir=tmp_path)
    fit = pretrain(model.policy, demos, epochs=3, lr=3e-3, batch_size=64)
    assert 0.0 <= fit["bc_accuracy"] <= 1.0 and math.isfinite(fit["bc_value_loss"])
    student = (
        {"format": 2, "policy": "OptionActorCriticPolicy", "expert_hint": None,
         "policy_kwargs": {"hidden": 16, "n_layers": 1, "pair_hidden": 8}},
        model.policy.state_dict(),
    )  # fmt: skip
    dagger = label_episodes("default", {}, "speed_sjf", seeds, student=student, cache_dir=tmp_path)
    # the student drove (its episode differs from the expert's), the expert labelled, legally
    assert len(dagger) != len(demos) or not np.array_equal(dagger.actions, demos.actions)
    assert dagger.masks[np.arange(len(dagger)), dagger.actions].all()
    assert len(list(tmp_path.rglob("*.npz"))) == 1  # student episodes are not cached
    both = Demos.concat([demos, dagger])
    assert len(both) == len(demos) + len(dagger)


def test_planner_is_an_expert_with_keyword_arguments() -> None:
    from gpu_sharing_gym.agents.envs import make_expert

    planner = make_expert("planner", base="speed_sjf", samples=2)
    assert planner.base_name == "speed_sjf" and planner.samples == 2  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"^expert 'planner': .*unexpected keyword argument"):
        make_expert("planner", sample=2)


# ----------------------------------------------------------------------------- train + resume
def test_progress_csv_resumes_without_the_rows_after_the_checkpoint(tmp_path: Path) -> None:
    from gpu_sharing_gym.agents.callbacks import STEP_KEY, ResumableCSV

    path = tmp_path / "progress.csv"
    path.write_text(
        f"pretrain/bc_accuracy,{STEP_KEY},train/loss\n0.9,,\n,128,1.5\n,256,1.25\n,384,1.0\n"
    )
    out = ResumableCSV(str(path), resume_step=256)  # killed at 384+, checkpoint at 256
    out.write({STEP_KEY: 384, "train/loss": 0.5, "eval/jct_mean_s": 100.0}, {}, 384)
    out.close()
    assert path.read_text().splitlines() == [
        f"pretrain/bc_accuracy,{STEP_KEY},train/loss,eval/jct_mean_s",
        "0.9,,,",
        ",128,1.5,",
        ",256,1.25,",
        ",384,0.5,100.0",
    ]


def test_v1_training_resume_keeps_progress_and_eval_schedule(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY_V1)
    out = tmp_path / "run"
    r = run(["--config", str(cfg), "--out", str(out), "--quiet"])
    assert r.returncode == 0, r.stderr
    csv = out / "tb" / "progress.csv"
    first = csv.read_text().splitlines()
    m = json.loads((out / "metrics.json").read_text())
    assert [h["timesteps"] for h in m["eval_history"]] == [256, 384]
    # resume with a larger budget: rows kept, evaluations at the next multiples, then the end
    r = run(["--out", str(out), "--resume", "--timesteps", "768"])  # (not --quiet: the line)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr and "at 384 timesteps" in r.stderr
    rows = csv.read_text().splitlines()
    assert len(rows) > len(first)
    header, old_header = rows[0].split(","), first[0].split(",")
    assert header[: len(old_header)] == old_header
    for new, old in zip(rows[1 : len(first)], first[1:]):
        assert new.startswith(old)  # (new columns may extend old rows)
    m = json.loads((out / "metrics.json").read_text())
    assert [h["timesteps"] for h in m["eval_history"]] == [256, 384, 512, 768]
    assert (out / "best_model.zip").is_file() or not any(h["meets_slo"] for h in m["eval_history"])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(out / "tb"))
    ea.Reload()
    steps = sorted(e.step for e in ea.Scalars("eval/jct_mean_s"))
    assert steps == [256, 384, 512, 768]  # one point per step
    # a finished run says so
    r = run(["--out", str(out), "--resume", "--quiet"])
    assert r.returncode == 0 and "the run is finished (768 of 768 timesteps)" in r.stdout
    agent = load_agent(out / "model.zip")
    assert agent.option_agnostic and agent.meta["format"] == 2


def test_value_labels_score_the_students_own_action(tmp_path: Path) -> None:
    """``label_episodes(values=True)`` with a planner expert keeps every scored candidate's
    first action and rollout objective; in a DAgger round the student's own action is among
    them, the label is the best of them, and the soft targets fit."""
    import yaml

    from gpu_sharing_gym.agents.agent import RLAgent
    from gpu_sharing_gym.agents.bc import pretrain, value_targets
    from gpu_sharing_gym.agents.expert import VALUE_K

    data = yaml.safe_load((ROOT / "configs/scenarios/default.yaml").read_text())
    data["workload"]["offline"].update(max_jobs=16, arrival_window_h=2)
    scen = tmp_path / "small.yaml"
    scen.write_text(yaml.safe_dump(data))
    model = _v1_model()
    meta = {"format": 2, "policy": "OptionActorCriticPolicy", "expert_hint": None,
            "policy_kwargs": {"hidden": 16, "n_layers": 1, "pair_hidden": 8}}  # fmt: skip
    student = (meta, model.policy.state_dict())
    kw = {
        "base": "speed_sjf",
        "candidates": ["first_fit", "pack"],
        "fortified": False,
        "horizon": 0,
    }
    d = label_episodes(str(scen), {}, "planner_oracle", [1_000_321], expert_kwargs=kw,
                       student=student, values=True)  # fmt: skip
    assert d.cand_actions is not None and d.cand_scores is not None
    assert d.cand_actions.shape == d.cand_scores.shape == (len(d), VALUE_K)
    agent = RLAgent(meta, dict(student[1]))
    scored = 0
    for i in range(len(d)):
        acts, scores = d.cand_actions[i], d.cand_scores[i]
        valid = acts >= 0
        assert d.actions[i] in acts[valid]  # the label is a scored candidate ...
        if valid.sum() > 1:
            scored += 1
            best = scores[valid].min()
            assert scores[valid][list(acts[valid]).index(d.actions[i])] == best  # ... the best
            s_act = agent.predict({k: v[i] for k, v in d.obs.items()}, d.masks[i])
            assert s_act in acts[valid]  # the student's own action was scored
    assert scored > 0
    a, w = value_targets(d, 1e-6)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-6)
    assert d.masks[np.arange(len(d))[:, None], a].all()  # weight only on legal actions
    top = a[np.arange(len(d)), w.argmax(axis=1)]
    np.testing.assert_array_equal(top, d.actions)  # near-zero temperature: the planner's pick
    fit = pretrain(model.policy, d, epochs=2, lr=1e-3, batch_size=64, value_temp=0.01)
    assert math.isfinite(fit["bc_policy_loss"])


def test_value_targets_weigh_only_legal_scored_candidates() -> None:
    from gpu_sharing_gym.agents.bc import Demos, value_targets

    masks = np.ones((3, 6), dtype=bool)
    masks[0, 4] = False  # candidate 4 is illegal in row 0's recorded mask
    d = Demos(
        obs={}, masks=masks, actions=np.array([1, 2, 3]), returns=np.zeros(3, np.float32),
        episode_metrics=[],
        cand_actions=np.array([[1, 4, 2], [2, 3, -1], [-1, -1, -1]]),
        cand_scores=np.array([[100.0, 50.0, 101.0], [100.0, 100.0, np.nan], [np.nan] * 3]),
    )  # fmt: skip
    a, w = value_targets(d, 0.01)  # temperature: 1 % of the best objective (1 s here)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-6)
    assert w[0, 1] == 0.0 and w[0, 0] == pytest.approx(1 / (1 + np.exp(-1.0)))  # 4 is illegal
    np.testing.assert_allclose(w[1, :2], 0.5)  # a tie
    assert a[2, 0] == 3 and w[2, 0] == 1.0  # nothing scored: the label
    assert masks[np.arange(3)[:, None], a].all()


def test_one_set_of_weights_is_fitted_to_two_cluster_sizes(tmp_path: Path) -> None:
    """pretrain_layouts: demonstrations from two layouts (16 and 32 GPUs) fit one network; the
    result loads as an ordinary agent and acts as the fitted policies do on both."""
    from gpu_sharing_gym.agents.agent import RLAgent
    from gpu_sharing_gym.agents.bc import pretrain_layouts

    model = _v1_model()
    meta = {
        "format": 2, "policy": "OptionActorCriticPolicy", "expert_hint": None,
        "policy_kwargs": {"hidden": 16, "n_layers": 1, "pair_hidden": 8},
    }  # fmt: skip
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    parts = [
        label_episodes(s, {}, "speed_sjf", [1_000_321], cache_dir=tmp_path)
        for s in ("default", "default-x2")
    ]
    agent = RLAgent(meta, before)
    policies = [
        agent.policy_for(*agent.layout({k: v[0] for k, v in d.obs.items()}, d.masks[0]))
        for d in parts
    ]
    assert policies[0] is not policies[1]
    losses: list[list[tuple[float, float]]] = []
    pretrain_layouts(
        policies, parts, epochs=4, lr=3e-3, batch_size=32, log=lambda e, r: losses.append(r)
    )
    shared = [p for p in policies[0].parameters()]
    assert all(a is b for a, b in zip(shared, policies[1].parameters()))
    for j in range(2):
        assert losses[-1][j][0] < losses[0][j][0]  # both parts were fitted
    after = policies[0].state_dict()
    assert any(not th.equal(before[k], after[k]) for k in before)
    fresh = RLAgent(meta, after)
    for d, pol in zip(parts, policies):
        for i in range(0, len(d), max(1, len(d) // 5)):
            obs = {k: v[i] for k, v in d.obs.items()}
            t = {k: th.as_tensor(v)[None] for k, v in obs.items()}
            with th.no_grad():
                want = int(pol.get_distribution(t, action_masks=d.masks[i][None]).mode()[0])
            assert fresh.predict(obs, d.masks[i]) == want


def test_agent_decides_on_one_torch_thread_and_restores_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision must not depend on the machine's core count. Reductions split across threads
    add in another order, and at a near tie that can pick another action (a distilled candidate
    scored 10,336 s on `pai-busy` seed 2 with two threads and 10,878 s with one). So
    ``RLAgent.predict`` runs the network on one torch thread, whatever the caller set, and
    leaves the caller's count as it was."""
    if "ppo" not in pretrained_names():
        pytest.skip("ppo is not shipped")
    agent = load_agent("ppo")
    seen: list[int] = []
    real = OptionActorCriticPolicy.get_distribution

    def spy(self: OptionActorCriticPolicy, *args: object, **kwargs: object) -> object:
        seen.append(th.get_num_threads())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(OptionActorCriticPolicy, "get_distribution", spy)
    before = th.get_num_threads()
    th.set_num_threads(2)
    try:
        evaluate(agent, load_scenario("default"), [0])
        assert th.get_num_threads() == 2
    finally:
        th.set_num_threads(before)
    assert seen and set(seen) == {1}
