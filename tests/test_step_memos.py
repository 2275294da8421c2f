"""Two things a ``GpuSharing-v2`` step keeps instead of recomputing, against recomputing.

- ``Legality.empty_ready`` (compiled: ``_empty_ready``, one typed pass over the cluster's
  state views) equals ``np.flatnonzero((n_res == 0) & ready)`` on random states written in
  place into the arrays the views read (edge states: no GPU, every GPU), asked twice.
- ``CandidateBuilder``'s per-job spec cells (``_spec_cols``, kept per job id for the episode):
  an env that keeps them across resets of other seeds (the same job ids, other specs) gives
  the same observations and masks as a fresh env per episode, and every kept entry equals
  ``_spec_cols`` of the job's spec now.

Run compiled and with ``GSG_PURE_PYTHON=1``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.candidates import _spec_cols


@pytest.mark.parametrize("name", ["default", "mig-a100", "pai-busy"])
def test_empty_ready_on_random_states(name: str) -> None:
    kw: dict[str, Any] = {"pruning": "classes"} if name == "pai-busy" else {}
    env: Any = gym.make(
        "GpuSharing-v2", scenario=load_scenario(name), max_candidates=65536, **kw
    ).unwrapped
    env.reset(seed=4)
    sim = env.sim
    c = sim.cluster
    rng = np.random.default_rng(17)
    n = c.n_gpus
    for trial in range(300):
        p_ready, p_empty = (0.0, 1.0) if trial == 0 else (1.0, 1.0) if trial == 1 else rng.random(2)
        c.ready[:] = rng.random(n) < p_ready
        c.n_res[:] = np.where(rng.random(n) < p_empty, 0, rng.integers(1, 4, n))
        c.version += 1  # (as every mutation of the cluster does)
        want = np.flatnonzero((c.n_res == 0) & c.ready)
        got = sim.legality.empty_ready()
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
        assert sim.legality.empty_ready() is got  # (kept for the version)
    env.close()


def _same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_spec_columns_follow_the_job_and_the_episode() -> None:
    cfg = load_scenario("default")
    kept: Any = gym.make("GpuSharing-v2", scenario=cfg).unwrapped
    builder = kept.interface.builder
    steps = 0
    for seed in (0, 1, 0, 5):
        fresh: Any = gym.make("GpuSharing-v2", scenario=cfg).unwrapped
        o1, i1 = kept.reset(seed=seed)
        o2, i2 = fresh.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(80):
            _same(o1, o2)
            _same(i1["action_mask"], i2["action_mask"])
            for jid, hit in builder._fixed.items():
                spec = kept.sim.jobs[jid].spec
                assert hit[0] is spec and hit == _spec_cols(spec, kept.sim.legality)
            ok = np.flatnonzero(i1["action_mask"].view(bool))
            a = int(ok[rng.integers(ok.size)])
            o1, _, te, tr, i1 = kept.step(a)
            o2, _, _, _, i2 = fresh.step(a)
            steps += 1
            if te or tr:
                break
        assert builder._fixed  # (kept for this episode)
        fresh.close()
    kept.close()
    assert steps > 200
