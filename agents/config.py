"""Training hyperparameters in YAML, in the style of rl-baselines3-zoo.

``configs/recipes/<algo>.yaml`` maps scenario names to settings; the ``default:`` entry applies
to every scenario, and a scenario's own entry overrides its keys (nested mappings such as
``policy_kwargs`` are merged key by key)::

    default:
      n_timesteps: 200000
      learning_rate: 1.0e-4
      policy_kwargs: {hidden: 64}
      pretrain: {expert: antman, episodes: 150}
    pai-hetero:
      n_timesteps: 500000

Keys of :class:`TrainSettings` drive the training script; every other key goes to the
algorithm's constructor and must be one of its parameters. Errors are one line naming the
file, the key and the rule.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm

from gpu_sharing_env.config import ConfigError, from_dict, non_negative, positive, rule
from gpu_sharing_gym.agents.recipes import AGENT_CONFIG_DIR as AGENT_CONFIG_DIR
from gpu_sharing_gym.agents.recipes import default_config_path as default_config_path
from gpu_sharing_gym.agents.recipes import recipe_names as recipe_names
from gpu_sharing_gym.agents.recipes import recipe_summary as recipe_summary
from gpu_sharing_gym.agents.recipes import resolve_config as resolve_config

#: Algorithms the training script knows (name -> SB3 class).
ALGOS: dict[str, type[BaseAlgorithm]] = {
    "maskable_ppo": MaskablePPO,
    "ppo": PPO,
    "a2c": A2C,
    "dqn": DQN,
}
#: Algorithms that read the action mask; the others run with ``invalid_action="noop"``.
MASKED_ALGOS = ("maskable_ppo",)


@dataclass(frozen=True)
class PretrainSettings:
    """Behaviour cloning before RL (actor-critic set policies only; see ``gpu_sharing_gym.agents.bc``)."""

    expert: str = "antman"
    """A heuristic from ``baselines`` without cluster mechanisms, or ``planner`` (expert
    iteration: ``gpu_sharing_gym.agents.planner``, configured by ``expert_kwargs``)."""
    expert_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the planner (``base``, ``samples``, ``horizon``, ...)."""
    cache_dir: str | None = None
    """Where expert-labelled episodes are kept and reused (``gpu_sharing_gym.agents.expert``); None: the run
    directory's ``demos/``. Share one across runs to label thousands of episodes once."""
    episodes: int = field(default=100, metadata=non_negative())
    """Expert episodes recorded first."""
    lookahead_episodes: int = field(default=0, metadata=non_negative())
    """Episodes labelled by rollout policy improvement over the expert (``gpu_sharing_gym.agents.lookahead``)."""
    lookahead_horizon: int = field(default=8, metadata=non_negative())
    """Decisions each candidate heuristic makes in a rollout before the expert takes over."""
    lookahead_margin: float = field(default=0.0, metadata=non_negative())
    """Relative gain over the expert's own rollout a candidate needs to become the label."""
    workers: int = field(default=1, metadata=positive())
    """Processes labelling episodes (the data does not depend on it)."""
    epochs: int = field(default=15, metadata=positive())
    """Passes over the data after each round."""
    dagger_rounds: int = field(default=0, metadata=non_negative())
    """DAgger rounds: run the student, label its states with the expert, refit."""
    dagger_episodes: int = field(default=50, metadata=positive())
    lr: float = field(default=1e-3, metadata=positive())
    batch_size: int = field(default=256, metadata=positive())


@dataclass(frozen=True)
class SloMultiplierSettings:
    """The SLO weight as a Lagrange multiplier (``gpu_sharing_gym.agents.callbacks.SloMultiplier``):
    the leaderboard asks the *mean* SLO attainment over seeds to meet the target, so the weight
    rises while the recent training episodes' mean attainment is below ``target + margin`` and
    falls while above. Use with ``reward_kwargs: {slo_form: linear}``."""

    lr: float = field(default=100.0, metadata=positive())
    """Weight change per rollout per unit of attainment gap (``λ += lr · (target + margin - A)``)."""
    margin: float = field(default=0.01, metadata=non_negative())
    """Attainment aimed at above the scenario's target (the validation seeds' mean is noisy)."""
    max_weight: float = field(default=200.0, metadata=positive())
    window: int = field(default=32, metadata=positive())
    """Training episodes the mean attainment is taken over (the latest ones)."""


