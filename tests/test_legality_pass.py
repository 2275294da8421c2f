"""The legality's typed passes (``sim/legality.py``; compiled, a fleet under ``_MASK_LOOP_GPUS``,
no gpulets): a signature's targets from one pass over the GPUs, for a single-GPU job
(``_single_targets``) and for a gang (``_gang_targets``), whether it fits read from them
(``sig_placeable``), a gang's migration targets from the same pass, and the static parts kept
per what a memory value decides (``_jv_of``: its ranks among the capacities and the MIG
profiles' memories), against the cluster's own answers: ``placement_mask``'s nonzero cells,
``Cluster.placeable`` (its fit index), the migration formula (the mask on the empty, ready
GPUs), ``Cluster.single_rows`` (a job's single-GPU cells: ``Legality.single_cells``) and
``Masks.static_parts``. At every step of random-legal ``GpuSharing-v2`` rollouts of
``default``, ``default-x2`` (gangs) and ``mig-a100`` (MIG profiles), episodes included.
Interpreted, the same answers come from the masks (the comparisons hold as well)."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim import legality as legality_mod
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.waiting import mask_signature

STEPS = 300

CASES: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("default-x2", {"max_candidates": 65536}),
    ("mig-a100", {"max_candidates": 65536}),
]

COMPILED = not legality_mod.__file__.endswith(".py")


def _check(sim: Any, seen: dict[str, int]) -> None:
    """Every queued job's placeability and targets, then every running job's migration
    targets, against the cluster's mask; the static parts of each against the cluster's."""
    leg = sim.legality
    c = sim.cluster
    empty = (c.n_res == 0) & c.ready
    queued = [j for j in sorted(sim.jobs) if sim.jobs[j].status is Status.QUEUED]
    running = [j for j in sorted(sim.jobs) if sim.jobs[j].status is Status.RUNNING]
    # placeability first (for this version it runs the pass the targets then read)
    for jid in queued:
        spec = sim.jobs[jid].spec
        want = np.flatnonzero(c.placement_mask(spec))
        assert leg.placeable(jid) == bool(want.size) == c.placeable(spec), jid
    for jid in queued:
        spec = sim.jobs[jid].spec
        want = np.flatnonzero(c.placement_mask(spec))
        got = leg.targets(jid)
        assert got.dtype == np.int64
        # (compiled, a pass's answer is a fresh array of its own: ``_copy_out``, not a view of
        # the kept buffer the next pass overwrites)
        assert got.flags.owndata or not COMPILED
        np.testing.assert_array_equal(got, want)
        seen["gang" if spec.num_gpus > 1 else "single"] += 1
    for jid in running:
        st = sim.jobs[jid]
        want = np.flatnonzero(c.placement_mask(st.spec) & empty[:, None])
        if st.setup_until > sim.now:
            want = want[:0]
        got = leg.migration_targets(jid)
        assert got.dtype == np.int64
        assert got.flags.owndata or not COMPILED
        np.testing.assert_array_equal(got, want)
        seen["gang moves" if st.spec.num_gpus > 1 else "moves"] += 1
    # a job's single-GPU cells (what a builder reads of a gang: ``Legality.single_cells``):
    # ``Cluster.single_rows``' true cells, as rising flat indices, of the options that are no
    # MIG profile (a gang's MIG rows are false; a single-GPU job's are left out of the pass)
    mig0 = c.layout.mig0 if c.layout.mig_slices else len(c.options)
    for jid in queued + running:
        spec = sim.jobs[jid].spec
        got = leg.single_cells(mask_signature(spec), spec)
        if got is None:  # (interpreted: the cluster's rows answer)
            assert not COMPILED
            continue
        rows = np.array(c.single_rows(spec))
        if spec.num_gpus > 1:
            assert not rows[mig0:].any()
        rows[mig0:] = False
        assert got.dtype == np.int64 and got.flags.owndata
        np.testing.assert_array_equal(got, np.flatnonzero(rows.T))
        seen["gang cells" if spec.num_gpus > 1 else "cells"] += 1
    if COMPILED:  # (the typed parts: kept per memory ranks, equal to the memory's own)
        for jid in queued + running:
            spec = sim.jobs[jid].spec
            jv = leg._jv_of(mask_signature(spec), spec)
            for a, b in zip(jv.__reduce__()[1], c.masks.static_parts(spec)[:3], strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("name", "kw"), CASES, ids=[c[0] for c in CASES])
def test_the_typed_passes_give_the_masks_answers(name: str, kw: dict[str, Any]) -> None:
    # (workload version 2's draws, ``past: per_episode``: the coverage floors below were set on
    # those episodes; version 3's `default` cluster has fewer gangs, 21 gang moves here)
    sc = load_scenario(name)
    off = sc.workload.offline
    off = dataclasses.replace(off, params={**off.params, "past": "per_episode"})
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, offline=off))
    env = gym.make("GpuSharing-v2", scenario=sc, **kw).unwrapped
    rng = np.random.default_rng(11)
    _, info = env.reset(seed=5)
    seen = {"single": 0, "gang": 0, "moves": 0, "gang moves": 0, "cells": 0, "gang cells": 0}
    for t in range(STEPS):
        _check(env.sim, seen)
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            _, info = env.reset(seed=6 + t)
    assert seen["single"] > 200 and seen["moves"] > 300, seen
    if name != "mig-a100":  # (gangs: queued, and running ones' moves)
        assert seen["gang"] > 10 and seen["gang moves"] > 50, seen
    if COMPILED:
        assert seen["cells"] > 300 and (name == "mig-a100" or seen["gang cells"] > 50), seen
