"""The ``GpuSharing-v1`` resident columns kept incrementally (``_ResidentSlots``) give the bits
of a scan of every resident, step by step, across resets, migrations, faults, MIG and outside
accruals; and the simulator's job watch that feeds them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401
from gpu_sharing_env.envs import observation_v1
from gpu_sharing_env.sim.state import Status


def _same(a: tuple[np.ndarray, float, int], b: tuple[np.ndarray, float, int]) -> bool:
    # bit for bit (an int64 view tells 0.0 from -0.0 and compares NaNs by their bits)
    return (
        np.array_equal(a[0].view(np.int64), b[0].view(np.int64))
        and np.float64(a[1]).view(np.int64) == np.float64(b[1]).view(np.int64)
        and a[2] == b[2]
    )


@pytest.mark.parametrize(
    ("scenario", "kwargs", "steps", "width"),
    [
        ("pai-busy", {}, 500, 4),  # 226 GPUs, faults, services: the table by default
        ("pai-busy", {}, 300, 1),  # the slots grow as GPUs take more residents
        ("default", {}, 700, 4),
        ("mig-a100", {}, 500, 4),
        ("muxflow-t4", {}, 400, 4),
        ("default", {"migration_slots": 2}, 500, 4),
    ],
)
def test_incremental_resident_columns_equal_a_scan_at_every_step(
    monkeypatch: pytest.MonkeyPatch,
    scenario: str,
    kwargs: dict[str, Any],
    steps: int,
    width: int,
) -> None:
    monkeypatch.setattr(observation_v1, "SLOTS_MIN_GPUS", 1)  # every fleet keeps the table
    monkeypatch.setattr(observation_v1, "_SLOTS_WIDTH", width)
    env = gym.make("GpuSharing-v1", scenario=scenario, **kwargs)
    u: Any = env.unwrapped
    enc, slots = u.encoder, u.encoder._slots
    assert slots is not None
    rng = np.random.default_rng(7)
    _, info = env.reset(seed=11)
    got, want = np.zeros_like(enc._times), np.zeros_like(enc._times)
    resets = 0
    for i in range(steps):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, term, trunc, info = env.step(legal[rng.integers(legal.size)])
        if term or trunc or i == steps // 2:  # (a reset mid-episode as well)
            _, info = env.reset(seed=100 + i)
            resets += 1
        if i % 7 == 3:
            # outside code bringing progress up to date (``Simulator.progress`` accrues)
            for jid, st in u.sim.jobs.items():
                if st.status is Status.RUNNING:
                    u.sim.progress(jid)
        assert _same(slots.times(u.sim, enc, got), enc.gpu_times_scan(u.sim, want)), (scenario, i)
    assert resets >= 1
    assert slots.width >= width and (width > 1 or slots.width > 1)  # (grown where it had to)


def test_small_fleets_scan_and_large_ones_keep_the_table() -> None:
    small = gym.make("GpuSharing-v1", scenario="default").unwrapped
    large = gym.make("GpuSharing-v1", scenario="pai-busy").unwrapped
    assert small.encoder._slots is None  # type: ignore[attr-defined]
    assert large.encoder._slots is not None  # type: ignore[attr-defined]


def test_job_watch_sees_accruals_and_copies_do_not_carry_it() -> None:
    env = gym.make("GpuSharing-v1", scenario="default")
    u: Any = env.unwrapped
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    sim = u.sim
    watch = sim.watch_jobs()
    running: list[int] = []
    while not running:
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, _, _, info = env.step(legal[rng.integers(legal.size)])
        running = [j for j, st in sim.jobs.items() if st.status is Status.RUNNING]
    job = running[0]
    watch.clear()
    sim.progress(job)
    assert watch == {job}
    watch.clear()
    clone = sim.copy()
    clone.progress(job)
    clone.advance()
    assert not watch  # the clone's accruals are its own
    sim.reset(1)
    sim.progress(min(sim.jobs))  # (a job of the new episode: ids depend on its job count)
    assert not watch  # a reset ends the watch


def test_encoders_made_per_decision_or_moved_leave_no_watches_behind() -> None:
    from gpu_sharing_env.envs.observation_v1 import ObservationEncoderV1
    from gpu_sharing_env.sim.codec import ActionCodec
    from gpu_sharing_env.sim.view import ClusterView

    env = gym.make("GpuSharing-v1", scenario="pai-busy")
    u: Any = env.unwrapped
    env.reset(seed=0)
    env.step(0)
    sim = u.sim
    view = ClusterView(sim, ActionCodec(sim.window, sim.n_gpus, len(sim.options)))
    before = (len(sim.cluster._watchers), sim.rates.watcher_count())
    keep = view.make_encoder(ObservationEncoderV1, sim.n_gpus)
    view.encode(keep)
    for _ in range(20):  # a policy making an encoder per decision
        view.encode(view.make_encoder(ObservationEncoderV1, sim.n_gpus))
    copy = sim.copy()
    copied = len(copy.cluster._watchers)  # (a copy's cluster carries copies of the sets)
    keep.encode(copy)  # moved to another simulator: its watches there, none left here
    assert (len(sim.cluster._watchers), sim.rates.watcher_count()) == before
    keep.encode(sim)  # and back
    assert (len(sim.cluster._watchers), sim.rates.watcher_count()) == (before[0] + 1, before[1] + 1)
    assert (len(copy.cluster._watchers), copy.rates.watcher_count()) == (copied, 0)
