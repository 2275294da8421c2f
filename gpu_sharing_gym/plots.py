"""Leaderboard plots (PNG bytes, matplotlib's Agg backend): one set per scenario.

* ``jct_cdf`` — CDF of offline job completion times per policy, pooled over seeds.
* ``latency_slo`` — online tail latency against the SLO: per policy, the box of each tick's
  worst service p99 / SLO ratio (1 = at the SLO), and mean ``slo_attainment`` ± 95% CI against
  the scenario's target.
* ``utilization`` — GPU utilisation and SM activity over time per policy (first seed), the time
  axis limited to the activity (first placement to last completion of any policy).
* ``occupancy`` — GPUs × time for one policy (first seed): every placement segment, a colour per
  job, online services outlined; a GPU's row is split into lanes for co-located jobs; the time
  axis covers first placement to last completion.

Legends sit right of the axes (they cover no data); time axes are in hours above a 2 h span.
Lines cycle line style and marker per policy (:func:`policy_styles`), and a policy whose curve is
identical to an earlier one's is labelled ``= <that policy>`` in the legend, so lines lying on
each other stay distinguishable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from gpu_sharing_env.occupancy import (
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


def plot_jct_cdf(scenario: str, results: Results, colours: Mapping[str, Any]) -> bytes:
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    styles = policy_styles(list(results))
    curves = {
        pol: np.sort([x for r in cells for x in job_jcts(r) if x > 0])
        for pol, cells in results.items()
    }
    curves = {pol: jct for pol, jct in curves.items() if jct.size}
    twins = same_as(curves)
    drawn = False
    for pol, jct in curves.items():
        y = np.arange(1, jct.size + 1) / jct.size
        label = f"{pol} ({jct.size})" + (f" = {twins[pol]}" if pol in twins else "")
        ax.step(jct / 3600.0, y, where="post", color=colours[pol], label=label, **styles[pol])
        drawn = True
    if not drawn:
        _empty(ax, "no completed offline jobs")
    else:
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of completed jobs")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3, which="both")
        _legend_outside(ax, fontsize=8, title="policy (jobs, all seeds)", title_fontsize=8)
    ax.set_title(f"{scenario}: JCT CDF per policy")
    return _png(fig)


def plot_latency_slo(
    scenario: str,
    results: Results,
    colours: Mapping[str, Any],
    attainment: Mapping[str, tuple[float, float]],
    slo_target: float,
) -> bytes:
    """``attainment``: policy -> (mean, CI half-width) of slo_attainment."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    pols = list(results)
    ratios = [
        [row[5] for r in results[p] for row in r.get("timeseries", []) if row[5]] for p in pols
    ]
    if any(ratios):
        data = [x if x else [math.nan] for x in ratios]
        box = ax1.boxplot(data, patch_artist=True, showfliers=True, flierprops={"markersize": 2})
        for patch, p in zip(box["boxes"], pols):
            patch.set_facecolor(colours[p])
            patch.set_alpha(0.6)
        ax1.axhline(1.0, color="red", ls="--", lw=1.2, label="SLO (p99 = target latency)")
        flat = [x for xs in ratios for x in xs]
        if max(flat) / max(min(flat), 1e-9) > 50:
            ax1.set_yscale("log")
        ax1.set_xticks(range(1, len(pols) + 1), pols, rotation=30, ha="right", fontsize=8)
        ax1.set_ylabel("worst service p99 / SLO, per tick")
        ax1.legend(fontsize=8)
        ax1.grid(alpha=0.3, axis="y")
    else:
        _empty(ax1, "no online services")
    ax1.set_title("online p99 latency vs SLO")
    means = [attainment.get(p, (math.nan, math.nan)) for p in pols]
    if any(math.isfinite(m) for m, _ in means):
        x = np.arange(len(pols))
        ax2.bar(
            x,
            [m for m, _ in means],
            yerr=[0.0 if math.isnan(h) else h for _, h in means],
            color=[colours[p] for p in pols],
            alpha=0.8,
            capsize=3,
        )
        for i, p in enumerate(pols):  # the seeds themselves: n is small
            ys = [r["record"]["slo_attainment"] for r in results[p]]
            ys = [y for y in ys if y is not None]
            ax2.plot([i] * len(ys), ys, "k.", ms=4, label="seeds" if i == 0 else None)
        ax2.axhline(slo_target, color="red", ls="--", lw=1.2, label=f"target {slo_target:g}")
        seed_vals = [r["record"]["slo_attainment"] for p in pols for r in results[p]]
        lo = min(v for v in seed_vals if v is not None)
        ax2.set_ylim(max(0.0, min(lo, slo_target) - 0.05), 1.005)
        ax2.set_xticks(x, pols, rotation=30, ha="right", fontsize=8)
        ax2.set_ylabel("slo_attainment (mean ± 95 % CI, t)")
        _legend_outside(ax2, fontsize=8)
        ax2.grid(alpha=0.3, axis="y")
    else:
        _empty(ax2, "no online services")
    ax2.set_title("SLO attainment vs target")
    fig.suptitle(scenario)
    return _png(fig)


