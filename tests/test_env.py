"""GpuSharing-v0: the Gymnasium contract (DESIGN.md "The environment contract", issue 4)."""

from __future__ import annotations

import copy
import math
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import gpu_sharing_env
from gpu_sharing_env.config import ConfigError, load_scenario, scenario_names
from gpu_sharing_env.envs import REWARDS, GpuSharingEnv
from gpu_sharing_env.envs.conformance import api_test
from gpu_sharing_env.envs.observation import GLOBAL_FEATURES, GPU_FEATURES, JOB_FEATURES
from gpu_sharing_env.envs.render import image_shape
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_env.sim.state import Status

ROOT = Path(__file__).resolve().parent.parent
F = len(GPU_FEATURES)
GF = {n: i for i, n in enumerate(GPU_FEATURES)}


def _missing_data(name: str) -> str | None:
    """The first data file a scenario needs that is absent, or None."""
    cfg = load_scenario(name)
    base = Path(cfg.source_path).parent
    paths = []
    if cfg.cluster.fleet is not None:
        paths.append(cfg.cluster.fleet.path)
    if cfg.workload.offline.source == "trace":
        paths.append(cfg.workload.offline.trace_path)
    for p in paths:
        q = Path(p).expanduser()
        if not (q if q.is_absolute() else base / q).exists() and not q.exists():
            return p
    return None


def _scenario_or_skip(name: str) -> str:
    missing = _missing_data(name)
    if missing:
        pytest.skip(f"scenario {name}: data file {missing} is absent")
    return name


def _step_legal(env: gym.Env[Any, Any], info: dict[str, Any], rng: np.random.Generator) -> Any:
    legal = np.flatnonzero(info["action_mask"])
    return env.step(int(legal[rng.integers(legal.size)]))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return isinstance(b, tuple | list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(a == b)


@pytest.fixture
def env() -> GpuSharingEnv:
    e = gym.make("GpuSharing-v0").unwrapped
    assert isinstance(e, GpuSharingEnv)
    return e


# ---------------------------------------------------------------------------- registration
def test_registered_on_import() -> None:
    from importlib.metadata import version

    assert gpu_sharing_env.__version__ == version("gpu-sharing-gym")
    assert gpu_sharing_env.MODEL_VERSION == 6
    spec = gym.spec("GpuSharing-v0")
    assert spec.entry_point == "gpu_sharing_env.envs.gpu_sharing:GpuSharingEnv"
    assert spec.max_episode_steps is None


@pytest.mark.parametrize("name", scenario_names())
def test_gymnasium_check_env_no_warnings(name: str) -> None:
    env = gym.make("GpuSharing-v0", scenario=_scenario_or_skip(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env.unwrapped)


@pytest.mark.parametrize("name", scenario_names())
def test_sb3_check_env_no_warnings(name: str) -> None:
    env = GpuSharingEnv(scenario=_scenario_or_skip(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(env, warn=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reward": "nope"}, r"^reward: must be one of jct, throughput, slo \(got 'nope'\)$"),
        ({"invalid_action": "skip"}, r"^invalid_action: must be one of noop, raise"),
        ({"render_mode": "human"}, r"^render_mode: must be None or one of ansi, rgb_array"),
        ({"max_gpus": 4}, r"^max_gpus: must be 0 or >= the cluster's 12 GPUs \(got 4"),
        ({"max_gpus": -1}, r"^max_gpus: must be None or an integer >= 0"),
        ({"scenario": 3}, r"^scenario: must be a scenario name, a YAML path or a ScenarioConfig"),
        ({"reward_kwargs": {"slo_weight": -1.0}}, r"^reward_kwargs.slo_weight: must be >= 0"),
        ({"reward_kwargs": {"bogus": 1}}, r"^reward_kwargs: "),
    ],
)
def test_bad_kwargs_raise_one_line_value_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match) as e:
        GpuSharingEnv(**kwargs)
    assert "\n" not in str(e.value)


def test_unknown_scenario_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="scenario 'nope': not found"):
        gym.make("GpuSharing-v0", scenario="nope")


def test_scenario_by_path_and_by_config() -> None:
    path = ROOT / "configs" / "scenarios" / "default.yaml"
    a = GpuSharingEnv(scenario=str(path))
    b = GpuSharingEnv(scenario=load_scenario("default"))
    oa, _ = a.reset(seed=5)
    ob, _ = b.reset(seed=5)
    assert _same(oa, ob)


# ---------------------------------------------------------------------------- spaces and masks
def test_spaces_layout(env: GpuSharingEnv) -> None:
    cfg = env.cfg
    g, w, n_opt = env.sim.n_gpus, cfg.env.queue_window, len(env.sim.options)
    assert env.max_gpus == g == 12
    assert env.action_space == gym.spaces.Discrete(1 + w * g * n_opt)
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict)
    assert space["gpus"].shape == (g * F,)
    assert space["jobs"].shape == (w * len(JOB_FEATURES),)
    assert space["global"].shape == (len(GLOBAL_FEATURES),)
    for box in space.values():
        assert box.dtype == np.float32
        assert np.all(np.isfinite(box.low)) and np.all(np.isfinite(box.high))


