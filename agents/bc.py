"""Behaviour cloning: start an agent from a baseline's decisions before reinforcement learning.

:func:`demonstrations` runs a heuristic from ``baselines`` through the env itself (its
decisions become env actions through the env's codec, so the episodes are exactly the env's)
on training seeds, and records observations, masks, actions and discounted returns.
:func:`pretrain` fits the policy to the actions (masked cross-entropy) and the value head to
the returns, so PPO starts from the expert with a critic that already knows its returns (a
fresh critic's advantages would otherwise pull the policy off the expert in the first updates).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from torch.nn import functional as F

from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.envs import HINT, TRAIN_SEED_MIN, make_expert, work_conserving


@dataclass
class Demos:
    """Stacked demonstrations (one row per env step)."""

    obs: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episode_metrics: list[dict[str, float]]
    #: Value labels (optional): per step, up to K candidate actions (-1: none) and their
    #: mean rollout objective (lower is better; NaN: none), from a planner expert.
    cand_actions: np.ndarray | None = None
    cand_scores: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    @classmethod
    def concat(cls, parts: list[Demos]) -> Demos:
        """One data set of several (rows in order)."""
        return cls(
            obs={k: np.concatenate([d.obs[k] for d in parts]) for k in parts[0].obs},
            masks=np.concatenate([d.masks for d in parts]),
            actions=np.concatenate([d.actions for d in parts]),
            returns=np.concatenate([d.returns for d in parts]),
            episode_metrics=[m for d in parts for m in d.episode_metrics],
            cand_actions=_cat([d.cand_actions for d in parts]),
            cand_scores=_cat([d.cand_scores for d in parts]),
        )


def _cat(parts: list[np.ndarray | None]) -> np.ndarray | None:
    """The parts' rows stacked, or None unless every part has them."""
    if any(p is None for p in parts):
        return None
    return np.concatenate([p for p in parts if p is not None])


def discounted_returns(rewards: Any, gamma: float) -> np.ndarray:
    """Discounted return from every step of one episode (float32)."""
    out = np.empty(len(rewards), dtype=np.float32)
    g = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        g = float(rewards[i]) + gamma * g
        out[i] = g
    return out


def demonstrations(
    env: GpuSharingEnv,
    expert: str,
    episodes: int,
    gamma: float,
    seed: int = 0,
    progress: Callable[[int], Any] | None = None,
    student: Callable[[dict[str, np.ndarray], np.ndarray], int] | None = None,
    beta: float = 0.0,
    conserving: bool = False,
    hint: bool | str | None = False,
) -> Demos:
    """Record ``episodes`` episodes labelled by the heuristic ``expert`` on training seeds.

    With a ``student`` (DAgger, Ross et al., AISTATS'11), the student's action is the one
    executed with probability ``1 - beta`` while the expert's stays the label, so the data
    covers the states the student itself reaches. ``returns`` are then the executed
    trajectory's. With ``conserving``, recorded masks hide *wait* when a placement is legal
    (as the work-conserving agent's do), except where the expert itself waited. With
    ``hint``, observations carry a heuristic's action as ``obs["hint"]`` (see
    :class:`gpu_sharing_gym.agents.envs.ExpertHint`): the heuristic named by ``hint``, or the expert's own
    action for ``hint=True`` (a planner expert labels, the cheap heuristic it improves on
    hints, as at training and evaluation time).
    """
    policy = make_expert(expert)
    hinter = make_expert(hint) if isinstance(hint, str) and hint and hint != expert else None
    rng = np.random.default_rng(seed)
    obs_rows: dict[str, list[np.ndarray]] = {}
    masks, actions, returns = [], [], []
    metrics: list[dict[str, float]] = []
    for _ in range(episodes):
        ep_seed = int(rng.integers(TRAIN_SEED_MIN, 2**31 - 1))
        obs, info = env.reset(seed=ep_seed)
        policy.reset(ep_seed)
        if hinter is not None:
            hinter.reset(ep_seed)
        rewards: list[float] = []
        done = False
        while not done:
            mask = info["action_mask"]
            a = policy.act(ClusterView(env.sim, env.codec), obs, mask)
            if hint:
                h = a if hinter is None else hinter.act(ClusterView(env.sim, env.codec), obs, mask)
                obs = {**obs, HINT: np.zeros(mask.shape[0], dtype=np.float32)}
                obs[HINT][h] = 1.0
            for k, v in obs.items():
                obs_rows.setdefault(k, []).append(v)
            student_mask = work_conserving(mask) if conserving else mask
            masks.append(student_mask if student_mask[a] else mask)
            actions.append(a)
            if student is not None and rng.random() >= beta:
                a = student(obs, student_mask)
            obs, r, done, _, info = env.step(a)
            rewards.append(float(r))
        returns.append(discounted_returns(rewards, gamma))
        metrics.append(info["metrics"])
        if progress is not None:
            progress(1)
    return Demos(
        obs={k: np.stack(v) for k, v in obs_rows.items()},
        masks=np.stack(masks).astype(bool),
        actions=np.asarray(actions, dtype=np.int64),
        returns=np.concatenate(returns).astype(np.float32),
        episode_metrics=metrics,
    )


