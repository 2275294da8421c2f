"""The headroom tool (gpu_sharing_gym/headroom.py): cells saved as they finish, a rerun computes
only the missing ones, and the table pairs both planners against the best heuristic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_sharing_gym import headroom

ROOT = Path(__file__).resolve().parents[1]
#: A few heuristics instead of all (the tool's own list is every registered one).
HEURISTICS = ["antman", "gandiva", "time_sharing", "first_fit"]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """``default`` with 8 jobs over one hour."""
    data = yaml.safe_load((ROOT / "configs/scenarios/default.yaml").read_text())
    data["workload"]["offline"].update(max_jobs=8, arrival_window_h=1)
    data["name"] = "tiny"
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(
    tiny: Path,
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: tuple[str, ...] = (),
    seeds: str = "1-2",
) -> list[str]:
    """Run the command on ``tiny`` (``extra`` arguments added); return the cells it computed."""
    ran: list[str] = []
    real = headroom.run_cell

    def counting(cell: headroom.Cell) -> dict[str, Any]:
        ran.append(f"{cell.policy}/{cell.seed}")
        return real(cell)

    monkeypatch.setattr(headroom, "run_cell", counting)
    monkeypatch.setattr(headroom, "_heuristics", lambda: HEURISTICS)
    argv = ["--scenarios", str(tiny), "--seeds", seeds, "--out", str(out)]
    argv += ["--samples", "1", "--horizon", "1", "--top", "3", "--quiet", *extra]
    assert headroom.main(argv) == 0
    return ran


def test_resume_and_table(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hr"
    ran = _run(tiny, out, monkeypatch)
    assert len(ran) == 2 * (len(HEURISTICS) + 2)
    cells = sorted(p.relative_to(out / "cells").as_posix() for p in (out / "cells").rglob("*.json"))
    assert len(cells) == len(ran)
    assert "tiny/planner_oracle/1.json" in cells and "tiny/planner/2.json" in cells
    table = (out / "headroom.md").read_text()
    summary = json.loads((out / "headroom.json").read_text())[0]
    assert summary["oracle"]["oracle"] is True and summary["planner"]["oracle"] is False
    assert summary["candidates"][-1] == "pack" and summary["base"] in HEURISTICS
    assert f"best heuristic: **{summary['base']}**" in table
    assert "planner_oracle (**oracle**" in table and "Headroom (oracle − best)" in table
    assert table in capsys.readouterr().out

    # a rerun computes nothing; with one cell gone, only that one
    assert _run(tiny, out, monkeypatch) == []
    (out / "cells/tiny/planner/2.json").unlink()
    assert _run(tiny, out, monkeypatch) == ["planner/2"]
    again = json.loads((out / "headroom.json").read_text())[0]
    assert again["planner"]["jct_by_seed"] == summary["planner"]["jct_by_seed"]  # same episode


def test_one_seed_writes_strict_json(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One seed has no confidence interval: the table says so and ``headroom.json`` holds
    ``null`` where the half-width would be (it used to fail writing NaN after every episode
    had run)."""
    out = tmp_path / "hr"
    _run(tiny, out, monkeypatch, seeds="1")
    text = (out / "headroom.json").read_text()
    assert "NaN" not in text
    summary = json.loads(text)[0]
    assert summary["seeds"] == [1]
    assert summary["oracle"]["jct_ci95_s"] is None and summary["oracle"]["jct_mean_s"] > 0
    assert "nan" not in (out / "headroom.md").read_text().lower()


