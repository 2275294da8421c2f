"""SysMonitor on device metrics in the simulator (issue 52): its states follow the GPU's
utilisation, the service's kernel speed (the SM clock) and memory, and its thresholds are
sweep parameters of the MuxFlow experiments that reach the simulator."""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import pytest

from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import DeviceMetrics, Health, MonitorThresholds
from gpu_sharing_env.sim.state import Status
from gpu_sharing_gym.fidelity import common
from gpu_sharing_gym.fidelity import muxflow as fmux
from tests.helpers import LinearSpeed, job, make_sim, nodes, option, service


class _Ticks(SimObserver):
    """GPU 0's SysMonitor state, healthy flag and device metrics at every load tick."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, bool, DeviceMetrics]] = []

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        st = sim.jobs[0]
        m = sim.load.monitor.metrics(0, st, st.frac[0], sim.usage.row(0))
        self.seen.append((int(sim.health[0]), bool(sim.cluster.healthy[0]), m))


def _alone(rps: float) -> _Ticks:
    sim = make_sim([service(0, 7200.0, rps=rps)], horizon_h=1.0, mechanisms={"protection": True})
    obs = _Ticks()
    sim.add_observer(obs)
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mps50")))
    while not sim.done:
        sim.advance()
    return obs


def test_busy_follows_gpu_utilisation() -> None:
    # LinearSpeed: 10 ms batches of 8. 560 req/s: duty 0.70 (>= 0.6) -> BUSY, the GPU closed to
    # new offline work; 240 req/s: duty 0.30 -> HEALTHY. The clock is 1 alone.
    for state, healthy, m in _alone(560.0).seen:
        assert (state, healthy) == (Health.BUSY, False)
        assert m.util >= 0.6 and m.clock == 1.0
    for state, healthy, m in _alone(240.0).seen:
        assert (state, healthy) == (Health.HEALTHY, True)
        assert m.util < 0.6 and m.clock == 1.0


def _with_offline(
    true_mem_gb: float, label: str = "mps50", thresholds: MonitorThresholds | None = None
) -> tuple[Simulator, _Ticks]:
    """A service and an offline job on GPU 0 (a second GPU idle), run to the end without
    placing the job again once evicted."""
    jobs = [service(0, 7200.0, rps=50.0), job(1, 1e6, mem_gb=4.0, true_mem_gb=true_mem_gb)]
    sim = make_sim(
        jobs,
        nodes(gpus=2),
        horizon_h=1.0,
        mechanisms={"protection": True},
        faults={"oom_delay_s": 3600.0},
    )
    if thresholds is not None:
        sim = Simulator(
            sim.cfg,
            nodes(gpus=2),
            lambda rng: list(jobs),
            speed=LinearSpeed(),
            thresholds=thresholds,
        )
    obs = _Ticks()
    sim.add_observer(obs)
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, label)))
    sim.apply(Decision(1, 0, option(sim, label)))
    while not sim.done:
        sim.advance()
    return sim, obs


def test_memory_used_up_evicts_offline_work() -> None:
    # 4 GB service + an offline job whose true peak is 13 GB on a 16 GB V100: memory 1.06 of
    # capacity -> UNHEALTHY at the first tick, the offline job evicted before its peak (OOM).
    sim, obs = _with_offline(13.0)
    assert sim.jobs[1].ledger.evictions == 1 and sim.jobs[1].status is Status.QUEUED
    state, healthy, m = obs.seen[0]  # (the metrics as the tick left them: after the eviction)
    assert (state, healthy) == (Health.UNHEALTHY, False)
    assert m.mem == pytest.approx(4.0 / 16.0)
    sim, obs = _with_offline(4.0)  # the same pair within memory: it stays
    assert sim.jobs[1].ledger.evictions == 0
    assert all(state == Health.HEALTHY for state, _, _ in obs.seen)


def test_a_low_clock_evicts_and_the_gpu_recovers_with_it() -> None:
    # Time-slicing halves the service's kernel speed (clock 0.5 < 1/1.5): UNHEALTHY, evicted;
    # at the next tick the service is alone again (clock 1): HEALTHY.
    sim, obs = _with_offline(4.0, label="ts")
    assert sim.jobs[1].ledger.evictions == 1
    (s0, h0, _), (s1, h1, m1) = obs.seen[:2]
    assert (s0, h0) == (Health.UNHEALTHY, False)
    assert (s1, h1) == (Health.HEALTHY, True) and m1.clock == 1.0
    # the clock decided it: with both clock thresholds below time-slicing's 0.5 the same pair
    # stays, HEALTHY at every tick (memory 8 of 16 GB; the GPU's utilisation under BUSY's 0.6)
    low = MonitorThresholds(sysmon_clock_throttle=0.45, sysmon_clock_evict=0.4)
    sim, obs = _with_offline(4.0, label="ts", thresholds=low)
    assert sim.jobs[1].ledger.evictions == 0
    assert [state for state, _, _ in obs.seen] == [Health.HEALTHY] * len(obs.seen)
    assert all(m.clock == pytest.approx(0.5) for _, _, m in obs.seen)


def test_sysmon_parameters_are_registered_for_the_muxflow_experiments() -> None:
    names = {p.name for p in fmux.SYSMON_PARAMS}
    monitor = {f.name for f in fields(MonitorThresholds)}
    assert names <= monitor
    assert names == {n for n in monitor if n.startswith("sysmon_")} - {"sysmon_throttle"}
    for exp in ("muxflow-online", "muxflow-offline", "muxflow-ablation"):
        assert names <= set(common.params_for(exp))
    assert not names & set(common.params_for("pai-sjf"))


@pytest.mark.parametrize("name", sorted(p.name for p in fmux.SYSMON_PARAMS))
def test_a_sysmon_sweep_value_reaches_the_simulator(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[MonitorThresholds] = []

    def run(policy: Any, sim: Simulator, seed: int) -> dict[str, float]:
        seen.append(sim.thresholds)
        return {}

    monkeypatch.setattr(common, "run_episode", run)
    monkeypatch.setattr(common, "EpisodeRecorder", lambda sim: SimpleNamespace(extras=dict))
    cfg = common.scenario("muxflow")
    with common.run_settings({name: 0.4242}):
        common.episode(None, cfg, 0)  # type: ignore[arg-type]
    common.episode(None, cfg, 0)  # type: ignore[arg-type]
    swept, plain = seen
    assert getattr(swept, name) == 0.4242
    assert plain == MonitorThresholds()
    assert {f.name: getattr(swept, f.name) for f in fields(swept) if f.name != name} == {
        f.name: getattr(plain, f.name) for f in fields(plain) if f.name != name
    }