def _masked_dist(policy: Any, obs: dict[str, th.Tensor], masks: th.Tensor) -> tuple[Any, th.Tensor]:
    """The policy's masked action distribution for a minibatch, and the critic's latent."""
    latent_pi, latent_vf = policy.mlp_extractor(policy.extract_features(obs))
    dist = policy._get_action_dist_from_latent(latent_pi)
    dist.apply_masking(masks)
    return dist, latent_vf


def pretrain(
    policy: Any,
    demos: Demos,
    epochs: int,
    lr: float,
    batch_size: int = 256,
    vf_coef: float = 0.5,
    seed: int = 0,
    log: Callable[[int, float, float, float], Any] | None = None,
    value_scale: float = 1.0,
    value_temp: float | None = None,
) -> dict[str, float]:
    """Fit ``policy`` (an SB3 maskable actor-critic policy) to the demonstrations: the
    negative log-likelihood of the expert's actions under the policy's own masked action
    distribution (a masked cross-entropy; for the two-level distribution of
    :mod:`gpu_sharing_gym.agents.option_policy`, of the wait decision and of the placement), and the value head
    to ``value_scale`` times the returns.

    With ``value_temp`` and value labels in ``demos`` (a planner expert's candidates and
    their rollout objectives), the policy is fitted to a soft target instead of the expert's
    argmax: candidate ``i`` weighs ``exp(-(s_i - s_min) / (value_temp * |s_min|))`` (a
    temperature relative to the step's best objective), so a near-tie is not a label and a
    decision that matters weighs as much as the gap says (:func:`value_targets`).

    Returns the final epoch's mean losses and the expert-action accuracy (the distribution's
    mode against the label).
    """
    gen = th.Generator().manual_seed(seed)
    opt = th.optim.Adam(policy.parameters(), lr=lr)
    n = len(demos)
    obs_t = {k: th.as_tensor(v) for k, v in demos.obs.items()}
    masks_t = th.as_tensor(demos.masks)
    if value_temp is not None and demos.cand_actions is not None:
        tgt_a, tgt_w = value_targets(demos, value_temp)
    else:
        tgt_a, tgt_w = demos.actions[:, None], np.ones((n, 1), dtype=np.float32)
    tgt_a_t, tgt_w_t = th.as_tensor(tgt_a), th.as_tensor(tgt_w)
    acts_t = th.as_tensor(demos.actions)
    ret_t = th.as_tensor(demos.returns * value_scale, dtype=th.float32)
    policy.set_training_mode(True)
    out: dict[str, float] = {}
    for epoch in range(epochs):
        perm = th.randperm(n, generator=gen)
        sums = np.zeros(3)
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            obs = {k: v[idx] for k, v in obs_t.items()}
            dist, latent_vf = _masked_dist(policy, obs, masks_t[idx])
            a_k, w_k = tgt_a_t[idx], tgt_w_t[idx]
            logp = th.stack([dist.log_prob(a_k[:, k]) for k in range(a_k.shape[1])], dim=1)
            pi_loss = -(w_k * logp).sum(dim=1).mean()
            v_loss = F.mse_loss(policy.value_net(latent_vf).squeeze(-1), ret_t[idx])
            loss = pi_loss + vf_coef * v_loss
            opt.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            with th.no_grad():
                acc = (dist.mode() == acts_t[idx]).float().mean().item()
            sums += np.array([pi_loss.item(), v_loss.item(), acc]) * len(idx)
        pi, vf, acc = sums / n
        out = {"bc_policy_loss": pi, "bc_value_loss": vf, "bc_accuracy": acc}
        if log is not None:
            log(epoch, pi, vf, acc)
    policy.set_training_mode(False)
    return out


