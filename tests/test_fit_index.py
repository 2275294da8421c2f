"""Issue 24: ``Cluster.placeable`` answers "does anything fit" from an index kept up to date as
GPUs change (``cluster._FitIndex``), not from the masks. On random fleets, sharing settings and
random sequences of placements, removals and readiness/health changes, every answer must equal
the mask's (``Cluster.placeable_scan``), for single-GPU jobs and gangs, offline and online,
with and without GPU-type constraints, and memory sizes whose sums round (0.1 + 0.2 ...).
Over the whole queue, ``Simulator.needs_decision`` asks only the signatures no other one
dominates: checked against asking every queued signature's mask in a congested episode."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np
import pytest

from gpu_sharing_env.config import SharingConfig, load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.physics.nodes import NodeSpec
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.waiting import front, mask_signature
from gpu_sharing_env.workload.job import JobKind, JobSpec
from gpu_sharing_gym.baselines.pai import SjfPredicted

_MEMS = (0.1, 0.2, 0.3, 0.7, 1.5, 3.3, 4.0, 5.9, 8.0, 10.1, 16.0, 20.0, 24.0, 32.0, 40.0, 80.0)
_TYPES = ((), ("T4",), ("P100", "V100-32GB"), ("A100-40GB",), ("A10", "H100-80GB", "T4"))
_SHARING = (
    SharingConfig(),
    SharingConfig(modes=("exclusive", "time_sharing", "mps"), mps_sm_pcts=(50, 25, 100, 75)),
    SharingConfig(modes=("time_sharing", "mps"), mps_sm_pcts=(30, 60), max_residents=2),
    SharingConfig(modes=("exclusive", "mig"), mig_compute_slices=(1, 2, 3, 7)),
    SharingConfig(modes=("exclusive",), max_residents=1),
    SharingConfig(modes=("mps", "mig"), mps_sm_pcts=(25, 50), mig_compute_slices=(1, 3)),
)


@dataclass(frozen=True)
class _Job:
    """What the cluster reads of a job (a ``JobSpec`` stand-in: online ones need no service)."""

    job_id: int
    mem_gb: float
    gpu_types: tuple[str, ...]
    online: bool
    num_gpus: int
    true_mem_gb: float
    gpu_frac: float = 1.0
    cpu_cores: float = 1.0

    @property
    def kind(self) -> JobKind:
        """As ``JobSpec.kind`` (the cluster reads the kind: ``JobSpec.online`` is its property)."""
        return JobKind.ONLINE if self.online else JobKind.OFFLINE


def _fleet(rng: np.random.Generator) -> list[NodeSpec]:
    names = ("T4", "P100", "V100-32GB", "A10", "A100-40GB", "H100-80GB")
    return [
        NodeSpec(f"n{i}", str(rng.choice(names)), int(rng.choice([1, 2, 4, 8])), 64.0, 256.0)
        for i in range(int(rng.integers(3, 12)))
    ]


def _job(rng: np.random.Generator, jid: int, gangs: bool = True) -> JobSpec:
    mem = float(rng.choice(_MEMS))
    n = int(rng.choice([1, 1, 1, 2, 3, 4, 8])) if gangs else 1
    types = _TYPES[int(rng.integers(len(_TYPES)))]
    job = _Job(jid, mem, types, bool(rng.random() < 0.2), n, mem)
    return cast(JobSpec, job)


def _random_change(
    c: Cluster,
    rng: np.random.Generator,
    step: int,
    placed: list[tuple[JobSpec, list[int], int]],
    via_first_legal: bool = False,
) -> None:
    """One random change to ``c``: place a random job at a random legal (GPU, option) (half the
    time, with ``via_first_legal``, where ``first_legal`` puts it, checking ``legal``, ``check``
    and ``gang_gpus`` against the mask on the way), remove a placed one, or flip a GPU's
    readiness or health."""
    r = rng.random()
    if r < 0.55:
        job = _job(rng, step)
        legal = np.argwhere(c.placement_mask(job))
        if len(legal):
            g, o = (int(x) for x in legal[int(rng.integers(len(legal)))])
            if via_first_legal:
                if rng.random() < 0.5:
                    g = c.first_legal(job, o)
                assert c.legal(job, g, o) and c.check(job, g, o) is None
            gpus = c.gang_gpus(job, g, o)
            if via_first_legal:
                assert gpus == _mask_gang_gpus(c, job, g, o)
            for gg in gpus:
                c.add(job, gg, c.options[o])
            placed.append((job, gpus, o))
    elif r < 0.9 and placed:
        job, gpus, o = placed.pop(int(rng.integers(len(placed))))
        for gg in gpus:
            c.remove(job, gg, c.options[o])
    else:
        g = int(rng.integers(c.n_gpus))
        if rng.random() < 0.5:
            c.set_ready(g, not c.ready[g])
        else:
            c.set_healthy(g, not c.healthy[g])


def _random_history(
    c: Cluster, rng: np.random.Generator, steps: int, ask: float, via_first_legal: bool = False
) -> Iterator[int]:
    """``steps`` random changes to ``c`` (:func:`_random_change`; a reset halfway), yielding
    the step after each change with probability ``ask`` (otherwise changes pile up: the index's
    lazy and rebuild paths)."""
    placed: list[tuple[JobSpec, list[int], int]] = []
    for step in range(steps):
        if step == steps // 2:
            c.reset()
            placed = []
        _random_change(c, rng, step, placed, via_first_legal=via_first_legal)
        if rng.random() < ask:
            yield step


@pytest.mark.parametrize("seed", range(12))
def test_fit_index_answers_as_the_masks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = Cluster(_fleet(rng), _SHARING[seed % len(_SHARING)])
    probes = [_job(rng, -1 - k) for k in range(40)]
    asked = fits = 0
    for step in _random_history(c, rng, 600, ask=0.7):
        for job in probes:
            want = c.placeable_scan(job)
            assert c.placeable_index(job) == want, (step, job)
            assert c.placeable(job) == want, (step, job)
            asked += 1
            fits += want
    c.check_invariants()
    assert asked and 0 < fits < asked  # both answers were exercised


def test_fit_index_at_the_memory_boundary() -> None:
    """A job whose memory fits a GPU's headroom to the last bit, and the next float up."""
    c = Cluster([NodeSpec("n", "T4", 8, 64.0, 256.0)], SharingConfig(modes=("time_sharing",)))
    assert c.placeable_index(cast(JobSpec, _Job(-1, 1.0, (), False, 1, 1.0)))  # (index built)
    for g in range(2, 8):
        c.set_ready(g, False)
    for mem in (0.1, 0.2, 5.9):  # three residents of four on GPUs 0 and 1
        for g in (0, 1):
            c.add(
                cast(JobSpec, _Job(10 * g + int(mem * 10), mem, (), False, 1, mem)), g, c.options[0]
            )
    used, cap = float(c.mem_decl[0]), 16.0 + 1e-9
    # the largest job memory that fits, where GPU 0's own value is the last value that fits it
    m = cap - used
    while used + m > cap:
        m = float(np.nextafter(m, 0))
    while used + float(np.nextafter(m, 99)) <= cap:
        m = float(np.nextafter(m, 99))
    assert float(np.nextafter(used, 99)) + m > cap  # ``used`` is the boundary for ``m``
    for mem in (float(np.nextafter(m, 0)), m, float(np.nextafter(m, 99)), 99.0):
        for n in (1, 2):
            job = cast(JobSpec, _Job(-1, mem, (), False, n, mem))
            assert c.placeable_index(job) == c.placeable_scan(job), (mem, n)
    assert c.placeable_index(cast(JobSpec, _Job(-1, m, (), False, 2, m)))


