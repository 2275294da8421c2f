"""``GpuSharing-v3`` (v2's candidate moves, kept read-only observation arrays, one mask) against
v2 and the env contract: the same episodes, records and observations as v2 step by step (the
first ``k`` rows, the mask, ``global``; zero rows beyond them) over scenarios, seeds, decision
scopes, prunings, suspensions and pair features, across resets; one mask array shared by the
observation, ``info`` and ``action_masks()``; the previous episode's final observation kept
through a reset; Gymnasium's checker but its data-reuse check, the conformance test, vector envs
that copy, copies and pickles, two processes; the scenario's ``env.max_candidates``;
MaskablePPO's rollouts."""

from __future__ import annotations

import copy
import itertools
import json
import pickle
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils import env_checker

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.candidates import TooManyCandidates
from gpu_sharing_env.envs.conformance import api_test
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.interfaces import DEFAULT_MAX_CANDIDATES, KeptCandidateMoves
from tests.helpers import run_probe

ROOT = Path(__file__).resolve().parents[1]


def _pair(scenario: str, **kw: Any) -> tuple[GpuSharingEnv, GpuSharingEnv]:
    cfg = load_scenario(scenario)
    v2 = gym.make("GpuSharing-v2", scenario=cfg, **kw).unwrapped
    v3 = gym.make("GpuSharing-v3", scenario=cfg, **kw).unwrapped
    assert isinstance(v2, GpuSharingEnv) and isinstance(v3, GpuSharingEnv)
    assert isinstance(v3.interface, KeptCandidateMoves)
    return v2, v3


def _same_step(o2: dict, i2: dict, o3: dict, i3: dict, env3: GpuSharingEnv, where: str) -> None:
    """v3's observation and info equal v2's; its arrays are the kept, read-only, shared ones."""
    mask = i3["action_mask"]
    k = len(env3.interface.candidates)
    assert mask is o3["candidate_mask"] and mask is env3.action_masks(), where
    assert mask.dtype == np.int8 and np.array_equal(i2["action_mask"], mask), where
    assert np.array_equal(o2["candidate_mask"], mask.astype(np.float32)), where
    assert int(mask.sum()) == k and mask[:k].all(), where
    # every row: the first k equal v2's, those beyond zero in both
    assert np.array_equal(o2["candidates"][:k], o3["candidates"][:k]), where
    assert not o3["candidates"][k:].any(), where
    assert np.array_equal(o2["candidates"], o3["candidates"]), where
    assert np.array_equal(o2["global"], o3["global"]), where
    for a in o3.values():
        assert not a.flags.writeable, where
    assert i2.keys() == i3.keys(), where
    assert i2.get("metrics") == i3.get("metrics"), where
    assert i2["sim_time_s"] == i3["sim_time_s"], where


def _play(scenario: str, seeds: list[int], steps: int, **kw: Any) -> int:
    """Random-legal steps on v2 and v3 side by side, episodes after episodes on one env each
    (so a reset follows a full table); returns the episodes finished."""
    v2, v3 = _pair(scenario, **kw)
    ends = 0
    for seed in seeds:
        o2, i2 = v2.reset(seed=seed)
        o3, i3 = v3.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for t in range(steps):
            _same_step(o2, i2, o3, i3, v3, f"{scenario} seed {seed} step {t}")
            legal = np.flatnonzero(i2["action_mask"])
            # (some holds, so the queue grows and the table fills and empties)
            a = int(legal[rng.integers(legal.size)]) if rng.random() < 0.8 else 0
            o2, r2, te2, tr2, i2 = v2.step(a)
            o3, r3, te3, tr3, i3 = v3.step(a)
            assert (r2, te2, tr2) == (r3, te3, tr3)
            if te2:
                _same_step(o2, i2, o3, i3, v3, f"{scenario} seed {seed} end")
                ends += 1
                break
        assert v2.sim.metrics() == v3.sim.metrics()
        assert v2.sim.acc.decisions == v3.sim.acc.decisions
    return ends


