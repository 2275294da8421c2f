"""``Legality.targets`` and ``Legality.migration_targets`` (the flat targets a v2 build reads,
memoised per mask signature for the cluster's version) against their formulas: every queued
job's ``np.flatnonzero(Cluster.placement_mask(spec))`` (empty where ``placeable`` is false) and
every running job's ``np.flatnonzero(placement_mask & the empty, ready GPUs)`` (empty while it
sets up), asked before and after the masks, at every decision point of random-legal
``GpuSharing-v2`` episodes (cut) of ``default``, ``mig-a100``, ``default-x2`` and ``pai-busy``
(pruned): as the build left them, and afresh (the legality's memos emptied). Compiled, a single-GPU job's migration targets come from the typed pass
(``_single_targets``); run with ``GSG_PURE_PYTHON=1`` too (the masks' rows there)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import decidable_ids

#: Steps per episode (cut), episodes per scenario.
CUT, EPISODES = 120, 2

CASES: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("mig-a100", {"max_candidates": 65536}),
    ("default-x2", {"max_candidates": 65536}),
    ("pai-busy", {"pruning": "classes", "max_candidates": 65536}),
]


def _check(sim: Any, masks_first: bool) -> tuple[int, int]:
    """Each decidable queued job's targets and each running job's migration targets against
    the formulas (each asked twice: computed, then memoised); (arrays compared, non-empty)."""
    c = sim.cluster
    leg = sim.legality
    empty = ((c.n_res == 0) & c.ready)[:, None]
    n = full = 0
    for jid in decidable_ids(sim):
        spec = sim.jobs[jid].spec
        want = np.flatnonzero(c.placement_mask(spec))
        if masks_first:
            assert bool(sim.mask(jid).any()) == sim.placeable(jid) == (len(want) > 0)
        for _ in range(2):
            got = leg.targets(jid)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want)
        assert sim.placeable(jid) == (len(want) > 0)
        n, full = n + 1, full + (len(want) > 0)
    for jid in sorted(sim.jobs):
        st = sim.jobs[jid]
        if st.status is not Status.RUNNING:
            continue
        want = np.flatnonzero(c.placement_mask(st.spec) & empty)
        if st.setup_until > sim.now:
            want = want[:0]
        if masks_first:
            np.testing.assert_array_equal(np.flatnonzero(sim.migration_mask(jid)), want)
        for _ in range(2):
            got = leg.migration_targets(jid)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.flatnonzero(sim.migration_mask(jid)), want)
        n, full = n + 1, full + (len(want) > 0)
    return n, full


@pytest.mark.parametrize(("name", "kw"), CASES, ids=[c[0] for c in CASES])
def test_targets_match_the_masks(name: str, kw: dict[str, Any]) -> None:
    env: Any = gym.make("GpuSharing-v2", scenario=load_scenario(name), **kw).unwrapped
    compared = nonempty = 0
    for ep in range(EPISODES):
        rng = np.random.default_rng(70 + ep)
        _, info = env.reset(seed=ep)
        for step in range(CUT):
            if step % 3:  # (else the build's memos: asked afresh, targets or masks first)
                env.sim.legality.reset(env.sim.jobs)
            n, f = _check(env.sim, masks_first=step % 3 == 2)
            compared, nonempty = compared + n, nonempty + f
            ok = np.flatnonzero(info["action_mask"].view(bool))
            _, _, te, tr, info = env.step(int(ok[rng.integers(ok.size)]))
            if te or tr:
                break
    env.close()
    assert compared > CUT and nonempty > 0
