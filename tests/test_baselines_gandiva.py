"""Gandiva: packing by profiled duty, time-slicing an oversubscribed cluster, introspective
migration that keeps progress.

Also holds the episode driver the AntMan and PAI baseline tests share (``drive``,
``default_episode``, ``spec``, ``calibrated``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.physics.interference import CONTEXT_SWITCH_OVERHEAD
from gpu_sharing_env.physics.nodes import NodeSpec
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload.job import JobKind, JobSpec
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.baselines.gandiva import Gandiva, shared_option
from tests.helpers import nodes, scenario

KEEP = 1.0 - CONTEXT_SWITCH_OVERHEAD  # time-sharing throughput kept when contexts share


def spec(
    jid: int,
    model: str,
    work_s: float,
    submit_s: float = 0.0,
    *,
    frac: float = 1.0,
    mem_gb: float = 4.0,
    num_gpus: int = 1,
    est_s: float | None = None,
    **kw: Any,
) -> JobSpec:
    """An offline job with a chosen model, GPU fraction and (possibly wrong) estimate."""
    return JobSpec(
        job_id=jid,
        kind=JobKind.OFFLINE,
        model=model,
        submit_s=submit_s,
        num_gpus=num_gpus,
        gpu_frac=frac,
        mem_gb=mem_gb,
        cpu_cores=1.0,
        work_s=work_s,
        est_work_s=work_s if est_s is None else est_s,
        **kw,
    )


def calibrated(
    jobs: list[JobSpec], node_list: list[NodeSpec] | None = None, **over: Any
) -> Simulator:
    """A simulator with the calibrated analytic speed model (duty-driven time-sharing)."""
    return Simulator(scenario(**over), node_list or nodes(), lambda rng: list(jobs))


def drive(
    policy: HeuristicPolicy,
    sim: Simulator,
    seed: int = 0,
    on_decision: Callable[[Simulator, Decision], None] | None = None,
) -> Simulator:
    """The runner's loop (``gpu_sharing_env.evaluation.runner.run_episode``) that also checks every placement
    against the legality mask and calls ``on_decision(sim, d)`` after each applied decision."""
    if policy.mechanisms:
        sim.set_mechanisms(**dict(policy.mechanisms))
    sim.reset(seed)
    policy.reset(seed)
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
    while not sim.done:
        d = policy.decide(ClusterView(sim, codec)) if sim.needs_decision() else None
        if d is None:
            sim.advance()
            continue
        if sim.jobs[d.job_id].status is Status.QUEUED:
            assert sim.mask(d.job_id)[d.gpu, d.option], f"illegal placement {d}"
        assert sim.check(d) is None, f"illegal decision {d}: {sim.check(d)}"
        sim.apply(d)
        if on_decision is not None:
            on_decision(sim, d)
    return sim


def default_episode(policy: HeuristicPolicy, seed: int = 0) -> dict[str, float]:
    """``policy`` completes an episode of ``default`` with every job accounted for, only legal
    decisions and the capacity invariants intact; returns the metrics."""
    sim = make_simulator(load_scenario("default"))
    drive(policy, sim, seed)
    assert sim.done
    m = sim.metrics()
    statuses = [st.status for st in sim.jobs.values()]
    assert Status.FUTURE not in statuses
    assert m["jobs_submitted"] == len(statuses)
    assert m["jobs_completed"] == sum(s is Status.DONE for s in statuses)
    assert m["jobs_failed"] == sum(s is Status.FAILED for s in statuses)
    offline = [st for st in sim.jobs.values() if not st.spec.online]
    assert sum(st.status is Status.DONE for st in offline) >= 0.8 * len(offline)
    sim.cluster.check_invariants()
    return m


# ---------------------------------------------------------------------------------------------
def test_packs_low_duty_jobs_together_but_spreads_high_duty_ones() -> None:
    # ncf's profiled duty is 0.10: two sum to 0.2 <= 1 and share GPU 0 at full speed; a third
    # job arriving later on an idle cluster triggers introspection, which finds nothing hurting.
    low = [spec(0, "ncf", 5000.0), spec(1, "ncf", 5000.0), spec(2, "ncf", 100.0, 600.0)]
    sim = drive(Gandiva(), calibrated(low, nodes(gpus=3)))
    first = {j: st.ledger.first_start_t for j, st in sim.jobs.items()}
    assert first[0] == first[1] == 0.0
    # Turn-taking (physics v2): each one's GPU part (0.1 of its time) is stretched by the
    # other's 0.1, less the switch loss: rate KEEP / (0.9 + 0.1 * 1.1). (The third job's short
    # visit moves the end by well under 0.1 %.)
    assert sim.jobs[0].ledger.finish_t == pytest.approx(5000.0 * (0.9 + 0.1 * 1.1) / KEEP, rel=1e-3)
    assert sim.metrics()["migrations"] == 0

    seen: list[tuple[int, int]] = []
    low2 = [spec(0, "ncf", 5000.0), spec(1, "ncf", 5000.0)]
    drive(
        Gandiva(),
        calibrated(low2, nodes(gpus=2)),
        on_decision=lambda s, d: seen.append((d.job_id, d.gpu)),
    )
    assert seen == [(0, 0), (1, 0)]  # packed onto one GPU

    # resnet50's duty is 1.0: two would sum to 2 > 1, so the second takes the empty GPU.
    seen.clear()
    high = [spec(0, "resnet50", 5000.0), spec(1, "resnet50", 5000.0)]
    sim = drive(
        Gandiva(),
        calibrated(high, nodes(gpus=2)),
        on_decision=lambda s, d: seen.append((d.job_id, d.gpu)),
    )
    assert seen == [(0, 0), (1, 1)]
    assert sim.jobs[0].ledger.finish_t == pytest.approx(5000.0)  # alone: full speed


def test_oversubscribed_jobs_time_slice_then_migrate_when_packing_hurts() -> None:
    # Two V100s. A and B (resnet50, duty 1) take one GPU each; C arrives with no empty GPU and
    # is time-sliced onto GPU 0 beside A (Gandiva admits rather than queues). B ends at 1000 s;
    # D's arrival at 2000 s is the next decision point: GPU 0's observed utilisation (0.97) is
    # far below its summed duty (2), so a job moves to the empty GPU 1.
    jobs = [
        spec(0, "resnet50", 20_000.0),
        spec(1, "resnet50", 1_000.0),
        spec(2, "resnet50", 20_000.0, 10.0),
        spec(3, "ncf", 100.0, 2_000.0, mem_gb=2.0),
    ]
    log: list[tuple[float, int, int, float]] = []

    def hook(s: Simulator, d: Decision) -> None:
        log.append((s.now, d.job_id, d.gpu, s.jobs[d.job_id].work_done))

    sim = drive(Gandiva(), calibrated(jobs, nodes(gpus=2)), on_decision=hook)
    assert [(t, j, g) for t, j, g, _ in log[:3]] == [(0.0, 0, 0), (0.0, 1, 1), (10.0, 2, 0)]
    # The migration: C (most estimated work left) moves to GPU 1 at 2000 s with its progress:
    # 1990 s at half the GPU, less the context-switch overhead.
    t, j, g, done = log[3]
    assert (t, j, g) == (2000.0, 2, 1)
    assert done == pytest.approx(1990.0 * 0.5 * KEEP)
    assert sim.metrics()["migrations"] == 1
    # C resumes after the 30 s checkpoint-restore pause, alone, at full speed: progress kept.
    migration_s = sim.cfg.sharing.migration_s
    assert sim.jobs[2].ledger.finish_t == pytest.approx(2000.0 + migration_s + 20_000.0 - done)
    # Without introspection C would have stayed beside A: it finishes far later.
    stay = drive(Gandiva(hurt_ratio=0.0), calibrated(jobs, nodes(gpus=2), horizon_h=24.0))
    assert stay.metrics()["migrations"] == 0
    assert stay.jobs[2].ledger.finish_t > sim.jobs[2].ledger.finish_t + 5_000.0


def test_a_job_estimated_nearly_done_is_not_migrated() -> None:
    # The same situation, but C's estimate says it is nearly done (500 s): moving it is not
    # worth the pause, so A (more estimated work left) moves instead, once.
    jobs = [
        spec(0, "resnet50", 20_000.0),
        spec(1, "resnet50", 1_000.0),
        spec(2, "resnet50", 20_000.0, 10.0, est_s=500.0),
        spec(3, "ncf", 100.0, 2_000.0, mem_gb=2.0),
        spec(4, "ncf", 100.0, 2_500.0, mem_gb=2.0),
    ]
    moved: list[int] = []

    def hook(s: Simulator, d: Decision) -> None:
        if s.jobs[d.job_id].ledger.attempts == 0 and s.jobs[d.job_id].ledger.first_start_t < s.now:
            moved.append(d.job_id)

    sim = drive(Gandiva(), calibrated(jobs, nodes(gpus=2)), on_decision=hook)
    assert moved == [0]
    assert sim.metrics()["migrations"] == 1


def test_a_job_still_setting_up_is_not_migrated() -> None:
    # Four V100s, A (job 0) on GPU 0 and B (job 1, more estimated work left) on GPU 1. At
    # 1,000 s (D's arrival) another policy moves B onto GPU 0 beside A: B sets up (checkpoint
    # restore) until 1,030 s and cannot move again before. A Gandiva that did not make that move
    # (a planner's rollout hands over from a candidate to its own copy of the base at such an
    # instant) finds GPU 0 hurting; it moves A, not B (it asked for B's legal destinations with
    # the placement mask, and the simulator refused the move: ``IllegalDecision``).
    jobs = [
        spec(0, "resnet50", 20_000.0),
        spec(1, "resnet50", 30_000.0),
        spec(2, "ncf", 100.0, 1_000.0, mem_gb=2.0),
    ]
    sim = calibrated(jobs, nodes(gpus=4))
    sim.reset(0)
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
    opt = shared_option(ClusterView(sim, codec))
    assert opt is not None
    sim.apply(Decision(0, 0, opt))
    sim.apply(Decision(1, 1, opt))
    while sim.now < 1_000.0:
        sim.advance()
    sim.apply(Decision(1, 0, opt))  # the other policy's move
    assert sim.jobs[1].setup_until > sim.now
    view = ClusterView(sim, codec)
    assert not view.migration_mask(1).any()
    d = Gandiva().migration(view)
    assert d is not None and d.job_id == 0 and d.gpu in (1, 2, 3)
    assert sim.check(d) is None


def test_gandiva_completes_the_default_episode() -> None:
    assert Gandiva.oracle is False
    default_episode(Gandiva(), seed=0)