def test_padding_to_max_gpus_masks_absent_gpus() -> None:
    env = GpuSharingEnv(max_gpus=32)
    obs, info = env.reset(seed=1)
    gpus = obs["gpus"].reshape(32, F)
    assert gpus[:12, GF["present"]].tolist() == [1.0] * 12
    assert not gpus[12:].any()
    table = info["action_mask"][1:].reshape(env.sim.window, 32, len(env.sim.options))
    assert table[:, :12].any() and not table[:, 12:].any()
    assert env.action_space == gym.spaces.Discrete(1 + env.sim.window * 32 * len(env.sim.options))


def test_gpu_features_after_a_placement(env: GpuSharingEnv) -> None:
    env.reset(seed=0)
    sim = env.sim
    excl = next(i for i, o in enumerate(sim.options) if o.label == "excl")
    slot, job, gpu = next(
        (k, j, int(np.flatnonzero(sim.mask(j.job_id)[:, excl])[-1]))
        for k, j in enumerate(sim.window_jobs())
        if j.num_gpus == 1 and sim.mask(j.job_id)[:, excl].any()
    )
    obs, *_ = env.step(env.codec.encode(slot, gpu, excl))
    row = obs["gpus"].reshape(env.max_gpus, F)[gpu]
    if sim.jobs[job.job_id].status is Status.RUNNING:  # not already finished
        assert row[GF["mode_exclusive"]] == 1.0 and row[GF["mode_unset"]] == 0.0
        assert row[GF["residents"]] == pytest.approx(1 / sim.cfg.sharing.max_residents)
        cap = sim.cluster.mem_cap[gpu]
        assert row[GF["free_mem"]] == pytest.approx((cap - job.mem_gb) / cap, abs=1e-6)
    assert row[GF["present"]] == 1.0


def test_mask_matches_info_codec_and_legality(env: GpuSharingEnv) -> None:
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=2)
    for _ in range(60):
        mask = env.action_masks()
        assert mask.dtype == np.int8 and mask.ndim == 1 and mask[0] == 1
        assert np.array_equal(mask, info["action_mask"])
        assert np.array_equal(mask, env.codec.mask(env.sim))  # the core's own codec
        if not env.sim.done:
            assert mask[1:].any()  # a decision point: something is placeable
        _, _, term, _, info = _step_legal(env, info, rng)
        if term:
            _, info = env.reset()


def test_invalid_action_raise_gives_the_simulators_reason() -> None:
    env = GpuSharingEnv(invalid_action="raise")
    _, info = env.reset(seed=0)
    illegal = np.flatnonzero(info["action_mask"] == 0)
    a = int(illegal[0])
    why = env.explain(a)
    assert why
    with pytest.raises(ValueError, match=r"^illegal action \d+: ") as e:
        env.step(a)
    assert why in str(e.value)
    with pytest.raises(ValueError, match=r"^action: must be in 0\.\."):
        env.step(env.codec.n_actions)


def test_invalid_action_noop_waits_and_flags(env: GpuSharingEnv) -> None:
    _, info = env.reset(seed=0)
    a = int(np.flatnonzero(info["action_mask"] == 0)[-1])
    waiter = copy.deepcopy(env)
    obs_n, r_n, term_n, _, info_n = env.step(a)
    obs_w, r_w, term_w, _, info_w = waiter.step(0)
    assert info_n["invalid_action"] is True and info_w["invalid_action"] is False
    assert _same(obs_n, obs_w) and r_n == r_w and term_n == term_w
    assert info_n["sim_time_s"] == info_w["sim_time_s"]


