"""The simulator's typed components (issue 51): compiled, ``FleetUsage``, ``OnlineLoad`` and
``Rates`` are extension types declared by a ``.pxd`` beside their ``.py`` (the same source runs
interpreted), and the cluster's single-GPU mask is one typed loop instead of numpy passes.

Checked here: each ``.pxd`` declares exactly the ``__slots__`` of its class; a copy of a
simulator (``Simulator.copy``, a deep copy through the extension types' pickling) plays on as
the original does; the compiled mask loop and the source's numpy passes give the same
booleans on the states of random episodes. ``tests/test_compiled.py`` compares whole episodes
and rollouts in both modes, in two processes.
"""

from __future__ import annotations

import ast
import copy
import pickle
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.fleet import cluster as cluster_mod
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from tests.helpers import interpreted

SIM = Path(__file__).resolve().parents[1] / "gpu_sharing_env" / "sim"

#: (module, class) of the components typed by a ``.pxd`` beside their module.
TYPED = (
    ("usage", "FleetUsage"),
    ("ticks", "OnlineLoad"),
    ("rates", "Rates"),
    ("legality", "Legality"),
    ("lifecycle", "Lifecycle"),
    ("accumulator", "Accumulator"),
    ("jobs", "JobTable"),
    ("waiting", "Queue"),
    ("speed", "SpeedMemo"),
    ("engine", "Simulator"),
    ("failures", "Faults"),
)


@pytest.mark.parametrize(("module", "cls"), TYPED)
def test_pxd_declares_the_component_s_slots(module: str, cls: str) -> None:
    """The ``.pxd``'s ``cdef class`` declares exactly the ``__slots__`` of the ``.py``'s class,
    each public (tests and ``Simulator.copy`` read them), a Python float field as a double."""
    tree = ast.parse((SIM / f"{module}.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    slots = next(
        ast.literal_eval(s.value)
        for s in node.body
        if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in s.targets)
    )
    pxd = (SIM / f"{module}.pxd").read_text(encoding="utf-8")
    assert re.search(rf"^cdef class {cls}:$", pxd, re.M)
    declared = re.findall(r"^\s+cdef public \w+ (\w+)$", pxd, re.M)
    assert sorted(declared) == sorted(slots)


def _random_steps(env: gym.Env, rng: np.random.Generator, n: int) -> None:
    _, info = env.reset(seed=int(rng.integers(1000)))
    for _ in range(n):
        legal = np.flatnonzero(info["action_mask"])
        _, _, term, trunc, info = env.step(int(legal[rng.integers(legal.size)]))
        if term or trunc:
            _, info = env.reset(seed=int(rng.integers(1000)))


