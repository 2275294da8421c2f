"""One env class for every version: the registered ids are ``GpuSharingEnv`` with an interface,
the version classes are that env under a name, settings go to the interface that takes them."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the ids)
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.gpu_sharing_v1 import GpuSharingEnvV1
from gpu_sharing_env.envs.gpu_sharing_v2 import GpuSharingEnvV2
from gpu_sharing_env.envs.interfaces import (
    INTERFACES,
    CandidateMoves,
    KeptCandidateMoves,
    WindowFeatures,
    WindowTables,
)

IDS = {
    "GpuSharing-v0": WindowTables,
    "GpuSharing-v1": WindowFeatures,
    "GpuSharing-v2": CandidateMoves,
    "GpuSharing-v3": KeptCandidateMoves,
}


@pytest.mark.parametrize(("env_id", "cls"), IDS.items())
def test_every_id_is_the_one_class_with_its_interface(env_id: str, cls: type) -> None:
    spec = gym.spec(env_id)
    assert spec.entry_point == "gpu_sharing_env.envs.gpu_sharing:GpuSharingEnv"
    assert spec.kwargs == {"interface": cls.version}
    env = gym.make(env_id, scenario="default").unwrapped
    assert type(env) is GpuSharingEnv and type(env.interface) is cls
    assert INTERFACES[cls.version] is cls
    assert env.action_space is env.interface.action_space
    assert env.observation_space is env.interface.observation_space


@pytest.mark.parametrize(
    ("named", "env_id", "kwargs"),
    [
        (GpuSharingEnvV1, "GpuSharing-v1", {"migration_slots": 1}),
        (GpuSharingEnvV2, "GpuSharing-v2", {"max_candidates": 512}),
    ],
)
def test_version_classes_are_the_registered_envs(named: type, env_id: str, kwargs: dict) -> None:
    a = named("default", **kwargs)
    b = gym.make(env_id, scenario="default", **kwargs).unwrapped
    assert isinstance(a, GpuSharingEnv) and a.interface.version == b.interface.version
    assert a.observation_space == b.observation_space and a.action_space == b.action_space
    oa, ia = a.reset(seed=4)
    ob, ib = b.reset(seed=4)
    for _ in range(30):
        assert oa.keys() == ob.keys() and all(np.array_equal(oa[k], ob[k]) for k in oa)
        assert np.array_equal(ia["action_mask"], ib["action_mask"])
        act = int(np.flatnonzero(ia["action_mask"])[-1])
        oa, ra, *_, ia = a.step(act)
        ob, rb, *_, ib = b.step(act)
        assert ra == rb


def test_settings_read_as_the_env_and_another_versions_raise() -> None:
    v1 = GpuSharingEnvV1("default", max_window=12)
    assert v1.max_window == 12 and v1.max_gpus == v1.interface.max_gpus
    v0 = GpuSharingEnv("default")
    with pytest.raises(AttributeError, match=r"'max_window'.*interface v0"):
        _ = v0.max_window
    with pytest.raises(
        ValueError,
        match=r"^max_gpus: GpuSharing-v2 takes no such argument \(its own: max_candidates, decision_scope, mechanisms, pruning, keep_moves, suspend, pair_features\)$",
    ):
        gym.make("GpuSharing-v2", scenario="default", max_gpus=16)
    with pytest.raises(
        ValueError, match=r"^interface: must be one of v0, v1, v2, v3 \(got 'v9'\)$"
    ):
        GpuSharingEnv("default", interface="v9")


@pytest.mark.parametrize("version", ["v0", "v1", "v2", "v3"])
def test_copies_and_pickles_step_alike(version: str) -> None:
    env = GpuSharingEnv("default", interface=version)
    _, info = env.reset(seed=2)
    env.step(int(np.flatnonzero(info["action_mask"])[-1]))
    twins = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    for twin in twins:
        assert twin.interface.sim is twin.sim and twin.sim is not env.sim
    outs = [e.step(0) for e in (env, *twins)]
    for o in outs[1:]:
        assert all(np.array_equal(o[0][k], outs[0][0][k]) for k in o[0]) and o[1] == outs[0][1]


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_conformance_by_scenario_and_interface(version: str) -> None:
    from gpu_sharing_env.envs.conformance import api_test

    rep = api_test("default", num_steps=40, max_legal_checks=16, interface=version)
    assert rep.steps == 40 and rep.legal_stepped > 0 and rep.illegal_stepped > 0
