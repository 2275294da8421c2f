"""The reset and the env layer of a step (docs/notes/2026-12-02-reset-and-env-layer.md): the job
records outside the cyclic GC, the draw memo keeping the shared past's warm start itself, the
history's submissions per group made once per warm start, the past's key, the services' draws
through ``synthetic._uniforms``, and the jct reward's SLO term inlined. Each against what it
replaced, compiled and interpreted (the structural GC test only where compiled)."""

from __future__ import annotations

import copy
import gc
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pytest

import gpu_sharing_env
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.rewards import JctReward, SloReward
from gpu_sharing_env.sim.build import ScenarioWorkload, build_workload, make_simulator
from gpu_sharing_env.sim.state import JobLedger, JobState, ServingState
from gpu_sharing_env.workload import synthetic
from gpu_sharing_env.workload.draws import DRAWS
from gpu_sharing_env.workload.predictor import OnlinePredictor
from gpu_sharing_env.workload.services import ServiceWorkloadConfig, generate_services
from gpu_sharing_env.workload.synthetic import SyntheticWorkloadConfig


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))


@pytest.fixture(autouse=True)
def _empty_memo() -> None:
    DRAWS.clear()


def _workload() -> ScenarioWorkload:
    w = build_workload(load_scenario("default"))
    assert isinstance(w, ScenarioWorkload)
    return w


# ---------------------------------------------------------------------- the job records
def test_job_records_are_outside_the_cyclic_gc_where_compiled() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(3)
    st = next(iter(sim.jobs.values()))
    assert isinstance(st, JobState)
    if "gpu_sharing_env.sim.state" not in gpu_sharing_env.COMPILED:
        pytest.skip("interpreted: slotted classes, tracked as any")
    # (no record can be part of a cycle: its fields are numbers, its spec, two lists of
    # ints / MIG instances, a dict of floats and its own two sub-records)
    assert not gc.is_tracked(st)
    assert not gc.is_tracked(st.serving) and not gc.is_tracked(st.ledger)
    assert not gc.is_tracked(ServingState()) and not gc.is_tracked(JobLedger())
    # what a record holds is still what it was (and freed with it)
    assert st.gpus == [] and st.mig == [] and st.frac == {}
    copied = copy.copy(st)
    assert copied.serving is not st.serving and copied.ledger is not st.ledger


# ---------------------------------------------------------------------- the draw memo
def test_the_memo_keeps_the_pasts_warm_start_and_a_hit_is_a_fresh_copy() -> None:
    w = _workload()
    first = w(_rng(11))
    past = first.drawn.past if first.drawn is not None else None
    assert past is not None and first.predictor is not None
    warm = past.warm(w.pred_cfg, first.predictor.exact)
    assert first.origin is warm and first.predictor is not warm
    (entry,) = DRAWS._entries.values()
    assert entry[2].predictor is warm  # (kept as is, never handed out)
    # the first draw's predictor changes as a simulator feeds it ...
    spec = next(s for s in first if not s.online and s.group)
    first.predictor.note_submit(spec, 5.0)
    first.predictor.group_stats(spec, 10.0)
    first.predictor.observe(spec, spec.job_id)
    # ... and a hit is the draw as made: a copy of the untouched warm start
    second = w(_rng(11))
    assert DRAWS.hits == 1 and second.predictor is not None
    assert second.predictor is not warm and second.predictor is not first.predictor
    assert second.predictor.observed == [] and second.predictor._subs is None
    DRAWS.clear()
    again = w(_rng(11))
    assert again.predictor is not None
    for name in ("_rows_y", "_g", "_u", "observed", "made", "_subs_todo", "_sum"):
        assert getattr(second.predictor, name) == getattr(again.predictor, name), name
    assert second.predictor.group_stats(spec, 10.0) == again.predictor.group_stats(spec, 10.0)
    assert list(second) == list(again)


