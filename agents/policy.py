"""Set-structured networks: GPUs and queued jobs as sets, so weights are cluster-size free.

The env's observation is three row-major tables (``gpus``: max_gpus x F_g, ``jobs``:
window x F_j, ``global``). The networks here encode every GPU row with one shared MLP and every
job row with another, pool them (masked mean and max over present rows) into a context, and
score every action ``(slot, gpu, option)`` from the sum of projected job, GPU, option and
context embeddings (a pairwise MLP, evaluated for all pairs at once by broadcasting). No
parameter's shape depends on ``max_gpus`` or the queue window, so a checkpoint trained on one
cluster runs on another with the same GPU/job feature layout and placement options
(:func:`gpu_sharing_gym.agents.agent.load_agent` rebuilds the policy for the new spaces and loads the weights).

* :class:`SetActorCriticPolicy` (MaskablePPO) and :class:`SetPPOPolicy` (PPO, A2C): the action
  logits are the pairwise scores (SB3's ``action_net`` is the identity), the value head reads
  the pooled context.
* :class:`SetPoolExtractor`: the pooled context alone as a features extractor, for DQN (whose
  Q head is then SB3's linear layer over the flat action space, so DQN checkpoints are tied to
  the cluster size).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import MaskableCategorical
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.distributions import Distribution
from torch.nn import functional as F

from gpu_sharing_env.envs.observation import GLOBAL_FEATURES, GPU_FEATURES, JOB_FEATURES
from gpu_sharing_gym.agents.envs import (
    HINT,  # (optional key: an expert's proposed action, gpu_sharing_gym.agents.envs.ExpertHint)
)

#: The logit of an action outside the legal candidates (as the masked distribution's own).
_ILLEGAL = -1e8

#: Observation keys in the order the flat feature vector concatenates them.
KEYS = ("gpus", "jobs", "global")


def keys(observation_space: spaces.Dict) -> tuple[str, ...]:
    return (*KEYS, HINT) if HINT in observation_space.spaces else KEYS


def layout(observation_space: spaces.Dict) -> tuple[int, int]:
    """(max_gpus, window) of an env observation space; ValueError if it is not one."""
    try:
        n_g = observation_space["gpus"].shape[0]  # type: ignore[index]
        n_j = observation_space["jobs"].shape[0]  # type: ignore[index]
        n_glob = observation_space["global"].shape[0]  # type: ignore[index]
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"observation space is not GpuSharing-v0's ({e})") from None
    if n_g % len(GPU_FEATURES) or n_j % len(JOB_FEATURES) or n_glob != len(GLOBAL_FEATURES):
        raise ValueError("observation space: feature layout differs from this version's")
    return n_g // len(GPU_FEATURES), n_j // len(JOB_FEATURES)


def _mlp(n_in: int, hidden: int, n_layers: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(n_layers):
        layers += [nn.Linear(n_in if i == 0 else hidden, hidden), nn.ReLU()]
    return nn.Sequential(*layers)


class FlatDict(BaseFeaturesExtractor):
    """Concatenate the observation tables in :func:`keys` order (the set net splits them)."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        layout(observation_space)
        self.keys = keys(observation_space)
        space: Any = observation_space
        dim = 0
        for k in self.keys:
            dim += int(space[k].shape[0])
        super().__init__(observation_space, features_dim=dim)

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        return th.cat([observations[k].float() for k in self.keys], dim=1)


