"""A policy over candidates (issue 53, item 3): one shared-weight network scores every legal
(job, GPU, option) candidate from its own features and a pooled cluster context, so its cost
grows with the legal candidates and its weights fit any cluster, window and option set.

**Candidate features.** For a candidate ``(slot, gpu, option)`` the scorer reads

* the job: its ``jobs`` row of the ``GpuSharing-v1`` observation (what the view gives a
  heuristic: size, estimate, predicted duration and its rank, wait, ...) and, with
  ``job_history=True``, its ``history`` row (the recurring group's finished runs, their mean
  and spread, its period: ``ClusterView.group_stats``);
* the target GPU: its ``gpus`` row (type, free memory/SM/MIG slices, residents, their
  guarantee count, online load, offline demand, time until it frees), with two node features
  (GPUs on its machine and how many of them are empty), from the ``nodes`` key;
* the pair: its ``pairs`` row (legal, solo speed, predicted share, rate and duration, fits in
  memory), and whether the gang would stay on the target's machine (the job's legal GPUs from
  the target on the same node, against the gang's size);
* the option: its ``options`` row, and a GPU × option product term;
* optionally (``rule_features``), each rule's choice *as an input*: for every rule of
  :data:`RULES` (``obs["rules"]``, :class:`RuleChoices`), whether it places the same job, on
  the same GPU, or takes exactly this action. A rule's choice is never a target and never
  added to the scores with a gain (no residual hint): the network learns from the reward alone
  how much each rule's choice is worth where.

**Scoring**::

    ctx    = MLP[mean, max of GPU rows; mean, max of job rows; MLP(global)]
    h_c    = relu(A h_job + B h_gpu + C h_opt + D x_c + E ctx + (U h_gpu) ⊙ (V h_opt))
    score  = MLP(h_c)

``h_job``, ``h_gpu``, ``h_opt`` are the rows' shared encoders' outputs; ``x_c`` the candidate's
own features. *Wait* is scored from the context and the pooled candidate embeddings (the
two-level wait-or-place distribution of :mod:`gpu_sharing_gym.agents.option_policy`), the value
from a critic trunk of its own (GPU and job rows, the light critic). Only the legal candidates
are embedded (the action mask picks them per batch; without a mask every placement is), so
no weight's shape depends on the number of GPUs, window slots or options: a checkpoint trained
on ``default`` runs zero-shot on ``pai-busy`` (tested).

``RuleAgreement`` logs, over training, how often the agent's action is each rule's
(``rules/agree_<name>``), from the rollout buffer's ``rules`` observations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from gpu_sharing_env.envs.observation import JOB_FEATURES, LOG_GANG_SCALE
from gpu_sharing_env.envs.observation_v1 import (
    GLOBAL_FEATURES_V1,
    GPU_FEATURES_V1,
    HISTORY_FEATURES,
    KEYS_V1,
    OPTION_FEATURES,
    PAIR_FEATURES,
    layout_v1_columns,
)
from gpu_sharing_gym.agents.envs import (  # (re-exported: they were defined here)
    RULE_INPUTS,
    RULES,
    RULES_KEY,
    RuleChoices,
    rule_actions,
    split_rule_inputs,
)
from gpu_sharing_gym.agents.option_policy import (
    OptionActorCriticPolicy,
    WaitOrPlace,
    _mlp,
    _pool,
    _Trunk,
)
from gpu_sharing_gym.agents.policy import CandidateScoring

#: Keys the candidate network reads, in the order its features extractor concatenates them.
CANDIDATE_KEYS = (*KEYS_V1, "history", "nodes", RULES_KEY)
#: Per-GPU node features: GPUs on the machine, empty ones among them (divided by this).
NODE_SCALE = 8.0
_NEG = -1e8
_RESIDENTS = GPU_FEATURES_V1.index("residents")
_READY = GPU_FEATURES_V1.index("ready")
_GANG = JOB_FEATURES.index("gang")
#: The one global feature that depends on the padding (real GPUs over padded slots): left out.
_PADDING_SHARE = GLOBAL_FEATURES_V1.index("gpus_present")


class RuleAgreement(BaseCallback):
    """Logs ``rules/agree_<rule>``: the share of the last rollout's actions equal to each
    rule's (read from the rollout buffer's ``rules`` observations), and ``rules/agree_any``
    (equal to at least one) and ``rules/wait``, the agent's share of waits."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self.names = list(names)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buf: Any = self.model.rollout_buffer  # type: ignore[attr-defined]
        rules = np.asarray(buf.observations[RULES_KEY])  # steps, envs, rules
        acts = np.asarray(buf.actions).reshape(rules.shape[:2])
        same = rules == acts[..., None]
        for i, n in enumerate(self.names):
            self.logger.record(f"rules/agree_{n}", float(same[..., i].mean()))
        self.logger.record("rules/agree_any", float(same.any(-1).mean()))
        self.logger.record("rules/wait", float((acts == 0).mean()))


