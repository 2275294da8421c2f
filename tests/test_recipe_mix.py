"""The Lagrange recipe as a fine-tune on a scenario mix (``maskable_ppo_v1_lagrange_mix``): its
settings are the shipped ``ppo``'s but the seed and the step budget, and a run on
``--scenario default-x2,default`` from ``ppo`` alternates its envs over the two scenarios,
validates on the first and keeps every checkpoint's model (docs/notes/2026-11-29-ppo-default-x2.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from gpu_sharing_gym.agents.config import AGENT_CONFIG_DIR
from gpu_sharing_gym.agents.envs import make_vec_env

ROOT = Path(__file__).resolve().parent.parent
MIX = AGENT_CONFIG_DIR / "maskable_ppo_v1_lagrange_mix.yaml"


def test_mix_recipe_is_the_lagrange_recipe_but_its_seed_and_budget() -> None:
    mix = yaml.safe_load(MIX.read_text())["default"]
    lagrange = yaml.safe_load((AGENT_CONFIG_DIR / "maskable_ppo_v1_lagrange.yaml").read_text())
    differ = {k for k in mix.keys() | lagrange["default"].keys()
              if mix.get(k) != lagrange["default"].get(k)}  # fmt: skip
    assert differ == {"seed", "n_timesteps"}
    # validation never on the leaderboard's seeds 0-9; every checkpoint kept for screening
    assert min(mix["eval_seeds"]) >= 1000 and mix["keep_models"] is True


def test_mixed_envs_alternate_the_scenarios_with_their_own_slo_targets() -> None:
    venv = make_vec_env(
        "default-x2,muxflow-t4", 4, 0, {"window_order": "predicted"}, env_id="GpuSharing-v1"
    )
    try:
        cfgs = venv.get_attr("cfg")
        assert [c.name for c in cfgs] == ["default-x2", "muxflow-t4"] * 2
        # what the trainer hands the SLO multiplier: each env's own target
        assert [c.slo_target for c in cfgs] == [0.95, 0.99] * 2
        # one padded layout for both (default-x2 has the more GPUs)
        assert len({e.max_gpus for e in venv.get_attr("unwrapped")}) == 1
    finally:
        venv.close()


def test_a_tiny_mix_run_from_ppo_validates_on_the_first_scenario(tmp_path: Path) -> None:
    tiny = yaml.safe_load(MIX.read_text())
    tiny["default"].update(
        n_timesteps=512, n_envs=2, eval_seeds=[1000], eval_freq=256, checkpoint_freq=256,
        train_seed_pool=2, paired_cache_dir=None,
    )  # fmt: skip
    cfg = tmp_path / "tiny_mix.yaml"
    cfg.write_text(yaml.safe_dump(tiny))
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--config", str(cfg),
         "--init-from", "ppo", "--scenario", "default-x2,default", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["scenario"] == "default-x2" and m["scenarios"] == ["default-x2", "default"]
    assert [h["timesteps"] for h in m["eval_history"]] == [256, 512]
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["scenario_arg"] == "default-x2,default"
    assert Path(saved["init_from"]).name == "ppo.zip" and saved["hyperparams"]["pretrain"] is None
    kept = sorted(int(p.stem.removeprefix("step_")) for p in (out / "models").glob("step_*.zip"))
    assert kept[-2:] == [256, 512]
