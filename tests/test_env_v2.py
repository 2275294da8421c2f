"""``GpuSharing-v2`` (candidate actions) against the env contract: Gymnasium's checker, masks and
candidates that the simulator accepts, same seed same episode, illegal actions as wait."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.envs.candidates import CANDIDATE_FEATURES
from gpu_sharing_env.envs.conformance import api_test
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView


def _env(**kw: Any) -> GpuSharingEnv:
    env = gym.make("GpuSharing-v2", scenario="default", max_candidates=1024, **kw).unwrapped
    assert isinstance(env, GpuSharingEnv) and env.interface.version == "v2"
    return env


def test_registered_and_gymnasium_checker() -> None:
    assert "GpuSharing-v2" in gym.registry
    check_env(_env(), skip_render_check=True)


def test_candidates_are_legal_and_deterministic() -> None:
    a, b = _env(), _env()
    obs_a, _ = a.reset(seed=1)
    obs_b, _ = b.reset(seed=1)
    rng = np.random.default_rng(1)
    migrations = 0
    for step in range(400):
        mask = a.action_masks()
        assert mask.dtype == np.int8 and mask[0] == 1
        assert np.array_equal(mask, b.action_masks())
        assert obs_a in a.observation_space
        assert obs_a["candidates"].shape[1] == len(CANDIDATE_FEATURES)
        assert np.array_equal(obs_a["candidate_mask"], mask.astype(np.float32))
        for k in ("candidates", "global"):
            assert np.array_equal(obs_a[k], obs_b[k])
        moves = a.candidates.moves
        assert len(moves) == int(mask.sum()) and moves[0] is None
        assert len(set(moves)) == len(moves)  # no move twice
        sim = a.sim
        for d in moves[1:]:
            assert d is not None
            if sim.jobs[d.job_id].status is Status.QUEUED:
                assert sim.check(d) is None, d
            else:
                migrations += 1
        if step % 20 == 0 and len(moves) > 1:
            # a migration's check moves the job's residency around: step a copy instead
            probe = copy.deepcopy(a)
            probe.invalid_action = "raise"
            probe.step(len(moves) - 1)
            probe.sim.cluster.check_invariants()
        act = int(rng.choice(np.flatnonzero(mask)))
        obs_a, r_a, term, _, _ = a.step(act)
        obs_b, r_b, _, _, _ = b.step(act)
        assert r_a == r_b
        a.sim.cluster.check_invariants()
        if term:
            obs_a, _ = a.reset(seed=step)
            obs_b, _ = b.reset(seed=step)
    assert migrations > 0


def test_illegal_actions() -> None:
    env = _env()
    env.reset(seed=0)
    n = len(env.candidates.moves)
    assert env.explain(n) is not None and "padding" in str(env.explain(n))
    lax, waiter = copy.deepcopy(env), copy.deepcopy(env)
    obs_l, r_l, *_, info = lax.step(n)
    obs_w, r_w, *_ = waiter.step(0)
    assert info["invalid_action"] is True and r_l == r_w
    assert all(np.array_equal(obs_l[k], obs_w[k]) for k in obs_l)
    env.invalid_action = "raise"
    with pytest.raises(ValueError, match="illegal action"):
        env.step(n)
    with pytest.raises(ValueError, match="action: must be in"):
        env.step(env.max_candidates)


def test_conformance_checker() -> None:
    def make() -> gym.Env[Any, Any]:
        return gym.make("GpuSharing-v2", scenario="default", max_candidates=1024)

    report = api_test(make, num_steps=150)
    assert report.legal_stepped > 0 and report.illegal_stepped > 0


def test_a_moved_job_cannot_move_again_while_it_resumes() -> None:
    """A migration's job sets up again (``migration_s``); until then it has no migration
    candidate and ``Simulator.check`` refuses a move: no moving back and forth at one instant."""
    env = _env()
    env.reset(seed=1000)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        moves = env.candidates.moves
        mig = [
            i
            for i, d in enumerate(moves)
            if d is not None and env.sim.jobs[d.job_id].status is Status.RUNNING
        ]
        if mig:
            break
        _, _, term, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        assert not term
    else:
        pytest.fail("no migration candidate in 2000 steps")
    d = moves[mig[0]]
    old_gpus = tuple(env.sim.jobs[d.job_id].gpus)
    now = env.sim.now
    env.step(mig[0])
    sim = env.sim
    assert sim.now == now  # the same instant: the moved job is no candidate, its way back illegal
    assert all(m is None or m.job_id != d.job_id for m in env.candidates.moves)
    back = type(d)(job_id=d.job_id, gpu=old_gpus[0], option=d.option)
    assert sim.jobs[d.job_id].setup_until > sim.now
    assert "setting up" in (sim.check(back) or "")


def test_pruned_candidates_are_a_subsequence_keeping_what_is_asked() -> None:
    """``pruning="classes"``: at every state a subsequence of the full candidates (fewer), each
    a legal move, holding what ``keep_moves`` names (here each state's last legal placement:
    the highest GPU, the one pruning would drop)."""

    def last(sim: Simulator) -> list[Decision | None]:
        ids = [j for j in ClusterView(sim).decidable_ids() if sim.placeable(j)]
        if not ids:
            return [None]
        g, o = np.argwhere(sim.mask(ids[-1]))[-1].tolist()
        return [Decision(ids[-1], g, o)]

    env, full = _env(pruning="classes", keep_moves=last), _env()
    env.reset(seed=3)
    full.reset(seed=3)
    rng = np.random.default_rng(3)
    fewer = 0
    for _ in range(300):
        moves, every = env.candidates.moves, full.candidates.moves
        pos = [every.index(m) for m in moves]
        assert pos == sorted(pos) and env.candidates.n_place <= full.candidates.n_place
        assert last(env.sim)[0] in moves
        fewer += len(moves) < len(every)
        act = int(rng.choice(np.flatnonzero(env.action_masks())))
        _, r, term, _, _ = env.step(act)
        _, r_full, _, _, _ = full.step(every.index(moves[act]))
        assert r == r_full
        if term:
            break
    assert fewer > 100


def test_pruning_argument() -> None:
    with pytest.raises(ValueError, match="pruning: must be one of none, classes"):
        gym.make("GpuSharing-v2", pruning="some")
    with pytest.raises(ValueError, match="keep_moves"):
        gym.make("GpuSharing-v2", keep_moves=3)
