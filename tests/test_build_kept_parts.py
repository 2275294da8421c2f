"""What a ``GpuSharing-v3`` build keeps or hands over instead of making afresh
(docs/notes/2026-12-02-build-kept-parts.md), against making it afresh:

- ``Candidates`` of a build holds its integers as one ``(3, n)`` array: ``job``, ``gpu``,
  ``option`` (its rows) and ``features`` (the table's first ``n`` rows) made on first read,
  and ``move(i)`` (compiled: read from that array's memory) equal to the decision of those
  rows' integers at every index, hold and the indices numpy reads (negative, out of range)
  included.
- The speed rows are kept while the simulator's speed memo is the same (across episodes):
  each model's row equals the simulator's ``solo_speed`` per GPU type, and the kept memo is
  the simulator's.
- The writer's typed views are checked by the cluster's state views and the usage's
  utilisation (identity): after a reset they are the views of the arrays now.
- A job's kept cells hold the legality's typed static parts (compiled, a small fleet): the
  same object ``Legality._jv_of`` gives for its signature.

An env that keeps all of them over several seeds gives the same observations as a fresh env
per episode (``tests/test_step_memos.py``: v2; here v3). Run compiled and with
``GSG_PURE_PYTHON=1``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs import candidates as cand_mod
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.waiting import mask_signature

COMPILED = not cand_mod.__file__.endswith(".py")


def _decision_of(c: Any, i: int) -> Decision | None:
    """``Candidates.move(i)`` as the rows' numpy integers say."""
    if i == 0:
        return None
    return Decision(int(c.job[i]), int(c.gpu[i]), int(c.option[i]))


def _check_candidates(env: Any) -> int:
    """The last build's candidates against their own rows; how many moves were checked."""
    c = env.interface.candidates
    fresh = cand_mod.Candidates(c._ids[0], c._ids[1], c._ids[2], None, c.n_place, c.table,
                                c._ids) if c._ids is not None else None  # fmt: skip
    n = len(c)
    # (``move`` first: it reads the integers before any of the rows is made)
    got = [c.move(i) for i in range(n)]
    assert got[0] is None
    assert len(c.job) == len(c.gpu) == len(c.option) == len(c.features) == n
    if c.table is not None:
        assert c.features.base is c.table or c.features is c.table or n == 0
        np.testing.assert_array_equal(c.features, c.table[:n])
    for i in range(n):
        assert got[i] == _decision_of(c, i), i
        if fresh is not None:
            assert fresh.move(i) == got[i], i
    # the indices numpy reads: the last one by -1, and past the end an IndexError
    if n > 1:
        assert c.move(-1) == _decision_of(c, n - 1)
    with pytest.raises(IndexError):
        c.move(n)
    return n - 1


def test_candidates_rows_and_moves_are_the_builds_integers() -> None:
    env: Any = gym.make("GpuSharing-v3", scenario=load_scenario("default")).unwrapped
    rng = np.random.default_rng(3)
    _, info = env.reset(seed=2)
    checked = 0
    for _ in range(120):
        checked += _check_candidates(env)
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        if te or tr:
            _, info = env.reset(seed=int(rng.integers(100)))
    assert checked > 2000


@pytest.mark.parametrize("scenario", ["default", "mig-a100"])
def test_kept_speed_rows_writer_views_and_static_parts_follow_the_state(scenario: str) -> None:
    cfg = load_scenario(scenario)
    kw: dict[str, Any] = {"max_candidates": 65536} if scenario != "default" else {}
    kept: Any = gym.make("GpuSharing-v3", scenario=cfg, **kw).unwrapped
    builder = kept.interface.builder
    for seed in (0, 4, 0, 7):
        fresh: Any = gym.make("GpuSharing-v3", scenario=cfg, **kw).unwrapped
        o1, i1 = kept.reset(seed=seed)
        o2, _ = fresh.reset(seed=seed)
        rng = np.random.default_rng(seed)
        sim = kept.sim
        for _ in range(60):
            for key in o1:
                np.testing.assert_array_equal(o1[key], o2[key])
            # the speed rows: the simulator's memo's, each model's row its solo speeds
            memo, speed, cells, row = builder._speeds
            assert memo is sim.memo
            names = [t.name for t in sim.cluster.types]
            for model, r in row.items():
                want = [sim.solo_speed(model, tn) for tn in names]
                np.testing.assert_array_equal(speed[r], want)
                np.testing.assert_array_equal(
                    cells[r], np.clip(np.asarray(want) / 4.0, -1.0, 1.0).astype(np.float32)
                )
            # the writer's views: of the arrays the cluster and the usage hold now
            w = builder._writer
            if COMPILED:
                c = sim.cluster
                assert w is not None
                assert w.util is sim.usage.g_util
                assert w.sv is c.state_views()
                assert w.same(
                    (c.type_idx, c.node_of, c.n_res, c.mem_decl, c.mem_cap, c.frac_decl,
                     c.sm_used, c.online_count, c.healthy, c.ready, sim.usage.g_util),
                    builder._opt32,
                )  # fmt: skip
            # each job's cells: the legality's static parts of its signature (or None)
            leg = sim.legality
            for jid, hit in builder._fixed.items():
                spec = sim.jobs[jid].spec
                sig = mask_signature(spec)
                assert hit[cand_mod._SIG] == sig
                jv = hit[cand_mod._JV]
                if leg._pass(spec):
                    assert jv is leg._jv_of(sig, spec)
                else:
                    assert jv is None
            legal = np.flatnonzero(i1["action_mask"].view(bool))
            a = int(legal[rng.integers(legal.size)])
            o1, _, te, tr, i1 = kept.step(a)
            o2, _, _, _, _ = fresh.step(a)
            if te or tr:
                break
