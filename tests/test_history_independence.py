"""History independence: an episode or a training run's start with a fixed seed gives the same
bits whatever ran before it in the process (module caches and memos, the global numpy and torch
RNGs, freed objects whose ids come back). A set of episodes runs, then a different set, then
the first again; every digest must be equal. (A tiny ``candidate_dagger`` run's result once
hung on the process's torch RNG state: docs/notes/2026-11-28-history-dependence.md.)"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs import GpuSharingEnv
from gpu_sharing_env.envs.gpu_sharing_v2 import GpuSharingEnvV2
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_gym.agents.candidate_dagger import Run, Settings, evaluate_net

RULES = ["gandiva", "speed_sjf_queue"]


def _rollout(env_cls: Any, scenario: str, seed: int, steps: int, **kw: Any) -> str:
    """Random legal actions (a generator seeded from ``seed``), cut at ``steps``: every
    observation, mask, reward and end flag, the final metrics and the clock."""
    h = hashlib.sha256()
    env = env_cls(scenario=scenario, **kw)
    rng = np.random.default_rng(seed + 100)
    obs, info = env.reset(seed=seed)
    for _ in range(steps):
        for k in sorted(obs):
            h.update(np.asarray(obs[k]).tobytes())
        mask = np.asarray(info["action_mask"])
        h.update(mask.tobytes())
        legal = np.flatnonzero(mask)
        obs, r, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        h.update(np.float64(r).tobytes() + bytes([te, tr]))
        if te or tr:
            break
    sim = env.sim
    h.update(repr(sorted(_numbers(sim.metrics()).items())).encode() + repr(sim.now).encode())
    env.close()
    return h.hexdigest()[:16]


def _numbers(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if isinstance(v, int | float)}


def _episode(policy: str, scenario: str, seed: int) -> str:
    """The runner's whole episode of a registered heuristic."""
    m = run_episode(make_policy(policy), make_simulator(load_scenario(scenario)), seed)
    return hashlib.sha256(repr(sorted(_numbers(m).items())).encode()).hexdigest()[:16]


def _dagger(out: Path) -> str:
    """A ``candidate_dagger`` run's initial network (the recipe's seed) and its greedy episode,
    cut at 150 steps."""
    s = Settings(rules=RULES, teachers=RULES, hidden=16, pruning="classes")
    net = Run(out, s).net
    h = hashlib.sha256()
    for k, v in net.state_dict().items():
        h.update(k.encode() + v.numpy().tobytes())
    rec = evaluate_net(net, s, "default", [1000], max_steps=150)[0]
    rec.pop("x_wall_s")
    h.update(repr(sorted(_numbers(rec).items())).encode())
    return h.hexdigest()[:16]


def _first(tmp: Path) -> dict[str, Callable[[], str]]:
    return {
        "v1 default": lambda: _rollout(GpuSharingEnv, "default", 3, 150),
        "v2 default": lambda: _rollout(GpuSharingEnvV2, "default", 4, 150, pruning="classes"),
        "gandiva": lambda: _episode("gandiva", "default", 5),
        "sjf_predicted": lambda: _episode("sjf_predicted", "default", 6),
        "candidate_dagger": lambda: _dagger(tmp / "a"),
    }


def _second(tmp: Path) -> None:
    """Other episodes, other seeds, other scenarios, and the global RNGs drawn from."""
    _rollout(GpuSharingEnvV2, "mig-a100", 7, 100, max_candidates=65536)
    _rollout(GpuSharingEnv, "default", 8, 100)
    for p in ("sjf_predicted", "speed_sjf_queue", "horus"):
        _episode(p, "default", 9)
    _dagger(tmp / "b")
    th.rand(1000)
    np.random.rand(1000)


@pytest.fixture
def global_rngs() -> Iterator[None]:
    """The global numpy and torch RNGs back as they were (this test draws from both)."""
    state = np.random.get_state()
    with th.random.fork_rng():
        yield
    np.random.set_state(state)


@pytest.mark.usefixtures("global_rngs")
def test_episodes_do_not_depend_on_what_ran_before(tmp_path: Path) -> None:
    first = {k: f() for k, f in _first(tmp_path).items()}
    _second(tmp_path)
    gc.collect()  # (freed objects' ids reused: an id()-keyed memo would hit a stale entry)
    again = {k: f() for k, f in _first(tmp_path).items()}
    assert again == first