@dataclass(frozen=True)
class TrainSettings:
    """What the training script reads (everything else goes to the algorithm)."""

    n_timesteps: int = field(default=100_000, metadata=positive())
    n_envs: int = field(default=1, metadata=positive())
    vec_env: str = field(
        default="in_process",
        metadata=rule(
            lambda v: v in ("in_process", "two_process", "subprocess"),
            "in_process, two_process or subprocess",
        ),
    )
    """How the ``n_envs`` envs are stepped: one after another in the training process, with one
    batched policy forward (``in_process``, SB3's ``DummyVecEnv``); half here and half in one
    worker process at the same time (``two_process``, :class:`~gpu_sharing_gym.agents.vec.TwoProcessVecEnv`:
    two cores busy during rollouts); or one process each (``subprocess``). The episodes are the
    same."""
    update_threads: int = field(default=1, metadata=positive())
    """Torch threads during the policy update and the warm start's fitting (rollouts keep one:
    with ``two_process`` the worker has the second core, and an idle OpenMP team spins). Two on
    a two-core machine: the minibatches are large enough to share (docs/agents.md, "The
    learning loop")."""
    seed: int = field(default=0, metadata=non_negative())
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    pretrain: PretrainSettings | None = None
    eval_freq: int = field(default=10_000, metadata=positive())
    """Timesteps between evaluations on the held-out validation seeds."""
    eval_seeds: tuple[int, ...] = field(
        default=(1000, 1001, 1002, 1003, 1004),
        metadata=rule(lambda v: len(v) > 0 and all(0 <= s < 1_000_000 for s in v),
                      "a non-empty list of seeds in 0..999999 (training seeds are >= 1000000)"),
    )  # fmt: skip
    eval_baselines: tuple[str, ...] = (
        "speed_sjf",
        "antman",
        "gandiva",
        "time_sharing",
        "reserve_pack",
        "first_fit",
    )
    """Baselines evaluated once on the same seeds: the best is logged beside the agent."""
    checkpoint_freq: int = field(default=10_000, metadata=positive())
    keep_models: bool = False
    """Also keep every checkpoint's model as ``models/step_<N>.zip`` (the agent metadata inside,
    loadable by path wherever a policy name is accepted), never removed. The validation seeds
    pick ``best_model.zip``, but a few heavy seeds decide their mean (docs/agents.md, "Choosing
    a checkpoint"): kept models can be compared afterwards on many more seeds."""
    figure_every: int = field(default=1, metadata=non_negative())
    """Log a cluster occupancy figure every this many evaluations (0: never)."""
    expert_hint: str | None = None
    """A heuristic whose proposed action the agent sees (``obs["hint"]``) and may follow or
    override (residual policy learning; ``gpu_sharing_gym.agents.envs.ExpertHint``). None: no hint."""
    work_conserving: bool = True
    """Masked algorithms only: hide *wait* while some job can be placed (the agent then
    decides where and which, never whether). ``GpuSharing-v1`` agents decide *wait* on their
    own (a two-level action distribution) and should leave this off."""
    env_id: str = field(
        default="GpuSharing-v0",
        metadata=rule(lambda v: v in ("GpuSharing-v0", "GpuSharing-v1"),
                      "GpuSharing-v0 or GpuSharing-v1"),
    )  # fmt: skip
    """``GpuSharing-v1``: option-agnostic observations and network (``gpu_sharing_gym.agents.option_policy``;
    ``maskable_ppo`` only), one checkpoint for every scenario."""
    policy: str = field(
        default="auto",
        metadata=rule(lambda v: v in ("auto", "candidate"), "auto or candidate"),
    )
    """The network: ``auto`` (by ``env_id``: the set network on v0, the option-agnostic one on
    v1) or ``candidate`` (``GpuSharing-v1`` only: the policy over candidates,
    ``gpu_sharing_gym.agents.candidate_policy``; ``env_kwargs: {rule_inputs: [...]}`` adds
    each rule's choice to the observation, an input feature whose agreement with the agent is
    logged as ``rules/agree_<rule>``)."""
    paired_reference: str | None = None
    """A heuristic whose return on the same episode is subtracted from the agent's, as an
    input-dependent baseline (``gpu_sharing_gym.agents.envs.PairedReward``; the ``jct`` reward). None: off."""
    normalize_reward: bool = False
    """Scale rewards by a running estimate of the return's standard deviation (SB3's
    ``VecNormalize``, with the algorithm's ``gamma``), saved with every checkpoint."""
    train_seed_pool: int = field(default=0, metadata=non_negative())
    """Training episodes draw their seeds from this many fixed training seeds
    (``gpu_sharing_gym.agents.envs.train_seed_pool``; the same in every run) instead of the
    whole training range: episodes repeat, so per-seed work is cached (the paired reward's
    reference curve). 0: the whole range."""
    paired_cache_dir: str | None = None
    """A directory where the paired reward's reference curves are kept as ``.npz`` files and
    reused across processes and runs (``gpu_sharing_gym.agents.envs.ReferenceCurveCache``);
    ``user``: the user's cache (``$GSG_CACHE_DIR``, else ``~/.cache/gpu-sharing-gym``). None:
    in memory only."""
    seed_replay: bool = False
    """Draw the pooled training seeds by the agent's regret against ``paired_reference`` on
    each (prioritised level replay, ``gpu_sharing_gym.agents.envs.SeedReplay``) instead of
    uniformly: episodes go where the agent trails the heuristic. Needs ``train_seed_pool`` and
    ``paired_reference``."""
    slo_multiplier: SloMultiplierSettings | None = None
    """Adapt the reward's SLO weight during training as a Lagrange multiplier on the mean
    attainment (:class:`SloMultiplierSettings`); None: the weight stays as ``reward_kwargs`` set
    it."""


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def load_hyperparams(
    path: str | Path, scenario: str, algo: str
) -> tuple[TrainSettings, dict[str, Any], dict[str, Any]]:
    """(training settings, algorithm kwargs, the resolved flat mapping) for ``scenario``."""
    src = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{src}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{src}: cannot read ({e.strerror or type(e).__name__})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{src}: not valid YAML ({str(e).splitlines()[0]})") from None
    return resolve_hyperparams(data, src, scenario, algo)


