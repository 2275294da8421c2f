"""Leaderboard plots (PNG bytes, matplotlib's Agg backend): one set per scenario.

* ``jct_cdf`` — CDF of offline job completion times per policy, pooled over seeds.
* ``latency_slo`` — online tail latency against the SLO: per policy (a row each, best first, so
  that no two labels share a line), the box of each tick's worst service p99 / SLO ratio (1 = at
  the SLO), and mean ``slo_attainment`` ± 95% CI against the scenario's target.
* ``utilization`` — GPU utilisation and SM activity over time per policy (first seed), the time
  axis limited to the activity of the policies shown (first placement to last completion), and
  cut where at most a tenth of the policies' activity runs on (:func:`time_axis`): a policy
  whose episode runs far longer (``fifo_exclusive`` on ``default``: 168 h where the others end
  within ~30 h) is cut off and its end named in the legend.
* ``occupancy`` — GPUs × time for one policy (first seed): every placement segment, a colour per
  job, online services outlined; a GPU's row is split into lanes for co-located jobs; the time
  axis covers first placement to last completion.

The line plots (``jct_cdf``, ``utilization``) draw at most :data:`TOP_K` policies with distinct
curves, best rank first, plus the best-ranked baseline when none of those is one
(:func:`shown_policies`); the legend's title says how many of how many are drawn (every policy
is in the tables). A policy whose curve is identical to a drawn one's is not drawn again: the
drawn one's label names it (``ppo_v1 = speed_sjf, speed_sjf_queue``), so no line hides another.
Legends sit right of the axes (they cover no data); time axes are in hours above a 2 h span.
Lines cycle line style and marker per policy (:func:`policy_styles`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from gpu_sharing_env.evaluation.occupancy import (
    activity_span,
    empty_axes,
    fig_png,
    job_style,
    plot_occupancy,
    time_limits,
    time_unit,
)

#: One scenario's results: policy -> that policy's successful cell results (seed order).
Results = Mapping[str, Sequence[Mapping[str, Any]]]

PLOT_KINDS = ("jct_cdf", "latency_slo", "utilization", "occupancy")

#: Line plots draw at most this many policies with distinct curves (plus the best baseline).
TOP_K = 4
#: The utilisation plot's time axis ends at this quantile of the policies' activity ends ...
END_QUANTILE = 0.9
#: ... unless the drawn policies end within this factor of it (then it ends with them).
OUTLIER_FACTOR = 1.5


#: Line styles and markers, cycled per policy (coprime lengths: 4 × 7 = 28 distinct pairs), so
#: that curves lying exactly on each other (two policies placing every job the same way) stay
#: distinguishable: the upper line's gaps show the lower one, and their markers sit at staggered
#: positions along the curve.
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
#: Marker spacing along a line, as a fraction of the axes diagonal.
MARK_EVERY = 0.12


def policy_colours(policies: Sequence[str]) -> dict[str, Any]:
    """A stable colour per policy: tab10 up to ten, else tab20 ordered so neighbours differ in
    hue, cycling (:func:`policy_styles` separates those that share one)."""
    if len(policies) <= 10:
        cmap = plt.get_cmap("tab10")
        return {p: cmap(i) for i, p in enumerate(policies)}
    return {p: job_style(i)[0] for i, p in enumerate(policies)}


def policy_styles(policies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Line keyword arguments per policy: line style and marker cycling, markers staggered
    (``markevery`` offset) so that coincident lines show every policy's markers."""
    n_off = len(MARKERS)
    return {
        p: {
            "ls": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)],
            "markevery": ((i % n_off) * MARK_EVERY / n_off, MARK_EVERY),
            "markersize": 4.5,
            "markerfacecolor": "none" if (i // len(MARKERS)) % 2 else None,
        }
        for i, p in enumerate(policies)
    }


def same_as(curves: Mapping[str, Any]) -> dict[str, str]:
    """For each curve equal to an earlier one (numpy arrays, compared exactly), that earlier
    policy: ``{later: first}``. The legend says so, since such lines hide each other."""
    seen: list[tuple[str, Any]] = []
    out: dict[str, str] = {}
    for pol, arr in curves.items():
        a = np.asarray(arr)
        twin = next(
            (q for q, b in seen if b.shape == a.shape and np.array_equal(a, b, equal_nan=True)),
            None,
        )
        if twin is None:
            seen.append((pol, a))
        else:
            out[pol] = twin
    return out


