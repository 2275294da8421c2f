"""The one env class against the parallel v0/v1/v2 classes it replaced, side by side.

    python scripts/env_family_check.py --base fb09c5d

loads the env modules of ``--base`` (a commit before the env family: ``gpu_sharing.py``,
``gpu_sharing_v1.py``, ``gpu_sharing_v2.py``) under another package name, on top of this
checkout's simulator and encoders, so only the env layer differs. For each id and settings it
runs the same random masked rollouts through both and compares spaces, observations, masks,
rewards, terminations and infos bit for bit (exit 1 on a difference), then times raw steps of
both, interleaved in repeats (which goes first alternates), and prints new/old steps/s ratios
(median of the repeats). Settings a scenario does not fit (or too many v2 candidates) are
skipped, saying so.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import gpu_sharing_env  # noqa: F401  (registers the ids)
from gpu_sharing_env.envs.candidates import TooManyCandidates
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv

ROOT = Path(__file__).resolve().parents[1]
FILES = ("gpu_sharing", "gpu_sharing_v1", "gpu_sharing_v2")
#: (id, old class, settings) per case.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("v0", "gpu_sharing:GpuSharingEnv", {}),
    ("v0", "gpu_sharing:GpuSharingEnv", {"max_gpus": 32, "window_order": "predicted"}),
    ("v1", "gpu_sharing_v1:GpuSharingEnvV1", {}),
    ("v1", "gpu_sharing_v1:GpuSharingEnvV1", {"migration_slots": 2, "job_history": True}),
    ("v1", "gpu_sharing_v1:GpuSharingEnvV1", {"max_window": 12, "max_options": 12}),
    ("v2", "gpu_sharing_v2:GpuSharingEnvV2", {}),
    ("v2", "gpu_sharing_v2:GpuSharingEnvV2", {"decision_scope": "window"}),
    ("v2", "gpu_sharing_v2:GpuSharingEnvV2", {"mechanisms": {"protection": True}}),
]


def load_base(rev: str, into: Path) -> str:
    """The base commit's env modules as package ``h2base`` (imports rewritten); its name."""
    pkg = into / "h2base"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for f in FILES:
        src = subprocess.run(
            ["git", "show", f"{rev}:gpu_sharing_env/envs/{f}.py"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for g in FILES:
            src = src.replace(f"gpu_sharing_env.envs.{g} import", f"h2base.{g} import")
        (pkg / f"{f}.py").write_text(src)
    sys.path.insert(0, str(into))
    return "h2base"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return bool(a == b) or repr(a) == repr(b)


def _actions(scenario: str, version: str, kw: dict[str, Any], seed: int, steps: int) -> list[int]:
    env = GpuSharingEnv(scenario, interface=version, **kw)
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    out = []
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        a = int(legal[rng.integers(legal.size)]) if rng.random() < 0.9 else int(rng.integers(4))
        out.append(a)
        _, _, term, _, info = env.step(a)
        if term:
            break
    return out


def compare(old: Any, new: GpuSharingEnv, seed: int, actions: list[int]) -> str | None:
    """Where ``old`` and ``new`` first differ on this rollout, or None."""
    if not (
        _same(str(old.action_space), str(new.action_space))
        and old.observation_space == new.observation_space
    ):
        return "spaces"
    a, b = old.reset(seed=seed), new.reset(seed=seed)
    if not (_same(a[0], b[0]) and _same(a[1], b[1])):
        return "reset"
    for i, act in enumerate(actions):
        ra, rb = old.step(act), new.step(act)
        if not all(_same(x, y) for x, y in zip(ra, rb, strict=True)):
            return f"step {i}"
        if not _same(old.action_masks(), new.action_masks()):
            return f"mask {i}"
        if not all(
            old.explain(k) == new.explain(k) for k in (0, 1, 2, 5, 50, len(ra[4]["action_mask"]))
        ):
            return f"explain {i}"
    return None


def agent_rollouts(name: str, old_cls: Any, version: str, steps: int) -> str | None:
    """Where a shipped agent's actions (driven by each env's observations) first differ."""
    from gpu_sharing_env.sim.view import ClusterView
    from gpu_sharing_gym.agents.agent import load_agent

    agent = load_agent(name)
    kw: dict[str, Any] = {"window_order": agent.window_order}
    if version == "v1":
        kw.update(migration_slots=agent.migration_slots, job_history=agent.job_history)
    taken: list[list[Any]] = []
    for env in (old_cls("default", **kw), GpuSharingEnv("default", interface=version, **kw)):
        agent.reset(0)
        obs, info = env.reset(seed=0)
        log: list[Any] = []
        for _ in range(steps):
            a = agent.act(ClusterView(env.sim, env.codec), obs, info["action_mask"])
            obs, r, term, _, info = env.step(a)
            log.append((a, r))
            if term:
                break
        taken.append(log)
    old, new = taken
    if old == new:
        return None
    return f"step {next(i for i, (x, y) in enumerate(zip(old, new)) if x != y)}"


def steps_per_s(env: Any, actions: list[int], seed: int) -> float:
    env.reset(seed=seed)
    t = time.perf_counter()
    for a in actions:
        env.step(a)
    return len(actions) / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="a commit before the env family")
    ap.add_argument("--scenarios", default="default,mig-a100,pai-busy")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--agents", default="ppo_default:v0,ppo:v1,ppo_v1:v1")
    args = ap.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(args.base, Path(tmp))
        for item in filter(None, args.agents.split(",")):
            name, version = item.split(":")
            old_cls = next(
                getattr(importlib.import_module(f"{base}.{m}"), c)
                for v, (m, c), _ in ((v, o.split(":"), k) for v, o, k in CASES)
                if v == version
            )
            where = agent_rollouts(name, old_cls, version, args.steps)
            failed += where is not None
            print(
                f"agent {name} on default ({version}): same actions and rewards: {where or 'yes'}"
            )
        print(f"{'id':4} {'scenario':10} {'settings':42} {'same':6} {'new/old steps/s':>16}")
        for scenario in args.scenarios.split(","):
            for version, old_name, kw in CASES:
                mod, cls = old_name.split(":")
                old_cls = getattr(importlib.import_module(f"{base}.{mod}"), cls)
                seed = 3
                try:
                    acts = _actions(scenario, version, kw, seed, args.steps)
                except (TooManyCandidates, ValueError) as e:  # (settings that do not fit)
                    print(f"{version:4} {scenario:10} {str(kw)[:42]:42} skipped: {e}"[:110])
                    continue
                old, new = old_cls(scenario, **kw), GpuSharingEnv(scenario, interface=version, **kw)
                where = compare(old, new, seed, acts)
                failed += where is not None
                ratios = []
                for r in range(args.repeats):  # (which goes first alternates)
                    pair = (old, new) if r % 2 else (new, old)
                    rates = {id(e): steps_per_s(e, acts, seed) for e in pair}
                    ratios.append(rates[id(new)] / rates[id(old)])
                print(
                    f"{version:4} {scenario:10} {str(kw)[:42]:42} {where or 'yes':6} "
                    f"{float(np.median(ratios)):16.3f}"
                )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