# ---------------------------------------------------------------------------- episodes
def _run(env: gym.Env[Any, Any], seed: int, steps: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    out = []
    obs, info = env.reset(seed=seed)
    out.append((obs, info))
    for _ in range(steps):
        step = _step_legal(env, info, rng)
        out.append(step)
        obs, _r, term, trunc, info = step
        if term or trunc:
            out.append(env.reset())
            info = out[-1][1]
    return out


def test_same_seed_same_trajectory() -> None:
    a = _run(gym.make("GpuSharing-v0"), 7, 150)
    b = _run(gym.make("GpuSharing-v0"), 7, 150)
    assert len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    c = _run(gym.make("GpuSharing-v0"), 8, 150)
    assert not all(_same(x, y) for x, y in zip(a, c))


TRAJECTORY_DIGEST = """
import hashlib, sys
import gymnasium as gym, numpy as np
import gpu_sharing_env
env = gym.make("GpuSharing-v0")
rng = np.random.default_rng(3)
h = hashlib.sha256()
obs, info = env.reset(seed=3)
for _ in range(120):
    legal = np.flatnonzero(info["action_mask"])
    obs, r, term, trunc, info = env.step(int(legal[rng.integers(legal.size)]))
    for k in sorted(obs):
        h.update(obs[k].tobytes())
    h.update(np.float64(r).tobytes())
    if term:
        obs, info = env.reset()
print(h.hexdigest())
"""


def test_trajectory_reproducible_across_processes() -> None:
    def digest() -> str:
        out = subprocess.run(
            [sys.executable, "-c", TRAJECTORY_DIGEST], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    local: dict[str, Any] = {}
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(TRAJECTORY_DIGEST, local)
    assert digest() == buf.getvalue().strip()


def test_reset_without_seed_continues_the_seeded_sequence() -> None:
    a, b = GpuSharingEnv(), GpuSharingEnv()
    a.reset(seed=11)
    b.reset(seed=11)
    oa, _ = a.reset()
    ob, _ = b.reset()
    assert _same(oa, ob) and a.episode_seed == b.episode_seed != 11
    a.reset()
    assert a.episode_seed != b.episode_seed


def test_seeded_episode_equals_the_reference_runner() -> None:
    """reset(seed=s) + the env's step semantics replay gpu_sharing_env.evaluation.runner.run_episode exactly."""
    from gpu_sharing_env.evaluation.runner import run_episode
    from gpu_sharing_env.sim.build import make_simulator
    from gpu_sharing_env.sim.view import ClusterView
    from gpu_sharing_gym.baselines.reference import FifoExclusive

    expected = run_episode(FifoExclusive(), make_simulator(load_scenario("default")), 4)
    env = GpuSharingEnv()
    policy = FifoExclusive()
    policy.reset(4)
    obs, info = env.reset(seed=4)
    term = False
    while not term:
        a = policy.act(ClusterView(env.sim, env.codec), obs, info["action_mask"])
        obs, _, term, _, info = env.step(a)
    assert _same(info["metrics"], expected)


def test_episode_end_metrics_and_jct_return() -> None:
    env = GpuSharingEnv(reward="jct")
    rng = np.random.default_rng(1)
    _, info = env.reset(seed=1)
    ret, term, steps = 0.0, False, 0
    while not term:
        _, r, term, trunc, info = _step_legal(env, info, rng)
        assert (trunc is False and "metrics" not in info) or term
        ret += float(r)
        steps += 1
    m = info["metrics"]
    assert set(METRIC_NAMES) <= set(m)
    sim = env.sim
    offline = [st for st in sim.jobs.values() if not st.spec.online]
    # Hand-computed: each submitted offline job's time in the system, up to the end
    # (a job the fleet can never host fails on arrival and contributes 0).
    in_system = sum(
        (sim.now if math.isnan(st.ledger.finish_t) else st.ledger.finish_t) - st.spec.submit_s
        for st in offline
        if st.status is not Status.FUTURE
    )
    att = m["slo_attainment"] if not math.isnan(m["slo_attainment"]) else 1.0
    expected = -in_system / (3600.0 * len(offline)) - 100.0 * max(0.0, sim.cfg.slo_target - att)
    assert ret == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert info["action_mask"].tolist() == [1] + [0] * (env.codec.n_actions - 1)
    # stepping a finished episode is harmless
    _, r, term, _, _ = env.step(0)
    assert term and r == 0.0


def test_throughput_and_slo_rewards_telescope() -> None:
    for name in ("throughput", "slo"):
        env = GpuSharingEnv(reward=name)
        rng = np.random.default_rng(2)
        _, info = env.reset(seed=2)
        ret, term = 0.0, False
        while not term:
            _, r, term, _, info = _step_legal(env, info, rng)
            ret += float(r)
        acc, sim = env.sim.acc, env.sim
        if name == "throughput":
            assert ret == pytest.approx(acc.stp_s / (3600.0 * sim.n_gpus), rel=1e-9)
            assert ret > 0
        else:
            att = acc.requests_ok / acc.requests if acc.requests else 1.0
            assert ret == pytest.approx(-100.0 * max(0.0, sim.cfg.slo_target - att), abs=1e-9)
    assert set(REWARDS) >= {"jct", "throughput", "slo"}


# ---------------------------------------------------------------------------- rendering
def test_render_ansi_names_gpus_modes_and_queue() -> None:
    env = gym.make("GpuSharing-v0", render_mode="ansi")
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    for _ in range(5):
        _, _, _, _, info = _step_legal(env, info, rng)
    text = env.render()
    assert isinstance(text, str)
    for name in ("A100-40GB", "V100-16GB", "T4", "queue window", "node "):
        assert name in text
    assert text.count("  gpu ") == 12
    u = env.unwrapped
    assert isinstance(u, GpuSharingEnv)
    placed = [j for r in u.sim.cluster.residents for j in r]
    assert all(f"j{j}(" in text for j in placed)


def test_render_rgb_shape_and_content() -> None:
    env = gym.make("GpuSharing-v0", render_mode="rgb_array")
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    img0 = env.render()
    for _ in range(6):
        _, _, _, _, info = _step_legal(env, info, rng)
    img = env.render()
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8
    assert img.shape == image_shape(12) == (6 + 24 + 24, 12 * 24, 3)
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 4  # not blank
    assert not np.array_equal(img0, img)  # placements show


def test_render_without_mode_warns_and_returns_none(env: GpuSharingEnv) -> None:
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="without specifying any render mode"):
        assert env.render() is None


# ---------------------------------------------------------------------------- wrappers, pickling
def test_pickle_mid_episode_resumes_identically() -> None:
    env = gym.make("GpuSharing-v0")
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    for _ in range(20):
        _, _, _, _, info = _step_legal(env, info, rng)
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(40):
        a = int(np.flatnonzero(info["action_mask"])[-1])
        s1 = env.step(a)
        s2 = clone.step(a)
        assert _same(s1, s2)
        info = s1[4]
        if s1[2]:
            break


def test_record_episode_statistics_and_time_limit() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("GpuSharing-v0"))
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    ret, n, term = 0.0, 0, False
    while not term:
        _, r, term, trunc, info = _step_legal(env, info, rng)
        ret += float(r)
        n += 1
    assert info["episode"]["l"] == n and info["episode"]["r"] == pytest.approx(ret, rel=1e-5)

    limited = gym.make("GpuSharing-v0", max_episode_steps=5)
    _, info = limited.reset(seed=0)
    for i in range(5):
        _, _, term, trunc, info = _step_legal(limited, info, rng)
        assert trunc == (i == 4) and not term


