"""PAI (NSDI'22): reserving-and-packing with plan timeouts, load balancing, SJF on predicted
durations."""

from __future__ import annotations

import pytest

from baselines.base import HeuristicPolicy
from baselines.pai import LoadBalance, ReservePack, SjfPredicted
from baselines.reference import FirstFit
from gpu_sharing_env.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.view import ClusterView
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
