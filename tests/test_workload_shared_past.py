"""Workload version 3: the cluster's own past (``past: shared``, the default).

A synthetic scenario's recurring groups (templates, periods, phases) and its history
``[-history_h, 0)`` are drawn once from ``past_seed`` and shared by every episode; the episode's
generator draws only the future ``[0, window)``. ``past: per_episode`` is version 2's draw, bit
for bit (digests recorded at main ``3a18cd1`` before the change).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import build_workload
from gpu_sharing_env.workload import WORKLOAD_VERSION, predictor
from gpu_sharing_env.workload.synthetic import (
    PERIODIC,
    SyntheticWorkload,
    SyntheticWorkloadConfig,
    generate_workload,
    shared_past,
)

WINDOW_S = 8 * 3600.0
CFG = SyntheticWorkloadConfig()


def _digest(w: SyntheticWorkload) -> str:
    """The jobs, the history and the groups' metadata, hashed."""
    h = hashlib.sha256()
    h.update(repr(w.jobs).encode())
    hist = w.history
    for a in (hist.work_s, hist.submit_s, hist.gpus):
        h.update(a.tobytes())
    meta = (
        hist.group,
        hist.user,
        sorted(w.pattern.items()),
        sorted(w.period_s.items()),
        sorted(w.batch_inference),
    )
    h.update(repr(meta).encode())
    return h.hexdigest()[:16]


def _draw(cfg: SyntheticWorkloadConfig, seed: int, window_s: float = WINDOW_S) -> SyntheticWorkload:
    return generate_workload(cfg, np.random.default_rng(seed), window_s)


def test_version() -> None:
    assert WORKLOAD_VERSION == 4  # (version 4 keeps version 3's past where no group misfits)
    assert CFG.past == "shared" and CFG.past_seed == 0


@pytest.mark.parametrize(
    ("extra", "seed", "hours", "want"),
    [
        ({}, 0, 8, "2fa4491283d89d7c"),
        ({}, 7, 24, "5b3a229909af8bb8"),
        ({"arrivals_per_h": 60.0}, 3, 8, "22177cac5d090c48"),
    ],
)
def test_per_episode_is_version_2(
    extra: dict[str, float], seed: int, hours: int, want: str
) -> None:
    # (the digests of generate_workload at main 3a18cd1, workload version 2, recorded before
    # version 3 changed it)
    cfg = SyntheticWorkloadConfig(past="per_episode", **extra)
    w = _draw(cfg, seed, hours * 3600.0)
    assert _digest(w) == want
    assert w.past is None


def test_seeds_share_the_past_and_differ_in_the_future() -> None:
    a, b = _draw(CFG, 1), _draw(CFG, 2)
    assert a.past is not None and a.past is b.past
    assert a.history is b.history
    assert a.pattern == b.pattern and a.period_s == b.period_s
    assert a.batch_inference == b.batch_inference
    assert [(j.submit_s, j.work_s) for j in a.jobs] != [(j.submit_s, j.work_s) for j in b.jobs]
    assert all(0.0 <= j.submit_s < WINDOW_S for j in a.jobs)
    assert float(a.history.submit_s.max()) < 0.0
    assert float(a.history.submit_s.min()) >= -CFG.history_h * 3600.0
    # the same seed: the same episode (a fresh generator, the cached past)
    assert _digest(_draw(CFG, 1)) == _digest(a)


