"""The benchmark suite's JSON contract (``scripts/bench.py``), at tiny sizes (seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_sharing_gym.bench import markdown
from gpu_sharing_gym.bench.markdown import BEGIN, END

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
    assert text.startswith("# Benchmarks\n") and text.count(BEGIN) == text.count(END) == 1
    # rendered into a page with prose (BENCHMARKS.md's shape): only the region changes
    page = tmp_path / "P.md"
    prose_before, prose_after = "# B\n\nHand-written intro.\n\n", "\n\n## Why\n\nKept.\n"
    page.write_text(f"{prose_before}{BEGIN}\nold tables\n{END}{prose_after}")
    assert markdown.main([str(out), "-o", str(page)]) == 0
    filled = page.read_text()
    assert filled.startswith(prose_before + BEGIN) and filled.endswith(END + prose_after)
    assert "old tables" not in filled and "first_fit@64" in filled
    assert markdown.main([str(out), "-o", str(page)]) == 0 and page.read_text() == filled


def test_markdown_keeps_the_prose_and_refuses_a_page_without_its_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "BENCHMARKS.md"
    page.write_text("# Benchmarks\n\nProse only.\n")
    data = tmp_path / "bench.json"
    data.write_text(json.dumps({"machine_info": {"cpu": "X", "date": "today"}}))
    assert markdown.main([str(data), "-o", str(page)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gsg bench markdown: error: {page}: needs one")
    assert page.read_text() == "# Benchmarks\n\nProse only.\n"  # nothing written
    data.write_text("{not json")
    assert markdown.main([str(data), "-o", str(tmp_path / "new.md")]) == 2
    assert "not the JSON of `gsg bench --json`" in capsys.readouterr().err
    assert not (tmp_path / "new.md").exists()


def test_the_repositorys_page_has_one_generated_region() -> None:
    """BENCHMARKS.md's prose lives in the page, around the one region the renderer writes."""
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.index(BEGIN) < text.index(END)
    assert (
        markdown.fill(text, "T")
        == text.split(BEGIN)[0] + BEGIN + "\n\nT\n\n" + END + (text.split(END)[1])
    )


def test_replay_scenario_density_is_fixed() -> None:
    from gpu_sharing_gym.bench import suite as bench

    for n in (64, 1024, 6500):
        cfg = bench.replay_scenario(n, 20_000)
        gpus = sum(g.count * g.gpus_per_node for g in cfg.cluster.nodes)
        assert gpus == n
        rate = cfg.workload.offline.params["arrivals_per_h"]
        assert rate / gpus == bench.JOBS_PER_GPU_H