class CandidateExtractor(BaseFeaturesExtractor):
    """Concatenates the keys of :data:`CANDIDATE_KEYS` the observation has (the net splits)."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        layout_v1_columns(observation_space)
        self.keys = tuple(k for k in CANDIDATE_KEYS if k in observation_space.spaces)
        space: Any = observation_space
        super().__init__(
            observation_space, features_dim=sum(int(space[k].shape[0]) for k in self.keys)
        )

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        return th.cat([observations[k].float() for k in self.keys], dim=1)


class CandidateScorer(CandidateScoring):
    """``mlp_extractor`` of :class:`CandidateActorCriticPolicy`: (raw scores: wait then every
    placement, value latent) from the flat features (module doc)."""

    def __init__(
        self,
        sizes: Mapping[str, int],
        max_gpus: int,
        window: int,
        n_options: int,
        job_cols: int,
        hidden: int = 64,
        n_layers: int = 2,
        cand_hidden: int = 64,
        rule_features: bool = True,
    ) -> None:
        super().__init__()
        self.g, self.w, self.o, self.job_cols = max_gpus, window, n_options, job_cols
        self.keys = tuple(sizes)
        self.bounds = np.cumsum([0, *sizes.values()]).tolist()
        self.history = "history" in sizes
        self.n_rules = int(sizes.get(RULES_KEY, 0)) if rule_features else 0
        self.latent_dim_pi = 1 + window * max_gpus * n_options
        self.latent_dim_vf = hidden
        n_hist = len(HISTORY_FEATURES) if self.history else 0
        self.gpu = _mlp(len(GPU_FEATURES_V1) + 2, hidden, n_layers)
        self.job = _mlp(job_cols + n_hist, hidden, n_layers)
        self.glob = _mlp(len(GLOBAL_FEATURES_V1), hidden, 1)
        self.opt = _mlp(len(OPTION_FEATURES), hidden, 1)
        self.ctx = _mlp(5 * hidden, hidden, 1)
        n_x = len(PAIR_FEATURES) + 2 + 3 * self.n_rules
        self.c_job = nn.Linear(hidden, cand_hidden)
        self.c_gpu = nn.Linear(hidden, cand_hidden, bias=False)
        self.c_opt = nn.Linear(hidden, cand_hidden, bias=False)
        self.c_ctx = nn.Linear(hidden, cand_hidden, bias=False)
        self.c_x = nn.Linear(n_x, cand_hidden, bias=False)
        self.u_gpu = nn.Linear(hidden, cand_hidden, bias=False)
        self.u_opt = nn.Linear(hidden, cand_hidden, bias=False)
        self.score = nn.Sequential(
            nn.Linear(cand_hidden, cand_hidden), nn.ReLU(), nn.Linear(cand_hidden, 1)
        )
        self.wait = nn.Sequential(
            _mlp(hidden + 2 * cand_hidden + self.n_rules, hidden, 1), nn.Linear(hidden, 1)
        )
        self.critic = _Trunk(hidden, n_layers, pairs=False, job_cols=job_cols)
        self.value = _mlp(5 * hidden, hidden, 1)

    # ------------------------------------------------------------------ tables
    def tables(self, x: th.Tensor) -> dict[str, th.Tensor]:
        """The flat features split into their tables (``gpus_present``, the padding's share,
        zeroed: nothing the network reads depends on the padding)."""
        b, s = x.shape[0], self.bounds
        t = {k: x[:, s[i] : s[i + 1]] for i, k in enumerate(self.keys)}
        g, w, o = self.g, self.w, self.o
        keep = th.ones(len(GLOBAL_FEATURES_V1), dtype=x.dtype)
        keep[_PADDING_SHARE] = 0.0
        t["global"] = t["global"] * keep
        t["gpus"] = t["gpus"].reshape(b, g, len(GPU_FEATURES_V1))
        t["jobs"] = t["jobs"].reshape(b, w, self.job_cols)
        t["options"] = t["options"].reshape(b, o, len(OPTION_FEATURES))
        t["pairs"] = t["pairs"].reshape(b, w, g, len(PAIR_FEATURES))
        if self.history:
            t["history"] = t["history"].reshape(b, w, len(HISTORY_FEATURES))
        return t

    def _nodes(self, t: Mapping[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
        """(node id per GPU [B,G] (0: padding, or no node table: every GPU its own node), which
        GPUs share a machine [B,G,G])."""
        gpus = t["gpus"]
        present = gpus[..., 0] > 0
        if "nodes" in t:
            node = t["nodes"]
        else:  # no node table: each GPU its own machine
            node = th.arange(1, self.g + 1, dtype=gpus.dtype).expand(gpus.shape[0], -1)
            node = node * present
        same = (node[:, :, None] == node[:, None, :]) & present[:, :, None] & present[:, None, :]
        return node, same

    def _encode(
        self, t: Mapping[str, th.Tensor], same: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """(GPU rows, job rows, option rows, context)."""
        gpus, jobs = t["gpus"], t["jobs"]
        empty = (gpus[..., _RESIDENTS] <= 0) & (gpus[..., _READY] > 0) & (gpus[..., 0] > 0)
        sf = same.to(gpus.dtype)
        node_feats = th.stack(
            [sf.sum(2) / NODE_SCALE, (sf * empty[:, None, :]).sum(2) / NODE_SCALE], dim=-1
        ).clamp(max=1.0)
        hg = self.gpu(th.cat([gpus, node_feats], dim=-1))
        job_in = th.cat([jobs, t["history"]], dim=-1) if self.history else jobs
        hj = self.job(job_in)
        g_mean, g_max = _pool(hg, gpus[..., 0], 1)
        j_mean, j_max = _pool(hj, jobs[..., 0], 1)
        ctx = self.ctx(th.cat([g_mean, g_max, j_mean, j_max, self.glob(t["global"])], dim=1))
        return hg, hj, self.opt(t["options"]), ctx

    def _candidate_x(
        self,
        t: Mapping[str, th.Tensor],
        node: th.Tensor,
        brow: th.Tensor,
        slot: th.Tensor,
        gpu: th.Tensor,
        act: th.Tensor,
    ) -> th.Tensor:
        """The candidates' own features [N, n_x]: pair row, gang-on-one-node, rule matches."""
        g = self.g
        pairs = t["pairs"]
        x_pair = pairs[brow, slot, gpu]
        # the gang takes its first ``n`` legal GPUs from the target: does the target's node
        # hold ``n`` of them?
        gang = t["jobs"][brow, slot, _GANG]
        n = th.round(th.exp2(gang * LOG_GANG_SCALE))
        legal = pairs[brow, slot, :, 0] > 0  # N,G
        after = th.arange(g)[None, :] >= gpu[:, None]
        node_n = node[brow]  # N,G
        on_node = legal & after & (node_n == node_n.gather(1, gpu[:, None]))
        cnt = on_node.sum(1).to(x_pair.dtype)
        feats = [x_pair, (cnt >= n).to(x_pair.dtype)[:, None], (cnt / n).clamp(max=1.0)[:, None]]
        if self.n_rules:
            r = t[RULES_KEY][brow].round().long()  # N,R
            place = r > 0
            r1 = (r - 1).clamp(min=0)
            r_slot = th.div(r1, g * self.o, rounding_mode="floor")
            r_gpu = th.div(r1 - r_slot * (g * self.o), self.o, rounding_mode="floor")
            feats += [
                (place & (r_slot == slot[:, None])).to(x_pair.dtype),
                (place & (r_gpu == gpu[:, None])).to(x_pair.dtype),
                (r == (act + 1)[:, None]).to(x_pair.dtype),
            ]
        return th.cat(feats, dim=1)

    def _legal_all(self, b: int) -> tuple[th.Tensor, ...]:
        """Every placement's (flat, batch row, slot, GPU, option): the dense path."""
        old = self._mask
        self._mask = th.ones(b, self.latent_dim_pi, dtype=th.bool)
        try:
            return self._legal(self.g, self.o)
        finally:
            self._mask = old

    # ------------------------------------------------------------------ heads
    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        t = self.tables(features)
        b = features.shape[0]
        node, same = self._nodes(t)
        hg, hj, ho, ctx = self._encode(t, same)
        mask = self._mask
        if mask is None or mask.shape[0] != b:
            flat, brow, slot, gpu, opt = self._legal_all(b)
        else:
            flat, brow, slot, gpu, opt = self._legal(self.g, self.o)
        x = self._candidate_x(t, node, brow, slot, gpu, flat - brow * (self.latent_dim_pi - 1))
        hg_c = hg[brow, gpu]
        ho_c = ho[brow, opt]
        h = th.relu(
            self.c_job(hj[brow, slot])
            + self.c_gpu(hg_c)
            + self.c_opt(ho_c)
            + self.c_ctx(ctx)[brow]
            + self.c_x(x)
            + self.u_gpu(hg_c) * self.u_opt(ho_c)
        )
        scores = self.score(h).squeeze(-1)
        n_place = self.latent_dim_pi - 1
        place = th.full((b * n_place,), _NEG, dtype=scores.dtype)
        place = place.index_copy(0, flat, scores).reshape(b, n_place)
        ch = h.shape[1]
        count = th.zeros(b, 1, dtype=h.dtype).index_add(0, brow, th.ones(len(brow), 1))
        c_mean = th.zeros(b, ch, dtype=h.dtype).index_add(0, brow, h) / count.clamp(min=1.0)
        c_max = th.zeros(b, ch, dtype=h.dtype).scatter_reduce(
            0, brow[:, None].expand(-1, ch), h, "amax", include_self=True
        )
        wait_in = [ctx, c_mean, c_max]
        if self.n_rules:
            wait_in.append((t[RULES_KEY].round() == 0).to(ctx.dtype))
        wait = self.wait(th.cat(wait_in, dim=1))
        return th.cat([wait, place], dim=1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        t = self.tables(features)
        gpus, jobs = t["gpus"], t["jobs"]
        hg, hj, ctx, _ = self.critic(gpus, jobs, t["global"], None)
        g_mean, g_max = _pool(hg, gpus[..., 0], 1)
        j_mean, j_max = _pool(hj, jobs[..., 0], 1)
        return self.value(th.cat([ctx, g_mean, j_mean, g_max, j_max], dim=1))

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


class CandidateActorCriticPolicy(OptionActorCriticPolicy):
    """MaskablePPO policy over :class:`CandidateScorer` with the two-level wait-or-place
    distribution (module doc); given the masks (rollouts, updates, ``predict``) only the legal
    candidates are scored.

    Args (besides SB3's):
        hidden: Width of the row encoders and the context.
        n_layers: Depth of the row encoders.
        cand_hidden: Width of a candidate's embedding.
        rule_features: Read ``obs["rules"]`` (each rule's choice) as candidate features.
    """

    def __init__(
        self,
        *args: Any,
        hidden: int = 64,
        n_layers: int = 2,
        cand_hidden: int = 64,
        rule_features: bool = True,
        **kwargs: Any,
    ) -> None:
        self.net_kwargs: dict[str, Any] = {
            "hidden": hidden,
            "n_layers": n_layers,
            "cand_hidden": cand_hidden,
            "rule_features": rule_features,
        }
        kwargs.setdefault("features_extractor_class", CandidateExtractor)
        kwargs.setdefault("ortho_init", False)
        MaskableActorCriticPolicy.__init__(self, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        space: Any = self.observation_space
        g, w, o, cols = layout_v1_columns(space)
        n = int(self.action_space.n)  # type: ignore[attr-defined]
        if n != 1 + w * g * o:
            raise ValueError(
                f"action space Discrete({n}) does not match the observation layout "
                f"(1 + {w} x {g} x {o})"
            )
        sizes = {k: int(space[k].shape[0]) for k in CANDIDATE_KEYS if k in space.spaces}
        self.mlp_extractor = CandidateScorer(sizes, g, w, o, cols, **self.net_kwargs)  # type: ignore[assignment]


__all__ = [
    "CANDIDATE_KEYS",
    "RULES",
    "RULES_KEY",
    "RULE_INPUTS",
    "CandidateActorCriticPolicy",
    "CandidateExtractor",
    "CandidateScorer",
    "RuleAgreement",
    "RuleChoices",
    "WaitOrPlace",
    "rule_actions",
    "split_rule_inputs",
]
