"""Reports a person can read (issue 15): every "mean ± x" is a labelled 95 % t confidence
interval, the HTML page fits the screen and has a table of contents, the time axes of the
utilisation and occupancy plots cover the activity, calibrate says what it wrote, and a long
episode keeps the progress bar moving."""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scipy import stats

from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_gym.ci import CI_NOTE, fmt_mean_ci, fmt_num, mean_ci95

TINY = """\
name: {name}
horizon_h: 2
slo_target: 0.9
cluster:
  nodes:
    - {{gpu_type: V100-16GB, count: 1, gpus_per_node: 2, vcpus: 32, host_mem_gb: 128}}
workload:
  offline: {{source: synthetic, params: {{}}, max_jobs: 4}}
  online: {{num_services: 1}}
faults:
  rate_per_gpu_h: {{user_signal: 0.0, app_error: 0.0, xid: 0.0}}
"""
CI_LABEL = "95 % CI half-width over seeds (t-distribution"


def _scenario(tmp: Path, name: str) -> Path:
    p = tmp / f"{name}.yaml"
    p.write_text(TINY.format(name=name))
    return p


def _t_half(values: list[float]) -> float:
    """The 95 % half-width from scipy's own t interval (independent of gpu_sharing_gym.ci's formula)."""
    lo, hi = stats.t.interval(0.95, len(values) - 1, loc=0.0, scale=stats.sem(values))
    return float(hi - lo) / 2.0


# ------------------------------------------------------------------------------ the numbers
@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0], [100.0, 140.0], [5.0, 7.0, 7.5, 11.0, 2.0]])
def test_half_width_is_the_t_based_95_percent_interval(values: list[float]) -> None:
    mean, half, n = mean_ci95(values)
    assert n == len(values) and mean == pytest.approx(sum(values) / len(values))
    assert half == pytest.approx(_t_half(values), rel=1e-9)
    # not the standard deviation, not the standard error
    assert half != pytest.approx(stats.tstd(values)) and half != pytest.approx(stats.sem(values))


def test_one_seed_has_no_interval() -> None:
    mean, half, n = mean_ci95([42.0, float("nan"), None])
    assert (mean, n) == (42.0, 1) and math.isnan(half)
    assert fmt_mean_ci(mean, half) == "42.0"  # no "±" at all
    assert "±" not in fmt_mean_ci(1.0, float("nan"))


def _rows(jct: dict[str, list[float]]) -> list[dict[str, Any]]:
    rows = []
    for pol, values in jct.items():
        for seed, v in enumerate(values):
            rec: dict[str, Any] = {"policy": pol, "scenario": "s", "seed": seed, "oracle": False}
            rec.update(dict.fromkeys(METRIC_NAMES, 1.0))
            rec.update(jct_mean_s=v, slo_attainment=0.99, status="ok", error="", wall_s=0.1)
            rows.append({"record": rec})
    return rows


def _summary(jct: dict[str, list[float]], scenarios: tuple[str, ...] = ("s",)) -> Any:
    from gpu_sharing_gym.leaderboard import cells_frame, summarize

    rows = []
    for scen in scenarios:
        for r in _rows(jct):
            rows.append({"record": {**r["record"], "scenario": scen}})
    cells = cells_frame(rows)
    return cells, summarize(cells, dict.fromkeys(scenarios, 0.9))


# ------------------------------------------------------------------------------ the labels
def test_markdown_and_terminal_tables_label_the_interval() -> None:
    from gpu_sharing_gym import report

    jct = {"a": [100.0, 140.0, 120.0], "b": [300.0]}
    cells, summary = _summary(jct)
    expected = fmt_mean_ci(120.0, _t_half(jct["a"]))
    md = report.markdown(cells, summary, "gsg leaderboard --seeds 3", [0, 1, 2])
    assert CI_LABEL in md
    row_a = next(line for line in md.splitlines() if line.startswith("| 1 | a |"))
    assert f"| {expected} |" in row_a
    row_b = next(line for line in md.splitlines() if line.startswith("| 2 | b |"))
    assert f"| {fmt_num(300.0)} |" in row_b and "±" not in row_b.split("|")[3]
    # the table is followed by the note, so a table copied alone still says what ± is
    after = md.split(row_b, 1)[1]
    assert after.lstrip("\n").startswith("± = 95 % CI")
    term = report.text_table(summary, "s", note=True)
    assert expected in term and term.splitlines()[-1] == CI_NOTE


