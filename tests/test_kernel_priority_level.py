"""xCUDA (physics v4-v5): the kernel-priority coefficients as a bracketed parameter, xCUDA's
feedback on the service's kernel speed (v5), no dynamic-SM cap on top of it (v5), and one
throttle at a time (SysMonitor leaves kernel-throttled clients to xCUDA)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from gpu_sharing_env.config import MechanismConfig
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.physics import interference as itf
from gpu_sharing_env.physics.interference import AnalyticSpeedModel, Resident, kp_coefficients
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import XCUDA_CLOCK_MIN, XCUDA_STEPS, MonitorThresholds
from gpu_sharing_env.sim.state import Status
from gpu_sharing_gym.baselines.muxflow import MuxFlow
from gpu_sharing_gym.fidelity import muxflow as fmux
from gpu_sharing_gym.fidelity.common import BRACKETS, scenario


def test_levels_are_the_two_fits_and_monotone() -> None:
    hi, lo = kp_coefficients(1.0), kp_coefficients(0.0)
    assert hi == {
        "kp_block": itf.KP_BLOCK,
        "kp_residual": itf.KP_RESIDUAL,
        "kp_tail_ms": itf.KP_TAIL_MS,
    }
    assert lo["kp_block"] == itf.KP_BLOCK_LOW and lo["kp_tail_ms"] == itf.KP_TAIL_MS_LOW
    mid = kp_coefficients(0.5)
    assert lo["kp_block"] < mid["kp_block"] < hi["kp_block"]
    assert hi["kp_tail_ms"] < mid["kp_tail_ms"] < lo["kp_tail_ms"]
    with pytest.raises(ValueError, match="must be in"):
        kp_coefficients(1.5)


def test_higher_level_protects_more_and_gives_less() -> None:
    pair = [
        Resident("resnet50", sm_frac=0.6),
        Resident("bert", duty=0.4, online=True, priority=1),
    ]
    lo = AnalyticSpeedModel(**kp_coefficients(0.0))
    hi = AnalyticSpeedModel(**kp_coefficients(1.0))
    r_lo, r_hi = lo.rates("T4", SharingMode.MPS, pair), hi.rates("T4", SharingMode.MPS, pair)
    assert r_hi[0] < r_lo[0]  # the offline client gets less at the strict end
    assert r_hi[1] > r_lo[1]  # and the service is slowed less
    w_lo = lo.latency_terms("T4", SharingMode.MPS, pair)[1][0]
    w_hi = hi.latency_terms("T4", SharingMode.MPS, pair)[1][0]
    assert w_hi < w_lo


def test_config_default_is_the_central_choice_and_the_bracket_is_declared() -> None:
    assert MechanismConfig().kernel_priority_level == itf.KP_LEVEL_CENTRAL
    assert scenario("muxflow").mechanisms.kernel_priority_level == itf.KP_LEVEL_CENTRAL
    for exp in ("muxflow-online", "muxflow-offline", "muxflow-ablation"):
        b = BRACKETS[exp]
        assert (b.param, b.low, b.central, b.high) == ("kp_level", 0.0, itf.KP_LEVEL_CENTRAL, 1.0)
    cfg = fmux.KP_LEVEL.cfg(scenario("muxflow"), 1.0) if fmux.KP_LEVEL.cfg else None
    assert cfg is not None and cfg.mechanisms.kernel_priority_level == 1.0


def test_simulator_uses_the_scenario_level() -> None:
    cfg = scenario("muxflow")
    for level in (0.0, 1.0):
        c = replace(cfg, mechanisms=replace(cfg.mechanisms, kernel_priority_level=level))
        sim = Simulator(c, build_nodes(c), build_workload(c))
        assert isinstance(sim.speed, AnalyticSpeedModel)
        assert sim.speed.kp_block == kp_coefficients(level)["kp_block"]


class _Throttles(SimObserver):
    def __init__(self) -> None:
        self.share_throttled = 0
        self.overloaded = 0
        self.values: set[float] = set()

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        for st in sim.jobs.values():
            if not st.spec.online and st.throttle != 1.0:
                self.share_throttled += 1
                self.values.add(st.throttle)
        self.overloaded += int((sim.health >= 2).sum())


def _sim(level: float = 1.0, clock_min: float | None = None) -> Simulator:
    cfg = scenario(
        "muxflow",
        **{
            "horizon_h": 6,
            "workload.offline.arrival_window_h": 4,
            "mechanisms.kernel_priority_level": level,
        },
    )
    thresholds = None
    if clock_min is not None:
        thresholds = replace(MonitorThresholds(), xcuda_clock_min=clock_min)
    return Simulator(cfg, build_nodes(cfg), build_workload(cfg), thresholds=thresholds)


@pytest.mark.parametrize("level", [0.0, 1.0])
def test_sysmonitor_does_not_throttle_a_kernel_throttled_client(level: float) -> None:
    # With xCUDA's feedback switched off (a target of 0) nothing throttles a kernel-throttled
    # client: SysMonitor's OVERLOADED state only closes the GPU to new offline work.
    sim = _sim(level, clock_min=0.0)
    obs = _Throttles()
    sim.add_observer(obs)
    run_episode(MuxFlow(), sim, 0)
    assert obs.share_throttled == 0
    if level == 0.0:
        assert obs.overloaded > 0  # the SysMonitor path was exercised


def _kernel_speed(sim: Simulator, st: Any, g: int) -> float:
    return (st.serving.solo_batch_ms / st.serving.alone_frac) / (
        st.serving.solo_batch_ms / st.frac[g] + st.serving.wait_ms
    )


class _XcudaCheck(SimObserver):
    """After every tick: on each GPU where xCUDA holds an offline client, the service's kernel
    speed meets the target at the chosen launch fraction (unless it is the smallest) and misses
    it at the next larger one (the largest that meets it was kept)."""

    def __init__(self) -> None:
        self.checked = 0
        self.below_one = 0

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        target = sim.thresholds.xcuda_clock_min
        for st in sim.jobs.values():
            if not st.spec.online or st.status is not Status.RUNNING or len(st.gpus) != 1:
                continue
            g = st.gpus[0]
            res = [sim.jobs[j] for j in sim.cluster.residents[g]]
            off = [r for r in res if not r.spec.online]
            if not off or not all(sim.rates.gated(g, res)[res.index(r)] for r in off):
                continue
            x = off[0].throttle
            assert all(r.throttle == x for r in off) and x in XCUDA_STEPS
            self.checked += 1
            if x != XCUDA_STEPS[-1]:
                assert _kernel_speed(sim, st, g) >= target
            if x != XCUDA_STEPS[0]:
                self.below_one += 1
                bigger = XCUDA_STEPS[XCUDA_STEPS.index(x) - 1]
                for r in off:
                    r.throttle = bigger
                sim.rates.gpu_fractions(g, res)
                assert _kernel_speed(sim, st, g) < target
                for r in off:
                    r.throttle = x
                sim.rates.gpu_fractions(g, res)


@pytest.mark.parametrize("level", [0.0, 1.0])
def test_xcuda_keeps_the_largest_launch_fraction_that_meets_its_target(level: float) -> None:
    sim = _sim(level)
    assert sim.thresholds.xcuda_clock_min == XCUDA_CLOCK_MIN
    obs = _XcudaCheck()
    sim.add_observer(obs)
    run_episode(MuxFlow(), sim, 0)
    assert obs.checked > 0 and obs.below_one > 0  # the feedback was exercised


def test_a_stricter_target_delays_more_launches() -> None:
    held = []
    for target in (0.8, 0.95):
        sim = _sim(0.0, clock_min=target)
        obs = _Throttles()
        sim.add_observer(obs)
        run_episode(MuxFlow(), sim, 0)
        held.append(obs.share_throttled)
    assert held[0] < held[1]


class _Shares(SimObserver):
    def __init__(self) -> None:
        self.shares: list[float] = []

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        for g in range(sim.n_gpus):
            res = [sim.jobs[j] for j in sim.cluster.residents[g]]
            if any(r.spec.online for r in res):
                self.shares += [r.sm_eff for r in res if not r.spec.online]


def test_no_dynamic_sm_cap_on_a_kernel_throttled_client() -> None:
    """Physics v5: dynamic SM allocation does not cap an offline client that xCUDA already
    holds back (Tally's coefficients were measured with both clients on every SM); without
    kernel-level priority the cap ``clip(1 - 1.2 u, 0.1, 0.9)`` applies as before."""
    for kp, want_one in ((True, True), (False, False)):

        class _P(MuxFlow):
            mechanisms: ClassVar[Mapping[str, bool]] = {**MuxFlow.mechanisms, "kernel_priority": kp}

        sim = _sim()
        obs = _Shares()
        sim.add_observer(obs)
        run_episode(_P(), sim, 0)
        assert obs.shares
        if want_one:
            assert set(obs.shares) == {1.0}
        else:
            assert max(obs.shares) <= 0.9 and min(obs.shares) >= 0.1


def test_pb_time_sharing_arm_runs_driver_priority_slicing() -> None:
    """The PB-TS arm of the MuxFlow experiments runs on driver priority slicing (physics v5);
    the other arms on the scenario's default model."""
    from gpu_sharing_env.physics.interference import driver_priority_coefficients
    from gpu_sharing_gym.fidelity.common import episode

    arms = {a.label: a for a in fmux._arms(True, ["time_sharing", "pb_time_sharing", "muxflow"])}
    assert arms["time_sharing"].speed is None and arms["muxflow"].speed is None
    pb = arms["pb_time_sharing"]
    assert pb.speed is not None
    model = pb.speed(pb.cfg)
    assert isinstance(model, AnalyticSpeedModel)
    coef = driver_priority_coefficients()
    assert (model.prio_block, model.prio_residual) == (coef["prio_block"], coef["prio_residual"])
    assert model.kp_block == kp_coefficients(pb.cfg.mechanisms.kernel_priority_level)["kp_block"]
    # and the episode runs on it: a different model gives different numbers
    a = episode(pb.policy(), pb.cfg, 0, pb.speed)
    b = episode(pb.policy(), pb.cfg, 0)
    assert a["jct_mean_s"] != b["jct_mean_s"]
