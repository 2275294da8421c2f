"""RL placement agents for GpuSharing-v0 (stable-baselines3 / sb3-contrib).

* :mod:`agents.policy`: set-structured networks for ``GpuSharing-v0`` (cluster-size-free).
* :mod:`agents.option_policy`: option-agnostic networks for ``GpuSharing-v1`` (any option set,
  cluster size and window) with a two-level wait-or-place action distribution.
* :mod:`agents.agent`: trained agents as baselines' Policy; safe checkpoint loading.
* :mod:`agents.config`: rl-zoo style hyperparameter files (``agents/hyperparams/``).
* :mod:`agents.envs`: training envs (held-out seed ranges, expert hint, paired rewards against
  a reference heuristic, vector envs over one or several scenarios).
* :mod:`agents.bc`, :mod:`agents.expert`, :mod:`agents.lookahead`: behaviour cloning, labelled
  episodes (heuristics or the planner; parallel, cached) and rollout-improved labels.
* :mod:`agents.callbacks`: TensorBoard ``sim/`` and ``eval/`` tags, checkpoints, progress.
* ``scripts/train.py``: the training command line.
"""

from __future__ import annotations

from typing import Any


def make_model(env: Any, seed: int = 0, algo: str = "maskable_ppo", scenario: str = "default"):  # type: ignore[no-untyped-def]
    """An untrained model with the set policy and ``agents/hyperparams/<algo>.yaml``'s
    hyperparameters for ``scenario`` (no pretraining; for benchmarks and experiments)."""
    from agents.config import ALGOS, default_config_path, load_hyperparams
    from agents.policy import SetActorCriticPolicy, SetPoolExtractor, SetPPOPolicy

    settings, algo_kwargs, _ = load_hyperparams(default_config_path(algo), scenario, algo)
    if algo == "dqn":
        return ALGOS[algo](
            "MultiInputPolicy", env, seed=seed, device="cpu",
            policy_kwargs={"features_extractor_class": SetPoolExtractor,
                           "features_extractor_kwargs": dict(settings.policy_kwargs)},
            **algo_kwargs,
        )  # fmt: skip
    policy = SetActorCriticPolicy if algo == "maskable_ppo" else SetPPOPolicy
    return ALGOS[algo](
        policy, env, seed=seed, device="cpu", policy_kwargs=dict(settings.policy_kwargs),
        **algo_kwargs,
    )  # fmt: skip
