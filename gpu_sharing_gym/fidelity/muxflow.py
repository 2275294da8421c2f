"""MuxFlow (Zhao et al., "MuxFlow: Efficient and Safe GPU Sharing in Large-Scale Production Deep
Learning Clusters", arXiv 2303.13803 / EuroSys'24; notes in ``../shared/seeds/000_*.txt``).

The paper's evaluation (Sec. 6): online inference services are deployed on every GPU of T4
servers (8 T4 per machine) and offline training jobs (ResNet50, VGG16, DenseNet201,
InceptionV3 from a Microsoft trace) share the GPUs beside them. Baselines: *time-sharing* (the
GPU driver's time slices, as Gandiva), *PB-time-sharing* (online services at high priority, as
AntMan and PAI) and MuxFlow. The scenario ``configs/scenarios/fidelity/muxflow.yaml`` keeps that
shape at 16 GPUs: one online service per T4, single-GPU CNN training jobs arriving for 12 h, at
most two residents per GPU (MuxFlow pairs one offline job with one service).

The arms:

* ``time_sharing`` — the ``time_sharing`` policy with no priority: ``sharing.online_priority``
  off and the services' job priority 0, so a service and its co-runner take equal turns.
* ``pb_time_sharing`` — the same policy with the scenario's priorities (services first), on
  priority time-slicing as the driver does it (:func:`driver_priority_speed`, physics
  version 5: the paper's "more time slices to the high-priority workload", not TGS).
* ``muxflow`` — ``gpu_sharing_gym.baselines.muxflow.MuxFlow`` with its mechanisms (protection, dynamic SM
  allocation, mixed error handling) and the ablations of Sec. 6.4: ``muxflow_s`` without dynamic
  SM allocation, ``muxflow_m`` without matching (first fit instead of Kuhn–Munkres),
  ``muxflow_s_m`` without either.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.physics.interference import (
    KP_LEVEL_CENTRAL,
    AnalyticSpeedModel,
    driver_priority_coefficients,
    kp_coefficients,
)
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.faults import FaultCause
from gpu_sharing_env.sim.online import (
    SYSMON_BUSY,
    SYSMON_CLOCK_EVICT,
    SYSMON_CLOCK_RECOVER,
    SYSMON_CLOCK_THROTTLE,
    SYSMON_MEM_EVICT,
)
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.base import Policy
from gpu_sharing_gym.baselines.muxflow import _ILLEGAL, MuxFlow
from gpu_sharing_gym.baselines.reference import TimeSharing
from gpu_sharing_gym.fidelity.common import (
    Bracket,
    Param,
    Variant,
    check,
    declare_bracket,
    increase_band,
    published,
    record,
    register_param,
    run_variants,
    scenario,
)

PAPER = "MuxFlow (Zhao et al., arXiv 2303.13803)"


def _set_kp_level(cfg: ScenarioConfig, level: float) -> ScenarioConfig:
    return replace(cfg, mechanisms=replace(cfg.mechanisms, kernel_priority_level=float(level)))


#: xCUDA's protection level (``mechanisms.kernel_priority_level``; only arms that deploy
#: kernel-level priority, the MuxFlow ones, feel it).
KP_LEVEL = register_param(
    Param(
        "kp_level",
        "xCUDA's protection level (mechanisms.kernel_priority_level): 0 = Tally without kernel "
        "transformation, 1 = Tally's default strict priority (interference.kp_coefficients)",
        cfg=_set_kp_level,
        experiments=frozenset({"muxflow-online", "muxflow-offline", "muxflow-ablation"}),
    )
)

#: xCUDA's feedback target (``sim.online.XCUDA_CLOCK_MIN``, unpublished): the service kernel
#: speed below which xCUDA delays the offline client's launches. :func:`common.episode` applies
#: it to the simulator's thresholds; the documented sweep is 0.8-0.95 (docs/fidelity.md).
XCUDA_CLOCK = register_param(
    Param(
        "xcuda_clock_min",
        "xCUDA's feedback target (sim.online.XCUDA_CLOCK_MIN, central 0.9): offline launches "
        "are delayed while the service's kernel speed is below it",
        experiments=frozenset({"muxflow-online", "muxflow-offline", "muxflow-ablation"}),
    )
)

#: SysMonitor's thresholds on device metrics (``sim.online.MonitorThresholds``, unpublished:
#: "chosen empirically", MuxFlow Sec. 4.1; central values and where each comes from in
#: ``sim.online``'s ``SYSMON_*``). Each is a field of the thresholds, which
#: :func:`common.episode` applies to the simulator, so a sweep needs no code beyond this.
SYSMON_PARAMS = tuple(
    register_param(
        Param(
            name,
            f"SysMonitor: {doc} (sim.online.MonitorThresholds, central {central:.3g})",
            experiments=frozenset({"muxflow-online", "muxflow-offline", "muxflow-ablation"}),
        )
    )
    for name, doc, central in (
        ("sysmon_busy", "BUSY (no new offline work) from this GPU utilisation or SM "
         "activity", SYSMON_BUSY),
        ("sysmon_clock_throttle", "OVERLOADED (offline throttled) below this SM clock "
         "(the service's kernel speed)", SYSMON_CLOCK_THROTTLE),
        ("sysmon_clock_evict", "UNHEALTHY (offline evicted) below this SM clock",
         SYSMON_CLOCK_EVICT),
        ("sysmon_clock_recover", "HEALTHY again from OVERLOADED/UNHEALTHY at this SM clock",
         SYSMON_CLOCK_RECOVER),
        ("sysmon_mem_evict", "UNHEALTHY from this share of GPU memory in use",
         SYSMON_MEM_EVICT),
    )
)  # fmt: skip

#: The bracket of the protection level: the measured kernel-level priority mechanisms that keep
#: the service within MuxFlow's 1.2x bound on Tally's pairs (``interference.KP_LEVEL_CENTRAL``).
KP_BRACKET = Bracket(
    "kp_level",
    low=0.0,
    central=KP_LEVEL_CENTRAL,
    high=1.0,
    source=(
        "Tally artifact (tally-bench priority-aware-perf.csv, 12 A100 pairs at 50 % load): "
        "low = Tally without kernel transformation (mean latency 1.068x, training 0.505 of "
        "solo; the least protective measured mechanism within MuxFlow's 1.2x; TGS 1.70x, MPS "
        "with priority 1.88x and Tally with space sharing 2.17x miss it), high = Tally's "
        "default strict priority (1.016x, 0.443); central = high: MuxFlow runs the pair under "
        "MPS with SM percentages (Sec. 4.2), so the service does not queue behind whole "
        "offline kernels on shared SMs as in the low end's runs (interference.KP_LEVEL_CENTRAL)"
    ),
)
for _exp in ("muxflow-online", "muxflow-offline", "muxflow-ablation"):
    declare_bracket(_exp, KP_BRACKET)


class MuxFlowS(MuxFlow):
    """MuxFlow-S (Sec. 6.4): without dynamic SM allocation; offline clients keep the static
    share of their placement option, and the predictor is asked about that share."""

    name = "muxflow_s"
    mechanisms: ClassVar[Mapping[str, bool]] = {**MuxFlow.mechanisms, "dynamic_sm": False}

    def predicted_share(self, online_duty: float, option_share: float) -> float:
        return option_share


class MuxFlowM(MuxFlow):
    """MuxFlow-M (Sec. 6.4): without matching; each round places queued jobs in queue order on
    the first GPU (lowest index) the predictor deems feasible, instead of Kuhn–Munkres."""

    name = "muxflow_m"

    def _plan_offline(self, view: ClusterView) -> Decision | None:
        jobs = [j for j in view.window if not j.online]
        cols = self.columns(view)
        if not jobs or not cols:
            return None
        w, opt, _ = self.weights(view, jobs, cols)
        for r, job in enumerate(jobs):
            feasible = np.flatnonzero(w[r] > _ILLEGAL / 2)
            if feasible.size:
                c = int(feasible[0])
                return Decision(job.job_id, cols[c][0], int(opt[r, c]))
        return None


class MuxFlowSM(MuxFlowM):
    """MuxFlow-S-M (Sec. 6.4): neither dynamic SM allocation nor matching."""

    name = "muxflow_s_m"
    mechanisms: ClassVar[Mapping[str, bool]] = {**MuxFlow.mechanisms, "dynamic_sm": False}

    def predicted_share(self, online_duty: float, option_share: float) -> float:
        return option_share


class MuxFlowNoMixedErrors(MuxFlow):
    """MuxFlow without mixed error handling (every fatal error propagates under MPS)."""

    name = "muxflow_no_mixed_errors"
    mechanisms: ClassVar[Mapping[str, bool]] = {
        **MuxFlow.mechanisms,
        "mixed_error_handling": False,
    }


def _cfg(name: str, quick: bool, **over: Any) -> ScenarioConfig:
    """The scenario; ``quick`` halves the fleet, the services and the offline arrivals."""
    if quick:
        node = scenario(name).cluster.nodes[0]
        over = {
            "cluster.nodes": (replace(node, count=1),),
            "workload.online.num_services": 8,
            "workload.offline.params.arrivals_per_h": 1.5,
            **over,
        }
    return scenario(name, **over)


def _plain_ts(quick: bool) -> ScenarioConfig:
    return _cfg(
        "muxflow",
        quick,
        **{"sharing.online_priority": False, "workload.online.params.priority": 0},
    )


def _arms(quick: bool, names: Sequence[str], name: str = "muxflow") -> list[Variant]:
    """The named arms on scenario ``fidelity/<name>.yaml`` (time-sharing without priority on
    ``fidelity/muxflow.yaml``, the only scenario that arm runs on)."""
    base = _cfg(name, quick)
    table: dict[str, tuple[Callable[[], Policy], ScenarioConfig]] = {
        "time_sharing": (TimeSharing, _plain_ts(quick)),
        "pb_time_sharing": (TimeSharing, base),
        "muxflow": (MuxFlow, base),
        "muxflow_s": (MuxFlowS, base),
        "muxflow_m": (MuxFlowM, base),
        "muxflow_s_m": (MuxFlowSM, base),
    }
    speed = {"pb_time_sharing": driver_priority_speed}
    return [Variant(n, *table[n], speed=speed.get(n)) for n in names]


def driver_priority_speed(cfg: ScenarioConfig) -> AnalyticSpeedModel:
    """PB-time-sharing's physics (physics version 5): priority time-sharing as driver-level
    time slicing, the paper's "more time slices to the high-priority workload"
    (``interference.driver_priority_coefficients``), not TGS's rate control that the
    simulator's default priority coefficients are fitted on; everything else as the default
    model of the scenario."""
    return AnalyticSpeedModel(
        None,
        **kp_coefficients(cfg.mechanisms.kernel_priority_level),
        **driver_priority_coefficients(),
    )


#: Sec. 6.2: time-sharing slows the online workloads by up to 50 % (from no slowdown to 1.5x)
#: and MuxFlow by less than 20 % (to 1.2x), at the figures' printed precision.
TS_ONLINE_BAND = (1.0, increase_band("50")[1])
MUXFLOW_ONLINE_BAND = (1.0, increase_band("20")[1])


def muxflow_online(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """Online slowdown (Sec. 6.2, Fig. 10): time-sharing slows online services by up to ~50%;
    MuxFlow keeps the slowdown under 20%.

    The statistic is the paper's: the online workloads' average latency against Online-only's
    (its metrics, Sec. 6.1: "average latency, 99th-percentile latency"), here the fleet's
    ``online_slowdown``: each service's mean latency over its solo mean latency at the same
    load, averaged over services and load ticks weighted by requests. v4 and v5 until 2026-11-28 judged the worst of the 16 services
    (``f_worst_service_slowdown``, kept in the detail), a statistic the paper does not report.
    """
    t0 = time.perf_counter()
    keys = ("f_worst_service_slowdown", "online_slowdown", "slo_attainment")
    d = run_variants(_arms(quick, ["time_sharing", "pb_time_sharing", "muxflow"]), seeds, keys)
    checks = [
        check(
            "time-sharing average slowdown",
            d,
            "time_sharing.online_slowdown",
            ">=",
            1.2,
            band=TS_ONLINE_BAND,
        ),
        check(
            "MuxFlow average slowdown",
            d,
            "muxflow.online_slowdown",
            "<",
            1.2,
            band=MUXFLOW_ONLINE_BAND,
        ),
    ]
    return record(
        "muxflow-online",
        PAPER,
        "time-sharing slows online services by up to ~50%; MuxFlow keeps the slowdown under 20%",
        "time-sharing up to ~1.5x; MuxFlow < 1.2x (Sec. 6.2)",
        checks,
        d,
        seeds,
        t0,
    )


#: Sec. 6.2: MuxFlow improves average JCT by 1.10-2.24x and oversold GPU by 1.08-1.97x over
#: time-sharing and PB-time-sharing (the range spans both baselines and the setups), at the
#: figures' printed precision (``common.published``).
JCT_BAND = published("1.10", "2.24")
OVERSOLD_BAND = published("1.08", "1.97")


def muxflow_offline(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """Offline efficiency (Sec. 6.2): MuxFlow improves average offline JCT by 1.10-2.24x and
    oversold GPU by 1.08-1.97x over time-sharing and PB-time-sharing. The checks ask for the
    direction (ratios above 1); the paper's range is reported beside them."""
    t0 = time.perf_counter()
    keys = ("jct_mean_s", "oversold_gpu", "jobs_completed", "slo_attainment")
    d = run_variants(_arms(quick, ["time_sharing", "pb_time_sharing", "muxflow"]), seeds, keys)
    checks = [
        check(
            "JCT TS/MuxFlow",
            d,
            "time_sharing.jct_mean_s",
            ">",
            1.0,
            "muxflow.jct_mean_s",
            band=JCT_BAND,
        ),
        check(
            "JCT PB-TS/MuxFlow",
            d,
            "pb_time_sharing.jct_mean_s",
            ">",
            1.0,
            "muxflow.jct_mean_s",
            band=JCT_BAND,
        ),
        check(
            "oversold MuxFlow/TS",
            d,
            "muxflow.oversold_gpu",
            ">",
            1.0,
            "time_sharing.oversold_gpu",
            band=OVERSOLD_BAND,
        ),
        check(
            "oversold MuxFlow/PB-TS",
            d,
            "muxflow.oversold_gpu",
            ">",
            1.0,
            "pb_time_sharing.oversold_gpu",
            band=OVERSOLD_BAND,
        ),
    ]
    return record(
        "muxflow-offline",
        PAPER,
        "MuxFlow improves average offline JCT and oversold GPU over time-sharing and PB-time-sharing",
        "JCT 1.10-2.24x, oversold GPU 1.08-1.97x (Sec. 6.2)",
        checks,
        d,
        seeds,
        t0,
    )


