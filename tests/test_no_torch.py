"""The core, the baselines and the evaluation harness work without torch / SB3 (the ``rl``
extra): checked in a subprocess where importing them fails as if they were not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.test_evaluate_cli import TINY

BLOCK = textwrap.dedent(
    """
    import sys

    class _NotInstalled:
        # a meta-path finder that makes the RL packages look uninstalled

        BLOCKED = ("torch", "stable_baselines3", "sb3_contrib", "tensorboard")

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NotInstalled())
    """
)


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_core_harness_and_baselines_without_torch(tmp_path: Path) -> None:
    p = _run(
        """
        import gymnasium as gym
        import gpu_sharing_gym.baselines, gpu_sharing_env, gpu_sharing_gym.leaderboard, gpu_sharing_gym.report, gpu_sharing_gym.fidelity
        from gpu_sharing_env.registry import UnknownPolicyError, make_policy
        from gpu_sharing_gym.cli import main
        env = gym.make("GpuSharing-v0", scenario="default")
        env.reset(seed=0)
        assert main(["evaluate", "--policy", "first_fit", "--seeds", "1", "--quiet"]) == 0
        assert main(["leaderboard", "--scenarios", "default", "--policies", "first_fit",
                     "--seeds", "1", "--quiet", "--out", "lb", "--workers", "1"]) == 0
        try:
            make_policy("ppo_default")
        except UnknownPolicyError as e:
            print("AGENT:", e)
        assert "torch" not in sys.modules
        """,
        tmp_path,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "AGENT: policy 'ppo_default': cannot import" in p.stdout
    assert "gpu-sharing-gym[rl]" in p.stdout
    assert (tmp_path / "lb" / "index.html").is_file() and not (tmp_path / "lb" / "tb").exists()
    assert "tb/ not written" in p.stderr


def test_train_without_torch_says_what_to_install(tmp_path: Path) -> None:
    p = _run(
        """
        from gpu_sharing_gym.cli import main
        raise SystemExit(main(["train", "--out", "x"]))
        """,
        tmp_path,
    )
    assert p.returncode != 0
    assert p.stderr.strip().splitlines()[-1].startswith("gsg train: needs the RL extra")


def test_leaderboard_skips_agents_that_need_torch_and_runs_the_rest(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "suite.yaml").write_text(
        "description: a suite with learned agents\n"
        "scenarios: [tiny.yaml]\npolicies: [first_fit, ppo, ppo_default]\nseeds: 1\n"
    )
    p = _run(
        """
        from gpu_sharing_gym.cli import main
        raise SystemExit(main(["leaderboard", "--suite", "suite.yaml", "--quiet", "--out", "lb",
                               "--workers", "1"]))
        """,
        tmp_path,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    warning = [line for line in p.stderr.splitlines() if "skipping" in line]
    assert warning == [
        "gsg leaderboard: warning: skipping ppo, ppo_default (these agents need torch, which "
        "is not installed: pip install 'gpu-sharing-gym[rl]'); running the rest"
    ]
    rows = (tmp_path / "lb" / "leaderboard.csv").read_text().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["first_fit"]


def test_an_agent_asked_for_alone_without_torch_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    p = _run(
        """
        from gpu_sharing_gym.cli import main
        raise SystemExit(main(["leaderboard", "--scenarios", "tiny.yaml", "--policies", "ppo",
                               "--seeds", "1", "--quiet", "--out", "lb"]))
        """,
        tmp_path,
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "gsg leaderboard: error: --policies: ppo need torch, which is not installed: "
        "pip install 'gpu-sharing-gym[rl]'"
    ]
    assert not (tmp_path / "lb" / "cells").exists()


def test_train_list_configs_without_torch(tmp_path: Path) -> None:
    p = _run(
        """
        import sys
        from gpu_sharing_gym.cli import main
        rc = main(["train", "--list-configs"])
        assert "torch" not in sys.modules
        raise SystemExit(rc)
        """,
        tmp_path,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    names = [line.split()[0] for line in p.stdout.splitlines() if not line.startswith(" ")]
    assert "maskable_ppo" in names and "maskable_ppo_v1_lagrange" in names
