"""The episode metrics' one pass (``evaluation/metrics.py``) gives what a pass per metric gave.

:func:`compute_metrics` reads every job record once (typed when compiled); the reference below is
the pass-per-metric computation it replaced (06dca0a). Compared bit for bit (``float.hex``, the
keys in order) in states with jobs in every status: mid-episode (future, queued, running), with
failures (faults, one attempt), with online services, and at the end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES, compute_metrics
from gpu_sharing_env.evaluation.runner import run_to_end, start_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_gym.baselines import make_policy
from tests.helpers import job, make_sim, nodes


def _q(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q)) if values.size else math.nan


#: The metrics read off the job records (the rest read the accumulator alone, as before).
_FROM_JOBS = (
    "jct_mean_s", "jct_p50_s", "jct_p95_s", "queue_delay_mean_s", "queue_delay_p90_s",
    "makespan_s", "norm_throughput_mean", "jobs_submitted", "jobs_completed", "jobs_failed",
    "x_jobs_running", "x_jobs_queued",
)  # fmt: skip


def _by_passes(jobs: Iterable[JobState], now_s: float) -> dict[str, float]:
    """:data:`_FROM_JOBS` as ``compute_metrics`` computed them at 06dca0a: a pass over the jobs
    per metric."""
    FUTURE, QUEUED, RUNNING, DONE, FAILED = (
        Status.FUTURE, Status.QUEUED, Status.RUNNING, Status.DONE, Status.FAILED
    )  # fmt: skip
    jobs = list(jobs)
    offline = [j for j in jobs if not j.online and j.status is not FUTURE]
    done = [j for j in offline if j.status is DONE]
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
    return {
        "jct_mean_s": float(jct.mean()) if jct.size else math.nan,
        "jct_p50_s": _q(jct, 0.5),
        "jct_p95_s": _q(jct, 0.95),
        "queue_delay_mean_s": float(qd.mean()) if qd.size else math.nan,
        "queue_delay_p90_s": _q(qd, 0.9),
        "makespan_s": (max(j.ledger.finish_t for j in done) - first_submit) if done else math.nan,
        "norm_throughput_mean": float(norm.mean()) if norm.size else math.nan,
        "jobs_submitted": float(len(submitted)),
        "jobs_completed": float(sum(j.status is DONE for j in submitted)),
        "jobs_failed": float(sum(j.status is FAILED for j in submitted)),
        "x_jobs_running": float(sum(j.status is RUNNING for j in submitted)),
        "x_jobs_queued": float(sum(j.status is QUEUED for j in submitted)),
    }


def _hexed(m: dict[str, float]) -> list[tuple[str, str]]:
    return [(k, "nan" if math.isnan(v) else float(v).hex()) for k, v in m.items()]


def _check(sim: Simulator, seen: set[Status]) -> None:
    jobs = sim.table.jobs.values()
    m = sim.metrics()
    assert tuple(m)[: len(METRIC_NAMES)] == METRIC_NAMES
    assert _hexed({k: m[k] for k in _FROM_JOBS}) == _hexed(_by_passes(jobs, sim.now))
    assert _hexed(compute_metrics(jobs, sim.acc, sim.n_gpus, sim.now)) == _hexed(m)
    seen.update(st.status for st in jobs)


def _cut_through(sim: Simulator, seed: int, end_s: float) -> set[Status]:
    """Run ``first_fit`` on ``sim``, checked at six cuts before ``end_s`` and at the end."""
    policy = make_policy("first_fit")
    start_episode(policy, sim, seed)
    seen: set[Status] = set()
    _check(sim, seen)
    for k in range(1, 7):
        run_to_end(policy, sim, until_s=end_s * k / 7)
        _check(sim, seen)
    run_to_end(policy, sim)
    _check(sim, seen)
    return seen


def test_one_pass_equals_the_passes_through_failures_and_every_status() -> None:
    jobs = [job(i, 3000.0 + 250.0 * i, submit_s=40.0 * i) for i in range(12)]
    sim = make_sim(
        jobs, nodes(gpus=2), faults={"rate_per_gpu_h": {"app_error": 0.2}, "max_attempts": 1}
    )
    seen = _cut_through(sim, 3, 12 * 3000.0)
    assert seen >= {Status.FUTURE, Status.QUEUED, Status.RUNNING, Status.DONE, Status.FAILED}


def test_one_pass_equals_the_passes_with_online_services() -> None:
    cfg = load_scenario("muxflow-t4")
    sim = make_simulator(cfg)
    seen = _cut_through(sim, 1, cfg.horizon_h * 3600.0)
    assert any(st.online for st in sim.table.jobs.values())
    assert seen >= {Status.QUEUED, Status.RUNNING, Status.DONE}
