"""Hand-computed timelines for tiny cases in each sharing mode."""

from __future__ import annotations

import itertools
import math

import pytest

from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Decision, IllegalDecision, Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.state import Status
from tests.helpers import job, make_sim, nodes, option


def finish_times(sim):
    return {
        j: round(st.ledger.finish_t, 6) for j, st in sim.jobs.items() if st.status is Status.DONE
    }


def test_exclusive_fifo_timeline():
    sim = make_sim([job(0, 100.0), job(1, 50.0, submit_s=10.0)])
    sim.reset(0)
    assert sim.now == 0.0 and sim.needs_decision()
    sim.apply(Decision(0, 0, option(sim, "excl")))
    sim.advance()  # job 1 arrives at t=10 but the GPU is taken: nothing to decide until t=100
    assert sim.now == 100.0
    sim.apply(Decision(1, 0, option(sim, "excl")))
    sim.advance()
    assert sim.done
    assert finish_times(sim) == {0: 100.0, 1: 150.0}
    m = sim.metrics()
    assert m["jct_mean_s"] == pytest.approx((100 + 140) / 2)
    assert m["queue_delay_mean_s"] == pytest.approx((0 + 90) / 2)
    assert m["makespan_s"] == pytest.approx(150.0)
    assert m["gpu_util"] > 0 and m["stp"] == pytest.approx(1.0)
    assert m["decisions"] == 2


def test_time_sharing_splits_and_speeds_up_when_alone():
    sim = make_sim([job(0, 100.0), job(1, 50.0)])
    sim.reset(0)
    ts = option(sim, "ts")
    sim.apply(Decision(0, 0, ts))
    sim.apply(Decision(1, 0, ts))
    sim.advance()
    # both at rate 1/2 until job 1 is done at t=100 (50/0.5); job 0 has 50 left at rate 1
    assert finish_times(sim) == {0: 150.0, 1: 100.0}
    m = sim.metrics()
    # job 0: 100 s at 0.5 and 50 s at 1.0 → mean normalised throughput (0.5*100+1*50)/150
    assert m["norm_throughput_mean"] == pytest.approx(((50 + 50) / 150 + 0.5) / 2)


def test_mps_sm_limit_persists_after_corunner_leaves():
    sim = make_sim([job(0, 100.0), job(1, 75.0)])
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mps25")))
    sim.apply(Decision(1, 0, option(sim, "mps75")))
    sim.advance()
    # job 1 at 0.75 → done at 100; job 0 did 25 by then, 75 left at 0.25 (its SM cap) → 400
    assert finish_times(sim) == {0: 400.0, 1: 100.0}


def test_mps_share_over_100_is_illegal():
    sim = make_sim([job(0, 100.0), job(1, 75.0)])
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mps50")))
    with pytest.raises(IllegalDecision, match="SM share would be 125% > 100%"):
        sim.apply(Decision(1, 0, option(sim, "mps75")))
    assert not sim.mask(1)[0, option(sim, "mps75")]
    assert sim.mask(1)[0, option(sim, "mps50")]


def test_mig_setup_costs_then_profile_speed():
    sim = make_sim([job(0, 30.0, mem_gb=8.0), job(1, 20.0, mem_gb=8.0)], nodes("A100-40GB"))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mig3g")))
    # switching the GPU into MIG mode (60 s) plus creating the instance (5 s): GPU not ready
    assert not sim.needs_decision()
    sim.advance()
    assert sim.now == 65.0
    sim.apply(Decision(1, 0, option(sim, "mig3g")))  # a second 3g instance at start 4: +5 s
    sim.advance()
    # A100 solo speed 2 (test model) x 3/7: job 0 from 65 → 65 + 30/(6/7) = 100;
    # job 1 from 70 → 70 + 20/(6/7) = 93.333...
    ft = finish_times(sim)
    assert ft[0] == pytest.approx(100.0) and ft[1] == pytest.approx(70 + 20 * 7 / 6)
    assert sim.metrics()["mig_reconfigs"] == 2


