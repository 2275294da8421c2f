"""The most legal moves (``GpuSharing-v2``'s candidates, hold included) a scenario reaches over
many episodes, for sizing ``max_candidates`` (v3's default: the scenario's
``env.max_candidates``).

Episode ``i`` is seeded ``i``; at each step a random legal move (``default_rng(i)``) is taken
with probability ``--place``, otherwise hold, so the queue grows as far as a policy that holds
lets it (``--place 0``: hold at every step). Prints one JSON line::

    python scripts/scan_legal_moves.py default --episodes 200 --place 0.5
    python scripts/scan_legal_moves.py default --episodes 30 --place 0
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import numpy as np

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--place", type=float, default=0.5, help="chance of a random legal move")
    ap.add_argument("--scope", default="queue", choices=("queue", "window"))
    a = ap.parse_args(argv)
    env = gym.make(
        "GpuSharing-v2",
        scenario=load_scenario(a.scenario),
        max_candidates=2**24,
        decision_scope=a.scope,
    )
    most, steps, at = 0, 0, None
    for ep in range(a.episodes):
        _, info = env.reset(seed=ep)
        rng = np.random.default_rng(ep)
        while True:
            legal = np.flatnonzero(info["action_mask"])
            if legal.size > most:
                most, at = int(legal.size), (ep, steps)
            steps += 1
            act = int(legal[rng.integers(legal.size)]) if rng.random() < a.place else 0
            _, _, te, tr, info = env.step(act)
            if te or tr:
                break
    out = {"scenario": a.scenario, "scope": a.scope, "place": a.place, "episodes": a.episodes}
    out |= {"steps": steps, "most_legal": most, "at_episode": at[0] if at else None}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
