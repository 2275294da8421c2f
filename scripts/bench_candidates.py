"""``GpuSharing-v2``'s candidates per step and steps/s with and without pruning, side by side.

    python scripts/bench_candidates.py                       # the four scenarios, 20 s a run
    python scripts/bench_candidates.py pai-busy --seconds 60

For each scenario and driver (Gandiva through the env, its decisions translated into candidate
indices and kept by ``keep_moves``; and random legal actions, seeded), runs ``pruning="none"``
and ``pruning="classes"`` one after the other on the same seed, each for at most ``--seconds``
of wall time (an episode that ends is followed by the next seed's), and prints the mean and largest candidate counts,
steps/s and the ratios (none / classes). Gandiva's episode is the same under both settings (its
every decision is a candidate), so its steps are the same states up to where the slower run
stopped.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.policy import HeuristicPolicy
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.view import ClusterView

SCENARIOS = ("default", "default-x2", "mig-a100", "pai-busy")
#: ``max_candidates`` (the observation is padded to it, so its size is part of a step's cost):
#: without pruning above pai-busy's most legal moves (~45k), pruned above its ~9.4k (the
#: ``candidate_dagger`` recipe's 16,384).
PAD = {"none": 2**16, "classes": 2**14}


def run(scenario: str, driver: str, pruning: str, seed: int, seconds: float) -> dict[str, Any]:
    """One timed run: steps, steps/s, candidate counts."""
    policy = make_policy("gandiva")
    assert isinstance(policy, HeuristicPolicy)
    said: list[Decision | None] = [None]

    def ask(sim: Simulator) -> list[Decision | None]:
        codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options), 0)
        said[0] = policy.decide(ClusterView(sim, codec))
        return [said[0]]

    heuristic = driver == "gandiva"
    kw: dict[str, Any] = {"keep_moves": ask} if heuristic else {}
    if heuristic:
        kw.update(
            decision_scope=policy.decision_scope,
            window_order=policy.window_order,
            mechanisms=dict(policy.mechanisms),
        )
    env = gym.make(
        "GpuSharing-v2", scenario=scenario, max_candidates=PAD[pruning], pruning=pruning, **kw
    ).unwrapped
    assert isinstance(env, GpuSharingEnv)
    rng = np.random.default_rng(seed)
    policy.reset(seed)
    counts: list[int] = []
    t0 = time.perf_counter()
    env.reset(seed=seed)
    while time.perf_counter() - t0 < seconds:  # (an episode that ends: the next seed's)
        counts.append(len(env.candidates.moves))
        if heuristic:
            act = env.index_of(said[0])
            if act is None:
                raise SystemExit(f"{scenario}: Gandiva's decision {said[0]} is no candidate")
        else:
            act = int(rng.choice(np.flatnonzero(env.action_masks())))
        if env.step(act)[2]:
            seed += 1
            policy.reset(seed)
            env.reset(seed=seed)
    dt = time.perf_counter() - t0
    return {"steps": len(counts), "sps": len(counts) / dt, "mean": np.mean(counts),
            "max": max(counts), "t": env.sim.now, "seed": seed, "counts": counts}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args(argv)
    print(f"{'scenario':<11} {'driver':<7} {'pruning':<7} {'steps':>6} {'to seed':>7} {'t (s)':>7} "
          f"{'cand mean':>9} {'max':>6} {'steps/s':>8}")  # fmt: skip
    for scenario in a.scenarios:
        for driver in ("gandiva", "random"):
            r = {p: run(scenario, driver, p, a.seed, a.seconds) for p in ("none", "classes")}
            for p, x in r.items():
                print(f"{scenario:<11} {driver:<7} {p:<7} {x['steps']:>6} {x['seed']:>7} {x['t']:>7.0f} "
                      f"{x['mean']:>9.0f} {x['max']:>6} {x['sps']:>8.1f}")  # fmt: skip
            n, c = r["none"], r["classes"]
            if driver == "gandiva":  # the same episode: compare the states both runs reached
                k = min(n["steps"], c["steps"])
                full, kept = np.asarray(n["counts"][:k]), np.asarray(c["counts"][:k])
                same = (f" (same {k} states: mean x{full.mean() / kept.mean():.1f}, "
                        f"max x{full.max() / kept.max():.1f})")  # fmt: skip
            else:
                same = " (different episodes)"
            print(f"{'':<11} {driver:<7} ratio   candidates mean x{n['mean'] / c['mean']:.1f}, "
                  f"max x{n['max'] / c['max']:.1f}{same}; steps/s x{c['sps'] / n['sps']:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
