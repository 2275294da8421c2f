"""The paired reward's reference curve is the reference's runner episode: its last value is the
sum of the JCTs the runner's ``jct_mean_s`` averages, its last time the episode's end, for a
heuristic with its own decision scope (sjf_predicted, the whole queue) or mechanisms (MuxFlow,
GPUPool) as for one with neither (before, the curve ignored both: sjf_predicted's on `default`
seed 962 ended at 70,100 s with 477,789 job-s where its episode ends at 76,913 s with 535,135)."""

from __future__ import annotations

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_gym.agents.envs import reference_curve


@pytest.mark.parametrize("policy", ["sjf_predicted", "muxflow", "gpupool", "speed_sjf_queue"])
def test_curve_is_the_runner_episode(policy: str) -> None:
    cfg = load_scenario("default")
    sim = make_simulator(cfg)
    m = run_episode(make_policy(policy), sim, 962)
    jct_sum = sum(
        (st.ledger.finish_t if st.status is Status.DONE else sim.now) - st.spec.submit_s
        for st in sim.jobs.values()
        if not st.spec.online and st.status in (Status.DONE, Status.QUEUED, Status.RUNNING)
    )
    counted = sum(
        not st.spec.online and st.status in (Status.DONE, Status.QUEUED, Status.RUNNING)
        for st in sim.jobs.values()
    )
    assert jct_sum == pytest.approx(m["jct_mean_s"] * counted, rel=1e-12)
    times, integral = reference_curve(make_policy(policy), make_simulator(cfg), 962)
    assert times[-1] == sim.now
    assert integral[-1] == pytest.approx(jct_sum, rel=1e-12)