# ---------------------------------------------------------------------------- conformance, agents
def test_conformance_passes_on_default() -> None:
    rep = api_test("default", num_steps=120, seed=0, max_legal_checks=32)
    assert rep.steps == 120 and rep.legal_stepped > 0 and rep.illegal_stepped > 0


def test_conformance_catches_a_broken_mask() -> None:
    from gpu_sharing_env.envs.conformance import ConformanceError

    class WaitIllegal(GpuSharingEnv):
        def action_masks(self) -> np.ndarray:
            m = super().action_masks().copy()
            m[0] = 0
            return m

    with pytest.raises(ConformanceError, match="wait"):
        api_test(WaitIllegal, num_steps=5)


def test_maskable_ppo_smoke() -> None:
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    env = GpuSharingEnv()
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0)
    model.learn(256)
    obs, _ = env.reset(seed=9)
    for _ in range(20):
        mask = env.action_masks()
        a, _ = model.predict(obs, action_masks=mask, deterministic=True)
        assert mask[int(a)] == 1
        obs, _, term, _, _ = env.step(a)
        if term:
            break
    assert get_action_masks(model.get_env()).shape == (1, env.codec.n_actions)


def test_bench_command_line(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--sizes", "16", "--seconds", "0.2",
         "--json", str(out)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    import json

    data = json.loads(out.read_text())
    assert set(data["env_steps_per_s"]) == {"16"} and data["env_steps_per_s"]["16"] > 0
    assert data["ratio"]["16"] == pytest.approx(
        data["env_steps_per_s"]["16"] / data["cartpole_steps_per_s"]
    )


@pytest.mark.parametrize("gym_first", [False, True])
def test_ids_registered_in_either_import_order(gym_first: bool) -> None:
    """The ids are registered whether Gymnasium is imported before or after the package, and a
    process that never imports Gymnasium (``gsg evaluate``) does not load it for them; the
    "out of date" notice on v0 and v1 stays silenced either way."""
    first, second = (
        ("gymnasium", "gpu_sharing_env") if gym_first else ("gpu_sharing_env", "gymnasium")
    )
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('error')\n"
        f"import {first}\n"
        "print('gymnasium' in sys.modules)\n"
        f"import {second}\n"
        "import gymnasium\n"
        "print(*(f'GpuSharing-v{v}' in gymnasium.registry for v in range(3)))\n"
        "gymnasium.make('GpuSharing-v1').close()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stdout.decode().split() == [str(gym_first), "True", "True", "True"]
