"""The policy over ``GpuSharing-v2``'s candidates, trained by DAgger from the best heuristic of
each seed, then PPO against it (issue 53, item 5).

**The moves and what it sees.** ``GpuSharing-v2`` (action parity): every queued job at every
legal (first GPU, option), gangs included, every migration of a running job to an empty ready
GPU, and *hold*; one row of :data:`~gpu_sharing_env.envs.candidates.CANDIDATE_FEATURES` per
candidate. To each row :class:`CandidateEnv` adds, for every rule of ``rules``, whether the
candidate is that rule's choice now, moves the same job, or targets the same GPU (a rule's
choice is an input, never a target during PPO). Only the real candidates are kept (no padding),
so the cost of a step follows the legal moves and one checkpoint plays any fleet. The setting
``pruning: classes`` (default ``none``) has the env keep one target per class of
interchangeable ones (``gpu_sharing_env.envs.candidates``; 6-7x fewer candidates on
``pai-busy``); the rules are asked as the env builds its candidates (its ``keep_moves``), so
their choices, and the teacher's label, stay candidates.

**The network** (:class:`CandidateNet`): a shared MLP embeds every candidate row; the mean and
max of the embeddings and the ``global`` features give a context; each candidate's score is an
MLP of (its embedding, the context); the value is an MLP of a second, critic-only embedding's
pooled context. Nothing depends on the number of GPUs, jobs or options.

**Training** (:func:`train`): behaviour cloning and DAgger rounds (Ross et al., AISTATS'11)
from a *privileged* teacher: on each training seed, whichever of ``teachers`` has the lower
mean JCT on that seed's whole episode (found by running them, which no deployed agent could
do), labelling every state the student reaches; then PPO (clipped, GAE) with the paired reward
against the same per-seed best heuristic (the reference's offline job-seconds over the same
simulated time subtracted, as :class:`gpu_sharing_gym.agents.envs.PairedReward`, so copying the
best rule earns 0). The first PPO updates fit the critic only (the cloned policy's returns),
so a fresh critic's advantages do not pull the policy off the teacher. Every PPO rollout logs
its agreement with each rule (``agree_<rule>``) and with the teacher. Validation on held-out
seeds every few updates keeps ``best.pt``; ``state.pt`` (weights, optimiser, counters, RNG) is
written after every DAgger round and PPO update, and ``--resume`` continues from it.

Entry points: ``gsg train --config candidate_dagger --out DIR [--resume] [--max-minutes M]``
(the recipe's ``trainer: candidate_dagger`` hands it here) or ``python -m
gpu_sharing_gym.agents.candidate_dagger train|evaluate``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
import yaml
from torch import nn
from torch.nn import functional as F

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs.candidates import N_FEATURES, PAIR_FEATURES, PRUNINGS
from gpu_sharing_env.envs.gpu_sharing_v2 import GLOBAL_FEATURES_V2, GpuSharingEnvV2
from gpu_sharing_env.evaluation.runner import json_safe, run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.envs import (
    CURVES,
    TRAIN_SEED_MIN,
    curve_key,
    reference_curve,
    resolve_cache_dir,
    scenario_digest,
)
from gpu_sharing_gym.agents.lookahead import Pack
from gpu_sharing_gym.agents.planner import OraclePlanner, RolloutPlanner
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.plumbing.cli_args import seed_spec
from gpu_sharing_gym.plumbing.fileio import atomic_write_text

#: Columns added per rule: the candidate is the rule's choice, moves its job, targets its GPU.
RULE_COLS = 3
N_GLOBAL = len(GLOBAL_FEATURES_V2)
#: A rule's record of the moves it made (Gandiva: migration times, for its cooldown).
_OWN_MOVES = "_migrated_at"


def n_inputs(n_rules: int, pair_features: bool = False) -> int:
    """Width of a candidate row the network reads (v2's row, with ``pair_features`` its
    :data:`~gpu_sharing_env.envs.candidates.PAIR_FEATURES` too, then the rules' columns)."""
    return N_FEATURES + len(PAIR_FEATURES) * pair_features + RULE_COLS * n_rules


# ---------------------------------------------------------------------------------- env
def _pack() -> HeuristicPolicy:
    """``pack`` as the planner builds it on its base speed_sjf_queue (``lookahead.Pack``: the
    base's job, time-shared on the legal GPU with the most residents), asked in the base's
    queue order and scope."""
    base = make_policy("speed_sjf_queue")
    assert isinstance(base, HeuristicPolicy)
    p = Pack(base)
    p.window_order = base.window_order  # (its scope is the base's: the window)
    return p


def _heuristic(name: str) -> HeuristicPolicy:
    if name == "pack":  # (the planner's built-in candidate: speed_sjf_queue's job, packed)
        return _pack()
    p = make_policy(name)
    if not isinstance(p, HeuristicPolicy):
        raise ValueError(f"{name!r}: not a heuristic (rules and teachers must be)")
    return p


class CandidateEnv:
    """``GpuSharing-v2`` on one scenario with rule-choice columns and a paired reward.

    ``state()`` gives (rows ``[k, n_inputs]`` float16 of the ``k`` real candidates, ``global``
    float32, each rule's choice as a candidate index or -1). The reward is v2's ``jct`` reward
    plus the per-seed best reference's cost over the same simulated time (module doc); an
    episode's return is then ``-(I - I_ref) / (3600 N)`` with ``I`` the offline job-seconds in
    the system."""

    def __init__(
        self,
        scenario: str,
        rules: Sequence[str],
        references: Sequence[str],
        max_candidates: int = 4096,
        cache_dir: str | Path | None = None,
        migration_cooldown_s: float = 1800.0,
        pruning: str = "none",
        pair_features: bool = False,
    ) -> None:
        self.env: GpuSharingEnvV2 = gym.make(  # type: ignore[assignment]
            "GpuSharing-v2",
            scenario=scenario,
            reward="jct",
            max_candidates=max_candidates,
            pruning=pruning,
            pair_features=pair_features,
            keep_moves=self._rule_moves,  # (the rules are asked as the env builds candidates)
        ).unwrapped
        self.scenario = scenario
        self.rule_names = list(rules)
        self.rules = [_heuristic(n) for n in self.rule_names]
        self.ref_names = list(references)
        self.refs = [_heuristic(n) for n in self.ref_names]
        self.cache_dir = resolve_cache_dir(cache_dir)
        self.cooldown_s = migration_cooldown_s
        self._moved_at: dict[int, float] = {}
        self.keep = np.zeros(1, dtype=np.int64)
        self._ref_sim = make_simulator(self.env.cfg)
        self._digest = scenario_digest(self.env.cfg)
        self.choices: list[Decision | None] = []
        self.choice_idx = np.full(len(self.rules), -1, dtype=np.int64)
        self._saved: list[Any] = []
        self.best_ref = ""
        self.ref_jct_s: dict[str, float] = {}

    # -- the per-seed reference (privileged: whole episodes)
    def _curve(self, i: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        key = curve_key(self._digest, self.ref_names[i], seed)
        return CURVES.get(
            key, lambda: reference_curve(self.refs[i], self._ref_sim, seed), self.cache_dir
        )

    def reset(self, seed: int) -> None:
        self._moved_at = {}
        for r in self.rules:
            r.reset(seed)
        self._obs, _ = self.env.reset(seed=seed)
        curves = [self._curve(i, seed) for i in range(len(self.refs))]
        best = int(np.argmin([c[1][-1] for c in curves]))
        self.best_ref = self.ref_names[best]
        self._times, self._integral = curves[best]
        sim = self.env.sim
        n = sum(not st.spec.online for st in sim.jobs.values())
        self._scale = 3600.0 * max(1, n)
        self._prev = self._i_ref(sim.now)
        self._index_choices()

    def _i_ref(self, t: float) -> float:
        return float(np.interp(t, self._times, self._integral))

    def _rule_moves(self, sim: Simulator) -> list[Decision | None]:
        """Each rule's decision now: the env's ``keep_moves``, asked at every decision point
        (under ``pruning`` the rules' choices stay candidates)."""
        codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options), 0)
        # (Gandiva's record of its own migrations, for its cooldown, is kept only if its move
        # is the one made: restored in step otherwise)
        self._saved = [dict(getattr(r, _OWN_MOVES, None) or {}) for r in self.rules]
        self.choices = [self._decide(r, codec) for r in self.rules]
        return self.choices

    def _index_choices(self) -> None:
        """The rules' choices (asked as the env built its candidates) as candidate indices."""
        env = self.env
        if env.sim.done:
            self.choices = [None] * len(self.rules)
            self.choice_idx[:] = 0
            return
        for i, d in enumerate(self.choices):
            a = env.index_of(d)
            self.choice_idx[i] = -1 if a is None else a

    def row_of(self, policy: HeuristicPolicy) -> int:
        """The row of the last ``state()`` that is ``policy``'s decision now, asked in its own
        queue order and scope (-1 where it is no candidate the agent may take). Ask a stateful
        policy (a planner) once per step, as the runner would."""
        sim = self.env.sim
        d = self._decide(policy, ActionCodec(sim.window, sim.n_gpus, len(sim.options), 0))
        a = self.env.index_of(d)
        if a is None:
            return -1
        hit = np.flatnonzero(self.keep == a)
        return int(hit[0]) if len(hit) else -1

    def _keep(self) -> np.ndarray:
        """The env's candidates the agent may take: all but migrations of a job it migrated
        less than ``cooldown_s`` ago (Gandiva's own cooldown; the simulator itself only keeps
        a job from moving again while it sets up), rules' choices always."""
        c = self.env.candidates
        now = float(self.env.sim.now)
        keep = [
            k
            for k, m in enumerate(c.moves)
            if k <= c.n_place
            or now - self._moved_at.get(m.job_id, -math.inf) >= self.cooldown_s  # type: ignore[union-attr]
            or k in self.choice_idx
        ]
        return np.asarray(keep, dtype=np.int64)

    def _decide(self, rule: HeuristicPolicy, codec: ActionCodec) -> Decision | None:
        """``rule``'s decision now, in its own queue order and decision scope (the runner's:
        speed_sjf_queue's window is the shortest predicted jobs, Gandiva's the oldest); the
        simulator's own are put back after."""
        sim = self.env.sim
        order, scope = sim.window_order, sim.decision_scope
        if rule.window_order != order:
            sim.set_window_order(rule.window_order)
        if rule.decision_scope != scope:
            sim.set_decision_scope(rule.decision_scope)
        try:
            return rule.decide(ClusterView(sim, codec))
        finally:
            if sim.window_order != order:
                sim.set_window_order(order)
            if sim.decision_scope != scope:
                sim.set_decision_scope(scope)

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows of the candidates the agent may take, ``global``, each rule's choice as an
        index into those rows or -1); the agent's action indexes the same rows."""
        c = self.env.candidates
        keep = self.keep = self._keep()
        moves = [c.moves[k] for k in keep.tolist()]
        pos = {int(k): i for i, k in enumerate(keep.tolist())}
        choice = np.array([pos.get(int(a), -1) for a in self.choice_idx], dtype=np.int64)
        extra = np.zeros((len(keep), RULE_COLS * len(self.rules)), dtype=np.float32)
        jobs = np.array([-1 if m is None else m.job_id for m in moves])
        gpus = np.array([-1 if m is None else m.gpu for m in moves])
        for i, d in enumerate(self.choices):
            if choice[i] >= 0:
                extra[choice[i], RULE_COLS * i] = 1.0
            if d is not None:
                extra[:, RULE_COLS * i + 1] = jobs == d.job_id
                extra[:, RULE_COLS * i + 2] = gpus == d.gpu
        rows = np.concatenate([c.features[keep], extra], axis=1).astype(np.float16)
        return rows, self._obs["global"], choice

    def step(self, action: int) -> tuple[float, bool, dict[str, Any]]:
        """Take row ``action`` of the last ``state()``: (paired reward, done, info)."""
        env = self.env
        a = int(self.keep[action])
        for i, rule in enumerate(self.rules):
            if int(self.choice_idx[i]) != a and hasattr(rule, _OWN_MOVES):
                setattr(rule, _OWN_MOVES, self._saved[i])
        if a > env.candidates.n_place:
            d = env.candidates.move(a)
            assert d is not None
            self._moved_at[d.job_id] = float(env.sim.now)
        self._obs, r, term, _, info = env.step(a)
        now = float(env.sim.now)
        cur = self._i_ref(now)
        shaped = float(r) + (cur - self._prev) / self._scale
        self._prev = cur
        if term:
            shaped += (float(self._integral[-1]) - cur) / self._scale
        else:
            self._index_choices()
        return shaped, bool(term), info


