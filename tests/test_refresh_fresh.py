"""``Rates.refresh``'s ``fresh`` GPUs (``Lifecycle.migrate``: the new GPUs, just refreshed by
its ``start``, are not recomputed): what is kept must be what a recomputation gives."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.engine import Simulator


def _state(sim: Simulator) -> list[Any]:
    """Every running job's fractions, SM share and rate, and every GPU's usage row."""
    jobs = sim.table.jobs
    running = sorted({j for res in sim.cluster.residents for j in res})
    out: list[Any] = [(j, dict(jobs[j].frac), jobs[j].sm_eff, jobs[j].rate) for j in running]
    return [*out, sim.usage.rows(), list(sim.usage.sums)]


def _recomputed(sim: Simulator) -> list[Any]:
    """:func:`_state` of a copy whose every GPU's fractions were computed again."""
    c = sim.copy()
    n = c.cluster.n_gpus
    c.rates.mark_dirty(list(range(n)))
    c.rates.refresh(list(range(n)))
    return _state(c)


def test_migrations_keep_what_a_recomputation_gives() -> None:
    """400 random-legal ``GpuSharing-v2`` steps of ``default`` and ``mig-a100`` (migrations
    among them): after every decision, the fractions, rates and usage rows equal those of a
    copy with every GPU recomputed (a ``fresh`` GPU that was not fresh would keep stale
    ones)."""
    moved = 0
    for name in ("default", "mig-a100"):
        env = gym.make("GpuSharing-v2", scenario=load_scenario(name), max_candidates=65536)
        u: Any = env.unwrapped
        rng = np.random.default_rng(7)
        _, info = env.reset(seed=3)
        for _ in range(200):
            legal = np.flatnonzero(info["action_mask"].view(bool))
            a = int(legal[rng.integers(legal.size)])
            before = u.sim.acc.migrations
            if a:
                u.sim.apply(u.interface.decision(a))
                moved += u.sim.acc.migrations - before
                assert _state(u.sim) == _recomputed(u.sim)
                if not u.sim.needs_decision():
                    u.sim.advance()
            else:
                u.sim.advance()
            if u.sim.done:
                _, info = env.reset(seed=int(rng.integers(100)))
                continue
            u._mask = u.interface.mask()
            info = u._info(invalid=False)
        env.close()
    assert moved > 20


def test_a_dirty_fresh_gpu_is_recomputed() -> None:
    """A GPU named fresh whose residents changed since (dirty) is computed all the same."""
    env = gym.make("GpuSharing-v2", scenario=load_scenario("default"))
    u: Any = env.unwrapped
    rng = np.random.default_rng(1)
    _, info = env.reset(seed=0)
    checked = 0
    for _ in range(300):
        sim = u.sim
        busy = [g for g, res in enumerate(sim.cluster.residents) if res]
        for g in busy:
            st = sim.table.jobs[sim.cluster.residents[g][0]]
            if st.online or len(st.gpus) > 1:
                continue
            want_c = sim.copy()
            for s in (want_c, sim):
                s.table.jobs[st.spec.job_id].throttle = 0.5
                s.rates.mark_dirty([g])
            want_c.rates.refresh([g])
            sim.rates.refresh([g], [g])
            assert _state(sim) == _state(want_c)
            assert (
                sim.table.jobs[st.spec.job_id].frac[g] == want_c.table.jobs[st.spec.job_id].frac[g]
            )
            checked += 1
            break
        if checked >= 5:
            break
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            _, info = env.reset(seed=1)
    env.close()
    assert checked >= 5
