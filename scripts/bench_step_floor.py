"""The floor under a ``GpuSharing-v2`` step and under a ``GpuSharing-v3`` step: an env that
computes nothing and returns v2's observation (fresh copies of one real observation's arrays)
and action mask through ``gymnasium.make``'s wrappers, and one that returns v3's (the same kept
arrays every step in a new dict, ``info["action_mask"]`` the observation's int8 mask, made as v3
is registered: without Gymnasium's passive checker), each stepped as
``scripts/bench_step_cartpole.py`` steps the env (a random legal action drawn from the mask),
beside CartPole-v1 in the same process (least CPU time over ``R`` repeats of ``K`` steps). What
is left of issue 51's 0.2x CartPole bar for the simulator and the candidate builder is
``5 x CartPole's step - the floor`` (``floor_us``: v2's; ``v3_floor_us``: v3's). Prints one
JSON line::

    PYTHONPATH=. R=3 K=20000 python scripts/bench_step_floor.py

With ``SIZE=<GPUs>`` (issue 51's second bar: 0.05x CartPole at 1,024 GPUs) the observation is
v2's at ``default`` scaled to that many GPUs with ``pruning="classes"``, as
``scripts/bench_step_cartpole.py`` makes it, padded to each ``max_candidates`` of ``MAXC``
(default: 65,536, the bench's, and the smallest power of two that holds the most legal moves
seen in ``SCAN`` random-legal steps from seed 0, default 200). Per padding it also times the
table's copy alone (``candidates.copy()``) and v3's floor (``v3_floor_us``: no copy, so the
same at every padding but for the mask's draw); what is left of the bar is
``20 x CartPole's step - the floor``::

    PYTHONPATH=. SIZE=1024 R=3 K=2000 python scripts/bench_step_floor.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
from bench_step_cartpole import cartpole_once  # (scripts/ is on the path when run)

import gpu_sharing_env  # noqa: F401  (registers GpuSharing-v2)
from gpu_sharing_env.config import load_scenario

R, K = int(os.environ.get("R", "3")), int(os.environ.get("K", "20000"))
SIZE = os.environ.get("SIZE", "default")


def scaled(max_candidates: int) -> gym.Env[Any, Any]:
    """v2 at ``SIZE`` GPUs as ``scripts/bench_step_cartpole.py`` makes it."""
    from gpu_sharing_gym.bench.suite import scaled_scenario

    cfg = scaled_scenario(load_scenario("default"), int(SIZE))
    return gym.make("GpuSharing-v2", scenario=cfg, pruning="classes", max_candidates=max_candidates)


if SIZE == "default":
    real = gym.make("GpuSharing-v2", scenario=load_scenario("default"))
else:
    real = scaled(65536)
OBS, INFO = real.reset(seed=0)


class Floor(gym.Env[Any, Any]):
    """v2's spaces; every step returns fresh copies of one real observation and its mask."""

    def __init__(self) -> None:
        self.observation_space = real.observation_space
        self.action_space = real.action_space

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return {k: v.copy() for k, v in OBS.items()}, {"action_mask": INFO["action_mask"].copy()}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs = {k: v.copy() for k, v in OBS.items()}
        return obs, 0.0, False, False, {"action_mask": INFO["action_mask"].copy()}


class FloorV3(Floor):
    """v3's contract: the same arrays every step (a new dict of them), the mask int8 and shared
    with ``info``."""

    def __init__(self) -> None:
        super().__init__()
        mask = INFO["action_mask"].copy()
        self.kept = {
            "candidates": OBS["candidates"].copy(),
            "candidate_mask": mask,
            "global": OBS["global"].copy(),
        }
        for a in self.kept.values():
            a.flags.writeable = False
        self.observation_space = gym.spaces.Dict(
            {
                k: gym.spaces.Box(
                    sp.low, sp.high, sp.shape, np.int8 if k == "candidate_mask" else sp.dtype
                )  # type: ignore[attr-defined]
                for k, sp in real.observation_space.spaces.items()  # type: ignore[attr-defined]
            }
        )

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)
        k = self.kept
        return dict(k), {"action_mask": k["candidate_mask"]}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        k = self.kept
        return dict(k), 0.0, False, False, {"action_mask": k["candidate_mask"]}


