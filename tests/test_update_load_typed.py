"""``OnlineLoad.update_load`` (a service's load update at its start; compiled, C doubles and
libm's ``sin``/``exp``/``rint``) gives the bits of the formula it inlines:
``ServiceSpec.rate_rps(now) * math.exp(noise_frac * z)`` and the duty quantised with
``round``."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.constants import _NOISE_SCALE, DUTY_STEP, NOISE_AR


def test_update_load_gives_the_bits_of_rate_rps_exp_and_round() -> None:
    """2,000 updates of each service of a ``default`` episode at random instants (far ones
    too), noise states, batch latencies and batch sizes, on and off GPUs."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    services = [st for st in sim.table.jobs.values() if st.online]
    assert services
    rng = np.random.default_rng(3)
    load = sim.load
    for k in range(2_000):
        st = services[k % len(services)]
        svc = st.spec.service
        sim.now = float(rng.choice([0.0, rng.random() * 1e5, rng.random() * 1e9]))
        sv = st.serving
        sv.noise_z = float(rng.normal() * 3.0)
        sv.solo_batch_ms = float(rng.choice([1e-3, rng.random() * 400.0]))
        sv.batch_size = int(rng.choice([0, 1, 7, 64]))
        st.gpus = [0] if k % 4 else []
        st.spec = replace(st.spec, service=replace(svc, noise_frac=float(rng.random())))
        svc = st.spec.service
        z0, duty0 = sv.noise_z, sv.duty
        i = load._noise_i
        buf = list(load._noise_buf)
        load.update_load(st)
        normal = load._noise_buf[0] if i == len(buf) else buf[i]
        z = NOISE_AR * z0 + _NOISE_SCALE * normal
        rps = svc.rate_rps(sim.now) * math.exp(svc.noise_frac * z)
        assert sv.noise_z.hex() == z.hex() and sv.rps.hex() == rps.hex(), k
        if st.gpus:
            duty = rps * sv.solo_batch_ms / 1000.0 / st.effective_batch_size
            duty = min(1.0, duty)
            want = max(DUTY_STEP, round(duty / DUTY_STEP) * DUTY_STEP)
            assert sv.duty.hex() == want.hex(), k
        else:
            assert sv.duty == duty0
