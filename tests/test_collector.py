"""``plumbing.collector.deferred``: the young threshold inside the block, still-collected cycles in
a long block, the block's objects frozen after it, the thresholds restored; ``gsg evaluate``
leaves its caller's collector settings as they were."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_sharing_gym.commands import evaluate
from gpu_sharing_gym.plumbing import collector


class _Node:
    """A container the collector tracks, weak-referenceable to see when it is freed."""

    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_thresholds_restored_and_enabled_left_alone(enabled: bool) -> None:
    gc.set_threshold(700, 10, 10)
    (gc.enable if enabled else gc.disable)()
    with collector.deferred(12_345):
        assert gc.get_threshold() == (12_345, 10, 10)
        assert gc.isenabled() is enabled
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.isenabled() is enabled
    with pytest.raises(RuntimeError, match="boom"), collector.deferred():
        assert gc.get_threshold() == (collector.YOUNG, 10, 10)
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_no_young_pass_below_the_threshold_and_what_is_left_is_frozen() -> None:
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    frozen = gc.get_freeze_count()
    gc.callbacks.append(count)
    try:
        with collector.deferred(50_000):
            kept = [_Node() for _ in range(20_000)]  # the default threshold (700) would pass ~28x
    finally:
        gc.callbacks.remove(count)
    assert passes == []
    assert gc.get_freeze_count() >= frozen + len(kept)
    young = {id(o) for o in gc.get_objects(0)}
    assert not any(id(n) in young for n in kept)


def test_cycles_are_still_collected_in_a_long_block() -> None:
    freed: list[int] = []
    with collector.deferred(1_000):
        for i in range(10_000):  # 20,000 tracked objects: ~20 young passes at this threshold
            a, b = _Node(), _Node()
            a.other, b.other = b, a  # a cycle: only the collector frees it
            weakref.finalize(a, freed.append, i)
            del a, b
        in_block = len(freed)
    assert in_block > 9_000  # all but those of the last pass's window


def test_evaluate_restores_its_callers_thresholds(tmp_path: Path) -> None:
    gc.set_threshold(700, 10, 10)
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        "horizon_h: 2\ncluster:\n  nodes:\n    - {gpu_type: V100-16GB, count: 1, "
        "gpus_per_node: 2}\nworkload:\n  offline: {params: {arrivals_per_h: 4.0}, max_jobs: 3}\n"
    )
    rc = evaluate.main(["--policy", "first_fit", "--scenario", str(scenario), "--seeds", "1",
                        "--quiet"])  # fmt: skip
    assert rc == 0
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.isenabled()