gym.register("GpuSharingFloor-v0", entry_point=Floor)  # type: ignore[arg-type]
gym.register("GpuSharingFloorV3-v0", entry_point=FloorV3, disable_env_checker=True)  # type: ignore[arg-type]


def masked(env: gym.Env[Any, Any], k: int) -> float:
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    t0 = time.process_time()
    for _ in range(k):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        if te or tr:
            _, info = env.reset()
    return (time.process_time() - t0) / k * 1e6


def most_legal(env: gym.Env[Any, Any], k: int) -> int:
    """The most legal moves in ``k`` random-legal steps from seed 0 (the bench's steps)."""
    rng = np.random.default_rng(0)
    seed = 0
    _, info = env.reset(seed=seed)
    most = int(info["action_mask"].sum())
    for _ in range(k):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        most = max(most, int(info["action_mask"].sum()))
        if te or tr:
            seed += 1
            _, info = env.reset(seed=seed)
    return most


def copy_us(table: np.ndarray, k: int) -> float:
    """CPU time of one fresh copy of ``table`` (the candidate table alone)."""
    t0 = time.process_time()
    for _ in range(k):
        table.copy()
    return (time.process_time() - t0) / k * 1e6


def main() -> None:
    global real, OBS, INFO
    cp = gym.make("CartPole-v1")
    c = min(cartpole_once(cp, K) for _ in range(R))
    if SIZE == "default":
        fl = gym.make("GpuSharingFloor-v0")
        fl3 = gym.make("GpuSharingFloorV3-v0")
        f, f3 = float("inf"), float("inf")
        for _ in range(R):  # (alternated, so both see the same load)
            f = min(f, masked(fl, K))
            f3 = min(f3, masked(fl3, K))
        c = min(c, min(cartpole_once(cp, K) for _ in range(R)))
        shapes = {k: list(v.shape) for k, v in OBS.items()}
        print(
            json.dumps(
                {
                    "obs": shapes,
                    "cartpole_us": round(c, 2),
                    "floor_us": round(f, 2),
                    "floor_x": round(c / f, 3),
                    "left_for_the_step_at_0.2x_us": round(5 * c - f, 1),
                    "v3_floor_us": round(f3, 2),
                    "v3_floor_x": round(c / f3, 3),
                    "v3_left_for_the_step_at_0.2x_us": round(5 * c - f3, 1),
                    "load": round(os.getloadavg()[0], 2),
                }
            )
        )
        return
    out: dict[str, Any] = {"size": int(SIZE), "load": round(os.getloadavg()[0], 2)}
    if "MAXC" in os.environ:
        paddings = [int(x) for x in os.environ["MAXC"].split(",")]
    else:
        scan = int(os.environ.get("SCAN", "200"))
        most = most_legal(real, scan)
        out["most_legal"], out["scan_steps"] = most, scan
        paddings = [65536, 1 << (most - 1).bit_length()]
    floors: dict[int, tuple[float, float, float]] = {}
    padded = 65536
    for n in paddings:
        if n != padded:
            real.close()
            real, padded = scaled(n), n
            OBS, INFO = real.reset(seed=0)
        fl = gym.make("GpuSharingFloor-v0")
        fl3 = gym.make("GpuSharingFloorV3-v0")
        floors[n] = (
            min(masked(fl, K) for _ in range(R)),
            min(copy_us(OBS["candidates"], K) for _ in range(R)),
            min(masked(fl3, K) for _ in range(R)),
        )
        fl.close()
        fl3.close()
    c = min(c, min(cartpole_once(cp, K) for _ in range(R)))
    out["cartpole_us"] = round(c, 2)
    for n, (f, cp_us, f3) in floors.items():
        table = n * int(OBS["candidates"].shape[1]) * 4
        out[f"{n}"] = {
            "table_bytes": table,
            "copy_us": round(cp_us, 1),
            "floor_us": round(f, 1),
            "floor_x": round(c / f, 4),
            "left_for_the_step_at_0.05x_us": round(20 * c - f, 1),
            "v3_floor_us": round(f3, 1),
            "v3_floor_x": round(c / f3, 4),
        }
    out["load_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
