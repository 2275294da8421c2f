"""Online services: the latency model, SLO accounting and MuxFlow's SysMonitor protection."""

from __future__ import annotations

import math

import pytest

from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.online import (
    DeviceMetrics,
    Health,
    MonitorThresholds,
    kernel_speed,
    latency,
    next_health,
)
from gpu_sharing_env.sim.state import Status
from tests.helpers import job, make_sim, nodes, option, service


def test_latency_hand_computed():
    # 10 ms batches of 8, 400 req/s → rho = 400 * 0.010 / 8 = 0.5; m = 10 / (2 * 0.5) = 10 ms
    s = latency(10.0, 400.0, 8, slo_ms=30.0)
    assert s.rho == pytest.approx(0.5)
    assert s.mean_ms == pytest.approx(10 + 0.5 * 10)
    assert s.p99_ms == pytest.approx(10 + 10 * math.log(50))
    assert s.attainment == pytest.approx(1 - 0.5 * math.exp(-20 / 10))


def test_unstable_queue_misses_everything():
    s = latency(10.0, 1000.0, 8, slo_ms=30.0)
    assert s.attainment == 0.0 and s.p99_ms == 300.0


def _m(util: float = 0.3, sm: float = 0.3, clock: float = 1.0, mem: float = 0.4) -> DeviceMetrics:
    return DeviceMetrics(util, sm, clock, mem)


def test_monitor_state_machine_on_device_metrics():
    # SysMonitor's transitions on GPU utilisation, SM activity, SM clock (kernel speed), memory
    th = MonitorThresholds()
    h = next_health(Health.HEALTHY, _m(), th)
    assert h is Health.HEALTHY
    assert next_health(h, _m(util=0.6), th) is Health.BUSY  # no room: no new offline work
    assert next_health(h, _m(sm=0.65), th) is Health.BUSY
    assert next_health(Health.BUSY, _m(util=0.59, sm=0.59), th) is Health.HEALTHY
    assert next_health(Health.BUSY, _m(clock=0.8), th) is Health.OVERLOADED  # < 1/1.2
    assert next_health(Health.HEALTHY, _m(clock=0.84), th) is Health.HEALTHY
    assert next_health(Health.OVERLOADED, _m(clock=0.6), th) is Health.UNHEALTHY  # < 1/1.5
    assert next_health(Health.HEALTHY, _m(mem=1.0), th) is Health.UNHEALTHY  # memory used up
    assert next_health(Health.HEALTHY, _m(mem=0.99, util=0.9), th) is Health.BUSY
    # hysteresis: out of OVERLOADED / UNHEALTHY only once the clock is back at 1/1.05
    assert next_health(Health.UNHEALTHY, _m(clock=0.9), th) is Health.BUSY
    assert next_health(Health.OVERLOADED, _m(clock=0.95), th) is Health.BUSY
    assert next_health(Health.OVERLOADED, _m(clock=0.96), th) is Health.HEALTHY
    assert next_health(Health.BUSY, _m(clock=0.9), th) is Health.HEALTHY  # BUSY is no latch


def test_monitor_thresholds_are_the_documented_central_values():
    th = MonitorThresholds()
    assert th.sysmon_busy == 0.6  # MuxFlow Sec. 2 (99 % of online GPUs below 60 %)
    assert th.sysmon_clock_throttle == pytest.approx(1 / 1.2)  # "less than 20 %", Sec. 6.2
    assert th.sysmon_clock_evict == pytest.approx(1 / 1.5)  # time-sharing's "up to 50 %"
    assert th.sysmon_mem_evict == 1.0


def test_kernel_speed_is_one_alone_and_falls_with_co_runners():
    assert kernel_speed(10.0, 0.75, 0.75, 0.0) == 1.0
    assert kernel_speed(10.0, 1.0, 0.5, 0.0) == pytest.approx(0.5)
    assert kernel_speed(10.0, 1.0, 1.0, 10.0) == pytest.approx(0.5)  # a time slice's wait


def test_queued_service_misses_its_requests():
    sim = make_sim([service(0, 3600.0)], horizon_h=1.0)
    sim.reset(0)
    while not sim.done:
        sim.advance()  # never placed
    assert sim.metrics()["slo_attainment"] == 0.0


def test_service_alone_meets_slo_and_offline_beside_it_slows_it():
    # LinearSpeed: batch 10 ms alone; 50 req/s x 10 ms / 8 → rho 0.0625: SLO 100 ms met
    sim = make_sim([service(0, 3600.0)], horizon_h=1.0)
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "ts")))
    while not sim.done:
        sim.advance()
    alone = sim.metrics()
    assert alone["slo_attainment"] == pytest.approx(1.0, abs=1e-6)
    assert alone["online_slowdown"] == pytest.approx(1.0)
    sim = make_sim([service(0, 3600.0), job(1, 1e6)], horizon_h=1.0)
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "ts")))
    sim.apply(Decision(1, 0, option(sim, "ts")))
    while not sim.done:
        sim.advance()
    shared = sim.metrics()
    assert shared["online_slowdown"] > 1.0
    assert shared["oversold_gpu"] == pytest.approx(0.5)  # offline got half the online GPU


def test_protection_evicts_offline_work_when_slo_is_at_risk():
    # 600 req/s: alone rho = 0.75 (p99 = 10 + 20 ln 75 ≈ 96 ms < SLO 120); sharing halves the
    # speed → unstable → SysMonitor evicts the offline job and marks the GPU unhealthy.
    svc = service(0, 7200.0, rps=600.0, slo_ms=120.0)
    sim = make_sim(
        [svc, job(1, 1e6)], nodes(gpus=2), horizon_h=2.0, mechanisms={"protection": True}
    )
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "ts")))
    sim.apply(Decision(1, 0, option(sim, "ts")))
    sim.advance()  # first tick at 300 s: evicted, and GPU 1 is free for it
    assert sim.now == 300.0
    assert sim.jobs[1].status is Status.QUEUED and sim.jobs[1].ledger.evictions == 1
    assert not sim.cluster.healthy[0]
    assert not sim.mask(1)[0].any() and sim.mask(1)[1].any()  # only healthy GPUs
    # without protection the offline job stays and the service misses its SLO
    sim = make_sim([svc, job(1, 1e6)], horizon_h=2.0)
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "ts")))
    sim.apply(Decision(1, 0, option(sim, "ts")))
    while not sim.done:
        sim.advance()
    assert sim.metrics()["slo_attainment"] < 0.5


def test_dynamic_sm_gives_offline_what_online_leaves():
    svc = service(0, 3600.0, rps=240.0)  # duty = 240 * 0.010 / 8 = 0.30
    sim = make_sim([svc, job(1, 1e6)], horizon_h=1.0, mechanisms={"dynamic_sm": True})
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mps50")))
    sim.apply(Decision(1, 0, option(sim, "mps50")))
    # offline share = 1 - 1.2 * 0.30 = 0.64; the service is not limited (v2)
    assert sim.jobs[1].sm_eff == pytest.approx(0.64)
    assert sim.jobs[0].sm_eff == pytest.approx(1.0)
