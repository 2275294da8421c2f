"""``gsg bench``'s side-by-side section (issue 24) reads what ``side_by_side.sh`` leaves: the
``/usr/bin/time -v`` report of every whole process and our JSON records; ratios, checks and the
BENCHMARKS.md table come from them. (The section itself runs only with ``SBS_PEER_GIT``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_sharing_gym.bench import side_by_side as sbs


def _time_v(path: Path, wall: str, rss_kb: int) -> None:
    path.write_text(
        '\tCommand being timed: "python x"\n'
        f"\tElapsed (wall clock) time (h:mm:ss or m:ss): {wall}\n"
        f"\tMaximum resident set size (kbytes): {rss_kb}\n"
        "\tUser time (seconds): 1.50\n\tSystem time (seconds): 0.50\n"
    )


def test_collect_ratios_checks_and_table(tmp_path: Path) -> None:
    _time_v(tmp_path / "peer-FIFO-1.time", "0:30.00", 102400)
    _time_v(tmp_path / "peer-SJF-1.time", "0:25.00", 102400)
    _time_v(tmp_path / "peer-SJF-2.time", "1:05.50", 102400)
    _time_v(tmp_path / "ours-first_fit-1.time", "0:02.50", 128000)
    (tmp_path / "ours-first_fit-1.json").write_text(
        json.dumps([{"x_wall_s": 1.5, "jobs_completed": 10}])
    )
    (tmp_path / "machine.txt").write_text("nproc 2\nload_before 1.0 1.0 1.0\n")
    res = sbs.collect(tmp_path)
    rows = {f"{r['side']}:{r['policy']}": r for r in res["rows"]}
    assert res["best_peer_s"] == 25.0
    assert rows["peer:SJF"]["walls"] == [25.0, 65.5]
    ours = rows["ours:first_fit"]
    assert ours["x_best_peer"] == 10.0 and ours["rss_mb"] == 125.0 and ours["in_proc_s"] == 1.5
    data = {"settings": {"-1": res}, "jobs": 20000, "gpus": 6500, "peer_commit": "abc"}
    checks = sbs.checks(data)
    assert checks["side-by-side first_fit (own arrivals) x peer's best >= 10"]["value"] == 10.0
    assert checks["side-by-side peak RSS of ours (own arrivals) MB <= 150"]["value"] == 125.0
    text = "\n".join(sbs.render(data))
    assert ours["best_cpu_s"] == 2.0 and ours["x_best_peer_cpu"] == 1.0
    assert "| trace's own | ours | first_fit | 2.5 | 2.5 | 2.0 | 125 | 1.5 | 10.0 | 1.0 |" in text


def test_not_a_time_report(tmp_path: Path) -> None:
    (tmp_path / "x.time").write_text("nothing\n")
    with pytest.raises(ValueError, match="not a /usr/bin/time -v report"):
        sbs.read_time_v(tmp_path / "x.time")


def test_enabled_only_with_the_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SBS_PEER_GIT", raising=False)
    assert not sbs.enabled()
    monkeypatch.setenv("SBS_PEER_GIT", "/nowhere")
    assert sbs.enabled()