def test_decompose_rows(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--decompose``: the planner told the true durations, the true arrivals, or both, are
    three more oracle rows, each with its share of the headroom; the other cells are reused."""
    out = tmp_path / "hr"
    _run(tiny, out, monkeypatch)
    ran = _run(tiny, out, monkeypatch, ("--decompose",))
    assert sorted(ran) == sorted(f"{n}/{s}" for n in headroom.PARTIAL for s in (1, 2))
    summary = json.loads((out / "headroom.json").read_text())[0]
    rows = {r["policy"]: r for r in summary["partial_oracles"]}
    assert set(rows) == set(headroom.PARTIAL) and all(r["oracle"] for r in rows.values())
    head = summary["oracle"]["vs_best"]["diff_mean_s"]
    for r in rows.values():
        share = r["headroom_share"]
        assert (
            share is None
            if head >= 0
            else share == pytest.approx(r["vs_best"]["diff_mean_s"] / head)
        )
    table = (out / "headroom.md").read_text()
    assert "planner_knows_durations (**oracle**: true durations only)" in table
    assert _run(tiny, out, monkeypatch, ("--decompose",)) == []


def test_oracle_alone_then_both(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--planners oracle`` computes and reports the oracle's row (the headroom) without the
    honest planner's cells; a later run with both computes only the honest planner's."""
    out = tmp_path / "hr"
    ran = _run(tiny, out, monkeypatch, ("--planners", "oracle"))
    assert sorted(r for r in ran if r.startswith("planner")) == [
        "planner_oracle/1",
        "planner_oracle/2",
    ]
    assert not (out / "cells/tiny/planner").exists()
    summary = json.loads((out / "headroom.json").read_text())[0]
    assert "planner" not in summary and summary["oracle"]["oracle"] is True
    assert summary["headroom_pct"] == pytest.approx(-summary["oracle"]["vs_best"]["diff_pct"])
    table = (out / "headroom.md").read_text()
    assert "planner_oracle (**oracle**" in table and "planner (observed belief)" not in table
    assert "Headroom (oracle − best)" in table and "the honest planner not run" in table
    assert sorted(_run(tiny, out, monkeypatch)) == ["planner/1", "planner/2"]
    both = json.loads((out / "headroom.json").read_text())[0]
    assert both["oracle"]["jct_by_seed"] == summary["oracle"]["jct_by_seed"]
    assert "the honest planner reaches" in (out / "headroom.md").read_text()


def test_bad_planners_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        headroom.main(["--out", str(tmp_path / "x"), "--planners", "neither"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--planners" in err[0], err


def test_cut_rollouts_are_new_planner_cells(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--cut-h``: the planners' cells carry the cut (the heuristics' are reused; uncut cells
    keep the key they had before the cut existed) and the table says where rollouts were cut."""
    assert "cut_s" not in dict(headroom.planner_params("antman", ["pack"], 4, 8, False))
    assert (
        dict(headroom.planner_params("antman", ["pack"], 4, 8, True, (), 7200.0))["cut_s"] == 7200.0
    )
    out = tmp_path / "hr"
    _run(tiny, out, monkeypatch)
    ran = _run(tiny, out, monkeypatch, ("--cut-h", "0.5"))
    assert sorted(ran) == sorted(f"{n}/{s}" for n in ("planner", "planner_oracle") for s in (1, 2))
    saved = json.loads((out / "cells/tiny/planner/1.json").read_text())
    assert saved["cell"]["params"]["cut_s"] == 1800.0
    assert json.loads((out / "headroom.json").read_text())[0]["rollout_cut_s"] == 1800.0
    assert "rollouts cut at 0.5 h" in (out / "headroom.md").read_text()


def test_slo_ref_base_is_new_planner_cells(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--slo-ref base``: every planner's cells carry it and build planners with it (the
    heuristics' cells are reused; default cells keep their old key), and the outputs say so."""
    assert "slo_ref" not in dict(headroom.planner_params("antman", ["pack"], 4, 8, False))
    params = headroom.planner_params(
        "antman", ["pack"], 4, 8, True, (), None, "observed", 1.0, "base"
    )
    assert dict(params)["slo_ref"] == "base"
    cell = headroom.Cell(headroom.ORACLE, "tiny", tiny, 1, params)
    assert headroom.build_policy(cell).slo_ref == "base"
    out = tmp_path / "hr"
    _run(tiny, out, monkeypatch)
    ran = _run(tiny, out, monkeypatch, ("--slo-ref", "base"))
    assert sorted(ran) == sorted(f"{n}/{s}" for n in ("planner", "planner_oracle") for s in (1, 2))
    saved = json.loads((out / "cells/tiny/planner_oracle/2.json").read_text())
    assert saved["cell"]["params"]["slo_ref"] == "base"
    assert json.loads((out / "headroom.json").read_text())[0]["slo_ref"] == "base"
    assert "rollouts' SLO held to the base's" in (out / "headroom.md").read_text()


def test_bad_cut_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        headroom.main(["--cut-h", "0", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_bad_seeds_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert headroom.main(["--seeds", "9-3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--seeds" in err


def test_agent_rows_judged_by_the_bar(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--agents``: the agent's episodes are cells like the others (rerun: none computed), its
    row is paired against the best heuristic, and issue 25's bar is applied to it."""
    pytest.importorskip("sb3_contrib")
    out = tmp_path / "hr"
    ran = _run(tiny, out, monkeypatch, ("--agents", "ppo"))
    assert sorted(r for r in ran if r.startswith("ppo/")) == ["ppo/1", "ppo/2"]
    assert (out / "cells/tiny/ppo/1.json").is_file()
    summary = json.loads((out / "headroom.json").read_text())[0]
    (agent,) = summary["agents"]
    assert agent["policy"] == "ppo" and set(agent["jct_by_seed"]) == {"1", "2"}
    assert isinstance(agent["meets_bar"], bool) and "headroom_closed" in agent
    vs = agent["vs_best"]
    head = summary["oracle"]["vs_best"]["diff_mean_s"]
    if head < 0:  # the share of the headroom the agent closed
        assert agent["headroom_closed"] == pytest.approx(vs["diff_mean_s"] / head)
    table = (out / "headroom.md").read_text()
    assert "agent: **ppo**" in table and "issue 25's bar" in table
    assert _run(tiny, out, monkeypatch, ("--agents", "ppo")) == []


def test_bad_agent_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert headroom.main(["--agents", "no_such_agent", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--agents" in err and "no_such_agent" in err