def test_a_copy_plays_on_as_the_original() -> None:
    """``Simulator.copy`` (a deep copy through the typed components) and the original, given
    the same decisions, end with the same metrics; the copy's components are its own."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(3)
    rng = np.random.default_rng(0)
    for _ in range(30):
        if sim.done:
            break
        win = sim.window_jobs()
        jid = win[0].job_id
        legal = np.argwhere(sim.mask(jid))
        g, o = legal[rng.integers(len(legal))]
        sim.apply(Decision(jid, int(g), int(o)))
        sim.advance()
    twin = sim.copy()
    assert twin.load._usage is twin.usage and twin.rates._usage is twin.usage
    assert twin.load._sim is twin and twin.load is not sim.load
    for s in (sim, twin):
        while not s.done:
            win = s.window_jobs()
            if win and s.placeable(win[0].job_id):
                legal = np.argwhere(s.mask(win[0].job_id))
                s.apply(Decision(win[0].job_id, int(legal[0][0]), int(legal[0][1])))
            s.advance()
    a, b = sim.metrics(), twin.metrics()
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def test_a_typed_component_pickles() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    usage = pickle.loads(pickle.dumps(sim.usage))
    assert type(usage) is type(sim.usage)
    assert usage.sums == sim.usage.sums and usage.timeseries == sim.usage.timeseries


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_the_job_table_and_the_queue_copy_their_state(how: str) -> None:
    """A pickle or a deep copy of the job table and of the queue mid-episode holds their
    state (the counters, the arrivals' place, the entries, the log, the signatures' counts);
    the table's views' cache starts empty (its ``__reduce__``, as its ``__getstate__`` had
    it: cached views read the original's arrays)."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(1)
    while len(sim.queue) < 3 and not sim.done:
        sim.advance()
    table, queue = sim.table, sim.waiting
    table.view_cache["x"] = 1
    copied = pickle.loads(pickle.dumps((table, queue))) if how == "pickle" else None
    t2, q2 = copied if copied is not None else copy.deepcopy((table, queue))
    assert type(t2) is type(table) and type(q2) is type(queue)
    for name in ("in_system", "next_arrival", "offline_left", "offline_total", "status_version"):
        assert getattr(t2, name) == getattr(table, name), name
    assert sorted(t2.jobs) == sorted(table.jobs) and t2.view_cache == {}
    assert [s.job_id for s in t2.arrivals] == [s.job_id for s in table.arrivals]
    assert q2.entries == queue.entries and q2.log == queue.log and len(q2.entries) >= 3
    assert (q2.version, q2.window, q2.scope_n) == (queue.version, queue.window, queue.scope_n)
    assert q2.signatures() == queue.signatures()


@pytest.mark.skipif(cluster_mod.__file__.endswith(".py"), reason="cluster runs interpreted here")
@pytest.mark.parametrize("scenario", ["default", "mig-a100", "muxflow-t4", "pai-hetero"])
def test_mask_loop_compiled_and_numpy_passes_agree(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the cluster states of random episodes, the compiled ``_single_mask`` (its typed loop)
    and the source's (numpy passes, the same method run on the same object) give the same
    booleans for every kind of job: online or not, gangs, memory at and past a GPU's."""
    src = interpreted(cluster_mod)
    assert not src.cython.compiled
    # the loop on every fleet here (compiled, it runs below ``_MASK_LOOP_GPUS`` GPUs only)
    monkeypatch.setattr(cluster_mod, "_MASK_LOOP_GPUS", 1 << 30)
    env = gym.make("GpuSharing-v1", scenario=load_scenario(scenario))
    rng = np.random.default_rng(1)
    c = None
    for _round in range(12):
        _random_steps(env, rng, int(rng.integers(1, 25)))
        sim: Any = env.unwrapped.sim  # type: ignore[attr-defined]
        c = sim.cluster
        caps = sorted(set(c.mem_cap.tolist()))
        types = sorted(set(c.type_name_of))
        specs = [st.spec for st in sim.jobs.values()]
        for _ in range(40):
            spec = specs[int(rng.integers(len(specs)))]
            mem = float(rng.choice([1.0, 7.5, *caps, caps[-1] + 1.0, float(rng.uniform(0, 90))]))
            kw: dict[str, Any] = {"mem_gb": mem}
            if not spec.online:
                kw["num_gpus"] = n = int(rng.choice([1, 1, 2, 4]))
                if n > 1:
                    kw["gpu_frac"] = 1.0
                kw["gpu_types"] = tuple(
                    rng.choice(types, size=int(rng.integers(0, 2)), replace=False)
                )
            job = replace(spec, **kw)
            # some GPUs unhealthy (SysMonitor) for a while: offline jobs avoid them
            healthy = c.healthy.tolist()
            sick = rng.random(c.n_gpus) < (0.3 if rng.random() < 0.5 else 0.0)
            for g in np.flatnonzero(sick).tolist():
                c.set_healthy(g, False)
            a = cluster_mod.Masks._single_mask(c.masks, job)
            b = src.Masks._single_mask(c.masks, job)
            for g in np.flatnonzero(sick).tolist():
                c.set_healthy(g, healthy[g])
            assert a.dtype == b.dtype == bool and a.shape == b.shape
            assert np.array_equal(a, b), (scenario, job)
    assert c is not None


def test_fragmentation_loop_gives_numpy_s_sum() -> None:
    """``usage.frag_sum`` (the compiled fragmentation sample's loop, run here as it is loaded)
    gives numpy's float where fewer than 8 GPUs count, and None (numpy sums) from 8 on."""
    from gpu_sharing_env.sim import usage

    rng = np.random.default_rng(5)
    seen = {False: 0, True: 0}
    for _ in range(3000):
        n = int(rng.integers(1, 40))
        cap = rng.choice([16.0, 24.0, 32.0, 40.0, 80.0, 10 ** rng.uniform(-1, 3)], size=n)
        decl = cap * rng.choice([0.0, 1.0, rng.uniform(0, 1)], size=n) * rng.uniform(0, 1, n)
        n_res = rng.integers(0, 3, size=n).astype(np.int64)
        need = float(rng.choice([0.0, 1.0, 7.5, 20.0, 1e9, rng.uniform(0, 80)]))
        free = cap - decl
        part = (n_res > 0) & (free > 1e-9) & (free < need)
        want = float((free[part] / cap[part]).sum())
        got = usage.frag_sum(cap.tolist(), decl, n_res, need)
        seen[got is None] += 1
        if got is None:
            assert int(part.sum()) >= 8
        else:
            assert int(part.sum()) < 8 and got.hex() == want.hex()
    assert min(seen.values()) > 100  # both cases met


def test_a_module_running_from_source_takes_its_cimport_peers_with_it() -> None:
    """A compiled module cannot use an extension type its peer, running from source (edited
    since the build, or not built), does not define, and a module running from source cannot
    import its peer's C-only functions from that peer's extension: ``_modes`` runs the modules
    a ``cimport`` joins to it, either way, from source too, transitively (here ``lifecycle``
    cimports ``legality``, ``rates``, ``ticks`` and ``fleet.cluster``'s ``_cluster_add``;
    ``usage`` cimports ``accumulator``); modules no ``cimport`` reaches stay compiled."""
    from gpu_sharing_env import _modes

    sim = "gpu_sharing_env.sim."
    assert f"{sim}lifecycle" in _modes._with_dependents([f"{sim}legality"])
    deps = set(_modes._with_dependents([f"{sim}usage"]))
    assert {f"{sim}usage", f"{sim}ticks", f"{sim}rates", f"{sim}lifecycle"} <= deps
    assert f"{sim}accumulator" in deps  # (usage cimports it: the other way)
    life = set(_modes._with_dependents([f"{sim}lifecycle"]))
    assert {f"{sim}legality", "gpu_sharing_env.fleet.cluster"} <= life
    assert "gpu_sharing_env.workload.predictor" in life  # (lifecycle cimports the predictor)
    assert "gpu_sharing_env.workload.cart" not in life  # (no cimport joins them)
    assert _modes._cimported(f"{sim}lifecycle") >= {f"{sim}legality", f"{sim}rates"}


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_set_row_moves_the_sums_as_the_interpreted_usage_does(how: str) -> None:
    """``FleetUsage.set_row`` (compiled: seven C doubles, the old row read as C doubles,
    ``g_util`` written through a typed view) leaves the rows, the sums (float bits) and
    ``g_util`` (bytes) the interpreted source leaves, over random rows (zeros, tiny and huge
    values among them), ``set_gpu`` too; a copy writes its own ``g_util``, not the original's,
    and after a reset the view follows the new array."""
    from gpu_sharing_env.sim import usage as usage_mod
    from tests.helpers import interpreted

    src = interpreted(usage_mod)
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    a = usage_mod.FleetUsage(sim.cluster, sim.queue)
    b = src.FleetUsage(sim.cluster, sim.queue)
    a.reset({})
    b.reset({})
    rng = np.random.default_rng(5)
    n = sim.cluster.n_gpus
    picks = np.array([0.0, 1.0, 1e-300, 1e300, 0.1, 1.0 / 3.0])

    def row() -> tuple[float, ...]:
        if rng.random() < 0.3:
            return tuple(float(x) for x in rng.choice(picks, 7))
        return tuple(float(x) for x in rng.random(7) * 10.0 ** rng.integers(-3, 4))

    for step in range(600):
        g, new = int(rng.integers(n)), row()
        if step % 3:
            a.set_row(g, *new)
        else:
            a.set_gpu(g, new)
        b.set_gpu(g, new)
        assert [x.hex() for x in a.sums] == [x.hex() for x in b.sums], step
    assert a.rows() == b.rows() and a.g_util.tobytes() == b.g_util.tobytes()
    twin = pickle.loads(pickle.dumps(a)) if how == "pickle" else copy.deepcopy(a)
    kept = a.g_util.copy()
    twin.set_row(0, 0.5, 0.5, 0.5, 1.0, 0.5, 0.0, 0.0)
    assert a.g_util.tobytes() == kept.tobytes() and twin.g_util[0] == 0.5
    a.reset({})
    a.set_row(1, 0.25, 0.0, 0.0, 1.0, 0.25, 0.0, 0.0)
    assert a.g_util[1] == 0.25 and a.sums[0] == 0.25
