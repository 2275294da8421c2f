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
    # Where some compiled module is not built (no C compiler at install), every process that
    # imports the package says so in one warning line on stderr, which the tests that read a
    # command's stderr line by line would count. Both modes give the same bits, so such a
    # session runs pure Python and quiet (tests/test_compiled.py sets its own modes).
    from gpu_sharing_env import _modes

    if not _modes.pure_forced() and any(_modes._extension(n) is None for n in _modes.MODULES):
        os.environ[_modes.PURE_ENV] = "1"


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _MADE:
        shutil.rmtree(path, ignore_errors=True)
    if _MADE:
        os.environ.pop("GSG_CACHE_DIR", None)
