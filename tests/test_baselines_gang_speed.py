"""Baselines that rate a placement by speed rate a gang by its slowest member (the engine runs a
gang at its slowest member's rate: ``docs/simulator.md``, ``test_engine_timelines``)."""

from __future__ import annotations

from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.base import fastest_exclusive
from tests.helpers import job, make_sim, option


def _fleet() -> list[NodeSpec]:
    """GPUs 0-1 T4 (one node), 2 V100, 3 T4, 4-5 V100 (one node). LinearSpeed: V100 1, T4 0.5."""
    spec = [("T4", 2), ("V100-16GB", 1), ("T4", 1), ("V100-16GB", 2)]
    return [
        NodeSpec(f"n{i}", t, k, 64.0, 256.0, Interconnect.NVLINK) for i, (t, k) in enumerate(spec)
    ]


def test_view_gang_gpus_is_the_simulators_choice():
    sim = make_sim([job(0, 100.0, num_gpus=2)], _fleet())
    sim.reset(0)
    view = ClusterView(sim)
    excl = option(sim, "excl")
    assert view.gang_gpus(0, 2, excl) == [2, 3]
    assert view.gang_gpus(0, 4, excl) == [4, 5]
    sim.apply(Decision(0, 2, excl))
    assert sim.jobs[0].gpus == [2, 3]


def test_fastest_exclusive_rates_a_gang_by_its_slowest_gpu():
    # Starting at GPU 2 (the first V100) the gang would take the V100 and the T4 after it and
    # run at T4 speed; the two V100s of the last node (start 4, its partner hidden by the gang
    # mask) run at V100 speed.
    sim = make_sim([job(0, 100.0, num_gpus=2)], _fleet())
    sim.reset(0)
    view = ClusterView(sim)
    d = fastest_exclusive(view, view.job(0))
    assert d is not None and d.gpu == 4
    sim.apply(d)
    sim.advance()
    assert sim.jobs[0].ledger.finish_t == 100.0  # 100 s of work at V100 speed, one NVLink node


def test_fastest_exclusive_single_gpu_job_unchanged():
    sim = make_sim([job(0, 100.0)], _fleet())
    sim.reset(0)
    view = ClusterView(sim)
    d = fastest_exclusive(view, view.job(0))
    assert d is not None and d.gpu == 2  # the first V100
