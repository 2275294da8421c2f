"""scripts/horus_probe.py: it measures what the `horus` experiment measures, and the mechanism
difference docs/fidelity.md's Horus finding rests on (Gandiva oversubscribes by time-slicing,
Horus does not over-commit) shows on a seed."""

from __future__ import annotations

import math
from types import ModuleType

import pytest

from gpu_sharing_gym.fidelity.horus import WAIT_RESOLUTION_S, horus
from tests.helpers import load_script


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    return load_script("horus_probe")


def test_probe_measures_the_experiments_quantities(probe: ModuleType) -> None:
    rec = horus([0])
    for arm, key in (("horus", "horus"), ("gandiva", "gandiva"), ("exclusive", "exclusive")):
        row = probe.probe(probe.ARMS[arm], 0)
        (p50,) = rec["per_seed"][f"{key}.f_queue_delay_p50_s"]
        assert row["p50"] == max(p50, WAIT_RESOLUTION_S)
        assert math.isclose(row["util"], rec["per_seed"][f"{key}.gpu_util"][0])


def test_gandiva_slices_where_horus_queues(probe: ModuleType) -> None:
    rows = {arm: probe.probe(make, 1) for arm, make in probe.ARMS.items()}
    assert all(r["started"] == rows["horus"]["started"] for r in rows.values())
    assert rows["exclusive"]["shared"] == 0.0 and rows["exclusive"]["progress"] > 0.99
    # Gandiva admits onto occupied GPUs far more often, and its jobs run slower for it ...
    assert rows["gandiva"]["shared"] > 2 * rows["horus"]["shared"]
    assert rows["gandiva"]["progress"] < rows["horus"]["progress"] - 0.1
    assert rows["gandiva"]["no_wait"] > rows["horus"]["no_wait"]
    # ... and without oversubscribed time-slicing it co-locates about as little as Horus
    assert rows["gandiva-no-oversub"]["shared"] < 0.5 * rows["gandiva"]["shared"]
