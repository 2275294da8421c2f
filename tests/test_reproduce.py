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

from gpu_sharing_gym.baselines.pai import SjfPredicted
from gpu_sharing_gym.commands.reproduce import table
from gpu_sharing_gym.fidelity import EXPERIMENTS, OPS, RECORD_FIELDS, RECORD_KINDS
from gpu_sharing_gym.fidelity.common import check
from gpu_sharing_gym.fidelity.pai import PAI_QUEUEING, FifoQueue, LoadBalanceQueue, ReservePackQueue

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reproduce.py"


def _recompute(rec: dict[str, Any]) -> bool:
    detail = rec["detail"]
    ok = []
    for c in rec["checks"]:
        if c["den"] is None:
            value = detail[c["num"]]
        else:  # a ratio over zero is NaN (``fidelity.common.ratio``)
            den = detail[c["den"]]
            value = detail[c["num"]] / den if den != 0 else math.nan
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


def test_records_say_what_kind_of_check_they_are(records: dict[str, dict[str, Any]]) -> None:
    # muxflow-errors takes the paper's cause mix as its input: a mechanism check, and says so.
    assert records["muxflow-errors"]["kind"] == "mechanism"
    assert {r["kind"] for i, r in records.items() if i != "muxflow-errors"} == {"claim"}
    assert set(RECORD_KINDS) == {"claim", "mechanism"}
    rows = table([records["muxflow-errors"], records["gpulet"]]).splitlines()
    assert rows[0].startswith("| id | kind |")
    assert rows[2].startswith("| `muxflow-errors` | mechanism |")
    assert "(mechanism check)" in rows[2]
    assert rows[3].startswith("| `gpulet` | claim |")


def test_muxflow_errors_draws_fault_causes_per_fault(records: dict[str, dict[str, Any]]) -> None:
    d = records["muxflow-errors"]["detail"]
    # Causes are drawn per fault from the paper's mix: the realised counts are in the record,
    # mostly user signals but not a fixed ratio, and mixed handling stops exactly those.
    signal = d["with.f_faults_user_signal_sum"]
    other = d["with.f_faults_app_error_sum"] + d["with.f_faults_xid_sum"]
    assert signal > 0 and d["with.realised_user_signal_share"] == signal / (signal + other)
    assert d["with.f_propagated_user_signal_sum"] == 0.0
    assert d["without.f_propagated_user_signal_sum"] > 0.0
    share = d["with.realised_user_signal_share"]
    if share < 1.0:
        assert d["expected_log10_reduction"] == pytest.approx(-math.log10(1.0 - share))
    else:  # every realised fault a user signal: mixed handling stops all, no finite ratio
        assert math.isnan(d["expected_log10_reduction"])


def test_a_check_over_zero_fails_instead_of_raising() -> None:
    c = check("x", {"a": 1.0, "b": 0.0}, "a", ">", 1.0, "b")
    assert math.isnan(c["value"]) and c["ok"] is False


def test_pai_experiments_schedule_the_whole_queue(records: dict[str, dict[str, Any]]) -> None:
    # PAI's scheduler and simulator see every queued task, not an env's queue window.
    for policy in (ReservePackQueue, LoadBalanceQueue, FifoQueue, SjfPredicted):
        assert policy.decision_scope == "queue"
    d = records["pai-reserve-pack"]["detail"]
    # PAI's published queueing statistics sit beside the simulated ones.
    for k in PAI_QUEUEING:
        assert d[f"pai.{k}"] == PAI_QUEUEING[k] and f"reserve_pack.{k}" in d


def test_muxflow_ablation_runs_on_diverse_offline_jobs() -> None:
    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.zoo import ZOO
    from gpu_sharing_gym.fidelity.muxflow import _arms

    cfg = load_scenario("fidelity/muxflow-ablation")
    mix = cfg.workload.offline.params["model_mix"]
    bw = [ZOO[m].bw_intensity for m in mix]
    duty = [ZOO[m].duty for m in mix]
    assert len(mix) >= 6 and max(bw) - min(bw) > 0.9 and max(duty) - min(duty) > 0.8
    arms = _arms(True, ["muxflow", "muxflow_m"], "muxflow-ablation")
    assert {a.cfg.name for a in arms} == {"muxflow-ablation"}


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
