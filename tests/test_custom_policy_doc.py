"""docs/custom_policy.md's policy is complete: extracted from the page, it runs on the
leaderboard beside a baseline through ``module:Class`` (no edit to the package)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "custom_policy.md"


def test_doc_policy_is_short_and_runs_on_the_leaderboard(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(# my_sched\.py\n.*?)```", DOC.read_text(), re.S)[0]
    assert len(code.strip().splitlines()) <= 25  # "a 20-line custom policy"
    (tmp_path / "my_sched.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "gpu_sharing_gym.cli", "leaderboard", "--scenarios", "default",
         "--policies", "first_fit,my_sched:ShortestFastest", "--seeds", "2", "--workers", "2",
         "--quiet", "--out", str(tmp_path / "lb")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    csv = (tmp_path / "lb" / "leaderboard.csv").read_text()
    rows = [r for r in csv.splitlines() if r.startswith("my_sched:ShortestFastest,default,")]
    assert len(rows) == 2 and all(",ok," in r for r in rows)
