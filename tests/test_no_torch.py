"""The core, the baselines and the evaluation harness work without torch / SB3 (the ``rl``
extra): checked in a subprocess where importing them fails as if they were not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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
