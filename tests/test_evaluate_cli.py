"""scripts/evaluate.py through its real command line: records, overrides, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_sharing_env.evaluation.metrics import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[1]
TINY = """
horizon_h: 6
cluster:
  nodes:
    - {gpu_type: V100-16GB, count: 1, gpus_per_node: 2}
workload:
  offline: {params: {arrivals_per_h: 4.0}, max_jobs: 6}
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_records_follow_the_schema(tmp_path: Path) -> None:
    sc = tmp_path / "tiny.yaml"
    sc.write_text(TINY)
    out = tmp_path / "r.json"
    p = _run(
        "--policy",
        "first_fit,time_sharing",
        "--scenario",
        str(sc),
        "--seeds",
        "2",
        "--json",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    recs = json.loads(out.read_text())
    assert [(r["policy"], r["seed"]) for r in recs] == [
        ("first_fit", 0), ("first_fit", 1), ("time_sharing", 0), ("time_sharing", 1),
    ]  # fmt: skip
    for r in recs:
        assert set(METRIC_NAMES) <= set(r) and r["scenario"] == "tiny"
        assert r["jobs_submitted"] == 6


def test_all_may_stand_in_a_list(tmp_path: Path) -> None:
    sc = tmp_path / "tiny.yaml"
    sc.write_text(TINY)
    out = tmp_path / "r.json"
    p = _run("--policy", "time_sharing,all", "--scenario", str(sc), "--seeds", "1",
             "--json", str(out), "--quiet")  # fmt: skip
    assert p.returncode == 0, p.stderr
    names = [r["policy"] for r in json.loads(out.read_text())]
    assert names[0] == "time_sharing" and len(names) == len(set(names))  # listed once
    assert {"antman", "first_fit", "speed_sjf"} <= set(names)


def test_cluster_override_from_yaml(tmp_path: Path) -> None:
    sc = tmp_path / "tiny.yaml"
    sc.write_text(TINY)
    cl = tmp_path / "fleet.yaml"
    cl.write_text("cluster:\n  nodes:\n    - {gpu_type: T4, count: 2, gpus_per_node: 2}\n")
    out = tmp_path / "r.json"
    p = _run(
        "--policy",
        "first_fit",
        "--scenario",
        str(sc),
        "--seeds",
        "1",
        "--cluster",
        str(cl),
        "--json",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())[0]["jobs_submitted"] == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--policy", "nope"), "unknown policy 'nope' (known: "),
        (("--scenario", "nope"), "scenario 'nope': not found"),
        (("--trace", "x.csv"), "--trace: give --trace-format too"),
        (
            ("--trace", "missing.csv", "--trace-format", "philly"),
            "missing.csv: trace file not found",
        ),
        (("--seeds", "0"), "--seeds: must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    p = _run(*args)
    assert p.returncode == 2
    err = p.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert message in err
