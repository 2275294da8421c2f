"""The episode reset's cheaper draw (issue 51, the v2 step bar): each fast path gives what the
path it replaces gives, on random cases.

- The predictor's warm start and its submissions per group from a history's tag codes
  (:class:`TagCodes`, what the generator hands on) equal those from the tag strings alone.
- The periodic groups' submissions computed in one pass over every group's slots equal the
  per-group computation (the same doubles, the same generator state after).
- The template loop's period-weights memo, indexed by how many distinct periods lie below
  ``ratio * base``, sees one allowed-period set per index.
- ``new_spec`` builds the spec ``JobSpec(...)`` builds, or raises its error.
- The warm start's typed passes (compiled: ``predictor._COMPILED``) give the numpy
  expressions' state on the generator's histories (``tests/test_reset_passes.py`` checks the
  passes themselves on random cases).

``tests/test_golden.py`` and ``scripts/rollout_digest.py`` check whole episodes.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import fields, replace

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import build_workload
from gpu_sharing_env.workload import predictor
from gpu_sharing_env.workload.job import JobKind, JobSpec, JobSpecError, new_spec
from gpu_sharing_env.workload.predictor import (
    OnlinePredictor,
    PredictorConfig,
    RunLog,
    TagCodes,
)
from gpu_sharing_env.workload.synthetic import (
    SyntheticWorkloadConfig,
    _periodic_draws,
    _periodic_times,
    generate_workload,
)


def _random_log(rng: np.random.Generator) -> RunLog:
    """A history with coded tags: unused names, the empty tag, equal times, any order."""
    n = int(rng.integers(0, 60))
    g_names = [f"g{k}" for k in range(int(rng.integers(1, 14)))] + [""]
    u_names = [f"u{k}" for k in range(int(rng.integers(1, 12)))]
    perm = rng.permutation(len(g_names))  # (codes need not follow the names' str order)
    g_names = [g_names[i] for i in perm]
    g_ix = rng.integers(0, len(g_names), size=n)
    u_ix = rng.integers(0, len(u_names), size=n)
    submit = -np.round(rng.uniform(0, 5000, size=n), int(rng.integers(-3, 2)))
    work = np.round(np.exp(rng.uniform(1, 9, size=n)), int(rng.integers(-2, 2)))
    return RunLog(
        group=[g_names[i] for i in g_ix.tolist()],
        user=[u_names[i] for i in u_ix.tolist()],
        gpus=rng.choice([0.25, 0.5, 1.0, 2.0, 8.0], size=n),
        work_s=work,
        submit_s=submit,
        group_codes=TagCodes(g_names, g_ix),
        user_codes=TagCodes(u_names, u_ix),
    )


def _state(p: OnlinePredictor) -> tuple[object, ...]:
    subs = p._build_subs()
    return (
        p._hist_x.tobytes(),
        p._hist_x.shape,
        p._hist_y.tobytes(),
        list(p._g.items()),
        list(p._u.items()),
        p._sum,
        type(p._sum),
        list(subs.items()),
    )


@pytest.mark.parametrize(
    "inputs", [("group", "user", "request"), ("user", "request"), ("group",), ()]
)
def test_warm_start_from_codes_equals_from_strings(inputs: tuple[str, ...]) -> None:
    rng = np.random.default_rng(11)
    cfg = PredictorConfig(inputs=inputs)
    for case in range(150):
        log = _random_log(rng)
        plain = replace(log, group_codes=None, user_codes=None)
        assert _state(OnlinePredictor(cfg, log)) == _state(OnlinePredictor(cfg, plain)), case


def test_warm_start_from_the_generators_codes_equals_from_strings() -> None:
    for seed in range(4):
        log = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(seed), 8 * 3600.0)
        plain = replace(log.history, group_codes=None, user_codes=None)
        assert _state(OnlinePredictor(PredictorConfig(), log.history)) == _state(
            OnlinePredictor(PredictorConfig(), plain)
        )


def _periodic_times_per_group(
    cfg: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    periods_s: list[float],
    t0_s: float,
    t1_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The per-group computation the one pass replaces (main before it)."""
    times, labels = [], []
    for k, period_s in enumerate(periods_s):
        phase, k0, z = _periodic_draws(cfg, rng, period_s, t0_s, t1_s)
        slots = phase + period_s * np.arange(k0, k0 + z.size)
        t = slots + cfg.period_jitter * period_s * z
        t = t[(t >= t0_s) & (t < t1_s)]
        times.append(t)
        labels.append(np.full(t.size, k, dtype=np.int64))
    if not times:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(times), np.concatenate(labels)


