"""Option-agnostic networks for ``GpuSharing-v1``: one set of weights for any option set,
cluster size and queue window, and *wait* as a decision of its own.

**Scoring.** GPUs, window jobs and placement options are sets, each row encoded by a shared
MLP from its features (``gpu_sharing_env.envs.observation_v1``); their pooled embeddings and
the global features form a context that is fed back into every row (one round of message
passing, as in Decima's graph embedding: Mao et al., "Learning Scheduling Algorithms for Data
Processing Clusters", SIGCOMM'19). A (job, GPU) pair gets an embedding from both rows and its
own pair features (predicted speed, share, duration); an action (job, GPU, option) is scored
from the pair embedding, the option embedding and a GPU × option product term (so that, say,
MIG options score differently on MIG-capable GPUs)::

    h_pair = relu(P_j h_job + P_g h_gpu + E_p x_pair + P_c ctx)
    score  = w · relu(Q_p h_pair + Q_o h_opt + (U_g h_gpu) ⊙ (U_o h_opt))

No parameter's shape depends on the number of GPUs, window slots or options, so a checkpoint
runs on every scenario (:func:`gpu_sharing_gym.agents.agent.load_agent` rebuilds the network for the layout).

**Wait.** The action distribution is two-level (:class:`WaitOrPlace`): wait with probability
``σ(w)``, where the wait logit ``w`` reads the context and the pooled embeddings of the legal
pairs; otherwise one placement, by a softmax over the *legal* placements only. The chance of
waiting therefore does not shrink as the number of legal placements grows (with one flat
softmax, a single wait logit competes with hundreds of placement logits), and wait is never
masked when something can be placed. Deterministic play takes the mode of each level: wait if
``σ(w) >= 1/2``, else the most likely placement.

**Critic.** The value head has its own trunk (its own GPU, job, pair and global encoders):
the actor's features are not shaped by value regression, and vice versa. With
``critic_pairs=False`` (the light critic) its trunk has no pair table: it values a state from
its GPU and job rows.

**Cost.** Both trunks embed only the legal (job, GPU) pairs (:class:`_PairRows`): the pools
and the scores read nothing else, and the pair table is most of a PPO update's arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import (
    MaskableCategorical,
    MaskableCategoricalDistribution,
    MaybeMasks,
)
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.nn import functional as F

from gpu_sharing_env.envs.observation_v1 import (
    GLOBAL_FEATURES_V1,
    GPU_FEATURES_V1,
    JOB_FEATURES_V1,
    KEYS_V1,
    OPTION_FEATURES,
    PAIR_FEATURES,
    layout_v1,
    layout_v1_columns,
)
from gpu_sharing_gym.agents.envs import HINT
from gpu_sharing_gym.agents.policy import CandidateScoring, _MaskedCategorical

_NEG = -1e8


def two_level_logits(raw: th.Tensor, masks: th.Tensor | None) -> th.Tensor:
    """Normalised log-probabilities of the two-level distribution (module doc).

    ``raw[:, 0]`` is the wait logit, ``raw[:, 1:]`` the placement scores; ``masks`` (bool,
    same shape) the legal actions. Illegal actions get ``-1e8``.
    """
    w, place = raw[:, 0], raw[:, 1:]
    if masks is None:
        lw, lnw = F.logsigmoid(w), F.logsigmoid(-w)
        return th.cat([lw[:, None], lnw[:, None] + F.log_softmax(place, dim=1)], dim=1)
    legal = masks[:, 1:]
    can_place = legal.any(dim=1)
    can_wait = masks[:, 0]
    both = can_place & can_wait
    zero = th.zeros_like(w)
    neg = th.full_like(w, _NEG)
    lw = th.where(both, F.logsigmoid(w), th.where(can_wait, zero, neg))
    lnw = th.where(both, F.logsigmoid(-w), th.where(can_place, zero, neg))
    lp = F.log_softmax(place.masked_fill(~legal, _NEG), dim=1).masked_fill(~legal, _NEG)
    return th.cat([lw[:, None], lnw[:, None] + lp], dim=1)


class WaitOrPlace(MaskableCategoricalDistribution):
    """The two-level wait-or-place distribution over the flat action space (module doc)."""

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        # The network's output already is the raw scores: no (action x action) layer.
        return nn.Identity()

    def proba_distribution(self, action_logits: th.Tensor) -> WaitOrPlace:  # type: ignore[override]
        self._raw = action_logits.view(-1, self.action_dim)
        self._dist: MaskableCategorical | None = None  # built when first read (below)
        return self

    # SB3 calls ``proba_distribution`` and then, given masks, ``apply_masking``: the unmasked
    # distribution is built only if it is read, so a masked one costs one normalisation.
    @property  # type: ignore[override]
    def distribution(self) -> MaskableCategorical | None:
        if self.__dict__.get("_dist") is None and "_raw" in self.__dict__:
            self._dist = MaskableCategorical(logits=two_level_logits(self._raw, None))
        return self.__dict__.get("_dist")

    @distribution.setter
    def distribution(self, value: MaskableCategorical | None) -> None:
        self._dist = value

    def apply_masking(self, masks: MaybeMasks) -> None:
        if masks is None:
            self._dist = MaskableCategorical(logits=two_level_logits(self._raw, None))
            return
        m = th.as_tensor(masks, dtype=th.bool, device=self._raw.device).reshape(self._raw.shape)
        self._dist = _MaskedCategorical(two_level_logits(self._raw, m), m)

    def mode(self) -> th.Tensor:
        """Wait if its probability is at least 1/2, else the most likely placement."""
        dist = self.distribution
        assert dist is not None, "mode() before proba_distribution()"
        p = dist.probs
        place = th.argmax(p[:, 1:], dim=1) + 1
        return th.where(p[:, 0] >= 0.5, th.zeros_like(place), place)


def _mlp(n_in: int, hidden: int, n_layers: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(n_layers):
        layers += [nn.Linear(n_in if i == 0 else hidden, hidden), nn.ReLU()]
    return nn.Sequential(*layers)


def _pool(h: th.Tensor, present: th.Tensor, dim: int) -> tuple[th.Tensor, th.Tensor]:
    """Masked mean and max of ``h`` over ``dim`` (rows with ``present`` 0 are left out; both
    are 0 where no row is present).

    ``h`` must be non-negative (every pooled embedding here is a ReLU output): then the max of
    ``h * present`` is the max over the present rows, since an absent row's 0 never exceeds it,
    with no separate masking pass (:meth:`_PairRows.pool` pools the pair rows the same way). A
    tie at 0 may route the max's gradient to an absent row instead of a
    present one; both get 0 (ReLU's gradient at 0 is 0, and the absent row's is masked).
    """
    w = present.unsqueeze(-1)
    hw = h * w
    return hw.sum(dim) / w.sum(dim).clamp(min=1.0), hw.max(dim).values


def keys_v1(observation_space: spaces.Dict) -> tuple[str, ...]:
    return (*KEYS_V1, HINT) if HINT in observation_space.spaces else KEYS_V1


class FlatDictV1(BaseFeaturesExtractor):
    """Concatenate a v1 observation's tables in :func:`keys_v1` order (the net splits them)."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        layout_v1(observation_space)
        self.keys = keys_v1(observation_space)
        space: Any = observation_space
        super().__init__(
            observation_space, features_dim=sum(int(space[k].shape[0]) for k in self.keys)
        )

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        return th.cat([observations[k].float() for k in self.keys], dim=1)