def test_a_per_episode_past_keeps_a_copy() -> None:
    cfg = load_scenario("default")
    off = replace(
        cfg.workload.offline, params={**cfg.workload.offline.params, "past": "per_episode"}
    )
    w = build_workload(replace(cfg, workload=replace(cfg.workload, offline=off)))
    first = w(_rng(4))
    assert first.origin is None and first.predictor is not None
    (entry,) = DRAWS._entries.values()
    assert entry[2].predictor is not first.predictor  # (a copy: the handed-out one changes)


# ---------------------------------------------------------------------- history submissions
def _subs(pred: OnlinePredictor, spec: object, now: float) -> dict[str, list[float]]:
    pred.group_stats(spec, now)  # type: ignore[arg-type]
    assert pred._subs is not None
    return pred._subs


def test_history_submissions_are_made_once_and_each_copy_grows_its_own() -> None:
    w = _workload()
    drawn = w(_rng(21))
    past = drawn.drawn.past if drawn.drawn is not None else None
    assert past is not None
    warm = past.warm(w.pred_cfg, False)
    specs = [s for s in drawn if not s.online and s.group]
    a, b = copy.deepcopy(warm), copy.deepcopy(warm)
    for t, s in enumerate(specs[:6]):
        a.note_submit(s, float(t))
    sub_a = _subs(a, specs[0], 3.0)
    base = warm._subs_base[0]
    assert base is not None and b._subs_base[0] is base  # (made once, shared by the copies)
    sub_b = _subs(b, specs[0], 3.0)
    # each as a predictor built afresh on the history gives it (the history's lists copied)
    fresh_a = OnlinePredictor(w.pred_cfg, past.history)
    for t, s in enumerate(specs[:6]):
        fresh_a.note_submit(s, float(t))
    fresh_b = OnlinePredictor(w.pred_cfg, past.history)
    assert sub_a == _subs(fresh_a, specs[0], 3.0)
    assert list(sub_a) == list(fresh_a._subs or {})
    assert sub_b == _subs(fresh_b, specs[0], 3.0)
    assert sub_a != sub_b
    # later submissions go to the copy's own lists, never the shared history part
    b.note_submit(specs[0], 99.0)
    assert sub_b[specs[0].group][-1] == 99.0
    assert base[specs[0].group][-1] != 99.0
    assert all(sub_b[g] is not base[g] for g in base)


# ---------------------------------------------------------------------- the past's key
def _key_by_abc(cfg: SyntheticWorkloadConfig) -> tuple[object, ...]:
    # (the key as it was made before: every field, a Mapping as its items)
    return tuple(
        (f, tuple(v.items()) if isinstance(v, Mapping) else v)
        for f, v in ((f, getattr(cfg, f)) for f in SyntheticWorkloadConfig.__dataclass_fields__)
    )


@pytest.mark.parametrize(
    "cfg",
    [
        SyntheticWorkloadConfig(),
        SyntheticWorkloadConfig(model_mix={"bert": 1.0, "resnet50": 2.0}, arrivals_per_h=3),
        SyntheticWorkloadConfig(high_gpu_models={"gpt2": 1.0}, past="per_episode"),
        SyntheticWorkloadConfig(fleet=synthetic.fleet_capacity([("A100-40GB", 4), ("T4", 8)])),
    ],
)
def test_the_pasts_key_is_every_field_with_mappings_as_items(cfg: SyntheticWorkloadConfig) -> None:
    key = synthetic._past_key(cfg)
    assert key == _key_by_abc(cfg)
    hash(key)


# ---------------------------------------------------------------------- the services
class _Methods(np.random.Generator):
    """A Generator subclass: ``draw_capsule`` gives None, every draw is the method's."""


@pytest.mark.parametrize(
    "params",
    [
        {"num_services": 3},
        {"num_services": 7, "peak_hour_jitter": 0.0},
        {"num_services": 5, "peak_rps_min": 40.0, "peak_rps_max": 40.0},
        {"num_services": 4, "trough_ratio_min": 0.0, "trough_ratio_max": 1.0},
    ],
)
def test_services_draw_as_the_generators_methods(params: dict[str, float]) -> None:
    cfg = ServiceWorkloadConfig(**params)  # type: ignore[arg-type]
    for seed in (0, 1, 77):
        plain = _rng(seed)
        sub = _Methods(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(0,))))
        plain.random(3)  # (a used generator: the draws start mid-stream)
        sub.random(3)
        a = generate_services(cfg, plain, 86_400.0, 40)
        b = generate_services(cfg, sub, 86_400.0, 40)
        assert a == b
        assert plain.bit_generator.state == sub.bit_generator.state


