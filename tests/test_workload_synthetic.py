"""The synthetic generator hits the PAI figures it targets; services and estimates behave.

Targets and tolerances (defaults, 14 days at 100 arrivals/h, ~34 k jobs a seed; figures of the
job mix pooled over seeds 0-3, each with its own past (``past_seed`` 0-3: four clusters; one
cluster's episodes share its groups, and a few hourly groups weigh heavily in one cluster's mix):
fractional share 0.58 +- 0.03 (0.60 of requests x 0.96 not high-GPU); gang share 0.127 +- 0.02;
p99/p1 run-time span >= 3.5 orders of magnitude; median run time 900 s +- 15 %; diurnal
peak/trough 3.0 +- 0.6; recurring share 0.65 +- 0.02 (every group >= 5 runs in the log);
type-constrained share 0.06 +- 0.015; memory over-use 0.03 +- 0.01; mean rate 100/h +- 3 %;
periodic gaps' CV about sqrt(2) x the jitter (0.07).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_sharing_env.workload.estimates import attach_estimates
from gpu_sharing_env.workload.job import JobKind, JobSpec
from gpu_sharing_env.workload.services import (
    ServiceWorkloadConfig,
    generate_services,
    solo_latency_ms,
)
from gpu_sharing_env.workload.stats import PAI_TARGETS, summarize
from gpu_sharing_env.workload.synthetic import (
    BURSTY,
    DEFAULT_HIGH_GPU_MIX,
    PERIODIC,
    SyntheticWorkload,
    SyntheticWorkloadConfig,
    arrival_rate_per_s,
    generate_jobs,
    generate_workload,
)

HORIZON_S = 14 * 86_400.0
CFG = SyntheticWorkloadConfig(arrivals_per_h=100.0)


@pytest.fixture(scope="module")
def draws() -> list[SyntheticWorkload]:
    # (four clusters: workload version 3's episodes of one cluster share its groups)
    return [
        generate_workload(replace(CFG, past_seed=s), np.random.default_rng(s), HORIZON_S)
        for s in range(4)
    ]


@pytest.fixture(scope="module")
def jobs(draws: list[SyntheticWorkload]) -> list[JobSpec]:
    return draws[0].jobs


@pytest.fixture(scope="module")
def pooled(draws: list[SyntheticWorkload]) -> list[JobSpec]:
    return [j for d in draws for j in d.jobs]


def test_ids_sorted_and_offline(jobs: list[JobSpec]) -> None:
    assert [j.job_id for j in jobs] == list(range(len(jobs)))
    submits = [j.submit_s for j in jobs]
    assert submits == sorted(submits)
    assert all(j.kind is JobKind.OFFLINE and 0 <= j.submit_s < HORIZON_S for j in jobs)
    assert all(j.est_work_s == j.work_s for j in jobs)


def test_mean_arrival_rate(pooled: list[JobSpec]) -> None:
    assert len(pooled) / 4 / (HORIZON_S / 3600) == pytest.approx(100.0, rel=0.03)


def test_fractional_and_gang_shares(jobs: list[JobSpec], pooled: list[JobSpec]) -> None:
    s = summarize(pooled, HORIZON_S)
    assert s.frac_request_share == pytest.approx(0.58, abs=0.03)
    assert s.median_gpu_request == 0.5  # PAI's median request
    assert s.gang_share == pytest.approx(0.127, abs=0.02)
    assert {j.num_gpus for j in jobs if j.num_gpus > 1} == {2, 4, 8}
    assert all(j.num_gpus == 1 for j in jobs if j.gpu_frac < 1)


def test_duration_span_four_orders(jobs: list[JobSpec], pooled: list[JobSpec]) -> None:
    s = summarize(pooled, HORIZON_S)
    assert s.span_p99_p1_orders >= 3.5
    assert s.duration_q["p50"] == pytest.approx(900.0, rel=0.15)
    assert s.duration_q["p50"] < 1144.0  # PAI runs shorter than Philly (philly.csv median)
    assert min(j.work_s for j in jobs) >= CFG.duration_min_s


def test_diurnal_peak_trough(pooled: list[JobSpec]) -> None:
    s = summarize(pooled, HORIZON_S)
    assert s.diurnal_peak_trough == pytest.approx(3.0, abs=0.6)
    assert int(np.argmax(s.diurnal_profile)) in (9, 10, 11)  # morning peak (peak_hour 10)
    # The intensity itself: exactly (1 + A) / (1 - A) between 10:00 and 22:00 of a weekday.
    r = arrival_rate_per_s(CFG, np.array([10 * 3600.0, 22 * 3600.0]))
    assert r[0] / r[1] == pytest.approx(3.0)


def test_weekly_mean_rate_is_the_parameter() -> None:
    t = np.arange(0.0, 7 * 86_400.0, 60.0)
    assert arrival_rate_per_s(CFG, t).mean() * 3600 == pytest.approx(100.0, rel=1e-3)


def test_recurring_groups(draws: list[SyntheticWorkload], pooled: list[JobSpec]) -> None:
    assert summarize(pooled, HORIZON_S).recurring_share == pytest.approx(0.65, abs=0.02)
    d = draws[0]
    groups: dict[str, list[JobSpec]] = defaultdict(list)
    for j in d.jobs:
        if j.group:
            groups[j.group].append(j)
    assert min(len(g) for g in groups.values()) >= CFG.group_size_min
    # Members share what the user submits; run times stay close (sigma 0.1-0.3 vs 2.0 overall).
    spreads = []
    for g in groups.values():
        assert len({(j.model, j.num_gpus, j.gpu_frac, j.user, j.gpu_types) for j in g}) == 1
        spreads.append(float(np.std(np.log([j.work_s for j in g]))))
    assert float(np.median(spreads)) < 0.3
    assert float(np.std(np.log([j.work_s for j in d.jobs]))) > 1.5
    assert set(d.pattern.values()) == {PERIODIC, BURSTY}
    # Recurring arrivals: periodic_share of them from periodic groups.
    per = sum(1 for j in d.jobs if d.pattern.get(j.group) == PERIODIC)
    rec = sum(1 for j in d.jobs if j.group)
    assert per / rec == pytest.approx(CFG.periodic_share, abs=0.05)


def test_periodic_groups_keep_their_period(draws: list[SyntheticWorkload]) -> None:
    d = draws[0]
    times: dict[str, list[float]] = defaultdict(list)
    for g, t in zip(d.history.group, d.history.submit_s.tolist(), strict=True):
        times[g].append(t)
    for j in d.jobs:
        times[j.group].append(j.submit_s)
    cvs = []
    for g, p in d.period_s.items():
        gaps = np.diff(np.sort(times[g]))
        assert float(np.median(gaps)) == pytest.approx(p, rel=0.05)
        cvs.append(float(np.std(gaps) / np.mean(gaps)))
        assert p >= CFG.period_run_ratio * 900.0 / 20 or p == 86_400.0  # (a loose sanity bound)
    # jitter 0.05 of the period on each slot: gaps' CV about sqrt(2) x 0.05
    assert float(np.median(cvs)) == pytest.approx(math.sqrt(2) * CFG.period_jitter, abs=0.02)


def test_bursty_sweeps_arrive_within_minutes(draws: list[SyntheticWorkload]) -> None:
    d = draws[0]
    times: dict[str, list[float]] = defaultdict(list)
    for j in d.jobs:
        if d.pattern.get(j.group) == BURSTY:
            times[j.group].append(j.submit_s)
    gaps = np.concatenate([np.diff(t) for t in times.values()])
    # most gaps inside a sweep (mean 60 s), a few between sweeps (mean 72 h)
    assert float(np.median(gaps)) < 120.0
    assert float(np.mean(gaps > 3600.0)) < 0.2


def test_batch_inference_tighter_than_training(draws: list[SyntheticWorkload]) -> None:
    d = draws[0]
    runs: dict[str, list[float]] = defaultdict(list)
    for j in d.jobs:
        if j.group and j.work_s > CFG.duration_min_s:
            runs[j.group].append(math.log(j.work_s))
    big = {g: float(np.std(v, ddof=1)) for g, v in runs.items() if len(v) >= 20}
    inf = [v for g, v in big.items() if g in d.batch_inference]
    train = [v for g, v in big.items() if g not in d.batch_inference]
    assert len(inf) >= 5 and len(train) >= 5
    assert float(np.median(inf)) == pytest.approx(CFG.inference_duration_sigma, abs=0.02)
    assert float(np.median(train)) == pytest.approx(CFG.group_duration_sigma, abs=0.05)
    assert d.batch_inference <= set(d.period_s)  # batch inference runs on a schedule


def test_history_precedes_the_episode(draws: list[SyntheticWorkload]) -> None:
    d = draws[0]
    h = d.history
    assert len(h) > 0 and float(h.submit_s.max()) < 0.0
    assert float(h.submit_s.min()) >= -CFG.history_h * 3600.0
    # the history continues the episode's groups at the same rate
    assert len(h) / CFG.history_h == pytest.approx(len(d.jobs) / (HORIZON_S / 3600), rel=0.1)
    assert {g for g in h.group if g} <= set(d.pattern)


def test_type_constraints_and_high_gpu(jobs: list[JobSpec], pooled: list[JobSpec]) -> None:
    s = summarize(pooled, HORIZON_S)
    assert s.type_constrained_share == pytest.approx(
        PAI_TARGETS["type_constrained_share"].value, abs=0.015
    )
    high = [j for j in pooled if j.gpu_types == CFG.high_end_types]
    assert len(high) / len(pooled) == pytest.approx(0.04, abs=0.015)
    assert all(
        j.model in DEFAULT_HIGH_GPU_MIX and j.gpu_frac == 1 and j.priority == 1 for j in high
    )


def test_users_heavy_tailed(pooled: list[JobSpec]) -> None:
    assert summarize(pooled, HORIZON_S).top5pct_user_share == pytest.approx(0.77, abs=0.1)


def test_memory_overuse_probability(jobs: list[JobSpec]) -> None:
    over = np.mean([j.true_mem_gb > j.mem_gb for j in jobs])
    assert over == pytest.approx(CFG.mem_overuse_prob, abs=0.01)
    under = [j.true_mem_gb / j.mem_gb for j in jobs if j.true_mem_gb <= j.mem_gb]
    assert float(np.median(under)) == pytest.approx(CFG.mem_use_median, abs=0.05)
    frac = [j for j in jobs if j.gpu_frac < 1]
    assert all(j.mem_gb == pytest.approx(16.0 * j.gpu_frac) for j in frac)


def test_deterministic_for_equal_seeds() -> None:
    cfg = SyntheticWorkloadConfig()
    a = generate_jobs(cfg, np.random.default_rng(7), 86_400.0)
    b = generate_jobs(cfg, np.random.default_rng(7), 86_400.0)
    c = generate_jobs(cfg, np.random.default_rng(8), 86_400.0)
    assert a == b
    assert a != c


def test_empty_horizon_and_zero_rate() -> None:
    assert generate_jobs(SyntheticWorkloadConfig(), np.random.default_rng(0), 0.0) == []
    cfg = SyntheticWorkloadConfig(arrivals_per_h=0.0)
    assert generate_jobs(cfg, np.random.default_rng(0), 86_400.0) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"diurnal_amplitude": 1.0}, "diurnal_amplitude"),
        ({"gpu_request_sizes": (0.5, 1.5), "gpu_request_weights": (1, 1)}, "gpu_request_sizes"),
        ({"gpu_request_weights": (1.0,)}, "gpu_request_weights"),
        ({"model_mix": {"alexnet": 1.0}}, "model_mix"),
        ({"high_end_types": ("B200",)}, "high_end_types"),
        ({"recurring_share": 1.5}, "recurring_share"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SyntheticWorkloadConfig(**kwargs)  # type: ignore[arg-type]


def test_config_loads_from_scenario_params() -> None:
    from gpu_sharing_env.config import ConfigError, from_dict

    cfg = from_dict(SyntheticWorkloadConfig, {"arrivals_per_h": 5, "model_mix": {"bert": 1}})
    assert cfg.arrivals_per_h == 5.0 and dict(cfg.model_mix) == {"bert": 1.0}
    with pytest.raises(ConfigError, match="diurnal_amplitude"):
        from_dict(SyntheticWorkloadConfig, {"diurnal_amplitude": 2.0}, src="x.yaml")


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rate=st.floats(0.5, 50.0),
    hours=st.floats(0.5, 48.0),
    recurring=st.floats(0.0, 1.0),
)
def test_any_config_yields_valid_sorted_jobs(
    seed: int, rate: float, hours: float, recurring: float
) -> None:
    cfg = SyntheticWorkloadConfig(arrivals_per_h=rate, recurring_share=recurring)
    d = generate_workload(cfg, np.random.default_rng(seed), hours * 3600.0)
    out = d.jobs
    assert [j.job_id for j in out] == list(range(len(out)))
    assert all(out[i].submit_s <= out[i + 1].submit_s for i in range(len(out) - 1))
    # Every periodic group runs >= group_size_min times in the log (a week of history holds
    # 7 daily slots); a bursty group may have been cut by the window's end.
    runs: dict[str, int] = defaultdict(int)
    for g in [*d.history.group, *(j.group for j in out)]:
        runs[g] += 1
    assert all(runs[g] >= cfg.group_size_min for g, p in d.pattern.items() if p == PERIODIC)


# ----------------------------------------------------------------------------------- services


def test_services_schema_and_rates() -> None:
    cfg = ServiceWorkloadConfig(num_services=40)
    svcs = generate_services(cfg, np.random.default_rng(3), 86_400.0, first_job_id=100)
    assert [s.job_id for s in svcs] == list(range(100, 140))
    for s in svcs:
        assert s.kind is JobKind.ONLINE and s.service is not None
        assert s.submit_s == 0.0 and s.work_s == s.est_work_s == 86_400.0
        svc = s.service
        lat = solo_latency_ms(s.model, svc.batch_size)
        assert svc.peak_rps <= cfg.peak_rps_max
        assert svc.peak_rps <= cfg.max_load * svc.batch_size / lat * 1000 + 1e-6
        assert 0.2 * svc.peak_rps - 1e-3 <= svc.base_rps <= 0.5 * svc.peak_rps + 1e-3
        assert svc.slo_ms == pytest.approx(max(10.0, svc.slo_ms), abs=0.01)
        assert 5 * lat - 0.01 <= svc.slo_ms <= max(10.0, 10 * lat) + 0.01
        # The sine peaks in the evening (20:00 +- 2 h) and is periodic over the day.
        grid = np.arange(0, 86_400, 60)
        peak_h = grid[int(np.argmax([svc.rate_rps(float(t)) for t in grid]))] / 3600
        assert 18 - 0.05 <= peak_h <= 22 + 0.05
        assert svc.rate_rps(1234.0) == pytest.approx(svc.rate_rps(1234.0 + 86_400.0))
    assert {s.model for s in svcs} <= set(cfg.model_mix)
    assert max(s.service.peak_rps for s in svcs if s.service) > 100  # MuxFlow: up to 190 q/s


def test_services_deterministic_and_lifetime() -> None:
    cfg = ServiceWorkloadConfig(num_services=3, lifetime_s=600.0)
    a = generate_services(cfg, np.random.default_rng(1), 86_400.0, 0)
    assert a == generate_services(cfg, np.random.default_rng(1), 86_400.0, 0)
    assert all(s.work_s == 600.0 for s in a)
    assert generate_services(replace(cfg, num_services=0), np.random.default_rng(1), 1.0, 0) == []


# ---------------------------------------------------------------------------------- estimates


def _err(jobs: list[JobSpec]) -> np.ndarray:
    return np.abs(np.log([j.est_work_s / j.work_s for j in jobs]))


def test_estimates_sigma_zero_is_exact(jobs: list[JobSpec]) -> None:
    out = attach_estimates(jobs[:500], np.random.default_rng(0), sigma=0.0)
    assert all(j.est_work_s == j.work_s for j in out)


def test_estimates_never_exact_and_deterministic(jobs: list[JobSpec]) -> None:
    sub = jobs[:3000]
    a = attach_estimates(sub, np.random.default_rng(5), sigma=0.5)
    b = attach_estimates(sub, np.random.default_rng(5), sigma=0.5)
    assert a == b
    assert all(x.est_work_s != x.work_s and x.est_work_s > 0 for x in a)
    assert [replace(x, est_work_s=y.est_work_s) for x, y in zip(a, sub)] == sub  # only est changes


def test_estimates_groups_beat_blind_noise(jobs: list[JobSpec]) -> None:
    sub = jobs[:5000]
    grouped = attach_estimates(sub, np.random.default_rng(1), sigma=1.0)
    blind = attach_estimates(sub, np.random.default_rng(1), sigma=1.0, use_groups=False)
    seen: set[str] = set()
    later = []
    for i, j in enumerate(sub):
        if j.group and j.group in seen:
            later.append(i)
        seen.add(j.group)
    assert len(later) > 1000
    g = _err([grouped[i] for i in later])
    b = _err([blind[i] for i in later])
    # Blind: |N(0, 1)| has median 0.674; with history the error is the group spread (sigma 0.2)
    # plus sigma/3 noise, well under half of that.
    assert float(np.median(b)) == pytest.approx(0.674, abs=0.06)
    assert float(np.median(g)) < 0.5 * float(np.median(b))
    first = [i for i in range(len(sub)) if i not in set(later)]
    assert float(np.median(_err([grouped[i] for i in first]))) == pytest.approx(0.674, abs=0.08)


def test_estimates_leave_services_alone() -> None:
    svcs = generate_services(
        ServiceWorkloadConfig(num_services=2), np.random.default_rng(0), 3600.0, 0
    )
    assert attach_estimates(svcs, np.random.default_rng(0), sigma=1.0) == svcs
    with pytest.raises(ValueError, match="sigma"):
        attach_estimates(svcs, np.random.default_rng(0), sigma=-1.0)
    assert math.isfinite(svcs[0].est_work_s)


def test_with_estimate_is_replace_of_the_estimate() -> None:
    # ``with_estimate`` copies the fields through the slots (no ``__init__``): the spec
    # ``dataclasses.replace`` makes, and its error for a bad estimate
    from gpu_sharing_env.workload.job import JobSpecError

    w = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(2), 12 * 3600.0)
    svcs = generate_services(ServiceWorkloadConfig(), np.random.default_rng(4), 86_400.0, 10**6)
    rng = np.random.default_rng(3)
    specs = [*w.jobs, *svcs, replace(w.jobs[0], gpu_types=("A100", "T4"), priority=2)]
    assert any(s.online for s in specs)
    for s in specs:
        est = float(rng.lognormal(6.0, 2.0))
        new = s.with_estimate(est)
        ref = replace(s, est_work_s=est)
        assert new == ref and type(new) is JobSpec and new is not s
        assert [getattr(new, f) for f in JobSpec.__slots__] == [
            getattr(ref, f) for f in JobSpec.__slots__
        ]
        for bad in (0.0, -1.0, math.inf, math.nan):
            with pytest.raises(JobSpecError) as got:
                s.with_estimate(bad)
            with pytest.raises(JobSpecError) as want:
                replace(s, est_work_s=bad)
            assert str(got.value) == str(want.value)


def test_offline_specs_are_jobspecs() -> None:
    # ``offline_specs`` checks the rules column by column and writes the fields through the
    # slots: the specs ``JobSpec(...)`` builds one by one, or its error for the first bad row
    from gpu_sharing_env.workload.job import MODEL_CLASSES, JobSpecError, offline_specs

    rng = np.random.default_rng(51)
    edges = [math.nan, math.inf, -math.inf, -0.0, 0.0, -1.0, -0.5, 1.0, 2.0, 0.5, 1e-300]
    fast = 0
    for _ in range(1500):
        n = int(rng.integers(0, 12))
        gang = rng.uniform(size=n) < 0.3
        cols: dict[str, list] = {
            "model": [str(m) for m in rng.choice(MODEL_CLASSES, size=n)],
            "submit_s": rng.uniform(0, 1e4, size=n).tolist(),
            "num_gpus": np.where(gang, rng.integers(1, 9, size=n), 1).tolist(),
            "gpu_frac": np.where(gang, 1.0, rng.choice([0.25, 0.5, 1.0], size=n)).tolist(),
            "mem_gb": rng.uniform(0.5, 80, size=n).tolist(),
            "cpu_cores": rng.choice([0.0, 2.0, 6.5], size=n).tolist(),
            "work_s": rng.lognormal(6, 2, size=n).tolist(),
            "gpu_types": [("V100",) if k % 3 else () for k in range(n)],
            "group": [f"g{k % 4}" for k in range(n)],
            "user": [f"u{k % 3}" for k in range(n)],
            "priority": rng.integers(-2, 3, size=n).tolist(),
        }
        if n and rng.uniform() < 0.6:  # one or two cells broken (or an edge that is legal)
            for _ in range(int(rng.integers(1, 3))):
                name = str(rng.choice(list(cols)[:7]))
                k = int(rng.integers(0, n))
                if name == "model":
                    cols[name][k] = str(rng.choice(["resnet", "", MODEL_CLASSES[0]]))
                elif name == "num_gpus":
                    cols[name][k] = int(rng.choice([0, -1, 1, 2]))
                else:
                    cols[name][k] = float(rng.choice(edges))
        try:
            want = [
                JobSpec(
                    job_id=i,
                    kind=JobKind.OFFLINE,
                    **{c: v[i] for c, v in cols.items()},
                    est_work_s=cols["work_s"][i],
                )
                for i in range(n)
            ]
        except JobSpecError as e:
            with pytest.raises(JobSpecError) as got:
                offline_specs(**cols)
            assert str(got.value) == str(e)
            continue
        got_specs = offline_specs(**cols)
        fast += n > 0
        assert got_specs == want
        for a, b in zip(got_specs, want, strict=True):
            for f in JobSpec.__slots__:
                x, y = getattr(a, f), getattr(b, f)
                assert type(x) is type(y) and (x == y or (x != x and y != y)), f
                if isinstance(x, float):
                    assert math.copysign(1.0, x) == math.copysign(1.0, y), f
    assert fast > 300
