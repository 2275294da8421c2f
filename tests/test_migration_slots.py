"""GpuSharing-v1's migration slots (``migration_slots``): running jobs an agent may move onto an
empty GPU, through the one action codec the env, the runner and the agents share (issue 25)."""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.observation_v1 import (
    JOB_FEATURES_V1,
    MOVE_FEATURES,
    layout_v1_columns,
    observation_space_v1,
)
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.codec import WAIT
from gpu_sharing_env.sim.engine import MIGRATION_MIN_LEFT_S
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.agent import RLAgent, load_agent, read_checkpoint, resolve
from gpu_sharing_gym.agents.option_policy import OptionActorCriticPolicy
from gpu_sharing_gym.agents.train import widen_job_inputs

MOVES = 2
J = len(JOB_FEATURES_V1)


def _migration_actions(env: GpuSharingEnv, legal: np.ndarray) -> np.ndarray:
    first = 1 + env.max_window * env.max_gpus * env.codec.n_options
    return legal[legal >= first]


def _rollout(seed: int, moves: int = MOVES, steps: int = 400) -> tuple[str, GpuSharingEnv, int]:
    """A rollout that takes a legal migration whenever one is offered (else a random legal
    action): (hash of every observation and reward, the env, migrations taken)."""
    env = gym.make("GpuSharing-v1", scenario="default", migration_slots=moves).unwrapped
    assert isinstance(env, GpuSharingEnv) and env.interface.version == "v1"
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()
    taken = 0
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        moves_now = _migration_actions(env, legal)
        if moves_now.size:
            a = int(rng.choice(moves_now))
            taken += 1
        else:
            a = int(rng.choice(legal))
        obs, r, term, _, info = env.step(a)
        for k in sorted(obs):
            h.update(obs[k].tobytes())
        h.update(np.float64(r).tobytes())
        if term:
            break
    return h.hexdigest(), env, taken


def test_no_migration_slots_is_v1_unchanged() -> None:
    plain = gym.make("GpuSharing-v1", scenario="default").unwrapped
    zero = gym.make("GpuSharing-v1", scenario="default", migration_slots=0).unwrapped
    assert zero.observation_space == plain.observation_space
    assert zero.action_space == plain.action_space
    with pytest.raises(ValueError, match="migration_slots: must be an integer >= 0"):
        gym.make("GpuSharing-v1", scenario="default", migration_slots=-1)


def test_migration_slots_layout() -> None:
    env = gym.make("GpuSharing-v1", scenario="default", migration_slots=MOVES).unwrapped
    g, slots, o, cols = layout_v1_columns(env.observation_space)
    assert (g, slots, cols) == (env.max_gpus, env.max_window + MOVES, J + len(MOVE_FEATURES))
    assert env.action_space.n == 1 + slots * g * o


def test_every_offered_migration_is_legal_and_moves_the_job() -> None:
    env = gym.make("GpuSharing-v1", scenario="default", migration_slots=MOVES).unwrapped
    obs, info = env.reset(seed=3)
    rng = np.random.default_rng(0)
    sim = env.sim
    moved = 0
    for _ in range(400):
        mask = info["action_mask"]
        legal = np.flatnonzero(mask)
        offered = _migration_actions(env, legal)
        cands = sim.migration_candidates(MOVES)
        jobs = obs["jobs"].reshape(-1, J + len(MOVE_FEATURES))
        running = jobs[:, J]
        # the "running" column marks exactly the candidates' rows
        assert running.tolist() == [
            float(env.max_window <= r < env.max_window + len(cands)) for r in range(len(running))
        ]
        for jid in cands:
            st = sim.jobs[jid]
            assert st.status is Status.RUNNING and st.spec.num_gpus == 1
            assert sim.cluster.n_res[st.gpus[0]] >= 2  # a shared GPU
            done = st.work_done + st.rate * max(0.0, sim.now - st.last_t)
            assert st.spec.est_work_s - done >= MIGRATION_MIN_LEFT_S
            assert st.setup_until <= sim.now and not st.spec.online
        for a in offered:
            assert env.explain(int(a)) is None
        illegal = np.flatnonzero(mask == 0)
        illegal = illegal[illegal >= 1 + env.max_window * env.max_gpus * env.codec.n_options]
        for a in rng.choice(illegal, size=min(4, illegal.size), replace=False):
            assert env.explain(int(a)) is not None
        if offered.size:
            a = int(rng.choice(offered))
            slot, gpu, _ = env.codec.decode(a)
            jid = cands[slot - env.max_window]
            before = sim.acc.migrations
            obs, _, term, _, info = env.step(a)
            assert sim.acc.migrations == before + 1
            assert sim.jobs[jid].gpus == [gpu] or sim.jobs[jid].status is not Status.RUNNING
            moved += 1
        else:
            obs, _, term, _, info = env.step(int(rng.choice(legal)))
        if term:
            break
    assert moved > 0, "no migration was offered in the episode"