# ---------------------------------------------------------------------- the reward
@pytest.mark.parametrize("form", ["hinge", "linear"])
def test_jct_reward_is_its_two_terms(form: str) -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(2)
    whole, slo = JctReward(slo_weight=70.0, slo_form=form), SloReward(70.0, form)
    whole.reset(sim)
    slo.reset(sim)
    prev, scale = sim.acc.in_system_s, whole._scale
    n_offline = sum(not st.spec.online for st in sim.jobs.values())
    assert n_offline > 0 and scale == 3600.0 * n_offline
    steps = 0
    while not sim.done and steps < 400:
        sim.advance()
        if steps == 150:  # (a Lagrange multiplier's change between steps)
            whole.slo.slo_weight = slo.slo_weight = 3.5
        cur = sim.acc.in_system_s
        expect = -(cur - prev) / scale + slo(sim)
        prev = cur
        assert whole(sim) == expect
        steps += 1
    assert steps > 50


# ---------------------------------------------------------------------- the episode's generators
def test_the_episode_generators_are_numpys_spawned_children() -> None:
    from gpu_sharing_env.sim.engine import _episode_rngs

    rng = np.random.default_rng(2026)
    seeds = [0, 1, 7, 2**31 - 1, 2**32 - 1, 2**32, 2**64 + 5, 12345678901234567890, 2**128 + 3]
    seeds += [int(rng.integers(0, 2**62)) >> int(rng.integers(0, 62)) for _ in range(60)]
    for seed in seeds:
        got = _episode_rngs(seed)
        spawned = np.random.SeedSequence(seed).spawn(3)
        for i, child in enumerate(spawned):
            want = np.random.default_rng(child)
            assert got[i].bit_generator.state == want.bit_generator.state, (seed, i)
            assert got[i].random(3).tolist() == want.random(3).tolist()
    # what numpy refuses or coerces goes to numpy
    with pytest.raises(ValueError):
        _episode_rngs(-1)
    a = _episode_rngs(np.int64(5))  # type: ignore[arg-type]
    assert a[0].bit_generator.state == _episode_rngs(5)[0].bit_generator.state


class _Acc:
    def __init__(self) -> None:
        self.in_system_s, self.requests_ok, self.requests = 0.0, 0, 0


class _Sim:
    """What the rewards read of a simulator: its accounts, its SLO target, its job count."""

    def __init__(self) -> None:
        self.acc = _Acc()
        self.cfg = type("Cfg", (), {"slo_target": 0.95})()
        self.offline_jobs = (7, 7)


@pytest.mark.parametrize("form", ["hinge", "linear"])
def test_jct_reward_is_its_two_terms_on_both_sides_of_the_target(form: str) -> None:
    fake = _Sim()
    whole, slo = JctReward(slo_weight=40.0, slo_form=form), SloReward(40.0, form)
    whole.reset(fake)  # type: ignore[arg-type]
    slo.reset(fake)  # type: ignore[arg-type]
    assert whole._scale == 3600.0 * 7
    prev = 0.0
    # attainment: none yet, below the target, above it, exactly at it, below again
    for in_sys, ok, n in [(10.0, 0, 0), (50.0, 3, 10), (90.0, 99, 100), (95.5, 190, 200),
                          (120.0, 191, 260), (120.0, 400, 401)]:  # fmt: skip
        fake.acc.in_system_s, fake.acc.requests_ok, fake.acc.requests = in_sys, ok, n
        expect = -(in_sys - prev) / (3600.0 * 7) + slo(fake)  # type: ignore[arg-type]
        prev = in_sys
        assert whole(fake) == expect  # type: ignore[arg-type]
