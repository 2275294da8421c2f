"""PAI (NSDI'22): reserving-and-packing with plan timeouts, load balancing, SJF on predicted
durations."""

from __future__ import annotations

import pytest

from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.baselines.pai import LoadBalance, ReservePack, SjfPredicted
from gpu_sharing_gym.baselines.reference import FirstFit
from gpu_sharing_gym.fidelity.pai import FifoQueue
from tests.helpers import make_sim, nodes
from tests.test_baselines_gandiva import calibrated, default_episode, drive, spec

A100, T4 = 0, 1  # GPU indices of the two-node fleet below


def a100_and_t4() -> list[NodeSpec]:
    return [
        NodeSpec("a100", "A100-40GB", 1, 32.0, 256.0, Interconnect.NVLINK),
        NodeSpec("t4", "T4", 1, 32.0, 128.0, Interconnect.PCIE),
    ]


def placements(policy: HeuristicPolicy, sim: Simulator) -> dict[int, tuple[float, int]]:
    """job -> (start time, GPU) of every decision."""
    out: dict[int, tuple[float, int]] = {}

    def hook(s: Simulator, d: Decision) -> None:
        out[d.job_id] = (s.now, d.gpu)

    drive(policy, sim, on_decision=hook)
    return out


def test_high_gpu_task_gets_the_a100_and_the_small_one_the_t4() -> None:
    # resnet50 on a whole GPU: 1 GPU x duty 1.0 x A100/T4 speed-up 1.37/0.41 = 3.3 >= 2.5, a
    # high-GPU task. ncf at half a GPU: 0.5 x 0.1 x ~5 = 0.25, packed onto the older GPU. The
    # small task is first in the queue; R&P still keeps the A100 for the high-GPU one.
    small = spec(0, "ncf", 1_000.0, frac=0.5, mem_gb=8.0)
    high = spec(1, "resnet50", 1_000.0, mem_gb=8.4)
    rp = ReservePack()
    sim = calibrated([small, high], a100_and_t4())
    sim.reset(0)
    view = ClusterView(sim)
    jobs = {j.job_id: j for j in view.window}
    assert rp.efficiency(view, jobs[1]) == pytest.approx(1.37 / 0.41)
    assert rp.high_gpu(view, jobs[1]) and not rp.high_gpu(view, jobs[0])
    assert rp.plans(view, jobs[1]) == ["A100-40GB", "T4"]
    assert rp.plans(view, jobs[0]) == ["T4", "A100-40GB"]
    got = placements(rp, calibrated([small, high], a100_and_t4()))
    assert got == {1: (0.0, A100), 0: (0.0, T4)}
    # Load balancing alone takes the queue in order and puts the small task on the A100.
    got = placements(LoadBalance(), calibrated([small, high], a100_and_t4()))
    assert got == {0: (0.0, A100), 1: (0.0, T4)}


def test_low_gpu_task_falls_back_to_the_a100_after_its_plan_timeout() -> None:
    # The T4 is taken by a long whole-GPU task; another arrives at 10 s. Its first plan (T4)
    # is busy, and the idle A100 stays reserved until it has waited 300 s. The next decision
    # point is the arrival at 400 s: it has waited 390 s, its second plan (A100) is open.
    jobs = [
        spec(0, "ncf", 100_000.0, mem_gb=2.0),
        spec(1, "ncf", 1_000.0, 10.0, mem_gb=2.0),
        spec(2, "ncf", 1_000.0, 400.0, mem_gb=2.0),
    ]
    got = placements(ReservePack(plan_timeout_s=300.0), calibrated(jobs, a100_and_t4()))
    assert got[0] == (0.0, T4)
    assert got[1] == (400.0, A100)
    # With a longer timeout the A100 is still reserved at 400 s: neither waiting task takes it
    # until the T4 frees at 100,000 s... beyond this 10 h horizon, so neither starts.
    got = placements(ReservePack(plan_timeout_s=3_600.0), calibrated(jobs, a100_and_t4()))
    assert set(got) == {0}
    # First-fit does not reserve: the long small task takes the A100 (lowest index) at once.
    got = placements(FirstFit(), calibrated(jobs, a100_and_t4()))
    assert got[0] == (0.0, A100) and got[1] == (10.0, T4)