def shown_policies(
    curves: Mapping[str, Any], baselines: Collection[str] | None = None, k: int = TOP_K
) -> dict[str, list[str]]:
    """The policies a line plot draws, each with the policies whose curve is identical to its
    own (named in its label, not drawn): ``{drawn: [twins]}``, in the order of ``curves`` (best
    rank first). The first ``k`` distinct curves, plus the first one that is or twins a
    policy in ``baselines`` when none of those does (None: no such extra)."""
    twins = same_as(curves)
    groups: dict[str, list[str]] = {p: [] for p in curves if p not in twins}
    for later, first in twins.items():
        groups[first].append(later)
    order = list(groups)
    drawn = order[:k]

    def has_baseline(p: str) -> bool:
        return baselines is not None and any(q in baselines for q in (p, *groups[p]))

    if baselines is not None and not any(has_baseline(p) for p in drawn):
        drawn += [p for p in order[k:] if has_baseline(p)][:1]
    return {p: groups[p] for p in drawn}


def _labels(drawn: Mapping[str, Sequence[str]], extra: Mapping[str, str]) -> dict[str, str]:
    """Legend labels: the policy, ``extra[policy]``, ``(best baseline)`` for one drawn beyond
    :data:`TOP_K`, and the policies with the same curve."""
    out = {}
    for i, (pol, twins) in enumerate(drawn.items()):
        out[pol] = pol + extra.get(pol, "") + (" (best baseline)" if i >= TOP_K else "")
        out[pol] += f" = {', '.join(twins)}" if twins else ""
    return out


def _legend_title(what: str, drawn: Mapping[str, Sequence[str]], n_all: int) -> str:
    n = len(drawn) + sum(len(t) for t in drawn.values())
    return (
        what if n == n_all else f"{what}: {n} of {n_all} policies\n(best ranks; all in the tables)"
    )


def _legend_outside(ax: Any, **kwargs: Any) -> None:
    """The legend right of the axes, where it covers no data."""
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False, **kwargs
    )


_png = fig_png
_empty = empty_axes


def job_jcts(result: Mapping[str, Any]) -> list[float]:
    """JCTs (s) of the offline jobs a cell completed."""
    return [
        j["finish_s"] - j["submit_s"]
        for j in result.get("jobs", [])
        if not j["online"] and j["status"] == "done" and j["finish_s"] is not None
    ]


def plot_jct_cdf(
    scenario: str,
    results: Results,
    colours: Mapping[str, Any],
    baselines: Collection[str] | None = None,
) -> bytes:
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    styles = policy_styles(list(results))
    curves = {
        pol: np.sort([x for r in cells for x in job_jcts(r) if x > 0])
        for pol, cells in results.items()
    }
    curves = {pol: jct for pol, jct in curves.items() if jct.size}
    drawn = shown_policies(curves, baselines)
    labels = _labels(drawn, {p: f" ({curves[p].size})" for p in drawn})
    for pol in drawn:
        jct = curves[pol]
        y = np.arange(1, jct.size + 1) / jct.size
        ax.step(jct / 3600.0, y, where="post", color=colours[pol], label=labels[pol], **styles[pol])
    if not drawn:
        _empty(ax, "no completed offline jobs")
    else:
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of completed jobs")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3, which="both")
        title = _legend_title("policy (jobs, all seeds)", drawn, len(curves))
        _legend_outside(ax, fontsize=8, title=title, title_fontsize=8)
    ax.set_title(f"{scenario}: JCT CDF per policy")
    return _png(fig)


def _hboxplot(ax: Any, data: list[list[float]], positions: Any) -> Any:
    """Horizontal boxes (matplotlib >= 3.10 says ``orientation``, older ones ``vert``)."""
    kw: dict[str, Any] = {"orientation": "horizontal"}
    if "orientation" not in inspect.signature(ax.boxplot).parameters:
        kw = {"vert": False}
    return ax.boxplot(
        data, positions=positions, widths=0.6, patch_artist=True, showfliers=True,
        flierprops={"markersize": 2}, **kw,
    )  # fmt: skip