def _html(scenarios: tuple[str, ...]) -> str:
    from gpu_sharing_gym import report

    cells, summary = _summary({"a": [1.0, 2.0], "b": [3.0, 5.0]}, scenarios)
    return report.html_page(cells, summary, {}, "gsg leaderboard", [0, 1])


def test_html_fits_the_page_and_labels_the_interval() -> None:
    page = _html(("only",))
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert re.search(r"(^|\n)table\{[^}]*border-collapse:collapse[^}]*font-size:", css)
    # tables fit the page instead of scrolling in a box: cells wrap, values before their "±"
    assert "overflow-x" not in css and page.count("<table>") == 1
    assert re.search(r"th,td\{[^}]*white-space:normal", css)
    assert re.search(r"img\{[^}]*max-width:100%[^}]*height:auto", css)
    assert "<th>norm_<wbr>throughput_<wbr>mean</th>" in page
    assert re.search(r"<td>[0-9.,]+ ±&nbsp;[0-9.,]+</td>", page)
    assert page.count(CI_LABEL) >= 2  # the preamble and the note under the table
    assert "<nav" not in page and 'href="#' not in page  # one scenario: no table of contents


def test_html_table_of_contents_for_several_scenarios() -> None:
    page = _html(("alpha", "beta two"))
    nav = page.split("<nav", 1)[1].split("</nav>", 1)[0]
    targets = re.findall(r'href="#([^"]+)"', nav)
    assert len(targets) == 2 and len(set(targets)) == 2
    for t, name in zip(targets, ("alpha", "beta two")):
        assert re.search(rf'<h2 id="{re.escape(t)}">{name} ', page)
    assert page.count('class="note"') == 2


def test_leaderboard_terminal_prints_the_interval_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_sharing_gym.commands import leaderboard as cli
    from gpu_sharing_gym.leaderboard import write_outputs

    def no_tb(*args: Any, **kwargs: Any) -> Any:  # TensorBoard logs are not under test here
        return write_outputs(*args, **{**kwargs, "tensorboard": False})

    monkeypatch.setattr(cli, "write_outputs", no_tb)
    scen = _scenario(tmp_path, "tiny_lb")
    out = tmp_path / "out"
    argv = ["--scenarios", str(scen), "--policies", "first_fit", "--seeds", "2"]
    assert cli.main([*argv, "--out", str(out), "--workers", "1", "--quiet"]) == 0
    term = capsys.readouterr().out
    assert CI_NOTE in term
    summ = pd.read_csv(out / "summary.csv").iloc[0]
    cells = pd.read_csv(out / "leaderboard.csv")
    half = _t_half(list(cells["jct_mean_s"]))
    assert summ["jct_mean_s_ci95"] == pytest.approx(half, rel=1e-9)
    assert fmt_mean_ci(summ["jct_mean_s_mean"], half) in term


def test_evaluate_prints_the_jct_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpu_sharing_gym.commands import evaluate as cli

    scen = _scenario(tmp_path, "tiny_ev")
    out = tmp_path / "r.json"
    argv = ["--policy", "first_fit", "--scenario", str(scen), "--seeds", "3", "--quiet"]
    assert cli.main([*argv, "--json", str(out)]) == 0
    term = capsys.readouterr().out
    jct = [r["jct_mean_s"] for r in json.loads(out.read_text())]
    row = next(line for line in term.splitlines() if line.startswith("first_fit"))
    assert fmt_mean_ci(sum(jct) / 3, _t_half(jct)) in row
    assert CI_NOTE in term


def test_evaluate_table_without_interval_for_one_seed() -> None:
    from gpu_sharing_gym.commands.evaluate import summary_table

    recs = [{"policy": "p", **dict.fromkeys(METRIC_NAMES, 2.0), "jct_mean_s": 7.5}]
    table = summary_table(recs, 0.9)
    assert table.loc["p", "jct_mean_s"] == "7.50" and table.loc["p", "n"] == 1