def test_the_future_continues_the_past() -> None:
    w = _draw(CFG, 4, 24 * 3600.0)
    past = w.past
    assert past is not None
    hist = w.history
    # what each group's history runs were: its user and request
    seen: dict[str, tuple[str, float]] = {}
    for g, u, r in zip(hist.group, hist.user, hist.gpus.tolist(), strict=True):
        if g:
            assert seen.setdefault(g, (u, r)) == (u, r)
    grouped = [j for j in w.jobs if j.group]
    assert len(grouped) > len(w.jobs) / 2  # (65 % of arrivals recur)
    for j in grouped:
        assert j.group in w.pattern
        if j.group in seen:
            assert seen[j.group] == (j.user, j.num_gpus * j.gpu_frac), j
    # a periodic group's runs sit near its slots from next_slot on (phase, period: the past's)
    n_near = 0
    for j in grouped:
        if w.pattern[j.group] != PERIODIC:
            continue
        g = int(j.group[1:])
        ph, per, k_next = past.phases[g], past.groups.per_period[g], past.next_slot[g]
        k = round((j.submit_s - ph) / per)
        assert k >= k_next
        assert abs(j.submit_s - (ph + k * per)) < 6 * CFG.period_jitter * per
        n_near += 1
    assert n_near > 5
    # the same run-time distribution per group: inside a group the spread is its sigma's
    by_g: dict[str, list[float]] = {}
    for j in grouped:
        by_g.setdefault(j.group, []).append(np.log(j.work_s))
    spread = [np.std(v) for v in by_g.values() if len(v) >= 5]
    assert spread and float(np.median(spread)) < 0.5  # (sigma 0.1 / 0.3 against 2.0)


def test_the_past_is_keyed_by_every_field() -> None:
    p = shared_past(CFG)
    assert shared_past(SyntheticWorkloadConfig()) is p  # (an equal config: the same past)
    assert shared_past(replace(CFG, past_seed=1)) is not p
    assert _digest(_draw(replace(CFG, past_seed=1), 1)) != _digest(_draw(CFG, 1))
    for field, value in (
        ("duration_median_s", 600.0),
        ("num_users", 50),
        ("model_mix", {"resnet50": 1.0}),
        ("history_h", 24.0),
    ):
        other = shared_past(replace(CFG, **{field: value}))
        assert other is not p, field
    assert len(shared_past(replace(CFG, history_h=24.0)).history) < len(p.history)
    assert not shared_past(replace(CFG, history_h=0.0)).history.submit_s.size


def test_bad_past_fields() -> None:
    with pytest.raises(ValueError, match=r"^past: one of shared, per_episode"):
        SyntheticWorkloadConfig(past="weekly")
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match=r"^past_seed: an integer >= 0"):
            SyntheticWorkloadConfig(past_seed=bad)  # type: ignore[arg-type]


_CHILD = """
import json, sys, numpy as np
sys.path.insert(0, {tests!r})
from test_workload_shared_past import _digest, _draw, CFG
print(json.dumps([_digest(_draw(CFG, s)) for s in (3, 9)]))
"""


@pytest.mark.parametrize("pure", [False, True])
def test_same_seed_same_episode_in_another_process(pure: bool) -> None:
    here = [_digest(_draw(CFG, s)) for s in (3, 9)]
    env = dict(os.environ)
    if pure:
        env["GSG_PURE_PYTHON"] = "1"
    code = _CHILD.format(tests=os.path.dirname(__file__))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == here


def test_the_predictor_is_warm_started_once_and_copied() -> None:
    wl = build_workload(load_scenario("default"))
    a = wl._draw(np.random.default_rng(1), True)
    b = wl._draw(np.random.default_rng(2), True)
    assert a.predictor is not None and b.predictor is not None
    assert a.predictor is not b.predictor
    assert a.drawn is not None and a.drawn.past is not None
    cached = next(iter(a.drawn.past.predictors.values()))
    assert cached is not a.predictor and cached is not b.predictor
    # the same warm start, the same first training set
    ta, tb = a.predictor.training_set(), b.predictor.training_set()
    assert ta is not None and tb is not None
    assert ta[0].tobytes() == tb[0].tobytes() and ta[1].tobytes() == tb[1].tobytes()
    # one episode's rows stay its own
    spec = a[0]
    a.predictor.observe(spec, spec.job_id)
    assert len(a.predictor._rows_y) == 1
    assert not b.predictor._rows_y and not cached._rows_y
    # the first fit of a second episode is the first's tree (the fit memo hits)
    a2 = wl._draw(np.random.default_rng(3), True)
    assert a2.predictor is not None
    a2.predictor.estimate(a2[0], 0.0)
    n = len(predictor._FITS)
    b.predictor.estimate(b[0], 0.0)
    assert len(predictor._FITS) == n
    assert b.predictor._fit is a2.predictor._fit
