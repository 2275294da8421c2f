"""Leaderboard plots with many policies (issue 49): a line plot draws the top few policies and
the best baseline, not 19 lines over each other; the utilisation plot's time axis ends where
most policies' activity ends, an outlier's end named in the legend; the latency chart gives
each policy its own row, so no two labels meet."""

from __future__ import annotations

import itertools
from typing import Any

import matplotlib.pyplot as plt
import pytest

from gpu_sharing_gym import plots
from gpu_sharing_gym.plots import (
    TOP_K,
    plot_jct_cdf,
    plot_latency_slo,
    plot_utilization,
    policy_colours,
    shown_policies,
    time_axis,
)

H = 3600.0
N = 19


def _cell(i: int, end_h: float, seed: int = 0) -> dict[str, Any]:
    """Policy ``i``'s cell: one offline job from 0 to ``end_h`` hours (JCT distinct per
    policy), utilisation 0.1 + 0.04 i while it runs, ticks every 30 min to the end."""
    end = end_h * H
    ticks = [t * 1800.0 for t in range(int(end // 1800.0) + 2)]
    u = 0.1 + 0.04 * i
    rows = [
        [t, u if t <= end else 0.0, u / 2 if t <= end else 0.0, u, 0.5, 0.3 + i / 100]
        for t in ticks
    ]
    job = {
        "id": 0, "online": False, "model": "resnet50", "num_gpus": 1, "submit_s": 0.0,
        "start_s": 0.0, "finish_s": end, "status": "done", "segs": [[0.0, end, [0], 0]],
    }  # fmt: skip
    return {"jobs": [job], "timeseries": rows, "record": {"seed": seed, "slo_attainment": 0.99}}


def _results(outlier_rank: int) -> dict[str, list[dict[str, Any]]]:
    """19 policies, best rank first; the one at ``outlier_rank`` runs to 168 h, the others end
    between 10 and 28 h."""
    names = [f"agent{i}" if i < 6 else f"heur{i}" for i in range(N)]
    return {p: [_cell(i, 168.0 if i == outlier_rank else 10.0 + i)] for i, p in enumerate(names)}


@pytest.fixture
def figs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    out: list[Any] = []
    monkeypatch.setattr(plots, "_png", lambda fig: out.append(fig) or b"")
    yield out
    for fig in out:
        plt.close(fig)


def _legend(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_nineteen_policies_draw_the_top_ones_and_the_best_baseline(figs: list[Any]) -> None:
    results = _results(outlier_rank=1)
    base = [p for p in results if p.startswith("heur")]
    colours = policy_colours(list(results))
    plot_jct_cdf("s", results, colours, base)
    plot_utilization("s", results, colours, base)
    for fig in figs:
        ax = fig.axes[0]
        labels = [ln.get_label() for ln in ax.get_lines()]
        assert len(labels) == TOP_K + 1 <= 5  # the top 4 (all agents) and heur6
        assert [lab.split()[0] for lab in labels] == [
            "agent0",
            "agent1",
            "agent2",
            "agent3",
            "heur6",
        ]
        assert "(best baseline)" in labels[-1]
        assert f"of {N} policies" in ax.get_legend().get_title().get_text()


def test_utilization_time_axis_ignores_an_outlier(figs: list[Any]) -> None:
    results = _results(outlier_rank=1)  # agent1 (drawn) runs to 168 h
    plot_utilization("s", results, policy_colours(list(results)))
    ax = figs[0].axes[1]
    lo, hi = ax.get_xlim()
    assert ax.get_xlabel() == "simulated time (h)"
    assert lo == 0.0 and 13.0 <= hi < 14.0  # agent3 ends at 13 h (+ 2 % margin), not 168 h
    assert "agent1 (to 168 h)" in _legend(figs[0].axes[0])


def test_time_axis_quantile_and_cap() -> None:
    spans = {f"p{i}": (0.0, 10.0 + i) for i in range(N - 1)} | {"slow": (0.0, 168.0)}
    # lower 90 % quantile of the 19 ends: 26; cap 1.5 x 26 = 39: "slow" is cut off
    (lo, hi), cut = time_axis(spans, ["p0", "slow", "p5"])
    assert (lo, hi) == (0.0, 15.0) and cut == {"slow": 168.0}
    # an outlier not drawn changes nothing; with nothing long, the axis ends with the drawn
    assert time_axis(spans, ["p0", "p5"]) == ((0.0, 15.0), {})
    # a few policies of similar length: no cut at all
    few = {"a": (3.0, 10.0), "b": (1.0, 12.0)}
    assert time_axis(few, ["a", "b"]) == ((1.0, 12.0), {})
    assert time_axis(few, ["c"]) is None


def test_shown_policies_folds_twins_and_adds_the_best_baseline() -> None:
    curves = {p: [i] for i, p in enumerate(["a", "b", "c", "d", "e", "f"])}
    curves["b2"] = [1]  # b's twin, listed later
    assert shown_policies(curves, k=2) == {"a": [], "b": ["b2"]}
    assert shown_policies(curves, ["b2", "f"], k=2) == {"a": [], "b": ["b2"]}  # b2 is drawn
    assert shown_policies(curves, ["e", "f"], k=2) == {"a": [], "b": ["b2"], "e": []}
    assert shown_policies(curves, [], k=10) == {p: [] for p in "abcdef"} | {"b": ["b2"]}


def test_latency_chart_labels_never_overlap(figs: list[Any]) -> None:
    results = _results(outlier_rank=18)
    pols = list(results)
    attain = {p: (0.99, 0.01) for p in pols}
    plot_latency_slo("s", results, policy_colours(pols), attain, 0.95)
    fig = figs[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    ticks = [t for t in ax.get_yticklabels() if t.get_text()]
    assert [t.get_text() for t in ticks] == pols  # a row each, best first (top)
    assert all(t.get_rotation() == 0 for t in ticks)
    boxes = [t.get_window_extent(renderer) for t in ticks]
    assert boxes[0].y0 > boxes[-1].y0  # best on top
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)
