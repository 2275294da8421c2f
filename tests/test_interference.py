"""Behaviour of the analytic and table speed models, with hand-computed expectations."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_sharing_env.physics.interference import (
    MIN_RATE,
    AnalyticSpeedModel,
    Resident,
    TableSpeedModel,
    UnknownModelError,
    sm_share_curve,
)
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO, get_profile
from gpu_sharing_env.workload.job import MODEL_CLASSES

V100 = "V100-16GB"
MPS, TS, MIG = SharingMode.MPS, SharingMode.TIME_SHARING, SharingMode.MIG


@pytest.fixture(scope="module")
def model() -> AnalyticSpeedModel:
    return AnalyticSpeedModel()


def test_zoo_covers_model_classes_and_unknown_name_lists_known() -> None:
    assert set(ZOO) == set(MODEL_CLASSES)
    with pytest.raises(UnknownModelError, match="known: bert"):
        get_profile("alexnet")
    with pytest.raises(KeyError):
        AnalyticSpeedModel().rates(V100, MPS, [Resident("nope")])


def test_exclusive_is_one(model: AnalyticSpeedModel) -> None:
    assert model.rates(V100, SharingMode.EXCLUSIVE, [Resident("bert")]) == [1.0]


def test_mps_half_shares_slower_than_alone_and_monotone(model: AnalyticSpeedModel) -> None:
    alone = model.rates(V100, MPS, [Resident("resnet50")])[0]
    assert alone == 1.0
    pair = model.rates(V100, MPS, [Resident("resnet50", 0.5), Resident("bert", 0.5)])
    assert all(0 < r < alone for r in pair)
    # Disjoint 50/50 split, duty 1: rate = g(0.5) / (1 + kb * b_r * b_b), g from resnet50's sm_k
    # (training: the large-batch curve).
    g = sm_share_curve(ZOO["resnet50"].sm_k, 0.5)
    assert pair[0] == pytest.approx(g / (1 + model.kappa_bw * 1.0 * 0.62), rel=1e-9)
    shares = [0.2, 0.4, 0.6, 0.8]
    rates = [model.rates(V100, MPS, [Resident("resnet50", s), Resident("bert", 1 - s)])[0]
             for s in shares]  # fmt: skip
    assert rates == sorted(rates)


def test_p100_ignores_sm_limits(model: AnalyticSpeedModel) -> None:
    a = model.rates("P100", MPS, [Resident("vgg16", 0.2), Resident("lstm", 0.3)])
    b = model.rates("P100", MPS, [Resident("vgg16", 1.0), Resident("lstm", 1.0)])
    assert a == b
    assert model.rates("P100", MPS, [Resident("vgg16", 0.2)]) == [1.0]
    assert model.rates(V100, MPS, [Resident("vgg16", 0.2)])[0] < 1.0


def test_time_sharing_turn_taking(model: AnalyticSpeedModel) -> None:
    # v2: i's GPU part is stretched by the co-runners' demand; a switch loss when >= 2 share.
    keep = 1 - model.context_switch_overhead
    rates = model.rates(V100, TS, [Resident("ncf", duty=0.3), Resident("ppo", duty=0.5)])
    assert rates == pytest.approx([keep / (0.7 + 0.3 * 1.5), keep / (0.5 + 0.5 * 1.3)])
    busy = model.rates(V100, TS, [Resident("bert", duty=1.0), Resident("gpt2", duty=1.0)])
    assert busy == pytest.approx([keep / 2, keep / 2])  # nos: n busy pods get (1 - sigma) / n
    # an online context holds its slice across its gaps: min(1, w * u) of the GPU
    w = model.ts_online_weight
    pair = [Resident("bert", duty=0.5, online=True), Resident("resnet50", duty=1.0)]
    on, off = model.rates(V100, TS, pair)
    assert off == pytest.approx(keep / (1 + min(1.0, w * 0.5)))
    assert on == pytest.approx(keep / 2)  # per batch: stretched by the training job's duty 1
    wait, tail = model.latency_terms(V100, TS, pair)[0]
    assert wait == tail == pytest.approx(model.ts_slice_ms / 2)
    assert model.latency_terms(V100, TS, pair)[1] == (0.0, 0.0)


def test_time_sharing_priority_throttles_low_priority(model: AnalyticSpeedModel) -> None:
    # TGS-style: the online context is slowed only by the residual, offline gets what its
    # load leaves (its gaps are filled: prio_block < 1).
    online = Resident("bert", duty=0.6, online=True, priority=1)
    offline = [Resident("resnet50", duty=1.0), Resident("vgg16", duty=0.6)]
    rates = model.rates(V100, TS, [online, *offline])
    assert rates[0] == pytest.approx(1 / (1 + model.prio_residual * 1.6))
    avail = 1 - model.prio_block * 0.6
    keep = 1 - model.context_switch_overhead
    assert rates[1] == pytest.approx(keep * avail / (1 + 0.6))
    assert rates[2] == pytest.approx(keep / (0.4 + 0.6 * (1 + 1.0) / avail))
    # an offline high-priority job with duty 1 leaves nothing
    starved = model.rates(V100, TS, [Resident("resnet50", priority=1), Resident("vgg16")])
    assert starved[1] == MIN_RATE


def test_mps_online_is_per_batch_and_waits_for_kernels(model: AnalyticSpeedModel) -> None:
    on = Resident("bert", duty=0.2, online=True)
    off = Resident("resnet50", duty=1.0)
    r_on, r_off = model.rates(V100, MPS, [on, off])
    c_on = 1 + 1.0 * (model.kappa_compute + model.kappa_bw * 0.62 * 1.0)
    assert r_on == pytest.approx(1 / c_on)  # not diluted by the service's own idle time
    c_off = 1 + 0.2 * (model.kappa_compute + model.kappa_bw * 0.62 * 1.0)
    assert r_off == pytest.approx(1 / c_off)
    wait, tail = model.latency_terms(V100, MPS, [on, off])[0]
    assert wait == tail == pytest.approx(model.mps_tail_ms / 2)
    # a disjoint SM split leaves the service SMs to start on: no wait
    split = [Resident("bert", sm_frac=0.5, duty=0.2, online=True), Resident("resnet50", 0.5)]
    assert model.latency_terms(V100, MPS, split)[0] == (0.0, 0.0)


def test_mps_kernel_priority_protects_the_service(model: AnalyticSpeedModel) -> None:
    # Tally / xCUDA class: an offline client below an online service's priority runs in the
    # service's idle time; the service keeps near-solo batches and almost no kernel wait.
    on = Resident("bert", duty=0.4, online=True, priority=1)
    off = Resident("resnet50", duty=1.0)
    r_on, r_off = model.rates(V100, MPS, [on, off])
    assert r_on == pytest.approx(1 / (1 + model.kp_residual * 1.0))
    assert r_off == pytest.approx(1 - model.kp_block * 0.4)
    wait, _ = model.latency_terms(V100, MPS, [on, off])[0]
    assert wait == pytest.approx(model.kp_tail_ms / 2)
    plain_on, plain_off = model.rates(V100, MPS, [replace(on, priority=0), off])
    plain_wait = model.latency_terms(V100, MPS, [replace(on, priority=0), off])[0][0]
    assert r_on > plain_on and r_off < plain_off and wait < plain_wait / 10
    # equal priorities, or priorities between offline jobs only, change nothing
    a, b = Resident("resnet50", duty=0.7, priority=3), Resident("vgg16", duty=0.6)
    assert model.rates(V100, MPS, [a, b]) == model.rates(V100, MPS, [replace(a, priority=0), b])
    # a busy service leaves a throttled client only the floor
    busy = Resident("bert", duty=1.0, online=True, priority=1)
    assert model.rates(V100, MPS, [busy, off])[1] == MIN_RATE


def test_mig_profile_curve(model: AnalyticSpeedModel) -> None:
    def rate(c: int, m: int) -> float:
        return model.rates("A100-40GB", MIG, [Resident("transformer", mig_compute_slices=c,
                                                       mig_mem_slices=m)])[0]  # fmt: skip

    assert rate(7, 8) == 1.0
    r1, r2, r3, r4 = rate(1, 1), rate(2, 2), rate(3, 4), rate(4, 4)
    assert 0 < r1 < r2 < r3 <= r4 < 1
    # Sub-linear relative to slices for a saturating model (mobilenet): 1g does more than 1/7.
    mob = model.rates("A100-40GB", MIG, [Resident("mobilenet", 1.0, 1, 1)])[0]
    assert mob > 1 / 7
    two = model.rates("A100-40GB", MIG, [Resident("mobilenet", 1.0, 1, 1)] * 2)[0]
    assert two == pytest.approx(mob * (1 - model.mig_crosstalk))
    with pytest.raises(ValueError, match="slices"):
        model.rates("A100-40GB", MIG, [Resident("bert")])


def test_solo_speed_and_batch_latency(model: AnalyticSpeedModel) -> None:
    assert model.solo_speed("resnet50", V100) == 1.0
    assert model.solo_speed("resnet50", "A100-40GB") == 1.37  # Sia, measured
    assert model.solo_speed("resnet50", "T4") < 1 < model.solo_speed("resnet50", "H100-80GB")
    for p in ZOO.values():
        assert p.solo_speed["V100-32GB"] == 1.0
        assert p.solo_speed["A100-80GB"] >= p.solo_speed["A100-40GB"]
    # iGniter resnet50 fit: 0.92 + 0.744 * 8 ms on V100; A100 divides by its solo speed.
    assert model.batch_latency_ms("resnet50", V100, 8) == pytest.approx(0.92 + 0.744 * 8)
    assert model.batch_latency_ms("resnet50", "A100-40GB", 8) == pytest.approx(
        (0.92 + 0.744 * 8) / 1.37
    )


def test_table_model_overrides_pairs_and_falls_back(tmp_path: Path) -> None:
    base = AnalyticSpeedModel()
    table = TableSpeedModel(base, {("bert", "resnet50", "mps"): 2.0})
    rates = table.rates(V100, MPS, [Resident("bert"), Resident("resnet50")])
    assert rates[0] == 0.5
    assert rates[1] == base.rates(V100, MPS, [Resident("bert"), Resident("resnet50")])[1]
    csv = tmp_path / "t.csv"
    csv.write_text("model,corunner,mode,slowdown\nbert,gpt2,time_sharing,1.25\n")
    loaded = TableSpeedModel.from_csv(csv, base)
    assert loaded.rates(V100, TS, [Resident("bert"), Resident("gpt2")])[0] == 0.8
    csv.write_text("model,corunner,mode,slowdown\nbert,gpt2,mps,fast\n")
    with pytest.raises(ValueError, match=r"t\.csv:2: field 'slowdown'"):
        TableSpeedModel.from_csv(csv, base)
    csv.write_text("model,corunner,mode,slowdown\nbert,gpt2,shared,1.1\n")
    with pytest.raises(ValueError, match=r"t\.csv:2: field 'mode'"):
        TableSpeedModel.from_csv(csv, base)
    csv.write_text("model,mode,slowdown\n")
    with pytest.raises(ValueError, match="missing column"):
        TableSpeedModel.from_csv(csv, base)


residents = st.builds(
    Resident,
    model=st.sampled_from(MODEL_CLASSES),
    sm_frac=st.floats(0.01, 1.0),
    duty=st.floats(0.0, 1.0),
    priority=st.integers(0, 2),
    mig_compute_slices=st.sampled_from([1, 2, 3, 4, 7]),
    mig_mem_slices=st.sampled_from([1, 2, 4, 8]),
)


@settings(max_examples=200, deadline=None)
@given(
    gpu=st.sampled_from(["T4", "P100", V100, "A10", "A100-40GB", "H100-80GB"]),
    mode=st.sampled_from([MPS, TS, MIG]),
    rs=st.lists(residents, min_size=1, max_size=4),
)
def test_rates_in_unit_interval(gpu: str, mode: SharingMode, rs: list[Resident]) -> None:
    rates = AnalyticSpeedModel().rates(gpu, mode, rs)
    assert len(rates) == len(rs)
    assert all(math.isfinite(r) and 0 < r <= 1 for r in rates)
    if len(rs) == 1 and mode is TS:
        assert rates == [1.0]


def test_driver_priority_slicing_keeps_the_services_slices() -> None:
    """PB-time-sharing as driver priority slicing (physics v5): the online context keeps the
    slices plain time-slicing gives it (TS_ONLINE_WEIGHT x its load) and is not stretched; the
    offline one runs in the rest. Hand-computed against the TGS fit, which lets the offline
    context fill the gaps between the service's kernels and stretches the service instead."""
    from gpu_sharing_env.physics.interference import (
        PRIO_BLOCK,
        PRIO_RESIDUAL,
        TS_ONLINE_WEIGHT,
        driver_priority_coefficients,
    )

    pair = [
        Resident("bert", duty=0.2, online=True, priority=10),
        Resident("resnet50", duty=1.0),
    ]
    driver = AnalyticSpeedModel(**driver_priority_coefficients())
    on, off = driver.rates("V100-16GB", SharingMode.TIME_SHARING, pair)
    assert on == 1.0 and off == pytest.approx(1.0 - TS_ONLINE_WEIGHT * 0.2)
    on_tgs, off_tgs = AnalyticSpeedModel().rates("V100-16GB", SharingMode.TIME_SHARING, pair)
    assert off_tgs == pytest.approx(1.0 - PRIO_BLOCK * 0.2)
    assert on_tgs == pytest.approx(1.0 / (1.0 + PRIO_RESIDUAL))
    # the service still waits for a low-priority slice in flight (the time-slicing term)
    wait, _ = driver.latency_terms("V100-16GB", SharingMode.TIME_SHARING, pair)[0]
    assert wait > 0.0