def test_fit_index_mig_residents() -> None:
    """MIG: a GPU with free slices but ``max_residents`` instances in use hosts no more."""
    c = Cluster(
        [NodeSpec("n", "A100-40GB", 8, 64.0, 256.0)],  # (8: changes are applied one by one)
        SharingConfig(modes=("mig",), mig_compute_slices=(1,), max_residents=3),
    )
    small = cast(JobSpec, _Job(-1, 4.0, (), False, 1, 4.0))
    assert c.placeable_index(small)  # (index built here)
    for g in range(1, 8):
        c.set_healthy(g, False)
    for jid in range(3):
        assert c.placeable_index(small) and c.placeable_scan(small)
        c.add(cast(JobSpec, _Job(jid, 4.0, (), False, 1, 4.0)), 0, c.options[0])
    assert not c.placeable_index(small) and not c.placeable_scan(small)
    c.remove(cast(JobSpec, _Job(1, 4.0, (), False, 1, 4.0)), 0, c.options[0])
    assert c.placeable_index(small) and c.placeable_scan(small)


def _front_ref(sigs: dict[tuple[object, ...], list[object]]) -> list[tuple[object, object]]:
    """``waiting.front`` as it was before its short-queue path (1ef7396): the reference."""
    out: list[tuple[object, object]] = []
    least: dict[tuple[object, ...], object] = {}
    items = sorted(sigs.items(), key=lambda kv: (kv[0][3], kv[0][0]))  # type: ignore[index]
    for sig, (_, spec) in items:
        group = (sig[1], sig[2])
        m = least.get(group)
        if m is None or sig[0] < m:  # type: ignore[operator]
            least[group] = sig[0]
            out.append((sig, spec))
    return out


