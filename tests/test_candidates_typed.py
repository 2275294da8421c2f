"""The v2 candidate table's typed loop (compiled) and its numpy passes (interpreted) give the
same bits, edge values included (NaN of either sign, -0.0, values past [-1, 1], infinities).

The compiled module and its source loaded a second time under another name run side by side
on the same inputs (as ``tests/test_observation_typed.py`` does for the v1 pair table);
``tests/test_compiled.py`` compares whole rollouts in both modes, and the v2 parity and
determinism tests run in both.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs import candidates
from gpu_sharing_env.envs.candidates import N_FEATURES
from gpu_sharing_env.sim.view import ClusterView
from tests.helpers import interpreted

_EDGES = np.array([np.nan, -np.nan, -0.0, 0.0, -1.0, 1.0, -2.5, 3.0, np.inf, -np.inf, 1e-300])


def _values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.uniform(-1.5, 1.5, size=shape)
    edge = rng.uniform(size=shape) < 0.15
    x[edge] = rng.choice(_EDGES, size=int(edge.sum()))
    return x


def _inputs(rng: np.random.Generator) -> tuple[object, ...]:
    """Random arguments of ``_write_rows`` after ``out`` and ``ids``: blocks of flat targets
    (a block's own GPU among them at least once), job rows with edge values, clipped float32
    GPU, option and speed cells."""
    n_blocks, n_gpus, n_opts = int(rng.integers(1, 9)), int(rng.integers(1, 30)), 7
    n_types, n_models = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    flats = [
        np.sort(
            rng.choice(
                n_gpus * n_opts,
                size=int(rng.integers(1, 12)) % (n_gpus * n_opts) + 1,
                replace=False,
            )
        )
        for _ in range(n_blocks)
    ]
    n = sum(len(f) for f in flats)
    own = rng.integers(-1, n_gpus, size=n_blocks)
    own[0] = flats[0][0] // n_opts  # (a target on the job's own GPU at least once)
    job_ints = np.stack(
        [rng.integers(0, 500, size=n_blocks), own, rng.integers(0, n_models, size=n_blocks)],
        axis=1,
    )
    n_opt_cols = candidates._SOLO - candidates._OPT0

    def cells(shape: tuple[int, ...]) -> np.ndarray:
        return np.clip(_values(rng, shape), -1.0, 1.0).astype(np.float32)

    return (
        int(rng.integers(0, n + 1)),  # n_place
        flats,
        n_opts,
        _values(rng, (n_blocks, 14)),
        job_ints,
        cells((n_gpus, 11)),
        cells((n_opts, n_opt_cols)),
        cells((n_models, n_types)),
        rng.integers(0, n_types, size=n_gpus),
    )


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_candidate_rows_compiled_and_interpreted_agree_bit_for_bit() -> None:
    """``_write_rows``' typed pass and its numpy passes write the same moves and the same
    table bits, the padding rows and an extra column (``suspend``) untouched."""
    src = interpreted(candidates)
    assert not src.cython.compiled
    rng = np.random.default_rng(0)
    for _ in range(300):
        args = _inputs(rng)
        n = 1 + sum(len(f) for f in args[1])  # type: ignore[attr-defined]
        tables = [np.zeros((n + 3, N_FEATURES + 1), dtype=np.float32) for _ in range(2)]
        ids = [np.full((3, n), 7, dtype=np.int64), np.full((3, n), 9, dtype=np.int64)]
        candidates._write_rows(tables[0], ids[0], *args)
        src._write_rows(tables[1], ids[1], *args)
        assert tables[0].view(np.uint32).tobytes() == tables[1].view(np.uint32).tobytes()
        assert np.array_equal(ids[0], ids[1])
        assert not tables[0][n:].any() and not tables[0][:, N_FEATURES].any()
        flat = np.concatenate(args[1])  # type: ignore[call-overload]
        assert np.array_equal(ids[0][1, 1:] * args[2] + ids[0][2, 1:], flat)  # type: ignore[operator]
        assert (ids[0][:, 0] == -1).all()


def test_clip_as_numpy() -> None:
    """The loop's clip of one double is ``np.clip(x, -1, 1)``'s (run interpreted here)."""
    src = interpreted(candidates)
    x = np.concatenate([_EDGES, np.linspace(-2, 2, 41)])
    ours = np.array([src._clip1(float(v)) for v in x])
    assert ours.view(np.uint64).tobytes() == np.clip(x, -1.0, 1.0).view(np.uint64).tobytes()


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_gpu_table_compiled_and_interpreted_agree_bit_for_bit() -> None:
    src = interpreted(candidates)
    rng = np.random.default_rng(1)
    for _ in range(300):
        g = int(rng.integers(1, 40))
        ints = [rng.integers(0, 9, size=g) for _ in range(5)]  # type, node, residents, SM, online
        cap = rng.choice([80.0, 40.0, 0.0, -0.0, 1e-12, np.nan], size=g)
        floats = [_values(rng, (g,)) for _ in range(4)]  # log_left, mem, frac, util
        healthy, ready = rng.uniform(size=g) < 0.8, rng.uniform(size=g) < 0.8
        scales = [int(x) for x in rng.integers(1, 8, size=3)]
        args = (
            floats[0], ints[0], ints[1], ints[2], floats[1], cap, floats[2], ints[3], ints[4],
            healthy, ready, floats[3], *scales,
        )  # fmt: skip
        a = np.full((g, len(candidates._GPU_COLS)), 7.0, dtype=np.float32)
        b = np.full((g, len(candidates._GPU_COLS)), 9.0, dtype=np.float32)
        candidates._gpu_table(a, *args)
        src._gpu_table(b, *args)
        assert a.view(np.uint32).tobytes() == b.view(np.uint32).tobytes()


def _old_job_row(view: ClusterView, jid: int) -> list[float]:
    """A job's columns as the rows were first defined: from ``ClusterView.job`` (a JobView)
    and ``ClusterView.group_stats``."""
    j = view.job(jid)
    g = view.group_stats(jid)
    runs = mean = std = period = 0.0
    if g is not None:
        runs = math.log1p(g.runs_seen) / 5.0
        mean = g.mean_log_s / math.log(1e6) if math.isfinite(g.mean_log_s) else 0.0
        std = g.std_log_s / 5.0 if math.isfinite(g.std_log_s) else 0.0
        period = candidates._log_s(g.period_s)
    return [
        float(j.online),
        math.log2(max(1, j.num_gpus)) / 6.0,
        j.gpu_frac,
        j.mem_gb / 80.0,
        j.cpu_cores / 64.0,
        candidates._log_s(j.est_work_s),
        candidates._log_s(j.est_remaining_s),
        candidates._log_s(j.wait_s),
        min(j.attempts, 10) / 10.0,
        min(j.priority, 10) / 10.0,
        runs,
        mean,
        std,
        period,
    ]


@pytest.mark.parametrize("scenario,kw", [("default", {}), ("pai-busy", {"pruning": "classes"})])
def test_rows_read_from_state_are_the_views(scenario: str, kw: dict[str, str]) -> None:
    """The rows read the jobs' state directly (no JobView); at every step of a random legal
    rollout their job columns, the residents' work left and ``gang_one_node`` are what the
    heuristics' view gives (``ClusterView.job``, ``group_stats``, ``residents``,
    ``gang_gpus``), ``job_on_target`` included."""
    env = gym.make(
        "GpuSharing-v2", scenario=load_scenario(scenario), max_candidates=65536, **kw
    ).unwrapped
    _, info = env.reset(seed=3)
    rng = np.random.default_rng(3)
    col = candidates._COL
    jobs_at, gpus_at = col["online"], col["type"]
    seen_gangs = 0
    for _ in range(300 if scenario == "default" else 40):
        cands, sim = env.candidates, env.sim
        view = ClusterView(sim)
        f = cands.features
        for i in range(1, len(cands)):
            jid, g, o = int(cands.job[i]), int(cands.gpu[i]), int(cands.option[i])
            want = np.clip(np.array(_old_job_row(view, jid)), -1.0, 1.0).astype(np.float32)
            assert f[i, jobs_at : col["job_on_target"]].tobytes() == want.tobytes()
            assert f[i, col["job_on_target"]] == float(g in view.job(jid).gpus)
            left = sum(r.est_remaining_s for r in view.residents(g))
            want_left = np.float32(min(1.0, np.log1p(left) / candidates._LOG_S))
            assert f[i, gpus_at + candidates._GPU_COLS.index("residents_left_log")] == want_left
            if view.job(jid).num_gpus > 1:
                seen_gangs += 1
                nodes = {int(view.node_of[x]) for x in view.gang_gpus(jid, g, o)}
                assert f[i, col["gang_one_node"]] == float(len(nodes) == 1)
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            break
    assert seen_gangs > 0 or scenario != "default"


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_firsts_and_split_compiled_and_interpreted_agree() -> None:
    """``_target_keys``, ``_firsts`` (a class's first target, one typed pass) and ``_split``
    (flat targets as GPUs and options) give what their numpy bodies give (``np.unique``'s
    first index, ``np.nonzero``), on random classes, options, modes and nodes and on the
    targets of masks of every size."""
    src = interpreted(candidates)
    rng = np.random.default_rng(2)
    big = 0
    for _ in range(300):
        n_gpus, n_opts = int(rng.integers(1, 60)), int(rng.integers(1, 8))
        n_cls, n_nodes = int(rng.integers(1, n_gpus + 1)), int(rng.integers(1, 9))
        cls = rng.integers(0, n_cls, size=n_gpus)
        mode = rng.integers(-2, 4, size=n_gpus)
        opt_mode = rng.integers(-2, 4, size=n_opts)
        node_of = np.sort(rng.integers(0, n_nodes, size=n_gpus))
        mask = rng.uniform(size=(n_gpus, n_opts)) < rng.uniform()
        gs, os_ = np.nonzero(mask)
        flat = np.flatnonzero(mask)
        for a, b, c in zip(
            (gs, os_), candidates._split(flat, n_opts), src._split(flat, n_opts), strict=True
        ):
            assert a.dtype == b.dtype == c.dtype and np.array_equal(a, b) and np.array_equal(a, c)
        big += len(flat) > 256
        here = int(rng.integers(-1, n_nodes))
        picks = []
        for mod in (candidates, src):
            keys = mod._target_keys(gs, os_, cls, n_opts, mode, opt_mode)
            assert keys.dtype == np.int64 and (len(keys) == 0 or keys.max() < n_cls * n_opts * 2)
            pick = np.zeros(len(gs), dtype=bool)
            seen = np.zeros(n_cls * n_opts * 4, dtype=np.uint8)
            mod._firsts(pick, seen, keys, node_of[gs], here)
            picks.append((keys, pick))
        assert np.array_equal(picks[0][0], picks[1][0])
        assert np.array_equal(picks[0][1], picks[1][1])
    assert big > 0  # (the typed walk's size)


def _pruned(scenario: str, seed: int) -> tuple[Any, dict[str, Any], np.random.Generator]:
    """A pruned ``GpuSharing-v2`` of ``scenario`` (unwrapped) reset at ``seed``, its info and
    a random generator of the seed for its legal actions."""
    env = gym.make(
        "GpuSharing-v2", scenario=load_scenario(scenario), max_candidates=65536, pruning="classes"
    ).unwrapped
    _, info = env.reset(seed=seed)
    return env, info, np.random.default_rng(seed)


@pytest.mark.parametrize("scenario", ["pai-busy", "default-x2"])
def test_firsts_are_the_first_of_each_key(scenario: str) -> None:
    """``TargetClasses.firsts`` (one pass over the GPUs' classes) picks what the classes' keys
    pick (``TargetClasses.keys``, the first of each by ``np.unique``) for every single-GPU
    job's placement and migration targets at every step of a pruned random legal rollout,
    also for CPU requests that oversubscribe some nodes (the node then its own class)."""
    env, info, rng = _pruned(scenario, 1)
    checked = 0
    for _ in range(25 if scenario == "pai-busy" else 120):
        sim = env.sim
        classes = candidates.TargetClasses(sim)
        targets: dict[int, tuple[np.ndarray, ...]] = {}
        c = sim.cluster
        asked: list[tuple[int, int]] = [(jid, -1) for _, jid in sim.queue]
        running = sorted({j for res in c.residents for j in res})
        asked += [(j, int(c.node_of[sim.jobs[j].gpus[0]])) for j in running]
        for jid, here in asked[:40]:
            spec = sim.jobs[jid].spec
            if spec.num_gpus != 1:
                continue
            mask = sim.mask(jid) if here < 0 else sim.migration_mask(jid)
            # (jobs of one mask share its targets, as in a build: the classes kept for them)
            gs, os_ = targets.setdefault(
                id(mask), (mask, *np.nonzero(mask), np.flatnonzero(mask.ravel()))
            )[1:3]
            for cpu in (spec.cpu_cores, 1.0, 24.0, 1e6):
                s = dataclasses.replace(spec, cpu_cores=cpu)
                want = np.zeros(len(gs), dtype=bool)
                want[np.unique(classes.keys(s, gs, os_, here), return_index=True)[1]] = True
                assert np.array_equal(classes.firsts(s, gs, os_, here), want)
                # (compiled: a migration's from the firsts with no node apart, ``_near_firsts``)
                assert np.array_equal(classes.first_index(s, gs, os_, here), np.flatnonzero(want))
                if not candidates.__file__.endswith(".py"):  # (and from the flat targets)
                    flat = targets[id(mask)][3]
                    got = classes.flat_first_index(s, flat, here)
                    assert np.array_equal(got, np.flatnonzero(want))
                checked += 1
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            break
    assert checked > 100


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_near_firsts_pick_what_firsts_pick() -> None:
    """``_near_firsts`` (a job on node ``here``: the firsts with no node apart, then only the
    targets on ``here`` and after them) picks the targets the interpreted ``_firsts`` picks
    (one pass over every target), on random keys and rising nodes, every node asked; where
    no target lies on ``here`` it answers None (the base stands)."""
    src = interpreted(candidates)
    rng = np.random.default_rng(5)
    replaced = 0
    for _ in range(400):
        n, n_keys, n_nodes = int(rng.integers(1, 120)), int(rng.integers(1, 10)), 6
        keys = rng.integers(0, n_keys, size=n)
        nodes = np.sort(rng.integers(0, n_nodes, size=n))
        base = np.sort(np.unique(keys, return_index=True)[1])
        for here in range(-1, n_nodes + 1):
            want = np.zeros(n, dtype=bool)
            src._firsts(want, np.zeros(2 * n_keys, dtype=np.uint8), keys, nodes, here)
            got = candidates._near_firsts(keys, nodes, base, here, n_keys)
            if got is None:
                assert here not in nodes.tolist()
                got = base
            else:
                replaced += bool(np.isin(base, np.flatnonzero(nodes == here)).any())
            assert np.array_equal(got, np.flatnonzero(want))
    assert replaced > 100  # (a key's first on ``here``, its first elsewhere found after it)


@pytest.mark.parametrize("scenario", ["pai-busy", "mig-a100"])
def test_gpu_classes_compiled_and_interpreted_agree(scenario: str) -> None:
    """``TargetClasses``' GPU classes from the typed pass (``_gpu_codes``, compiled) are the
    columns' classes (``_class_ids``, interpreted), numbered alike, at every step of a
    pruned random legal rollout (MIG layouts and residents included)."""
    src = interpreted(candidates)
    env, info, rng = _pruned(scenario, 2)
    held = 0
    for _ in range(60):
        c = env.sim.cluster  # (what the loop over the residents' and MIG-mode GPUs relies on)
        assert all(c.mode[g] == candidates._MIG for g, m in enumerate(c.mig_instances) if m)
        typed = candidates.TargetClasses(env.sim)
        assert np.array_equal(typed.gid, src.TargetClasses(env.sim).gid)
        held += len(np.unique(typed.gid)) > 1
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            break
    assert held > 10


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_log_s_compiled_and_interpreted_agree() -> None:
    """``_log_s`` typed (C doubles, C's ``log1p``) gives Python's double, edges included."""
    src = interpreted(candidates)
    rng = np.random.default_rng(4)
    xs = [*_EDGES.tolist(), 5e-324, 1e-17, 1e6, 1e300]
    xs += (
        rng.uniform(-10.0, 1e7, size=20000).tolist()
        + (10.0 ** rng.uniform(-20, 20, 20000)).tolist()
    )
    for x in xs:
        a, b = candidates._log_s(x), src._log_s(x)
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), x


def test_gpu_views_follow_the_arrays_in_place_and_notice_new_ones() -> None:
    """The builder's kept views (``_GpuViews``) read the arrays as they are now (mutated in
    place between two writes: the cells follow) and ``same`` tells a tuple holding any new
    array object apart (the builder then makes new views), equal contents or not."""
    rng = np.random.default_rng(4)
    g = 9
    ints = [rng.integers(0, 9, size=g) for _ in range(5)]
    floats = [_values(rng, (g,)) for _ in range(4)]
    cap = np.full(g, 80.0)
    arrays = (
        ints[0], ints[1], ints[2], floats[1], cap, floats[2], ints[3], ints[4],
        rng.uniform(size=g) < 0.8, rng.uniform(size=g) < 0.8, floats[3],
    )  # fmt: skip
    views = candidates._GpuViews(arrays)
    assert views.same(arrays) and views.same(tuple(arrays))
    for k in range(len(arrays)):
        other = (*arrays[:k], arrays[k].copy(), *arrays[k + 1 :])
        assert not views.same(other)
    a = np.empty((g, len(candidates._GPU_COLS)), dtype=np.float32)
    b = np.empty_like(a)
    for _ in range(3):
        views.write(a, floats[0], 3, 4, 5)
        candidates._gpu_table(b, floats[0], *arrays, 3, 4, 5)
        assert a.view(np.uint32).tobytes() == b.view(np.uint32).tobytes()
        for arr in arrays:  # (in place, as the cluster changes its state)
            arr[...] = np.roll(arr, 1)
