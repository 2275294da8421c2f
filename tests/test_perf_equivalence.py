"""The hot-path shortcuts compute what the straightforward code computes.

The simulator caches and updates incrementally what it used to recompute (the placement mask's
job-independent parts, per-job static parts, solo latencies, speed-model rates, fragmentation
samples) and draws its load noise in blocks. These tests hold each shortcut to the plain
computation it replaced, on states reached by random legal play.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.fleet.cluster import _EPS, Cluster
from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.online import latency, latency_tuple
from gpu_sharing_env.workload.job import JobSpec


def reference_mask(c: Cluster, job: JobSpec) -> np.ndarray:
    """The placement mask computed from scratch, column by column (the original code)."""
    out = np.zeros((c.n_gpus, len(c.options)), dtype=bool)
    mem = job.mem_gb
    free = c.n_res == 0
    room = c.n_res < c.sharing.max_residents
    base = c.type_ok(job.gpu_types) & c.ready
    if not job.online:
        base = base & c.healthy
    fits_shared = c.mem_decl + mem <= c.mem_cap + _EPS
    for o, opt in enumerate(c.options):
        if opt.mode is SharingMode.EXCLUSIVE:
            col = base & free & (mem <= c.mem_cap + _EPS)
        elif opt.mode is SharingMode.TIME_SHARING:
            col = base & room & fits_shared & (free | (c.mode == SharingMode.TIME_SHARING))
        elif opt.mode is SharingMode.MPS:
            sm_ok = (c.sm_used + opt.sm_pct <= 100) | ~c.mps_limit
            col = base & room & fits_shared & sm_ok & (free | (c.mode == SharingMode.MPS))
        else:
            if job.num_gpus > 1:
                continue
            rows = c.mig.creatable[c.type_idx, c.mig_occ, c.mig_used]
            mig_base = base & room & c.mig_capable & (free | (c.mode == SharingMode.MIG))
            rows_ok = rows & (c.mig.mem_gb[c.type_idx] >= mem - _EPS)
            comp = c.mig.compute[c.type_idx] == opt.mig_slices
            col = mig_base & np.any(rows_ok & comp, axis=1)
        out[:, o] = col
    if job.num_gpus > 1:
        suffix = np.cumsum(out[::-1], axis=0)[::-1]
        out &= suffix >= job.num_gpus
    return out


@pytest.mark.parametrize("scenario", ["default", "mig-a100"])
def test_masks_and_incremental_state_match_the_plain_computation(scenario: str) -> None:
    env = GpuSharingEnv(scenario=scenario)
    sim = env.sim
    c = sim.cluster
    rng = np.random.default_rng(3)
    _, info = env.reset(seed=3)
    checked = 0
    for _ in range(400):
        if not sim.done:
            dyn = c.masks._dynamic()
            for got, want in zip(dyn, c.masks._dynamic_full(), strict=True):
                assert np.array_equal(got, want)
            for spec in sim.queued_jobs():
                assert np.array_equal(c.placement_mask(spec), reference_mask(c, spec))
                checked += 1
            # the fragmentation's need, read off the queue's signatures
            off = [spec.mem_gb for spec in sim.queued_jobs() if not spec.online]
            assert sim.waiting.least_offline_mem() == (min(off) if off else 0.0)
            # the utilisation sums the simulator keeps equal the per-GPU values it keeps
            rows = np.array(sim.usage.rows())
            assert np.allclose(sim.usage.sums, rows.sum(axis=0), atol=1e-9)
            assert np.array_equal(sim.gpu_util, rows[:, 0])
        legal = np.flatnonzero(info["action_mask"])
        _, _, term, _, info = env.step(int(legal[rng.integers(legal.size)]))
        if term:
            _, info = env.reset()
    assert checked > 100


def test_rate_memo_returns_the_speed_models_rates() -> None:
    env = GpuSharingEnv(scenario="default")
    sim = env.sim
    env.reset(seed=1)
    for _ in range(200):
        legal = np.flatnonzero(env.action_masks())
        env.step(int(legal[-1]))
    assert sim.memo.rates_cache
    for key, rates in list(sim.memo.rates_cache.items())[:200]:
        gpu_type, mode, *fields = key
        residents = [Resident(*f) for f in fields]
        assert sim.speed.rates(gpu_type, mode, residents) == rates


def test_latency_tuple_is_latency() -> None:
    for batch_ms in (0.5, 3.0, 20.0, 80.0):
        for rps in (0.0, 0.5, 10.0, 200.0, 5000.0):
            for batch in (1, 8):
                for slo in (1.0, 50.0, 400.0):
                    s = latency(batch_ms, rps, batch, slo)
                    assert latency_tuple(batch_ms, rps, batch, slo) == (
                        s.mean_ms,
                        s.p99_ms,
                        s.attainment,
                    )


def test_block_draws_are_the_scalar_draws() -> None:
    """The load noise is drawn in blocks: numpy fills arrays draw by draw, so the stream is the
    one scalar draws give."""
    a = np.random.default_rng(np.random.SeedSequence(7).spawn(3)[2])
    b = np.random.default_rng(np.random.SeedSequence(7).spawn(3)[2])
    scalar = [float(a.standard_normal()) for _ in range(1500)]
    blocks = np.concatenate([b.standard_normal(512) for _ in range(3)])[:1500].tolist()
    assert scalar == blocks
    assert all(math.isfinite(x) for x in blocks)
