"""Raw env steps beside CartPole-v1 in one process (issue 51's speed bars).

For each case of ``SIZES`` (``v2:default``, ``v1:default``, ``v3:default``, ``v2:1024``: an env
version and ``default`` or a GPU count; v3 is made as v2 is, its table at ``default`` the
scenario's ``env.max_candidates`` (4,096, as v2's); a scaled ``default`` with
``pruning="classes"`` for v2 and v3 and
``max_candidates=MAXC`` (65536: the queue scope's legal moves reach 15,511 at 1,024 GPUs);
a count with ``w`` after it, ``v2:1024w``, the same fleet with ``decision_scope="window"``
(placements for the window's jobs only) and ``max_candidates=MAXCW`` (8192: 5,553 legal
moves at most in 400 steps from seed 0)), the least
CPU time (``time.process_time``) over ``R`` repeats of ``K`` seeded random-legal-action steps
(repeat ``r`` resets with seeds ``1000 r``, ``1000 r + 1``, ... as its episodes end and draws its
actions from ``default_rng(1000 r)``; the first reset not timed; ``K1024`` steps for a scaled
fleet), and CartPole-v1's the same before and after. Each repeat has its own seeds, so none reads
an episode an earlier repeat drew from the process's memos (``workload/draws.py``, the
predictor's fits): ``SEEDS=same`` gives every repeat seeds 0, 1, 2, ... and actions from
``default_rng(0)``, as this script did before 2026-12-01 (BENCHMARKS.md's rows up to then).
The cases run repeat by repeat (repeat 0 of each, then repeat 1 of each, ...), each repeat
with the process's memos of episode draws and of the predictor's fits cleared
(``workload.draws.DRAWS``, ``workload.predictor._FITS``), so a case reads no episode another
case drew on the same scenario and seeds (before 2026-12-01's v3 the cases ran one after
another without clearing: ``v2:default`` after ``v1:default`` read its draws). ``PYTHONPATH``
selects the tree, so two trees alternate with the same interpreter. Prints one JSON line::

    PYTHONPATH=. R=3 K=1000 K1024=30 SIZES=v2:default,v1:default,v2:1024,v2:1024w \\
        python scripts/bench_step_cartpole.py
    PYTHONPATH=. SIZES=v2:default,v3:default,v2:1024w,v3:1024w python scripts/bench_step_cartpole.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

import gpu_sharing_env
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.workload import predictor
from gpu_sharing_env.workload.draws import DRAWS
from gpu_sharing_gym.bench.suite import scaled_scenario

R, K = int(os.environ.get("R", "3")), int(os.environ.get("K", "1000"))
SAME_SEEDS = os.environ.get("SEEDS", "fresh") == "same"


def first(r: int) -> int:
    """Repeat ``r``'s first seed (and its actions' generator's seed)."""
    return 0 if SAME_SEEDS else 1000 * r


SIZES = os.environ.get("SIZES", "v1:default,v2:default").split(",")


def once(env: gym.Env[Any, Any], k: int, first: int) -> float:
    rng = np.random.default_rng(first)
    seed = first
    _, info = env.reset(seed=seed)
    t0 = time.process_time()
    for _ in range(k):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        if te or tr:
            seed += 1
            _, info = env.reset(seed=seed)
    return (time.process_time() - t0) / k * 1e6


def cartpole_once(env: gym.Env[Any, Any], k: int) -> float:
    env.reset(seed=0)
    env.action_space.seed(0)
    t0 = time.process_time()
    for _ in range(k):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    return (time.process_time() - t0) / k * 1e6


def main() -> None:
    cfg = load_scenario("default")
    cp = gym.make("CartPole-v1")
    c1 = min(cartpole_once(cp, 20_000) for _ in range(R))
    out: dict[str, Any] = {
        "tree": os.environ.get("PYTHONPATH", ""),
        "compiled": len(gpu_sharing_env.COMPILED),
        "load": round(os.getloadavg()[0], 2),
        "seeds": "same" if SAME_SEEDS else "fresh",
    }
    envs: dict[str, tuple[gym.Env[Any, Any], int]] = {}
    for key in SIZES:
        version, size = key.split(":")
        env_id = "GpuSharing-" + version
        if size == "default":
            # (v3's table: the scenario's ``env.max_candidates``; v2's: 4,096)
            envs[key] = gym.make(env_id, scenario=cfg), K
        else:
            kw: dict[str, Any] = {}
            window = size.endswith("w")
            if version in ("v2", "v3") and window:
                kw = {
                    "pruning": "classes",
                    "decision_scope": "window",
                    "max_candidates": int(os.environ.get("MAXCW", "8192")),
                }
            elif version in ("v2", "v3"):
                kw = {"pruning": "classes", "max_candidates": int(os.environ.get("MAXC", "65536"))}
            env = gym.make(env_id, scenario=scaled_scenario(cfg, int(size.rstrip("w"))), **kw)
            envs[key] = env, int(os.environ.get("K1024", "30"))
    best = dict.fromkeys(SIZES, float("inf"))
    for r in range(R):  # (the cases repeat by repeat: a change of load meets them alike)
        for key in SIZES:
            # (cold: no episode or fit of an earlier case or repeat read from the memos)
            DRAWS.clear()
            predictor._FITS.clear()
            env, k = envs[key]
            best[key] = min(best[key], once(env, k, first(r)))
    for key in SIZES:
        out[key + "_us"] = round(best[key], 1)
        envs[key][0].close()
    c2 = min(cartpole_once(cp, 20_000) for _ in range(R))
    c = min(c1, c2)
    out["cartpole_us"] = round(c, 2)
    for key in SIZES:
        out[key + "_x"] = round(c / out[key + "_us"], 5)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
