"""``Simulator.migration_mask`` computed on the empty GPUs only (compiled: set from the targets
``_single_targets`` finds on them for a single-GPU job, from the cluster's typed views) against
today's formula, ``placement_mask`` of the job & the empty, ready GPUs (zeroed while it sets
up): the same booleans, shape, dtype and read-only flag for every running job at every
decision point of several random-legal
``GpuSharing-v2`` episodes (cut) of ``default``, ``mig-a100``, ``default-x2`` and ``pai-busy``
(pruned). Run compiled and with ``GSG_PURE_PYTHON=1`` (there the formula itself on the rows of
the empty GPUs). The same for the flat targets a v2 build reads (``Legality.targets`` of the
queued jobs, ``Legality.migration_targets`` of the running ones)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import decidable_ids

#: Steps per episode (cut), episodes per scenario.
CUT, EPISODES = 150, 3

CASES: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("mig-a100", {"max_candidates": 65536}),
    ("default-x2", {"max_candidates": 65536}),
    ("pai-busy", {"pruning": "classes", "max_candidates": 65536}),
]


#: Both modules compiled: a single-GPU job's mask comes from the typed pass (a ``uint8`` array
#: seen as booleans).
TYPED = {"gpu_sharing_env.sim.legality", "gpu_sharing_env.fleet.cluster"} <= set(
    gpu_sharing_env.COMPILED
)


def _check(sim: Any) -> tuple[int, int]:
    """Every running job's migration mask (asked twice: built, then memoised) against the
    formula; (masks compared, of them single-GPU ones with a legal destination)."""
    c = sim.cluster
    empty = ((c.n_res == 0) & c.ready)[:, None]
    n = hit = 0
    for jid in sorted(sim.jobs):
        st = sim.jobs[jid]
        if st.status is not Status.RUNNING:
            continue
        want = c.placement_mask(st.spec) & empty
        if st.setup_until > sim.now:
            want = np.zeros_like(want)
        for _ in range(2):
            got = sim.migration_mask(jid)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert not got.flags.writeable
            np.testing.assert_array_equal(got, want)
        if TYPED and st.spec.num_gpus == 1 and st.setup_until <= sim.now:
            assert got.base is not None and got.base.dtype == np.uint8  # (the typed loop's)
        n += 1
        hit += st.spec.num_gpus == 1 and bool(want.any())
    return n, hit


def _rollout(name: str, kw: dict[str, Any], check: Any, seed0: int) -> tuple[int, int]:
    """``check(sim, step)`` at every decision point of ``EPISODES`` random-legal episodes (cut
    at ``CUT`` steps) of scenario ``name``; the sums of its two counts."""
    env: Any = gym.make("GpuSharing-v2", scenario=load_scenario(name), **kw).unwrapped
    compared = legal = 0
    for ep in range(EPISODES):
        rng = np.random.default_rng(seed0 + ep)
        _, info = env.reset(seed=ep)
        for step in range(CUT):
            n, h = check(env.sim, step)
            compared, legal = compared + n, legal + h
            ok = np.flatnonzero(info["action_mask"].view(bool))
            _, _, te, tr, info = env.step(int(ok[rng.integers(ok.size)]))
            if te or tr:
                break
    env.close()
    return compared, legal


@pytest.mark.parametrize(("name", "kw"), CASES, ids=[c[0] for c in CASES])
def test_migration_mask_on_the_empty_gpus(name: str, kw: dict[str, Any]) -> None:
    compared, legal = _rollout(name, kw, lambda sim, _: _check(sim), 50)
    assert compared > CUT and legal > 0


def _check_targets(sim: Any, step: int) -> tuple[int, int]:
    """``Legality.targets`` of each decidable queued job (and ``Simulator.check`` of some of its
    placements, answered from them) and ``Legality.migration_targets`` of each running job
    against their formulas (each asked twice: computed, then memoised): as the
    build left the memos, or afresh (the memos emptied), the targets or the masks first;
    (arrays compared, non-empty ones)."""
    leg = sim.legality
    if step % 3:
        leg.reset(sim.jobs)
    masks_first = step % 3 == 2
    c = sim.cluster
    empty = ((c.n_res == 0) & c.ready)[:, None]
    n = full = 0
    for jid in decidable_ids(sim):
        want = np.flatnonzero(c.placement_mask(sim.jobs[jid].spec))
        if masks_first:
            assert bool(sim.mask(jid).any()) == sim.placeable(jid)
        for _ in range(2):
            got = leg.targets(jid)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want)
        assert sim.placeable(jid) == (len(want) > 0)
        # ``Simulator.check`` answers from the targets at hand: legal iff listed
        n_opts = len(sim.options)
        for x in range(0, c.n_gpus * n_opts, 1 + c.n_gpus * n_opts // 40):
            legal = sim.check(Decision(jid, x // n_opts, x % n_opts)) is None
            assert legal == (x in set(want.tolist()))
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
    """The flat targets a v2 build reads (``Legality.targets``, ``migration_targets``:
    memoised per mask signature for the cluster's version; compiled, a single-GPU job's from
    the typed pass ``_single_targets``) are the masks' legal cells, rising."""
    compared, nonempty = _rollout(name, kw, _check_targets, 70)
    assert compared > CUT and nonempty > 0
