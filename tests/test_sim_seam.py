"""The simulator's public seam: its settings are passed in (constructor, ``reset``, two
mid-episode setters), never assigned from outside ``gpu_sharing_env/sim/`` (issue 51); inside
``sim/`` it is components that own their state: each declares it in ``__slots__`` (at most 20
names) and no other class assigns it. ``tests/test_components.py`` counts every class's
attributes and scans for writes to job records too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import build_nodes, build_workload, make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.faults import FaultCause
from gpu_sharing_env.sim.online import MonitorThresholds
from gpu_sharing_env.sim.state import Status

ROOT = Path(__file__).resolve().parents[1]
SIM_DIR = ROOT / "gpu_sharing_env" / "sim"
#: Where the project's Python lives (build outputs and the virtualenv are not scanned).
SCANNED = ("gpu_sharing_env", "gpu_sharing_gym", "agents", "baselines", "scripts", "tests")
#: Writes tests still make on a simulator: only this file's, checking that they raise. Never
#: grow it (a test watches an episode through a ``SimObserver`` and acts through public
#: methods; a different workload is a different ``Simulator``).
TEST_WRITES_ALLOWED = {
    ("tests/test_sim_seam.py", "decision_scope"),  # (that the write raises)
    ("tests/test_sim_seam.py", "window_order"),
}
#: The most attributes a class of ``sim/`` may declare (issue 51).
MAX_SLOTS = 20
#: The simulator and its components: each owns the state its ``__slots__`` declare.
COMPONENTS = (
    "engine.Simulator",
    "jobs.JobTable",
    "waiting.Queue",
    "legality.Legality",
    "speed.SpeedMemo",
    "rates.Rates",
    "usage.FleetUsage",
    "ticks.OnlineLoad",
    "monitor.Monitor",
    "lifecycle.Lifecycle",
    "failures.Faults",
)
#: Writes the name-based scan below takes for a component's and that are not: (file, class,
#: attribute).
NOT_COMPONENT_WRITES = {
    ("build.py", "ScenarioWorkload", "predictor"),  # a drawn job list's predictor
    ("build.py", "ScenarioJobs", "predictor"),  # its copy's predictor (``ScenarioJobs.fresh``)
}


def _is_simulator(node: ast.expr) -> bool:
    """Whether an expression names a simulator by the project's convention: ``sim``,
    ``simulator`` (``sim_a``, ``sim2``), or any ``X.sim`` (``self.sim``, ``env.unwrapped.sim``)."""
    if isinstance(node, ast.Name):
        name = node.id.rstrip("0123456789")
        return name in ("sim", "simulator") or name.startswith(("sim_", "simulator_"))
    return isinstance(node, ast.Attribute) and node.attr == "sim"


#: The simulator's attributes that are its components (``sim.rates``, ...): their state is
#: theirs, so ``sim.rates.x = ...`` is a write to the simulator too.
SIM_COMPONENTS = ("table", "waiting", "legality", "memo", "rates", "usage", "load", "lifecycle")
SIM_COMPONENTS += ("faults", "monitor")


def assigned_targets(node: ast.AST) -> Iterator[ast.expr]:
    """The single targets ``node`` assigns or deletes (``=``, augmented and annotated
    assignments, ``del``; tuples, lists and starred targets unpacked), none if it is no
    assignment."""
    if isinstance(node, ast.Assign | ast.Delete):
        todo = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        todo = [node.target]
    else:
        return
    while todo:
        t = todo.pop(0)
        if isinstance(t, ast.Tuple | ast.List):
            todo[:0] = t.elts
        elif isinstance(t, ast.Starred):
            todo.insert(0, t.value)
        else:
            yield t


def simulator_writes(source: str) -> list[tuple[int, str]]:
    """(line, attribute) of every assignment to an attribute of a simulator or of one of its
    components (``sim.rates.x``: ``"rates.x"``) in ``source``: ``=``, augmented and annotated
    assignments (tuple targets included), ``del`` and ``setattr(sim, "x", ...)``."""
    found: list[tuple[int, str]] = []

    def target(t: ast.expr) -> None:
        if isinstance(t, ast.Attribute) and _is_simulator(t.value):
            found.append((t.lineno, t.attr))
        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute):
            # ``sim.<component>[.<component>].x``
            chain, node = [t.attr], t.value
            while isinstance(node, ast.Attribute) and node.attr in SIM_COMPONENTS:
                chain.append(node.attr)
                if _is_simulator(node.value):
                    found.append((t.lineno, ".".join(reversed(chain))))
                    break
                node = node.value

    for node in ast.walk(ast.parse(source)):
        for t in assigned_targets(node):
            target(t)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
            and _is_simulator(node.args[0])
        ):
            name = node.args[1] if len(node.args) > 1 else None
            attr = name.value if isinstance(name, ast.Constant) else "?"
            found.append((node.lineno, str(attr)))
    return found


def _project_files() -> list[Path]:
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py"))]
    return [p for p in files if SIM_DIR not in p.parents]


def test_the_scan_finds_every_form_of_write() -> None:
    src = (
        "sim.window_order = 'fifo'\n"
        "self.sim.thresholds = t\n"
        "env.unwrapped.sim.mechanisms = m\n"
        "sim._noise_buf, sim._noise_i = [], 0\n"
        "sim2.n_events += 1\n"
        "setattr(sim, 'decision_scope', 'queue')\n"
        "del simulator.workload\n"
        "policy.window_order = 'fifo'\n"  # a policy, not a simulator
        "sim.jobs[0].spec = s\n"  # a job's record, not the simulator's field
        "x = sim.window_order\n"
        "sim.rates.mechanisms = m\n"
        "env.sim.load.monitor.thresholds = t\n"
        "sim.cluster.version = 0\n"  # the cluster is not a component of sim/
    )
    assert simulator_writes(src) == [
        (1, "window_order"),
        (2, "thresholds"),
        (3, "mechanisms"),
        (4, "_noise_buf"),
        (4, "_noise_i"),
        (5, "n_events"),
        (7, "workload"),
        (11, "rates.mechanisms"),
        (12, "load.monitor.thresholds"),
        (6, "decision_scope"),
    ]


def test_no_code_outside_sim_assigns_a_simulator_field() -> None:
    files = _project_files()
    assert len(files) > 100  # (the scan does see the project)
    outside, in_tests = [], set()
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        for line, attr in simulator_writes(p.read_text(encoding="utf-8")):
            if rel.startswith("tests/"):
                in_tests.add((rel, attr))
            else:
                outside.append(f"{rel}:{line}: sim.{attr} = ...")
    assert outside == [], "pass settings to Simulator(...) or reset(...) instead"
    assert in_tests - TEST_WRITES_ALLOWED == set(), "a test writes a simulator field"
    assert TEST_WRITES_ALLOWED - in_tests == set(), "stale entries: remove them"


def test_settings_are_read_only() -> None:
    sim = make_simulator(load_scenario("default"))
    with pytest.raises(AttributeError):
        sim.window_order = "predicted"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        sim.decision_scope = "queue"  # type: ignore[misc]


def test_reset_settings_hold_for_later_episodes_and_none_keeps_them() -> None:
    cfg = load_scenario("default")
    sim = make_simulator(cfg)
    assert (sim.window_order, sim.decision_scope) == ("fifo", "window")
    mech = replace(cfg.mechanisms, protection=not cfg.mechanisms.protection)
    sim.reset(1, mechanisms=mech, decision_scope="queue", window_order="predicted")
    assert (sim.window_order, sim.decision_scope, sim.mechanisms) == ("predicted", "queue", mech)
    sim.reset(2)  # no keyword: the settings stay
    assert (sim.window_order, sim.decision_scope, sim.mechanisms) == ("predicted", "queue", mech)
    with pytest.raises(ValueError, match="decision_scope='all': must be 'window' or 'queue'"):
        sim.reset(3, decision_scope="all")


def test_reset_order_is_the_same_episode_as_setting_it_first() -> None:
    cfg = load_scenario("default")
    a, b = make_simulator(cfg), make_simulator(cfg)
    a.set_window_order("predicted")
    a.reset(93)
    b.reset(93, window_order="predicted")
    for _ in range(200):
        if a.done:
            break
        assert a.queue == b.queue and a.now == b.now
        a.advance()
        b.advance()
    assert a.queue == b.queue and len(a.queue) > a.window  # (a long queue, re-ordered)


def test_thresholds_are_a_constructor_argument() -> None:
    cfg = load_scenario("default")
    t = replace(MonitorThresholds(), xcuda_clock_min=0.25)
    sim = Simulator(cfg, build_nodes(cfg), build_workload(cfg), thresholds=t)
    assert sim.thresholds is t
    plain = Simulator(cfg, build_nodes(cfg), build_workload(cfg))
    assert plain.thresholds == MonitorThresholds() != t


def test_inject_fault_fails_a_running_job_only() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    queued = next(j for j, st in sim.jobs.items() if st.status is Status.FUTURE)
    with pytest.raises(ValueError, match=f"inject_fault: job {queued} is not running"):
        sim.inject_fault(queued, FaultCause.APP_ERROR)


# ---------------------------------------------------------------------- components inside sim/
def _component_classes() -> list[type]:
    import importlib

    out = []
    for name in COMPONENTS:
        mod, cls = name.split(".")
        out.append(getattr(importlib.import_module(f"gpu_sharing_env.sim.{mod}"), cls))
    return out


def test_components_declare_their_state_in_slots() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    parts = [getattr(sim, a) for a in type(sim).__slots__]  # (its components, and theirs)
    parts += [getattr(p, a) for p in parts for a in getattr(type(p), "__slots__", ())]
    classes = _component_classes()
    assert set(classes) <= {type(sim)} | {type(p) for p in parts}
    for cls in classes:
        slots = cls.__dict__.get("__slots__")
        assert slots is not None, f"{cls.__name__}: declare its state in __slots__"
        assert len(slots) <= MAX_SLOTS, f"{cls.__name__}: {len(slots)} attributes"
        assert all("__dict__" not in k.__dict__.get("__slots__", ()) for k in cls.__mro__)
    for obj in [sim, *parts]:
        if type(obj) in classes:
            assert not hasattr(obj, "__dict__"), type(obj).__name__  # nothing undeclared


def component_state_writes(source: str, owned: dict[str, set[str]]) -> list[tuple[int, str, str]]:
    """(line, class, attribute) of every assignment in ``source`` to an attribute named in
    ``owned`` (attribute -> the classes that declare it) of anything but ``self``, made outside
    the classes that declare it: one component writing another's state."""
    found: list[tuple[int, str, str]] = []

    def targets(node: ast.AST) -> list[ast.expr]:
        if isinstance(node, ast.Assign | ast.Delete):
            return list(node.targets)
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            return [node.target]
        return []

    def flat(t: ast.expr) -> list[ast.expr]:
        if isinstance(t, ast.Tuple | ast.List):
            return [x for e in t.elts for x in flat(e)]
        return [t.value] if isinstance(t, ast.Starred) else [t]

    for cls in ast.walk(ast.parse(source)):
        where = cls.name if isinstance(cls, ast.ClassDef) else "<module>"
        body = cls.body if isinstance(cls, ast.ClassDef | ast.Module) else []
        for stmt in body:
            if isinstance(stmt, ast.ClassDef) and where == "<module>":
                continue  # (walked as its own class)
            for node in ast.walk(stmt):
                for t in (x for tg in targets(node) for x in flat(tg)):
                    if not isinstance(t, ast.Attribute) or t.attr not in owned:
                        continue
                    if isinstance(t.value, ast.Name) and t.value.id == "self":
                        continue
                    if where not in owned[t.attr]:
                        found.append((t.lineno, where, t.attr))
    return sorted(found)


