"""``Decision.batch_size``: a placement may give an online service its batch size (GPULet's third
dimension). Validated by the legality check, kept on the job's state for that placement only,
and used by the engine for the service's batch latency, GPU duty and latency statistics."""

from __future__ import annotations

from typing import ClassVar

import pytest

from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import MAX_BATCH_SIZE, Decision, IllegalDecision, Simulator
from gpu_sharing_env.sim.online import latency
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_gym.baselines.gpulet import GPULet
from tests import helpers
from tests.helpers import LinearSpeed, job, nodes, option, scenario
from tests.test_baselines_muxflow import make, run_policy, svc


class BatchSpeed(LinearSpeed):
    """LinearSpeed with a batch latency that grows with the batch: ``2 + batch`` ms."""

    SOLO: ClassVar[dict[str, float]] = LinearSpeed.SOLO

    def batch_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        return 2.0 + float(batch_size)


RPS = 400.0
SLO_MS = 200.0


def service(jid: int = 0, batch: int = 8) -> JobSpec:
    """A bert service at a constant ``RPS`` for ten hours."""
    return helpers.service(jid, 36_000.0, rps=RPS, slo_ms=SLO_MS, batch_size=batch)


def sim_with(jobs: list[JobSpec], gpus: int = 2) -> Simulator:
    sim = Simulator(scenario(), nodes(gpus=gpus), lambda rng: list(jobs), speed=BatchSpeed())
    sim.reset(0)
    return sim


def test_batch_size_is_checked() -> None:
    sim = sim_with([service(0), job(1, 100.0)])
    excl = option(sim, "excl")
    why = sim.check(Decision(1, 1, excl, batch_size=4))
    assert why is not None and "only online services" in why and "job 1" in why
    for bad in (-1, MAX_BATCH_SIZE + 1):
        why = sim.check(Decision(0, 0, excl, batch_size=bad))
        assert why is not None and f"must be in 1..{MAX_BATCH_SIZE}" in why
        assert "\n" not in why
        with pytest.raises(IllegalDecision, match="batch_size"):
            sim.apply(Decision(0, 0, excl, batch_size=bad))
    assert sim.check(Decision(0, 0, excl, batch_size=MAX_BATCH_SIZE)) is None
    assert sim.check(Decision(0, 0, excl)) is None  # 0: the service's own
    assert sim.check(Decision(1, 1, excl, batch_size=0)) is None


@pytest.mark.parametrize("batch", [0, 2, 32])
def test_the_placement_batch_size_drives_latency_and_duty(batch: int) -> None:
    sim = sim_with([service(0, batch=8)])
    sim.apply(Decision(0, 0, option(sim, "excl"), batch_size=batch))
    st = sim.jobs[0]
    b = batch or 8
    assert st.serving.batch_size == batch and st.effective_batch_size == b
    assert st.serving.solo_batch_ms == 2.0 + b  # ``_solo_batch_ms`` at the placement's batch
    assert ClusterView(sim).job(0).batch_size == b
    sim.advance()  # past the first load tick
    assert sim.now > 0
    want = latency(2.0 + b, st.serving.rps, b, SLO_MS)
    assert st.serving.latency_ms == pytest.approx(want.mean_ms)
    assert st.serving.p99_ms == pytest.approx(want.p99_ms)
    # ``_update_load``'s duty: requests/s x batch latency / batch (quantised to DUTY_STEP).
    assert st.serving.duty == pytest.approx(RPS * (2.0 + b) / 1000.0 / b, abs=0.03)


