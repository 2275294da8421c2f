"""Seeded random-legal-action steps for instruction counts (issue 51's primary speed figure).

Runs ``W`` warm-up steps (episodes seeded from 1,000), then ``N`` counted steps (episodes seeded
0, 1, 2, ... as they end) of ``ENV`` (default ``GpuSharing-v1``) on ``default`` or, with
``SIZE=<GPUs>``, on ``default`` scaled to that many GPUs. Run it under callgrind twice, with
``N`` and with ``N=0``; the difference over ``N`` is the instructions of a step::

    PYTHONHASHSEED=0 PYTHONPATH=$PWD N=1000 valgrind --tool=callgrind python scripts/callgrind_steps.py
    PYTHONHASHSEED=0 PYTHONPATH=$PWD N=0 valgrind --tool=callgrind python scripts/callgrind_steps.py
    ENV=GpuSharing-v2 N=300 W=200 ...   # the v2 figures of docs/notes/2026-11-28-v2-step-night.md
    ENV=GpuSharing-v2 SIZE=1024 N=60 W=20 ...   # pruning="classes", max_candidates=MAXC (65536)
    ENV=GpuSharing-v2 SIZE=1024 N=10 W=20 ...   # its baseline: the difference over 50
    ENV=GpuSharing-v2 SIZE=1024 SCOPE=window ...  # the bench's v2:1024w (max_candidates MAXCW, 8192)
    ENV=GpuSharing-v3 ...   # v3 as v2 (kept observation arrays: docs/notes/2026-12-01-v3-contract.md)

``GC=off`` disables the cyclic garbage collector before the imports (``gc.disable()``): a full
collection (~47 M instructions on ``default``, about one in 10,000 steps) falls inside a
300-step window or not by chance, which moves the per-step figure by ~150 k; compare two trees
with it off (docs/notes/2026-12-02-reset-and-env-layer.md).

At 1,024 GPUs take the baseline at ``N=10`` rather than ``N=0``: the counted steps start with a
reset (~1.5 G instructions there), which ``N=0`` would leave in the difference
(docs/notes/2026-11-29-builder-at-scale.md).

``PYTHONPATH`` picks the tree (two ``git archive`` snapshots built with ``setup.py build_ext
--inplace`` for a before/after pair). The tree and its number of compiled modules go to stderr.
"""

from __future__ import annotations

import gc
import os
import sys

if os.environ.get("GC") == "off":  # (before the imports: see the docstring)
    gc.disable()
from typing import Any

import gymnasium as gym
import numpy as np
import sklearn.tree  # noqa: F401  (imported before counting starts, as the predictor does)

import gpu_sharing_env
from gpu_sharing_env.config import load_scenario
from gpu_sharing_gym.bench.suite import scaled_scenario

print("tree", gpu_sharing_env.__file__, len(gpu_sharing_env.COMPILED), file=sys.stderr)
SIZE = os.environ.get("SIZE", "default")
N = int(os.environ.get("N", "2000"))
W = int(os.environ.get("W", "0"))
ENV = os.environ.get("ENV", "GpuSharing-v1")
cfg = load_scenario("default")
# a scaled GpuSharing-v2 is made as scripts/bench_step_cartpole.py makes it (pruned classes,
# room for every candidate): unpruned, 1,024 GPUs pass max_candidates at the first reset
kw: dict[str, Any] = {}
if SIZE != "default" and ENV in ("GpuSharing-v2", "GpuSharing-v3"):
    kw = {"pruning": "classes", "max_candidates": int(os.environ.get("MAXC", "65536"))}
    if os.environ.get("SCOPE") == "window":  # (the bench's ``v2:1024w``)
        kw["decision_scope"] = "window"
        kw["max_candidates"] = int(os.environ.get("MAXCW", "8192"))
env = gym.make(ENV, scenario=cfg if SIZE == "default" else scaled_scenario(cfg, int(SIZE)), **kw)


def run(k: int, seed0: int) -> None:
    rng = np.random.default_rng(seed0)
    seed = seed0
    _, info = env.reset(seed=seed)
    for _ in range(k):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, te, tr, info = env.step(legal[rng.integers(legal.size)])
        if te or tr:
            seed += 1
            _, info = env.reset(seed=seed)


run(W, 1000)
if N:
    run(N, 0)
