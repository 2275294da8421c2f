"""Leaderboard library: cells, running one cell, resume, per-seed table, summary with CI and rank.

A *cell* is one (policy, scenario, seed). Every cell runs through the one evaluation loop
(:func:`gpu_sharing_env.evaluation.runner.evaluate`) on a freshly built simulator, so a cell's result depends only
on its three coordinates (the simulator is deterministic per seed), whichever process or Ray
worker runs it. Each finished cell is saved as ``DIR/cells/<scenario>/<policy>/<seed>.json``
(metrics, status, the seed's timeseries and a compact per-job placement record); a rerun skips
cells already saved with status ``ok``. Every file is written atomically (temporary file in the
same directory, then :func:`os.replace`), so a kill never leaves a half-written result.

Ranking (DESIGN.md, "Metric schema"): lowest mean ``jct_mean_s`` among the policies whose mean
``slo_attainment`` meets the scenario's ``slo_target`` (NaN, i.e. no online services, meets it);
policies that miss it rank below all that meet it. Policies equal on both (SLO met or not, and
the same mean ``jct_mean_s``) tie and share a rank: 1, 1, 3.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpu_sharing_env.evaluation.metrics import METRIC_NAMES, PRIMARY_METRIC
from gpu_sharing_gym.backends import run_cells
from gpu_sharing_gym.cells import CELL_FORMAT as CELL_FORMAT
from gpu_sharing_gym.cells import Cell, pending_cells, save_cell
from gpu_sharing_gym.cells import scenario_digest as scenario_digest
from gpu_sharing_gym.ci import mean_ci95 as mean_ci95
from gpu_sharing_gym.plumbing.fileio import atomic_write_bytes as atomic_write_bytes
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.progress import KindETA
from gpu_sharing_gym.plumbing.progress import progress as progress_bar

#: Columns of ``leaderboard.csv``, in order.
CELL_COLUMNS: tuple[str, ...] = (
    "policy",
    "scenario",
    "seed",
    "oracle",
    *METRIC_NAMES,
    "status",
    "error",
    "wall_s",
)


# ============================================================================ tables
def cells_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The per-cell table (``leaderboard.csv``): one row per cell, columns :data:`CELL_COLUMNS`."""
    rows = [{k: r["record"].get(k) for k in CELL_COLUMNS} for r in results]
    df = pd.DataFrame(rows, columns=list(CELL_COLUMNS))
    for k in (*METRIC_NAMES, "wall_s"):
        df[k] = pd.to_numeric(df[k], errors="coerce").astype(float)
    df["error"] = df["error"].fillna("")
    return df


def meets_slo(slo_attainment: float, target: float) -> bool:
    """The SLO rule: NaN attainment (no online services) counts as meeting the target."""
    return bool(math.isnan(slo_attainment) or slo_attainment >= target)


def rank_policies(summary: pd.DataFrame) -> pd.Series:
    """Ranks (1 = best) within each scenario; needs ``scenario``, ``policy``, ``n``,
    ``meets_slo`` and ``<PRIMARY_METRIC>_mean`` columns.

    Order: policies meeting the SLO first, then by mean primary metric (lower is better; NaN,
    e.g. no job completed, after numbers). A rank is computed from exactly two things, whether
    the policy meets the SLO and its mean primary metric, so policies equal on both (the same
    float, or both NaN) *tie* and share a rank, standard competition style (1, 1, 3).
    Policies without a single successful cell get no rank (NaN).
    """
    ranks = pd.Series(np.nan, index=summary.index, dtype=float)
    col = f"{PRIMARY_METRIC}_mean"
    for _, grp in summary[summary["n"] > 0].groupby("scenario", sort=False):
        miss = ~grp["meets_slo"].astype(bool)
        value = grp[col].astype(float)
        keys = [rank_key(bool(m), float(v)) for m, v in zip(miss, value)]
        for idx, key in zip(grp.index, keys):  # 1 + how many policies are strictly better
            ranks.loc[idx] = 1.0 + sum(k < key for k in keys)
    return ranks


def rank_key(misses_slo: bool, primary_mean: float) -> tuple[bool, bool, float]:
    """What a rank is computed from, as a sort key (smaller is better): missing the SLO, then
    having no primary metric (NaN), then the primary metric itself. Equal keys are a tie."""
    nan = math.isnan(primary_mean)
    return (misses_slo, nan, 0.0 if nan else primary_mean)


