"""The online load's typed parts: ``OnlineLoad.update_load`` (a service's load update at its
start; compiled, C doubles and libm's ``sin``/``exp``/``rint``) gives the bits of the formula
it inlines, ``ServiceSpec.rate_rps(now) * math.exp(noise_frac * z)`` and the duty quantised
with ``round``; the tick's per-service constants (``_TickConsts``, compiled C doubles) are the
spec's numbers."""

from __future__ import annotations

import copy
import math

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.constants import _NOISE_SCALE, NOISE_AR
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.ticks import _TickConsts
from tests.helpers import check_service_load, place_at_random


def test_update_load_gives_the_bits_of_rate_rps_exp_and_round() -> None:
    """Episodes of ``default`` and ``muxflow-t4`` placed at random: at every decision point,
    each live service's load is updated once more and its noise state, request rate and (on
    GPUs) quantised duty compared with the formula's, bit for bit (services queued and
    running, at instants across the episode, many noise draws and batch sizes)."""
    checked = on_gpus = 0
    for name in ("default", "muxflow-t4"):
        sim = make_simulator(load_scenario(name))
        rng = np.random.default_rng(3)
        for seed in range(3):
            sim.reset(seed)
            load = sim.load
            while not sim.done:
                for st in load.live():
                    svc = st.spec.service
                    sv = st.serving
                    z0, duty0 = sv.noise_z, sv.duty
                    i, buf = load._noise_i, list(load._noise_buf)
                    load.update_load(st)
                    normal = load._noise_buf[0] if i == len(buf) else buf[i]
                    z = NOISE_AR * z0 + _NOISE_SCALE * normal
                    rps = svc.rate_rps(sim.now) * math.exp(svc.noise_frac * z)
                    on_gpus += check_service_load(st, z, rps, duty0)
                    checked += 1
                place_at_random(sim, rng)
                sim.advance()
    assert checked > 200 and on_gpus > 100, (checked, on_gpus)


def test_the_ticks_constants_are_the_specs_numbers() -> None:
    """Over random placements of ``default`` and ``muxflow-t4``, every live service's
    ``_TickConsts`` holds its spec's phase, period, base rate, ``peak - base``, noise fraction,
    batch size in force and SLO (as the C doubles the tick converted them to), and a deep copy
    of one holds the same."""
    seen = 0
    kinds: set[type] = set()
    for name in ("default", "muxflow-t4"):
        sim = make_simulator(load_scenario(name))
        rng = np.random.default_rng(5)
        sim.reset(1)
        while not sim.done:
            live = sim.load.live()
            consts = sim.load._live_c
            assert [tc.st for tc in consts] == live
            for tc in consts:
                st = tc.st
                svc = st.spec.service
                want = (
                    svc.phase_s, svc.period_s, svc.base_rps, svc.peak_rps - svc.base_rps,
                    svc.noise_frac, st.effective_batch_size, svc.slo_ms,
                )  # fmt: skip
                got = (tc.phase, tc.period, tc.base, tc.span, tc.noise_frac, tc.batch, tc.slo_ms)
                assert [float(x).hex() for x in got] == [float(x).hex() for x in want]
                twin = copy.deepcopy(tc)
                assert (twin.span, twin.batch) == (tc.span, tc.batch)
                seen += 1
                kinds.add(type(tc))
            win = sim.window_jobs()
            placeable = [s for s in win if sim.placeable(s.job_id)]
            if placeable:
                s = placeable[int(rng.integers(len(placeable)))]
                legal = np.argwhere(sim.mask(s.job_id))
                g, o = legal[int(rng.integers(len(legal)))]
                sim.apply(Decision(s.job_id, int(g), int(o)))
            sim.advance()
    assert seen > 100 and kinds == {_TickConsts}
