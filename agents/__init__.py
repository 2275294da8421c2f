"""RL placement agents for GpuSharing-v0 (stable-baselines3 / sb3-contrib).

* :mod:`gpu_sharing_gym.agents.policy`: set-structured networks for ``GpuSharing-v0`` (cluster-size-free).
* :mod:`gpu_sharing_gym.agents.option_policy`: option-agnostic networks for ``GpuSharing-v1`` (any option set,
  cluster size and window) with a two-level wait-or-place action distribution.
* :mod:`gpu_sharing_gym.agents.agent`: trained agents as baselines' Policy; safe checkpoint loading.
* :mod:`gpu_sharing_gym.agents.config`: rl-zoo style hyperparameter files (``configs/recipes/``).
* :mod:`gpu_sharing_gym.agents.envs`: training envs (held-out seed ranges, expert hint, paired rewards against
  a reference heuristic, vector envs over one or several scenarios).
* :mod:`gpu_sharing_gym.agents.bc`, :mod:`gpu_sharing_gym.agents.expert`, :mod:`gpu_sharing_gym.agents.lookahead`: behaviour cloning, labelled
  episodes (heuristics or the planner; parallel, cached) and rollout-improved labels.
* :mod:`gpu_sharing_gym.agents.callbacks`: TensorBoard ``sim/`` and ``eval/`` tags, checkpoints, progress.
* :mod:`gpu_sharing_gym.agents.train`: the training command line (``gsg train``).
"""

from __future__ import annotations

from typing import Any


def make_model(env: Any, seed: int = 0, algo: str = "maskable_ppo", scenario: str = "default"):  # type: ignore[no-untyped-def]
    """An untrained model with the set policy and ``configs/recipes/<algo>.yaml``'s
    hyperparameters for ``scenario`` (no pretraining; for benchmarks and experiments)."""
    from gpu_sharing_gym.agents.config import ALGOS, default_config_path, load_hyperparams
    from gpu_sharing_gym.agents.policy import SetActorCriticPolicy, SetPoolExtractor, SetPPOPolicy

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
