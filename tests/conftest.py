"""Session-wide test set-up: what the code would keep in the user's cache (reference curves of
the paired reward, ``gpu_sharing_gym.agents.envs.user_cache_dir``) goes to a directory of this
test session instead, inherited by the subprocesses the tests start, and removed at the end."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_MADE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    if "GSG_CACHE_DIR" not in os.environ:
        path = tempfile.mkdtemp(prefix="gsg-test-cache-")
        os.environ["GSG_CACHE_DIR"] = path
        _MADE.append(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _MADE:
        shutil.rmtree(path, ignore_errors=True)
    if _MADE:
        os.environ.pop("GSG_CACHE_DIR", None)
