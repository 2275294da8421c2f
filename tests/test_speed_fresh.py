"""The speed model's answers on the simulator's path, bit for bit: ``fresh_rates`` (what a
miss of ``SpeedMemo`` asks: the analytic model without its own memo, its MPS rates in one pass
over the residents) against the MPS formula as it was written before (kept here as the reference) and
against the memoised ``rates``."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np
import pytest

from gpu_sharing_env.physics.interference import (
    MIN_RATE,
    AnalyticSpeedModel,
    Resident,
    sm_share_curve,
    sm_share_k,
)
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.speed import SpeedMemo
from tests.helpers import make_sim, nodes

MODELS = ("resnet50", "bert", "gpt2", "mobilenet", "deepfm", "yolov3")
GPU_TYPES = ("V100-16GB", "A100-40GB", "T4", "P100")


def _reference_mps(m: AnalyticSpeedModel, gpu_type: str, residents: Sequence[Resident]) -> list:
    """``AnalyticSpeedModel._mps`` as written before its one pass (main 2797186)."""
    limit = m._honours_sm_limit(gpu_type)
    kc, kb = m.kappa_compute, m.kappa_bw
    shares = [min(1.0, max(r.sm_frac, 1e-3)) if limit else 1.0 for r in residents]
    bws = [m._params(r.model)[0] for r in residents]
    duties = [min(1.0, max(r.duty, 0.0)) for r in residents]
    top = max((r.priority for r in residents if r.online), default=None)
    throttled = (
        [False] * len(residents)
        if top is None
        else [not r.online and r.priority < top for r in residents]
    )
    out = []
    for i, r in enumerate(residents):
        s_i, b_i = shares[i], bws[i]
        d_i = 1.0 if r.online else duties[i]
        contention = 1.0
        avail = 1.0
        for j, o in enumerate(residents):
            if j == i:
                continue
            if throttled[i] and o.online and o.priority > r.priority:
                avail -= m.kp_block * duties[j]
                continue
            if throttled[j] and r.online and r.priority > o.priority:
                contention += m.kp_residual * duties[j]
                continue
            ov = (s_i + shares[j] - 1.0) / s_i
            if ov < 0.0:
                ov = 0.0
            elif ov > 1.0:
                ov = 1.0
            contention += duties[j] * (kc * ov + kb * b_i * bws[j])
        k = sm_share_k(m._params(r.model)[1], r.batch, m.sm_batch_beta)
        if avail <= MIN_RATE:
            rate = MIN_RATE
        else:
            rate = 1.0 / ((1.0 - d_i) + d_i * contention / (sm_share_curve(k, s_i) * avail))
            if rate < MIN_RATE:
                rate = MIN_RATE
            elif rate > 1.0:
                rate = 1.0
        out.append(rate)
    return out


def _bits(xs: Sequence[float]) -> list[bytes]:
    """Each value's IEEE bits (NaN compares equal to itself here; ``-0.0`` differs from 0)."""
    return [struct.pack("<d", x) for x in xs]


def _residents(rng: np.random.Generator) -> list[Resident]:
    """2-4 residents with the fields the simulator sets, edge values included (shares below
    the floor, duties outside [0, 1], NaN, priorities that throttle, batch sizes)."""
    out = []
    for _ in range(int(rng.integers(1, 5))):
        online = bool(rng.integers(2))
        share = float(rng.choice([1.0, 0.5, 0.3, 0.0005, 1.5, float(rng.random())]))
        duty = float(rng.choice([1e-3, 0.05, 1.0, -0.2, 1.7, float("nan"), float(rng.random())]))
        if rng.random() < 0.1:
            share = float("nan")
        out.append(
            Resident(
                str(rng.choice(MODELS)),
                sm_frac=share,
                duty=duty,
                online=online,
                priority=int(rng.integers(0, 3)) + (100 if online and rng.random() < 0.5 else 0),
                batch=int(rng.choice([0, 1, 4, 32])) if online else 0,
            )
        )
    return out


@pytest.mark.parametrize("kp_level", [0.0, 1.0])
def test_fresh_mps_rates_equal_the_reference_bits(kp_level: float) -> None:
    """2,000 random MPS resident sets: ``fresh_rates`` gives the bits of
    the formula as written, and so does the memoised ``rates`` (asked twice: its memo)."""
    from gpu_sharing_env.physics.interference import kp_coefficients

    m = AnalyticSpeedModel(None, **kp_coefficients(kp_level))
    rng = np.random.default_rng(51)
    for _ in range(2000):
        res = _residents(rng)
        gt = str(rng.choice(GPU_TYPES))
        want = _bits(_reference_mps(m, gt, res))
        assert _bits(m.fresh_rates(gt, SharingMode.MPS, res)) == want, (gt, res)
        assert _bits(m.rates(gt, SharingMode.MPS, res)) == want
        assert _bits(m.rates(gt, SharingMode.MPS, res)) == want


def test_fresh_rates_other_modes_and_memo() -> None:
    """``fresh_rates`` answers as ``rates`` in every mode (no resident, EXCLUSIVE and its
    error, time-sharing, MIG), and ``SpeedMemo`` asks it at a miss: the memo's answer is the
    model's."""
    m = AnalyticSpeedModel()
    assert m.fresh_rates("V100-16GB", SharingMode.MPS, []) == []
    assert m.fresh_rates("V100-16GB", SharingMode.EXCLUSIVE, [Resident("bert")]) == [1.0]
    with pytest.raises(ValueError, match="EXCLUSIVE"):
        m.fresh_rates("V100-16GB", SharingMode.EXCLUSIVE, [Resident("bert")] * 2)
    ts = [Resident("bert", duty=0.4), Resident("gpt2", duty=0.7, online=True, priority=1)]
    assert m.fresh_rates("T4", SharingMode.TIME_SHARING, ts) == m.rates(
        "T4", SharingMode.TIME_SHARING, ts
    )
    mig = [Resident("bert", mig_compute_slices=3, mig_mem_slices=4)]
    assert m.fresh_rates("A100-40GB", SharingMode.MIG, mig) == m.rates(
        "A100-40GB", SharingMode.MIG, mig
    )
    gl = [Resident("bert", 0.5, gpulet=0), Resident("gpt2", 0.5, gpulet=0)]
    assert m.fresh_rates("T4", SharingMode.MPS, gl) == m.rates("T4", SharingMode.MPS, gl)
    memo = SpeedMemo(m, make_sim([], nodes("T4")).cluster)
    key = ("bert", 0.5, 0, 0, 0.3, False, 0, 0)
    got = memo.rates("T4", SharingMode.MPS, [key, key])
    assert got == m.rates("T4", SharingMode.MPS, [Resident(*key)] * 2)
    assert memo.rates_cache[("T4", SharingMode.MPS, key, key)] is got
    assert not math.isnan(got[0])
