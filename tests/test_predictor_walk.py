"""The predictor's tree walk (``_Fit.leaf``, typed where compiled) against a plain walk.

Compiled, ``leaf`` indexes the tree's lists with a C integer; its comparisons stay Python's
(the feature's float against the threshold's). Checked on random trees (scikit-learn's, as
:func:`predictor._fit_sklearn` turns them into lists) with inputs on, beside and between the
thresholds, NaN and signed zeros included; a walk that takes ``<`` for ``<=`` (planted) fails.
"""

from __future__ import annotations

import math
import random

import numpy as np

from gpu_sharing_env.workload import predictor


def _walk(fit: predictor._Fit, x: list[float], strict: bool = False) -> int:
    node = 0
    while fit.left[node] != -1:
        v, t = x[fit.feature[node]], fit.threshold[node]
        go_left = v < t if strict else v <= t
        node = fit.left[node] if go_left else fit.right[node]
    return node


def _cases(seed: int) -> list[tuple[predictor._Fit, list[list[float]]]]:
    rng = np.random.default_rng(seed)
    r = random.Random(seed)
    out = []
    for _ in range(12):
        n, f = int(rng.integers(20, 300)), int(rng.integers(1, 6))
        x = rng.normal(size=(n, f)).round(int(rng.integers(0, 3))).astype(np.float32)
        y = rng.lognormal(5, 2, size=n)
        fit = predictor._fit_sklearn(np.ascontiguousarray(x), np.log(y), int(rng.integers(2, 12)))
        thr = [t for t in fit.threshold if t != -2.0] or [0.0]
        rows = []
        for _ in range(200):
            row = []
            for _ in range(f):
                t = r.choice(thr)
                row.append(
                    r.choice(
                        [
                            t,
                            math.nextafter(t, -math.inf),
                            math.nextafter(t, math.inf),
                            r.gauss(0, 1),
                            math.nan,
                            0.0,
                            -0.0,
                        ]
                    )
                )
            rows.append(row)
        out.append((fit, rows))
    return out


def test_leaf_is_the_plain_walk() -> None:
    n_eq = 0
    for fit, rows in _cases(1):
        for x in rows:
            assert fit.leaf(x) == _walk(fit, x)
            n_eq += fit.leaf(x) != _walk(fit, x, strict=True)
            assert fit.exp_at(x) == math.exp(fit.predict(x))
    assert n_eq > 0  # the planted walk (``<``) differs somewhere: the inputs reach the ties
