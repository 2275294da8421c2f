"""The v2 reset's cheaper draw, second round (issue 51, the reset under 1 ms): each fast path
gives what the path it replaces gives, on random cases.

- ``new_spec`` compiled decides ``JobSpec.__post_init__``'s rules on C doubles
  (``job._rules_hold``) and calls ``__post_init__`` only where one breaks or a value is not a
  plain ``float``/``int``/``str``: the same spec, or the same error.
- What a scenario's weights give every reset (the weighted choices' cumulative weights, the
  request sizes, the users' Zipf weights, the period table, the tags' strings) is made once per
  value (``synthetic._constant``): a draw with the constants kept equals one with them made
  afresh, for configs that differ in each of them.
- The job loop's decimal rounding (``synthetic._fixed``) is ``float(f"{x:.nf}")``.
- The thinning's arithmetic (``synthetic._phases``, ``_thin``) keeps the times the numpy
  expression keeps.
- The services' draws (``services.generate_services``) as lists: main's services.
- The predictor's submissions per group in one typed pass (``predictor._subs_by_code``) equal
  the numpy blocks' (``predictor._COMPILED`` patched off).

``scripts/rollout_digest.py`` checks whole episodes against main's digests.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pytest

from gpu_sharing_env.workload import job, predictor, synthetic
from gpu_sharing_env.workload.job import JobKind, JobSpec, JobSpecError, ServiceSpec
from gpu_sharing_env.workload.predictor import OnlinePredictor, PredictorConfig, RunLog, TagCodes
from gpu_sharing_env.workload.synthetic import (
    SyntheticWorkloadConfig,
    arrival_rate_per_s,
    generate_workload,
)

NAMES = [f.name for f in fields(JobSpec)]
SVC = ServiceSpec(slo_ms=50.0, batch_size=8, base_rps=10.0, peak_rps=20.0)


def _valid() -> list[object]:
    return [
        7,
        JobKind.OFFLINE,
        "resnet50",
        12.5,
        1,
        0.5,
        8.0,
        4.0,
        900.0,
        900.0,
        -1.0,
        (),
        1800.0,
        "g1",
        "u2",
        0,
        None,
    ]


#: One field changed: each rule broken, each rule at its edge, values not plain floats.
CHANGES: list[dict[str, object]] = [
    {},
    {"model": "nope"},
    {"model": np.str_("bert")},
    {"submit_s": -1.0},
    {"submit_s": math.inf},
    {"submit_s": math.nan},
    {"submit_s": 0.0},
    {"submit_s": -0.0},
    {"submit_s": 3},
    {"submit_s": np.float64(3.5)},
    {"num_gpus": 0},
    {"num_gpus": True},
    {"num_gpus": 2, "gpu_frac": 0.5},
    {"num_gpus": 2, "gpu_frac": 1.0},
    {"gpu_frac": 0.0},
    {"gpu_frac": 1.5},
    {"gpu_frac": math.nan},
    {"mem_gb": 0.0},
    {"mem_gb": -2.0},
    {"mem_gb": math.inf},
    {"mem_gb": math.nan},
    {"cpu_cores": -1.0},
    {"cpu_cores": 0.0},
    {"cpu_cores": math.inf},
    {"cpu_cores": 4},
    {"work_s": 0.0},
    {"work_s": -math.inf},
    {"work_s": math.nan},
    {"est_work_s": 0.0},
    {"est_work_s": math.inf},
    {"checkpoint_interval_s": 0.0},
    {"checkpoint_interval_s": math.nan},
    {"checkpoint_interval_s": 1800},
    {"kind": JobKind.ONLINE},
    {"kind": JobKind.ONLINE, "service": SVC},
    {"service": SVC},
    {"true_mem_gb": 3.25},
    {"true_mem_gb": -0.5},
    {"true_mem_gb": 0.0},
]


def _made(make: object, values: list[object]) -> JobSpec | str:
    """``make(*values)``, or its error's message."""
    try:
        return make(*values)  # type: ignore[operator,no-any-return]
    except JobSpecError as exc:
        return str(exc)


@pytest.mark.parametrize("change", CHANGES, ids=[repr(c) for c in CHANGES])
def test_new_spec_rules_in_c_are_post_inits(change: dict[str, object]) -> None:
    values = [change.get(n, v) for n, v in zip(NAMES, _valid(), strict=True)]
    want = _made(job._make_new_spec(), values)  # (``__post_init__`` on every spec)
    got = _made(job._new_spec_slots, values)
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
    else:  # the same objects in every field
        assert all(getattr(got, n) is getattr(want, n) for n in NAMES)