def test_default_episodes_equal_v2s() -> None:
    assert _play("default", [0, 1, 2], 400) == 3


@pytest.mark.parametrize(
    ("scenario", "kw"),
    [
        ("default", {"decision_scope": "window"}),
        ("default", {"pruning": "classes", "suspend": True, "max_candidates": 512}),
        ("mig-a100", {"pair_features": True, "max_candidates": 65536}),
        ("pai-busy", {"pruning": "classes", "max_candidates": 65536}),
    ],
)
def test_scopes_prunings_and_options_equal_v2s(scenario: str, kw: dict[str, Any]) -> None:
    _play(scenario, [3, 4], 60, **kw)


def test_kept_arrays_are_overwritten_in_place_and_the_last_episodes_stay() -> None:
    env = gym.make("GpuSharing-v3", scenario="default")
    obs, info = env.reset(seed=5)
    first = {k: v for k, v in obs.items()}
    finals: list[dict[str, np.ndarray]] = []
    kept: list[dict[str, np.ndarray]] = []
    for episode in range(3):
        if episode:
            obs, info = env.reset(seed=5 + episode)
        for _ in range(1000):
            legal = np.flatnonzero(info["action_mask"])
            obs2, _, te, _, info = env.step(int(legal[-1]))
            assert all(obs2[k] is obs[k] for k in obs)  # (the same arrays every step)
            with pytest.raises(ValueError, match="read-only"):
                obs2["candidates"][0, 0] = 1.0
            if te:
                break
        assert te
        finals.append(obs2)
        kept.append({k: v.copy() for k, v in obs2.items()} | {"info": info["action_mask"].copy()})
        if episode:
            # the last episode's final observation and info mask survive this episode's steps
            prev = finals[episode - 1]
            assert all(prev[k] is not obs2[k] for k in obs2)
            assert all(np.array_equal(prev[k], kept[episode - 1][k]) for k in prev)
    # two sets of arrays, taking turns episode by episode
    assert all(finals[2][k] is finals[0][k] is first[k] for k in first)


def test_one_mask_and_stale_rows_zeroed_on_the_builders_out_path() -> None:
    """The kept table after a step with many candidates and then one with few: rows beyond the
    few are zero again, and the mask follows (up and down). (Holding a third of the time, the
    queue's legal moves pass v2's default 4,096 by the horizon on workload version 3's
    ``default``: the table is made larger, as such a policy needs.)"""
    v2, v3 = _pair("default", max_candidates=16384)
    o2, i2 = v2.reset(seed=8)
    o3, i3 = v3.reset(seed=8)
    sizes = []
    for _ in range(300):
        sizes.append(int(i3["action_mask"].sum()))
        # place the last candidate (a migration or the last job's last target), or hold
        a = int(np.flatnonzero(i2["action_mask"])[-1]) if len(sizes) % 3 else 0
        o2, _, te, _, i2 = v2.step(a)
        o3, _, _, _, i3 = v3.step(a)
        _same_step(o2, i2, o3, i3, v3, f"after {len(sizes)} steps")
        if te:
            break
    assert any(a > b for a, b in itertools.pairwise(sizes))
    assert any(a < b for a, b in itertools.pairwise(sizes))


def test_gymnasium_checker_but_data_reuse_and_conformance(monkeypatch: pytest.MonkeyPatch) -> None:
    env = gym.make("GpuSharing-v3", scenario="default", max_candidates=1024).unwrapped
    # the one check v3 fails by design: the same arrays from every call
    with pytest.raises(AssertionError, match="share an object"):
        env_checker.check_returned_data_not_reused(env)
    monkeypatch.setattr(env_checker, "check_returned_data_not_reused", lambda env: None)
    env_checker.check_env(env, skip_render_check=True)
    assert gym.spec("GpuSharing-v3").disable_env_checker

    def make() -> gym.Env[Any, Any]:
        return gym.make("GpuSharing-v3", scenario="default", max_candidates=1024)

    report = api_test(make, num_steps=120)
    assert report.legal_stepped > 0 and report.illegal_stepped > 0 and report.episodes >= 0