class _Tables(nn.Module):
    """Splits the flat features into (gpus, jobs, global, options, pairs, hint)."""

    def __init__(
        self, max_gpus: int, window: int, n_options: int, job_cols: int = len(JOB_FEATURES_V1)
    ) -> None:
        super().__init__()
        self.g, self.w, self.o = max_gpus, window, n_options
        self.job_cols = job_cols
        sizes = [
            max_gpus * len(GPU_FEATURES_V1),
            window * job_cols,
            len(GLOBAL_FEATURES_V1),
            n_options * len(OPTION_FEATURES),
            window * max_gpus * len(PAIR_FEATURES),
        ]
        self.bounds = np.cumsum([0, *sizes]).tolist()

    def forward(self, x: th.Tensor) -> tuple[th.Tensor, ...]:
        b = x.shape[0]
        s = self.bounds
        return (
            x[:, s[0] : s[1]].reshape(b, self.g, len(GPU_FEATURES_V1)),
            x[:, s[1] : s[2]].reshape(b, self.w, self.job_cols),
            x[:, s[2] : s[3]],
            x[:, s[3] : s[4]].reshape(b, self.o, len(OPTION_FEATURES)),
            x[:, s[4] : s[5]].reshape(b, self.w, self.g, len(PAIR_FEATURES)),
            x[:, s[5] :],
        )