# ------------------------------------------------------------------------------ calibrate
class _FakeReport:
    def __init__(self) -> None:
        self.fitted = {"k": 1.0}

    def table(self) -> pd.DataFrame:
        return pd.DataFrame({"median_abs_rel_err": [0.1]}, index=["ds"])

    def to_json(self) -> str:
        return json.dumps({"ds": {"median_abs_rel_err": 0.1}})


def test_calibrate_says_where_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_sharing_gym.commands import calibrate

    monkeypatch.setattr(calibrate, "run", lambda data, heldout=True: _FakeReport())
    monkeypatch.chdir(tmp_path)
    assert calibrate.main(["--data", "x"]) == 0
    out = capsys.readouterr().out
    assert "nothing written (pass --json PATH to save)" in out
    assert list(tmp_path.iterdir()) == []
    assert calibrate.main(["--data", "x", "--json", "sub/cal.json"]) == 0
    out = capsys.readouterr().out
    target = (tmp_path / "sub" / "cal.json").resolve()
    assert f"wrote {target}" in out and Path(str(target)).is_absolute()
    assert json.loads(target.read_text()) == {"ds": {"median_abs_rel_err": 0.1}}
    assert "nothing written" not in out


# ------------------------------------------------------------------------------ plots
def _job(jid: int, t0: float, t1: float, gpus: list[int], online: bool = False) -> dict:
    return {
        "id": jid,
        "online": online,
        "model": "resnet50",
        "num_gpus": len(gpus),
        "submit_s": t0,
        "start_s": t0,
        "finish_s": None if online else t1,
        "status": "running" if online else "done",
        "segs": [[t0, t1, gpus, 0]],
    }


def _placements(jobs: list[dict]) -> dict[str, Any]:
    return {"jobs": jobs, "options": ["excl"], "gpu_types": ["T4", "T4"], "record": {"seed": 0}}


def test_occupancy_x_axis_covers_the_activity_in_hours() -> None:
    import matplotlib.pyplot as plt

    from gpu_sharing_env.evaluation.occupancy import occupancy_figure

    h = 3600.0
    jobs = [_job(0, 5 * h, 7 * h, [0]), _job(1, 6 * h, 9 * h, [1]), _job(2, 8 * h, 8.5 * h, [0])]
    fig = occupancy_figure("s", "p", _placements(jobs))
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert lo <= 5.0 and hi >= 9.0  # first placement .. last completion
    assert lo >= 5.0 - 0.2 and hi <= 9.0 + 0.2  # and not the empty hours around it
    assert ax.get_xlabel() == "simulated time (h)"
    # the legend sits right of the axes: it covers no data
    fig.canvas.draw()
    legend = ax.get_legend()
    assert legend is not None
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_occupancy_short_span_in_minutes_and_services_do_not_stretch_it() -> None:
    import matplotlib.pyplot as plt

    from gpu_sharing_env.evaluation.occupancy import activity_span, occupancy_figure

    jobs = [_job(0, 600.0, 1800.0, [0]), _job(9, 0.0, 48 * 3600.0, [1], online=True)]
    assert activity_span(jobs) == (0.0, 1800.0)
    fig = occupancy_figure("s", "p", _placements(jobs))
    lo, hi = fig.axes[0].get_xlim()
    assert fig.axes[0].get_xlabel() == "simulated time (min)"
    assert lo == 0.0 and 30.0 <= hi <= 32.0
    plt.close(fig)


def test_job_colours_are_distinct_then_hatched() -> None:
    from gpu_sharing_env.evaluation.occupancy import N_COLOURS, job_style

    styles = [job_style(i) for i in range(3 * N_COLOURS)]
    assert len({c for c, _ in styles[:N_COLOURS]}) == N_COLOURS
    assert {h for _, h in styles[:N_COLOURS]} == {""}
    assert len(set(styles)) == len(styles)  # past the colours, hatches tell jobs apart
    # neighbours (consecutive jobs, usually side by side) never share a hue pair
    assert all(styles[i][0] != styles[i + 1][0] for i in range(len(styles) - 1))