def test_front_is_the_sorted_scan_s_for_every_queue_size() -> None:
    """``waiting.front`` (with its path for a queue of 0 or 1 signatures) equals the sorted
    scan's answer, objects and order, for random signature sets of 0 to 5 entries."""
    rng = np.random.default_rng(7)
    sizes = {0: 0, 1: 0, 2: 0}
    for _ in range(600):
        n = int(rng.integers(0, 6))
        sigs: dict[tuple[object, ...], list[object]] = {}
        for k in range(n):
            job = _job(rng, k)
            sigs[mask_signature(job)] = [int(rng.integers(1, 4)), job]
        got = front(sigs)  # type: ignore[arg-type]
        want = _front_ref(sigs)
        assert len(got) == len(want)
        assert all(g[0] == w[0] and g[1] is w[1] for g, w in zip(got, want, strict=True))
        sizes[min(len(sigs), 2)] += 1
    assert min(sizes.values()) > 50


def test_needs_decision_over_the_queue_asks_the_front_only() -> None:
    sc = load_scenario("pai-hetero")
    nodes = tuple(dataclasses.replace(g, count=max(1, g.count // 8)) for g in sc.cluster.nodes)
    sim = make_simulator(
        dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=nodes))
    )
    seen = {True: 0, False: 0, "pruned": 0}

    class Checked(SimObserver):
        """At every tick, start and finish: the memoised answer against a scan of the queue
        (a read: it only fills the answer's memos, which an observed episode may)."""

        def check(self, sim: Simulator) -> None:
            got = sim.needs_decision()
            if not sim.done:
                specs = {mask_signature(s): s for s in sim.queued_jobs()}
                want = any(sim.cluster.placeable_scan(spec) for spec in specs.values())
                assert got == want
                seen[got] += 1
                seen["pruned"] += len(sim.waiting.front()) < len(specs)

        def on_tick(self, sim: Simulator, changed: bool) -> None:
            self.check(sim)

        def on_start(self, sim: Simulator, job_id: int, gpus: list[int], option: int) -> None:
            self.check(sim)

        def on_finish(self, sim: Simulator, job_id: int, status: Status) -> None:
            self.check(sim)

    sim.add_observer(Checked())
    run_episode(SjfPredicted(), sim, 0)
    assert seen[True] > 50 and seen[False] > 50 and seen["pruned"] > 50


def _mask_first(c: Cluster, job: JobSpec, o: int) -> int:
    col = c.placement_mask(job)[:, o]
    g = int(col.argmax())
    return g if col[g] else -1


def _mask_gang_gpus(c: Cluster, job: JobSpec, g: int, o: int) -> list[int]:
    single = c.masks._single_cached(job)[o]
    return [int(i) for i in np.flatnonzero(single[g:])[: job.num_gpus] + g]


@pytest.mark.parametrize("seed", range(8))
def test_first_legal_in_is_the_first_option_with_a_legal_gpu(seed: int) -> None:
    """``Cluster.first_legal_in(job, options)`` (one call over an option order: ``first_fit``'s
    question) is the first of ``options``, in their order, whose mask column has a legal GPU,
    with that column's ``argmax`` (``(-1, -1)``: none), for random option orders (subsets,
    repeats, MIG options among them), jobs, fleets and histories."""
    rng = np.random.default_rng(300 + seed)
    c = Cluster(_fleet(rng), _SHARING[seed % len(_SHARING)])
    probes = [_job(rng, -1 - k) for k in range(12)]
    n_opt = len(c.options)
    hits = misses = 0
    for step in _random_history(c, rng, 300, ask=0.5, via_first_legal=True):
        for job in probes:
            for _ in range(3):
                k = int(rng.integers(0, n_opt + 2))
                opts = tuple(int(o) for o in rng.integers(0, n_opt, size=k))
                want = next(((g, o) for o in opts if (g := _mask_first(c, job, o)) >= 0), (-1, -1))
                assert c.first_legal_in(job, opts) == want, (step, job, opts)
                hits += want[0] >= 0
                misses += want[0] < 0
    assert hits > 100 and misses > 100  # both answers were asked


@pytest.mark.parametrize("seed", range(12))
def test_first_legal_gpu_answers_as_the_masks(seed: int) -> None:
    """``Cluster.first_legal`` (the lowest legal GPU: the mask column's ``argmax``),
    ``Cluster.legal`` (one mask entry), ``Cluster.gang_gpus`` and ``Cluster.single_row`` (one
    option's single-GPU row) answer from the fit index's segment trees and rows where it can:
    every answer equals the mask's, under every option (MIG ones from the masks), for random
    jobs on random fleets (GPU types interleaved over the GPU order) and histories."""
    rng = np.random.default_rng(100 + seed)
    c = Cluster(_fleet(rng), _SHARING[seed % len(_SHARING)])
    probes = [_job(rng, -1 - k) for k in range(16)]
    found = asked = 0
    for step in _random_history(c, rng, 400, ask=0.6, via_first_legal=True):
        for job in probes:
            mask = c.placement_mask(job)
            for o in range(len(c.options)):
                want = _mask_first(c, job, o)
                assert c.first_legal(job, o) == want, (step, job, o)
                np.testing.assert_array_equal(
                    c.single_row(job, o), c.masks._single_cached(job)[o], err_msg=str((step, o))
                )
                for g in {int(rng.integers(c.n_gpus)), max(want, 0), c.n_gpus - 1}:
                    assert c.legal(job, g, o) == bool(mask[g, o]), (step, job, g, o)
                    if job.num_gpus > 1:
                        assert c.gang_gpus(job, g, o) == _mask_gang_gpus(c, job, g, o)
                asked += 1
                found += want >= 0
    c.check_invariants()
    assert asked and 0 < found < asked  # both answers were exercised


def test_segment_tree_first_leaf() -> None:
    """The tree's "first leaf >= lo with value <= x" against a scan, on random values."""
    from gpu_sharing_env.fleet.cluster import _tree_build, _tree_first, _tree_set

    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 5, 8, 13, 64, 100):
        vals = [float(v) if v < 8 else float("inf") for v in rng.integers(0, 10, n)]
        tree = _tree_build(vals)
        for _ in range(200):
            if rng.random() < 0.3:
                p = int(rng.integers(n))
                vals[p] = float(rng.integers(0, 10)) if rng.random() < 0.8 else float("inf")
                _tree_set(tree, p, vals[p])
            lo, x = int(rng.integers(0, n + 2)), float(rng.integers(-1, 10))
            want = next((i for i in range(lo, n) if vals[i] <= x), -1)
            assert _tree_first(tree, lo, x) == want, (n, lo, x, vals)