def test_load_balance_spreads_over_nodes_then_gpus() -> None:
    # Two nodes of two V100s; four half-GPU tasks. Node loads (mean of GPU and memory
    # allocation) tie at 0 -> GPU 0; node 1 is then lighter -> GPU 2; tie again, and the
    # least-allocated GPU of node 0 -> GPU 1; then GPU 3.
    jobs = [spec(j, "resnet18", 1_000.0, float(j), frac=0.5, mem_gb=8.0) for j in range(4)]
    fleet = nodes(gpus=2, n_nodes=2)
    got = placements(LoadBalance(), calibrated(jobs, fleet))
    assert [got[j][1] for j in range(4)] == [0, 2, 1, 3]
    # First-fit packs the first two halves onto GPU 0 (MPS 50 % + 50 %).
    got = placements(FirstFit(), calibrated(jobs, fleet))
    assert [got[j][1] for j in range(4)] == [0, 0, 1, 1]


def test_sjf_orders_by_predicted_not_true_duration() -> None:
    # One GPU busy until 100 s; three whole-GPU tasks wait. Predicted durations 1000, 50, 300
    # (true ones 10, 500, 300): SJF starts them 2, 3, 1 back to back; first-fit in queue order.
    jobs = [
        spec(0, "resnet50", 100.0),
        spec(1, "resnet50", 10.0, 1.0, est_s=1_000.0),
        spec(2, "resnet50", 500.0, 1.0, est_s=50.0),
        spec(3, "resnet50", 300.0, 1.0, est_s=300.0),
    ]
    got = placements(SjfPredicted(), make_sim(jobs))
    starts = sorted((t, j) for j, (t, _) in got.items())
    assert starts == [(0.0, 0), (100.0, 2), (600.0, 3), (900.0, 1)]
    got = placements(FirstFit(), make_sim(jobs))
    assert sorted((t, j) for j, (t, _) in got.items()) == [
        (0.0, 0),
        (100.0, 1),
        (110.0, 2),
        (610.0, 3),
    ]


@pytest.mark.parametrize("policy", [ReservePack, LoadBalance, SjfPredicted])
def test_pai_policies_complete_the_default_episode(policy: type[HeuristicPolicy]) -> None:
    assert policy.oracle is False
    default_episode(policy(), seed=0)


# --------------------------------------------------------------------------- whole-queue scope
def runner_placements(policy: HeuristicPolicy, sim: Simulator) -> dict[int, tuple[float, int]]:
    """job -> (start time, GPU), run through the evaluation runner (which sets the simulator's
    ``decision_scope`` from the policy)."""
    out: dict[int, tuple[float, int]] = {}

    class Logged(SimObserver):
        def on_start(self, sim: Simulator, job_id: int, gpus: list[int], option: int) -> None:
            out[job_id] = (sim.now, gpus[0])  # (a decision's GPU is the gang's first)

    sim.add_observer(Logged())
    run_episode(policy, sim, 0)
    return out


def _sjf_jobs() -> list[JobSpec]:
    # As test_sjf_orders_by_predicted_not_true_duration: one GPU busy until 100 s, three tasks
    # wait with predicted durations 1000, 50, 300 (true 10, 500, 300).
    return [
        spec(0, "resnet50", 100.0),
        spec(1, "resnet50", 10.0, 1.0, est_s=1_000.0),
        spec(2, "resnet50", 500.0, 1.0, est_s=50.0),
        spec(3, "resnet50", 300.0, 1.0, est_s=300.0),
    ]


