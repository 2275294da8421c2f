"""scripts/hint_deviations.py (where a hinted agent leaves its hint) and the service relabelling
of scripts/distill_scenarios.py (``anchor --services-from-hint``)."""

from __future__ import annotations

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.observation_v1 import (
    GPU_FEATURES_V1,
    JOB_FEATURES_V1,
    OPTION_FEATURES,
    PAIR_FEATURES,
)
from gpu_sharing_env.evaluation.runner import run_to_end, start_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import WAIT, ActionCodec
from gpu_sharing_gym.agents.agent import RLAgent
from gpu_sharing_gym.agents.bc import Demos
from gpu_sharing_gym.agents.envs import HINT
from tests.helpers import load_script


def test_kinds_of_difference() -> None:
    mod = load_script("hint_deviations")
    c = ActionCodec(window=2, max_gpus=3, n_options=2)
    assert mod.kind(c, c.encode(0, 1, 0), c.encode(0, 1, 0)) is None
    assert mod.kind(c, WAIT, c.encode(0, 1, 0)) == "hold"
    assert mod.kind(c, c.encode(1, 2, 1), WAIT) == "place"
    assert mod.kind(c, c.encode(1, 1, 0), c.encode(0, 1, 0)) == "job"
    assert mod.kind(c, c.encode(0, 2, 1), c.encode(0, 1, 0)) == "option"
    assert mod.kind(c, c.encode(0, 2, 0), c.encode(0, 1, 0)) == "gpu"


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    """The same metrics (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def _run(policy: object, scenario: str, seed: int, until_s: float) -> dict[str, float]:
    sim = make_simulator(load_scenario(scenario))
    start_episode(policy, sim, seed)  # type: ignore[arg-type]
    return run_to_end(policy, sim, until_s)  # type: ignore[arg-type]


def test_override_all_runs_the_hint_and_counts_the_differences() -> None:
    """On `default-x2` seed 5 `ppo` puts the services elsewhere than speed_sjf_queue at t = 0
    (the 2026-11-30 note); with every difference overridden it is speed_sjf_queue to the bit."""
    mod = load_script("hint_deviations")
    cut = 3 * 3600.0
    hint = _run(make_policy("speed_sjf_queue"), "default-x2", 5, cut)
    own = mod.Diverging("ppo")
    m_own = _run(own, "default-x2", 5, cut)
    assert own.counts["job"] + own.counts["gpu"] >= 1
    assert all(t == 0.0 for t, *_ in own.log[:6]) and "service" in own.log[0][2]
    assert not _same(m_own, hint)
    forced = mod.Diverging("ppo", frozenset(mod.KINDS))
    assert _same(_run(forced, "default-x2", 5, cut), hint)
    assert forced.counts["decisions"] > 0


def _demos(online_slot: int, own: list[int], hint: list[int]) -> tuple[Demos, RLAgent]:
    """Steps on a layout of 2 GPUs, a window of 2 and 1 option; slot ``online_slot`` holds a
    service."""
    n = len(own)
    jobs = np.zeros((n, 2, len(JOB_FEATURES_V1)), np.float32)
    jobs[:, online_slot, JOB_FEATURES_V1.index("online")] = 1.0
    h = np.zeros((n, 1 + 2 * 2 * 1), np.float32)
    h[np.arange(n), hint] = 1.0
    obs = {
        "gpus": np.zeros((n, 2 * len(GPU_FEATURES_V1)), np.float32),
        "jobs": jobs.reshape(n, -1),
        "options": np.zeros((n, len(OPTION_FEATURES)), np.float32),
        "pairs": np.zeros((n, 2 * 2 * len(PAIR_FEATURES)), np.float32),
        HINT: h,
    }
    d = Demos(obs, np.ones((n, 5), np.int8), np.array(own), np.zeros(n), [])
    return d, RLAgent({"format": 2}, {})


def test_services_relabelled_by_the_hint() -> None:
    mod = load_script("distill_scenarios")
    c = ActionCodec(window=2, max_gpus=2, n_options=1)
    svc, job = (c.encode(1, g, 0) for g in (0, 1)), c.encode(0, 0, 0)
    svc0, svc1 = svc
    # the agent's own label places the service / the hint's does / neither does / they agree
    own = [svc0, job, job, WAIT, svc1]
    hint = [svc1, svc0, WAIT, job, svc1]
    d, agent = _demos(1, own, hint)
    assert mod.services_from_hint(d, agent) == 2
    assert d.actions.tolist() == [svc1, svc0, job, WAIT, svc1]