def utilization_span(results: Results) -> tuple[float, float] | None:
    """The activity shown by the utilisation plot, in seconds: first placement to last
    completion (:func:`~gpu_sharing_env.occupancy.activity_span`) over the first seed of every
    policy; without placement records, the first to the last tick with a GPU in use. None when
    there is neither."""
    spans = [activity_span(cells[0].get("jobs", [])) for cells in results.values() if cells]
    found = [sp for sp in spans if sp is not None]
    if found:
        return min(a for a, _ in found), max(b for _, b in found)
    ticks = [
        row[0]
        for cells in results.values()
        if cells
        for row in cells[0].get("timeseries", [])
        if row[1] or row[2]  # gpu_util or sm_activity above zero (None: unknown)
    ]
    return (float(min(ticks)), float(max(ticks))) if ticks else None


def plot_utilization(scenario: str, results: Results, colours: Mapping[str, Any]) -> bytes:
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    styles = policy_styles(list(results))
    series = {
        pol: np.array([[np.nan if v is None else v for v in row] for row in cells[0]["timeseries"]])
        for pol, cells in results.items()
        if cells and cells[0].get("timeseries")
    }
    twins = same_as({pol: ts[:, :3] for pol, ts in series.items()})
    span = utilization_span(results)
    unit, per = time_unit(span[1] - span[0]) if span else ("h", 3600.0)
    seeds = set()
    for pol, ts in series.items():
        seeds.add(results[pol][0]["record"]["seed"])
        label = pol + (f" = {twins[pol]}" if pol in twins else "")
        for ax, col in zip(axes, (1, 2)):
            ax.plot(
                ts[:, 0] / per, ts[:, col], color=colours[pol], lw=1.2, label=label, **styles[pol]
            )
    if not seeds:
        _empty(axes[0], "no timeseries")
    elif span is not None:  # only where something ran: first placement to last completion
        lo, hi = time_limits(span)
        axes[1].set_xlim(lo / per, hi / per)
    for ax, name in zip(axes, ("GPU utilisation (fraction)", "SM activity (fraction)")):
        ax.set_ylabel(name, fontsize=9)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[1].set_xlabel(f"simulated time ({unit})")
    if seeds:
        _legend_outside(axes[0], fontsize=8, title="policy", title_fontsize=8)
    seed_txt = ", ".join(str(s) for s in sorted(seeds))
    axes[0].set_title(f"{scenario}: GPU utilisation and SM activity (seed {seed_txt})")
    return _png(fig)


def scenario_plots(
    scenario: str,
    results: Results,
    attainment: Mapping[str, tuple[float, float]],
    slo_target: float,
    occupancy_policy: str | None,
) -> dict[str, bytes]:
    """All plots of one scenario, keyed by :data:`PLOT_KINDS`."""
    colours = policy_colours(list(results))
    occ = results.get(occupancy_policy or "", [])
    return {
        "jct_cdf": plot_jct_cdf(scenario, results, colours),
        "latency_slo": plot_latency_slo(scenario, results, colours, attainment, slo_target),
        "utilization": plot_utilization(scenario, results, colours),
        "occupancy": plot_occupancy(scenario, occupancy_policy or "-", occ[0] if occ else None),
    }
