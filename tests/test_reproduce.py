"""scripts/reproduce.py and the fidelity experiments: record fields and types, ``holds`` equal
to the claim's direction recomputed from the record's own detail values, the CLI's errors and
its JSON output. Never a hard-coded simulated value: the experiments may or may not reproduce
their papers; these tests check that each record says honestly which."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gsg.fidelity import EXPERIMENTS, OPS, RECORD_FIELDS

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reproduce.py"


def _recompute(rec: dict[str, Any]) -> bool:
    detail = rec["detail"]
    ok = []
    for c in rec["checks"]:
        value = detail[c["num"]] / detail[c["den"]] if c["den"] is not None else detail[c["num"]]
        assert value == pytest.approx(c["value"], nan_ok=True)
        passed = math.isfinite(value) and OPS[c["op"]](value, c["bound"])
        assert passed == c["ok"]
        ok.append(passed)
    return all(ok)


@pytest.fixture(scope="module")
def records() -> dict[str, dict[str, Any]]:
    return {exp_id: fn([0], True) for exp_id, fn in EXPERIMENTS.items()}


def test_registry_covers_the_issue() -> None:
    assert set(EXPERIMENTS) >= {
        "muxflow-online",
        "muxflow-offline",
        "muxflow-ablation",
        "muxflow-errors",
        "pai-reserve-pack",
        "pai-sjf",
        "gpupool-stp",
        "horus",
        "gpulet",
    }


@pytest.mark.parametrize("exp_id", list(EXPERIMENTS))
def test_record_fields_and_direction(records: dict[str, dict[str, Any]], exp_id: str) -> None:
    rec = records[exp_id]
    assert set(RECORD_FIELDS) <= set(rec)
    assert rec["id"] == exp_id
    for key in ("paper", "claim", "paper_value", "sim_value"):
        assert isinstance(rec[key], str) and rec[key]
    assert isinstance(rec["holds"], bool)
    assert rec["checks"] and rec["seeds"] == [0]
    assert all(isinstance(v, float) for v in rec["detail"].values())
    # Every number a check reads is in the detail, and ``holds`` is their conjunction.
    assert rec["holds"] == _recompute(rec)


def test_experiments_are_seeded(records: dict[str, dict[str, Any]]) -> None:
    again = EXPERIMENTS["horus"]([0], True)
    assert again["detail"] == records["horus"]["detail"]


def test_unknown_experiment_is_one_line_error(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--experiment", "nope", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "unknown experiment 'nope'" in proc.stderr and "muxflow-online" in proc.stderr
    assert not out.exists()


def test_cli_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--experiment",
            "gpulet,horus",
            "--quick",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    recs = json.loads(out.read_text())
    assert [r["id"] for r in recs] == ["gpulet", "horus"]
    for r in recs:
        assert set(RECORD_FIELDS) <= set(r)
    assert "| `gpulet` |" in proc.stdout
    assert not list(out.parent.glob("*.tmp"))
