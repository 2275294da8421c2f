"""GPULet (Choi et al., "Serving Heterogeneous Machine Learning Models on Multi-GPU Servers with
Spatio-Temporal Sharing", USENIX ATC'22; notes in ``../shared/seeds/003_*.txt``).

The paper's claim: partitioning GPUs in space *and* time (gpulets) serves a set of models
within their SLOs on fewer GPUs than a temporal-only scheduler (Nexus' squishy bin packing)
or a spatial-only one (greedy best-fit partitions). Here the three schemes are the same
planner, ``gpu_sharing_gym.baselines.gpulet.GPULet``, restricted to the sharing modes each may use:
spatio-temporal (exclusive, time-sharing, MPS), temporal-only (exclusive, time-sharing),
spatial-only (exclusive, MPS). Each chooses the batch size per placement for the service's
rate (GPULet's third dimension and its artifact's rule, ``Decision.batch_size``).
Spatio-temporal runs with gpulets on (``sharing.gpulets: 2``, :data:`GPULETS`): a GPU holds at
most two MPS partitions and services share a partition, partial ones included, in time (the
paper's Sec. 4); spatial-only keeps one service per partition (no joins).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_gym.baselines.gpulet import GPULet
from gpu_sharing_gym.fidelity.common import (
    SEED_SEP,
    Variant,
    check,
    episode,
    record,
    run_variants,
    scenario,
)

PAPER = "GPULet (Choi et al., USENIX ATC'22)"

#: Sharing modes per scheme.
SCHEMES = {
    "spatio_temporal": ("exclusive", "time_sharing", "mps"),
    "temporal": ("exclusive", "time_sharing"),
    "spatial": ("exclusive", "mps"),
}
#: ``sharing.gpulets`` per scheme: the most MPS partitions a GPU holds, with temporal sharing
#: inside each (GPULet splits a GPU in at most two gpulets, Sec. 4); 0: no temporal sharing
#: inside a partition (the schemes without the temporal dimension, or without MPS).
GPULETS = {"spatio_temporal": 2, "temporal": 0, "spatial": 0}


def fleet(cfg: ScenarioConfig, n_gpus: int) -> ScenarioConfig:
    """``cfg`` with its first node group cut to ``n_gpus`` GPUs (full nodes of the group's size,
    then one node with the rest); the workload does not depend on the fleet."""
    g = cfg.cluster.nodes[0]
    full, rest = divmod(n_gpus, g.gpus_per_node)
    groups = [replace(g, count=full)] if full else []
    if rest:
        groups.append(replace(g, count=1, gpus_per_node=rest))
    return replace(cfg, cluster=replace(cfg.cluster, nodes=tuple(groups)))


def gpus_needed(cfg: ScenarioConfig, seed: int, plan: int, target: float) -> tuple[float, float]:
    """(GPUs needed, SLO attainment there): the smallest fleet of at least ``plan`` GPUs (the
    GPUs the arm's plan uses on the full fleet) on which the arm meets ``target``, trying
    ``plan``, ``plan + 1``, ... up to the full fleet; (NaN, attainment on the full fleet) if
    none does."""
    total = sum(g.count * g.gpus_per_node for g in cfg.cluster.nodes)
    slo = math.nan
    for n in range(max(1, plan), total + 1):
        slo = episode(GPULet(), fleet(cfg, n), seed)["slo_attainment"]
        if slo >= target:
            return float(n), slo
    return math.nan, slo


def gpulet(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """Spatio-temporal partitioning serves the same load within SLO on fewer GPUs.

    Setup (``fidelity/gpulet.yaml``): up to 32 V100-16GB, 24 inference services (default mix,
    20-190 queries/s with a daily swing, SLO 5-10x the solo batch latency) for a day, no
    offline jobs. Metric, the paper's: the GPUs needed to serve every model's peak rate within
    its SLO. Each arm plans every service for its peak at arrival (partition and batch size,
    ``baselines/gpulet.py``; services never move), so its plan fixes the GPUs it uses; the GPUs
    needed are the smallest fleet, from the plan's count up, on which the arm's run meets the
    scenario's SLO target (0.99; a service left without a GPU misses every request), found by
    running the arm on fleets of increasing size (:func:`gpus_needed`); NaN for a seed where no
    fleet up to 32 GPUs does. Checks: each single-dimension scheme needs more GPUs than
    spatio-temporal (ratio > 1), and spatio-temporal meets the SLO target on its fleet.
    ``quick`` simulates 6 hours.
    """
    t0 = time.perf_counter()
    over: dict[str, Any] = {"horizon_h": 6.0} if quick else {}
    arms = [
        Variant(
            label,
            GPULet,
            scenario(
                "gpulet", **over, **{"sharing.modes": modes, "sharing.gpulets": GPULETS[label]}
            ),
        )
        for label, modes in SCHEMES.items()
    ]
    target = scenario("gpulet").slo_target
    d = run_variants(arms, seeds, ("f_online_gpus_max", "slo_attainment", "online_slowdown"))
    for v in arms:
        need, att = [], []
        for s in seeds:
            plan = int(d[f"{v.label}.f_online_gpus_max{SEED_SEP}{s}"])
            n, a = gpus_needed(v.cfg, s, plan, target)
            d[f"{v.label}.gpus_needed{SEED_SEP}{s}"] = n
            d[f"{v.label}.slo_at_needed{SEED_SEP}{s}"] = a
            need.append(n)
            att.append(a)
        fin = [x for x in need if math.isfinite(x)]
        d[f"{v.label}.gpus_needed"] = sum(fin) / len(fin) if fin else math.nan
        d[f"{v.label}.slo_at_needed"] = sum(att) / len(att)
    d["slo_target"] = target
    st = "spatio_temporal"
    checks = [
        check("GPUs temporal/ST", d, "temporal.gpus_needed", ">", 1.0, f"{st}.gpus_needed"),
        check("GPUs spatial/ST", d, "spatial.gpus_needed", ">", 1.0, f"{st}.gpus_needed"),
        check("SLO attainment ST/target", d, f"{st}.slo_at_needed", ">=", 1.0, "slo_target"),
    ]
    return record(
        "gpulet",
        PAPER,
        "spatio-temporal partitioning serves the same load within SLO on fewer GPUs than "
        "temporal-only or spatial-only schemes",
        "fewer GPUs than temporal-only and spatial-only at the same SLO (paper's evaluation)",
        checks,
        d,
        seeds,
        t0,
    )