def test_mig_empty_instance_reused_without_reconfiguration():
    sim = make_sim([job(0, 12.0), job(1, 12.0, submit_s=1000.0)], nodes("A100-40GB"))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mig3g")))
    sim.advance()  # ready at 65, done at 65 + 12/(6/7) = 79, next decision at the arrival
    assert sim.now == 1000.0
    sim.apply(Decision(1, 0, option(sim, "mig3g")))
    sim.advance()
    assert finish_times(sim)[1] == pytest.approx(1000 + 12 / (6 / 7))
    assert sim.metrics()["mig_reconfigs"] == 1


def test_gang_rate_and_pcie_penalty():
    sim = make_sim([job(0, 100.0, num_gpus=2)], nodes(gpus=2, interconnect="pcie"))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "excl")))
    assert sim.jobs[0].gpus == [0, 1]
    sim.advance()
    assert finish_times(sim)[0] == pytest.approx(100 / 0.95)


def test_gang_across_nodes_is_slower():
    sim = make_sim([job(0, 85.0, num_gpus=2)], nodes(n_nodes=2, gpus=1))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "excl")))
    assert sim.jobs[0].gpus == [0, 1]
    sim.advance()
    assert finish_times(sim)[0] == pytest.approx(100.0)  # 85 / 0.85


def _v100_t4(second: str = "T4", vcpus: float = 64.0) -> list[NodeSpec]:
    """Two one-GPU nodes: a V100 (GPU 0) and a ``second`` (GPU 1); a gang on both crosses
    nodes (CROSS_NODE_FACTOR 0.85)."""
    return [
        NodeSpec("n0", "V100-16GB", 1, vcpus, 256.0, Interconnect.NVLINK),
        NodeSpec("n1", second, 1, 64.0, 256.0, Interconnect.NVLINK),
    ]


@pytest.mark.parametrize(("second", "finish"), [("T4", 200.0), ("V100-16GB", 100.0)])
def test_gang_runs_at_its_slowest_member(second, finish):
    # LinearSpeed: V100 1.0, T4 0.5. A V100 + T4 gang waits for the T4 at every step:
    # 85 / (0.5 x 0.85) = 200 s; the same gang on two V100s: 85 / 0.85 = 100 s.
    sim = make_sim([job(0, 85.0, num_gpus=2)], _v100_t4(second))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "excl")))
    assert sim.jobs[0].gpus == [0, 1]
    sim.advance()
    assert finish_times(sim)[0] == pytest.approx(finish)
    # alone and exclusive on its GPUs: normalised throughput 1 (its solo rate is the slowest's)
    assert sim.metrics()["norm_throughput_mean"] == pytest.approx(1.0)


@pytest.mark.parametrize(("co_runners", "finish"), [(1, 200.0), (2, 300.0)])
def test_gang_rate_is_the_least_member_rate_with_interference(co_runners, finish):
    # A V100 + T4 gang time-shared with ``co_runners`` jobs on the V100 (GPU 0). Each member's
    # rate is its solo speed x 0.85 x its time share: V100 0.85 / (1 + co_runners), T4 0.425.
    # One co-runner: V100 member 0.425, as slow as the T4: still T4-bound, 85 / 0.425 = 200 s
    # (not 0.5 x 0.5 x 0.85: the slowest type and the most shared GPU are different members).
    # Two co-runners: the V100 member is the slowest, 0.85 / 3: 85 / (0.85 / 3) = 300 s.
    others = [job(j, 1000.0) for j in range(1, co_runners + 1)]
    sim = make_sim([*others, job(0, 85.0, num_gpus=2)], _v100_t4())
    sim.reset(0)
    ts = option(sim, "ts")
    for j in range(1, co_runners + 1):
        sim.apply(Decision(j, 0, ts))
    sim.apply(Decision(0, 0, ts))
    assert sim.jobs[0].gpus == [0, 1]
    sim.advance()
    assert finish_times(sim)[0] == pytest.approx(finish)


def test_gang_cpu_factor_is_its_members_own():
    # A V100 + T4 gang whose V100 node has half the vCPUs it wants (CPU factor 0.5): the V100
    # member runs at 1.0 x 0.85 x 0.5 = 0.425, the T4 member (its node uncontended) at
    # 0.5 x 0.85 = 0.425: the gang at 0.425, 85 s of work in 200 s.
    sim = make_sim([job(0, 85.0, num_gpus=2, cpu=2.0)], _v100_t4(vcpus=1.0))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "excl")))
    sim.advance()
    assert finish_times(sim)[0] == pytest.approx(200.0)