def test_migration_episodes_are_deterministic() -> None:
    a, _, taken = _rollout(5)
    b, _, _ = _rollout(5)
    assert taken > 0
    assert a == b


def _widened_ppo() -> RLAgent:
    """The shipped ``ppo`` widened for migration slots (``--init-from ppo``'s start)."""
    meta, state = read_checkpoint(resolve("ppo"))
    # default's layout: 16 GPUs, a window of 4, 4 options; plus the hint
    space = observation_space_v1(16, 4, 4, MOVES)
    act = spaces.Discrete(1 + (4 + MOVES) * 16 * 4)
    space = spaces.Dict({**space.spaces, "hint": spaces.Box(0.0, 1.0, (int(act.n),), np.float32)})
    net = OptionActorCriticPolicy(space, act, lambda _: 0.0, **meta["policy_kwargs"])
    wide = widen_job_inputs(state, net.state_dict())
    net.load_state_dict(wide)  # (fits: the widened shapes)
    return RLAgent({**meta, "migration_slots": MOVES}, wide, name="ppo_wide")


def test_widened_agent_scores_queue_actions_as_before_without_candidates() -> None:
    """Zero weights for the new columns: where no job is a migration candidate, the widened
    network scores every placement exactly as the saved one."""
    agent = load_agent("ppo")
    wide = _widened_ppo()
    env0 = gym.make("GpuSharing-v1", scenario="default", window_order="predicted").unwrapped
    env2 = gym.make(
        "GpuSharing-v1", scenario="default", window_order="predicted", migration_slots=MOVES
    ).unwrapped
    o0, i0 = env0.reset(seed=11)
    o2, i2 = env2.reset(seed=11)
    assert not env2.sim.migration_candidates(MOVES)  # (the first decision: nothing runs yet)
    hint0 = {**o0, "hint": np.zeros(env0.action_space.n, np.float32)}
    hint2 = {**o2, "hint": np.zeros(env2.action_space.n, np.float32)}
    p0 = agent.policy_for(*agent.layout(hint0, i0["action_mask"]))
    p2 = wide.policy_for(*wide.layout(hint2, i2["action_mask"]))
    with th.no_grad():
        t0 = {k: th.as_tensor(v)[None] for k, v in hint0.items()}
        t2 = {k: th.as_tensor(v)[None] for k, v in hint2.items()}
        s0 = p0.mlp_extractor.forward_actor(p0.extract_features(t0))[0]
        s2 = p2.mlp_extractor.forward_actor(p2.extract_features(t2))[0]
    n0 = s0.shape[0]
    assert th.allclose(s2[:n0], s0, atol=1e-5)  # the window's actions first, wait included


def test_runner_and_env_agree_for_an_agent_with_migration_slots() -> None:
    """The runner offers an agent trained with migration slots the same candidates, observation
    and mask as the env: the same episode either way."""
    wide = _widened_ppo()
    wide.window_order = "predicted"
    seed = 2
    env = gym.make(
        "GpuSharing-v1", scenario="default", window_order="predicted", migration_slots=MOVES
    ).unwrapped
    obs, info = env.reset(seed=seed)
    wide.reset(seed)
    term = False
    while not term:
        a = wide.act(ClusterView(env.sim, env.codec), obs, info["action_mask"])
        obs, _, term, _, info = env.step(a)
    via_env = env.sim.metrics()
    sim = gym.make("GpuSharing-v1", scenario="default").unwrapped.sim
    via_runner = run_episode(wide, sim, seed)
    assert via_runner["jct_mean_s"] == via_env["jct_mean_s"]
    assert via_runner["migrations"] == via_env["migrations"]


def test_codec_round_trips_a_migration_decision() -> None:
    env = gym.make("GpuSharing-v1", scenario="default", migration_slots=MOVES).unwrapped
    _, info = env.reset(seed=3)
    rng = np.random.default_rng(1)
    while True:  # random placements until a migration is offered
        offered = _migration_actions(env, np.flatnonzero(info["action_mask"]))
        if offered.size:
            break
        _, _, term, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        assert not term, "no migration offered in the episode"
    sim = env.sim
    a = int(offered[0])
    d = env.codec.to_decision(sim, a)
    slot, gpu, opt = env.codec.decode(a)  # type: ignore[misc]
    assert d is not None and d.job_id == sim.migration_candidates(MOVES)[slot - env.max_window]
    assert (d.gpu, d.option) == (gpu, opt)
    assert env.codec.from_decision(sim, d) == a
    assert env.codec.to_decision(sim, WAIT) is None
    empty = 1 + (env.max_window + MOVES - 1) * env.max_gpus * env.codec.n_options
    if len(sim.migration_candidates(MOVES)) < MOVES:
        with pytest.raises(ValueError, match="migration slot 1 is empty"):
            env.codec.to_decision(sim, empty)
