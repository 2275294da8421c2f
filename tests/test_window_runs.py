"""The window scope's builds keep per GPU whether its fields equal the GPU before's
(``envs/candidates.py``: ``_Runs``, ``_same_as_before``), brought up to date for the GPUs the
cluster changed since the last build only (``Cluster.watch``), and the GPUs' classes and the
GPUs that stand for the fleet read them (``_gpu_codes``, ``_class_reps``). A GPU change the
watch missed would leave a stale flag: these tests compare the kept flags with flags found
afresh (and with numpy's) after every build of pruned random legal rollouts, and the classes
and representatives built from them with those built from scratch."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs import candidates
from tests.helpers import interpreted

pytestmark = pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)


def _env(version: str, scenario: str, size: int | None, window: bool) -> Any:
    """A pruned env (unwrapped) of ``scenario``, scaled to ``size`` GPUs where given, with
    the window scope where ``window``."""
    from gpu_sharing_gym.bench.suite import scaled_scenario

    cfg = load_scenario(scenario)
    if size is not None:
        cfg = scaled_scenario(cfg, size)
    kw: dict[str, Any] = {"pruning": "classes", "max_candidates": 65536}
    if window:
        kw["decision_scope"] = "window"
    return gym.make(f"GpuSharing-{version}", scenario=cfg, **kw).unwrapped


def _numpy_flags(c: Any) -> tuple[np.ndarray, np.ndarray]:
    """``_same_as_before``' two flags by numpy, from the cluster's arrays themselves."""
    f = c.fleet
    mode = np.where((c.n_res == 0) & (c.mode != candidates._MIG), candidates._FREE, c.mode)
    own = [f.type_idx, mode, c.healthy, c.ready, c.sm_used]
    every = [c.n_res, c.mode, c.ready, c.healthy, f.type_idx, c.mem_decl, f.cap_eps]
    every += [c.sm_used, f.mps_limit, f.mig_capable, c.mig_layouts.occ, c.mig_layouts.used]
    out = []
    for cols in (own, every):
        eq = np.ones(c.n_gpus - 1, dtype=bool)
        for a in cols:
            eq &= a[1:] == a[:-1]
        out.append(np.concatenate([[0], eq]).astype(np.uint8))
    return out[0], out[1]


@pytest.mark.parametrize(
    ("version", "scenario", "size", "window", "steps"),
    [
        ("v3", "default", 256, True, 150),
        ("v2", "mig-a100", None, False, 120),
        ("v2", "pai-busy", None, False, 40),
    ],
)
def test_kept_flags_are_found_afresh_at_every_build(
    version: str, scenario: str, size: int | None, window: bool, steps: int
) -> None:
    """After every step (a build), the builder's kept flags (``_Runs``) equal the flags found
    afresh from the cluster's state (``_same_as_before``) and numpy's; the GPUs' classes and
    the representatives with their peers from the kept flags equal those from fresh ones and
    the interpreted columns' classes (``_class_ids``); across episodes (a reset: new arrays)
    too."""
    src = interpreted(candidates)
    env = _env(version, scenario, size, window)
    rng = np.random.default_rng(7)
    _, info = env.reset(seed=3)
    builder = env.interface.builder
    checked = changed = resets = 0
    was: tuple[np.ndarray, ...] = ()
    for _ in range(steps):
        sim = env.sim
        c = sim.cluster
        runs = builder._runs
        assert runs.flags is not None  # (the reset's build made them)
        kept = candidates.TargetClasses(sim, runs=runs)  # (brought up to date: the watch)
        fresh = candidates._same_as_before(c.state_views())
        want = _numpy_flags(c)
        for k in (0, 1):
            assert np.array_equal(runs.flags[k], fresh[k]), (checked, k)
            assert np.array_equal(runs.flags[k], want[k]), (checked, k)
        if was and len(was[0]) == c.n_gpus:  # (the flags moved since the last step's)
            changed += not all(np.array_equal(was[k], runs.flags[k]) for k in (0, 1))
        was = (runs.flags[0].copy(), runs.flags[1].copy())
        assert np.array_equal(kept.gid, candidates.TargetClasses(sim).gid)
        assert np.array_equal(kept.gid, src.TargetClasses(sim).gid)
        cls = kept._gpu_class(sim.jobs[next(iter(sim.jobs))].spec.cpu_cores)[0]
        n = int(cls.max()) + 1
        got = candidates._class_reps(c.state_views(), cls, c.node_of, n, runs.flags[1])
        ref = candidates._class_reps(c.state_views(), cls, c.node_of, n)
        assert (got is None) == (ref is None)
        if got is not None and ref is not None:
            assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])
        checked += 1
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            _, info = env.reset(seed=int(rng.integers(100)))
            resets += 1
    env.close()
    assert checked == steps and changed > 10


def test_gpu_codes_rank_many_classes_as_numpy() -> None:
    """``_gpu_codes`` numbers the GPUs' classes in the codes' order (``np.unique``'s inverse,
    as ``_class_ids`` of the columns) with few classes (a typed rank) and with many (over 64:
    ``argsort``), from runs of like GPUs and single ones."""
    env = _env("v2", "default-x2", None, False)
    env.reset(seed=1)
    c = env.sim.cluster
    pcie = candidates._pcie(c.nodes)
    v = c.state_views()
    rng = np.random.default_rng(2)
    for distinct in (1, 3, 40, 200, 10_000):
        held = rng.integers(0, distinct, size=c.n_gpus).astype(np.int64)
        held[: c.n_gpus // 2] = np.sort(held[: c.n_gpus // 2])  # (runs of like GPUs)
        got = candidates._gpu_codes(v, c.node_of, pcie, held, c.n_nodes)
        free = (c.n_res == 0) & c.ready
        n_free = np.bincount(c.node_of[free], minlength=c.n_nodes)
        size = np.bincount(c.node_of, minlength=c.n_nodes)
        node = np.stack([size, pcie, np.where(n_free <= 1, 0, np.where(n_free == size, 2, 1))])
        mode = np.where((c.n_res == 0) & (c.mode != candidates._MIG), candidates._FREE, c.mode)
        cols = (c.type_idx, mode, c.healthy, c.ready, c.sm_used, *node[:, c.node_of], held)
        assert np.array_equal(got, candidates._class_ids(cols)), distinct
    env.close()


@pytest.mark.parametrize(
    ("version", "scenario", "size", "window", "steps"),
    [
        ("v3", "default", 256, True, 150),
        ("v2", "mig-a100", None, False, 120),
        ("v2", "pai-busy", None, False, 40),
        ("v3", "default", None, True, 200),
    ],
)
def test_kept_classes_equal_classes_made_afresh_at_every_build(
    version: str, scenario: str, size: int | None, window: bool, steps: int
) -> None:
    """After every step (a build), the classes the builder keeps across builds
    (``_Runs.classes``, ``_Kept``: the GPUs' free and busy flags, the runs' first GPUs, the
    GPUs ``_class_reps`` visits, the nodes' counts and classes, whether each GPU's residents'
    key is the GPU before's) equal those made afresh from the cluster's state, the classes
    equal the interpreted columns' (``_class_ids``), and the representatives and peers found
    from them (``_Kept.reps``) equal ``_class_reps``' from scratch for the CPU requests of
    the jobs and for some that oversubscribe some nodes (the classes with nodes apart);
    across episodes (a reset: new arrays)."""
    src = interpreted(candidates)
    env = _env(version, scenario, size, window)
    rng = np.random.default_rng(5)
    _, info = env.reset(seed=2)
    builder = env.interface.builder
    checked = apart = moved = 0
    was: tuple[np.ndarray, ...] = ()
    for _ in range(steps):
        sim = env.sim
        c = sim.cluster
        runs = builder._runs
        tc = candidates.TargetClasses(sim, runs=runs)  # (brought up to date: the watch)
        kept = runs.kept
        assert kept is not None and tc._kept is kept
        fresh = candidates._Kept(c, candidates._pcie(c.nodes), runs.flags)
        gid = fresh.refresh(c, None, sim.jobs, {})
        assert np.array_equal(tc.gid, gid)
        assert np.array_equal(tc.gid, src.TargetClasses(sim).gid)
        got, want = kept.snapshot(), fresh.snapshot()
        for k, (a, b) in enumerate(zip(got, want)):
            assert np.array_equal(a, b), (checked, k)
        if was and len(was[2]) == len(got[2]):
            moved += not np.array_equal(was[2], got[2])
        was = got
        v = c.state_views()
        left = np.sort(c.node_vcpus - c.node_cpu_used)
        cpus = {float(st.spec.cpu_cores) for st in sim.jobs.values()}
        cpus |= {float(left[len(left) // 2]), float(left[-1]) + 1.0}
        for cpu in sorted(cpus):
            cls, n = tc._gpu_class(cpu)
            ref = candidates._class_reps(v, cls, c.node_of, n)
            out = kept.reps(v, cls, n, cls is not tc.gid)
            assert (out is None) == (ref is None), (checked, cpu)
            if out is not None and ref is not None:
                assert np.array_equal(out[0], ref[0]), (checked, cpu)
                assert np.array_equal(out[1], ref[1]), (checked, cpu)
            apart += cls is not tc.gid
        checked += 1
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            _, info = env.reset(seed=int(rng.integers(100)))
    env.close()
    assert checked == steps and apart > 0 and moved > 3
