"""Speed-aware shortest-predicted-job-first: shortest predicted duration first, each job on
the GPU where solo speed × free share is highest, AntMan's rules for everything else."""

from __future__ import annotations

from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_gym.baselines.antman import AntMan
from gpu_sharing_gym.baselines.speed_sjf import SpeedSJF
from tests.test_baselines_gandiva import calibrated, default_episode, drive, spec

# Profiled solo speeds relative to V100 (gpu_sharing_env.physics.zoo): resnet50 T4 0.41, A100 1.37;
# vgg16 T4 0.449, A100 2.168. Duties: resnet50 1.0, vgg16 0.51.


def two_gpus(fast: str) -> list[NodeSpec]:
    """GPU 0: a T4; GPU 1: ``fast`` (separate nodes)."""
    return [
        NodeSpec("t4", "T4", 1, 32.0, 128.0, Interconnect.PCIE),
        NodeSpec("fast", fast, 1, 64.0, 256.0, Interconnect.NVLINK),
    ]


def placements(policy: object, sim: Simulator) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []

    def hook(s: Simulator, d: Decision) -> None:
        out.append((d.job_id, d.gpu))

    drive(policy, sim, on_decision=hook)  # type: ignore[arg-type]
    return out


def test_shortest_job_gets_the_fast_gpu_and_the_long_one_waits_for_no_busy_gpu() -> None:
    # A T4 and a V100; two resnet50 jobs at t = 0, the long one first in the queue.
    # Predicted durations: 8000 s / 1.0 and 2000 s / 1.0, so job 1 goes first, to the V100
    # (rate 1.0 x min(1, 1.0 idle / 1.0 duty) = 1.0 against the T4's 0.41). The V100 is then
    # fully busy (idle 0 < min_idle 0.05), so job 0 takes the T4.
    jobs = [spec(0, "resnet50", 8_000.0), spec(1, "resnet50", 2_000.0)]
    got = placements(SpeedSJF(), calibrated(jobs, two_gpus("V100-16GB")))
    assert got == [(1, 1), (0, 0)]
    # AntMan serves queue order: the long job takes the V100 (most idle, then fastest).
    assert placements(AntMan(), calibrated(jobs, two_gpus("V100-16GB"))) == [(0, 1), (1, 0)]


def test_duration_is_predicted_on_the_fastest_gpu_and_shares_are_priced() -> None:
    # A T4 and an A100-40GB. vgg16 with the larger estimate is predicted shorter:
    # 3000 s / 2.168 = 1384 s against resnet50's 2500 s / 1.37 = 1825 s. vgg16 takes the A100.
    # resnet50 (duty 1.0) then prefers sharing the A100 (idle 1 - 0.51: 1.37 x 0.49 = 0.67)
    # to the empty T4 (0.41).
    jobs = [spec(0, "resnet50", 2_500.0), spec(1, "vgg16", 3_000.0)]
    sim = calibrated(jobs, two_gpus("A100-40GB"))
    got = placements(SpeedSJF(), sim)
    assert got == [(1, 1), (0, 1)]


def test_speed_sjf_completes_the_default_episode() -> None:
    assert SpeedSJF.oracle is False and SpeedSJF.name == "speed_sjf"
    default_episode(SpeedSJF(), seed=0)
