"""``ClusterView.suspendable``: the running jobs a heuristic may suspend, as the simulator's
legality function says, at every decision of a few episodes (the scripted suspending policy of
``scripts/suspend_move.py`` reads it)."""

from __future__ import annotations

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from tests.helpers import load_script

SuspendLongest = load_script("suspend_move").SuspendLongest


class _Checked(SuspendLongest):  # type: ignore[misc,valid-type]
    """The scripted policy, checking the view's suspendable jobs at each decision."""

    def __init__(self) -> None:
        super().__init__()
        self.checked = 0
        self.seen = 0

    def decide(self, view: ClusterView) -> Decision | None:
        sim = view._sim
        got = view.suspendable()
        assert got == sim.suspendable()
        running = sorted({j for res in sim.cluster.residents for j in res})
        assert got == [j for j in running if sim.check(Decision.suspend(j)) is None]
        self.checked += 1
        self.seen += len(got)
        return super().decide(view)  # type: ignore[no-any-return]


@pytest.mark.parametrize("seed", [2, 7])  # (default seeds that suspend on workload v3)
def test_view_suspendable_is_the_simulators(seed: int) -> None:
    policy = _Checked()
    m = run_episode(policy, make_simulator(load_scenario("default")), seed)
    assert policy.checked > 50 and policy.seen > 0
    assert m["x_suspensions"] > 0
