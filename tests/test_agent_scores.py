"""scripts/agent_scores.py: one policy against the best other on a leaderboard's output (the
model card's table), checked against the cells themselves."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from gpu_sharing_gym.commands import leaderboard as cli
from tests.helpers import tiny_scenario_yaml

ROOT = Path(__file__).resolve().parents[1]


def _script() -> object:
    spec = importlib.util.spec_from_file_location(
        "_agent_scores", ROOT / "scripts" / "agent_scores.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_paired_difference_to_the_best_other_policy(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(tiny_scenario_yaml(max_jobs=6))
    out = tmp_path / "lb"
    pols = "first_fit,time_sharing,fifo_exclusive"
    args = ["--scenarios", str(tiny), "--out", str(out), "--workers", "1", "--quiet"]
    assert cli.main([*args, "--policies", pols, "--seeds", "3"]) == 0
    mod = _script()
    df = mod.scores([out], "fifo_exclusive")  # type: ignore[attr-defined]
    (row,) = df.to_dict("records")
    summ = pd.read_csv(out / "summary.csv")
    others = summ[(summ["policy"] != "fifo_exclusive") & summ["meets_slo"]]
    best = others.sort_values("jct_mean_s_mean").iloc[0]["policy"]
    assert row["best_other"] == best and row["seeds"] == 3 and row["policies"] == 3
    cells = pd.read_csv(out / "leaderboard.csv").pivot(
        index="seed", columns="policy", values="jct_mean_s"
    )
    d = (cells["fifo_exclusive"] - cells[best]).to_numpy()
    assert row["diff"] == np.mean(d)
    assert np.isclose(row["diff_ci"], stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3))
    assert row["better"] == int((d < 0).sum())
    md = mod.markdown(df, "fifo_exclusive")  # type: ignore[attr-defined]
    assert md.count("\n") == 3 and f"| {best} |" in md
    assert mod.main([str(out), "--policy", "nobody"]) == 2  # type: ignore[attr-defined]