class SetEncoder(nn.Module):
    """Shared per-GPU and per-job encoders, masked pooling and a context vector."""

    def __init__(self, max_gpus: int, window: int, hidden: int, n_layers: int) -> None:
        super().__init__()
        self.max_gpus, self.window, self.hidden = max_gpus, window, hidden
        self.n_g, self.n_j = len(GPU_FEATURES), len(JOB_FEATURES)
        self.gpu_enc = _mlp(self.n_g, hidden, n_layers)
        self.job_enc = _mlp(self.n_j, hidden, n_layers)
        self.glob_enc = _mlp(len(GLOBAL_FEATURES), hidden, 1)
        self.ctx = _mlp(5 * hidden, hidden, 1)
        # context fed back into every GPU row (one round of message passing)
        self.gpu_ctx = nn.Linear(hidden, hidden)

    def split(self, x: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        b = x.shape[0]
        a = self.max_gpus * self.n_g
        c = a + self.window * self.n_j
        return (
            x[:, :a].reshape(b, self.max_gpus, self.n_g),
            x[:, a:c].reshape(b, self.window, self.n_j),
            x[:, c : c + len(GLOBAL_FEATURES)],
        )

    def hint(self, x: th.Tensor) -> th.Tensor:
        """The expert-hint block (empty when the observation has none)."""
        return x[:, self.max_gpus * self.n_g + self.window * self.n_j + len(GLOBAL_FEATURES) :]

    @staticmethod
    def _pool(h: th.Tensor, present: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        w = present.unsqueeze(-1)
        mean = (h * w).sum(1) / w.sum(1).clamp(min=1.0)
        mx = (h * w - (1.0 - w) * 1e4).max(1).values
        mx = th.where(w.sum(1) > 0, mx, th.zeros_like(mx))
        return mean, mx

    def forward(self, x: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """(gpu rows [B,G,H], job rows [B,W,H], context [B,H], gpu presence [B,G])."""
        g_in, j_in, glob = self.split(x)
        g_present = g_in[..., 0]
        j_present = j_in[..., 0]
        hg = self.gpu_enc(g_in)
        hj = self.job_enc(j_in)
        g_mean, g_max = self._pool(hg, g_present)
        j_mean, j_max = self._pool(hj, j_present)
        ctx = self.ctx(th.cat([g_mean, g_max, j_mean, j_max, self.glob_enc(glob)], dim=1))
        hg = th.relu(hg + self.gpu_ctx(ctx).unsqueeze(1))
        return hg, hj, ctx, g_present


class CandidateScoring(nn.Module):
    """Base of the candidate-scoring ``mlp_extractor``s (:class:`SetScorer`, and
    ``option_policy.OptionScorer``): the legal-action mask they score under, and the legal
    candidates' (batch row, slot, GPU, option) indices in the flat action layout
    ``1 + (slot, GPU, option)`` row-major."""

    latent_dim_pi: int

    def __init__(self) -> None:
        super().__init__()
        # the legal actions while scoring candidates only (:meth:`candidates`)
        self._mask: th.Tensor | None = None

    @contextmanager
    def candidates(self, action_masks: Any) -> Iterator[None]:
        """Within the block, score only the legal actions of ``action_masks`` (B x actions;
        None: every action), as a candidate-scoring policy does: the pairwise MLP runs once per
        legal (job, GPU, option) candidate, not over the padded action space. The illegal
        entries' scores are left at a large negative number (the masked distribution replaces
        them anyway), the legal ones are the same as the dense computation's."""
        old = self._mask
        if action_masks is not None:
            m = th.as_tensor(action_masks, dtype=th.bool)
            self._mask = m.reshape(-1, self.latent_dim_pi)
        try:
            yield
        finally:
            self._mask = old

    def _legal(
        self, n_gpu: int, n_options: int
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """(flat index among the B x placements, batch row, slot, GPU, option) of every legal
        placement under :meth:`candidates`' mask, row-major."""
        mask = self._mask
        assert mask is not None
        n_place = self.latent_dim_pi - 1
        flat = mask[:, 1:].reshape(-1).nonzero().squeeze(1)
        rows = th.div(flat, n_place, rounding_mode="floor")
        act = flat - rows * n_place
        slot = th.div(act, n_gpu * n_options, rounding_mode="floor")
        gpu_opt = act - slot * (n_gpu * n_options)
        gpu = th.div(gpu_opt, n_options, rounding_mode="floor")
        return flat, rows, slot, gpu, gpu_opt - gpu * n_options


class SetScorer(CandidateScoring):
    """``mlp_extractor`` replacement: (action logits, value latent) from the flat features.

    ``latent_dim_pi`` is the number of actions (the logits themselves), ``latent_dim_vf`` the
    hidden width.
    """

    def __init__(
        self,
        max_gpus: int,
        window: int,
        n_options: int,
        hidden: int = 64,
        n_layers: int = 2,
        hint_gain: float = 0.0,
    ) -> None:
        super().__init__()
        self.enc = SetEncoder(max_gpus, window, hidden, n_layers)
        self.n_options = n_options
        self.latent_dim_pi = 1 + window * max_gpus * n_options
        self.latent_dim_vf = hidden
        self.p_job = nn.Linear(hidden, hidden)
        self.p_gpu = nn.Linear(hidden, hidden, bias=False)
        self.p_ctx = nn.Linear(hidden, hidden, bias=False)
        self.option_emb = nn.Parameter(th.zeros(n_options, hidden))
        self.pair_out = nn.Linear(hidden, 1)
        self.wait = nn.Linear(hidden, 1)
        self.value = _mlp(hidden, hidden, 1)
        # weight of the expert hint in the logits (used only if the observation has one)
        self.hint_gain = nn.Parameter(th.tensor(float(hint_gain)))
        nn.init.normal_(self.option_emb, std=0.1)

    def _candidate_logits(self, hg: th.Tensor, hj: th.Tensor, ctx: th.Tensor) -> th.Tensor:
        b, n_gpu, window = ctx.shape[0], hg.shape[1], hj.shape[1]
        n_place = self.latent_dim_pi - 1
        # index_select on flattened tables (far cheaper than advanced indexing for the small
        # tensors here)
        flat, rows, slot, gpu, opt = self._legal(n_gpu, self.n_options)
        jobs = (self.p_job(hj) + self.p_ctx(ctx).unsqueeze(1)).reshape(b * window, -1)
        gpus = self.p_gpu(hg).reshape(b * n_gpu, -1)
        z = (
            jobs.index_select(0, rows * window + slot)
            + gpus.index_select(0, rows * n_gpu + gpu)
            + self.option_emb.index_select(0, opt)
        )
        scores = self.pair_out(th.relu(z)).squeeze(-1)
        place = th.full((b * n_place,), _ILLEGAL, dtype=scores.dtype)
        return place.index_copy(0, flat, scores).reshape(b, n_place)

    def logits(
        self, hg: th.Tensor, hj: th.Tensor, ctx: th.Tensor, hint: th.Tensor | None = None
    ) -> th.Tensor:
        b = ctx.shape[0]
        if self._mask is not None and self._mask.shape[0] == b:
            out = th.cat([self.wait(ctx), self._candidate_logits(hg, hj, ctx)], dim=1)
            if hint is not None and hint.shape[1] == out.shape[1]:
                out = out + self.hint_gain * hint
            return out
        z = (
            (self.p_job(hj) + self.p_ctx(ctx).unsqueeze(1))[:, :, None, None, :]  # B,W,1,1,H
            + self.p_gpu(hg)[:, None, :, None, :]  # B,1,G,1,H
            + self.option_emb[None, None, None, :, :]  # 1,1,1,O,H
        )
        place = self.pair_out(th.relu(z)).reshape(b, -1)  # (slot, gpu, option) row-major
        out = th.cat([self.wait(ctx), place], dim=1)
        if hint is not None and hint.shape[1] == out.shape[1]:
            out = out + self.hint_gain * hint
        return out

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        hg, hj, ctx, _ = self.enc(features)
        return self.logits(hg, hj, ctx, self.enc.hint(features)), self.value(ctx)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        hg, hj, ctx, _ = self.enc(features)
        return self.logits(hg, hj, ctx, self.enc.hint(features))

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.value(self.enc(features)[2])


class _MaskedCategorical(MaskableCategorical):
    """sb3-contrib's masked categorical built from logits and masks in one normalisation (the
    same distribution as ``MaskableCategorical(logits=l, masks=m)``)."""

    def __init__(self, logits: th.Tensor, masks: th.Tensor) -> None:
        self.masks = masks
        self._original_logits = logits
        # Categorical.__init__ normalises with ``logsumexp``, whose ``exp`` (and its backward's)
        # takes ~10x longer on the masked entries' -1e8 than on ordinary values (an underflow
        # path, ~1.3 ms per 256 x 481 batch: ~7 % of a v1 PPO update); ``log_softmax`` is the
        # same normalisation through a kernel without that path.
        lp = F.log_softmax(th.where(masks, logits, th.tensor(_ILLEGAL, dtype=logits.dtype)), -1)
        self.logits = lp
        self._param = lp
        self._num_events = lp.size(-1)
        Distribution.__init__(self, lp.size()[:-1], validate_args=False)


def _make_scorer(policy: Any) -> SetScorer:
    """The set scorer for an actor-critic policy's spaces."""
    max_gpus, window = layout(policy.observation_space)
    n_act = int(policy.action_space.n)
    if (n_act - 1) % (max_gpus * window):
        raise ValueError("action space does not match the observation layout")
    n_options = (n_act - 1) // (max_gpus * window)
    return SetScorer(max_gpus, window, n_options, **policy.set_kwargs)


def _finish_build(policy: Any, lr_schedule: Any) -> None:
    # The scorer's output already is the logits: no action_net layer (whose shape would tie
    # the weights to the cluster size). Rebuild the optimizer over the parameters left.
    policy.action_net = nn.Identity()
    policy.optimizer = policy.optimizer_class(
        policy.parameters(), lr=lr_schedule(1), **policy.optimizer_kwargs
    )


class _SetNets:
    """The set networks in place of SB3's MLP extractor and action layer (mixed into an SB3
    actor-critic policy class, which follows it in the MRO)."""

    def __init__(
        self,
        *args: Any,
        hidden: int = 64,
        n_layers: int = 2,
        hint_gain: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self.set_kwargs: dict[str, Any] = {
            "hidden": hidden,
            "n_layers": n_layers,
            "hint_gain": hint_gain,
        }
        kwargs.setdefault("features_extractor_class", FlatDict)
        kwargs.setdefault("ortho_init", False)
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = _make_scorer(self)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)  # type: ignore[misc]
        _finish_build(self, lr_schedule)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data: dict[str, Any] = super()._get_constructor_parameters()  # type: ignore[misc]
        data.update(self.set_kwargs)
        return data


class SetActorCriticPolicy(_SetNets, MaskableActorCriticPolicy):  # type: ignore[misc]
    """MaskablePPO policy over the set networks.

    Given the action masks (as MaskablePPO always gives them: rollouts, updates, ``predict``),
    it scores only the legal (job, GPU, option) candidates: the cost grows with the legal
    candidates, not with the padded action space (issue 22). Without masks it scores every
    action, with the same result on the legal ones.

    Args (besides SB3's):
        hidden: Width of every embedding.
        n_layers: Depth of the per-GPU and per-job encoders.
        hint_gain: Initial weight of the expert hint in the logits (when observed).
    """

    def _masked(self, latent_pi: th.Tensor, masks: th.Tensor) -> Any:
        """SB3's masked distribution over ``latent_pi`` (the logits) under ``masks`` (bool),
        normalised once: SB3's own path normalises the logits three times (unmasked, unmasked
        again, masked)."""
        dist = self.action_dist
        n = dist.action_dim  # type: ignore[attr-defined]
        dist.distribution = _MaskedCategorical(latent_pi.view(-1, n), masks.reshape(-1, n))  # type: ignore[attr-defined]
        return dist

    def forward(
        self, obs: th.Tensor, deterministic: bool = False, action_masks: np.ndarray | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        if action_masks is None or not self.share_features_extractor:
            return super().forward(obs, deterministic, action_masks)  # type: ignore[no-any-return]
        masks = th.as_tensor(action_masks, dtype=th.bool)  # (converted once)
        with self.mlp_extractor.candidates(masks):
            latent_pi, latent_vf = self.mlp_extractor(self.extract_features(obs))
        values = self.value_net(latent_vf)
        distribution = self._masked(latent_pi, masks)
        actions = distribution.get_actions(deterministic=deterministic)
        return actions, values, distribution.log_prob(actions)

    def evaluate_actions(
        self, obs: th.Tensor, actions: th.Tensor, action_masks: th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        if action_masks is None or not self.share_features_extractor:
            return super().evaluate_actions(obs, actions, action_masks)  # type: ignore[no-any-return]
        masks = th.as_tensor(action_masks, dtype=th.bool)
        with self.mlp_extractor.candidates(masks):
            latent_pi, latent_vf = self.mlp_extractor(self.extract_features(obs))
        distribution = self._masked(latent_pi, masks)
        log_prob = distribution.log_prob(actions)
        return self.value_net(latent_vf), log_prob, distribution.entropy()

    def get_distribution(self, obs: Any, action_masks: np.ndarray | None = None) -> Any:
        if action_masks is None:
            return super().get_distribution(obs, action_masks)
        features = super(MaskableActorCriticPolicy, self).extract_features(
            obs, self.pi_features_extractor
        )
        masks = th.as_tensor(action_masks, dtype=th.bool)
        with self.mlp_extractor.candidates(masks):
            latent_pi = self.mlp_extractor.forward_actor(features)
        return self._masked(latent_pi, masks)


class SetPPOPolicy(_SetNets, ActorCriticPolicy):  # type: ignore[misc]
    """The same networks for SB3's (unmasked) PPO and A2C; use ``invalid_action="noop"``."""


class SetPoolExtractor(BaseFeaturesExtractor):
    """Features for DQN: the set encoder's pooled context (size-free encoder, linear Q head)."""

    def __init__(self, observation_space: spaces.Dict, hidden: int = 64, n_layers: int = 2):
        max_gpus, window = layout(observation_space)
        super().__init__(observation_space, features_dim=hidden)
        self.flat = FlatDict(observation_space)
        self.enc = SetEncoder(max_gpus, window, hidden, n_layers)

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        return self.enc(self.flat(observations))[2]  # (the hint, if any, is not used)