class _PairRows:
    """Which (job, GPU) pairs one forward pass embeds, shared by the actor's and the critic's
    trunks: the legal pairs (the ``legal`` pair feature, the only ones the wait head and the
    critic pool over) and the pairs of the legal candidates, as flat indices into the
    B x W x G pair table; every pair when no mask is scored (the dense path).

    Only ~40 % of the pair table is legal on ``default``, and the table is most of a PPO
    update's arithmetic, so the trunks embed these rows only (docs/agents.md, "The learning
    loop"): the scores of the legal candidates and the pooled embeddings are the dense table's.
    """

    def __init__(self, pairs: th.Tensor, cand_mask: th.Tensor | None) -> None:
        b, w, g = pairs.shape[0], pairs.shape[1], pairs.shape[2]
        legal = pairs[..., 0].reshape(-1)
        if cand_mask is None:
            self.idx = th.arange(b * w * g)
        else:
            self.idx = ((legal > 0) | cand_mask.reshape(-1)).nonzero().squeeze(1)
        self.dense = cand_mask is None
        self.b, self.w, self.g = b, w, g
        self.batch = th.div(self.idx, w * g, rounding_mode="floor")
        pair = self.idx - self.batch * (w * g)
        slot = th.div(pair, g, rounding_mode="floor")
        self.job_row = self.batch * w + slot
        self.gpu_row = self.batch * g + (pair - slot * g)
        self.features = pairs.reshape(b * w * g, -1).index_select(0, self.idx)
        self.weight = legal.index_select(0, self.idx).unsqueeze(1)
        self.count = legal.reshape(b, -1).sum(1, keepdim=True)

    def position(self, flat_pair: th.Tensor) -> th.Tensor:
        """Row positions of flat pair indices (each must be one of :attr:`idx`)."""
        if self.dense:
            return flat_pair
        pos = th.full((self.b * self.w * self.g,), -1, dtype=th.long)
        pos[self.idx] = th.arange(self.idx.shape[0])
        return pos.index_select(0, flat_pair)

    def pool(self, hp: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Mean and max of the legal rows' embeddings per batch row (as :func:`_pool`: ``hp``
        is a ReLU output, so the max over the legal rows is the max of ``hp * legal`` with 0 as
        the floor)."""
        hw = hp * self.weight
        h = hp.shape[1]
        mean = hw.new_zeros(self.b, h).index_add(0, self.batch, hw) / self.count.clamp(min=1.0)
        mx = hw.new_zeros(self.b, h).scatter_reduce(
            0, self.batch.unsqueeze(1).expand(-1, h), hw, "amax", include_self=True
        )
        return mean, mx


class _Trunk(nn.Module):
    """Row encoders, pooling and one round of context feedback (shared by actor and critic
    designs; each owns an instance). Without ``pairs`` it stops before the (job, GPU) pair
    table (``hp`` is None): the light critic's trunk."""

    def __init__(
        self,
        hidden: int,
        n_layers: int,
        pairs: bool = True,
        job_cols: int = len(JOB_FEATURES_V1),
    ) -> None:
        super().__init__()
        self.pairs = pairs
        self.gpu = _mlp(len(GPU_FEATURES_V1), hidden, n_layers)
        self.job = _mlp(job_cols, hidden, n_layers)
        self.glob = _mlp(len(GLOBAL_FEATURES_V1), hidden, 1)
        self.ctx = _mlp(5 * hidden, hidden, 1)
        self.gpu_ctx = nn.Linear(hidden, hidden)
        self.job_ctx = nn.Linear(hidden, hidden)
        if not pairs:
            return
        self.p_job = nn.Linear(hidden, hidden)
        self.p_gpu = nn.Linear(hidden, hidden, bias=False)
        self.p_ctx = nn.Linear(hidden, hidden, bias=False)
        self.p_pair = nn.Linear(len(PAIR_FEATURES), hidden, bias=False)

    def forward(
        self, gpus: th.Tensor, jobs: th.Tensor, glob: th.Tensor, rows: _PairRows | None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor | None]:
        """(GPU rows [B,G,H], job rows [B,W,H], context [B,H], the embeddings of ``rows``'
        pairs [N,H] or None without ``pairs``)."""
        hg = self.gpu(gpus)
        hj = self.job(jobs)
        g_mean, g_max = _pool(hg, gpus[..., 0], 1)
        j_mean, j_max = _pool(hj, jobs[..., 0], 1)
        ctx = self.ctx(th.cat([g_mean, g_max, j_mean, j_max, self.glob(glob)], dim=1))
        hg = th.relu(hg + self.gpu_ctx(ctx).unsqueeze(1))
        hj = th.relu(hj + self.job_ctx(ctx).unsqueeze(1))
        if not self.pairs:
            return hg, hj, ctx, None
        assert rows is not None, "a trunk with a pair table needs the pair rows"
        h = hj.shape[-1]
        pj = (self.p_job(hj) + self.p_ctx(ctx).unsqueeze(1)).reshape(-1, h)
        hp = th.relu(
            pj.index_select(0, rows.job_row)
            + self.p_gpu(hg).reshape(-1, h).index_select(0, rows.gpu_row)
            + self.p_pair(rows.features)
        )
        return hg, hj, ctx, hp


