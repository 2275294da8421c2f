"""scripts/service_moves.py: moving running online services to the other GPU kind (issue 53)."""

from __future__ import annotations

import math

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_to_end, start_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from tests.helpers import load_script


def _sim(scenario: str) -> Simulator:
    return make_simulator(load_scenario(scenario))


def _run(policy: object, sim: Simulator, seed: int, until_s: float) -> tuple[Simulator, dict]:
    start_episode(policy, sim, seed)  # type: ignore[arg-type]
    return sim, run_to_end(policy, sim, until_s)  # type: ignore[arg-type]


def test_without_a_rule_the_wrapped_policy_runs_unchanged() -> None:
    mod = load_script("service_moves")
    _, own = _run(make_policy("speed_sjf_queue"), _sim("default-x2"), 5, 3 * 3600.0)
    sim = _sim("default-x2")
    wrapped = mod.moving(make_policy("speed_sjf_queue"), mod.Moves("none"), sim)
    assert wrapped.decision_scope == "window" and wrapped.window_order == "predicted"
    _, m = _run(wrapped, sim, 5, 3 * 3600.0)
    assert m == own


def test_at_moves_the_a100_services_to_t4s_once() -> None:
    """`ppo` puts services on the A100s of `default-x2` at t = 0 (the 2026-11-30 notes); at the
    first decision point after 30 min every one of them moves to a T4, and each serves nothing
    for ``sharing.migration_s`` from its move (the simulator's charge, physics v6)."""
    mod = load_script("service_moves")
    moves = mod.Moves("at:1800")
    sim = _sim("default-x2")
    _run(mod.moving(make_policy("ppo"), moves, sim), sim, 0, 2 * 3600.0)
    assert moves.log, "ppo placed no service on an A100"
    t = moves.log[0][0]
    assert t >= 1800.0 and all(m[0] == t and m[2:] == ("A100-40GB", "T4") for m in moves.log)
    assert 0.0 < moves.occupied_at <= 1.0
    for st in mod.running_services(sim):
        assert mod.kind_of(sim, st.gpus[0]) != "A100"
    moved = {m[1] for m in moves.log}
    for jid in moved:
        out = sim.table.jobs[jid].serving.outage_until
        assert out == t + sim.cfg.sharing.migration_s


def test_back_moves_a_slow_service_to_an_a100_at_most_max_back_times() -> None:
    mod = load_script("service_moves")
    sim, _ = _run(make_policy("speed_sjf_queue"), _sim("default-x2"), 0, 3600.0)
    off = [st for st in mod.running_services(sim) if mod.kind_of(sim, st.gpus[0]) != "A100"]
    assert off, "speed_sjf_queue placed every service on an A100"
    st = off[0]
    svc = st.spec.service
    st.serving.p99_ms = 1.6 * svc.slo_ms
    assert not mod.Moves("back:1.5", max_back=0).apply(sim)  # no move allowed
    moves = mod.Moves("back:1.5")
    st.serving.p99_ms = 1.4 * svc.slo_ms  # under the threshold: stays
    assert not moves.apply(sim)
    st.serving.p99_ms = 1.6 * svc.slo_ms  # over it: moves to an A100
    assert moves.apply(sim)
    assert mod.kind_of(sim, st.gpus[0]) == "A100" and moves.log[0][1] == st.spec.job_id
    assert st.serving.outage_until == sim.now + sim.cfg.sharing.migration_s
    assert moves.backs[st.spec.job_id] == 1


def test_right_sizing_leaves_the_a100s_and_keeps_one_service_per_gpu() -> None:
    mod = load_script("service_moves")
    sim, _ = _run(make_policy("ppo"), _sim("default-x2"), 0, 1800.0)
    jobs = sim.table.jobs
    on_a100 = [st for st in mod.running_services(sim) if mod.kind_of(sim, st.gpus[0]) == "A100"]
    assert on_a100
    for st in on_a100:
        d = mod.right_sized(sim, st)
        assert d is not None
        g, _ = d
        assert mod.kind_of(sim, g) != "A100"
        assert not any(jobs[r].spec.online for r in sim.cluster.residents[g])


def test_variants_parse_and_reject() -> None:
    mod = load_script("service_moves")
    m = mod.Moves("at:600,rs,light:0.5,back:2,hint")
    assert (m.at, m.rs, m.light, m.back, m.hint) == (600.0, True, 0.5, 2.0, True)
    n = mod.Moves("none")
    assert n.at == n.back == n.light == math.inf and not n.rs and not n.hint
    for bad in ("at", "rs:1", "later:5"):
        with pytest.raises(SystemExit):
            mod.Moves(bad)


class _Spy:
    """An agent that records whether the mask and view it is given are the state's now."""

    name, oracle, mechanisms, window_order, migration_slots = "spy", False, {}, "fifo", 0

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.inner = make_policy("ppo")
        self.stale = 0
        self.calls = 0

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)

    def act(self, view, obs, mask):  # type: ignore[no-untyped-def]
        sim = self.sim
        self.calls += 1
        fresh = view.codec.mask(sim)
        self.stale += int(view.version != sim.cluster.version or not (mask == fresh).all())
        return self.inner.act(view, obs, mask)


def test_the_agent_decides_on_the_state_after_the_moves() -> None:
    mod = load_script("service_moves")
    sim = _sim("default-x2")
    spy = _Spy(sim)
    moves = mod.Moves("at:1800")
    _run(mod.moving(spy, moves, sim), sim, 0, 2 * 3600.0)
    assert moves.log and spy.calls > 0 and spy.stale == 0
