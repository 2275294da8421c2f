"""The ``gsg`` subcommands. What several of them parse alike (the parser class, the error line,
seeds, ranges, output paths) is :mod:`gpu_sharing_gym.plumbing.cli_args`, which ``gsg train`` shares."""

from __future__ import annotations

from gpu_sharing_gym.plumbing.cli_args import seed_spec as seed_spec