def test_copies_and_pickles_have_their_own_kept_arrays() -> None:
    env = GpuSharingEnv("default", interface="v3")
    _, info = env.reset(seed=2)
    env.step(int(np.flatnonzero(info["action_mask"])[-1]))
    twins = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    for twin in twins:
        assert twin.action_masks() is twin.interface.kept_mask()
        assert not np.shares_memory(twin.action_masks(), env.action_masks())
    outs = [e.step(0) for e in (env, *twins)]
    for o, twin in zip(outs[1:], twins, strict=True):
        assert all(np.array_equal(o[0][k], outs[0][0][k]) for k in o[0]) and o[1] == outs[0][1]
        assert o[4]["action_mask"] is o[0]["candidate_mask"] is twin.action_masks()
        assert not np.shares_memory(o[0]["candidates"], outs[0][0]["candidates"])


def test_vector_envs_copy_what_they_keep() -> None:
    """Gymnasium's ``SyncVectorEnv`` and Stable-Baselines3's ``DummyVecEnv`` copy each step's
    observation into their own buffers (``SubprocVecEnv`` pickles it through a pipe)."""

    def make() -> gym.Env[Any, Any]:
        return gym.make("GpuSharing-v3", scenario="default", max_candidates=512)

    venv = gym.vector.SyncVectorEnv([make, make])
    obs, _ = venv.reset(seed=1)
    inner = [e.unwrapped.interface._kept.table for e in venv.envs]
    before = obs["candidates"].copy()
    assert not any(np.shares_memory(obs["candidates"], t) for t in inner)
    venv.step(np.zeros(2, dtype=np.int64))
    assert np.array_equal(obs["candidates"], before)
    venv.close()
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    dummy = vec_env.DummyVecEnv([make, make])
    obs = dummy.reset()
    inner = [e.unwrapped.interface._kept.table for e in dummy.envs]
    assert not any(np.shares_memory(obs["candidates"], t) for t in inner)
    before = obs["candidates"].copy()
    dummy.step(np.zeros(2, dtype=np.int64))
    assert np.array_equal(obs["candidates"], before)
    dummy.close()


_DIGEST = """
import hashlib, json, numpy as np, gymnasium as gym, gpu_sharing_env
env = gym.make("GpuSharing-v3", scenario="default")
h = hashlib.sha256()
obs, info = env.reset(seed=11)
rng = np.random.default_rng(11)
for _ in range(150):
    for k in sorted(obs):
        h.update(obs[k].tobytes())
    legal = np.flatnonzero(info["action_mask"])
    obs, r, te, _, info = env.step(int(legal[rng.integers(legal.size)]))
    h.update(np.float64(r).tobytes())
    if te:
        obs, info = env.reset()
print(json.dumps({"digest": h.hexdigest(), "compiled": len(gpu_sharing_env.COMPILED)}))
"""


def test_same_seed_same_bits_in_two_processes_compiled_and_pure() -> None:
    """Two fresh processes (their own hash seeds), one compiled, one ``GSG_PURE_PYTHON=1``."""
    compiled, pure = run_probe(_DIGEST, pure=False), run_probe(_DIGEST, pure=True)
    assert pure["compiled"] == 0
    assert compiled["digest"] == pure["digest"] and len(pure["digest"]) == 64