def test_a_new_placement_replaces_the_batch_size_and_leaving_resets_it() -> None:
    # Offline arrivals at 600 s and 1,200 s are decision points after the load ticks (300 s).
    sim = sim_with([service(0, batch=8), job(1, 1e5, 600.0), job(2, 1e5, 1_200.0)], gpus=4)
    excl = option(sim, "excl")
    sim.apply(Decision(0, 0, excl, batch_size=2))
    sim.advance()
    assert sim.now == 600.0
    st = sim.jobs[0]
    assert st.serving.latency_ms == pytest.approx(latency(4.0, st.serving.rps, 2, SLO_MS).mean_ms)
    # Migrating it (a decision about a running job) with another batch size: the tick's
    # per-service constants are rebuilt with it.
    sim.apply(Decision(0, 1, excl, batch_size=16))
    assert st.gpus == [1] and st.serving.batch_size == 16 and st.serving.solo_batch_ms == 18.0
    sim.advance()
    assert sim.now == 1_200.0
    assert st.serving.latency_ms == pytest.approx(latency(18.0, st.serving.rps, 16, SLO_MS).mean_ms)
    # The batch size belongs to the placement: gone once the job leaves its GPUs.
    sim.lifecycle.finish(st, st.status.DONE)
    assert st.serving.batch_size == 0 and st.effective_batch_size == 8


def test_the_env_codec_never_sets_a_batch_size() -> None:
    sim = sim_with([service(0)])
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
    d = codec.to_decision(sim, codec.encode(0, 0, option(sim, "excl")))
    assert d is not None and d.batch_size == 0


def test_gpulet_chooses_the_batch_for_the_rate_and_the_slo() -> None:
    # resnet50 on a V100: a batch of b takes 0.92 + 0.744 b ms. GPULet's rule (its artifact's
    # getMaxBatch/getMinPart): the largest b with batch latency L <= b / rate (keeps up) and
    # b / rate + L <= SLO. At 100 req/s a batch of b takes 10 b ms to collect: with a 10 ms SLO
    # no batch fills in time, so a batch of 1 (L(1) below the 10 ms gap between requests);
    # with a 200 ms SLO, 16 (160 ms + 13 ms), not 32 (320 ms > SLO), whatever its duty.
    def placed(slo_ms: float, **kw: object) -> tuple[Decision, Simulator]:
        sim = make([svc(0, "resnet50", 100.0, slo_ms=slo_ms)], nodes(gpus=1))
        log: list[Decision] = []
        run_policy(GPULet(**kw), sim, until_s=0.0, on_decision=lambda v, d: log.append(d))  # type: ignore[arg-type]
        return log[0], sim

    d, sim = placed(10.0)
    st = sim.jobs[0]
    assert d.batch_size == 1 and st.serving.batch_size == 1
    assert st.serving.solo_batch_ms == sim.speed.batch_latency_ms("resnet50", "V100-16GB", 1)
    d, sim = placed(200.0)
    assert d.batch_size == 16 and sim.jobs[0].serving.batch_size == 16
    # Without the search GPULet leaves the batch to the service (0: its configured 8).
    d, sim = placed(200.0, batch_sizes=None)
    assert d.batch_size == 0 and sim.jobs[0].effective_batch_size == 8


def test_a_decision_holds_its_fields_as_the_frozen_dataclass_writes_them() -> None:
    """``Decision.__init__`` (compiled: C calls of ``PyObject_GenericSetAttr``, the function
    behind ``object.__setattr__``) leaves the object a frozen dataclass's own would: each field
    its argument, equal and hashed as its fields, read-only, and the same after a pickle."""
    import dataclasses
    import pickle

    d = Decision(7, 3, 2, 5)
    assert (d.job_id, d.gpu, d.option, d.batch_size) == (7, 3, 2, 5)
    assert dataclasses.astuple(d) == (7, 3, 2, 5)
    assert Decision(7, 3, 2).batch_size == 0
    twin = dataclasses.replace(Decision(0, 0, 0), job_id=7, gpu=3, option=2, batch_size=5)
    assert d == twin and hash(d) == hash(twin)
    assert d != Decision(7, 2, 3, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.gpu = 4  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(d)) == d
    assert Decision.suspend(4) == Decision(4, -1, -1) and Decision.suspend(4).suspends
