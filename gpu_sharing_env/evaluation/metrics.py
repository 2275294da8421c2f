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


def _q2(values: np.ndarray, q0: float, q1: float) -> tuple[float, float]:
    """``(_q(values, q0), _q(values, q1))`` in one ``np.quantile`` call (one partition for
    both: the same order statistics and numpy's same interpolation, so the same doubles)."""
    if not values.size:
        return math.nan, math.nan
    out = np.quantile(values, (q0, q1))
    return float(out[0]), float(out[1])


def compute_metrics(
    jobs: Iterable[JobState], acc: Accumulator, n_gpus: int, now_s: float
) -> dict[str, float]:
    """The episode's metrics under the schema's names (NaN where undefined)."""
    # The statuses as locals: an enum class's attribute read (``Status.DONE``) goes through
    # ``EnumType.__getattr__``'s hook in Python 3.11 (~800 instructions)
    FUTURE, QUEUED, RUNNING, DONE, FAILED = (
        Status.FUTURE, Status.QUEUED, Status.RUNNING, Status.DONE, Status.FAILED
    )  # fmt: skip
    # One pass over the jobs, each list in the jobs' order (the arrays, sums and extremes are
    # those of a pass per metric). JCT counts every offline job that was not given up:
    # finished jobs with their completion time, unfinished ones (queued or running at the end)
    # with their time in the system so far (a lower bound). A policy cannot look fast by
    # starving long or large jobs, and the episode return of the env's default reward (time
    # in system) tracks this number. Compiled, the records are typed (``metrics.pxd``): their
    # fields are C reads.
    jct_l: list[float] = []
    qd_l: list[float] = []
    norm_l: list[float] = []
    n_submitted = n_done = n_failed = n_running = n_queued = 0
    first_submit = math.inf
    n_offline = 0
    n_done_offline = 0
    last_finish = math.nan
    for j in jobs:
        status = j.status
        if status is FUTURE:
            continue
        n_submitted += 1
        if status is DONE:
            n_done += 1
        elif status is FAILED:
            n_failed += 1
        elif status is RUNNING:
            n_running += 1
        elif status is QUEUED:
            n_queued += 1
        if j.online:
            continue
        led = j.ledger
        submit = j.spec.submit_s
        if n_offline == 0 or submit < first_submit:
            first_submit = submit
        n_offline += 1
        if status is DONE:
            jct_l.append(led.finish_t - submit)
            if n_done_offline == 0 or led.finish_t > last_finish:
                last_finish = led.finish_t
            n_done_offline += 1
        elif status is QUEUED or status is RUNNING:
            jct_l.append(now_s - submit)
        if not math.isnan(led.first_start_t):
            qd_l.append(led.first_start_t - submit)
        if led.run_time_s > 0:
            norm_l.append(led.norm_integral / led.run_time_s)
    jct = np.array(jct_l)
    qd = np.array(qd_l)
    norm = np.array(norm_l)
    if n_offline == 0:
        first_submit = 0.0
    elapsed = max(acc.elapsed_s, 1e-9)
    jct_p50, jct_p95 = _q2(jct, 0.5, 0.95)
    m: dict[str, float] = {
        "jct_mean_s": float(jct.mean()) if jct.size else math.nan,
        "jct_p50_s": jct_p50,
        "jct_p95_s": jct_p95,
        "queue_delay_mean_s": float(qd.mean()) if qd.size else math.nan,
        "queue_delay_p90_s": _q(qd, 0.9),
        "makespan_s": (last_finish - first_submit) if n_done_offline else math.nan,
        "norm_throughput_mean": float(norm.mean()) if norm.size else math.nan,
        "stp": acc.stp_s / acc.busy_gpu_s if acc.busy_gpu_s > 0 else math.nan,
        "oversold_gpu": acc.oversold_s / acc.online_gpu_s if acc.online_gpu_s > 0 else math.nan,
        "jobs_submitted": float(n_submitted),
        "jobs_completed": float(n_done),
        "jobs_failed": float(n_failed),
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
    m["x_jobs_running"] = float(n_running)
    m["x_jobs_queued"] = float(n_queued)
    for cause, n in sorted(acc.errors_by_cause.items()):
        m[f"x_errors_{cause}"] = float(n)
    return m
