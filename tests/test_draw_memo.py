"""The per-process memo of episode draws (``gpu_sharing_env/workload/draws.py``): a second start
of an episode by an equal workload reads the first's draw, with the same jobs, the generator
left where the draw leaves it, and a predictor of its own; the reference curve that starts its
env's episode again is the one computed without the memo.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import ScenarioWorkload, build_workload, make_simulator
from gpu_sharing_env.workload.draws import DRAWS


def _rng(seed: int) -> np.random.Generator:
    # (as ``Simulator.reset`` makes the workload's generator)
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[0])


@pytest.fixture(autouse=True)
def _empty_memo() -> None:
    DRAWS.clear()


def _workloads() -> tuple[ScenarioWorkload, ScenarioWorkload]:
    # (two simulators of one scenario build two equal workloads: the env's and its paired
    # reward's reference)
    cfg = load_scenario("default")
    a, b = build_workload(cfg), build_workload(cfg)
    assert isinstance(a, ScenarioWorkload) and a is not b and a == b
    return a, b


@pytest.mark.parametrize("predict", [True, False])
def test_a_hit_is_the_draw_with_the_generator_where_the_draw_leaves_it(predict: bool) -> None:
    w1, w2 = _workloads()
    r1, r2 = _rng(1_000_003), _rng(1_000_003)
    first = w1(r1) if predict else w1.without_predictor(r1)
    second = w2(r2) if predict else w2.without_predictor(r2)
    assert (DRAWS.misses, DRAWS.hits) == (1, 1)
    assert list(first) == list(second) and first is not second
    assert r1.bit_generator.state == r2.bit_generator.state
    assert r1.random() == r2.random()  # (what the caller draws next is the same too)
    assert second.drawn is first.drawn
    assert (first.predictor is None) == (second.predictor is None) == (not predict)


def test_each_hit_has_a_predictor_of_its_own() -> None:
    w1, w2 = _workloads()
    first = w1(_rng(7))
    second = w2(_rng(7))
    assert first.predictor is not None and second.predictor is not None
    assert second.predictor is not first.predictor
    spec = next(s for s in second if not s.online)
    second.predictor.observe(spec, spec.job_id)  # (what the simulator does at a finish)
    third = w1(_rng(7))
    assert DRAWS.hits == 2
    assert third.predictor is not None and third.predictor.observed == []
    assert third.predictor.estimate(spec, 0.0) == first.predictor.estimate(spec, 0.0)


def test_another_workload_or_state_draws_its_own() -> None:
    w1, _ = _workloads()
    cfg = load_scenario("default")
    off = replace(
        cfg.workload.offline, params={**cfg.workload.offline.params, "arrivals_per_h": 3.0}
    )
    other = build_workload(replace(cfg, workload=replace(cfg.workload, offline=off)))
    assert other != w1
    mine = w1(_rng(5))
    theirs = other(_rng(5))
    assert (DRAWS.misses, DRAWS.hits) == (2, 0)
    assert len(theirs) != len(mine)
    w1(_rng(6))
    assert (DRAWS.misses, DRAWS.hits) == (3, 0)


def test_the_reference_curve_after_its_envs_episode_is_the_one_without_the_memo() -> None:
    from gpu_sharing_gym.agents.envs import reference_curve

    cfg = load_scenario("default")
    seed = 1_000_003
    alone = reference_curve(make_policy("speed_sjf"), make_simulator(cfg), seed)
    DRAWS.clear()
    # the env's episode first (its predictor fed every finished run), then the curve
    run_episode(make_policy("antman"), make_simulator(cfg), seed)
    after = reference_curve(make_policy("speed_sjf"), make_simulator(cfg), seed)
    assert DRAWS.hits == 1
    assert np.array_equal(alone[0], after[0]) and np.array_equal(alone[1], after[1])
