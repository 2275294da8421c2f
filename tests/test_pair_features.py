"""``GpuSharing-v2(pair_features=True)`` (issue 53): the co-location profile's columns on every
candidate row (``gpu_sharing_env.envs.candidates.PAIR_FEATURES``).

The columns along random episodes (placements, migrations, suspensions with ``suspend=True``;
MPS and MIG options on ``default``) against a direct computation: profiles asked of a fresh
``ClusterView`` every time (no memo), attained service read from a copy of the simulator whose
running jobs have been accrued to now. The default observation (no pair columns) is the same
row for row along the same trajectory, and a planted fault in the memo fails the comparison.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.envs import candidates
from gpu_sharing_env.envs.candidates import (
    N_FEATURES,
    PAIR_FEATURES,
    PairProfiles,
    candidate_features,
)
from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView

_LOG = np.log1p(1e6)
#: MIG compute slices -> memory slices of the smallest profile (NVIDIA MIG User Guide).
_MIG_MEM = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}


def _who(sim: Simulator, jid: int, o: int, g: int) -> Resident:
    st = sim.jobs[jid]
    opt = sim.options[o]
    c = m = 0
    if opt.mode is SharingMode.MIG:
        if g in st.gpus and st.mig:
            inst = st.mig[st.gpus.index(g)]
            c, m = inst.compute, bin(inst.mask).count("1")
        else:
            c, m = opt.mig_slices, _MIG_MEM[opt.mig_slices]
    return Resident(
        st.spec.model,
        sm_frac=opt.sm_pct / 100 if opt.mode is SharingMode.MPS else 1.0,
        mig_compute_slices=c,
        mig_mem_slices=m,
        duty=st.serving.duty if st.online else ZOO[st.spec.model].duty,
        online=bool(st.online),
        priority=st.spec.priority,
    )


def _slow(sim: Simulator, moves: list) -> np.ndarray:
    """The pair columns of ``moves`` (hold first), computed directly."""
    ran = sim.copy()
    for st in ran.jobs.values():
        if st.status is Status.RUNNING:
            ran.rates.accrue(st)
    seconds = {j: st.ledger.run_time_s for j, st in ran.jobs.items()}
    c = sim.cluster
    out = np.zeros((len(moves), len(PAIR_FEATURES)))
    for i, d in enumerate(moves):
        if d is None:
            continue
        st = sim.jobs[d.job_id]
        g, o = (st.gpus[0], st.option) if d.gpu < 0 else (d.gpu, d.option)
        others = [r for r in c.residents[g] if r != d.job_id]
        res = [_who(sim, r, sim.jobs[r].option, g) for r in others]
        mode = sim.options[o].mode
        tname = c.type_names[c.type_idx[g]]
        both = ClusterView(sim).profile(tname, mode, [*res, _who(sim, d.job_id, o, g)])
        out[i, 0] = both[-1]
        if others:
            alone = ClusterView(sim).profile(tname, mode, res)
            out[i, 1] = np.mean([a - b for a, b in zip(alone, both[:-1], strict=True)])
            mean_s = np.mean([seconds[r] for r in others])
            out[i, 2] = np.log1p(mean_s) / _LOG
        out[i, 3] = np.log1p(seconds[d.job_id]) / _LOG
    return np.clip(out, -1, 1).astype(np.float32)


def _states(seed: int, suspend: bool, n: int = 30) -> Iterator[tuple[object, dict]]:
    """The env (``pair_features``) and its observation at ``n`` decision points of an episode
    driven by random candidates (migrations and suspensions favoured, to have them)."""
    env = gym.make("GpuSharing-v2", scenario="default", pair_features=True, suspend=suspend)
    u = env.unwrapped
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield u, obs
        k = len(u.candidates)
        moved = np.arange(u.candidates.n_place + 1, k)
        a = int(rng.choice(moved)) if len(moved) and rng.random() < 0.3 else int(rng.integers(k))
        obs, _, term, _, _ = env.step(a)
        if term:
            return


def _mismatches(seed: int, suspend: bool) -> int:
    bad = 0
    for u, obs in _states(seed, suspend):
        k = len(u.candidates)
        got = obs["candidates"][:k, -len(PAIR_FEATURES) :]
        want = _slow(u.sim, u.candidates.moves)
        bad += int((np.abs(got - want) > 1e-6).any(axis=1).sum())
    return bad


@pytest.mark.parametrize(("seed", "suspend"), [(0, False), (3, True), (11, False)])
def test_pair_columns_match_a_direct_computation(seed: int, suspend: bool) -> None:
    kinds = set()
    for u, obs in _states(seed, suspend):
        c = u.candidates
        k = len(c)
        assert obs["candidates"].shape[1] == len(candidate_features(suspend, True))
        got = obs["candidates"][:k, -len(PAIR_FEATURES) :]
        np.testing.assert_allclose(got, _slow(u.sim, c.moves), atol=1e-6)
        for i, d in enumerate(c.moves[1:], 1):
            kinds.add("suspend" if d.gpu < 0 else "place" if i <= c.n_place else "move")
        kinds.add("shared" if (got[1:, 1] != 0).any() else "alone")
        kinds.add("mps" if any(u.sim.options[d.option].mode is SharingMode.MPS
                               for d in c.moves[1:] if d.option >= 0) else "")  # fmt: skip
    assert {"place", "move", "shared", "mps"} <= kinds
    if suspend:
        assert "suspend" in kinds


def test_default_observation_unchanged() -> None:
    """Without ``pair_features`` the rows are v2's; with it, the same rows and mask before the
    pair columns, along the same trajectory."""
    plain = gym.make("GpuSharing-v2", scenario="default")
    paired = gym.make("GpuSharing-v2", scenario="default", pair_features=True)
    assert plain.observation_space["candidates"].shape[1] == N_FEATURES
    assert paired.observation_space["candidates"].shape[1] == N_FEATURES + len(PAIR_FEATURES)
    o1, _ = plain.reset(seed=5)
    o2, _ = paired.reset(seed=5)
    rng = np.random.default_rng(5)
    for _ in range(40):
        np.testing.assert_array_equal(o1["candidate_mask"], o2["candidate_mask"])
        np.testing.assert_array_equal(o1["global"], o2["global"])
        np.testing.assert_array_equal(o1["candidates"], o2["candidates"][:, :N_FEATURES])
        a = int(rng.integers(int(o1["candidate_mask"].sum())))
        o1, r1, t1, _, _ = plain.step(a)
        o2, r2, t2, _, _ = paired.step(a)
        assert r1 == r2 and t1 == t2
        if t1:
            break


def test_bad_pair_features_argument() -> None:
    with pytest.raises(ValueError, match="pair_features"):
        gym.make("GpuSharing-v2", scenario="default", pair_features="yes")


def test_a_planted_memo_fault_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo keyed without the mode (MPS and time-sharing profiles confused) is caught."""
    assert _mismatches(0, False) == 0

    def rates(self: PairProfiles, sim: Simulator, gpu_type: str, mode: object, res: tuple) -> list:
        key = (gpu_type, res)
        if key not in self._memo:
            self._memo[key] = ClusterView(sim).profile(gpu_type, mode, list(res))
        return self._memo[key]

    monkeypatch.setattr(candidates.PairProfiles, "rates", rates)
    assert _mismatches(0, False) > 0


