"""The simulator's typed reads on the apply/advance path (issue 51; 2026-12-02 note
``docs/notes/2026-12-02-sim-typed-reads.md``).

Compiled, ``Simulator`` is an extension type (``sim/engine.pxd``: the clock a C double, the
event count a C integer, ``done`` a C flag) that the lifecycle, the rates and the online load
hold typed, and ``JobSpec``'s fields are read on that path as slots (``job.pxd``'s ``_take``
with the field's slot descriptor, ``_S_<FIELD>`` in ``sim/rates.py``, ``sim/lifecycle.py`` and
``fleet/cluster.py``). Checked here: each descriptor is its field's; a simulator's pickle, deep
copy and ``copy`` mid-episode hold every slot of it (a new ``uid``), the clock, the count and
the flag with their Python types, and play on as the original does. ``tests/test_golden.py``
and ``tests/test_compiled.py`` compare whole episodes with the recorded ones and across modes.
"""

from __future__ import annotations

import ast
import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env import COMPILED
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.fleet import cluster as cluster_mod
from gpu_sharing_env.sim import engine as engine_mod
from gpu_sharing_env.sim import failures as failures_mod
from gpu_sharing_env.sim import lifecycle as lifecycle_mod
from gpu_sharing_env.sim import rates as rates_mod
from gpu_sharing_env.sim import waiting as waiting_mod
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator

#: Python's flag of a class made by a ``class`` statement (an extension type has it clear).
_HEAPTYPE = 1 << 9


@pytest.mark.parametrize(
    "module", [rates_mod, lifecycle_mod, cluster_mod, engine_mod, failures_mod, waiting_mod]
)
def test_each_slot_descriptor_is_its_field_s(module: Any) -> None:
    """Each ``_S_<FIELD> = JobSpec.__dict__[...]`` of the module's source (compiled, C
    globals; ``_O_`` ``PlacementOption``'s, ``_D_`` ``Decision``'s) names ``<field>``;
    ``_slot_read`` (the interpreted ``_take``) with a ``JobSpec`` descriptor reads that field
    of real specs, with an option's or a decision's that field of one."""
    path = Path(module.__file__.split(".cpython")[0].removesuffix(".py") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owners = {"_S_": "JobSpec", "_O_": "PlacementOption", "_D_": "Decision"}
    found = {}
    for node in tree.body:
        name = getattr(node.targets[0], "id", "") if isinstance(node, ast.Assign) else ""
        if name[:3] in owners:
            sub = node.value  # type: ignore[union-attr]
            assert isinstance(sub, ast.Subscript)
            assert ast.unparse(sub.value) == owners[name[:3]] + ".__dict__"
            found[name] = ast.literal_eval(sub.slice)
    assert found
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    samples = {
        "_S_": [st.spec for st in sim.table.jobs.values()][:20],
        "_O_": list(sim.cluster.options),
        "_D_": [Decision(3, 1, 2, 4), Decision.suspend(5)],
    }
    for name, field in found.items():
        assert name[3:] == field.upper()
        cls = type(samples[name[:3]][0])
        for obj in samples[name[:3]]:
            assert cluster_mod._slot_read(obj, cls.__dict__[field]) == getattr(obj, field)


def test_the_simulator_is_typed_where_compiled() -> None:
    """Compiled, an extension type (its ``.pxd``); either way the clock reads as a float, the
    count as an int and the flag as a bool."""
    if "gpu_sharing_env.sim.engine" in COMPILED:
        assert not Simulator.__flags__ & _HEAPTYPE
    sim = make_simulator(load_scenario("default"))
    sim.reset(2)
    assert type(sim.now) is float and type(sim.n_events) is int and type(sim.done) is bool
    assert engine_mod._new_simulator(Simulator).__class__ is Simulator


def _play(sim: Simulator, rng: np.random.Generator, n: int) -> None:
    """``n`` decisions: a random legal placement of the window's first placeable job, else a
    migration of a running job where one is legal."""
    for _ in range(n):
        if sim.done:
            return
        for spec in sim.window_jobs():
            if sim.placeable(spec.job_id):
                legal = np.argwhere(sim.mask(spec.job_id))
                g, o = legal[rng.integers(len(legal))]
                sim.apply(Decision(spec.job_id, int(g), int(o)))
                break
        sim.advance()


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_copy_holds_every_slot_and_plays_on(how: str) -> None:
    """A copy mid-episode: every slot set, the scalars equal (their types too), the
    components its own, a new ``uid``; the two then play the same decisions to the same
    metrics and clock, bit for bit."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(4)
    _play(sim, np.random.default_rng(1), 25)
    assert not sim.done
    if how == "copy":
        twin = sim.copy()
    elif how == "deepcopy":
        twin = copy.deepcopy(sim)
    else:
        twin = pickle.loads(pickle.dumps(sim))
    assert type(twin) is type(sim) and twin.uid != sim.uid
    for k in Simulator.__slots__:
        a, b = getattr(sim, k), getattr(twin, k)
        if k in ("now", "n_events", "done", "window"):
            assert type(a) is type(b) and a == b, k
        elif k not in ("uid", "_observers", "cfg", "memo", "workload") or how == "pickle":
            assert b is not a, k
    assert twin.lifecycle._sim is twin and twin.rates._sim is twin and twin.load._sim is twin
    for s in (sim, twin):
        _play(s, np.random.default_rng(7), 60)
        while not s.done:
            s.advance()
    assert sim.now.hex() == twin.now.hex() and sim.n_events == twin.n_events
    a, b = sim.metrics(), twin.metrics()
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def test_a_fresh_event_heap_grows_past_its_room_as_heapq() -> None:
    """A new queue has room for 512 events (no growth in a ``default`` episode); past it, it
    grows and still pops in ``heapq``'s order."""
    from gpu_sharing_env.sim.events import EventQueue

    rng = np.random.default_rng(3)
    q, ref = EventQueue(), []
    for seq in range(2000):
        t, kind, subject = float(rng.integers(100)), int(rng.integers(7)), int(rng.integers(9))
        q.push(t, kind, subject, seq)
        ref.append((t, kind, seq, subject, seq))
    ref.sort()
    assert len(q) == 2000
    assert [q.pop_raw() for _ in range(2000)] == [(t, k, s, st) for t, k, _, s, st in ref]