def test_utilization_span_is_the_placement_activity() -> None:
    from gpu_sharing_gym.plots import utilization_span

    h = 3600.0
    a = {"jobs": [_job(0, 2 * h, 5 * h, [0])], "timeseries": []}
    b = {"jobs": [_job(0, 3 * h, 11 * h, [0]), _job(5, 0.0, 90 * h, [1], online=True)]}
    assert utilization_span({"p": [a], "q": [b]}) == (0.0, 11 * h)
    rows = [[t * 600.0, 0.0 if t < 3 or t > 6 else 0.5, 0.0, 0, 0, 0] for t in range(10)]
    assert utilization_span({"p": [{"timeseries": rows}]}) == (1800.0, 3600.0)


# ------------------------------------------------------------------------------ progress
class _Bar:
    disable = False

    def __init__(self) -> None:
        self.postfix: list[str] = []

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix.append(s)


class _Sim:
    now = 5.5 * 3600.0
    offline_jobs = (60, 20)  # (offline jobs, not yet done), as Simulator.offline_jobs


def test_heartbeat_keeps_the_bar_moving_during_an_episode() -> None:
    from gpu_sharing_gym.commands.evaluate import Heartbeat

    bar = _Bar()
    with Heartbeat(bar, _Sim(), every=0.01) as hb:
        deadline = time.monotonic() + 5.0
        while not bar.postfix and time.monotonic() < deadline:
            time.sleep(0.01)
    assert bar.postfix and bar.postfix[-1] == "sim 5.5 h, 40/60 jobs done"
    assert hb._thread is not None and not hb._thread.is_alive()
    quiet = _Bar()
    quiet.disable = True
    with Heartbeat(quiet, _Sim(), every=0.01) as hb:
        time.sleep(0.05)
    assert quiet.postfix == [] and hb._thread is None


def _capture_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Keep the figures the plot functions draw (instead of their PNG bytes)."""
    from gpu_sharing_gym import plots

    figs: list[Any] = []
    monkeypatch.setattr(plots, "_png", lambda fig: figs.append(fig) or b"")
    return figs


def test_line_styles_and_markers_tell_policies_apart() -> None:
    from gpu_sharing_gym.plots import policy_colours, policy_styles

    pols = [f"p{i}" for i in range(25)]
    styles, colours = policy_styles(pols), policy_colours(pols)
    looks = [(colours[p], styles[p]["ls"], styles[p]["marker"]) for p in pols]
    assert len(set(looks)) == len(pols)
    # neighbours differ in both line style and marker, and their markers are staggered
    for a, b in itertools.pairwise(pols):
        assert styles[a]["ls"] != styles[b]["ls"] and styles[a]["marker"] != styles[b]["marker"]
        assert styles[a]["markevery"][0] != styles[b]["markevery"][0]


def test_coincident_lines_are_drawn_once_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two policies with the very same results: one line, whose legend label names the other
    (``first = twin``), so that no line hides another; a different policy keeps its own line,
    in a different line style and marker."""
    import matplotlib.pyplot as plt

    from gpu_sharing_gym.plots import plot_jct_cdf, plot_utilization, policy_colours

    h = 3600.0
    rows = [[t * 600.0, 0.5, 0.4, 0.5, 0.3, 0.0] for t in range(12)]
    cell = {"jobs": [_job(0, 0.0, 2 * h, [0]), _job(1, h, 4 * h, [1])], "timeseries": rows}
    cell["record"] = {"seed": 0}
    other = {
        **cell,
        "jobs": [_job(0, 0.0, 3 * h, [0])],
        "timeseries": [r[:1] + [0.2] * 5 for r in rows],
    }
    results = {"first": [cell], "twin": [cell], "other": [other]}
    colours = policy_colours(list(results))
    figs = _capture_figures(monkeypatch)
    plot_jct_cdf("s", results, colours)
    plot_utilization("s", results, colours)
    assert len(figs) == 2
    for fig in figs:
        ax = fig.axes[0]
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(lines) == 2 and sorted(labels) == sorted(lines)
        first = next(lab for lab in lines if lab.startswith("first"))
        assert first.endswith(" = twin")
        assert not any(lab.startswith("twin") for lab in lines)
        a, b = lines[first], next(ln for lab, ln in lines.items() if lab.startswith("other"))
        assert a.get_linestyle() != b.get_linestyle() and a.get_marker() != b.get_marker()
        plt.close(fig)
