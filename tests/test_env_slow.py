"""Long GpuSharing-v0 runs (``pytest -m slow``): learning, long conformance, whole episodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario, scenario_names
from gpu_sharing_env.envs import GpuSharingEnv
from gpu_sharing_env.envs.conformance import api_test

pytestmark = pytest.mark.slow


def _episode_return(env: GpuSharingEnv, act, seed: int) -> float:  # type: ignore[no-untyped-def]
    obs, info = env.reset(seed=seed)
    ret, term = 0.0, False
    while not term:
        obs, r, term, _, info = env.step(act(obs, info))
        ret += float(r)
    return ret


def test_maskable_ppo_learns_a_few_thousand_steps() -> None:
    from sb3_contrib import MaskablePPO

    env = GpuSharingEnv()
    model = MaskablePPO(
        "MultiInputPolicy", env, n_steps=256, batch_size=64, n_epochs=4, seed=0, verbose=0
    )
    model.learn(4096)
    assert model.num_timesteps >= 4096
    stats = model.logger.name_to_value
    assert all(np.isfinite(v) for v in stats.values())

    def ppo(obs, info):  # type: ignore[no-untyped-def]
        a, _ = model.predict(obs, action_masks=info["action_mask"], deterministic=True)
        assert info["action_mask"][int(a)] == 1
        return int(a)

    returns = [_episode_return(env, ppo, seed) for seed in (100, 101)]
    assert all(np.isfinite(returns))


#: Steps and probe interval of the long conformance run per scenario: a probe copies the env
#: (milliseconds at 6,000 GPUs), so the fleet-sized scenarios probe less often and run shorter.
LONG_STEPS = {"openb": (300, 50), "pai-hetero": (1000, 25)}


@pytest.mark.parametrize("name", scenario_names())
def test_long_conformance(name: str) -> None:
    steps, probe_every = LONG_STEPS.get(name, (2000, 10))
    if name == "openb":
        cfg = load_scenario(name)
        assert cfg.source_path is not None
        if not (Path(cfg.source_path).parent / cfg.workload.offline.trace_path).exists():
            pytest.skip("openb data not found (configs/scenarios/openb.yaml)")
    rep = api_test(name, num_steps=steps, seed=1, probe_every=probe_every)
    assert rep.steps == steps
    if name not in LONG_STEPS:
        assert rep.episodes >= 1


def test_whole_episodes_with_random_legal_actions_keep_invariants() -> None:
    env = GpuSharingEnv(max_gpus=64)
    rng = np.random.default_rng(0)
    for seed in range(3):
        _, info = env.reset(seed=seed)
        term = False
        while not term:
            legal = np.flatnonzero(info["action_mask"])
            _, r, term, _, info = env.step(int(rng.choice(legal)))
            assert np.isfinite(r)
            env.sim.cluster.check_invariants()
        assert info["metrics"]["jobs_submitted"] > 0
