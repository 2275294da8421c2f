"""The v1 pair table's typed loop (compiled) and its numpy passes (interpreted) give the same
bits, edge values included (NaN, a GPU used past 1, a duty under the floor, no work left).

The compiled module and its source loaded a second time under another name run side by side
on the same inputs; ``tests/test_compiled.py`` compares whole rollouts' observations in two
processes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu_sharing_env.envs import observation_v1
from tests.helpers import interpreted


@pytest.mark.skipif(
    observation_v1.__file__.endswith(".py"), reason="observation_v1 runs interpreted here"
)
def test_pair_features_compiled_and_interpreted_agree_bit_for_bit() -> None:
    src = interpreted(observation_v1)
    assert not src.cython.compiled
    rng = np.random.default_rng(0)
    for case in range(200):
        m, g = int(rng.integers(1, 12)), int(rng.integers(1, 40))
        speeds = [rng.uniform(0.05, 5.0, size=g) for _ in range(m)]
        cols = []
        for _ in range(m):
            best = float(rng.uniform(0.1, 5.0))
            duty = float(rng.choice([0.0, 1e-4, 1e-3, rng.uniform(0, 1.5)]))
            left = float(rng.choice([0.0, rng.uniform(0, 1e6)]))
            mem = float(rng.choice([0.0, 16.0, rng.uniform(0, 80)]))
            cols.append((best, duty, left, mem))
        per_job = np.array(cols)
        legal = rng.uniform(size=(m, g)) < 0.5
        util = rng.choice([0.0, 1.0, 1.2, 0.3, rng.uniform()], size=g)
        if case % 7 == 0:
            util[0] = math.nan
        cap = rng.choice([16.0, 40.0, 80.0], size=g)
        decl = np.minimum(cap, rng.choice([0.0, 16.0, rng.uniform(0, 80)], size=g))
        a = observation_v1.pair_features(speeds, per_job, legal, util, cap, decl)
        b = src.pair_features(speeds, per_job, legal, util, cap, decl)
        assert a.shape == b.shape == (m, g, len(observation_v1.PAIR_FEATURES))
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), case
        assert a.astype(np.float32).tobytes() == b.astype(np.float32).tobytes(), case