def test_sjf_orders_the_whole_queue_not_only_the_window() -> None:
    # A queue window of one job: SJF still sees (and starts) the shortest predicted task of
    # the whole queue, as PAI's simulator did.
    assert SjfPredicted.decision_scope == "queue"
    got = runner_placements(SjfPredicted(), make_sim(_sjf_jobs(), env={"queue_window": 1}))
    assert sorted((t, j) for j, (t, _) in got.items()) == [
        (0.0, 0),
        (100.0, 2),
        (600.0, 3),
        (900.0, 1),
    ]
    # FIFO over the same (whole) queue keeps queue order.
    got = runner_placements(FifoQueue(), make_sim(_sjf_jobs(), env={"queue_window": 1}))
    assert sorted((t, j) for j, (t, _) in got.items()) == [
        (0.0, 0),
        (100.0, 1),
        (110.0, 2),
        (610.0, 3),
    ]


def test_under_the_env_scope_sjf_orders_the_window() -> None:
    # Driven without the runner (as the Gymnasium env drives it: decision_scope "window"),
    # SJF can only name window jobs: with a window of one it is FIFO.
    sim = make_sim(_sjf_jobs(), env={"queue_window": 1})
    got = placements(SjfPredicted(), sim)
    assert sim.decision_scope == "window"
    assert sorted((t, j) for j, (t, _) in got.items()) == [
        (0.0, 0),
        (100.0, 1),
        (110.0, 2),
        (610.0, 3),
    ]


def test_whole_queue_scope_stops_where_a_job_behind_the_window_fits() -> None:
    # Two GPUs; job 0 holds one. Job 1 (head of the queue) needs both; job 2 behind it needs
    # one. With a window of one, a window-bound first fit leaves GPU 1 idle until job 0 ends;
    # over the whole queue job 2 starts on arrival.
    jobs = [
        spec(0, "resnet50", 1_000.0),
        spec(1, "resnet50", 100.0, 1.0, num_gpus=2),
        spec(2, "resnet50", 100.0, 2.0),
    ]
    fleet = nodes(gpus=2)
    got = runner_placements(FifoQueue(), make_sim(jobs, fleet, env={"queue_window": 1}))
    assert got[2] == (2.0, 1) and got[1][0] == 1_000.0
    got = runner_placements(FirstFit(), make_sim(jobs, fleet, env={"queue_window": 1}))
    assert got[1][0] == 1_000.0 and got[2][0] > 1_000.0


def test_decision_scope_gates_what_the_simulator_accepts() -> None:
    sim = make_sim(_sjf_jobs(), env={"queue_window": 1})
    sim.reset(0)
    sim.apply(Decision(0, 0, 0))
    sim.advance()  # job 0 ends at 100 s; jobs 1-3 queued, the window holds job 1 only
    assert sim.decision_scope == "window"
    why = sim.check(Decision(2, 0, 0))
    assert why is not None and "outside the window of 1" in why
    sim.set_decision_scope("queue")
    assert sim.check(Decision(2, 0, 0)) is None
    view = ClusterView(sim)
    assert [j.job_id for j in view.decidable] == [1, 2, 3] == view.decidable_ids()
    assert [j.job_id for j in view.iter_decidable()] == [1, 2, 3]
    sim.set_decision_scope("window")
    assert [j.job_id for j in ClusterView(sim).decidable] == [1]
    with pytest.raises(ValueError, match="decision_scope='all'"):
        sim.set_decision_scope("all")


def test_whole_queue_decision_points_match_per_job_placeability() -> None:
    # ``needs_decision`` over the whole queue (one mask per request signature) agrees with
    # asking every queued job, at every decision point of an episode of the default scenario.
    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.sim.build import make_simulator

    sim = make_simulator(load_scenario("default"))
    sim.reset(0, decision_scope="queue")
    policy = FifoQueue()
    policy.reset(0)
    for _ in range(400):
        if sim.done:
            break
        expect = any(sim.cluster.placement_mask(s).any() for s in sim.queued_jobs())
        assert sim.needs_decision() == expect
        d = policy.decide(ClusterView(sim)) if expect else None
        if d is None:
            sim.advance()
        else:
            assert sim.mask(d.job_id)[d.gpu, d.option]
            sim.apply(d)