def muxflow_ablation(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """Ablation (Sec. 6.4): MuxFlow-S (no dynamic SM allocation) and MuxFlow-M (no matching)
    both improve average JCT and oversold GPU over MuxFlow-S-M (neither).

    Scenario ``fidelity/muxflow-ablation.yaml``: ``fidelity/muxflow.yaml`` with offline jobs of
    eight model classes spanning the zoo's bandwidth intensity (0.02-1.0) and SM activity
    (0.1-1.0) beside the default (equally diverse) service mix, so that which job is paired
    with which service matters; with the paper's four CNNs, three of them alike, the
    assignment could hardly differ from first fit.
    """
    t0 = time.perf_counter()
    keys = ("jct_mean_s", "oversold_gpu", "jobs_completed")
    arms = ["muxflow", "muxflow_s", "muxflow_m", "muxflow_s_m"]
    d = run_variants(_arms(quick, arms, "muxflow-ablation"), seeds, keys)
    sm = "muxflow_s_m"
    checks = [
        check("JCT S-M/S", d, f"{sm}.jct_mean_s", ">", 1.0, "muxflow_s.jct_mean_s"),
        check("JCT S-M/M", d, f"{sm}.jct_mean_s", ">", 1.0, "muxflow_m.jct_mean_s"),
        check("oversold S/S-M", d, "muxflow_s.oversold_gpu", ">", 1.0, f"{sm}.oversold_gpu"),
        check("oversold M/S-M", d, "muxflow_m.oversold_gpu", ">", 1.0, f"{sm}.oversold_gpu"),
    ]
    return record(
        "muxflow-ablation",
        PAPER,
        "dynamic SM allocation and matching each help: MuxFlow-S and MuxFlow-M beat MuxFlow-S-M",
        "MuxFlow-S, MuxFlow-M better JCT and oversold GPU than MuxFlow-S-M (Sec. 6.4)",
        checks,
        d,
        seeds,
        t0,
    )


#: MuxFlow's error analysis (Sec. 4.3, seeds/000 notes): of the errors that propagate under MPS,
#: SIGINT/SIGTERM are ~99 %, every other cause ~1 % (split 4 : 1 between application errors and
#: Xid errors, an ASSUMPTION as in ``muxflow-t4.yaml``). Each fault's cause is drawn from this
#: distribution independently, with the run's seed (``Simulator``'s fault stream).
PAPER_CAUSE_MIX = {"user_signal": 0.99, "app_error": 0.008, "xid": 0.002}

#: Injected faults per GPU-hour of running: 50-100x production, so that a day gives hundreds.
ERRORS_FAULT_RATE_PER_GPU_H = 0.5


def muxflow_errors(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """Mixed error handling (Sec. 4.3) -- a *mechanism check*, not an independent finding.

    MuxFlow found SIGINT/SIGTERM to be ~99 % of the errors that propagate under MPS and made
    clients exit gracefully on them, so propagated failures fall by about two orders of
    magnitude. Here the paper's cause distribution is an *input*: every fault's cause is drawn
    from :data:`PAPER_CAUSE_MIX` (per fault, with the run's seed), and mixed handling stops
    exactly the user-signal propagation (``sim.faults.propagates``). The reduction therefore
    follows from the input mix (expected ``1 / (1 - signal share)``, ~100x): the record is
    ``kind: "mechanism"``. Its checks: with mixed handling no user-signal fault propagates, and
    propagated failures fall by at least 10^1.5 (summed over seeds). The detail has the
    realised cause counts of each arm and the reduction the realised mix predicts
    (``expected_log10_reduction``).

    Scenario ``fidelity/muxflow-errors.yaml``: ``fidelity/muxflow.yaml`` with faults injected at
    :data:`ERRORS_FAULT_RATE_PER_GPU_H` (50-100x production) so that the counts are measurable.
    """
    t0 = time.perf_counter()
    rates = {c: ERRORS_FAULT_RATE_PER_GPU_H * w for c, w in PAPER_CAUSE_MIX.items()}
    cfg = _cfg("muxflow-errors", quick, **{"faults.rate_per_gpu_h": rates})
    arms = [
        Variant("without", MuxFlowNoMixedErrors, cfg),
        Variant("with", MuxFlow, cfg),
    ]
    causes = [c.value for c in FaultCause]
    keys = (
        "errors_propagated",
        "errors_total",
        "jobs_completed",
        *(f"f_faults_{c}" for c in causes),
        *(f"f_propagated_{c}" for c in causes),
    )
    d = run_variants(arms, seeds, keys)
    d["with.errors_propagated_sum_floor1"] = max(d["with.errors_propagated_sum"], 1.0)
    without = d["without.errors_propagated_sum"]
    d["log10_reduction"] = (
        math.log10(without / d["with.errors_propagated_sum_floor1"]) if without > 0 else math.nan
    )
    # The realised mix of the faults that struck jobs under mixed handling, and the reduction
    # it predicts if mixed handling stops exactly the user-signal propagation.
    root = sum(d[f"with.f_faults_{c}_sum"] for c in causes if c != "oom")
    share = d["with.f_faults_user_signal_sum"] / root if root > 0 else math.nan
    d["with.realised_user_signal_share"] = share
    d["expected_log10_reduction"] = -math.log10(1.0 - share) if share < 1.0 else math.nan
    checks = [
        check(
            "user-signal faults propagated with mixed handling",
            d,
            "with.f_propagated_user_signal_sum",
            "<=",
            0.0,
        ),
        check("log10 reduction", d, "log10_reduction", ">=", 1.5, band=(1.5, 2.5)),
    ]
    return record(
        "muxflow-errors",
        PAPER,
        "with mixed error handling, propagated failures under MPS fall by about two orders of "
        "magnitude (mechanism check: the paper's ~99 % user-signal share is the input)",
        "~100x fewer propagated errors (Sec. 4.3)",
        checks,
        d,
        seeds,
        t0,
        kind="mechanism",
    )
