"""The simulator's public seam: its settings are passed in (constructor, ``reset``, two
mid-episode setters), never assigned from outside ``gpu_sharing_env/sim/`` (issue 51)."""

from __future__ import annotations

import ast
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
#: Writes tests still make on a simulator: instance monkeypatches of a method with a spy
#: (``_tick``, ``apply``, ``needs_decision``), a workload swapped for a trace-like one, and a
#: planner test's tampering with the future arrivals. Shrink it; never grow it.
TEST_WRITES_ALLOWED = {
    ("tests/test_baselines_pai.py", "apply"),
    ("tests/test_engine_timelines.py", "_tick"),
    ("tests/test_fit_index.py", "needs_decision"),
    ("tests/test_planner.py", "_arrivals"),
    ("tests/test_planner.py", "workload"),
    ("tests/test_sim_seam.py", "decision_scope"),  # (that the write raises)
    ("tests/test_sim_seam.py", "window_order"),
    ("tests/test_workload_predictor.py", "workload"),
}


def _is_simulator(node: ast.expr) -> bool:
    """Whether an expression names a simulator by the project's convention: ``sim``,
    ``simulator`` (``sim_a``, ``sim2``), or any ``X.sim`` (``self.sim``, ``env.unwrapped.sim``)."""
    if isinstance(node, ast.Name):
        name = node.id.rstrip("0123456789")
        return name in ("sim", "simulator") or name.startswith(("sim_", "simulator_"))
    return isinstance(node, ast.Attribute) and node.attr == "sim"


def simulator_writes(source: str) -> list[tuple[int, str]]:
    """(line, attribute) of every assignment to an attribute of a simulator in ``source``:
    ``=``, augmented and annotated assignments (tuple targets included), ``del`` and
    ``setattr(sim, "x", ...)``."""
    found: list[tuple[int, str]] = []

    def target(t: ast.expr) -> None:
        if isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                target(e)
        elif isinstance(t, ast.Starred):
            target(t.value)
        elif isinstance(t, ast.Attribute) and _is_simulator(t.value):
            found.append((t.lineno, t.attr))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.Delete):
            for t in node.targets:
                target(t)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            target(node.target)
        elif (
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
    )
    assert simulator_writes(src) == [
        (1, "window_order"),
        (2, "thresholds"),
        (3, "mechanisms"),
        (4, "_noise_buf"),
        (4, "_noise_i"),
        (5, "n_events"),
        (7, "workload"),
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
