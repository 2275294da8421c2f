"""A migration listed among the targets a build has just read is legal without the cluster's
remove, check and re-add (``Legality.listed_migration``, ``Lifecycle.check_migration``'s fast
path): every listed cell must be one the cluster allows once the job has left its GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.constants import _RUNNING
from gpu_sharing_env.sim.engine import Simulator


def _random_legal_states(env: Any, seed: int, rng_seed: int, steps: int) -> Iterator[Simulator]:
    """The simulator before each of ``steps`` random-legal steps of ``env`` (reset with
    ``seed``, then with seeds drawn as episodes end)."""
    rng = np.random.default_rng(rng_seed)
    _, info = env.reset(seed=seed)
    for _ in range(steps):
        yield env.unwrapped.sim
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            _, info = env.reset(seed=int(rng.integers(100)))
    env.close()


def _legal_after_leaving(sim: Simulator, job_id: int, gpu: int, option: int) -> bool:
    """What ``check_migration``'s slow path decides, on a copy: the job leaves its GPUs,
    then the cluster's legality function judges the cell."""
    c = sim.copy()
    st = c.table.jobs[job_id]
    opt = c.options[st.option]
    for g in st.gpus:
        c.cluster.remove(st.spec, g, opt)
    return c.cluster.check(st.spec, gpu, option) is None


@pytest.mark.parametrize(
    ("scenario", "gpulets"), [("default", 0), ("mig-a100", 0), ("default-x2", 0), ("default", 2)]
)
def test_listed_migrations_are_legal_after_leaving(scenario: str, gpulets: int) -> None:
    """Random-legal ``GpuSharing-v2`` steps: at each, for every running job past its setup,
    every cell ``listed_migration`` answers True for is legal once the job left its GPUs, and
    ``check_migration`` answers None there; and every cell of the build's migration targets
    is listed. (``gpulets``: GPULet's partitions, where leaving a GPU may free one.)"""
    cfg = load_scenario(scenario)
    cfg = replace(cfg, sharing=replace(cfg.sharing, gpulets=gpulets))
    env = gym.make("GpuSharing-v2", scenario=cfg, max_candidates=65536)
    rng = np.random.default_rng(5)
    listed = 0
    for sim in _random_legal_states(env, 2, 5, 80):
        n_opts = len(sim.options)
        legality = sim.legality
        jobs = sim.table.jobs
        running = sorted({j for res in sim.cluster.residents for j in res})
        cells: list[tuple[int, int, int]] = []
        for jid in running:
            st = jobs[jid]
            if st.status is not _RUNNING or st.setup_until > sim.now:
                continue
            flat = set(legality.migration_targets(jid).tolist())  # (what a build reads)
            for g in range(sim.n_gpus):
                for o in range(n_opts):
                    on = legality.listed_migration(st.spec, g, o)
                    assert on == (g * n_opts + o in flat), (jid, g, o)
                    if on:
                        cells.append((jid, g, o))
        picked = [cells[i] for i in rng.permutation(len(cells))[:6]]
        for jid, g, o in picked:
            assert _legal_after_leaving(sim, jid, g, o), (scenario, gpulets, jid, g, o)
            listed += 1
        for jid, g, o in picked:  # (the fast path: nothing is removed or re-added)
            version = sim.cluster.version
            assert sim.lifecycle.check_migration(jobs[jid], g, o) is None
            assert sim.cluster.version == version
    assert listed > 20


def test_an_unlisted_cell_takes_the_slow_path() -> None:
    """A job's own GPU is never listed (it is not empty): ``check_migration`` judges it by the
    cluster, as the job leaving it would; that judgement removes and re-adds the job, a new
    cluster version, after which no memo of the last version answers: a cell listed before
    is listed as the new version's targets list it (compiled, a single-GPU job: the typed
    pass on that GPU alone; else not until targets are read again)."""
    env = gym.make("GpuSharing-v2", scenario=load_scenario("default"))
    stale = 0
    for sim in _random_legal_states(env, 0, 0, 80):
        jobs = sim.table.jobs
        n_opts = len(sim.options)
        moving = [
            jobs[j]
            for j in sorted({j for res in sim.cluster.residents for j in res})
            if jobs[j].setup_until <= sim.now
        ]
        before = [
            (st, int(x) // n_opts, int(x) % n_opts)
            for st in moving
            for x in sim.legality.migration_targets(st.spec.job_id)
        ]
        for st in moving:
            g = st.gpus[0]
            assert not sim.legality.listed_migration(st.spec, g, st.option)
            why = sim.lifecycle.check_migration(st, g, st.option)
            assert (why is None) == _legal_after_leaving(sim, st.spec.job_id, g, st.option)
        if moving:
            on = [sim.legality.listed_migration(st.spec, g, o) for st, g, o in before]
            for (st, g, o), listed in zip(before, on, strict=True):  # (read after: a memo)
                fresh = sim.legality.migration_targets(st.spec.job_id)
                typed = sim.legality.typed_job(st.spec.job_id)
                assert listed == (typed and g * n_opts + o in set(fresh.tolist()))
                stale += 1
    assert stale > 20
