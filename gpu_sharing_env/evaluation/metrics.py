"""The metric schema (DESIGN.md; the names are a public contract) and its computation.

Time-averaged cluster metrics are integrated exactly between events: the simulator keeps each
GPU's contribution and the fleet-wide sums up to date as GPUs change (O(GPUs touched) per event)
and :class:`Accumulator` (``sim/accumulator.py``, re-exported here) integrates the sums over
time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from gpu_sharing_env.sim.accumulator import Accumulator
from gpu_sharing_env.sim.state import JobState, Status

OFFLINE_METRICS = (
    "jct_mean_s",
    "jct_p50_s",
    "jct_p95_s",
    "queue_delay_mean_s",
    "queue_delay_p90_s",
    "makespan_s",
    "norm_throughput_mean",
    "stp",
    "oversold_gpu",
    "jobs_submitted",
    "jobs_completed",
    "jobs_failed",
)
ONLINE_METRICS = ("latency_mean_ms", "latency_p99_ms", "slo_attainment", "online_slowdown")
CLUSTER_METRICS = ("gpu_util", "sm_activity", "gpu_mem_util", "frag_gpu")
FAULT_METRICS = ("errors_total", "errors_propagated", "gpu_hours_lost")
OPS_METRICS = ("mig_reconfigs", "migrations", "decisions")
#: Every schema metric, in a stable order (CSV columns, TensorBoard tags ``sim/<name>``).
METRIC_NAMES: tuple[str, ...] = (
    OFFLINE_METRICS + ONLINE_METRICS + CLUSTER_METRICS + FAULT_METRICS + OPS_METRICS
)
#: The leaderboard's primary objective (lower is better), subject to the SLO target.
PRIMARY_METRIC = "jct_mean_s"


def _q(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q)) if values.size else math.nan


def compute_metrics(
    jobs: Iterable[JobState], acc: Accumulator, n_gpus: int, now_s: float
) -> dict[str, float]:
    """The episode's metrics under the schema's names (NaN where undefined)."""
    # The statuses as locals: an enum class's attribute read (``Status.DONE``) goes through
    # ``EnumType.__getattr__``'s hook in Python 3.11 (~800 instructions), ~10 of them a job
    # below (~0.2 G instructions at the end of a 20,000-job replay)
    FUTURE, QUEUED, RUNNING, DONE, FAILED = (
        Status.FUTURE, Status.QUEUED, Status.RUNNING, Status.DONE, Status.FAILED
    )  # fmt: skip
    jobs = list(jobs)
    offline = [j for j in jobs if not j.online and j.status is not FUTURE]
    done = [j for j in offline if j.status is DONE]
    # JCT counts every offline job that was not given up: finished jobs with their completion
    # time, unfinished ones (queued or running at the end) with their time in the system so far
    # (a lower bound). A policy cannot look fast by starving long or large jobs, and the
    # episode return of the env's default reward (time in system) tracks this number.
    alive = [j for j in offline if j.status in (DONE, QUEUED, RUNNING)]
    jct = np.array(
        [(j.ledger.finish_t if j.status is DONE else now_s) - j.spec.submit_s for j in alive]
    )
    started = [j for j in offline if not math.isnan(j.ledger.first_start_t)]
    qd = np.array([j.ledger.first_start_t - j.spec.submit_s for j in started])
    ran = [j.ledger for j in offline if j.ledger.run_time_s > 0]
    norm = np.array([led.norm_integral / led.run_time_s for led in ran])
    submitted = [j for j in jobs if j.status is not FUTURE]
    first_submit = min((j.spec.submit_s for j in offline), default=0.0)
    elapsed = max(acc.elapsed_s, 1e-9)
    m: dict[str, float] = {
        "jct_mean_s": float(jct.mean()) if jct.size else math.nan,
        "jct_p50_s": _q(jct, 0.5),
        "jct_p95_s": _q(jct, 0.95),
        "queue_delay_mean_s": float(qd.mean()) if qd.size else math.nan,
        "queue_delay_p90_s": _q(qd, 0.9),
        "makespan_s": (max(j.ledger.finish_t for j in done) - first_submit) if done else math.nan,
        "norm_throughput_mean": float(norm.mean()) if norm.size else math.nan,
        "stp": acc.stp_s / acc.busy_gpu_s if acc.busy_gpu_s > 0 else math.nan,
        "oversold_gpu": acc.oversold_s / acc.online_gpu_s if acc.online_gpu_s > 0 else math.nan,
        "jobs_submitted": float(len(submitted)),
        "jobs_completed": float(sum(j.status is DONE for j in submitted)),
        "jobs_failed": float(sum(j.status is FAILED for j in submitted)),
        "latency_mean_ms": acc.latency_weighted_ms / acc.requests if acc.requests else math.nan,
        "latency_p99_ms": acc.p99_weighted_ms / acc.requests if acc.requests else math.nan,
        "slo_attainment": acc.requests_ok / acc.requests if acc.requests else math.nan,
        "online_slowdown": acc.slowdown_weighted / acc.requests if acc.requests else math.nan,
        "gpu_util": acc.util_s / (elapsed * n_gpus),
        "sm_activity": acc.sm_s / (elapsed * n_gpus),
        "gpu_mem_util": acc.mem_s / (elapsed * n_gpus),
        "frag_gpu": acc.frag_sum / acc.frag_samples if acc.frag_samples else 0.0,
        "errors_total": float(acc.errors_total),
        "errors_propagated": float(acc.errors_propagated),
        "gpu_hours_lost": acc.gpu_hours_lost,
        "mig_reconfigs": float(acc.mig_reconfigs),
        "migrations": float(acc.migrations),
        "decisions": float(acc.decisions),
    }
    m = {k: float(v) for k, v in m.items()}
    assert tuple(m) == METRIC_NAMES
    # Extras beyond the schema (not part of the contract, but useful): prefixed "x_".
    m["x_sim_time_s"] = now_s
    m["x_evictions"] = float(acc.evictions)
    if acc.suspensions:  # (present once a policy has suspended a job: older records unchanged)
        m["x_suspensions"] = float(acc.suspensions)
    m["x_jobs_running"] = float(sum(j.status is RUNNING for j in submitted))
    m["x_jobs_queued"] = float(sum(j.status is QUEUED for j in submitted))
    for cause, n in sorted(acc.errors_by_cause.items()):
        m[f"x_errors_{cause}"] = float(n)
    return m
