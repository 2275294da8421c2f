"""AntMan: guarantee jobs first and at full speed under priority time-sharing; opportunistic
jobs in the leftover GPU time, with memory headroom kept while a guarantee job waits."""

from __future__ import annotations

import pytest

from gpu_sharing_env.physics.interference import PRIO_RESIDUAL
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_gym.baselines.antman import AntMan
from tests.helpers import nodes
from tests.test_baselines_gandiva import calibrated, default_episode, drive, spec

# Profiled duties (gpu_sharing_env.physics.zoo): vgg16 0.51, resnet18 0.96, resnet50 1.0.
VGG, R18 = 0.51, 0.96
# Priority time-sharing (physics v2, interference.AnalyticSpeedModel): the guarantee job is
# slowed only by the residual of the opportunistic one's demand; the opportunistic job gets the
# GPU time the (offline) guarantee job leaves.
GUAR = 1.0 / ((1 - VGG) + VGG * (1 + PRIO_RESIDUAL * R18))
OPP = 1.0 / ((1 - R18) + R18 / (1 - VGG))


def test_guarantee_job_jumps_the_queue_and_runs_at_full_speed() -> None:
    # One V100. The opportunistic resnet18 job is ahead in the queue; the guarantee (priority 1)
    # vgg16 job is placed first, and the opportunistic job fills the GPU time vgg16 leaves.
    opp = spec(0, "resnet18", 2_000.0, mem_gb=6.0)
    guar = spec(1, "vgg16", 1_000.0, mem_gb=8.0, priority=1)
    order: list[int] = []
    rates: dict[int, float] = {}

    def hook(s: Simulator, d: Decision) -> None:
        order.append(d.job_id)
        rates.update({j: st.rate for j, st in s.jobs.items()})

    sim = drive(AntMan(), calibrated([opp, guar]), on_decision=hook)
    assert order == [1, 0]
    # Priority time-sharing: vgg16 (duty 0.51) is served first, slowed only by the residual;
    # resnet18 runs in the 0.49 of the GPU vgg16 leaves.
    assert rates[1] == pytest.approx(GUAR)
    assert rates[0] == pytest.approx(OPP)
    # Dynamic scaling: when the guarantee job leaves, the opportunistic one takes the whole GPU.
    t_g = 1_000.0 / GUAR
    assert sim.jobs[1].ledger.finish_t == pytest.approx(t_g)
    done_then = rates[0] * t_g
    assert sim.jobs[0].ledger.finish_t == pytest.approx(t_g + 2_000.0 - done_then)


def test_one_guarantee_job_per_gpu_and_opportunistic_work_goes_to_the_idle_time() -> None:
    # Two V100s. resnet50 (duty 1) and vgg16 (duty 0.51), both guarantee jobs, get a GPU each;
    # the opportunistic job arriving later joins the GPU with observed idle time (vgg16's).
    jobs = [
        spec(0, "resnet50", 5_000.0, priority=1),
        spec(1, "vgg16", 5_000.0, priority=1),
        spec(2, "resnet18", 5_000.0, 10.0),
    ]
    where: dict[int, int] = {}
    rates: dict[int, float] = {}

    def hook(s: Simulator, d: Decision) -> None:
        where[d.job_id] = d.gpu
        rates.update({j: st.rate for j, st in s.jobs.items()})

    drive(AntMan(), calibrated(jobs, nodes(gpus=2)), on_decision=hook)
    assert where == {0: 0, 1: 1, 2: 1}
    assert rates[0] == pytest.approx(1.0)  # alone
    assert rates[1] == pytest.approx(GUAR)  # guarantee speed nearly kept beside the newcomer
    assert rates[2] == pytest.approx(OPP)


def test_memory_headroom_is_kept_while_a_guarantee_job_waits() -> None:
    # Two 16 GB V100s: a guarantee vgg16 on GPU 0 and an empty GPU 1. A 10 GB opportunistic job
    # would exceed half of GPU 1's memory, so while the 2-GPU guarantee gang waits (it needs two
    # GPUs without a guarantee job) the opportunistic job squeezes in beside vgg16 on GPU 0.
    base = [spec(0, "vgg16", 50_000.0, mem_gb=4.0, priority=1)]
    opp = spec(2, "resnet18", 5_000.0, 20.0, mem_gb=10.0)
    gang = spec(1, "resnet50", 5_000.0, 10.0, num_gpus=2, mem_gb=4.0, priority=1)
    where: dict[int, int] = {}

    def hook(s: Simulator, d: Decision) -> None:
        where[d.job_id] = d.gpu

    drive(AntMan(), calibrated([*base, gang, opp], nodes(gpus=2)), on_decision=hook)
    assert where[2] == 0
    # With no guarantee job waiting, the headroom is lent out: the empty GPU is the most idle.
    where.clear()
    drive(AntMan(), calibrated([*base, opp], nodes(gpus=2)), on_decision=hook)
    assert where[2] == 1


def test_antman_completes_the_default_episode() -> None:
    assert AntMan.oracle is False
    default_episode(AntMan(), seed=0)