def test_table_size_from_the_scenario_and_its_errors(tmp_path: Path) -> None:
    cfg = load_scenario("default")
    env = gym.make("GpuSharing-v3", scenario=cfg).unwrapped
    assert env.max_candidates == (cfg.env.max_candidates or DEFAULT_MAX_CANDIDATES)
    assert gym.make("GpuSharing-v3", scenario=cfg, max_candidates=64).unwrapped.max_candidates == 64
    # v2 keeps its own default
    assert gym.make("GpuSharing-v2", scenario=cfg).unwrapped.max_candidates == 4096
    text = (ROOT / "configs/scenarios/default.yaml").read_text()
    for bad in (1, -3):
        path = tmp_path / f"bad{bad}.yaml"
        path.write_text(text.replace("env:\n", f"env:\n  max_candidates: {bad}\n", 1))
        with pytest.raises(ValueError) as e:
            load_scenario(str(path))
        msg = str(e.value)
        assert "\n" not in msg and "max_candidates" in msg and "must be 0 or >= 2" in msg
        assert path.name in msg
    small = gym.make("GpuSharing-v3", scenario=cfg, max_candidates=2)
    with pytest.raises(TooManyCandidates, match=r"GpuSharing-v3") as e:
        small.reset(seed=0)
        for _ in range(50):
            small.step(0)
    assert "\n" not in str(e.value)


def test_out_path_writes_what_the_fresh_table_holds() -> None:
    """``CandidateBuilder.build(keep, out, used)``: ``out`` holding the rows of an earlier
    build (``used`` of them), the zero-padded table a fresh build makes; rows beyond both
    untouched (zero in the env's kept table)."""
    env = gym.make("GpuSharing-v2", scenario="default", suspend=True).unwrapped
    b = env.interface.builder
    out = np.zeros((b.max_candidates, b.n_features), dtype=np.float32)
    out[-1] = 0.5  # (beyond every build: left as it is)
    _, info = env.reset(seed=3)
    used, sizes, kinds = 0, [], set()
    for t in range(300):
        fresh = b.build()
        kept = b.build((), out, used)
        assert kept.table is out and len(kept) == len(fresh)
        assert np.array_equal(out[:-1], fresh.table[:-1]), t
        assert np.array_equal(kept.job, fresh.job) and np.array_equal(kept.gpu, fresh.gpu)
        used = len(kept)
        sizes.append(used)
        kinds.update(np.flatnonzero(fresh.features[1:, 1:3].any(axis=0)).tolist())
        kinds.update([2] if (fresh.gpu < 0).sum() > 1 else [])
        legal = np.flatnonzero(info["action_mask"])
        _, _, te, _, info = env.step(int(legal[-1]) if t % 3 else int(legal[len(legal) // 2]))
        if te:
            break
    assert out[-1].tolist() == [0.5] * b.n_features
    assert max(sizes) > min(sizes) and kinds == {0, 1, 2}


def test_registered_beside_v0_v1_v2() -> None:
    for v in ("v0", "v1", "v2", "v3"):
        assert f"GpuSharing-{v}" in gym.registry
    spec = gym.spec("GpuSharing-v3")
    assert spec.kwargs == {"interface": "v3"}
    obs_space = gym.make("GpuSharing-v3", scenario="default").observation_space
    assert obs_space["candidate_mask"].dtype == np.int8
    assert json.dumps(sorted(obs_space.spaces)) == '["candidate_mask", "candidates", "global"]'


def test_maskable_ppo_rolls_out_each_steps_own_mask() -> None:
    """sb3-contrib's MaskablePPO on v3 through ``DummyVecEnv``: its rollout buffer holds every
    step's own observation (copied), whose mask is the ``action_masks()`` it sampled under."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")

    def make() -> gym.Env[Any, Any]:
        return gym.make("GpuSharing-v3", scenario="default")

    venv = vec_env.DummyVecEnv([make, make])
    model = sb3_contrib.MaskablePPO(
        "MultiInputPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0,
        device="cpu", policy_kwargs={"net_arch": [8]},
    )  # fmt: skip
    model.learn(64)
    buf = model.rollout_buffer
    masks = buf.observations["candidate_mask"].reshape(64, -1)
    assert masks.dtype == np.int8
    assert np.array_equal(masks.astype(bool), buf.action_masks.reshape(64, -1).astype(bool))
    assert len({int(m.sum()) for m in masks}) > 5  # (each step's own, not one array's last)
    venv.close()
