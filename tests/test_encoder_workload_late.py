"""The v1 encoder's typed paths and the predictor's warm start, late night (issue 51): the same
values as the numpy passes they replace.

- ``predictor._codes`` is ``np.unique(keys, return_inverse=True)`` of tags (empty tag included).
- A deep or pickled copy of a v1 env observes its own state (compiled, the GPU table's typed
  views are rebuilt for the copy's own arrays): the same observations as a fresh env replaying
  its actions while the original goes on with others.
- The per-step ``jobs`` columns and the window's legal rows from a legal mask equal those the
  encoder builds from ``sim.mask`` itself.

``tests/test_compiled.py`` compares whole rollouts' observations compiled and interpreted.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.workload.predictor import _codes


def test_codes_are_numpys_unique_with_inverse() -> None:
    rng = np.random.default_rng(3)
    for case in range(300):
        pool = ["", "g1", "g10", "g2", "u0", "u9", "é", "Z", "a b"][: int(rng.integers(1, 10))]
        keys = [pool[int(i)] for i in rng.integers(0, len(pool), size=int(rng.integers(0, 40)))]
        names, inv = _codes(keys)
        if not keys:
            assert names == [] and inv.size == 0
            continue
        want_names, want_inv = np.unique(np.array(keys), return_inverse=True)
        assert names == want_names.tolist(), case
        assert inv.dtype == np.intp and inv.tolist() == want_inv.tolist(), case


def _obs_bytes(obs: dict[str, np.ndarray]) -> bytes:
    return b"".join(obs[k].tobytes() for k in sorted(obs))


def _step(env: Any, info: dict[str, Any], rng: np.random.Generator) -> tuple[Any, ...]:
    legal = np.flatnonzero(info["action_mask"].view(bool))
    return env.step(int(legal[rng.integers(legal.size)]))


@pytest.mark.parametrize(
    ("scenario", "kwargs"),
    [("default", {}), ("mig-a100", {"migration_slots": 1})],
)
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_v1_copy_observes_its_own_state(scenario: str, kwargs: dict[str, Any], how: str) -> None:
    # The original goes on with other actions after the copy: a copy that read the original's
    # arrays would differ from a fresh env replaying the copy's actions.
    def make() -> Any:
        return gym.make("GpuSharing-v1", scenario=scenario, **kwargs).unwrapped

    env, ref = make(), make()
    _, info = env.reset(seed=4)
    _, info_r = ref.reset(seed=4)
    rng = np.random.default_rng(5)
    for _ in range(5):
        state = rng.bit_generator.state
        _, _, _, _, info = _step(env, info, rng)
        rng.bit_generator.state = state
        _, _, _, _, info_r = _step(ref, info_r, rng)
    cp = copy.deepcopy(env) if how == "deepcopy" else pickle.loads(pickle.dumps(env))
    info_c = info
    other = np.random.default_rng(77)
    for step in range(40):
        if not env.sim.done:
            _, _, _, _, info = _step(env, info, other)  # (the original diverges)
        state = rng.bit_generator.state
        obs_c, _, te, tr, info_c = _step(cp, info_c, rng)
        rng.bit_generator.state = state
        obs_r, _, _, _, info_r = _step(ref, info_r, rng)
        assert _obs_bytes(obs_c) == _obs_bytes(obs_r), step
        assert info_c["action_mask"].tobytes() == info_r["action_mask"].tobytes(), step
        if te or tr:
            break


def test_v1_encode_from_a_legal_mask_equals_from_the_simulator() -> None:
    env = gym.make("GpuSharing-v1", scenario="default").unwrapped
    rng = np.random.default_rng(9)
    _, info = env.reset(seed=2)
    enc, sim = env.encoder, env.sim
    checked = 0
    for _ in range(60):
        if not sim.done and sim.window_jobs():
            g = sim.n_gpus
            legal = np.zeros((enc.window, g), dtype=bool)
            for k, spec in enumerate(sim.window_jobs()):
                legal[k] = sim.mask(spec.job_id).any(axis=1)
            a, b = enc.encode(sim, legal), enc.encode(sim)
            assert _obs_bytes(a) == _obs_bytes(b)
            checked += 1
        legal_a = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(int(legal_a[rng.integers(legal_a.size)]))
        if te or tr:
            _, info = env.reset(seed=int(rng.integers(100)))
    assert checked > 20