#: Height (inches) of a policy's row in the latency chart: its label never meets the next one.
ROW_IN = 0.3


def plot_latency_slo(
    scenario: str,
    results: Results,
    colours: Mapping[str, Any],
    attainment: Mapping[str, tuple[float, float]],
    slo_target: float,
) -> bytes:
    """``attainment``: policy -> (mean, CI half-width) of slo_attainment. A row per policy,
    best first (top), horizontal labels shared by the two panels."""
    pols = list(results)
    height = max(3.5, 1.4 + ROW_IN * len(pols))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, height), sharey=True)
    y = np.arange(len(pols))
    ratios = [
        [row[5] for r in results[p] for row in r.get("timeseries", []) if row[5]] for p in pols
    ]
    means = [attainment.get(p, (math.nan, math.nan)) for p in pols]
    handles: list[Any] = []
    if any(ratios):
        data = [x if x else [math.nan] for x in ratios]
        box = _hboxplot(ax1, data, y)
        for patch, p in zip(box["boxes"], pols):
            patch.set_facecolor(colours[p])
            patch.set_alpha(0.6)
        handles.append(ax1.axvline(1.0, color="red", ls="--", lw=1.2, label="SLO (p99 = target)"))
        flat = [x for xs in ratios for x in xs]
        if max(flat) / max(min(flat), 1e-9) > 50:
            ax1.set_xscale("log")
        ax1.set_xlabel("worst service p99 / SLO, per tick")
        ax1.grid(alpha=0.3, axis="x")
    else:
        _empty(ax1, "no online services")
    ax1.set_title("online p99 latency vs SLO")
    if any(math.isfinite(m) for m, _ in means):
        ax2.barh(
            y,
            [m for m, _ in means],
            xerr=[0.0 if math.isnan(h) else h for _, h in means],
            color=[colours[p] for p in pols],
            alpha=0.8,
            height=0.6,
            capsize=3,
        )
        for i, p in enumerate(pols):  # the seeds themselves: n is small
            xs = [r["record"]["slo_attainment"] for r in results[p]]
            xs = [x for x in xs if x is not None]
            ax2.plot(xs, [i] * len(xs), "k.", ms=4, label="seeds" if i == 0 else None)
        ax2.axvline(slo_target, color="red", ls=":", lw=1.5, label=f"target {slo_target:g}")
        seed_vals = [r["record"]["slo_attainment"] for p in pols for r in results[p]]
        lo = min(v for v in seed_vals if v is not None)
        ax2.set_xlim(max(0.0, min(lo, slo_target) - 0.05), 1.005)
        ax2.set_xlabel("slo_attainment (mean ± 95 % CI, t)")
        handles += ax2.get_legend_handles_labels()[0]
        ax2.grid(alpha=0.3, axis="x")
    else:
        _empty(ax2, "no online services")
    ax2.set_title("SLO attainment vs target")
    if handles:
        _legend_outside(ax2, handles=handles, fontsize=8)
    ax1.set_yticks(y, pols, fontsize=8)
    ax1.set_ylim(len(pols) - 0.5, -0.5)  # best (first) on top
    ax2.tick_params(axis="y", left=False)
    fig.subplots_adjust(wspace=0.06)  # the panels share the labels on the left
    fig.suptitle(scenario)
    return _png(fig)


