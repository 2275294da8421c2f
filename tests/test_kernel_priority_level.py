"""xCUDA's protection level (physics v4): the kernel-priority coefficients as a bracketed
parameter, and one throttle at a time (SysMonitor leaves kernel-throttled clients alone)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpu_sharing_env import interference as itf
from gpu_sharing_env.config import MechanismConfig
from gpu_sharing_env.interference import AnalyticSpeedModel, Resident, kp_coefficients
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.runner import run_episode
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.observe import SimObserver
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

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        for st in sim.jobs.values():
            if not st.spec.online and st.throttle != 1.0:
                self.share_throttled += 1
        self.overloaded += int((sim.health >= 2).sum())


@pytest.mark.parametrize("level", [0.0, 1.0])
def test_sysmonitor_does_not_throttle_a_kernel_throttled_client(level: float) -> None:
    cfg = scenario(
        "muxflow",
        **{
            "horizon_h": 6,
            "workload.offline.arrival_window_h": 4,
            "mechanisms.kernel_priority_level": level,
        },
    )
    sim = Simulator(cfg, build_nodes(cfg), build_workload(cfg))
    obs = _Throttles()
    sim.add_observer(obs)
    run_episode(MuxFlow(), sim, 0)
    assert obs.share_throttled == 0
    if level == 0.0:
        assert obs.overloaded > 0  # the SysMonitor path was exercised
