"""What SysMonitor does in MuxFlow's fidelity runs (issue 52): its states on device metrics.

For the ``muxflow`` arm of ``gsg reproduce --experiment muxflow-offline`` (the scenario
``fidelity/muxflow.yaml`` at the bracket's central ``kp_level``), per load tick and GPU hosting
a running service: the share of GPU-ticks in each SysMonitor state, which metric put a GPU out
of HEALTHY (utilisation, SM activity, clock, memory; a tick may count under several), the
offline jobs evicted, the ticks with an offline client throttled, and the device metrics'
quantiles (``sim.online.DeviceMetrics``). Beside it, the share of the same GPU-ticks on which
the latency slowdown (the monitor's signal until 2026-11-28: mean latency over the mean
latency alone at the current load) was at or above 1.1 / 1.2 / 1.5, its old BUSY, OVERLOADED
and UNHEALTHY thresholds: what that signal would have read on these ticks, not a rerun of it.

    .venv/bin/python scripts/sysmonitor_probe.py --seeds 10 [--kp-level 0]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import Health, MonitorThresholds
from gpu_sharing_gym.baselines.muxflow import MuxFlow
from gpu_sharing_gym.fidelity.common import scenario

#: The latency-slowdown thresholds of the monitor before 2026-11-28 (BUSY, OVERLOADED,
#: UNHEALTHY), read on the same ticks for comparison.
OLD = (1.1, 1.2, 1.5)


class _States(SimObserver):
    def __init__(self) -> None:
        self.states: Counter[str] = Counter()
        self.causes: Counter[str] = Counter()
        self.old: Counter[float] = Counter()
        self.metrics: list[tuple[float, float, float, float]] = []
        self.evictions = 0
        self.throttled = 0

    def on_evict(self, sim: Simulator, job_id: int) -> None:
        self.evictions += 1

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        th: MonitorThresholds = sim.thresholds
        mon = sim.load.monitor
        for st in sim.jobs.values():
            if not (st.spec.online and st.gpus and st.rate > 0):
                continue
            g = st.gpus[0]
            m = mon.metrics(g, st, st.frac[g], sim.usage.row(g))
            self.metrics.append((m.util, m.sm, m.clock, m.mem))
            self.states[Health(int(sim.health[g])).name] += 1
            for name, hit in (
                ("util", m.util >= th.sysmon_busy),
                ("sm", m.sm >= th.sysmon_busy),
                ("clock", m.clock < th.sysmon_clock_throttle),
                ("memory", m.mem >= th.sysmon_mem_evict),
            ):
                self.causes[name] += int(hit)
            slow = _latency_slowdown(st, g)
            for x in OLD:
                self.old[x] += int(slow >= x)
        self.throttled += sum(
            1 for st in sim.jobs.values() if not st.spec.online and st.gpus and st.throttle != 1.0
        )


def _latency_slowdown(st: object, g: int) -> float:
    """The old monitor's signal: mean latency over the mean latency alone at the same load."""
    sv = st.serving  # type: ignore[attr-defined]
    solo, f, wait, alone = sv.solo_batch_ms, st.frac[g], sv.wait_ms, sv.alone_frac  # type: ignore[attr-defined]
    rps, b = sv.rps, st.effective_batch_size  # type: ignore[attr-defined]

    def mean(ms: float) -> float:
        rho = rps * ms / 1000.0 / b
        return ms + rho * ms / (2.0 * (1.0 - rho)) if rho < 1.0 else float("inf")

    ref = mean(solo / alone)
    return mean(solo / f + wait) / ref if ref < float("inf") else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--kp-level", type=float, default=None, help="xCUDA's level (the bracket)")
    args = ap.parse_args()
    over = {} if args.kp_level is None else {"mechanisms.kernel_priority_level": args.kp_level}
    cfg = scenario("muxflow", **over)
    obs = _States()
    for seed in range(args.seeds):
        sim = Simulator(cfg, build_nodes(cfg), build_workload(cfg))
        sim.add_observer(obs)
        run_episode(MuxFlow(), sim, seed)
    n = sum(obs.states.values())
    print(f"muxflow arm, seeds 0-{args.seeds - 1}: {n} GPU-ticks with a running service")
    for s in Health:
        print(f"  {s.name:<10} {obs.states[s.name] / n:7.2%}")
    print("metric past its threshold (share of GPU-ticks):")
    for k in ("util", "sm", "clock", "memory"):
        print(f"  {k:<10} {obs.causes[k] / n:7.2%}")
    qs = (0.01, 0.1, 0.5, 0.9, 0.99)
    q = np.quantile(np.array(obs.metrics), qs, axis=0)
    print("quantiles over GPU-ticks: " + "  ".join(f"p{round(x * 100)}" for x in qs))
    for name, col in zip(("util", "sm", "clock", "memory"), q.T, strict=True):
        print(f"  {name:<7} " + "  ".join(f"{v:.3f}" for v in col))
    print(f"offline evictions: {obs.evictions}; job-ticks throttled: {obs.throttled}")
    print("latency slowdown (the old signal) on the same ticks, at or above:")
    for x in OLD:
        print(f"  {x:<4} {obs.old[x] / n:7.2%}")


if __name__ == "__main__":
    main()
