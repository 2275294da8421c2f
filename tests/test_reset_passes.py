"""The episode reset's typed passes and direct draws (issue 51, the v2 step bar): each gives
what the numpy expression or the generator method it replaces gives, on random cases.

- ``_choice_p``: the indices and the generator state of ``rng.choice(n, size, p=p)``, or its
  error.
- ``_random`` through the bit generator's capsule: the doubles and the state of
  ``rng.random()``, interleaved with other draws, for each of numpy's bit generators.
- The warm start's typed passes (``_prior_means``, ``_tag_stats_typed``): the doubles of the
  numpy expressions (``_tag_stats``); the whole warm start either way on the
  generator's histories is in ``tests/test_reset_draw.py``.

Compiled, these compare the C paths with the Python ones; with ``GSG_PURE_PYTHON=1`` the
typed functions run as the Python they are, against the same references.
``scripts/rollout_digest.py`` and ``tests/test_golden.py`` check whole episodes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_sharing_env.workload.predictor import (
    _prior_means,
    _tag_stats,
    _tag_stats_typed,
)
from gpu_sharing_env.workload.synthetic import (
    _capsule,
    _choice_p,
    _random,
)


def _weights(rng: np.random.Generator) -> np.ndarray:
    """Random probabilities: zeros, one entry, equal weights, tiny and huge ratios."""
    m = int(rng.integers(1, 40))
    kind = int(rng.integers(0, 4))
    if kind == 0:
        w = rng.uniform(0, 1, size=m)
    elif kind == 1:
        w = np.where(rng.uniform(size=m) < 0.5, 0.0, rng.uniform(0, 1, size=m))
        w[int(rng.integers(0, m))] = 1.0
    elif kind == 2:
        w = np.ones(m)
    else:
        w = np.exp(rng.uniform(-30, 30, size=m))
    return w / w.sum()


def test_choice_p_is_generator_choice() -> None:
    rng = np.random.default_rng(3)
    for case in range(400):
        p = _weights(rng)
        size = int(rng.choice([0, 1, 7, 600]))
        seed = int(rng.integers(1 << 30))
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        got = _choice_p(a, p, size)
        want = b.choice(p.size, size=size, p=p)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), case
        assert a.bit_generator.state == b.bit_generator.state, case


@pytest.mark.parametrize(
    "p",
    [
        np.array([0.5, -0.1, 0.6]),
        np.array([0.5, np.nan, 0.5]),
        np.array([0.5, 0.6]),
        np.array([np.inf, 1.0]),
        np.array([[0.5, 0.5]]),
        np.array([]),
        np.array([0.5, 0.5 + 5e-9]),  # within numpy's tolerance, not within 1e-9: its answer
    ],
)
def test_choice_p_outside_the_fast_path_is_generator_choice(p: np.ndarray) -> None:
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    try:
        want = b.choice(p.size, size=5, p=p)
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)[:20]):
            _choice_p(a, p, 5)
        return
    assert _choice_p(a, p, 5).tolist() == want.tolist()
    assert a.bit_generator.state == b.bit_generator.state


@pytest.mark.parametrize("bitgen", ["PCG64", "MT19937", "Philox", "SFC64", "PCG64DXSM"])
def test_random_through_the_capsule_is_the_method(bitgen: str) -> None:
    make = getattr(np.random, bitgen)
    a, b = np.random.Generator(make(7)), np.random.Generator(make(7))
    cap = _capsule(a)
    for i in range(3000):
        assert _random(a, cap) == b.random(), i
        k = i % 5  # other draws in between: the stream stays in step
        if k == 1:
            assert a.standard_normal() == b.standard_normal()
        elif k == 2:
            assert a.integers(0, 1 << 40) == b.integers(0, 1 << 40)  # (32-bit buffers too)
        elif k == 3:
            assert a.integers(0, 7, dtype=np.int32) == b.integers(0, 7, dtype=np.int32)
        elif k == 4:
            assert a.random(3).tolist() == b.random(3).tolist()
    assert _same(a.bit_generator.state, b.bit_generator.state)


def _same(x: object, y: object) -> bool:
    """Bit generator states equal (MT19937's holds an array)."""
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.array_equal(x, y)  # type: ignore[arg-type]
    return x == y


def test_capsule_only_for_a_numpy_generator() -> None:
    class Mine(np.random.Generator):
        def random(self, *args: object, **kw: object) -> float:  # type: ignore[override]
            return 0.25

    mine = Mine(np.random.PCG64(1))
    assert _capsule(mine) is None and _random(mine, _capsule(mine)) == 0.25
    assert _random(np.random.default_rng(1), None) == np.random.default_rng(1).random()


def _tag_case(rng: np.random.Generator) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, bool]:
    n = int(rng.choice([0, 1, 2, int(rng.integers(3, 3000))]))
    m = int(rng.integers(1, 250))
    inv = rng.integers(0, m, size=n).astype(np.intp)
    if rng.uniform() < 0.3:  # few distinct codes, most of them unused
        inv = (inv % 3).astype(np.intp)
    y = np.log(np.maximum(np.round(np.exp(rng.uniform(-1, 12, size=n)), 0), 1e-9))
    if n and rng.uniform() < 0.3:
        y[rng.uniform(size=n) < 0.5] = 0.0  # equal values, zeros
    mean = np.empty(n)
    _prior_means(y, mean)
    return inv, m, y, mean, bool(rng.uniform() < 0.5)


def test_prior_means_are_numpys() -> None:
    rng = np.random.default_rng(4)
    for case in range(300):
        _, _, y, _, _ = _tag_case(rng)
        n = y.size
        mean = np.empty(n)
        total = _prior_means(y, mean)
        cum = np.cumsum(y)
        idx = np.arange(n, dtype=np.float64)
        want = np.divide(cum - y, idx, out=np.zeros(n), where=idx > 0)
        assert mean.tobytes() == want.tobytes(), case
        assert type(total) is float and total == (float(cum[-1]) if n else 0.0), case


def test_tag_stats_typed_are_numpys() -> None:
    rng = np.random.default_rng(5)
    for case in range(300):
        inv, m, y, mean, empty_first = _tag_case(rng)
        got = _tag_stats_typed(inv, m, y, mean, empty_first)
        want = _tag_stats(inv, m, y, mean, empty_first)
        assert got[0].tobytes() == want[0].tobytes(), case  # the mean column
        assert got[1].tobytes() == want[1].tobytes(), case  # the prior counts
        assert got[2:] == want[2:], case  # per code: count, sum, sum of squares
