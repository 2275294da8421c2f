"""``OnlinePredictor.group_stats`` kept per group (the same object while the group's finished
runs and its submissions before the time asked are unchanged) gives what a predictor asked
afresh gives (a deep copy keeps none), field for field bit for bit, for every job's group at
every decision of runner episodes; and ``GpuSharing-v2``'s group columns are unchanged
(``tests/test_candidates_typed.py`` compares them with ``ClusterView.group_stats``)."""

from __future__ import annotations

import copy
import struct

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload.predictor import GroupStats


def _bits(g: GroupStats) -> tuple[object, ...]:
    return (
        g.runs_seen,
        *(struct.pack("<d", x) for x in (g.mean_log_s, g.std_log_s, g.last_submit_s, g.period_s)),
    )


def _number_bits(g: GroupStats) -> tuple[object, ...]:
    """``GroupStats``' fields as ``OnlinePredictor.group_numbers`` gives them, bit for bit."""
    return (g.runs_seen, *(struct.pack("<d", x) for x in (g.mean_log_s, g.std_log_s, g.period_s)))


def _tuple_bits(t: tuple[int, float, float, float]) -> tuple[object, ...]:
    return (t[0], *(struct.pack("<d", x) for x in t[1:]))


_FirstFit = type(make_policy("first_fit"))


class _Checked(_FirstFit):  # type: ignore[misc,valid-type]
    """first_fit, comparing every job's group statistics with a fresh predictor's first."""

    def __init__(self) -> None:
        super().__init__()
        self.compared = self.same = self.numbers_same = 0

    def decide(self, view: ClusterView) -> Decision | None:
        sim = view._sim
        pred = sim.predictor
        assert pred is not None
        fresh = copy.deepcopy(pred)
        for st in sim.jobs.values():
            got = pred.group_stats(st.spec, sim.now)
            again = pred.group_stats(st.spec, sim.now)
            self.same += again is got
            assert _bits(got) == _bits(fresh.group_stats(st.spec, sim.now))
            # ``group_numbers`` (what the candidate builder's group columns read): the same
            # numbers, kept (the same tuple while they hold), and a fresh predictor's
            nums = pred.group_numbers(st.spec.group, sim.now)
            assert type(nums[0]) is int
            assert _tuple_bits(nums) == _number_bits(got)
            assert _tuple_bits(fresh.group_numbers(st.spec.group, sim.now)) == _number_bits(got)
            self.numbers_same += pred.group_numbers(st.spec.group, sim.now) is nums
            self.compared += 1
        return super().decide(view)  # type: ignore[no-any-return]


@pytest.mark.parametrize("seed", [1, 2])
def test_group_stats_kept_equal_fresh(seed: int) -> None:
    policy = _Checked()
    run_episode(policy, make_simulator(load_scenario("default")), seed)
    assert policy.compared > 100 and policy.same == policy.compared
    assert policy.numbers_same == policy.compared