@pytest.mark.parametrize("mode", ["as imported", "interpreted"])
def test_bisect_right_is_the_standard_library_s(mode: str) -> None:
    """``_bisect_right`` (the fit index's sorted value lists: compiled, C doubles and no
    Python call) gives ``bisect.bisect_right``'s position on random sorted float lists with
    runs of equal values, infinities and values between the list's, and ``sync``'s removal
    and insertion keep a list equal to the one ``bisect``/``insort`` keep."""
    import bisect

    from gpu_sharing_env.fleet import cluster as cluster_mod
    from tests.helpers import interpreted

    mod = cluster_mod if mode == "as imported" else interpreted(cluster_mod)
    rng = np.random.default_rng(51)
    asked = 0
    for n in (0, 1, 2, 3, 7, 16, 100, 1000):
        pool = [0.0, 0.5, 1e-9, 16.0, 79.999999, 80.0, float("inf"), -0.0, 3.25, 40.0]
        lst = sorted(float(pool[k]) for k in rng.integers(0, len(pool), n))
        mine = list(lst)
        for _ in range(300):
            x = float(pool[rng.integers(len(pool))]) if rng.random() < 0.7 else float(rng.normal())
            assert mod._bisect_right(mine, x) == bisect.bisect_right(lst, x), (n, x)
            asked += 1
            if lst and rng.random() < 0.5:  # ``sync``'s removal of one value
                old = lst[int(rng.integers(len(lst)))]
                del lst[bisect.bisect_right(lst, old) - 1]
                del mine[mod._bisect_right(mine, old) - 1]
            else:  # and its insertion
                bisect.insort(lst, x)
                mine.insert(mod._bisect_right(mine, x), x)
            assert mine == lst and [v.hex() for v in mine] == [v.hex() for v in lst]
    assert asked == 8 * 300


