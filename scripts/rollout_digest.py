"""A digest of ``GpuSharing-v2`` (or ``-v1``) rollouts, to check that a speed change keeps
every bit.

``GpuSharing-v2`` (the default): three episodes each of ``default``, ``mig-a100`` and
``default-x2`` (every candidate), ``pai-busy`` (``pruning="classes"``) and ``default`` with
suspensions (``suspend=True``); ``ENV=v3``, the same cases through ``GpuSharing-v3``, its int8
``candidate_mask`` hashed as v2's float32, so its digests are v2's. ``ENV=v1``:
``GpuSharing-v1``, three episodes each of ``default``, ``mig-a100``, ``default-x2`` and
``muxflow-t4``, without and with a migration slot (``migration_slots=1``: its rows and
masks), ``default`` with ``job_history=True`` (the ``history`` and ``nodes`` keys) and
``pai-busy`` (226 GPUs: the encoder's incremental resident table). Each
cut at ``CUT`` steps (default 300), random legal actions from a seeded generator; every
observation, mask, reward, end flag, the final metrics and the clock are hashed. Run it before
and after a change, compiled and with ``GSG_PURE_PYTHON=1``: the digests must be equal. Prints
one JSON line::

    python scripts/rollout_digest.py
    GSG_PURE_PYTHON=1 python scripts/rollout_digest.py
    ENV=v1 python scripts/rollout_digest.py
    ENV=v3 python scripts/rollout_digest.py   # == v2's digests, but for "env"

``PAST=per_episode`` (or ``shared``) sets every synthetic scenario's
``workload.offline.params.past``: ``PAST=per_episode`` gives workload version 2's episodes
(the digests recorded before version 3).

``SCALED=1024`` (v2, v3) adds one case: ``default`` scaled to that many GPUs
(``gpu_sharing_gym.bench.suite.scaled_scenario``) with ``pruning="classes"``,
``decision_scope="window"`` and ``max_candidates=65536``, the fleet of the bench's ``v3:1024w``
(key ``default@1024w``)::

    SCALED=1024 ENV=v3 CUT=150 python scripts/rollout_digest.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

import gymnasium as gym
import numpy as np

import gpu_sharing_env
from gpu_sharing_env.config import load_scenario
from gpu_sharing_gym.bench.suite import scaled_scenario

CUT = int(os.environ.get("CUT", "300"))
CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("default", {}),
    ("mig-a100", {"max_candidates": 65536}),
    ("default-x2", {"max_candidates": 65536}),
    ("pai-busy", {"pruning": "classes", "max_candidates": 65536}),
    ("default", {"suspend": True}),
)
CASES_V1: tuple[tuple[str, dict[str, Any]], ...] = (
    *((name, kw) for name in ("default", "mig-a100", "default-x2", "muxflow-t4")
      for kw in ({}, {"migration_slots": 1})),
    ("default", {"job_history": True}),
    ("pai-busy", {}),
)  # fmt: skip
VERSION = os.environ.get("ENV", "v2")
PAST = os.environ.get("PAST")
SCALED = int(os.environ.get("SCALED", "0"))


def scenario(name: str) -> Any:
    """The scenario ``name``, with ``PAST`` (when set) as its synthetic workload's ``past``."""
    cfg = load_scenario(name)
    if not PAST:
        return cfg
    off = cfg.workload.offline
    off = dataclasses.replace(off, params={**off.params, "past": PAST})
    return dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, offline=off))


def _hash(h: Any, obs: dict[str, np.ndarray]) -> None:
    for k in sorted(obs):
        a = obs[k]
        if k == "candidate_mask" and VERSION == "v3":
            a = a.astype(np.float32)  # (v2's dtype: v3's digest is v2's)
        h.update(a.tobytes())


def digest(name: str, kw: dict[str, Any], gpus: int = 0) -> str:
    """The digest of three episodes of scenario ``name`` (scaled to ``gpus`` GPUs where
    non-zero) made with ``kw``."""
    h = hashlib.sha256()
    cfg = scenario(name) if not gpus else scaled_scenario(scenario(name), gpus)
    env = gym.make("GpuSharing-" + VERSION, scenario=cfg, **kw).unwrapped
    for ep in range(3):
        rng = np.random.default_rng(100 + ep)
        obs, info = env.reset(seed=ep)
        _hash(h, obs)
        h.update(info["action_mask"].tobytes())
        for _ in range(CUT):
            legal = np.flatnonzero(info["action_mask"].view(bool))
            obs, r, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
            _hash(h, obs)
            h.update(info["action_mask"].tobytes())
            h.update(np.float64(r).tobytes())
            h.update(bytes([te, tr]))
            if te or tr:
                break
        m = env.sim.metrics()
        h.update(repr(sorted((k, v) for k, v in m.items() if isinstance(v, (int, float)))).encode())
        h.update(repr(env.sim.now).encode())
    env.close()
    return h.hexdigest()[:16]


def main() -> None:
    out: dict[str, Any] = {"env": VERSION, "compiled": len(gpu_sharing_env.COMPILED)}
    for name, kw in CASES_V1 if VERSION == "v1" else CASES:
        # (v2's keys name only the arguments that change the moves, so the older cases keep
        # their keys)
        named = kw if VERSION == "v1" else {k: v for k, v in kw.items() if k == "suspend"}
        key = name + "".join(f",{k}={v}" for k, v in named.items())
        out[key] = digest(name, kw)
    if SCALED and VERSION != "v1":
        kw = {"pruning": "classes", "decision_scope": "window", "max_candidates": 65536}
        out[f"default@{SCALED}w"] = digest("default", kw, SCALED)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
