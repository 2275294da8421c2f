"""The online load's rate and the predictor's group statistics, against the formulas written out
here in Python (what the code did before ``wave_rps`` and the typed ``_stats_hit``):

* ``workload.job.wave_rps`` (``ServiceSpec.rate_rps``' one formula; compiled, C doubles and
  libm's ``sin``) gives the bits of ``base + (peak - base) * (1 + sin(2 pi (t - phase) /
  period)) / 2`` in Python floats;
* ``OnlineLoad.tick`` (which calls it in C, its noise term in C doubles) gives every live
  service the noise state, request rate and quantised duty of that formula, ``math.exp`` and
  ``round``, bit for bit;
* ``OnlinePredictor.group_stats`` (its kept answer read by ``_stats_hit``, the submissions
  bisected by ``_bisect_left``) gives the statistics recomputed from the predictor's tables
  with ``bisect.bisect_left`` and numpy's median, at the decision points of random episodes
  and at the groups' own submission instants (the bisection's ties).

Over ``default``, ``default-x2`` and a MIG scenario (``mig-a100``)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.constants import _NOISE_SCALE, NOISE_AR
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.workload.job import ServiceSpec, wave_rps
from gpu_sharing_env.workload.predictor import OnlinePredictor, _bisect_left
from tests.helpers import check_service_load, place_at_random

SCENARIOS = ("default", "default-x2", "mig-a100")


def _rate(base: float, peak: float, phase: float, period: float, t: float) -> float:
    """The diurnal rate as ``ServiceSpec.rate_rps`` wrote it out (Python floats)."""
    wave = (1.0 + math.sin(2.0 * math.pi * (t - phase) / period)) / 2.0
    return base + (peak - base) * wave


def _decision_points(seed: int) -> Iterator[tuple[str, Simulator, int]]:
    """The decision points of two episodes of each scenario (150 at most each), placed at
    random in between (an online service, half the time, with a batch size of its own: its
    tick record then reads the placement's): ``(scenario, simulator, step)``."""
    for name in SCENARIOS:
        sim = make_simulator(load_scenario(name))
        rng = np.random.default_rng(seed)
        for episode in range(2):
            sim.reset(episode)
            steps = 0
            while not sim.done and steps < 150:
                yield name, sim, steps
                place_at_random(sim, rng, batch_p=0.5)
                sim.advance()
                steps += 1


def test_wave_rps_is_the_formula() -> None:
    """Random services and instants (and integer fields, as a scenario file may give them):
    ``wave_rps`` and ``ServiceSpec.rate_rps`` give the written-out formula's bits."""
    rng = np.random.default_rng(11)
    for k in range(2000):
        base = float(rng.uniform(0.0, 500.0))
        peak = base + float(rng.uniform(0.0, 500.0))
        period = float(rng.uniform(60.0, 200_000.0))
        phase = float(rng.uniform(-1e5, 1e5))
        t = float(rng.uniform(0.0, 1e6))
        if k % 4 == 0:  # (integer fields)
            base, peak, phase = int(base), int(peak) + int(base), int(phase)
        want = _rate(base, peak, phase, period, t)
        assert wave_rps(base, peak - base, phase, period, t).hex() == want.hex()
        svc = ServiceSpec(
            slo_ms=100.0, batch_size=4, base_rps=base, peak_rps=peak, period_s=period,
            phase_s=phase,
        )  # fmt: skip
        assert svc.rate_rps(t).hex() == want.hex()


def test_the_tick_gives_the_formulas_load() -> None:
    """At every decision point of random episodes, one more load tick: each live service's
    noise state, request rate and (on GPUs) quantised duty are the formula's, bit for bit."""
    checked = on_gpus = 0
    for _, sim, _ in _decision_points(7):
        load = sim.load
        live = list(load.live())
        i, buf = load._noise_i, list(load._noise_buf)
        before = [(st.serving.noise_z, st.serving.duty) for st in live]
        load.tick()
        if i + len(live) <= len(buf):  # (a refill mid-tick: its draws are not here)
            for k, st in enumerate(live):
                svc = st.spec.service
                z = NOISE_AR * before[k][0] + _NOISE_SCALE * buf[i + k]
                r = _rate(svc.base_rps, svc.peak_rps, svc.phase_s, svc.period_s, sim.now)
                rps = r * math.exp(svc.noise_frac * z)
                on_gpus += check_service_load(st, z, rps, before[k][1])
                checked += 1
    assert checked > 300 and on_gpus > 150, (checked, on_gpus)


def _reference(pred: OnlinePredictor, group: str, now: float) -> tuple[float, ...]:
    """``group_stats``' fields recomputed from the predictor's tables: its finished runs'
    count, mean and deviation, the last submission before ``now`` and the median gap."""
    e = pred._g.get(group) if group else None
    assert pred._subs is not None
    times = pred._subs.get(group, []) if group else []
    k = bisect.bisect_left(times, now)
    if e is None:
        n, mean, std = 0.0, math.nan, math.nan
    else:
        n, mean = e[0], e[1] / e[0]
        std = math.sqrt(max(0.0, e[2] / e[0] - mean * mean)) if e[0] >= 2 else math.nan
    last = times[k - 1] if k else math.nan
    period = float(np.median(np.diff(times[:k]))) if k >= 2 else math.nan
    return n, mean, std, last, period


def _same(got: tuple[float, ...], want: tuple[float, ...]) -> bool:
    return all((a != a and b != b) or float(a).hex() == float(b).hex() for a, b in zip(got, want))


def test_group_stats_is_the_recomputed_answer() -> None:
    """At every decision point of random episodes, each window job's group (and a group
    nobody has) asked at ``now``, and each asked group's submission instants asked at each
    (a tie of the bisection) and just after: ``group_stats`` gives the recomputed fields,
    the kept answer (the same object, asked again at the same instant) and the fresh one
    alike."""
    asked = ties = kept = 0
    for name, sim, steps in _decision_points(5):
        pred = sim.predictor
        assert pred is not None
        now = sim.now
        specs = list(sim.window_jobs())
        for spec in specs:
            a = pred.group_stats(spec, now)
            b = pred.group_stats(spec, now)
            kept += a is b
            got = (a.runs_seen, a.mean_log_s, a.std_log_s, a.last_submit_s, a.period_s)
            assert _same(got, _reference(pred, spec.group, now)), (name, spec.group)
            asked += 1
        if specs and steps % 10 == 0:
            spec = specs[0]
            times = pred._subs.get(spec.group, []) if pred._subs else []
            for t in times[-6:]:
                for at in (t, math.nextafter(t, math.inf)):
                    a = pred.group_stats(spec, at)
                    assert pred.group_stats(spec, at) is a  # (kept while it holds)
                    got = (
                        a.runs_seen, a.mean_log_s, a.std_log_s, a.last_submit_s,
                        a.period_s,
                    )  # fmt: skip
                    assert _same(got, _reference(pred, spec.group, at))
                    ties += 1
    assert asked > 300 and ties > 50 and kept == asked, (asked, ties, kept)


def test_bisect_left_is_bisects() -> None:
    """``_bisect_left`` gives ``bisect.bisect_left``'s index on sorted lists with repeats and
    ties, and on unsorted ones (the same probes)."""
    rng = np.random.default_rng(2)
    for n in range(0, 40):
        for _ in range(20):
            xs = np.round(rng.uniform(-5.0, 5.0, n), 1).tolist()
            for times in (sorted(xs), xs):
                for x in [*xs[:5], -9.0, 9.0, 0.05, float(rng.uniform(-5.0, 5.0))]:
                    assert _bisect_left(times, x) == bisect.bisect_left(times, x)