class OptionScorer(CandidateScoring):
    """``mlp_extractor`` of :class:`OptionActorCriticPolicy`: (raw action scores, value
    latent) from the flat features (module doc).

    ``latent_dim_pi`` is the number of actions (the scores themselves), ``latent_dim_vf`` the
    hidden width.
    """

    def __init__(
        self,
        max_gpus: int,
        window: int,
        n_options: int,
        hidden: int = 64,
        n_layers: int = 2,
        pair_hidden: int = 32,
        hint_gain: float = 0.0,
        critic_pairs: bool = True,
        job_cols: int = len(JOB_FEATURES_V1),
    ) -> None:
        super().__init__()
        self.tables = _Tables(max_gpus, window, n_options, job_cols)
        self.latent_dim_pi = 1 + window * max_gpus * n_options
        self.latent_dim_vf = hidden
        self.n_options = n_options
        self.actor = _Trunk(hidden, n_layers, job_cols=job_cols)
        self.opt = _mlp(len(OPTION_FEATURES), hidden, n_layers)
        self.q_pair = nn.Linear(hidden, pair_hidden)
        self.q_opt = nn.Linear(hidden, pair_hidden, bias=False)
        self.u_gpu = nn.Linear(hidden, pair_hidden, bias=False)
        self.u_opt = nn.Linear(hidden, pair_hidden, bias=False)
        self.out = nn.Linear(pair_hidden, 1)
        self.wait = nn.Sequential(_mlp(3 * hidden, hidden, 1), nn.Linear(hidden, 1))
        self.critic = _Trunk(hidden, n_layers, pairs=critic_pairs, job_cols=job_cols)
        self.value = _mlp(5 * hidden, hidden, 1)
        self.hint_gain = nn.Parameter(th.tensor(float(hint_gain)))

    def _rows(self, pairs: th.Tensor) -> _PairRows:
        """The pairs to embed under :meth:`candidates`' mask (every pair without one)."""
        mask = self._mask
        b = pairs.shape[0]
        if mask is None or mask.shape[0] != b:
            return _PairRows(pairs, None)
        cand = mask[:, 1:].reshape(b, pairs.shape[1], pairs.shape[2], self.n_options)
        return _PairRows(pairs, cand.any(-1))

    def _place_scores(
        self, hp: th.Tensor, rows: _PairRows, ho: th.Tensor, hg: th.Tensor
    ) -> th.Tensor:
        b, w, g = rows.b, rows.w, rows.g
        o = ho.shape[1]
        if rows.dense:
            z = th.relu(
                self.q_pair(hp).reshape(b, w, g, 1, -1)  # B,W,G,1,P
                + self.q_opt(ho)[:, None, None, :, :]  # B,1,1,O,P
                + self.u_gpu(hg)[:, None, :, None, :] * self.u_opt(ho)[:, None, None, :, :]
            )
            return self.out(z).reshape(b, -1)  # (slot, gpu, option) row-major
        n_place = w * g * o
        flat, brow, slot, gpu, opt = self._legal(g, o)
        o_ix = brow * o + opt
        z = th.relu(
            self.q_pair(hp).index_select(0, rows.position(brow * (w * g) + slot * g + gpu))
            + self.q_opt(ho).reshape(b * o, -1).index_select(0, o_ix)
            + self.u_gpu(hg).reshape(b * g, -1).index_select(0, brow * g + gpu)
            * self.u_opt(ho).reshape(b * o, -1).index_select(0, o_ix)
        )
        scores = self.out(z).squeeze(-1)
        place = th.full((b * n_place,), _NEG, dtype=scores.dtype)
        return place.index_copy(0, flat, scores).reshape(b, n_place)

    def _actor(self, features: th.Tensor, rows: _PairRows | None = None) -> th.Tensor:
        gpus, jobs, glob, opts, pairs, hint = self.tables(features)
        rows = rows if rows is not None else self._rows(pairs)
        hg, _, ctx, hp = self.actor(gpus, jobs, glob, rows)
        assert hp is not None
        ho = self.opt(opts)  # B,O,H
        place = self._place_scores(hp, rows, ho, hg)
        p_mean, p_max = rows.pool(hp)
        wait = self.wait(th.cat([ctx, p_mean, p_max], dim=1))
        out = th.cat([wait, place], dim=1)
        if hint.shape[1] == out.shape[1]:
            out = out + self.hint_gain * hint
        return out

    def _critic(self, features: th.Tensor, rows: _PairRows | None = None) -> th.Tensor:
        gpus, jobs, glob, _, pairs, _ = self.tables(features)
        if rows is None and self.critic.pairs:
            rows = self._rows(pairs)
        hg, hj, ctx, hp = self.critic(gpus, jobs, glob, rows)
        g_mean, g_max = _pool(hg, gpus[..., 0], 1)
        j_mean, j_max = _pool(hj, jobs[..., 0], 1)
        if hp is None:  # the light critic: GPU and job rows only
            return self.value(th.cat([ctx, g_mean, j_mean, g_max, j_max], dim=1))
        assert rows is not None
        p_mean, p_max = rows.pool(hp)
        return self.value(th.cat([ctx, g_mean, j_mean, p_mean, p_max], dim=1))

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self._actor(features)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self._critic(features)

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        # one set of pair rows for both trunks
        rows = self._rows(self.tables(features)[4])
        return self._actor(features, rows), self._critic(features, rows)


class OptionActorCriticPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy over :class:`OptionScorer` with the :class:`WaitOrPlace`
    distribution (module doc).

    Args (besides SB3's):
        hidden: Width of every row embedding.
        n_layers: Depth of the row encoders.
        pair_hidden: Width of the (job, GPU, option) scoring layer.
        hint_gain: Initial weight of an expert hint in the scores (when observed).
        critic_pairs: Whether the critic's trunk builds its own (job, GPU) pair table (the
            ``ppo`` and ``ppo_v1`` checkpoints' design). False: the light critic, which values
            a state from its GPU and job rows only: the pair table is most of a PPO update's
            arithmetic, so this roughly halves it (docs/agents.md, "The learning loop").
    """

    def __init__(
        self,
        *args: Any,
        hidden: int = 64,
        n_layers: int = 2,
        pair_hidden: int = 32,
        hint_gain: float = 0.0,
        critic_pairs: bool = True,
        **kwargs: Any,
    ) -> None:
        self.net_kwargs: dict[str, Any] = {
            "hidden": hidden,
            "n_layers": n_layers,
            "pair_hidden": pair_hidden,
            "hint_gain": hint_gain,
            "critic_pairs": critic_pairs,
        }
        kwargs.setdefault("features_extractor_class", FlatDictV1)
        kwargs.setdefault("ortho_init", False)
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        # (job slots: the window's and any migration slots; their rows' column count)
        g, w, o, cols = layout_v1_columns(self.observation_space)  # type: ignore[arg-type]
        n = int(self.action_space.n)  # type: ignore[attr-defined]
        if n != 1 + w * g * o:
            raise ValueError(
                f"action space Discrete({n}) does not match the observation layout "
                f"(1 + {w} x {g} x {o})"
            )
        self.mlp_extractor = OptionScorer(g, w, o, **self.net_kwargs, job_cols=cols)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        self.action_dist = WaitOrPlace(int(self.action_space.n))  # type: ignore[attr-defined]
        super()._build(lr_schedule)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(self.net_kwargs)
        return data

    # Given the masks (rollouts, updates, ``predict``), only the legal placements are scored.
    def forward(
        self, obs: th.Tensor, deterministic: bool = False, action_masks: np.ndarray | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        with self.mlp_extractor.candidates(action_masks):  # type: ignore[operator]
            return super().forward(obs, deterministic, action_masks)

    def evaluate_actions(
        self, obs: th.Tensor, actions: th.Tensor, action_masks: th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        with self.mlp_extractor.candidates(action_masks):  # type: ignore[operator]
            return super().evaluate_actions(obs, actions, action_masks)

    def get_distribution(self, obs: Any, action_masks: np.ndarray | None = None) -> Any:
        with self.mlp_extractor.candidates(action_masks):  # type: ignore[operator]
            return super().get_distribution(obs, action_masks)


__all__ = [
    "FlatDictV1",
    "OptionActorCriticPolicy",
    "OptionScorer",
    "WaitOrPlace",
    "two_level_logits",
]
