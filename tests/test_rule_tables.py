"""What speed_sjf and AntMan keep between decisions (issue 51, the cold training bar): each
table gives what the call it replaces gives, per simulator, on every GPU.

- ``solo_speeds(view, model)`` is ``view.solo_speed(model, g)`` for every GPU, for each
  scenario's fleet (kept per simulator: two of different fleets never share one);
- ``predicted_duration_s`` reads it as the direct maximum over the legal GPUs did (all GPUs
  when none is legal), on random columns;
- ``shared_option_of(view)`` is ``shared_option(view)`` of that simulator's options.

``tests/test_golden.py`` and the leaderboard goldens check whole episodes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.antman import shared_option_of
from gpu_sharing_gym.baselines.gandiva import shared_option
from gpu_sharing_gym.baselines.speed_sjf import predicted_duration_s, solo_speeds

SCENARIOS = ("default", "mig-a100", "muxflow-t4", "default-x2")


def _views() -> list[ClusterView]:
    out = []
    for name in SCENARIOS:
        sim = make_simulator(load_scenario(name))
        sim.reset(3)
        out.append(ClusterView(sim))
    return out


def test_solo_speeds_are_each_gpus_for_each_fleet() -> None:
    views = _views()
    for _ in range(2):  # (the second pass reads the tables the first filled)
        for view in views:
            for model in ZOO:
                want = [view.solo_speed(model, g) for g in range(view.n_gpus)]
                assert solo_speeds(view, model) == want


def _direct(view: ClusterView, est_s: float, model: str, col: np.ndarray) -> float:
    # (predicted_duration_s before its table)
    gpus = np.flatnonzero(col)
    if not gpus.size:
        gpus = np.arange(view.n_gpus)
    return est_s / max(max(view.solo_speed(model, int(g)) for g in gpus), 1e-9)


def test_predicted_duration_is_the_fastest_legal_gpus() -> None:
    rng = np.random.default_rng(0)
    for name in SCENARIOS:
        sim = make_simulator(load_scenario(name))
        sim.reset(3)
        while True:  # (to the first offline job queued: nothing placed, the queue grows)
            view = ClusterView(sim)
            job = next((j for j in view.queue if not j.online), None)
            if job is not None:
                break
            sim.advance()
        for _ in range(50):
            col = rng.random(view.n_gpus) < rng.choice([0.0, 0.1, 0.5])
            got = predicted_duration_s(view, job, col)
            assert got == _direct(view, job.est_remaining_s, job.model, col)
        assert predicted_duration_s(view, job) == _direct(
            view, job.est_remaining_s, job.model, np.zeros(view.n_gpus, dtype=bool)
        )


def test_shared_option_is_each_simulators() -> None:
    cfg = load_scenario("default")
    views = _views()
    for modes in (("exclusive", "mps"), ("exclusive",), ("mps", "time_sharing")):
        sim = make_simulator(replace(cfg, sharing=replace(cfg.sharing, modes=modes)))
        sim.reset(3)
        views.append(ClusterView(sim))
    assert len({shared_option(v) for v in views}) == 4  # (1, 4, None, 0)
    for _ in range(2):
        for view in views:
            assert shared_option_of(view) == shared_option(view)