def _index_entries(ix: object) -> tuple[object, ...]:
    """A fit index's entries, floats as their bits: per row and GPU its value, the sorted
    values of the rows it keeps, the MIG counts and bits."""
    cur = [[v.hex() for v in row] for row in ix.cur]  # type: ignore[attr-defined]
    vals = [
        [[v.hex() for v in lst] for lst in per_type] if keep else None
        for per_type, keep in zip(ix.vals, ix.keep_vals, strict=True)  # type: ignore[attr-defined]
    ]
    return cur, vals, ix.mig, list(ix.cur_mig)  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(12))
def test_sync_leaves_the_entries_a_rebuild_makes(seed: int) -> None:
    """``_FitIndex.sync`` (each row's value computed in one loop over the rows, compiled as C
    doubles, where it built a list of the values per GPU) leaves every entry what a fresh
    index built from the cluster's state holds (``_build``, vectorised), bit for bit, after
    every burst of random changes; with the MPS limits, MIG and the residency limits of
    ``_SHARING``."""
    from gpu_sharing_env.fleet.cluster import _FitIndex

    rng = np.random.default_rng(100 + seed)
    c = Cluster(_fleet(rng), _SHARING[seed % len(_SHARING)])
    probe = _job(rng, -1, gangs=False)
    synced = 0
    for _step in _random_history(c, rng, 400, ask=0.5):
        for online in (False, True):
            ix = c.masks._index(online)
            assert not ix.dirty
            assert _index_entries(ix) == _index_entries(_FitIndex(c.masks, online))
            synced += 1
        c.placeable(probe)
    assert synced > 100


@pytest.mark.parametrize("seed", range(6))
def test_add_and_remove_write_what_the_interpreted_cluster_writes(seed: int) -> None:
    """``Cluster.add`` and ``remove`` compiled (the residents, mode, declared fractions and
    the zeroed memory read and written through the typed views, the change notes a C call)
    leave the state arrays, bit for bit, and the masks' and watchers' change sets the
    interpreted source leaves, over the same random history."""
    from gpu_sharing_env.fleet import cluster as cluster_mod
    from tests.helpers import interpreted

    src = interpreted(cluster_mod)
    rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
    nodes = _fleet(np.random.default_rng(1000 + seed))
    sharing = _SHARING[seed % len(_SHARING)]
    a, b = Cluster(nodes, sharing), src.Cluster(nodes, sharing)
    wa, wb = a.watch(), b.watch()
    fields = ("n_res", "mode", "mem_decl", "mem_true", "frac_decl", "sm_used", "online_count")
    placed_a: list[tuple[JobSpec, list[int], int]] = []
    placed_b: list[tuple[JobSpec, list[int], int]] = []
    for step in range(300):
        before = [getattr(a, name).copy() for name in fields] + [a.ready.copy(), a.healthy.copy()]
        _random_change(a, rng_a, step, placed_a)
        _random_change(b, rng_b, step, placed_b)
        for name in fields:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (step, name)
        assert a.node_cpu_used.tobytes() == b.node_cpu_used.tobytes(), step
        after = [getattr(a, name) for name in fields] + [a.ready, a.healthy]
        changed = {g for x, y in zip(before, after, strict=True) for g in np.flatnonzero(x != y)}
        assert changed <= wa, step  # every GPU whose state changed is noted
        for ix in a.masks._fit_ix.values():
            assert changed <= ix.dirty, step
        assert wa == wb, step
        wa.clear()
        wb.clear()
        if step % 7 == 0:  # the fit indexes' change sets, then emptied by a question
            for online in (False, True):
                ia, ib = a.masks._fit_ix.get(online), b.masks._fit_ix.get(online)
                assert (ia is None) == (ib is None), step
                if ia is not None and ib is not None:
                    assert ia.dirty == ib.dirty, step
                assert a.masks._index(online).dirty == set()
                b.masks._index(online)
            probe = _job(rng_a, -1)
            _job(rng_b, -1)
            assert a.placeable(probe) == b.placeable(probe), step
    assert a.residents == b.residents and a.res_frac == b.res_frac


