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
from gpu_sharing_env.sim import legality
from gpu_sharing_env.sim.engine import Decision
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


def test_rows_over_a_kept_table_write_both_kind_cells() -> None:
    """A kept table's rows may hold a past build's other kind (``GpuSharing-v3``): the typed
    pass and the numpy passes of ``_write_rows`` write both kind cells of every row, so each
    is one kind (``CandidateBuilder.build`` with ``out`` no longer zeroes them first)."""
    mods = [candidates]
    if not candidates.__file__.endswith(".py"):
        mods.append(interpreted(candidates))
    place, migrate = candidates._PLACE, candidates._MIGRATE
    rng = np.random.default_rng(1)
    for _ in range(100):
        args = _inputs(rng)
        n_place = args[0]
        n = 1 + sum(len(f) for f in args[1])  # type: ignore[attr-defined]
        for mod in mods:
            table = np.zeros((n, N_FEATURES), dtype=np.float32)
            table[1:, place] = table[1:, migrate] = 1.0  # (both kinds: a dirty row)
            mod._write_rows(table, np.empty((3, n), dtype=np.int64), *args)
            kinds = table[1:, place : migrate + 1]
            assert (kinds.sum(axis=1) == 1.0).all(), mod.__file__
            assert (kinds[:n_place, 0] == 1.0).all() and (kinds[n_place:, 1] == 1.0).all()


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


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
@pytest.mark.parametrize("scenario", ["pai-busy", "default-x2", "mig-a100"])
def test_rep_picks_are_the_first_of_each_key(scenario: str) -> None:
    """``_Memo.rep_picks`` (a single-GPU job's targets on the GPUs that stand for the fleet
    only: ``_class_reps``, ``_Reps.gpus``) picks what the classes' keys pick among all its
    targets (the mask's legal cells, the first of each key by ``np.unique``) for every queued
    job and every running job past its setup, at every step of a pruned random legal rollout,
    also where the job's CPUs oversubscribe some nodes (each then its own class)."""
    env, info, rng = _pruned(scenario, 3)
    checked = moved = 0
    for step in range(40 if scenario == "pai-busy" else 120):
        sim = env.sim
        c = sim.cluster
        asked: list[tuple[int, int]] = [(jid, -1) for _, jid in sim.queue]
        running = sorted({j for res in c.residents for j in res})
        asked += [
            (j, int(c.node_of[sim.jobs[j].gpus[0]]))
            for j in running
            if sim.jobs[j].setup_until <= sim.now
        ]
        for squeeze in (False, True):
            classes = candidates.TargetClasses(sim)
            if squeeze:  # (some nodes' CPUs left below any request: their own classes)
                classes._cpu_left = np.where(np.arange(c.n_nodes) % 3 == 1, 0.0, 1e9)
            memo = candidates._Memo(classes)
            builder = env.interface.builder
            for jid, here in asked[:40]:
                spec = sim.jobs[jid].spec
                if spec.num_gpus != 1:
                    continue
                mask = sim.mask(jid) if here < 0 else sim.migration_mask(jid)
                gs, os_ = np.nonzero(mask)
                keys = classes.keys(spec, gs, os_, here)
                flat = np.flatnonzero(mask.ravel())
                want = flat[np.sort(np.unique(keys, return_index=True)[1])]
                got = memo.rep_picks(builder, jid, here)
                assert got is not None
                assert np.array_equal(got, want), (step, jid, here)
                checked += 1
                moved += here >= 0 and len(want) > 0
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            break
    assert checked > 100
    assert moved > 5


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_class_reps_tell_apart_what_legality_reads() -> None:
    """``_class_reps``: the first GPU of each group alike in class and in each field a
    single-GPU legality reads; a GPU with any such field changed (its declared memory by one
    ulp, its SM in use, its MIG bits, ...) stands for its own group, and a group's peer is its
    first GPU on another node."""
    env, _, _ = _pruned("default-x2", 4)
    c = env.sim.cluster
    classes = candidates.TargetClasses(env.sim)
    gid = np.zeros(c.n_gpus, dtype=np.int64)  # (one class: only the fields tell GPUs apart)
    v = c.state_views()
    reps, alts = candidates._class_reps(v, gid, c.node_of, 1)
    assert reps[0] == 0 and len(reps) < c.n_gpus // 2
    f = c.fleet  # (the arrays the typed views share: ``fleet.cluster._StateViews``)
    arrays = [c.n_res, c.mode, c.ready, c.healthy, f.type_idx, c.mem_decl, f.cap_eps]
    arrays += [c.sm_used, f.mps_limit, f.mig_capable, c.mig_layouts.occ, c.mig_layouts.used]
    g = c.n_gpus - 1
    assert g not in reps.tolist()
    for i, arr in enumerate(arrays):
        was = arr[g].copy()
        if arr.dtype.kind == "f":
            arr[g] = np.nextafter(was, np.inf)
        else:
            arr[g] = not was if arr.dtype.kind == "b" else arr.max() + 1  # (no other GPU's)
        try:
            got, _ = candidates._class_reps(v, gid, c.node_of, 1)
            assert g in got.tolist(), i
        finally:
            arr[g] = was
    for r, a in zip(reps.tolist(), alts.tolist(), strict=True):
        same = [x for x in range(c.n_gpus) if all(arr[x] == arr[r] for arr in arrays)]
        off = [x for x in same if c.node_of[x] != c.node_of[r]]
        assert same[0] == r and a == (off[0] if off else -1)
    assert classes.reps(classes.gid) is classes.reps(classes.gid)


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
def test_gpu_rows_of_the_targets_gpus_are_the_fleets() -> None:
    """``CandidateBuilder._gpu_rows`` with the targets' GPUs (``_target_gpus``: compiled, a
    build writes only those rows) gives those GPUs the rows of the whole fleet's table, at
    every step of a pruned random legal rollout (residents and their work left included)."""
    env, info, rng = _pruned("pai-busy", 5)
    builder = env.interface.builder
    n_opts = len(env.sim.options)
    busy = 0
    for _ in range(30):
        c = env.sim.cluster
        flats = [np.array([g * n_opts for g in range(0, c.n_gpus, 7)], dtype=np.int64)]
        flats.append(np.flatnonzero(env.sim.mask(next(iter(env.sim.queue))[1]).ravel()))
        gpus = candidates._target_gpus(flats, n_opts, c.n_gpus)
        want = np.unique(np.concatenate(flats) // n_opts)
        assert np.array_equal(gpus, want)
        whole = builder._gpu_rows()
        for at in (gpus, candidates._target_gpus(flats[:1], n_opts, c.n_gpus)):  # (and a few)
            some = builder._gpu_rows(at)
            assert np.array_equal(whole[at].view(np.uint32), some[at].view(np.uint32))
            busy += int((c.n_res[at] > 0).sum())
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            break
    assert busy > 50


@pytest.mark.skipif(legality.__file__.endswith(".py"), reason="sim.legality runs interpreted here")
@pytest.mark.parametrize("scenario", ["mig-a100", "default-x2"])
def test_check_of_a_pruned_placement_is_the_masks(scenario: str) -> None:
    """``Legality.check`` of a queued single-GPU job's placement with no mask nor targets at
    hand (a pruned build reads neither: its typed pass on that GPU alone) says legal exactly
    where the job's placement mask (the cluster's own, built afresh) allows the cell, at
    every step of a pruned random legal rollout: all the legal cells and as many illegal
    ones, MIG's (no fit index) and MPS's options included."""
    env, info, rng = _pruned(scenario, 5)
    legal_n = illegal_n = 0
    for _ in range(60):
        sim = env.sim
        c = sim.cluster
        law = sim.legality
        for _, jid in list(sim.queue)[:6]:
            spec = sim.jobs[jid].spec
            if spec.num_gpus != 1:
                continue
            law._sig_version = -1  # (no targets at hand: ``check``'s own pass answers)
            law.forget(jid)
            mask = c.placement_mask(spec)
            on = np.argwhere(mask)
            off = np.argwhere(~mask)
            off = off[rng.permutation(len(off))[: len(on) + 5]]
            for cells, ok in ((on, True), (off, False)):
                for g, o in cells.tolist():
                    why = sim.legality.check(Decision(jid, g, o))
                    assert (why is None) is ok, (scenario, jid, g, o, why)
            legal_n += len(on)
            illegal_n += len(off)
        actions = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(actions[rng.integers(actions.size)]))
        if te or tr:
            break
    assert legal_n > 200 and illegal_n > 200


@pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)
@pytest.mark.parametrize(
    ("scenario", "pruning"), [("default", "none"), ("default-x2", "none"), ("mig-a100", "classes")]
)
def test_kept_writer_builds_the_interpreted_table(scenario: str, pruning: str) -> None:
    """The compiled build (its kept ``_Writer``: job rows, GPU cells of the targets' GPUs only,
    marks, log1p of the residents' work left, speed cells) writes the table and the moves'
    integers bit for bit as the interpreted builder's numpy passes (every GPU's cells, fresh
    arrays) on the same state, at every step of a random legal rollout; the padding rows stay
    zero. Gangs (``default-x2``), several models and a new episode's speed rows included."""
    src = interpreted(candidates)
    env = gym.make(
        "GpuSharing-v2", scenario=load_scenario(scenario), max_candidates=4096, pruning=pruning
    ).unwrapped
    rng = np.random.default_rng(7)
    _, info = env.reset(seed=7)
    compared = 0
    for step in range(400):
        sim = env.sim
        ours = env.interface.candidates
        theirs = src.CandidateBuilder(sim, 4096, pruning).build()
        n = len(theirs)
        assert len(ours) == n, step
        assert ours.table is not None and theirs.table is not None
        assert ours.table.view(np.uint32).tobytes() == theirs.table.view(np.uint32).tobytes()
        for a, b in ((ours.job, theirs.job), (ours.gpu, theirs.gpu), (ours.option, theirs.option)):
            assert np.array_equal(a, b), step
        compared += n
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            _, info = env.reset(seed=8 + step)
    assert compared > 2000
