"""The benchmark suite's JSON contract (``scripts/bench.py``), at tiny sizes (seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_suite_json_contract(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--only", "replay,env",
        "--replay-sizes", "64", "--replay-jobs", "60", "--policies", "first_fit,reserve_pack",
        "--replay-repeat", "2",
        "--sizes", "16", "--seconds", "0.1", "--json", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    data = json.loads(out.read_text())
    assert set(data["replay"]) == {"first_fit@64", "reserve_pack@64"}
    for r in data["replay"].values():
        assert r["jobs_per_s"] > 0 and r["events_per_s"] > 0 and r["peak_mem_mb"] > 10
        assert r["gpus"] == 64 and r["jobs"] == 60 and not r["partial"]
        assert len(r["wall_s_runs"]) == 2 and r["wall_s"] == min(r["wall_s_runs"])
    # issue 4's keys are kept
    assert data["env_steps_per_s"]["16"] > 0
    assert data["ratio"]["16"] == data["env_steps_per_s"]["16"] / data["cartpole_steps_per_s"]
    assert data["meets_target"]["16"] == (data["ratio"]["16"] >= data["targets"]["16"])
    # what a step holds, and the online model's arithmetic for it
    w = data["env_work_per_step"]["16"]
    assert w["events"] >= w["ticks"] > 0 and w["service_ticks"] >= 0
    assert w["us_per_step"] == round(1e6 / data["env_steps_per_s"]["16"], 2)
    assert data["tick_math_us"] > 0
    assert abs(w["tick_math_us_per_step"] - w["service_ticks"] * data["tick_math_us"]) < 0.1
    assert w["target_us_per_step"] > 0
    assert {"cpu", "cores", "python", "numpy", "date"} <= set(data["machine_info"])
    assert all(set(c) >= {"value", "target", "met"} for c in data["checks"].values())
    # the Markdown report renders from it
    md = tmp_path / "B.md"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_benchmarks_md.py"), str(out), "-o", str(md)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    text = md.read_text()
    assert "first_fit@64" in text and data["machine_info"]["cpu"] in text


def test_replay_scenario_density_is_fixed() -> None:
    from gpu_sharing_gym.bench import suite as bench

    for n in (64, 1024, 6500):
        cfg = bench.replay_scenario(n, 20_000)
        gpus = sum(g.count * g.gpus_per_node for g in cfg.cluster.nodes)
        assert gpus == n
        rate = cfg.workload.offline.params["arrivals_per_h"]
        assert rate / gpus == bench.JOBS_PER_GPU_H
