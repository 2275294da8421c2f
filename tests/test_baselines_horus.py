"""Horus: co-location never over-commits predicted utilisation; weighted fair queueing over
k-means groups orders the queue by median wait x length; reservations end starvation."""

from __future__ import annotations

import pytest

from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.horus import Group, Horus, wfq_order
from tests.helpers import job, nodes, option
from tests.test_baselines_muxflow import default_episode, label, make, run_policy


def test_wfq_order_follows_group_weights() -> None:
    # Group A: three jobs waiting 10 s each (weight 10 x 3 = 30); group B: one job waiting 100 s
    # (weight 100 x 1). B is heavier: its job goes first although A's jobs are more numerous.
    a = Group((1, 2, 3), weight=30.0)
    b = Group((9,), weight=100.0)
    assert wfq_order([a, b], batch=2) == [9, 1, 2, 3]
    # Quotas are proportional: weights 60 / 40 with a batch of 5 give ceil(3) and ceil(2).
    a = Group((1, 2, 3, 4), weight=60.0)
    b = Group((7, 8, 9), weight=40.0)
    assert wfq_order([a, b], batch=5) == [1, 2, 3, 7, 8, 4, 9]


def test_groups_weigh_median_wait_times_queue_length() -> None:
    # Two busy GPUs; queued at t=0.5..4: four light ncf jobs and one 2-GPU resnet50 gang job.
    jobs = [job(0, 1e5, model="resnet50"), job(5, 1e5, model="resnet50")]
    jobs += [job(i, 100.0, model="ncf", submit_s=float(i)) for i in range(1, 5)]
    jobs.append(job(9, 100.0, model="resnet50", num_gpus=2, submit_s=0.5))
    sim = make(jobs, nodes(gpus=2), env={"queue_window": 8})
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "ts")))
    sim.apply(Decision(5, 1, option(sim, "ts")))
    while sim.now < 4.0:
        sim.advance()  # stops at every arrival (an ncf job could join a GPU); nothing is placed
    assert sim.now == 4.0
    policy = Horus()
    policy.reset(0)
    view = ClusterView(sim)
    groups = policy.groups(view, view.queue)
    by_job = {j: g for g in groups for j in g.jobs}
    assert by_job[9].jobs == (9,)  # the gang job is a group of its own
    ncf = by_job[1]
    assert set(ncf.jobs) == {1, 2, 3, 4} and ncf.jobs[0] == 1  # longest-waiting first
    waits = sorted(view.now_s - float(i) for i in range(1, 5))
    assert ncf.weight == pytest.approx((waits[1] + waits[2]) / 2 * 4)
    assert by_job[9].weight == pytest.approx(view.now_s - 0.5)


def test_never_colocates_beyond_predicted_utilisation_one() -> None:
    # One V100. Predicted utilisations follow the profiles: vgg16 0.51, ppo 0.13, ncf 0.10,
    # resnet50 1.0. The three light jobs share (0.74); resnet50 waits for an empty GPU.
    jobs = [
        job(0, 2000.0, model="vgg16"),
        job(1, 2000.0, model="resnet50", submit_s=1.0),
        job(2, 2000.0, model="ppo", submit_s=2.0),
        job(3, 2000.0, model="ncf", submit_s=3.0),
    ]
    policy = Horus()
    checked = []

    def check(view: ClusterView, d: Decision) -> None:
        if view.n_res[d.gpu] > 0:
            before, _ = policy.gpu_load(view, d.gpu)
            assert before + policy.util(view, view.job(d.job_id), d.gpu) <= 1.0
            checked.append(d.job_id)

    sim = run_policy(policy, make(jobs, nodes(gpus=1)), on_decision=check)
    for m in ("vgg16", "ppo", "ncf", "resnet50"):
        assert policy.predictor.util(m) == pytest.approx(ZOO[m].duty, abs=0.05)
    assert checked == [2, 3]  # ppo and ncf joined vgg16
    assert (
        sim.jobs[1].ledger.first_start_t
        >= max(sim.jobs[j].ledger.finish_t for j in (0, 2, 3)) - 1e-6
    )
    assert {label(sim, j) for j in range(4)} == {"ts"}  # co-located jobs take turns


def test_reservation_ends_the_starvation_of_a_gang_job() -> None:
    # Two GPUs and a stream of light ncf jobs (one every 100 s, 300 s each) that always keeps
    # both GPUs busy; a 2-GPU resnet50 job (predicted utilisation 1: it shares with nobody)
    # arrives at t=10. Without a reservation it waits until the stream ends (t > 6,900 s).
    jobs = [job(i, 300.0, submit_s=100.0 * i, model="ncf") for i in range(70)]
    jobs.append(job(1000, 600.0, submit_s=10.0, model="resnet50", num_gpus=2))
    starts = {}
    for reserve in (3600.0, float("inf")):
        sim = make(jobs, nodes(gpus=2), horizon_h=2.5, env={"queue_window": 8})
        run_policy(Horus(reserve_after_s=reserve), sim)
        starts[reserve] = sim.jobs[1000].ledger.first_start_t
    # the GPUs drain for it: the last ncf jobs, 300 s of work each, run time-shared (switch loss
    # and turn-taking: a little under full speed)
    assert 3600.0 <= starts[3600.0] <= 3600.0 + 10.0 + 300.0 * 1.15
    assert starts[float("inf")] > 6900.0


def test_horus_completes_the_default_episode() -> None:
    policy = Horus()
    default_episode(policy)
    # the per-decision load memo is gone once a decision returns: a copy of the policy (the
    # planner copies its policies for every rollout) carries no snapshot of a simulator
    assert policy._loads is None


def test_fastest_speed_is_the_fleet_wide_maximum() -> None:
    """``speeds`` and ``best_speed`` (the cost's speed terms) read one GPU of each type: on mixed
    fleets they are the same floats as every GPU's speed and their maximum, for each queued
    job's model, and a policy moved to another fleet does not keep the first fleet's answers."""
    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.sim.build import make_simulator

    policy = Horus()
    checked = 0
    for name in ("pai-hetero", "default", "mig-a100", "pai-hetero"):
        sim = make_simulator(load_scenario(name))
        sim.reset(0)
        view = ClusterView(sim)
        assert len(set(view.type_name)) >= 3  # a mixed fleet
        for _, jid in sim.queue:
            jv = view.job(jid)
            every = [view.solo_speed(jv.model, g) for g in range(view.n_gpus)]
            assert policy.speeds(view, jv) == every
            assert policy.best_speed(view, jv) == max(every)
            checked += 1
    assert checked >= 20