def _workload(cfg: SyntheticWorkloadConfig, seed: int) -> tuple[object, ...]:
    """Everything a draw returns, as comparable values."""
    w = generate_workload(cfg, np.random.default_rng(seed), 8 * 3600.0)
    h = w.history
    return (
        [tuple(getattr(s, n) for n in NAMES) for s in w.jobs],
        h.group,
        h.user,
        h.gpus.tobytes(),
        h.work_s.tobytes(),
        h.submit_s.tobytes(),
        h.group_codes.names if h.group_codes else None,
        h.group_codes.index.tobytes() if h.group_codes else None,
        h.user_codes.names if h.user_codes else None,
        h.user_codes.index.tobytes() if h.user_codes else None,
        list(w.pattern.items()),
        list(w.period_s.items()),
        sorted(w.batch_inference),
    )


def _clear() -> None:
    synthetic._CONSTANTS.clear()
    synthetic._G_TAGS.clear()


def test_kept_constants_give_fresh_ones_draws() -> None:
    base = SyntheticWorkloadConfig()
    configs = [
        base,
        replace(base, model_mix={"bert": 0.5, "gnn": 0.25, "lstm": 0.25}),
        replace(base, model_mix={"bert": 0.25, "gnn": 0.5, "lstm": 0.25}),
        replace(base, high_gpu_models={"gpt2": 1.0}),
        replace(base, gpu_request_weights=(0.05, 0.05, 0.3, 0.3, 0.2, 0.1)),
        replace(base, gpu_request_sizes=(0.25, 0.5, 1.0), gpu_request_weights=(0.3, 0.3, 0.4)),
        replace(base, gpu_request_sizes=(0.5, 2.0), gpu_request_weights=(1.0, 0.0)),
        replace(base, num_users=7),
        replace(base, user_zipf_exponent=0.5),
        replace(base, period_h_choices=(2.0, 12.0), period_weights=(0.5, 0.5)),
        replace(base, period_weights=(0.1, 0.1, 0.8)),
        replace(base, type_constraint_sets=("T4",), type_constraint_share=0.5),
        replace(base, arrivals_per_h=30.0),
    ]
    fresh = []
    for k, cfg in enumerate(configs):
        _clear()
        fresh.append(_workload(cfg, k))
    # kept: every config's constants made, then each drawn again in another order
    for k in reversed(range(len(configs))):
        assert _workload(configs[k], k) == fresh[k], k
    for k in range(len(configs)):
        assert _workload(configs[k], k) == fresh[k], k


def test_fixed_is_the_f_string() -> None:
    rng = np.random.default_rng(6)
    halves = np.arange(0, 20_000) / 2000  # (ties at every n, and their neighbours)
    xs = np.concatenate(
        [
            rng.uniform(0, 100, size=10_000),
            halves,
            np.nextafter(halves, -1.0),
            np.nextafter(halves, 99.0),
            rng.integers(0, 1 << 62, size=10_000).view(np.float64),
            [-0.0, -0.0004, 0.0004, math.inf, -math.inf, 1e300, math.nan],
        ]
    ).tolist()
    for n in (1, 2, 3):
        got = [synthetic._fixed(x, n) for x in xs]
        want = [float(f"{x:.{n}f}") for x in xs]
        # (repr: the same double, a zero's sign and NaN included)
        assert [repr(g) for g in got] == [repr(w) for w in want], n


