"""The predictor typed and the episode's quantiles in fewer numpy calls (2026-12-02 advance and
episode-end note).

- ``OnlinePredictor`` is an extension type where ``workload/predictor.py`` runs compiled
  (``predictor.pxd`` declares exactly its ``__slots__``); its estimate walks the tree from the
  node lists ``_set_fit`` keeps beside ``_fit`` (the leaves' exps made there): each estimate
  equals the plain walk of ``_fit`` (``_fit_exp``) on the formula's features, after every
  finished run and refit, and after ``_fit`` is set from outside; a deep copy holds every slot
  and its own lists; a pickle gives the same answers.
- ``evaluation.metrics._q2`` (the JCT's two quantiles in one ``np.quantile`` call) gives the
  two calls' doubles on random lists: ties, zeros, infinities, huge and tiny values, NaN, -0.0.
"""

from __future__ import annotations

import ast
import copy
import math
import pickle
import random
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpu_sharing_env.evaluation.metrics import _q, _q2
from gpu_sharing_env.workload import predictor as predictor_mod
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.workload.predictor import (
    OnlinePredictor,
    PredictorConfig,
    RunLog,
    _Fit,
    _fit_exp,
)
from tests.helpers import job

ROOT = Path(__file__).resolve().parents[1] / "gpu_sharing_env" / "workload"


def test_pxd_declares_the_predictor_s_slots() -> None:
    tree = ast.parse((ROOT / "predictor.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OnlinePredictor")
    slots = next(
        ast.literal_eval(s.value)
        for s in node.body
        if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in s.targets)
    )
    pxd = (ROOT / "predictor.pxd").read_text(encoding="utf-8")
    assert re.search(r"^cdef class OnlinePredictor:$", pxd, re.M)
    declared = re.findall(r"^\s+cdef public \w+ (\w+)$", pxd, re.M)
    assert sorted(declared) == sorted(slots)
    if predictor_mod._COMPILED:  # an extension type, not a heap type
        assert not OnlinePredictor.__flags__ & (1 << 9)


def _history(rng: random.Random, n: int) -> RunLog:
    groups = [f"g{rng.randrange(6)}" if rng.random() < 0.8 else "" for _ in range(n)]
    users = [f"u{rng.randrange(4)}" for _ in range(n)]
    work = np.array([rng.lognormvariate(6.0, 1.5) for _ in range(n)])
    submit = np.array([-rng.uniform(0, 5e5) for _ in range(n)])
    gpus = np.array([rng.choice([0.25, 0.5, 1.0, 2.0, 4.0]) for _ in range(n)])
    return RunLog(groups, users, gpus, work, submit)


def _spec(rng: random.Random, job_id: int) -> JobSpec:
    n = rng.choice([1, 1, 2, 4])
    spec = job(
        job_id,
        rng.lognormvariate(6.0, 1.5),
        submit_s=float(job_id),
        num_gpus=n,
        group=f"g{rng.randrange(8)}" if rng.random() < 0.8 else "",
        user=f"u{rng.randrange(5)}",
    )
    return replace(spec, gpu_frac=rng.choice([0.25, 0.5, 1.0])) if n == 1 else spec


def _walk(p: OnlinePredictor, spec: JobSpec) -> float:
    """The estimate as the plain walk of ``p._fit`` on the features (``_fit_exp``)."""
    r = math.log2(spec.num_gpus * spec.gpu_frac)
    return _fit_exp(p._fit, p._features(spec.group, spec.user, r))


@pytest.mark.parametrize("inputs", [("group", "user", "request"), ("user", "request"), ()])
def test_estimates_walk_the_current_tree(inputs: tuple[str, ...]) -> None:
    rng = random.Random(len(inputs))
    cfg = PredictorConfig(inputs=inputs, refit_every=7, max_rows=60)
    p = OnlinePredictor(cfg, _history(rng, 80))
    specs = [_spec(rng, i) for i in range(120)]
    n_checked = 0
    for i, spec in enumerate(specs):
        p.note_submit(spec, float(i))
        est = p.estimate(spec, float(i))
        assert p.made[spec.job_id] == (float(i), len(p.observed))
        if p._fit is not None:
            assert est == _walk(p, spec)
            assert p._fit_expv == [math.exp(v) for v in p._fit.value]
            n_checked += 1
        else:
            assert est == math.exp(p.predict_log(spec))
        if i % 2:
            p.observe(specs[i - 1], specs[i - 1].job_id)
    assert (p.n_fits >= 8 and n_checked > 100) if inputs else n_checked == 0


def test_a_fit_set_from_outside_is_the_one_walked() -> None:
    rng = random.Random(5)
    p = OnlinePredictor(PredictorConfig(refit_every=5), _history(rng, 60))
    spec = _spec(rng, 1)
    p.estimate(spec, 0.0)  # (fitted on first ask)
    # a one-split tree on the request: 0.5 GPUs and under to the left
    fit = _Fit([1, -1, -1], [2, -1, -1], [4, -2, -2], [-1.0, -2.0, -2.0], [0.0, 1.0, 2.0])
    p._fit = fit
    small, big = replace(spec, num_gpus=1, gpu_frac=0.25), replace(spec, num_gpus=4)
    assert p.estimate(small, 1.0) == math.exp(1.0)
    assert p.estimate(big, 1.0) == math.exp(2.0)


