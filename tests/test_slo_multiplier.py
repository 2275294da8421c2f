"""The SLO term priced linearly, its weight set between steps, and adapted as a Lagrange
multiplier on the mean attainment of the latest training episodes (issue 25)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.logger import Logger

from gpu_sharing_gym.agents.callbacks import CheckpointCallback, SloMultiplier, latest_checkpoint


def _episode(env: gym.Env[Any, Any], seed: int) -> tuple[float, dict[str, Any]]:
    """Return and final info of one episode of speed_sjf-like first legal actions."""
    _, info = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        legal = np.flatnonzero(info["action_mask"])
        _, r, term, trunc, info = env.step(int(legal[-1]))
        total += float(r)
        done = term or trunc
    return total, info


def test_linear_slo_term_telescopes_to_the_attainment() -> None:
    kw = {"scenario": "default", "reward": "slo"}
    env = gym.make("GpuSharing-v1", **kw, reward_kwargs={"slo_form": "linear", "slo_weight": 10.0})
    ret, info = _episode(env, 3)
    att = info["metrics"]["slo_attainment"]
    # Φ0 = target - 1 (no request yet), Φ_T = target - A: the return is λ (A - 1)
    assert ret == pytest.approx(10.0 * (att - 1.0), abs=1e-9)
    hinge = gym.make("GpuSharing-v1", **kw, reward_kwargs={"slo_weight": 10.0})
    h_ret, h_info = _episode(hinge, 3)
    assert h_info["metrics"]["slo_attainment"] == att
    assert h_ret == pytest.approx(-10.0 * max(0.0, 0.95 - att), abs=1e-9)
    with pytest.raises(ValueError, match="slo_form"):
        gym.make("GpuSharing-v1", **kw, reward_kwargs={"slo_form": "cubic"})


def test_set_slo_weight_prices_the_following_steps() -> None:
    env = gym.make("GpuSharing-v1", scenario="default", reward="jct").unwrapped
    env.set_slo_weight(7.5)  # type: ignore[attr-defined]
    assert env.reward_fn.slo.slo_weight == 7.5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="slo_weight"):
        env.set_slo_weight(-1.0)  # type: ignore[attr-defined]
    thr = gym.make("GpuSharing-v1", scenario="default", reward="throughput").unwrapped
    with pytest.raises(ValueError, match="no SLO weight"):
        thr.set_slo_weight(1.0)  # type: ignore[attr-defined]


class _Envs:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def env_method(self, name: str, value: float) -> None:
        self.calls.append((name, value))


def test_multiplier_follows_the_mean_attainment() -> None:
    cb = SloMultiplier(target=0.95, weight=50.0, lr=100.0, margin=0.01, max_weight=60.0, window=2)
    envs = _Envs()
    cb.model = SimpleNamespace(  # type: ignore[assignment]
        logger=Logger(None, []), get_env=lambda: envs, num_timesteps=0
    )

    def rollout(*atts: float | None) -> float:
        cb.locals = {
            "infos": [{} if a is None else {"metrics": {"slo_attainment": a}} for a in atts]
        }
        cb.on_step()
        cb.on_rollout_end()
        return cb.weight

    assert rollout(None) == 50.0 and not envs.calls  # no episode ended yet: unchanged
    assert rollout(0.99, 1.0) == pytest.approx(50.0 - 100.0 * 0.035)  # above target + margin
    assert rollout(0.80, 0.80) == 60.0  # far below: rises, clipped at max_weight
    assert envs.calls[-1] == ("set_slo_weight", 60.0)
    for _ in range(50):
        w = rollout(1.0)
    assert w == 0.0  # never below zero


class _Model:
    """Just enough of an SB3 model for ``CheckpointCallback.save``."""

    num_timesteps = 300

    def save(self, path: Path) -> None:
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("data", "{}")

    def get_vec_normalize_env(self) -> None:
        return None


def test_checkpoints_keep_the_weight_for_resume(tmp_path: Path) -> None:
    cb = CheckpointCallback(tmp_path, 100, {"algo": "maskable_ppo"})
    cb.model = _Model()  # type: ignore[assignment]
    cb.save()
    first = latest_checkpoint(tmp_path / "checkpoints")
    assert first is not None and first.state() == {}  # nothing asked to be kept
    mult = SloMultiplier(0.95, 12.5, 100.0, 0.01, 200.0, 8)
    cb.state = lambda: {"slo_weight": mult.weight}
    mult.weight = 3.25
    cb.save()
    ckpt = latest_checkpoint(tmp_path / "checkpoints")
    assert ckpt is not None and ckpt.state() == {"slo_weight": 3.25}


def test_each_episode_is_held_to_its_own_scenarios_target() -> None:
    """With several training scenarios, an episode's attainment is held to its own scenario's
    target (the training script reads them off the vec env); with one, to that target, as
    before, bit for bit."""
    from gpu_sharing_gym.agents.envs import make_vec_env

    venv = make_vec_env("default,muxflow-t4", 2, 0, env_id="GpuSharing-v1")
    targets = [float(c.slo_target) for c in venv.get_attr("cfg")]
    assert targets == [0.95, 0.99]  # env i runs scenario i % 2
    venv.close()

    def last_step(cb: SloMultiplier, atts: list[float]) -> float:
        envs = _Envs()
        cb.model = SimpleNamespace(  # type: ignore[assignment]
            logger=Logger(None, []), get_env=lambda: envs, num_timesteps=0
        )
        cb.locals = {"infos": [{"metrics": {"slo_attainment": a}} for a in atts]}
        cb.on_step()
        w0 = cb.weight
        cb.on_rollout_end()
        return cb.weight - w0

    # env 0 (target 0.95) at 0.96, env 1 (target 0.99) at 0.98: gaps -0.01 and +0.01 (+ margin)
    mixed = SloMultiplier(0.95, 50.0, 100.0, 0.0, 200.0, 8, targets=targets)
    assert last_step(mixed, [0.96, 0.98]) == pytest.approx(0.0, abs=1e-9)
    one = SloMultiplier(0.95, 50.0, 100.0, 0.01, 200.0, 8)  # every episode held to 0.95
    assert last_step(one, [0.96, 0.98]) == pytest.approx(100.0 * (0.95 + 0.01 - 0.97))
    same = SloMultiplier(0.95, 50.0, 100.0, 0.01, 200.0, 8, targets=[0.95, 0.95])
    assert last_step(same, [0.96, 0.98]) == last_step(one, [0.96, 0.98])
