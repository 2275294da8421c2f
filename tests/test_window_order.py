"""The queue's order (``Simulator.window_order``): which jobs the window holds. ``"fifo"`` is
submission order (every scenario's default, unchanged); ``"predicted"`` puts services and
prioritised jobs first, then the best-effort jobs by predicted duration (estimate / fastest
allowed solo speed), so a window of a few jobs holds a long queue's shortest ones."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_gym.baselines.speed_sjf import SpeedSJF, SpeedSJFQueue
from tests.helpers import make_sim, nodes
from tests.test_baselines_gandiva import drive
from tests.test_baselines_pai import _sjf_jobs, runner_placements


def _one_gpu_sim() -> Simulator:
    return make_sim(_sjf_jobs(), nodes()[:1], env={"queue_window": 1})


def test_a_window_of_one_holds_the_shortest_predicted_job() -> None:
    # speed_sjf over a window of one in submission order is FIFO; in predicted order its one
    # job is the queue's shortest predicted (50 s, then 300 s, then 1000 s), as PAI's SJF.
    assert SpeedSJFQueue.window_order == "predicted" and SpeedSJF.window_order == "fifo"
    fifo = runner_placements(SpeedSJF(), _one_gpu_sim())
    pred = runner_placements(SpeedSJFQueue(), _one_gpu_sim())
    assert [j for _, j in sorted((t, j) for j, (t, _) in fifo.items())] == [0, 1, 2, 3]
    assert [j for _, j in sorted((t, j) for j, (t, _) in pred.items())] == [0, 2, 3, 1]


def test_predicted_order_invariant_on_a_long_queue() -> None:
    # default seed 133 builds a queue of ~25 (window 4; workload version 3, version 2's was
    # seed 93): every snapshot's queue is sorted by (commitment first, predicted duration,
    # submission), computed here from the estimates.
    sim = make_simulator(load_scenario("default"))
    sim.reset(133, window_order="predicted")
    speeds = {
        (m, t): sim.speed.solo_speed(m, t)
        for m in {s.spec.model for s in sim.jobs.values()}
        for t in sim.cluster.type_names
    }
    longest = 0

    def check(sim: Simulator, _: object) -> None:
        nonlocal longest
        longest = max(longest, len(sim.queue))
        keys = []
        for _, jid in sim.queue:
            st = sim.jobs[jid]
            s = st.spec
            if s.online or s.priority > 0:
                keys.append((0, 0.0, s.submit_s, jid))
                continue
            allowed = s.gpu_types or tuple(sim.cluster.type_names)
            best = max(speeds[s.model, t] for t in sim.cluster.type_names if t in allowed)
            keys.append((1, max(0.0, s.est_work_s - st.work_done) / best, s.submit_s, jid))
        assert keys == sorted(keys)
        assert [s.job_id for s in sim.window_jobs()] == [k[3] for k in keys[: sim.window]]

    drive(SpeedSJFQueue(), sim, 133, on_decision=check)
    assert longest > 3 * sim.window  # (the seed's queue does get long)


def test_switching_order_rekeys_the_queue_and_fifo_is_submission_order() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(100)
    assert sim.window_order == "fifo"
    while len(sim.queue) < 20 and not sim.done:
        sim.advance()  # nobody places anything: the queue grows
    fifo = list(sim.queue)
    assert fifo == sorted((sim.jobs[j].spec.submit_s, j) for _, j in fifo)
    sim.set_window_order("predicted")
    assert sorted(j for _, j in sim.queue) == sorted(j for _, j in fifo)
    assert sim.queue == sorted(sim.queue) and sim.queue != fifo
    sim.set_window_order("fifo")
    assert sim.queue == fifo


def test_bad_window_order_is_refused_with_the_rule() -> None:
    sim = make_simulator(load_scenario("default"))
    with pytest.raises(ValueError, match="window_order='lifo': must be one of fifo, predicted"):
        sim.set_window_order("lifo")
    with pytest.raises(ValueError, match="window_order='lifo': must be one of fifo, predicted"):
        sim.reset(0, window_order="lifo")
    with pytest.raises(ValueError, match="window_order: must be one of fifo, predicted"):
        gym.make("GpuSharing-v1", scenario="default", window_order="lifo")


def test_env_window_order_is_deterministic_and_survives_resets() -> None:
    def run(seed: int) -> list[float]:
        env = gym.make("GpuSharing-v1", scenario="default", window_order="predicted")
        rng = np.random.default_rng(seed)
        rewards: list[float] = []
        _, info = env.reset(seed=100)
        for _ in range(300):
            legal = np.flatnonzero(info["action_mask"])
            _, r, term, trunc, info = env.step(int(legal[rng.integers(legal.size)]))
            rewards.append(float(r))
            if term or trunc:
                _, info = env.reset()
        assert env.unwrapped.sim.window_order == "predicted"  # type: ignore[attr-defined]
        env.close()
        return rewards

    assert run(0) == run(0)


def test_runner_sets_each_policys_order() -> None:
    # One simulator, two policies in turn: each episode runs under its policy's order.
    sim = make_simulator(load_scenario("default"))
    a = run_episode(SpeedSJFQueue(), sim, 133)  # (a heavy seed of workload version 3)
    assert sim.window_order == "predicted"
    b = run_episode(SpeedSJF(), sim, 133)
    assert sim.window_order == "fifo"
    assert a["jct_mean_s"] < b["jct_mean_s"]  # the heavy seed's short jobs go first
    assert run_episode(SpeedSJFQueue(), sim, 133) == a


def test_agent_carries_its_training_order_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    import json
    import shutil
    import zipfile

    from gpu_sharing_gym.agents.agent import (
        META_NAME,
        PRETRAINED_DIR,
        AgentLoadError,
        load_agent,
        write_metadata,
    )

    src = PRETRAINED_DIR / "ppo.zip"
    if not src.exists():
        pytest.skip("no shipped agent")
    with zipfile.ZipFile(src) as z:
        meta = json.loads(z.read(META_NAME))
    assert load_agent("ppo").window_order == "predicted"  # (maskable_ppo_v1_queue)
    ckpt = tmp_path / "agent.zip"
    shutil.copy(src, ckpt)
    write_metadata(ckpt, {**meta, "window_order": "predicted"})
    agent = load_agent(ckpt)
    assert agent.window_order == "predicted"
    sim = make_simulator(load_scenario("default"))
    run_episode(agent, sim, 0)
    assert sim.window_order == "predicted"
    write_metadata(ckpt, {**meta, "window_order": "lifo"})
    with pytest.raises(AgentLoadError, match=r"agent.zip: .*window_order must be one of"):
        load_agent(ckpt)
