"""``Simulator.migration_mask`` (memoised per mask signature and cluster version) against its
formula: the job's whole ``placement_mask`` & the empty, ready GPUs, zeroed while the job is
still setting up; the same values, dtype, shape and read-only flag at every decision of
random-legal ``GpuSharing-v2`` rollouts, for every running job, also on ``Simulator.copy``.
Also ``Legality.empty_ready`` (the empty, ready GPUs kept for the cluster's version, which the
masks, the candidate build and v2's ``empty_gpus`` feature read) against
``np.flatnonzero((n_res == 0) & ready)``, and after a move applied to a copy alone."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.state import Status

STEPS = 300

CASES: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("mig-a100", {"max_candidates": 65536}),
    ("default-x2", {"max_candidates": 65536}),
    ("muxflow-t4", {"max_candidates": 65536}),
    ("pai-busy", {"pruning": "classes", "max_candidates": 65536}),
]


def _formula(sim: Any, job_id: int) -> np.ndarray:
    st = sim.jobs[job_id]
    c = sim.cluster
    out = c.placement_mask(st.spec) & ((c.n_res == 0) & c.ready)[:, None]
    if st.setup_until > sim.now:
        out = np.zeros_like(out)
    return out


def _check_empty(sim: Any) -> None:
    c = sim.cluster
    want = np.flatnonzero((c.n_res == 0) & c.ready)
    for _ in range(2):  # (built, then memoised)
        got = sim.legality.empty_ready()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _check(sim: Any) -> int:
    """Compares every running job's migration mask (asked twice: built, then memoised) with the
    formula, and the empty, ready GPUs with theirs; the number of masks compared."""
    _check_empty(sim)
    n = 0
    for jid in sorted(sim.jobs):
        if sim.jobs[jid].status is not Status.RUNNING:
            continue
        want = _formula(sim, jid)
        for _ in range(2):
            got = sim.migration_mask(jid)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert not got.flags.writeable
            np.testing.assert_array_equal(got, want)
        n += 1
    return n


@pytest.mark.parametrize(("name", "kw"), CASES, ids=[c[0] for c in CASES])
def test_migration_mask_is_its_formula(name: str, kw: dict[str, Any]) -> None:
    env = gym.make("GpuSharing-v2", scenario=load_scenario(name), **kw).unwrapped
    rng = np.random.default_rng(7)
    pick = np.random.default_rng(1)  # (the copies' moves: the episode's draws stay rng's)
    obs, info = env.reset(seed=3)
    compared = 0
    for t in range(STEPS):
        sim = env.sim
        compared += _check(sim)
        # v2's empty_gpus: the empty, ready GPUs' count over the fleet
        c = sim.cluster
        assert obs["global"][3] == np.float32(np.count_nonzero((c.n_res == 0) & c.ready) / c.n_gpus)
        if t % 10 == 0:
            clone = sim.copy()
            compared += _check(clone)
            moves = env.candidates.moves[1:]
            if moves and not clone.done:  # (a move on the copy alone: its memo must follow)
                clone.apply(moves[int(pick.integers(len(moves)))])
                _check_empty(clone)
            compared += _check(sim)
        legal = np.flatnonzero(info["action_mask"].view(bool))
        obs, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            obs, info = env.reset(seed=t)
    env.close()
    assert compared > STEPS