def summarize(cells: pd.DataFrame, slo_targets: Mapping[str, float]) -> pd.DataFrame:
    """Per policy × scenario: ``<metric>_mean`` and ``<metric>_ci95`` of every schema metric over
    the successful seeds, ``n`` (successful seeds), ``n_error``, ``oracle``, ``slo_target``,
    ``meets_slo`` and ``rank``. Rows keep the order of first appearance in ``cells``."""
    rows = []
    for (scen, pol), grp in cells.groupby(["scenario", "policy"], sort=False):
        ok = grp[grp["status"] == "ok"]
        target = float(slo_targets[str(scen)])
        oracle = bool(ok["oracle"].astype(bool).any()) if len(ok) else False
        row: dict[str, Any] = {
            "scenario": scen,
            "policy": pol,
            "oracle": oracle,
            "n": len(ok),
            "n_error": int((grp["status"] != "ok").sum()),
            "slo_target": target,
        }
        for m in METRIC_NAMES:
            mean, half, _ = mean_ci95(ok[m].tolist())
            row[f"{m}_mean"] = mean
            row[f"{m}_ci95"] = half
        row["meets_slo"] = meets_slo(row["slo_attainment_mean"], target) if len(ok) else False
        rows.append(row)
    summary = pd.DataFrame(rows)
    if summary.empty:
        return summary
    summary["rank"] = rank_policies(summary)
    # Scenario order as given, best policy first (tied ones by name), unranked policies last.
    summary["_s"] = pd.factorize(summary["scenario"])[0]
    summary = summary.sort_values(["_s", "rank", "policy"], na_position="last", kind="stable")
    summary = summary.drop(columns="_s").reset_index(drop=True)
    lead = ["scenario", "rank", "policy", "oracle", "n", "n_error", "slo_target", "meets_slo"]
    rest = [c for c in summary.columns if c not in lead]
    return summary[lead + rest]


def write_csv(path: Path, df: pd.DataFrame) -> None:
    """Atomically write a CSV (full float precision; NaN as an empty field)."""
    atomic_write_text(path, df.to_csv(index=False))


# ============================================================================ running
def run_leaderboard(
    out: Path,
    cells: Sequence[Cell],
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run the cells not yet saved ``ok`` under ``out`` and return every cell's result, in the
    order of ``cells``. Each result is saved as soon as it arrives, so an interrupted run
    (KeyboardInterrupt propagates) resumes where it stopped."""
    todo, done = pending_cells(out, cells)
    # the ETA per policy (and scenario): a planner cell costs 100x a heuristic's
    several = len({c.scenario for c in cells}) > 1
    kind = (lambda c: f"{c.policy}/{c.scenario}") if several else (lambda c: c.policy)
    timed = [(kind(c), r["record"].get("wall_s")) for c, r in done.items()]
    eta = KindETA(map(kind, todo), min(workers, len(todo)), timed)
    bar = progress_bar(
        len(cells), "cells", "cell", initial=len(done), disable=not progress, eta=eta.text
    )
    # closing(): an interrupt in this loop stops the backend's workers now, not at collection
    with bar, closing(run_cells(todo, backend, workers, address)) as results:
        for cell, res in results:
            save_cell(out, cell, res)
            done[cell] = res
            eta.finished(kind(cell), res["record"].get("wall_s"))
            bar.update(1)
            rec = res["record"]
            if rec["status"] != "ok":
                bar.write(f"cell {cell.policy}/{cell.scenario}/seed {cell.seed}: {rec['error']}")
    return [done[c] for c in cells]


def write_outputs(
    out: Path,
    results: Sequence[Mapping[str, Any]],
    slo_targets: Mapping[str, float],
    command: str,
    seeds: Sequence[int],
    occupancy_policy: str | None = None,
    tensorboard: bool = True,
) -> pd.DataFrame:
    """Write ``leaderboard.csv``, ``summary.csv``, ``LEADERBOARD.md``, ``plots/``,
    ``index.html`` and ``tb/`` from the cell results; return the summary table."""
    from gpu_sharing_gym import report  # matplotlib and torch: only the parent process needs them

    cells = cells_frame(results)
    summary = summarize(cells, slo_targets)
    write_csv(out / "leaderboard.csv", cells)
    # ranks as integers (1, 1, 3); a policy without a successful cell has none (empty field)
    write_csv(out / "summary.csv", summary.astype({"rank": "Int64"}))
    atomic_write_text(out / "LEADERBOARD.md", report.markdown(cells, summary, command, seeds))
    by_scen: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for r in results:
        rec = r["record"]
        pol = by_scen.setdefault(rec["scenario"], {}).setdefault(rec["policy"], [])
        if rec["status"] == "ok":
            pol.append(r)
    plots = report.make_plots(summary, by_scen, occupancy_policy)
    report.write_plots(out / "plots", plots)
    atomic_write_text(out / "index.html", report.html_page(cells, summary, plots, command, seeds))
    if tensorboard:
        try:
            import torch.utils.tensorboard  # noqa: F401  (the event-file writer)
        except ImportError:
            print(
                "leaderboard: tb/ not written (TensorBoard logs need the RL extra: "
                "pip install 'gpu-sharing-gym[rl]')",
                file=sys.stderr,
            )
        else:
            report.write_tensorboard(out / "tb", cells, summary)
    return summary