def resolve_hyperparams(
    data: Any, src: str, scenario: str, algo: str
) -> tuple[TrainSettings, dict[str, Any], dict[str, Any]]:
    """:func:`load_hyperparams` for an already parsed mapping (``src`` names it in errors)."""
    if algo not in ALGOS:
        raise ConfigError(f"--algo: must be one of {', '.join(ALGOS)} (got {algo!r})")
    if not isinstance(data, dict) or not isinstance(data.get("default", {}), dict):
        raise ConfigError(f"{src}: must map scenario names (and 'default') to settings")
    merged: dict[str, Any] = dict(data.get("default") or {})
    entry = data.get(scenario)
    if entry is not None and scenario != "default":
        if not isinstance(entry, dict):
            raise ConfigError(f"{src}: {scenario}: must be a mapping of settings")
        merged = _merge(merged, entry)
    own = {f for f in TrainSettings.__dataclass_fields__}
    settings = from_dict(
        TrainSettings, {k: v for k, v in merged.items() if k in own}, src=src, where=scenario
    )
    algo_kwargs = {k: v for k, v in merged.items() if k not in own}
    params = inspect.signature(ALGOS[algo].__init__).parameters
    for k in algo_kwargs:
        if k not in params or k in ("self", "policy", "env", "policy_kwargs"):
            allowed = sorted(p for p in params if p not in ("self", "policy", "env"))
            raise ConfigError(
                f"{src}: {scenario}.{k}: not a setting of the script or of {ALGOS[algo].__name__} "
                f"(script: {', '.join(sorted(own))}; algorithm: {', '.join(allowed)})"
            )
    # plain lists and dicts (YAML- and JSON-safe)
    resolved = json.loads(json.dumps({**asdict(settings), **algo_kwargs}))
    return settings, algo_kwargs, resolved
