"""Every YAML a user edits, in one place: ``scenarios/`` (with ``heldout/`` and ``fidelity/``),
``recipes/`` (training hyperparameters, rl-zoo style) and ``leaderboards/`` (leaderboard suites).

This folder sits at the repository's root and installs as the package data of
``gpu_sharing_env.configs`` (``pyproject.toml``'s package-dir), so code finds a config by name
the same way from the wheel and from a checkout: through :data:`ROOT`.
"""

from pathlib import Path

#: Where the configs are: ``configs/`` in a checkout, ``gpu_sharing_env/configs/`` in the wheel.
ROOT = Path(__file__).resolve().parent