def value_targets(demos: Demos, temp: float) -> tuple[np.ndarray, np.ndarray]:
    """Soft targets from value labels: (actions, weights), each ``(n, K)``; weights sum to 1
    per row. A candidate outside the step's recorded mask, or a padding slot, gets weight 0
    (and the label's action, so its log-probability is finite); a step without scored
    candidates keeps its label."""
    assert demos.cand_actions is not None and demos.cand_scores is not None
    acts = demos.cand_actions.copy()
    scores = demos.cand_scores
    n = acts.shape[0]
    rows = np.arange(n)[:, None]
    ok = (acts >= 0) & np.isfinite(scores)
    ok &= demos.masks[rows, np.where(acts >= 0, acts, 0)]
    best = np.where(ok, scores, np.inf).min(axis=1, keepdims=True)
    scale = temp * np.maximum(np.abs(best), 1e-9)
    with np.errstate(invalid="ignore", over="ignore"):
        logits = np.where(ok, -(scores - best) / scale, -np.inf)
    w = np.where(ok, np.exp(logits), 0.0)
    total = w.sum(axis=1, keepdims=True)
    none = total[:, 0] <= 0  # nothing scored here: the label
    w[none] = 0.0
    w[none, 0] = 1.0
    acts[none, 0] = demos.actions[none]
    w /= w.sum(axis=1, keepdims=True)
    acts = np.where(w > 0, acts, demos.actions[:, None])
    return acts.astype(np.int64), w.astype(np.float32)


def tie_parameters(dst: th.nn.Module, src: th.nn.Module) -> None:
    """Make every parameter of ``dst`` the very tensor of ``src`` with the same name (two
    policies of one set-encoding network built for different layouts: one set of weights)."""
    shared = dict(src.named_parameters())
    for mod_name, mod in dst.named_modules():
        for name, p in list(mod._parameters.items()):
            if p is not None:
                mod._parameters[name] = shared[f"{mod_name}.{name}" if mod_name else name]


def pretrain_layouts(
    policies: list[Any],
    parts: list[Demos],
    epochs: int,
    lr: float,
    batch_size: int = 256,
    seed: int = 0,
    log: Callable[[int, list[tuple[float, float]]], Any] | None = None,
) -> list[tuple[float, float]]:
    """Fit one set of weights to demonstrations from several layouts (cluster sizes, windows,
    option sets): ``parts[i]`` is fitted through ``policies[i]``, a policy built for that
    layout (:meth:`gpu_sharing_gym.agents.agent.RLAgent.policy_for`). The policies' parameters
    are tied to the first's, and each epoch visits every part's minibatches in one shuffled
    order, so no scenario's steps come last. Only the policy is fitted (masked cross-entropy
    of the labels, as :func:`pretrain`); the critic is left as it is. ``obs["hint"]`` may be
    stored as bool (a 10,000-wide one-hot per step at 226 GPUs); it is cast per minibatch.

    Returns each part's (loss, accuracy) of the last epoch; ``policies[0].state_dict()`` holds
    the result.
    """
    for pol in policies[1:]:
        tie_parameters(pol, policies[0])
    params = list(policies[0].parameters())
    opt = th.optim.Adam(params, lr=lr)
    rng = np.random.default_rng(seed)
    th.manual_seed(seed)
    tensors = [
        ({k: th.as_tensor(v) for k, v in d.obs.items()}, th.as_tensor(d.masks), th.as_tensor(d.actions))
        for d in parts
    ]  # fmt: skip
    for pol in policies:
        pol.set_training_mode(True)
    out: list[tuple[float, float]] = []
    for epoch in range(epochs):
        batches = [
            (j, b)
            for j, d in enumerate(parts)
            for b in np.array_split(rng.permutation(len(d)), max(1, len(d) // batch_size))
        ]
        sums = np.zeros((len(parts), 3))
        for bi in rng.permutation(len(batches)):
            j, idx = batches[bi]
            obs_t, masks_t, acts_t = tensors[j]
            it = th.as_tensor(idx)
            obs = {k: v[it].float() if k == HINT else v[it] for k, v in obs_t.items()}
            dist, _ = _masked_dist(policies[j], obs, masks_t[it])
            loss = -dist.log_prob(acts_t[it]).mean()
            opt.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            with th.no_grad():
                acc = (dist.mode() == acts_t[it]).float().mean().item()
            sums[j] += [loss.item() * len(idx), acc * len(idx), len(idx)]
        out = [(s[0] / s[2], s[1] / s[2]) for s in sums]
        if log is not None:
            log(epoch, out)
    for pol in policies:
        pol.set_training_mode(False)
    return out