# ---------------------------------------------------------------------------------- net
def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out), nn.ReLU())


class CandidateNet(nn.Module):
    """Scores each candidate row and values the state (module doc); any number of rows."""

    def __init__(self, n_in: int, hidden: int = 128) -> None:
        super().__init__()
        self.n_in, self.hidden = n_in, hidden
        self.enc = _mlp(n_in, hidden, hidden)
        self.glob = nn.Sequential(nn.Linear(N_GLOBAL, hidden), nn.ReLU())
        self.ctx = _mlp(3 * hidden, hidden, hidden)
        # score = MLP([h, ctx]); its first layer split so the context's half runs once a state
        self.score_h = nn.Linear(hidden, hidden)
        self.score_c = nn.Linear(hidden, hidden, bias=False)
        self.score = nn.Sequential(nn.ReLU(), nn.Linear(hidden, 1))
        vh = hidden // 2
        self.v_enc = nn.Sequential(nn.Linear(n_in, vh), nn.ReLU())
        self.value = nn.Sequential(
            nn.Linear(2 * vh + hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    @staticmethod
    def _pool(h: th.Tensor, valid: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        v = valid[..., None].to(h.dtype)
        mean = (h * v).sum(1) / v.sum(1).clamp(min=1.0)
        mx = h.masked_fill(~valid[..., None], 0.0).amax(1)  # (embeddings are >= 0)
        return mean, mx

    def forward(self, x: th.Tensor, valid: th.Tensor, g: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """(logits [B, K] (-1e9 off the valid rows), value [B]) of rows ``x`` [B, K, n_in]."""
        h = self.enc(x)
        mean, mx = self._pool(h, valid)
        hg = self.glob(g)
        ctx = self.ctx(th.cat([mean, mx, hg], dim=1))
        s = self.score(self.score_h(h) + self.score_c(ctx)[:, None, :]).squeeze(-1)
        logits = s.masked_fill(~valid, -1e9)
        hv = self.v_enc(x)
        vm, vx = self._pool(hv, valid)
        value = self.value(th.cat([vm, vx, hg], dim=1)).squeeze(-1)
        return logits, value


def minibatches(sizes: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Minibatches of step indices, similar sizes (candidate counts) together so little is
    padded, in random order; ties broken at random."""
    order = np.lexsort((rng.random(len(sizes)), sizes))
    parts = np.array_split(order, max(1, len(sizes) // batch_size))
    return [parts[i] for i in rng.permutation(len(parts))]


def batch(
    rows: Sequence[np.ndarray], globs: Sequence[np.ndarray]
) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """Pad states' rows to one tensor: (x [B, K, F], valid [B, K], global [B, G])."""
    k = max(len(r) for r in rows)
    x = np.zeros((len(rows), k, rows[0].shape[1]), dtype=np.float32)
    valid = np.zeros((len(rows), k), dtype=bool)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
        valid[i, : len(r)] = True
    return th.from_numpy(x), th.from_numpy(valid), th.from_numpy(np.stack(globs))


# ---------------------------------------------------------------------------------- settings
#: Planners that may label DAgger's states (``dagger_teacher``): the rollout planner on the true
#: future (privileged: training time only) or on its observed belief.
TEACHER_PLANNERS: dict[str, type[RolloutPlanner]] = {
    "planner_oracle": OraclePlanner,
    "planner": RolloutPlanner,
}


@dataclass
class Settings:
    """A recipe (``configs/recipes/candidate_dagger.yaml``); every field documented there."""

    #: What ``gsg train`` reads to hand the recipe to this module.
    trainer: str = "candidate_dagger"
    curriculum: list[dict[str, Any]] = field(
        default_factory=lambda: [{"scenario": "default", "share": 1.0}]
    )
    rules: list[str] = field(
        default_factory=lambda: ["gandiva", "speed_sjf_queue", "sjf_predicted"]
    )
    teachers: list[str] = field(default_factory=lambda: ["gandiva", "speed_sjf_queue"])
    #: DAgger's labels: ``per_seed_best`` (the seed's best of ``teachers``) or a planner of
    #: :data:`TEACHER_PLANNERS` built with ``planner`` (its constructor's arguments).
    dagger_teacher: str = "per_seed_best"
    planner: dict[str, Any] = field(default_factory=dict)
    max_candidates: int = 4096
    pruning: str = "none"
    #: v2's ``pair_features`` (the co-location profile's columns on every candidate row).
    pair_features: bool = False
    #: A model (``best.pt``/``model.pt`` of an earlier run, its ``rules`` and ``hidden`` the
    #: same) whose weights start a fresh run: the curriculum's step from a smaller fleet.
    init_from: str = ""
    migration_cooldown_s: float = 1800.0
    hidden: int = 64
    seed: int = 0
    # imitation
    bc_episodes: int = 200
    dagger_rounds: int = 4
    dagger_episodes: int = 100
    dagger_beta: float = 0.5
    bc_epochs: int = 3
    bc_lr: float = 1e-3
    label_smoothing: float = 0.05
    dataset_max_steps: int = 60000
    #: Episodes cut after this many steps (0: whole episodes), validation's included.
    max_steps: int = 0
    #: DAgger stops after the round that passes this share of the wall-clock budget.
    imitation_share: float = 1.0
    # PPO
    ppo_updates: int = 100000
    episodes_per_update: int = 16
    value_warmup_updates: int = 3
    lr: float = 1e-4
    n_epochs: int = 4
    batch_size: int = 256
    clip: float = 0.2
    gamma: float = 1.0
    gae_lambda: float = 0.95
    ent_coef: float = 0.003
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # validation
    eval_every: int = 10
    eval_scenario: str = "default"
    eval_seeds: list[int] = field(default_factory=lambda: list(range(1000, 1010)))
    max_minutes: float = 60.0

    @classmethod
    def load(cls, path: str | Path) -> Settings:
        raw = yaml.safe_load(Path(path).read_text()) or {}
        known = {f.name for f in fields(cls)}
        bad = sorted(set(raw) - known)
        if bad:
            raise ValueError(f"{path}: unknown setting(s) {', '.join(bad)}")
        s = cls(**raw)
        missing = [t for t in s.teachers if t not in s.rules]
        if missing:
            raise ValueError(f"{path}: teachers must be among rules (not: {', '.join(missing)})")
        if s.dagger_teacher != "per_seed_best" and s.dagger_teacher not in TEACHER_PLANNERS:
            raise ValueError(
                f"{path}: dagger_teacher {s.dagger_teacher!r}: must be per_seed_best or one of "
                f"{', '.join(TEACHER_PLANNERS)}"
            )
        try:
            s.make_teacher()
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: planner: {err}") from None
        if s.pruning not in PRUNINGS:
            raise ValueError(f"{path}: pruning {s.pruning!r}: must be one of {', '.join(PRUNINGS)}")
        if isinstance(s.max_steps, bool) or not isinstance(s.max_steps, int) or s.max_steps < 0:
            raise ValueError(f"{path}: max_steps {s.max_steps!r}: must be an integer >= 0")
        if s.init_from:
            s.check_init(path)
        share = s.imitation_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise ValueError(f"{path}: imitation_share {share!r}: must be a number in (0, 1]")
        return s

    def check_init(self, path: str | Path) -> None:
        """One-line errors for an ``init_from`` the network cannot start from."""
        init = Path(self.init_from)
        if not init.is_file():
            raise ValueError(f"{path}: init_from {self.init_from!r}: no such file")
        try:
            st = th.load(init, weights_only=True)
            theirs = st["meta"]["settings"]
        except Exception as err:  # (any unreadable file: pickle, zip, torch errors)
            raise ValueError(
                f"{path}: init_from {self.init_from!r}: not a candidate_dagger model "
                f"({type(err).__name__})"
            ) from None
        # (a model saved before the ``pair_features`` setting read rows without them)
        for k, before in (("rules", None), ("hidden", None), ("pair_features", False)):
            if theirs.get(k, before) != getattr(self, k):
                raise ValueError(
                    f"{path}: init_from {self.init_from!r}: {k} {theirs.get(k, before)!r} there, "
                    f"{getattr(self, k)!r} here (they must be the same)"
                )
        try:
            CandidateNet(
                n_inputs(len(self.rules), self.pair_features), self.hidden
            ).load_state_dict(st["net"])
        except (KeyError, RuntimeError, TypeError) as err:
            raise ValueError(
                f"{path}: init_from {self.init_from!r}: not a candidate_dagger model "
                f"(its weights: {type(err).__name__})"
            ) from None

    def make_teacher(self) -> HeuristicPolicy | None:
        """DAgger's labelling policy (None: the per-seed best of ``teachers``)."""
        if self.dagger_teacher == "per_seed_best":
            return None
        return TEACHER_PLANNERS[self.dagger_teacher](**self.planner)


# ---------------------------------------------------------------------------------- rollouts
@dataclass
class Steps:
    """Recorded steps (rows float16, ragged)."""

    rows: list[np.ndarray] = field(default_factory=list)
    globs: list[np.ndarray] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)
    choices: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def extend(self, o: Steps) -> None:
        for f in fields(self):
            getattr(self, f.name).extend(getattr(o, f.name))

    def tail(self, n: int) -> None:
        for f in fields(self):
            lst = getattr(self, f.name)
            del lst[: max(0, len(lst) - n)]


def act(
    net: CandidateNet, rows: np.ndarray, glob: np.ndarray, mode: str
) -> tuple[int, float, float]:
    """(action, its log-probability, value) for one state; ``mode``: sample or greedy."""
    with th.no_grad():
        x = th.from_numpy(rows.astype(np.float32))[None]
        valid = th.ones(1, len(rows), dtype=th.bool)
        logits, v = net(x, valid, th.from_numpy(glob)[None])
        logp = F.log_softmax(logits[0], dim=0)
        if mode == "greedy":
            a = int(th.argmax(logp))
        else:
            a = int(th.multinomial(logp.exp(), 1))
        return a, float(logp[a]), float(v[0])


def run_episode_env(
    env: CandidateEnv,
    seed: int,
    net: CandidateNet | None,
    mode: str = "sample",
    beta: float = 0.0,
    rng: np.random.Generator | None = None,
    teacher: HeuristicPolicy | None = None,
    max_steps: int = 0,
) -> tuple[Steps, dict[str, float]]:
    """One episode; the teacher is ``teacher`` (a planner, asked at every step) or else the
    seed's best reference (``env.best_ref``, also a rule). ``net`` None: the teacher drives;
    else the net drives (``mode``), except with probability ``beta`` per step the teacher
    (DAgger's mixture). Returns the steps (label: the teacher's choice; where a planner's is
    no candidate, the seed's best reference's, counted in the metrics' ``x_label_fallback``)
    and the env's final metrics. ``max_steps`` > 0 cuts the episode after that many steps (the
    last marked done, no terminal reward): its metrics are then :func:`_cut_metrics`'."""
    env.reset(seed)
    if teacher is not None:
        teacher.reset(seed)
    t_idx = env.rule_names.index(env.best_ref)
    out = Steps()
    done = False
    info: dict[str, Any] = {}
    fallback = 0
    while not done and (max_steps <= 0 or len(out) < max_steps):
        rows, glob, choice = env.state()
        label = max(0, int(choice[t_idx]))  # (a teacher's move is always a candidate: parity)
        if teacher is not None:
            row = env.row_of(teacher)
            fallback += row < 0
            label = label if row < 0 else row
        if net is None or (rng is not None and beta > 0 and rng.random() < beta):
            a, logp, v = label, 0.0, 0.0
        else:
            a, logp, v = act(net, rows, glob, mode)
        r, done, info = env.step(a)
        out.rows.append(rows)
        out.globs.append(glob)
        out.labels.append(label)
        out.actions.append(a)
        out.logps.append(logp)
        out.values.append(v)
        out.rewards.append(r)
        out.dones.append(done)
        out.choices.append(choice)
    extra: dict[str, float] = {} if teacher is None else {"x_label_fallback": fallback}
    if not done:
        out.dones[-1] = True
        return out, {**_cut_metrics(env, out), **extra}
    if max_steps > 0:  # ended before the cut: its own metrics, and the cut's measure at its end
        cut = _cut_metrics(env, out, finished=True)
        extra.update({k: cut[k] for k in ("x_job_s", "x_ref_job_s", "x_excess", "x_paired_return")})
    return out, {**info["metrics"], **extra}


def _cut_metrics(env: CandidateEnv, steps: Steps, finished: bool = False) -> dict[str, float]:
    """A cut episode's record: the offline job-seconds in the system up to the cut (``x_job_s``,
    the simulator's integral since the episode began: their mean over time over the jobs is
    what mean JCT averages, and at an episode's end they are the sum of the JCTs ``jct_mean_s``
    averages) beside the paired reference's at the same simulated time (``x_ref_job_s``; for an
    episode that ended, ``finished``, the reference's whole episode, as the paired return's
    terminal reward counts it), their relative difference (``x_excess``, what validation ranks
    a cut run by), the paired return, the simulated time; the whole episode's metrics NaN.
    (Read off the paired return instead, they came out short by the reference's rest where an
    episode ended before its reference's, and over by the SLO penalty, in job-seconds, where
    attainment was below target.)"""
    sim = env.env.sim
    now = float(sim.now)
    ret = float(sum(steps.rewards))
    ref = float(env._integral[-1]) if finished else env._i_ref(now)
    job_s = float(sim.acc.in_system_s)
    return {
        "jct_mean_s": math.nan,
        "slo_attainment": math.nan,
        "x_cut_steps": float(len(steps)),
        "x_sim_time_s": now,
        "x_paired_return": ret,
        "x_job_s": job_s,
        "x_ref_job_s": ref,
        "x_excess": job_s / ref - 1.0 if ref > 0 else math.nan,
    }


def evaluate_net(
    net: CandidateNet,
    settings: Settings,
    scenario: str,
    seeds: Sequence[int],
    max_steps: int = 0,
) -> list[dict[str, Any]]:
    """Greedy episodes on ``seeds``: one record per seed (``gsg evaluate --json``'s fields;
    ``max_steps`` > 0: cut there, :func:`_cut_metrics`' record)."""
    env = CandidateEnv(
        scenario, settings.rules, settings.teachers, settings.max_candidates,
        migration_cooldown_s=settings.migration_cooldown_s, pruning=settings.pruning,
        pair_features=settings.pair_features,
    )  # fmt: skip
    recs = []
    for s in seeds:
        t0 = time.perf_counter()
        steps, m = run_episode_env(env, int(s), net, mode="greedy", max_steps=max_steps)
        ch = np.stack(steps.choices)
        acts = np.asarray(steps.actions)
        rec: dict[str, Any] = {"policy": "", "scenario": scenario, "seed": int(s), **m}
        for i, n in enumerate(settings.rules):
            rec[f"x_agree_{n}"] = float((ch[:, i] == acts).mean())
        rec["x_wall_s"] = time.perf_counter() - t0
        recs.append(rec)
    return recs


# ---------------------------------------------------------------------------------- learning
def fit_bc(
    net: CandidateNet,
    opt: th.optim.Optimizer,
    data: Steps,
    epochs: int,
    batch_size: int,
    smoothing: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Cross-entropy of the labels over each state's candidates; (loss, accuracy) last epoch."""
    n = len(data)
    labels = np.asarray(data.labels)
    sizes = np.array([len(r) for r in data.rows])
    loss_sum = acc_sum = 0.0
    for _ in range(epochs):
        loss_sum = acc_sum = 0.0
        for idx in minibatches(sizes, batch_size, rng):
            x, valid, g = batch([data.rows[i] for i in idx], [data.globs[i] for i in idx])
            y = th.from_numpy(labels[idx])
            logits, _ = net(x, valid, g)
            logp = F.log_softmax(logits, dim=1)
            nll = -logp.gather(1, y[:, None]).squeeze(1)
            k = valid.sum(1).to(logp.dtype)
            uniform = -(logp * valid).sum(1) / k
            loss = ((1 - smoothing) * nll + smoothing * uniform).mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            loss_sum += loss.item() * len(idx)
            acc_sum += float((logits.argmax(1) == y).float().sum())
    return loss_sum / max(1, n), acc_sum / max(1, n)


def gae(steps: Steps, gamma: float, lam: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(advantages, value targets) of episodes laid end to end (``dones`` ends each)."""
    n = len(steps)
    r = np.asarray(steps.rewards) / scale
    v = np.asarray(steps.values)
    d = np.asarray(steps.dones)
    adv = np.zeros(n)
    last = 0.0
    for t in range(n - 1, -1, -1):
        nv = 0.0 if d[t] else v[t + 1]
        delta = r[t] + gamma * nv - v[t]
        last = delta + (0.0 if d[t] else gamma * lam * last)
        adv[t] = last
    return adv, adv + v


def ppo_update(
    net: CandidateNet,
    opt: th.optim.Optimizer,
    steps: Steps,
    adv: np.ndarray,
    ret: np.ndarray,
    s: Settings,
    rng: np.random.Generator,
    value_only: bool,
) -> dict[str, float]:
    """Clipped PPO epochs over the rollout (value only during the critic's warm-up)."""
    acts = np.asarray(steps.actions)
    old = np.asarray(steps.logps)
    a_n = (adv - adv.mean()) / (adv.std() + 1e-8)
    stats: dict[str, list[float]] = {"pg": [], "vf": [], "ent": [], "kl": [], "clipfrac": []}
    sizes = np.array([len(r) for r in steps.rows])
    for _ in range(s.n_epochs):
        for idx in minibatches(sizes, s.batch_size, rng):
            x, valid, g = batch([steps.rows[i] for i in idx], [steps.globs[i] for i in idx])
            logits, v = net(x, valid, g)
            logp_all = F.log_softmax(logits, dim=1)
            a = th.from_numpy(acts[idx])
            logp = logp_all.gather(1, a[:, None]).squeeze(1)
            ratio = th.exp(logp - th.from_numpy(old[idx]).float())
            A = th.from_numpy(a_n[idx]).float()
            pg = -th.min(ratio * A, ratio.clamp(1 - s.clip, 1 + s.clip) * A).mean()
            p = logp_all.exp()
            ent = -(th.where(valid, p * logp_all, th.zeros_like(p))).sum(1).mean()
            vf = F.smooth_l1_loss(v, th.from_numpy(ret[idx]).float())
            loss = s.vf_coef * vf if value_only else pg - s.ent_coef * ent + s.vf_coef * vf
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), s.max_grad_norm)
            opt.step()
            with th.no_grad():
                stats["pg"].append(float(pg))
                stats["vf"].append(float(vf))
                stats["ent"].append(float(ent))
                stats["kl"].append(float((th.from_numpy(old[idx]).float() - logp).mean()))
                stats["clipfrac"].append(float(((ratio - 1).abs() > s.clip).float().mean()))
    return {k: float(np.mean(v)) for k, v in stats.items()}


# ---------------------------------------------------------------------------------- run
class Run:
    """A training run's folder: ``state.pt`` (resume), ``best.pt``, ``model.pt``,
    ``log.jsonl`` (one line per DAgger round, PPO update and validation)."""

    def __init__(self, out: Path, settings: Settings) -> None:
        self.out = out
        self.s = settings
        out.mkdir(parents=True, exist_ok=True)
        # (seeded before the network's initial weights are drawn: they were the process's
        # torch RNG state, so a run's result hung on what had run before it in the process)
        th.manual_seed(settings.seed)
        self.rng = np.random.default_rng(settings.seed)
        self.net = CandidateNet(
            n_inputs(len(settings.rules), settings.pair_features), settings.hidden
        )
        if settings.init_from:  # (a resumed run's state.pt then replaces these weights)
            self.net.load_state_dict(th.load(settings.init_from, weights_only=True)["net"])
        self.opt = th.optim.Adam(self.net.parameters(), lr=settings.bc_lr)
        self.phase = "bc"
        self.round = 0  # DAgger rounds done
        self.update = 0  # PPO updates done
        self.steps_done = 0
        self.episodes_done = 0
        self.wall_s = 0.0
        #: ``best.pt``'s validation score and its kind (:func:`score_kind`): scores of two
        #: kinds are never compared (a resume that switches ``max_steps`` restarts ``best.pt``).
        self.best_score = math.inf
        self.best_kind = score_kind(settings.max_steps)
        self.reward_scale = 1.0
        self.envs: dict[str, CandidateEnv] = {}
        self.teacher = settings.make_teacher()
        #: ``best.pt`` is the lowest validated mean JCT among those meeting this (mean) SLO.
        self.slo_target = float(load_scenario(settings.eval_scenario).slo_target)

    # -- persistence
    def save(self) -> None:
        st = {
            "net": self.net.state_dict(),
            "opt": self.opt.state_dict(),
            "rng": self.rng.bit_generator.state,
            "torch_rng": th.get_rng_state(),
            "meta": self.meta(),
        }
        tmp = self.out / "state.pt.tmp"
        th.save(st, tmp)
        tmp.replace(self.out / "state.pt")
        self.save_model(self.out / "model.pt")

    def meta(self) -> dict[str, Any]:
        return {
            "settings": asdict(self.s),
            "phase": self.phase,
            "round": self.round,
            "update": self.update,
            "steps_done": self.steps_done,
            "episodes_done": self.episodes_done,
            "wall_s": self.wall_s,
            "best_score": self.best_score,
            "best_kind": self.best_kind,
            "reward_scale": self.reward_scale,
        }

    def save_model(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        th.save({"net": self.net.state_dict(), "meta": self.meta()}, tmp)
        tmp.replace(path)

    def _best_score_of(self, path: Path) -> float:
        """The validation score a saved model was kept for (``meta.best_score``)."""
        m = th.load(path, weights_only=True).get("meta", {})
        return float(m.get("best_score", m.get("best_jct", math.inf)))

    def _switch_best(self, kind: str, score: float) -> None:
        """A resume whose score kind differs from ``state.pt``'s: ``best.pt`` (of ``kind``)
        moves to ``best.<kind>.pt`` (where one is there already, the better of the two keeps
        that name and the other ``best.<kind>.prev.pt``: nothing is lost), and this kind's
        kept model, if any, comes back as ``best.pt`` with its score."""
        best = self.out / "best.pt"
        kept = self.out / f"best.{kind}.pt"
        if best.exists():
            if kept.exists() and self._best_score_of(kept) <= score:
                best.replace(self.out / f"best.{kind}.prev.pt")
            else:
                if kept.exists():
                    kept.replace(self.out / f"best.{kind}.prev.pt")
                best.replace(kept)
        back = self.out / f"best.{self.best_kind}.pt"
        restored = back.exists()
        if restored:
            back.replace(best)
            self.best_score = self._best_score_of(best)
        self.log(kind="best_restarted", best_kind_was=kind, best_score_was=score,
                 best_kind=self.best_kind, best_score=self.best_score,
                 kept=kept.name if kept.exists() else None, restored=restored)  # fmt: skip

    def load(self) -> None:
        st = th.load(self.out / "state.pt", weights_only=True)
        self.net.load_state_dict(st["net"])
        m = st["meta"]
        self.phase, self.round, self.update = m["phase"], m["round"], m["update"]
        self.steps_done, self.episodes_done = m["steps_done"], m["episodes_done"]
        self.wall_s = m["wall_s"]
        self.reward_scale = m["reward_scale"]
        # (a state.pt from before scores carried their kind: its run's max_steps says which)
        kind = m.get("best_kind", score_kind(int(m["settings"].get("max_steps", 0))))
        score = float(m.get("best_score", m.get("best_jct", math.inf)))
        if kind == self.best_kind:
            self.best_score = score
        else:  # another kind of score: best.pt is kept beside it, this kind's comes back
            self._switch_best(kind, score)
        if self.phase == "ppo":
            self.opt = th.optim.Adam(self.net.parameters(), lr=self.s.lr)
        self.opt.load_state_dict(st["opt"])
        self.rng.bit_generator.state = st["rng"]
        th.set_rng_state(st["torch_rng"])

    def log(self, **rec: Any) -> None:
        rec = {"wall_s": round(self.wall_s, 1), "steps": self.steps_done, **rec}
        with (self.out / "log.jsonl").open("a") as f:
            f.write(json.dumps(json_safe(rec)) + "\n")
        print(json.dumps(json_safe(rec)), flush=True)

    # -- episodes
    def scenario(self) -> str:
        """The curriculum's scenario for the next episode (by the share of PPO done)."""
        stages = self.s.curriculum
        frac = 0.0 if self.phase != "ppo" else self.wall_s / (60.0 * self.s.max_minutes)
        acc = 0.0
        for st in stages:
            acc += float(st.get("share", 1.0))
            if frac < acc:
                return str(st["scenario"])
        return str(stages[-1]["scenario"])

    def env(self, scenario: str) -> CandidateEnv:
        if scenario not in self.envs:
            self.envs[scenario] = CandidateEnv(
                scenario, self.s.rules, self.s.teachers, self.s.max_candidates, "user",
                self.s.migration_cooldown_s, self.s.pruning, self.s.pair_features,
            )  # fmt: skip
        return self.envs[scenario]

    def seed(self) -> int:
        return int(self.rng.integers(TRAIN_SEED_MIN, 2**31 - 1))

    def collect(
        self, episodes: int, net: CandidateNet | None, mode: str, beta: float
    ) -> tuple[Steps, list[dict[str, float]], list[str]]:
        data, metrics, teachers = Steps(), [], []
        scen = self.scenario()
        env = self.env(scen)
        teacher = self.teacher if self.phase == "bc" else None
        for _ in range(episodes):
            st, m = run_episode_env(
                env, self.seed(), net, mode, beta, self.rng, teacher, self.s.max_steps
            )
            data.extend(st)
            metrics.append(m)
            teachers.append(env.best_ref)
        self.steps_done += len(data)
        self.episodes_done += episodes
        return data, metrics, teachers

    def baselines(self) -> dict[str, float]:
        """Each rule's mean JCT on the validation seeds (the runner's episodes)."""
        sim = make_simulator(load_scenario(self.s.eval_scenario))
        return {
            f"jct_{n}": float(
                np.mean(
                    [run_episode(make_policy(n), sim, s)["jct_mean_s"] for s in self.s.eval_seeds]
                )
            )
            for n in dict.fromkeys([*self.s.teachers, *self.s.rules])
        }

    def validate(self) -> float:
        """Greedy episodes on the validation seeds; ``best.pt`` keeps the lowest mean JCT
        (a cut run: the lowest mean ``x_excess`` over the reference)."""
        s = self.s
        recs = evaluate_net(self.net, s, s.eval_scenario, s.eval_seeds, s.max_steps)
        jct = float(np.mean([r["jct_mean_s"] for r in recs]))
        cut = {}
        if s.max_steps > 0:
            cut = {"excess": float(np.mean([r["x_excess"] for r in recs]))}
        agree = {
            f"val_agree_{n}": float(np.mean([r[f"x_agree_{n}"] for r in recs]))
            for n in self.s.rules
        }
        self.log(kind="val", phase=self.phase, round=self.round, update=self.update,
                 jct_mean_s=jct, slo=float(np.mean([r["slo_attainment"] for r in recs])),
                 **cut, **agree)  # fmt: skip
        slo = float(np.mean([r["slo_attainment"] for r in recs]))
        slo_ok = slo != slo or slo >= self.slo_target  # NaN: no services, as gsg evaluate
        score = cut.get("excess", jct)  # (of kind score_kind(s.max_steps))
        if score < self.best_score and slo_ok:
            self.best_score = score
            self.save_model(self.out / "best.pt")
        return score

    # -- the phases
    def train(self, max_minutes: float | None = None) -> None:
        budget = 60.0 * (max_minutes if max_minutes is not None else self.s.max_minutes)
        start = time.perf_counter() - self.wall_s
        stop_at = self.wall_s + budget if max_minutes is not None else budget

        def tick() -> bool:
            self.wall_s = time.perf_counter() - start
            return self.wall_s < stop_at

        s = self.s
        if self.phase == "bc" and self.round == 0:
            self.log(kind="baselines", scenario=s.eval_scenario, **self.baselines())
        if self.phase == "bc" and self.round > s.dagger_rounds:
            # (resumed with a recipe that now asks for fewer DAgger rounds than were done)
            self.phase = "ppo"
            self.opt = th.optim.Adam(self.net.parameters(), lr=s.lr)
        data = Steps()
        while self.phase == "bc" and tick():
            if self.round == 0:
                new, ms, ts = self.collect(s.bc_episodes, None, "greedy", 0.0)
            else:
                beta = s.dagger_beta**self.round
                new, ms, ts = self.collect(s.dagger_episodes, self.net, "greedy", beta)
            data.extend(new)
            data.tail(s.dataset_max_steps)
            loss, acc = fit_bc(
                self.net, self.opt, data, s.bc_epochs, s.batch_size, s.label_smoothing, self.rng
            )
            self.round += 1
            tick()
            self.log(kind="dagger", round=self.round, dataset=len(data), loss=loss, acc=acc,
                     episodes=len(ms), jct_mean_s=float(np.mean([m["jct_mean_s"] for m in ms])),
                     **_excess(ms),
                     teacher_gandiva=ts.count("gandiva") / len(ts),
                     **_agreement(new, s.rules),
                     label_fallback=int(sum(m.get("x_label_fallback", 0) for m in ms)))  # fmt: skip
            share = s.imitation_share  # (1: out of time, DAgger resumes where it stopped)
            early = share < 1 and self.wall_s >= stop_at - (1 - share) * budget
            last = self.round > s.dagger_rounds or early
            if last:
                self.phase = "ppo"
                self.opt = th.optim.Adam(self.net.parameters(), lr=s.lr)
            if last or self.teacher is not None:
                self.validate()  # (best.pt may be a DAgger round's)
            self.save()
        data = Steps()
        while self.phase == "ppo" and self.update < s.ppo_updates and tick():
            roll, ms, ts = self.collect(s.episodes_per_update, self.net, "sample", 0.0)
            if self.update == 0:
                ep_ret = _episode_returns(roll)
                self.reward_scale = float(max(np.std(ep_ret), 1e-3))
            adv, ret = gae(roll, s.gamma, s.gae_lambda, self.reward_scale)
            warm = self.update < s.value_warmup_updates
            stats = ppo_update(self.net, self.opt, roll, adv, ret, s, self.rng, warm)
            self.update += 1
            tick()
            ch = np.stack(roll.choices)
            acts = np.asarray(roll.actions)
            agree = {f"agree_{n}": float((ch[:, i] == acts).mean()) for i, n in enumerate(s.rules)}
            self.log(kind="ppo", update=self.update, scenario=self.scenario(),
                     paired_return=float(np.mean(_episode_returns(roll))),
                     jct_mean_s=float(np.mean([m["jct_mean_s"] for m in ms])), **_excess(ms),
                     agree_teacher=float((np.asarray(roll.labels) == acts).mean()),
                     hold=float((acts == 0).mean()), value_only=warm, **agree, **stats)  # fmt: skip
            if self.update % s.eval_every == 0:
                self.validate()
            self.save()
        self.save()


def score_kind(max_steps: int) -> str:
    """What validation ranks ``best.pt`` by: ``jct_mean_s`` (the mean JCT in seconds, whole
    episodes) or, for a run whose episodes are cut (``max_steps`` > 0), ``x_excess`` (the mean
    relative excess over the reference, a fraction)."""
    return "x_excess" if max_steps > 0 else "jct_mean_s"


def _agreement(steps: Steps, rules: Sequence[str]) -> dict[str, float]:
    """How often the steps' actions and labels are each rule's choice."""
    ch = np.stack(steps.choices)
    acts, labels = np.asarray(steps.actions), np.asarray(steps.labels)
    out = {}
    for i, n in enumerate(rules):
        out[f"agree_{n}"] = float((ch[:, i] == acts).mean())
        out[f"label_agree_{n}"] = float((ch[:, i] == labels).mean())
    return out


def _excess(metrics: Sequence[dict[str, float]]) -> dict[str, float]:
    """Cut episodes' mean ``x_excess`` over the reference (none for whole episodes)."""
    if not metrics or "x_excess" not in metrics[0]:
        return {}
    return {"excess": float(np.mean([m["x_excess"] for m in metrics]))}


def _episode_returns(steps: Steps) -> np.ndarray:
    out, acc = [], 0.0
    for r, d in zip(steps.rewards, steps.dones, strict=True):
        acc += r
        if d:
            out.append(acc)
            acc = 0.0
    return np.asarray(out)


def _non_negative(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 0")
    return n


def load_model(path: str | Path) -> tuple[CandidateNet, Settings]:
    """A saved network and the settings it was trained with."""
    st = th.load(path, weights_only=True)
    s = Settings(**st["meta"]["settings"])
    net = CandidateNet(n_inputs(len(s.rules), s.pair_features), s.hidden)
    net.load_state_dict(st["net"])
    net.eval()
    return net, s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_sharing_gym.agents.candidate_dagger")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="DAgger from the per-seed best heuristic, then PPO")
    t.add_argument("--config", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--resume", action="store_true")
    t.add_argument("--max-minutes", type=float, default=None)
    e = sub.add_parser("evaluate", help="greedy episodes of saved models; gsg evaluate's records")
    e.add_argument("--model", required=True, help="comma-separated .pt files")
    e.add_argument("--scenario", default="default")
    e.add_argument("--seeds", default="960-989", type=seed_spec)
    e.add_argument("--json", required=True)
    e.add_argument(
        "--max-steps", type=_non_negative, default=0, help="cut each episode there (0: whole)"
    )
    e.add_argument(
        "--reference", default=None, help="the paired reference (one of the model's rules; "
        "default: the per-seed best of its teachers)"
    )  # fmt: skip
    a = p.parse_args(argv)
    th.set_num_threads(1)
    if a.cmd == "train":
        out = Path(a.out)
        try:
            settings = Settings.load(a.config)
            for sc in settings.curriculum:
                load_scenario(sc["scenario"])
        except (ValueError, OSError, KeyError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        run = Run(out, settings)
        if a.resume:
            if not (out / "state.pt").is_file():
                print(f"error: --resume: no {out / 'state.pt'}", file=sys.stderr)
                return 2
            run.load()
            run.net.train()
        run.train(a.max_minutes)
        return 0
    recs: list[dict[str, Any]] = []
    for path in a.model.split(","):
        net, s = load_model(path)
        if a.reference is not None:
            if a.reference not in s.rules:
                print(f"error: --reference {a.reference!r}: not among {path}'s rules "
                      f"({', '.join(s.rules)})", file=sys.stderr)  # fmt: skip
                return 2
            s.teachers = [a.reference]
        for r in evaluate_net(net, s, a.scenario, a.seeds, a.max_steps):
            r["policy"] = path
            recs.append(r)
    atomic_write_text(Path(a.json), json.dumps([json_safe(r) for r in recs], indent=1) + "\n")
    return 0


__all__ = [
    "CandidateEnv",
    "CandidateNet",
    "Run",
    "Settings",
    "evaluate_net",
    "load_model",
    "main",
    "run_episode_env",
]

if __name__ == "__main__":
    raise SystemExit(main())
