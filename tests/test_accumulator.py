"""The episode's running sums (``sim/accumulator.py``): compiled, an extension type whose nine
time integrals are C doubles, added to by ``FleetUsage.integrate`` with C arithmetic.

Checked here: ``integrate`` gives, bit for bit, what the plain Python record gave (``acc.x +=
s[k] * dt`` on Python floats, the dataclass the record was until 2026-11-29) on the sums of
random usage rows, random steps and job counts, compiled and interpreted; every field reads
and writes as an attribute, a counter stays an ``int`` and a time integral a ``float``; the
record pickles and deep-copies.
"""

from __future__ import annotations

import copy
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim import accumulator as acc_mod
from gpu_sharing_env.sim import usage as usage_mod
from gpu_sharing_env.sim.accumulator import FIELDS, Accumulator
from gpu_sharing_env.sim.build import make_simulator
from tests.helpers import interpreted

#: The time integrals ``FleetUsage.integrate`` adds to, in the order of the usage rows' sums.
SUMMED = ("util_s", "sm_s", "mem_s", "busy_gpu_s", "stp_s", "oversold_s", "online_gpu_s")


def _reference(ref: SimpleNamespace, sums: list[float], dt: float, in_system: int) -> None:
    """The plain record's arithmetic (Python floats)."""
    for name, s in zip(SUMMED, sums, strict=True):
        setattr(ref, name, getattr(ref, name) + s * dt)
    ref.in_system_s += in_system * dt
    ref.elapsed_s += dt


def _draw(rng: np.random.Generator) -> tuple[tuple[float, ...], float, int]:
    """A GPU's new usage row (7 floats over a wide range, some zero), a step, a job count."""
    scale = 10.0 ** rng.integers(-6, 6, size=7)
    row = tuple(float(x) for x in rng.random(7) * scale * rng.choice([0.0, 1.0, 1.0, 1.0], size=7))
    dt = float(rng.random() * 10.0 ** rng.integers(-9, 4))
    return row, dt, int(rng.integers(0, 25_000))


@pytest.mark.parametrize("mode", ["as imported", "interpreted"])
def test_integrate_adds_what_the_plain_record_added(mode: str) -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    if mode == "as imported":  # (compiled where built: the extension types)
        usage, acc = sim.usage, Accumulator()
    else:
        usage = interpreted(usage_mod).FleetUsage(sim.cluster, sim.waiting)
        usage.reset(sim.jobs)
        acc = interpreted(acc_mod).Accumulator()
    ref = SimpleNamespace(**{k: 0.0 for k in (*SUMMED, "in_system_s", "elapsed_s")})
    rng = np.random.default_rng(51)
    n_gpus = sim.cluster.n_gpus
    for _ in range(2_000):
        row, dt, n = _draw(rng)
        usage.set_gpu(int(rng.integers(n_gpus)), row)  # (the usage's own method moves its sums)
        sums = list(usage.sums)
        usage.integrate(acc, dt, n)
        _reference(ref, sums, dt, n)
    for name in (*SUMMED, "in_system_s", "elapsed_s"):
        got, want = getattr(acc, name), getattr(ref, name)
        assert type(got) is float and got.hex() == want.hex(), name
    assert ref.util_s != ref.sm_s  # (the draws tell the integrals apart)


def test_the_record_reads_as_a_record() -> None:
    """Every field an attribute, its type kept; the record pickles and deep-copies (a
    simulator's copy and the vector envs' workers)."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(1)
    while not sim.done:
        win = sim.window_jobs()
        if win and sim.placeable(win[0].job_id):
            g, o = np.argwhere(sim.mask(win[0].job_id))[0]
            from gpu_sharing_env.sim.engine import Decision

            sim.apply(Decision(win[0].job_id, int(g), int(o)))
        sim.advance()
    acc = sim.acc
    assert set(FIELDS) == set(Accumulator.__slots__) and len(FIELDS) == 25
    for name in FIELDS:
        value = getattr(acc, name)
        want = dict if name == "errors_by_cause" else float
        if name in ("frag_samples", "errors_total", "errors_propagated", "evictions"):
            want = int
        if name in ("suspensions", "mig_reconfigs", "migrations", "decisions"):
            want = int
        assert type(value) is want, name
    assert acc.decisions > 0 and acc.elapsed_s > 0.0 and acc.util_s > 0.0
    for twin in (pickle.loads(pickle.dumps(acc)), copy.deepcopy(acc)):
        assert type(twin) is type(acc)
        assert all(repr(getattr(twin, k)) == repr(getattr(acc, k)) for k in FIELDS)
    acc.decisions += 1
    acc.in_system_s = 2.5
    assert acc.decisions == twin.decisions + 1 and acc.in_system_s == 2.5