def policy_span(cells: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """The activity of a policy's first seed, in seconds: first placement to last completion
    (:func:`~gpu_sharing_env.evaluation.occupancy.activity_span`); without placement records, the first
    to the last tick with a GPU in use. None when there is neither."""
    if not cells:
        return None
    span = activity_span(cells[0].get("jobs", []))
    if span is not None:
        return span
    ticks = [
        row[0]
        for row in cells[0].get("timeseries", [])
        if row[1] or row[2]  # gpu_util or sm_activity above zero (None: unknown)
    ]
    return (float(min(ticks)), float(max(ticks))) if ticks else None


def utilization_span(results: Results) -> tuple[float, float] | None:
    """The activity of every policy (:func:`policy_span`) together, in seconds; None if none."""
    spans = [sp for cells in results.values() if (sp := policy_span(cells)) is not None]
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None


def time_axis(
    spans: Mapping[str, tuple[float, float]], drawn: Collection[str]
) -> tuple[tuple[float, float], dict[str, float]] | None:
    """The utilisation plot's time span (seconds) for the ``drawn`` policies, given every
    policy's activity ``spans``, and the drawn policies it cuts off: ``{policy: its end}``.

    It runs from the first placement of a drawn policy to the last end of a drawn policy,
    except ends beyond :data:`OUTLIER_FACTOR` × the :data:`END_QUANTILE` of all policies' ends
    (the lower quantile: at most a tenth of the policies end later): outliers, cut off.
    """
    mine = {p: spans[p] for p in drawn if p in spans}
    if not mine:
        return None
    q = float(np.quantile(sorted(b for _, b in spans.values()), END_QUANTILE, method="lower"))
    cap = OUTLIER_FACTOR * q
    ends = [b for _, b in mine.values() if b <= cap]
    hi = max(ends) if ends else cap
    lo = min(a for a, _ in mine.values())
    return (lo, max(hi, lo)), {p: b for p, (_, b) in mine.items() if b > hi}


def plot_utilization(
    scenario: str,
    results: Results,
    colours: Mapping[str, Any],
    baselines: Collection[str] | None = None,
) -> bytes:
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    styles = policy_styles(list(results))
    series = {
        pol: np.array([[np.nan if v is None else v for v in row] for row in cells[0]["timeseries"]])
        for pol, cells in results.items()
        if cells and cells[0].get("timeseries")
    }
    drawn = shown_policies({pol: ts[:, :3] for pol, ts in series.items()}, baselines)
    spans = {p: sp for p, cells in results.items() if (sp := policy_span(cells)) is not None}
    axis = time_axis(spans, drawn)
    unit, per = time_unit(axis[0][1] - axis[0][0]) if axis else ("h", 3600.0)
    cut = axis[1] if axis else {}
    seeds = set()
    labels = _labels(drawn, {p: f" (to {b / per:.0f} {unit})" for p, b in cut.items()})
    for pol in drawn:
        ts = series[pol]
        seeds.add(results[pol][0]["record"]["seed"])
        for ax, col in zip(axes, (1, 2)):
            ax.plot(
                ts[:, 0] / per, ts[:, col], color=colours[pol], lw=1.2, label=labels[pol],
                **styles[pol],
            )  # fmt: skip
    if not seeds:
        _empty(axes[0], "no timeseries")
    elif axis is not None:  # only where something ran: first placement to last completion
        lo, hi = time_limits(axis[0])
        axes[1].set_xlim(lo / per, hi / per)
    for ax, name in zip(axes, ("GPU utilisation (fraction)", "SM activity (fraction)")):
        ax.set_ylabel(name, fontsize=9)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[1].set_xlabel(f"simulated time ({unit})")
    if seeds:
        title = _legend_title("policy", drawn, len(series))
        _legend_outside(axes[0], fontsize=8, title=title, title_fontsize=8)
    seed_txt = ", ".join(str(s) for s in sorted(seeds))
    axes[0].set_title(f"{scenario}: GPU utilisation and SM activity (seed {seed_txt})")
    return _png(fig)


def scenario_plots(
    scenario: str,
    results: Results,
    attainment: Mapping[str, tuple[float, float]],
    slo_target: float,
    occupancy_policy: str | None,
    baselines: Collection[str] | None = None,
) -> dict[str, bytes]:
    """All plots of one scenario, keyed by :data:`PLOT_KINDS`. ``results``: best rank first;
    ``baselines``: the policies that are baselines (the line plots add the best of them)."""
    colours = policy_colours(list(results))
    occ = results.get(occupancy_policy or "", [])
    return {
        "jct_cdf": plot_jct_cdf(scenario, results, colours, baselines),
        "latency_slo": plot_latency_slo(scenario, results, colours, attainment, slo_target),
        "utilization": plot_utilization(scenario, results, colours, baselines),
        "occupancy": plot_occupancy(scenario, occupancy_policy or "-", occ[0] if occ else None),
    }
