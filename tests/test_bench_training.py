"""``gsg bench --training`` (issue 22) at tiny size: one process, both learners and the raw
env rates, with their ratios printed, in the JSON and in the Markdown report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_training_section_runs_and_prints_ratios(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, "-m", "gpu_sharing_gym.cli", "bench", "--training",
        "--training-steps", "256", "--seconds", "0.1", "--quiet", "--json", str(out),
    ]  # fmt: skip
    p = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    data = json.loads(out.read_text())
    assert set(data) >= {"training", "checks", "machine_info"}
    assert "replay" not in data and "env_steps_per_s" not in data  # only this section
    t = data["training"]
    ours, theirs = t["maskable_ppo"], t["cartpole_ppo"]
    # tiny size: each learner's rollout is cut to the steps asked for
    assert ours["steps"] == theirs["steps"] == 256
    assert ours["n_steps"] * ours["n_envs"] == theirs["n_steps"] == 256
    assert ours["steps_per_s"] > 0 and theirs["steps_per_s"] > 0
    assert t["x_cartpole_ppo"] == round(ours["steps_per_s"] / theirs["steps_per_s"], 4)
    # the previous default recipe, measured in the same run as a comparison row
    before = t["maskable_ppo_before"]
    assert t["before_recipe"] == "maskable_ppo_antman" and before["steps"] == 256
    assert t["x_cartpole_ppo_before"] == round(before["steps_per_s"] / theirs["steps_per_s"], 4)
    # the option-agnostic learning recipes, likewise
    assert set(t["learners"]) == {
        "maskable_ppo_v1_pool",
        "maskable_ppo_v1_light",
        "maskable_ppo_v1_fast",
    }
    for v in t["learners"].values():
        assert v["steps"] == 256
        assert v["x_cartpole_ppo"] == round(v["steps_per_s"] / theirs["steps_per_s"], 4)
    rc = ours["reference_curves"]
    assert rc["computed"] + rc["from_disk"] >= ours["n_envs"]  # one per episode started
    assert set(t["env_steps_per_s"]) == {"GpuSharing-v1", "GpuSharing-v0"}
    big = t["large_fleet"]  # raw v1 on a large fleet, for the record
    assert big["scenario"] == "pai-busy" and big["env_steps_per_s"] > 0
    assert abs(big["env_x_cartpole"] - big["env_steps_per_s"] / t["cartpole_steps_per_s"]) < 1e-4
    for k, v in t["env_steps_per_s"].items():
        assert v > 0
        assert abs(t["env_x_cartpole"][k] - v / t["cartpole_steps_per_s"]) < 1e-4
    assert any("issue 22" in name for name in data["checks"])
    assert len(t["load_avg_1m"]) == 2  # the machine's other load, recorded with the figures
    # the ratios are printed
    text = p.stdout
    assert "x CartPole" in text and "SB3 PPO (MlpPolicy) on CartPole-v1" in text
    line = next(ln for ln in text.splitlines() if "MaskablePPO, recipe maskable_ppo" in ln)
    assert abs(float(line.split()[-1]) - t["x_cartpole_ppo"]) <= 1e-3
    for k in ("GpuSharing-v1", "GpuSharing-v0"):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{k} on default"))
        assert abs(float(line.split()[-1]) - t["env_x_cartpole"][k]) <= 1e-4
    # and rendered
    from gpu_sharing_gym.bench.markdown import render

    md = render(data)
    assert "## Training loop beside CartPole (issue 22)" in md
    assert f"**{t['x_cartpole_ppo']:.3f}**" in md
    assert "raw `GpuSharing-v1` on `pai-busy` (a large fleet)" in md
    line = next(ln for ln in text.splitlines() if "GpuSharing-v1 on pai-busy" in ln)
    assert abs(float(line.split()[-1]) - big["env_x_cartpole"]) <= 1e-4
