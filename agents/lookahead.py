"""Rollout policy improvement: labels better than the expert's, for the agent to learn from.

At each decision of a training episode, a few candidate heuristics (the base one, plain
time-sharing, MPS first-fit, and *packing*: the base heuristic's job time-shared onto the
busiest GPU that takes it) are each tried on a copy of the simulator: the candidate makes this
decision and the next ``horizon`` ones (so that a plan such as "pack small jobs until the
waiting gang fits" can show its worth), then the base heuristic runs the episode to its end.
The first action of the candidate with the best outcome (lowest ``jct_mean_s``, SLO target
first) is the label if it beats the base heuristic's own rollout by a relative ``margin``
(smaller gains are mostly luck of the hidden future, which the agent cannot learn), and the
episode continues with it. This is one
step of policy iteration by rollouts (Bertsekas and Tsitsiklis, *Neuro-Dynamic Programming*,
1996, §6.1; the "expert iteration" of Anthony et al., NeurIPS'17, with the simulator as the
search): the labelled policy is at least as good as the base heuristic on every training
episode. The copies see the episode's hidden future (true durations, later arrivals), which is
what lets the labels improve on the heuristic; the agent itself sees only its observation and
must learn which observable situations favour which candidate. Only training seeds
(>= ``gpu_sharing_gym.agents.envs.TRAIN_SEED_MIN``) are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.evaluation.runner import run_to_end
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.bc import Demos, discounted_returns
from gpu_sharing_gym.agents.envs import HINT, TRAIN_SEED_MIN, make_expert, work_conserving
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.plumbing.interrupt import process_pool

#: Candidate heuristics besides the base one (``"pack"`` is built in, see the module doc).
CANDIDATES = ("time_sharing", "first_fit", "pack")
#: Penalty per unit of SLO shortfall in the rollout objective (seconds): meeting the target
#: comes first.
SLO_PENALTY_S = 1e7


def _objective(m: dict[str, float], slo_target: float) -> float:
    return float(m["jct_mean_s"]) + SLO_PENALTY_S * max(0.0, slo_target - m["slo_attainment"])


class Then(HeuristicPolicy):
    """``first`` for ``k`` decisions, then ``base``."""

    name = "then"

    def __init__(self, first: HeuristicPolicy | None, k: int, base: HeuristicPolicy) -> None:
        self.first, self.k, self.base = first, k, base
        self.n = 0

    def decide(self, view: ClusterView) -> Decision | None:
        pol = self.first if self.first is not None and self.n < self.k else self.base
        d = pol.decide(view)
        self.n += d is not None
        return d


class EnvActions(HeuristicPolicy):
    """``inner`` as the Gymnasium env runs it: its :meth:`~HeuristicPolicy.env_decision`, never
    a decision the action codec cannot encode (Gandiva's migrations). Rollouts for a teacher
    that labels env states use it, so the futures they score are ones the env can reach."""

    name = "env_actions"

    def __init__(self, inner: HeuristicPolicy) -> None:
        self.inner = inner

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)

    def decide(self, view: ClusterView) -> Decision | None:
        return self.inner.env_decision(view)


class Pack(HeuristicPolicy):
    """``inner``'s choice of job, time-shared on the busiest GPU that takes it."""

    name = "pack"

    def __init__(self, inner: HeuristicPolicy) -> None:
        self.inner = inner

    def decide(self, view: ClusterView) -> Decision | None:
        return _pack(view, self.inner.decide(view))


def _pack(view: ClusterView, d: Decision | None) -> Decision | None:
    """``d``'s job, time-shared on the legal GPU with the most residents (lowest index)."""
    if d is None:
        return None
    ts = [i for i, o in enumerate(view.options) if o.mode is SharingMode.TIME_SHARING]
    if not ts:
        return None
    col = view.mask(d.job_id)[:, ts[0]]
    gpus = np.flatnonzero(col)
    if not gpus.size:
        return None
    load = np.asarray(view.n_res)[gpus]
    return Decision(d.job_id, int(gpus[np.argmax(load)]), ts[0])


def _episode(args: tuple[Any, ...]) -> dict[str, Any]:
    scenario, env_kwargs, base_name, ep_seed, conserving, hint, horizon, margin = args
    env = GpuSharingEnv(load_scenario(scenario), **env_kwargs)
    base = make_expert(base_name)
    others: dict[str, HeuristicPolicy] = {n: make_expert(n) for n in CANDIDATES if n != "pack"}
    others["pack"] = Pack(base)
    obs, info = env.reset(seed=ep_seed)
    for p in (base, *others.values()):
        p.reset(ep_seed)
    codec = env.codec
    slo_target = env.cfg.slo_target
    rows: dict[str, list[np.ndarray]] = {}
    masks, actions, rewards = [], [], []
    n_rollouts = changed = 0
    done = False
    while not done:
        sim = env.sim
        mask = info["action_mask"]
        view = ClusterView(sim, codec)
        d_base = base.decide(view)
        a_base = codec.from_decision(sim, d_base)
        # (first action, policy that continues for ``horizon`` decisions), base first
        cands: list[tuple[int, HeuristicPolicy | None]] = [(a_base, None)]
        for p in others.values():
            d = p.decide(view)
            if d is None or all(d.job_id != s.job_id for s in sim.window_jobs()):
                continue  # waits and migrations are not candidates
            a = codec.from_decision(sim, d)
            if mask[a]:
                cands.append((a, p))
        student_mask = work_conserving(mask) if conserving else mask
        label = a_base
        if len({a for a, _ in cands}) > 1 or horizon > 0:
            best = np.inf
            base_score = np.inf
            for a, cand in cands:
                s2 = sim.copy()
                dec = codec.to_decision(s2, a)
                if dec is None:
                    s2.advance()
                else:
                    s2.apply(dec)
                    if not s2.needs_decision():
                        s2.advance()
                score = _objective(run_to_end(Then(cand, horizon, base), s2), slo_target)
                n_rollouts += 1
                if cand is None:
                    base_score = score
                if score < best - 1e-9:  # ties keep the base action (listed first)
                    best, label = score, a
            if best > base_score * (1.0 - margin):
                label = a_base  # not clearly better: keep the base heuristic's action
            changed += label != a_base
        if hint:
            obs = {**obs, HINT: np.zeros(mask.shape[0], dtype=np.float32)}
            obs[HINT][a_base] = 1.0
        for k, v in obs.items():
            rows.setdefault(k, []).append(v)
        masks.append(student_mask if student_mask[label] else mask)
        actions.append(label)
        obs, r, done, _, info = env.step(label)
        rewards.append(float(r))
    return {
        "obs": {k: np.stack(v) for k, v in rows.items()},
        "masks": np.stack(masks).astype(bool),
        "actions": np.asarray(actions, dtype=np.int64),
        "rewards": np.asarray(rewards),
        "metrics": info["metrics"],
        "rollouts": n_rollouts,
        "changed": changed,
    }


def lookahead_demonstrations(
    scenario: str,
    env_kwargs: dict[str, Any],
    base: str,
    episodes: int,
    gamma: float,
    seed: int = 0,
    workers: int = 1,
    conserving: bool = False,
    hint: bool = False,
    progress: Any = None,
    horizon: int = 8,
    margin: float = 0.0,
) -> tuple[Demos, dict[str, float]]:
    """Rollout-improved demonstrations on ``episodes`` training seeds (in ``workers``
    processes; the result does not depend on ``workers``)."""
    rng = np.random.default_rng(seed)
    seeds: Sequence[int] = [int(rng.integers(TRAIN_SEED_MIN, 2**31 - 1)) for _ in range(episodes)]
    jobs = [(scenario, dict(env_kwargs), base, s, conserving, hint, horizon, margin) for s in seeds]
    results: list[dict[str, Any]] = []
    # process_pool: Ctrl-C or SIGTERM stops the workers at once
    with process_pool(workers) if workers > 1 else nullcontext() as pool:
        for res in (pool.map if pool is not None else map)(_episode, jobs):
            results.append(res)
            if progress is not None:
                progress(1)
    demos = Demos.concat(
        [
            Demos(r["obs"], r["masks"], r["actions"],
                  discounted_returns(r["rewards"], gamma), [r["metrics"]])
            for r in results
        ]
    )  # fmt: skip
    n = len(demos)
    stats = {
        "lookahead_episodes": float(episodes),
        "lookahead_rollouts": float(sum(r["rollouts"] for r in results)),
        "lookahead_changed_share": float(sum(r["changed"] for r in results)) / max(1, n),
        "lookahead_train_jct_mean_s": float(np.mean([r["metrics"]["jct_mean_s"] for r in results])),
    }
    return demos, stats
