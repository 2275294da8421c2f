"""How many candidate moves ``GpuSharing-v2`` offers (placements, migrations) on a scenario.

    python scripts/candidate_counts.py default --seconds 60
    python scripts/candidate_counts.py pai-busy --scope window

Drives the env with a heuristic (its decisions translated into candidate indices) for at most
``--seconds`` of wall time and prints the largest and mean counts and the env's steps/s.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.policy import HeuristicPolicy
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.view import ClusterView


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--policy", default="speed_sjf_queue")
    ap.add_argument("--scope", default="queue", choices=("queue", "window"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args(argv)
    policy = make_policy(a.policy)
    if not isinstance(policy, HeuristicPolicy):
        raise SystemExit(f"--policy {a.policy}: a heuristic (it decides in Decisions)")
    env = gym.make(
        "GpuSharing-v2", scenario=a.scenario, max_candidates=2**24, decision_scope=a.scope
    ).unwrapped
    assert isinstance(env, GpuSharingEnv) and env.interface.version == "v2"
    t0 = time.perf_counter()
    env.reset(seed=a.seed)
    policy.reset(a.seed)
    sim = env.sim
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options), 0)
    place: list[int] = []
    move: list[int] = []
    while time.perf_counter() - t0 < a.seconds:
        c = env.candidates
        place.append(c.n_place)
        move.append(len(c.moves) - 1 - c.n_place)
        act = env.index_of(policy.decide(ClusterView(sim, codec)))
        if act is None:
            raise SystemExit(f"{a.policy}'s decision is no candidate (a parity gap)")
        if env.step(act)[2]:
            break
    dt = time.perf_counter() - t0
    total = np.add(place, move)
    print(
        f"{a.scenario} scope={a.scope} policy={a.policy} seed={a.seed}: {len(total)} steps to "
        f"t={sim.now:.0f}s; candidates max {total.max()} mean {total.mean():.0f}; placements "
        f"max {max(place)} mean {np.mean(place):.0f}; migrations max {max(move)} mean "
        f"{np.mean(move):.0f}; {len(total) / dt:.1f} steps/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
