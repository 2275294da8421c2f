"""Faults: propagation by sharing mode, MuxFlow's mixed handling, OOM, checkpoints."""

from __future__ import annotations

import pytest

from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.faults import FaultCause
from gpu_sharing_env.sim.state import Status
from tests.helpers import job, make_sim, nodes, option


def _two_on_one_gpu(label: str, mixed: bool):
    sim = make_sim([job(0, 1000.0), job(1, 1000.0)], faults={"mixed_handling": mixed})
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, label)))
    sim.apply(Decision(1, 0, option(sim, label)))
    return sim


@pytest.mark.parametrize(
    ("label", "mixed", "cause", "victims"),
    [
        ("mps50", False, FaultCause.USER_SIGNAL, 1),  # MPS server goes down with the client
        ("mps50", True, FaultCause.USER_SIGNAL, 0),  # graceful exit on SIGINT/SIGTERM
        ("mps50", True, FaultCause.APP_ERROR, 1),  # detector resets the MPS server
        ("mps50", False, FaultCause.OOM, 0),  # allocation failure stays with the client
        ("ts", False, FaultCause.APP_ERROR, 0),  # time-sharing isolates
        ("ts", False, FaultCause.XID, 0),
    ],
)
def test_propagation(label, mixed, cause, victims):
    sim = _two_on_one_gpu(label, mixed)
    sim.inject_fault(0, cause)
    m = sim.metrics()
    assert m["errors_total"] == 1 + victims
    assert m["errors_propagated"] == victims
    assert (sim.jobs[1].status is Status.RUNNING) == (victims == 0)
    assert sim.jobs[0].status is Status.QUEUED  # re-queued, attempt 1 of 3


def test_mig_isolates():
    sim = make_sim([job(0, 1000.0), job(1, 1000.0)], nodes("A100-40GB"))
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mig3g")))
    sim.advance()
    sim.apply(Decision(1, 0, option(sim, "mig3g")))
    sim.inject_fault(0, FaultCause.APP_ERROR)
    assert sim.jobs[1].status is Status.RUNNING
    assert sim.metrics()["errors_propagated"] == 0


def test_rollback_to_last_checkpoint():
    sim = make_sim([job(0, 1000.0, checkpoint_interval_s=100.0)])
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "excl")))
    sim.run_until(250.0)
    sim.inject_fault(0, FaultCause.APP_ERROR)
    st = sim.jobs[0]
    assert st.work_done == pytest.approx(200.0)  # 250 done, 50 since the checkpoint at 200 lost
    assert sim.metrics()["gpu_hours_lost"] == pytest.approx(50 / 3600)
    assert st.status is Status.QUEUED and st.ledger.attempts == 1


def test_gives_up_after_max_attempts():
    sim = make_sim([job(0, 1000.0)], faults={"max_attempts": 2})
    sim.reset(0)
    for _ in range(2):
        sim.apply(Decision(0, 0, option(sim, "excl")))
        sim.inject_fault(0, FaultCause.APP_ERROR)
    assert sim.jobs[0].status is Status.FAILED
    assert sim.metrics()["jobs_failed"] == 1


def test_oom_from_memory_overcommit():
    # declared 6 GB each (fits 16 GB), but job 1 really peaks at 12 GB: 18 > 16 → OOM at +60 s
    sim = make_sim([job(0, 1000.0, mem_gb=6.0), job(1, 1000.0, mem_gb=6.0, true_mem_gb=12.0)])
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "mps50")))
    sim.apply(Decision(1, 0, option(sim, "mps50")))
    sim.advance()
    assert sim.now == 60.0
    m = sim.metrics()
    assert m["x_errors_oom"] == 1 and m["errors_propagated"] == 0
    assert sim.jobs[1].status is Status.QUEUED and sim.jobs[0].status is Status.RUNNING


def test_random_faults_are_counted_and_jobs_accounted():
    jobs = [job(i, 3000.0, submit_s=10.0 * i) for i in range(6)]
    sim = make_sim(jobs, nodes(gpus=2), faults={"rate_per_gpu_h": {"app_error": 2.0}})
    sim.reset(3)
    mps = option(sim, "mps50")
    while not sim.done:
        if sim.needs_decision():
            j = sim.window_jobs()[0].job_id
            g, o = next((g, o) for g, o in zip(*sim.mask(j).nonzero()) if o == mps)
            sim.apply(Decision(j, int(g), int(o)))
        else:
            sim.advance()
    m = sim.metrics()
    assert m["errors_total"] > 0
    assert m["errors_total"] == sum(v for k, v in m.items() if k.startswith("x_errors_"))
    total = m["jobs_completed"] + m["jobs_failed"] + m["x_jobs_running"] + m["x_jobs_queued"]
    assert m["jobs_submitted"] == total == 6