def test_cpu_contention_slows_the_node():
    sim = make_sim([job(0, 100.0, cpu=8.0), job(1, 100.0, cpu=8.0)], nodes(gpus=2, vcpus=8.0))
    sim.reset(0)
    excl = option(sim, "excl")
    sim.apply(Decision(0, 0, excl))
    sim.apply(Decision(1, 1, excl))
    sim.advance()
    assert finish_times(sim) == {0: 200.0, 1: 200.0}  # 16 vCPUs wanted, 8 there: half speed


def test_unschedulable_job_fails_on_arrival():
    sim = make_sim([job(0, 10.0, mem_gb=100.0), job(1, 10.0)])
    sim.reset(0)
    assert sim.jobs[0].status is Status.FAILED
    sim.apply(Decision(1, 0, option(sim, "excl")))
    sim.advance()
    m = sim.metrics()
    assert m["jobs_failed"] == 1 and m["jobs_completed"] == 1 and m["x_errors_unschedulable"] == 1


def test_waiting_policy_reaches_horizon():
    sim = make_sim([job(0, 10.0)], horizon_h=1.0)
    sim.reset(0)
    while not sim.done:
        sim.advance()
    assert sim.now == 3600.0
    m = sim.metrics()
    # an unfinished job counts with its time in the system so far
    assert m["jct_mean_s"] == 3600.0 and m["x_jobs_queued"] == 1
    assert math.isnan(m["queue_delay_mean_s"])


def test_migration_keeps_progress_and_pauses():
    sim = make_sim([job(0, 100.0), job(1, 100.0)], nodes(gpus=2), sharing={"migration_s": 30.0})
    sim.reset(0)
    ts = option(sim, "ts")
    sim.apply(Decision(0, 0, ts))
    sim.apply(Decision(1, 0, ts))
    sim.run_until(40.0)  # both at 1/2: 20 done each
    sim.apply(Decision(1, 1, option(sim, "excl")))  # migrate job 1 to the free GPU
    assert sim.jobs[1].gpus == [1] and sim.jobs[1].work_done == pytest.approx(20.0)
    sim.advance()
    ft = finish_times(sim)
    # job 1 resumes at 70 with 80 left at rate 1 → 150; job 0 alone from 40: 80 left → 120
    assert ft == {0: 120.0, 1: 150.0}
    assert sim.metrics()["migrations"] == 1


@pytest.mark.parametrize(
    ("scenario", "policy"), [("default", "first_fit"), ("muxflow-t4", "muxflow")]
)
def test_load_ticks_are_consecutive_and_counted(scenario, policy):
    """Fused ticks (``advance`` runs a tick directly when no other event comes first) neither
    skip nor repeat one: ticks fall at tick_s, 2 tick_s, ... (each the previous plus tick_s, as
    when every tick went through the heap), and ``n_service_ticks`` counts live services at
    each."""
    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.evaluation.runner import run_episode
    from gpu_sharing_env.sim.build import make_simulator
    from gpu_sharing_gym.baselines import make_policy

    sim = make_simulator(load_scenario(scenario))
    live = []

    class Counted(SimObserver):
        def on_tick(self, sim: Simulator, changed: bool) -> None:
            # the services the tick ran for (a tick ends no service: the same set after it)
            live.append(len(sim.load.live()))

    sim.add_observer(Counted())
    run_episode(make_policy(policy), sim, seed=1)
    # MuxFlow deploys SysMonitor: a tick may then evict or throttle (and end an instant early)
    assert sim.mechanisms.protection == (policy == "muxflow")
    times = [row[0] for row in sim.timeseries]
    tick_s = sim.cfg.tick_s
    assert len(times) == len(live) > 10
    assert times[0] == tick_s
    assert all(b == a + tick_s for a, b in itertools.pairwise(times))
    assert sim.now - times[-1] < tick_s or times[-1] + tick_s > sim.horizon_s
    assert sim.n_service_ticks == sum(live) > 0