def test_periodic_times_in_one_pass_equal_per_group() -> None:
    rng = np.random.default_rng(5)
    for case in range(200):
        cfg = SyntheticWorkloadConfig(
            period_jitter=float(rng.choice([0.0, 0.05, 0.5])),
            diurnal_amplitude=float(rng.uniform(0, 0.9)),
        )
        periods = rng.choice([600.0, 3600.0, 21600.0, 86400.0, 7 * 86400.0, 1e-3 + 5e3], size=8)
        periods_l = periods[: int(rng.integers(0, 9))].tolist()
        t0 = -float(rng.choice([0.0, 3600.0, 168 * 3600.0]))
        t1 = float(rng.uniform(1.0, 3e5))
        seed = int(rng.integers(1 << 30))
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        ta, la = _periodic_times(cfg, a, periods_l, t0, t1)
        tb, lb = _periodic_times_per_group(cfg, b, periods_l, t0, t1)
        assert ta.tobytes() == tb.tobytes() and la.tolist() == lb.tolist(), case
        assert a.bit_generator.state == b.bit_generator.state, case


def test_period_memo_index_fixes_the_allowed_periods() -> None:
    # generate_workload's memo: the allowed set ``p >= ratio * base`` is a function of the
    # count of distinct periods below ``ratio * base``.
    rng = np.random.default_rng(2)
    for _ in range(200):
        periods = rng.choice([1.0, 6.0, 24.0, 12.0, 0.5], size=int(rng.integers(1, 6))) * 3600.0
        periods_s = periods.tolist()
        distinct = sorted(set(periods_s))
        seen: dict[int, tuple[bool, ...]] = {}
        xs = [
            *rng.uniform(0, 1e5, size=50).tolist(),
            *periods_s,
            *(math.nextafter(p, 0) for p in periods_s),
        ]
        for x in xs:
            key = tuple(p >= x for p in periods_s)
            assert seen.setdefault(bisect.bisect_left(distinct, x), key) == key


def _spec_values(rng: np.random.Generator) -> list[object]:
    online = bool(rng.random() < 0.1)
    values: list[object] = [
        int(rng.integers(0, 100)),
        JobKind.ONLINE if online else JobKind.OFFLINE,
        str(rng.choice(["resnet50", "bert", "not-a-model"], p=[0.5, 0.45, 0.05])),
        float(rng.choice([0.0, 5.0, -1.0, math.inf], p=[0.2, 0.7, 0.05, 0.05])),
        int(rng.choice([1, 2, 0], p=[0.7, 0.25, 0.05])),
        float(rng.choice([0.5, 1.0, 0.0], p=[0.5, 0.45, 0.05])),
        float(rng.choice([8.0, 0.0, math.nan], p=[0.9, 0.05, 0.05])),
        float(rng.choice([4.0, -1.0], p=[0.95, 0.05])),
        float(rng.choice([100.0, 0.0], p=[0.95, 0.05])),
        float(rng.choice([90.0, math.inf], p=[0.95, 0.05])),
        float(rng.choice([-1.0, 3.5], p=[0.5, 0.5])),
        ("T4",) if rng.random() < 0.2 else (),
        1800.0,
        "g1",
        "u2",
        int(rng.integers(0, 2)),
        None,
    ]
    return values


def test_new_spec_equals_the_constructor_or_raises_its_error() -> None:
    assert [f.name for f in fields(JobSpec)] == list(new_spec.__code__.co_varnames[:17])
    rng = np.random.default_rng(8)
    for case in range(600):
        values = _spec_values(rng)
        try:
            want = JobSpec(*values)  # type: ignore[arg-type]
        except JobSpecError as e:
            with pytest.raises(JobSpecError, match=f"^{re.escape(str(e))}$"):
                new_spec(*values)
            continue
        got = new_spec(*values)
        assert got == want and type(got) is JobSpec, case
        assert [getattr(got, f.name) for f in fields(JobSpec)] == [
            getattr(want, f.name) for f in fields(JobSpec)
        ]


def test_formatted_float_is_round() -> None:
    # generate_workload's rounding: float(f"{x:.nf}") is round(x, n), the same double (ties,
    # their neighbours, random doubles of every exponent, signed zeros).
    rng = np.random.default_rng(4)
    ties = (np.arange(0, 40_000) / 2000).tolist()
    xs = [
        *rng.uniform(0, 40, size=20_000).tolist(),
        *ties,
        *(math.nextafter(x, -1.0) for x in ties),
        *(math.nextafter(x, 99.0) for x in ties),
        *rng.integers(0, 1 << 62, size=20_000).view(np.float64).tolist(),
        -0.0,
        -0.0004,
        0.0004,
    ]
    for n in (1, 2, 3):
        for x in xs:
            a, b = round(x, n), float(f"{x:.{n}f}")
            assert (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (
                a != a and b != b
            ), (x, n)


@pytest.mark.parametrize("scenario", ["default", "pai-busy", "muxflow-t4"])
def test_warm_start_typed_equals_numpys(scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wl = build_workload(load_scenario(scenario))
    for seed in range(5):
        drawn = generate_workload(wl.syn_cfg, np.random.default_rng(seed), 10 * 3600.0)
        states = []
        for typed in (True, False):
            monkeypatch.setattr(predictor, "_COMPILED", typed)
            states.append(_state(OnlinePredictor(wl.pred_cfg, drawn.history)))
        assert states[0] == states[1], seed