def _fed() -> tuple[OnlinePredictor, list[JobSpec]]:
    rng = random.Random(9)
    p = OnlinePredictor(PredictorConfig(refit_every=50), _history(rng, 50))
    specs = [_spec(rng, i) for i in range(30)]
    for i, spec in enumerate(specs[:20]):
        p.note_submit(spec, float(i))
        p.estimate(spec, float(i))
        if i % 3 == 0:
            p.observe(spec, spec.job_id)
    assert p._pending and p._fit is not None  # (rows pending in the copy)
    return p, specs


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copy_holds_every_slot_and_its_own_lists(how: str) -> None:
    p, specs = _fed()
    q = copy.deepcopy(p) if how == "deepcopy" else pickle.loads(pickle.dumps(p))
    assert type(q) is OnlinePredictor
    for name in OnlinePredictor.__slots__:
        a, b = getattr(p, name), getattr(q, name)
        if name in ("_x32", "_y64"):  # (row buffers: their rows below)
            assert a.shape == b.shape
        elif isinstance(a, np.ndarray):
            assert np.array_equal(a, b)
        elif name not in ("_fit", "_fit_src", "cfg", "_subs_hist"):
            assert a == b, name
    want, got = p.training_set(), q.training_set()
    assert want is not None and got is not None
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    for spec in specs[20:]:
        assert q.estimate(spec, 30.0) == p.estimate(spec, 30.0)
    q.observe(specs[0], 0)
    assert len(q._rows_y) == len(p._rows_y) + 1 and len(q.observed) == len(p.observed) + 1


def _close(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))


def test_the_jct_pair_is_two_quantiles() -> None:
    """``_q2`` (one ``np.quantile`` call for the JCT's median and 95th percentile) gives
    ``_q``'s two doubles: ties, zeros, infinities, huge and tiny values, NaN and -0.0."""
    rng = random.Random(0)
    pools = [
        lambda: rng.uniform(0.0, 1e5),
        lambda: float(rng.randint(0, 5)),
        lambda: rng.expovariate(1e-3),
        lambda: rng.choice([0.0, 1.0, math.inf, 3.5, 1e300, -1e300, -math.inf, 5e-324, 0.1]),
        lambda: rng.choice([-0.0, 0.0, 2.0, math.nan]),
    ]
    for _ in range(2000):
        values = np.array([rng.choice(pools)() for _ in range(rng.randint(1, 80))])
        with np.errstate(invalid="ignore"):
            got = _q2(values, 0.5, 0.95)
            want = (_q(values, 0.5), _q(values, 0.95))
        assert _close(got[0], want[0]) and _close(got[1], want[1]), (values, got, want)
    assert all(math.isnan(v) for v in _q2(np.array([]), 0.5, 0.95))


def test_the_warm_start_s_tree_is_shared_by_its_copies() -> None:
    """A copy's refit on the warm start's rows alone takes the tree fitted once for them
    (``_fit_base``, shared by the copies); with episode rows it fits its own. Either way the
    tree, the fit count and every estimate are those of a predictor made afresh."""
    rng = random.Random(3)
    history = _history(rng, 90)
    cfg = PredictorConfig(refit_every=6, max_rows=70)
    warm = OnlinePredictor(cfg, history)
    specs = [_spec(rng, i) for i in range(40)]
    first = copy.deepcopy(warm)
    first.estimate(specs[0], 0.0)  # (its first refit: fitted, kept for the copies)
    assert warm._fit_base[0] is first._fit is not None
    second = copy.deepcopy(warm)
    calls: list[int] = []
    fit_tree = predictor_mod._fit_tree
    predictor_mod._fit_tree = lambda *a: calls.append(1) or fit_tree(*a)  # type: ignore[assignment]
    fresh = OnlinePredictor(cfg, history)  # (its own: the same calls, in lockstep)
    try:
        for i, spec in enumerate(specs):
            got = second.estimate(spec, float(i))
            assert got == fresh.estimate(spec, float(i))
            assert second.n_fits == fresh.n_fits and second._fit == fresh._fit
            second.observe(spec, spec.job_id)
            fresh.observe(spec, spec.job_id)
            assert second._fit == fresh._fit
    finally:
        predictor_mod._fit_tree = fit_tree
    # the second copy's first refit took the kept tree, its later ones (with rows) fitted; the
    # fresh predictor fitted every time
    assert second.n_fits == fresh.n_fits == 1 + len(specs) // 6
    assert len(calls) == 2 * second.n_fits - 1


@pytest.mark.parametrize(
    "top",
    [1.0, 2.0, 3.0, 2, 3, float("nan"), np.float64(2.0), 2**70],
)
def test_peeks_compare_as_peek_time(top: object) -> None:
    from gpu_sharing_env.sim.events import EventQueue

    q = EventQueue()
    for t in (None, top):
        for asked in (1.0, 2.0, 3.0, 2, float("nan"), np.float64(2.0), float("inf")):
            want = len(q) > 0 and q.peek_time() == asked
            assert q.peek_is(asked) is bool(want)
            want = len(q) > 0 and q.peek_time() <= asked
            assert q.peek_le(asked) is bool(want)
            want = len(q) > 0 and q.peek_time() > asked
            assert q.peek_gt(asked) is bool(want)
        q.push(t if t is not None else top, 1, 0)