def test_thinning_in_typed_passes_keeps_numpys_times() -> None:
    rng = np.random.default_rng(9)
    day = synthetic.DAY_S
    for case in range(300):
        cfg = replace(
            SyntheticWorkloadConfig(),
            arrivals_per_h=float(rng.choice([0.5, 10.0, 37.0])),
            diurnal_amplitude=float(rng.choice([0.0, 0.5, 0.95])),
            peak_hour=float(rng.choice([0.0, 10.0, 23.5])),
            weekend_factor=float(rng.choice([0.8, 1.0, 1.7])),
        )
        n = int(rng.integers(0, 400))
        # times across weeks before and after 0, day edges (Saturday's start) included
        t = rng.uniform(-9 * day, 9 * day, size=n)
        t[: n // 8] = np.round(t[: n // 8] / day) * day
        t.sort()
        scale = float(rng.choice([1.0, 0.35, 0.0125]))
        peak = scale * cfg.arrivals_per_h / 3600.0 * 3.0
        u = rng.uniform(0.0, peak, size=n)
        want = t[u < scale * arrival_rate_per_s(cfg, t)]
        phase = np.empty(n)
        synthetic._phases(t, cfg.peak_hour * 3600.0, phase)
        week = 7.0 / (5.0 + 2.0 * cfg.weekend_factor)
        levels = (week, week * cfg.weekend_factor, cfg.arrivals_per_h / 3600.0)
        out = np.empty(n)
        m = synthetic._thin(t, u, np.cos(phase), *levels, cfg.diurnal_amplitude, scale, out)
        assert out[:m].tobytes() == want.tobytes(), case


class _Spy(np.random.Generator):
    """A generator that keeps what its ``uniform`` draws returned."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.drawn: list[np.ndarray] = []

    def uniform(self, *args: object, **kw: object) -> np.ndarray:  # type: ignore[override]
        out = super().uniform(*args, **kw)  # type: ignore[arg-type]
        self.drawn.append(out)
        return out  # type: ignore[no-any-return]


def test_arrivals_keep_what_numpys_thinning_keeps() -> None:
    for seed in range(40):
        cfg = replace(SyntheticWorkloadConfig(), weekend_factor=[0.8, 1.3][seed % 2])
        spy = _Spy(seed)
        scale = [1.0, 0.35, 0.02][seed % 3]
        got = synthetic._arrivals(cfg, spy, -168 * 3600.0, 8 * 3600.0, scale)
        t, u = np.sort(spy.drawn[0]), spy.drawn[1]  # (the times, then the thinning's doubles)
        assert got.tobytes() == t[u < scale * arrival_rate_per_s(cfg, t)].tobytes(), seed


def test_services_arithmetic_on_floats_is_float64s() -> None:
    # generate_services takes its draws as lists: each expression of a service's fields on a
    # float gives the double it gives on the float64 element (numpy's % is Python's rule)
    rng = np.random.default_rng(17)
    a = np.concatenate([rng.uniform(-30, 60, size=3000), [0.0, -0.0, 24.0, -24.0, 48.0]])
    for x64, x in zip(a, a.tolist(), strict=True):
        for period in (86_400.0, 3_600.0, 7 * 86_400.0):
            e64 = (x64 % 24.0) * 3600.0 * period / 86_400.0 - period / 4.0
            e = (x % 24.0) * 3600.0 * period / 86_400.0 - period / 4.0
            assert repr(float(e64 % period)) == repr(float(e % period))
        assert repr(round(float(x64) * 1.7, 3)) == repr(round(x * 1.7, 3))
        assert float(min(x64, 20.5)) == min(x, 20.5)


def _log(rng: np.random.Generator) -> RunLog:
    """A history with coded tags: unused names, the empty tag, equal times, any order."""
    n = int(rng.integers(0, 300))
    names = [f"g{k}" for k in range(int(rng.integers(1, 30)))] + [""]
    names = [names[i] for i in rng.permutation(len(names))]
    g_ix = rng.integers(0, len(names), size=n)
    submit = -np.round(rng.uniform(0, 5000, size=n), int(rng.integers(-3, 2)))
    return RunLog(
        group=[names[i] for i in g_ix.tolist()],
        user=[""] * n,
        gpus=np.ones(n),
        work_s=np.full(n, 60.0),
        submit_s=submit,
        group_codes=TagCodes(names, g_ix),
    )


def test_submissions_by_code_in_one_pass_are_the_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    logs = [_log(rng) for _ in range(200)]
    logs += [
        generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(s), 8 * 3600.0).history
        for s in range(4)
    ]
    cfg = PredictorConfig()
    monkeypatch.setattr(predictor, "_COMPILED", True)  # (interpreted too: the typed pass's code)
    got = [list(OnlinePredictor(cfg, h)._build_subs().items()) for h in logs]
    monkeypatch.setattr(predictor, "_COMPILED", False)
    want = [list(OnlinePredictor(cfg, h)._build_subs().items()) for h in logs]
    assert got == want
    # and the strings' path (no codes) agrees
    plain = [
        list(OnlinePredictor(cfg, replace(h, group_codes=None))._build_subs().items()) for h in logs
    ]
    assert plain == want


def test_names_at_is_the_comprehension() -> None:
    rng = np.random.default_rng(13)
    for _ in range(200):
        names = [f"t{k}" for k in range(int(rng.integers(1, 40)))]
        idx = rng.integers(0, len(names), size=int(rng.integers(0, 500))).astype(np.intp)
        got = synthetic._names_at(names, idx)
        assert got == [names[i] for i in idx.tolist()]
        assert all(a is names[i] for a, i in zip(got, idx.tolist(), strict=True))


def test_kept_name_orders_give_fresh_ones() -> None:
    rng = np.random.default_rng(14)
    cases = []
    for _ in range(100):  # (lists of one length with other names: the key is the names)
        names = [f"{c}{k}" for c, k in zip(rng.choice(list("gu"), 12), rng.integers(0, 30, 12))]
        names = list(dict.fromkeys(names))
        idx = rng.integers(0, len(names), size=50)
        order = rng.permutation(50)
        cases.append((TagCodes(names, idx), order))
    fresh = []
    for tags, order in cases:
        predictor._NAME_ORDERS.clear()
        codes, inv = predictor._sorted_codes(tags, order)
        fresh.append((codes, inv.tolist()))
        assert codes == sorted(tags.names)
    for (tags, order), want in zip(cases, fresh, strict=True):
        codes, inv = predictor._sorted_codes(tags, order)
        assert (codes, inv.tolist()) == want


def test_lexsort2_is_lexsort() -> None:
    rng = np.random.default_rng(15)
    for case in range(500):
        n = int(rng.integers(0, 300))
        # distinct majors, ties (rounded), signed zeros, NaNs, one element
        major = rng.uniform(-50, 50, size=n)
        kind = case % 5
        if kind == 1:
            major = np.round(major)
        elif kind == 2 and n:
            major[rng.integers(0, n, size=3)] = [0.0, -0.0, 0.0]
        elif kind == 3 and n:
            major[rng.integers(0, n, size=3)] = math.nan  # (NaNs tie with each other)
        minor = rng.integers(0, 5, size=n) if case % 2 else rng.uniform(size=n)
        got = predictor.lexsort2(minor, major)
        want = np.lexsort((minor, major))
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), case


def test_spawned_seeds_are_the_direct_ones() -> None:
    # Simulator.reset makes SeedSequence(seed).spawn(3)'s children directly
    for seed in [0, 1, 7, 2**31 - 1, 2**64 + 5, 12345678901234567890]:
        spawned = np.random.SeedSequence(seed).spawn(3)
        for i, child in enumerate(spawned):
            direct = np.random.SeedSequence(seed, spawn_key=(i,))
            assert direct.state == child.state
            a, b = np.random.default_rng(direct), np.random.default_rng(child)
            assert a.bit_generator.state == b.bit_generator.state


def test_slot_times_in_one_pass_are_numpys() -> None:
    rng = np.random.default_rng(16)
    for case in range(300):
        n = int(rng.integers(1, 12))
        periods = [float(p) * 3600.0 for p in rng.choice([1.0, 6.0, 24.0, 0.37], size=n)]
        phases = [float(rng.uniform(0, p)) for p in periods]
        t0, t1 = -168 * 3600.0, 8 * 3600.0
        k0s = [math.floor((t0 - ph) / p) for ph, p in zip(phases, periods, strict=True)]
        sizes = [
            math.ceil((t1 - ph) / p) + 1 - k for ph, p, k in zip(phases, periods, k0s, strict=True)
        ]
        jitters = [0.05 * p for p in periods]
        z = rng.standard_normal(sum(sizes)) * float(rng.choice([1.0, 40.0]))
        # numpy's arithmetic (main's _periodic_times)
        group = np.repeat(np.arange(n, dtype=np.int64), sizes)
        first = np.cumsum(sizes) - np.asarray(sizes)
        k = np.arange(group.size) - first[group] + np.array(k0s)[group]
        t = np.array(phases)[group] + np.asarray(periods)[group] * k
        t = t + np.array(jitters)[group] * z
        keep = (t >= t0) & (t < t1)
        t_out, g_out = np.empty(z.size), np.empty(z.size, dtype=np.intp)
        m = synthetic._slot_times(phases, k0s, periods, jitters, z, sizes, t0, t1, t_out, g_out)
        assert t_out[:m].tobytes() == t[keep].tobytes(), case
        assert g_out[:m].tolist() == group[keep].tolist(), case
