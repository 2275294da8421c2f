"""GPULet (Choi et al., "Serving Heterogeneous Machine Learning Models on Multi-GPU Servers with
Spatio-Temporal Sharing", USENIX ATC'22; notes in ``../shared/seeds/003_*.txt``).

The paper's claim: partitioning GPUs in space *and* time (gpulets) serves a set of models
within their SLOs on fewer GPUs than a temporal-only scheduler (Nexus' squishy bin packing)
or a spatial-only one (greedy best-fit partitions). Here the three schemes are the same
planner, ``gpu_sharing_gym.baselines.gpulet.GPULet``, restricted to the sharing modes each may use:
spatio-temporal (exclusive, time-sharing, MPS), temporal-only (exclusive, time-sharing),
spatial-only (exclusive, MPS). Each chooses the batch size per placement (GPULet's third
dimension: batch latency within half the SLO, ``Decision.batch_size``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gpu_sharing_gym.baselines.gpulet import GPULet
from gpu_sharing_gym.fidelity.common import Variant, check, record, run_variants, scenario

PAPER = "GPULet (Choi et al., USENIX ATC'22)"

#: Sharing modes per scheme.
SCHEMES = {
    "spatio_temporal": ("exclusive", "time_sharing", "mps"),
    "temporal": ("exclusive", "time_sharing"),
    "spatial": ("exclusive", "mps"),
}


def gpulet(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """Spatio-temporal partitioning serves the same load within SLO on fewer GPUs.

    Setup (``fidelity/gpulet.yaml``): 16 V100-16GB, 24 inference services (default mix,
    20-190 queries/s with a daily swing, SLO 5-10x the solo batch latency) for a day, no offline
    jobs. GPUs used is the most GPUs hosting a service at once (services are planned for their
    peak at arrival and never move). Checks: each single-dimension scheme needs more GPUs than
    spatio-temporal (ratio > 1), and spatio-temporal meets the scenario's SLO target (0.99).
    ``quick`` simulates 6 hours.
    """
    t0 = time.perf_counter()
    over: dict[str, Any] = {"horizon_h": 6.0} if quick else {}
    arms = [
        Variant(label, GPULet, scenario("gpulet", **over, **{"sharing.modes": modes}))
        for label, modes in SCHEMES.items()
    ]
    d = run_variants(arms, seeds, ("f_online_gpus_max", "slo_attainment", "online_slowdown"))
    d["slo_target"] = scenario("gpulet").slo_target
    st = "spatio_temporal"
    checks = [
        check(
            "GPUs temporal/ST", d, "temporal.f_online_gpus_max", ">", 1.0, f"{st}.f_online_gpus_max"
        ),
        check(
            "GPUs spatial/ST", d, "spatial.f_online_gpus_max", ">", 1.0, f"{st}.f_online_gpus_max"
        ),
        check("SLO attainment ST/target", d, f"{st}.slo_attainment", ">=", 1.0, "slo_target"),
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