def test_candidate_env_rows_have_the_pair_columns() -> None:
    from gpu_sharing_gym.agents.candidate_dagger import CandidateEnv, n_inputs

    rules = ["gandiva", "speed_sjf_queue", "pack"]
    env = CandidateEnv("default", rules, ["gandiva", "speed_sjf_queue"], pair_features=True)
    env.reset(1_000_000)
    rows, _, choice = env.state()
    assert rows.shape[1] == n_inputs(len(rules), True)
    assert choice[2] >= 0  # (pack's move is a candidate)


def test_init_from_checks_pair_features(tmp_path: Path) -> None:
    """A model of rows with pair columns cannot start a run of rows without them (one line);
    a model saved before the setting existed reads as ``pair_features: false``."""
    import torch as th

    from gpu_sharing_gym.agents.candidate_dagger import Run, Settings

    rules = ["gandiva", "speed_sjf_queue"]
    first = tmp_path / "first.pt"
    Run(tmp_path / "r0", Settings(rules=rules, hidden=16, pair_features=True)).save_model(first)
    cfg = tmp_path / "r.yaml"
    cfg.write_text(f"rules: {rules}\nhidden: 16\ninit_from: {first}\n")
    with pytest.raises(ValueError, match="pair_features True there, False here"):
        Settings.load(cfg)
    cfg.write_text(f"rules: {rules}\nhidden: 16\npair_features: true\ninit_from: {first}\n")
    assert Settings.load(cfg).pair_features
    old = tmp_path / "old.pt"
    Run(tmp_path / "r1", Settings(rules=rules, hidden=16)).save_model(old)
    st = th.load(old, weights_only=True)
    del st["meta"]["settings"]["pair_features"]
    th.save(st, old)
    cfg.write_text(f"rules: {rules}\nhidden: 16\ninit_from: {old}\n")
    assert not Settings.load(cfg).pair_features
