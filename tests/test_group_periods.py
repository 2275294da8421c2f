"""The predictor's group period (``OnlinePredictor.group_stats().period_s``: the median gap of
the group's submissions before now) is kept per (group, submissions before now): the same float
as the median computed afresh, as submissions come, in a copy whose submissions differ, and
asked at the same time twice."""

from __future__ import annotations

import copy
import math

import numpy as np

from gpu_sharing_env.workload.job import JobKind, JobSpec
from gpu_sharing_env.workload.predictor import OnlinePredictor, PredictorConfig


def _job(jid: int, group: str) -> JobSpec:
    return JobSpec(
        job_id=jid, kind=JobKind.OFFLINE, model="resnet50", submit_s=0.0, num_gpus=1,
        gpu_frac=1.0, mem_gb=8.0, cpu_cores=4.0, work_s=100.0, est_work_s=100.0, group=group,
    )  # fmt: skip


def _period(times: list[float], now: float) -> float:
    before = [t for t in times if t < now]
    return float(np.median(np.diff(before))) if len(before) >= 2 else math.nan


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or np.float64(a).tobytes() == np.float64(b).tobytes()


def test_period_kept_per_prefix_is_the_median_afresh() -> None:
    rng = np.random.default_rng(0)
    p = OnlinePredictor(PredictorConfig())
    mine: dict[str, list[float]] = {"a": [], "b": []}
    theirs: dict[str, list[float]] = {}
    twin: OnlinePredictor | None = None
    now = 0.0
    for k in range(200):
        now += float(rng.exponential(30.0))
        g = "a" if rng.uniform() < 0.6 else "b"
        p.note_submit(_job(k, g), now)
        mine[g].append(now)
        if twin is not None:  # (the copy's submissions differ from the original's after 100)
            h = "b" if g == "a" else "a"
            twin.note_submit(_job(k, h), now + 1.0)
            theirs[h].append(now + 1.0)
        for ask in (now, now + 0.5, now - 40.0, now):
            for grp in ("a", "b"):
                got = p.group_stats(_job(-1, grp), ask).period_s
                assert _same(got, _period(mine[grp], ask))
                if twin is not None:
                    got = twin.group_stats(_job(-1, grp), ask).period_s
                    assert _same(got, _period(theirs[grp], ask))
        if k == 100:
            twin = copy.deepcopy(p)
            theirs = {grp: list(ts) for grp, ts in mine.items()}


def test_period_with_ties_and_a_long_history_first() -> None:
    """Submissions at equal times (zero gaps), many before the first question (the gaps sorted
    at once), then one by one: numpy's median every time."""
    rng = np.random.default_rng(1)
    p = OnlinePredictor(PredictorConfig())
    times: list[float] = []
    now = 0.0
    for k in range(400):
        now += float(rng.choice([0.0, 0.0, 7.5, 60.0, rng.exponential(100.0)]))
        p.note_submit(_job(k, "g"), now)
        times.append(now)
        if k >= 300 or k in (2, 3, 50):
            got = p.group_stats(_job(-1, "g"), now + 1e-3).period_s
            assert _same(got, _period(times, now + 1e-3))


def test_period_falls_back_to_numpy_for_nan_and_negative_zero_gaps() -> None:
    """A gap that is NaN or -0.0 (an infinite time, or equal times one of which is -0.0) takes
    numpy's median itself: the same double (NaN where numpy gives NaN), before and after."""
    cases = [
        [0.0, 10.0, math.inf, math.inf, 40.0, 45.0],  # inf - inf: a NaN gap
        [-0.0, 0.0, 5.0, 5.0, 12.0],  # 0.0 - -0.0 = +0.0; tied times
        [0.0, -0.0, 3.0, 9.0, 9.0, 20.0],  # -0.0 - 0.0 = -0.0: a negative-zero gap
        [1.0, 2.0, 4.0, math.nan, 8.0, 16.0, 32.0],
    ]
    for n, times in enumerate(cases):
        p = OnlinePredictor(PredictorConfig())
        grp = f"g{n}"
        for k in range(2, len(times) + 1):
            got = p._median_gap(grp, times, k)
            assert _same(got, float(np.median(np.diff(times[:k])))), (times, k)
        for k in (2, len(times)):  # asked again, shorter and whole
            got = p._median_gap(grp, times, k)
            assert _same(got, float(np.median(np.diff(times[:k])))), (times, k)