def _owned() -> dict[str, set[str]]:
    """Each component attribute -> the classes that declare it."""
    owned: dict[str, set[str]] = {}
    for cls in _component_classes():
        for a in cls.__slots__:
            owned.setdefault(a, set()).add(cls.__name__)
    return owned


def test_the_component_scan_finds_writes_from_outside() -> None:
    src = (
        "class Rates:\n"
        "    def f(self, sim):\n"
        "        self.sums = 1\n"  # (not Rates' own attribute, but on self: its own)
        "        sim.now = 2\n"
        "        self._usage.sums[0] += 1\n"  # a subscript: mutation, not an assignment
        "        usage.sums = []\n"
        "class Simulator:\n"
        "    def copy(self, clone):\n"
        "        clone.uid = 3\n"  # its own class's attribute, on another instance
        "x.timeseries, y.log = [], []\n"
    )
    owned = {"now": {"Simulator"}, "uid": {"Simulator"}, "sums": {"FleetUsage"}}
    owned |= {"timeseries": {"FleetUsage"}, "log": {"Queue"}}
    assert component_state_writes(src, owned) == [
        (4, "Rates", "now"),
        (6, "Rates", "sums"),
        (10, "<module>", "log"),
        (10, "<module>", "timeseries"),
    ]


def test_no_component_assigns_another_components_state() -> None:
    owned = _owned()
    assert {"now", "entries", "_sums", "jobs", "health", "mechanisms"} <= set(owned)
    bad = []
    for p in sorted(SIM_DIR.glob("*.py")):
        for line, where, attr in component_state_writes(p.read_text(encoding="utf-8"), owned):
            if (p.name, where, attr) in NOT_COMPONENT_WRITES:
                continue
            bad.append(f"{p.name}:{line}: {where} assigns {sorted(owned[attr])}.{attr}")
    assert bad == [], "call the owning component's method instead"
    # (records' fields are another matter: ``JobState`` names none of these attributes)
    from gpu_sharing_env.sim.accumulator import FIELDS as ACC_FIELDS
    from gpu_sharing_env.sim.state import JobLedger, JobState, ServingState

    record_fields = set(JobState.__slots__) | set(ServingState.__slots__)
    record_fields |= set(JobLedger.__slots__) | set(ACC_FIELDS)
    assert not record_fields & set(owned)


def test_a_copys_components_are_its_own() -> None:
    """``Simulator.copy`` wires the clone's components to the clone: none of them refers to
    the original simulator or to one of its components (only the pure memo is shared)."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    clone = sim.copy()
    comps = {a: getattr(sim, a) for a in type(sim).__slots__}
    comps = {a: c for a, c in comps.items() if type(c) in _component_classes()}
    comps["load.monitor"] = sim.load.monitor
    originals = {id(sim)} | {id(c) for a, c in comps.items() if a != "memo"}
    for name in comps:
        mine = clone
        for part in name.split("."):
            mine = getattr(mine, part)
        assert type(mine) is type(comps[name])
        if name == "memo":
            assert mine is sim.memo  # (pure memo tables of the same speed model)
            continue
        assert mine is not comps[name], name
        refs = {a: getattr(mine, a) for a in type(mine).__slots__ if hasattr(mine, a)}
        assert not [a for a, v in refs.items() if id(v) in originals], name