def test_the_fit_index_pxd_declares_its_slots() -> None:
    """``cluster.pxd``'s ``cdef class _FitIndex`` declares exactly the ``__slots__`` of
    ``cluster.py``'s ``_FitIndex``, each public (the tests read them; a copy carries them)."""
    import ast
    import re
    from pathlib import Path

    fleet = Path(__file__).resolve().parents[1] / "gpu_sharing_env" / "fleet"
    tree = ast.parse((fleet / "cluster.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_FitIndex")
    slots = next(
        ast.literal_eval(s.value)
        for s in node.body
        if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in s.targets)
    )
    pxd = (fleet / "cluster.pxd").read_text(encoding="utf-8")
    block = pxd.split("cdef class _FitIndex:", 1)[1].split("\ncdef ", 1)[0]
    declared = re.findall(r"^\s+cdef public \w+ (\w+)$", block, re.M)
    assert sorted(declared) == sorted(slots)


@pytest.mark.parametrize("seed", range(8))
def test_trees_hold_the_minima_a_rebuild_makes(seed: int) -> None:
    """The segment trees a fit index keeps up to date GPU by GPU (``_tree_set``: compiled, the
    lesser child's float stored, no new float per level) equal, float bits, the trees built
    afresh from the index's entries (``_tree_build``), after every burst of random changes."""
    from gpu_sharing_env.fleet.cluster import _tree_build

    rng = np.random.default_rng(500 + seed)
    c = Cluster(_fleet(rng), _SHARING[seed % len(_SHARING)])
    probes = [_job(rng, -1 - k) for k in range(6)]
    checked = 0
    for _step in _random_history(c, rng, 300, ask=0.5, via_first_legal=True):
        for job in probes:  # (questions that build and use the trees)
            for o in range(len(c.options)):
                c.first_legal(job, o)
        for ix in c.masks._fit_ix.values():
            for row, trees in enumerate(ix.trees):
                if trees is None:
                    continue
                cur = ix.cur[row]
                fresh = [_tree_build([cur[g] for g in gl]) for gl in ix.gpus_of]
                got = ix._trees(row)
                assert [[v.hex() for v in t] for t in got] == [[v.hex() for v in t] for t in fresh]
                checked += 1
    assert checked > 50


@pytest.mark.parametrize("seed", range(4))
def test_a_copied_cluster_keeps_its_own_index_and_views(seed: int) -> None:
    """A deep copy (``Simulator.copy``'s way) and a pickle of a cluster mid-history carry the
    fit indexes (an extension type compiled) and build typed views of their own arrays and
    lists (``_views_of``): the same random changes on the original and the copy leave the
    same state and index entries, and the copy's changes leave the original's untouched."""
    import copy
    import pickle

    from gpu_sharing_env.fleet.cluster import _FitIndex

    rng = np.random.default_rng(700 + seed)
    c = Cluster(_fleet(rng), _SHARING[seed % len(_SHARING)])
    placed: list[tuple[JobSpec, list[int], int]] = []
    for step in range(60):
        _random_change(c, rng, step, placed)
        c.placeable(_job(rng, -1))
    for b in (copy.deepcopy(c), pickle.loads(pickle.dumps(c))):
        before = (c.n_res.copy(), [list(r) for r in c.residents])
        state = rng.bit_generator.state
        rb = np.random.default_rng()
        rb.bit_generator.state = state
        placed_b = list(placed)
        for step in range(60, 120):
            _random_change(b, rb, step, placed_b)
        # the original is untouched by the copy's changes
        assert c.n_res.tobytes() == before[0].tobytes() and c.residents == before[1]
        # the same changes on the original leave the same state and entries
        ra = np.random.default_rng()
        ra.bit_generator.state = state
        a = copy.deepcopy(c)
        placed_a = list(placed)
        for step in range(60, 120):
            _random_change(a, ra, step, placed_a)
        assert a.residents == b.residents and a.n_res.tobytes() == b.n_res.tobytes()
        for online in (False, True):
            ia, ib = a.masks._index(online), b.masks._index(online)
            assert _index_entries(ia) == _index_entries(ib)
            assert _index_entries(ib) == _index_entries(_FitIndex(b.masks, online))
