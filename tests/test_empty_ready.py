"""``Legality.empty_ready`` (the empty, ready GPUs, memoised for the cluster's version; the
candidates' build and v2's ``global`` feature read it) against its formula,
``np.flatnonzero((n_res == 0) & ready)``: the same GPUs at every decision of random-legal
``GpuSharing-v2`` rollouts, asked before and after the env's own questions, on a
``Simulator.copy`` too, and after a placement or a migration applied outside the env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario

STEPS = 250

CASES: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("mig-a100", {"max_candidates": 65536}),
    ("default-x2", {"max_candidates": 65536}),
]


def _want(sim: Any) -> np.ndarray:
    c = sim.cluster
    return np.flatnonzero((c.n_res == 0) & c.ready)


def _check(sim: Any) -> None:
    want = _want(sim)
    for _ in range(2):  # (built, then memoised)
        got = sim.legality.empty_ready()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("name", "kw"), CASES, ids=[c[0] for c in CASES])
def test_empty_ready_is_its_formula(name: str, kw: dict[str, Any]) -> None:
    env = gym.make("GpuSharing-v2", scenario=load_scenario(name), **kw).unwrapped
    rng = np.random.default_rng(11)
    obs, info = env.reset(seed=5)
    seed = 5
    seen = set()
    for i in range(STEPS):
        sim = env.sim
        _check(sim)
        # the observation's share of empty, ready GPUs is the count over the fleet
        assert obs["global"][3] == np.float32(len(_want(sim)) / sim.n_gpus)
        seen.add(len(_want(sim)))
        if i % 10 == 0 and not sim.done:
            twin = sim.copy()
            _check(twin)
            # a move applied to the copy changes its GPUs: its memo must follow
            moves = env.candidates.moves[1:]
            if moves:
                twin.apply(moves[int(rng.integers(len(moves)))])
                _check(twin)
            _check(sim)
        legal = np.flatnonzero(info["action_mask"])
        obs, _, te, tr, info = env.step(int(legal[rng.integers(len(legal))]))
        if te or tr:
            seed += 1
            obs, info = env.reset(seed=seed)
    assert len(seen) > 2  # (the fleet's empty GPUs did change)
