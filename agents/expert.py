"""Labelled episodes for imitation and expert iteration, in parallel and cached on disk.

An *expert* (a heuristic, or the rollout planner of :mod:`gpu_sharing_gym.agents.planner`) labels every state
of a training episode with the action it would take; the episode follows the expert's actions,
or, in DAgger rounds (Ross et al., AISTATS'11), a student's. Distilling the planner's labels
into the network is expert iteration (Anthony et al., "Thinking Fast and Slow with Deep
Learning and Tree Search", NeurIPS'17): the planner improves on a heuristic by search, the
network learns to act like the planner at the cost of one forward pass.

The planner costs ~10-40 s an episode on `default`, so thousands of labelled episodes take
hours: :func:`label_episodes` runs episodes in ``workers`` processes and keeps every expert
episode in ``cache_dir`` (one compressed ``.npz`` per seed, under a key naming the scenario,
env, expert and wrappers), so an interrupted or repeated run reuses them. Student episodes
depend on the student and are not cached. Episodes run through the same wrappers as training
(:func:`gpu_sharing_gym.agents.envs.make_env`: the expert hint, paired rewards), so observations, masks and
returns are exactly what the agent sees later.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.bc import Demos, discounted_returns
from gpu_sharing_gym.agents.envs import HINT, TRAIN_SEED_MIN, make_env, make_expert, work_conserving
from gpu_sharing_gym.plumbing.interrupt import process_pool

#: Bump when what an episode file holds changes.
CACHE_VERSION = 1
#: Candidates whose rollout values a value-labelled step keeps (``values=True``).
VALUE_K = 8


def training_seeds(n: int, seed: int) -> list[int]:
    """``n`` episode seeds from the training range, deterministic in ``seed`` (the stream
    :func:`gpu_sharing_gym.agents.bc.demonstrations` draws, so v0 recipes label the same episodes as before)."""
    rng = np.random.default_rng(seed)
    return [int(rng.integers(TRAIN_SEED_MIN, 2**31 - 1)) for _ in range(n)]


def cache_key(spec: Mapping[str, Any]) -> str:
    """A short stable name for an episode specification (without its seed)."""
    text = json.dumps({"v": CACHE_VERSION, **spec}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run_episode(job: dict[str, Any]) -> dict[str, Any]:
    """One labelled episode (a worker's unit of work; see :func:`label_episodes`)."""
    import torch as th

    th.set_num_threads(1)
    spec = job["spec"]
    env = make_env(
        spec["scenario"], spec["env_kwargs"], hint=spec["hint"], env_id=spec["env_id"],
        paired=spec["paired"], train_seeds=False,
    )  # fmt: skip
    base: Any = env.unwrapped
    expert = make_expert(spec["expert"], **spec["expert_kwargs"])
    student = None
    if job.get("student") is not None:
        from gpu_sharing_gym.agents.agent import RLAgent

        meta, state = job["student"]
        student = RLAgent(meta, state, deterministic=True)  # the states it is evaluated on
        student.reset(job["seed"])
    rng = np.random.default_rng([job["seed"], 7])
    obs, info = env.reset(seed=job["seed"])
    expert.reset(job["seed"])
    rows: dict[str, list[np.ndarray]] = {}
    masks, actions, rewards = [], [], []
    done = False
    values = bool(spec.get("values"))
    if values:
        from gpu_sharing_gym.agents.planner import RolloutPlanner

        if not isinstance(expert, RolloutPlanner):
            raise ValueError(f"values=True: expert {spec['expert']!r} is not a rollout planner")
        planner = expert
    cand_actions: list[np.ndarray] = []
    cand_scores: list[np.ndarray] = []
    while not done:
        mask = info["action_mask"]
        student_mask = work_conserving(mask) if spec["conserving"] else mask
        view = ClusterView(base.sim, base.codec)
        s_act = None  # the student's action where it drives this step
        if student is not None and rng.random() >= job.get("beta", 0.0):
            s_act = student.predict(obs, student_mask)
        if values and s_act is not None:
            # the student's own action is scored beside the heuristics' (then the base)
            planner.extra = [base.codec.to_decision(base.sim, s_act)]
        a = expert.act(view, obs, mask)
        if values:
            ca = np.full(VALUE_K, -1, dtype=np.int64)
            cs = np.full(VALUE_K, np.nan)
            for i, (d, m) in enumerate((planner.last_scores or [])[:VALUE_K]):
                ca[i], cs[i] = view.action_of(d), m
            cand_actions.append(ca)
            cand_scores.append(cs)
        for k, v in obs.items():
            rows.setdefault(k, []).append(v)
        masks.append(student_mask if student_mask[a] else mask)
        actions.append(a)
        if s_act is not None:
            a = s_act
        obs, r, done, _, info = env.step(a)
        rewards.append(float(r))
    out = {
        "obs": {
            k: np.stack(v).astype(np.float32 if k != HINT else np.bool_) for k, v in rows.items()
        },
        "masks": np.stack(masks).astype(bool),
        "actions": np.asarray(actions, dtype=np.int64),
        "rewards": np.asarray(rewards, dtype=np.float64),
        "metrics": dict(info["metrics"]),
    }
    if values:
        out["cand_actions"] = np.stack(cand_actions)
        out["cand_scores"] = np.stack(cand_scores)
    path = job.get("path")
    if path is not None:
        _save(Path(path), out)
    return out


def _save(path: Path, ep: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + f".tmp{os.getpid()}.npz")
    np.savez_compressed(
        tmp,
        **{f"obs.{k}": v for k, v in ep["obs"].items()},
        masks=np.packbits(ep["masks"], axis=1),
        n_actions=np.int64(ep["masks"].shape[1]),
        actions=ep["actions"],
        rewards=ep["rewards"],
        metrics=np.frombuffer(json.dumps(ep["metrics"]).encode(), dtype=np.uint8),
        **{k: ep[k] for k in ("cand_actions", "cand_scores") if k in ep},
    )
    os.replace(tmp, path)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        with np.load(path) as z:
            n = int(z["n_actions"])
            return {
                "obs": {k[4:]: z[k] for k in z.files if k.startswith("obs.")},
                "masks": np.unpackbits(z["masks"], axis=1, count=n).astype(bool),
                "actions": z["actions"],
                "rewards": z["rewards"],
                "metrics": json.loads(bytes(z["metrics"]).decode()),
                **{k: z[k] for k in ("cand_actions", "cand_scores") if k in z.files},
            }
    except (OSError, ValueError, KeyError, EOFError):
        return None  # unreadable (e.g. a file from a killed run): label it again


def label_episodes(
    scenario: str,
    env_kwargs: Mapping[str, Any],
    expert: str,
    seeds: Sequence[int],
    *,
    gamma: float = 1.0,
    expert_kwargs: Mapping[str, Any] | None = None,
    env_id: str = "GpuSharing-v1",
    hint: str | None = None,
    paired: str | None = None,
    conserving: bool = False,
    student: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
    beta: float = 0.0,
    workers: int = 1,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[int], Any] | None = None,
    values: bool = False,
) -> Demos:
    """Episodes on ``seeds`` labelled by ``expert`` (module doc); ``returns`` are the
    ``gamma``-discounted returns of the rewards the env gave (paired ones with ``paired``).

    Args:
        student: (metadata, state dict) of an agent that drives the episodes (DAgger) with
            probability ``1 - beta`` per step, taking its most likely action (the states it
            reaches when evaluated); None: the expert drives.
        workers: Processes (the data does not depend on it).
        cache_dir: Where expert-driven episodes are kept and looked up.
        values: Keep, for every step, the first action and mean rollout objective of each
            candidate the planner scored (``Demos.cand_actions``, ``cand_scores``; the
            student's own action among them in DAgger rounds), for value-weighted cloning
            (:func:`gpu_sharing_gym.agents.bc.pretrain`, ``value_temp``). The expert must be a
            planner.
    """
    spec = {
        "scenario": scenario,
        "env_kwargs": dict(env_kwargs),
        "expert": expert,
        "expert_kwargs": dict(expert_kwargs or {}),
        "env_id": env_id,
        "hint": hint,
        "paired": paired,
        "conserving": conserving,
    }
    if values:
        spec["values"] = True  # (absent otherwise: earlier caches keep their key)
    folder = None
    if cache_dir is not None and student is None:
        folder = Path(cache_dir) / f"{Path(scenario).stem}-{expert}-{cache_key(spec)}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spec.json").write_text(json.dumps(spec, indent=1, default=str) + "\n")
    episodes: dict[int, dict[str, Any]] = {}
    jobs = []
    for s in seeds:
        path = None if folder is None else folder / f"{s}.npz"
        hit = _load(path) if path is not None and path.is_file() else None
        if hit is not None:
            episodes[s] = hit
            if progress is not None:
                progress(1)
            continue
        job: dict[str, Any] = {"spec": spec, "seed": int(s), "path": path and str(path)}
        if student is not None:
            job["student"] = (dict(student[0]), dict(student[1]))
            job["beta"] = beta
        jobs.append(job)
    # process_pool: Ctrl-C or SIGTERM stops the workers at once (the cache keeps what finished)
    with process_pool(workers) if workers > 1 and len(jobs) > 1 else nullcontext() as pool:
        runner = pool.map if pool is not None else map
        for job, ep in zip(jobs, runner(_run_episode, jobs)):
            episodes[job["seed"]] = ep
            if progress is not None:
                progress(1)
    parts = []
    for s in seeds:
        ep = episodes[s]
        obs = {k: v.astype(np.float32) for k, v in ep["obs"].items()}  # (hints: bool on disk)
        parts.append(
            Demos(obs, ep["masks"], ep["actions"],
                  discounted_returns(ep["rewards"], gamma), [ep["metrics"]],
                  ep.get("cand_actions"), ep.get("cand_scores"))
        )  # fmt: skip
    return Demos.concat(parts)
