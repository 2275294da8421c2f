"""Leaderboard library: cells, running one cell, resume, per-seed table, summary with CI and rank.

A *cell* is one (policy, scenario, seed). Every cell runs through the one evaluation loop
(:func:`gpu_sharing_env.runner.evaluate`) on a freshly built simulator, so a cell's result depends only
on its three coordinates (the simulator is deterministic per seed), whichever process or Ray
worker runs it. Each finished cell is saved as ``DIR/cells/<scenario>/<policy>/<seed>.json``
(metrics, status, the seed's timeseries and a compact per-job placement record); a rerun skips
cells already saved with status ``ok``. Every file is written atomically (temporary file in the
same directory, then :func:`os.replace`), so a kill never leaves a half-written result.

Ranking (DESIGN.md, "Metric schema"): lowest mean ``jct_mean_s`` among the policies whose mean
``slo_attainment`` meets the scenario's ``slo_target`` (NaN, i.e. no online services, meets it);
policies that miss it rank below all that meet it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.metrics import METRIC_NAMES, PRIMARY_METRIC
from gpu_sharing_env.occupancy import PlacementRecorder
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.runner import evaluate, json_safe
from gpu_sharing_env.sim.build import make_simulator

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
#: Bumped when the cell file layout changes (older files are recomputed).
CELL_FORMAT = 1


# ============================================================================ atomic files
def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    The temporary file lives in the same directory (``os.replace`` is atomic within a file
    system) and carries the process id, so concurrent writers do not clobber each other's.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ============================================================================ cells
@dataclass(frozen=True)
class Cell:
    """One (policy, scenario, seed) of the leaderboard.

    Attributes:
        policy: Registry name (``baselines.POLICIES``).
        scenario: Scenario name (the loaded config's ``name``; output directories use it).
        scenario_path: The YAML file it was loaded from (what workers load).
        seed: Episode seed.
    """

    policy: str
    scenario: str
    scenario_path: str
    seed: int

    def path(self, out: Path) -> Path:
        """Where this cell's result file lives under the output directory ``out``."""
        return out / "cells" / self.scenario / self.policy / f"{self.seed}.json"


def scenario_digest(path: str | Path) -> str:
    """Content hash of a scenario file: a saved cell is reused only if its scenario is unchanged."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def plan_cells(
    policies: Sequence[str], scenario_paths: Mapping[str, str], seeds: Sequence[int]
) -> list[Cell]:
    """All cells, scenario-major then policy then seed (the order of tables and plots)."""
    return [
        Cell(p, s, path, seed)
        for s, path in scenario_paths.items()
        for p in policies
        for seed in seeds
    ]


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; never raises (a failure becomes ``status="error"`` with a one-line message).

    Returns the JSON-ready content of the cell file: ``record`` (the CSV row), ``timeseries``,
    ``jobs`` (placements), ``options`` (labels of option indices), ``gpu_types`` and
    ``slo_target``.
    """
    t0 = time.perf_counter()
    base: dict[str, Any] = {
        "format": CELL_FORMAT,
        "cell": {"policy": cell.policy, "scenario": cell.scenario, "seed": cell.seed},
    }
    try:
        base["scenario_digest"] = scenario_digest(cell.scenario_path)
        cfg = load_scenario(cell.scenario_path)
        policy = make_policy(cell.policy)
        sim = make_simulator(cfg)
        recorder = PlacementRecorder(sim)
        (rec,) = evaluate(policy, cfg, [cell.seed], sim=sim)
        record: dict[str, Any] = {
            "policy": cell.policy,
            "scenario": cell.scenario,
            "seed": cell.seed,
            "oracle": bool(rec["oracle"]),
        }
        record.update({k: rec[k] for k in METRIC_NAMES})
        record.update(status="ok", error="", wall_s=time.perf_counter() - t0)
        base.update(
            record=json_safe(record),
            extras=json_safe({k: v for k, v in rec.items() if k.startswith("x_")}),
            slo_target=cfg.slo_target,
            options=[o.label for o in sim.options],
            gpu_types=list(getattr(sim.cluster, "type_name_of", ())),
            timeseries=[[_finite(float(v)) for v in row] for row in sim.timeseries],
            jobs=recorder.jobs() if recorder.active else [],
        )
    except Exception as e:  # recorded, never propagated: one failing cell must not stop the rest
        record = {"policy": cell.policy, "scenario": cell.scenario, "seed": cell.seed}
        record.update({"oracle": None, **dict.fromkeys(METRIC_NAMES)})
        record.update(status="error", error=_one_line(e), wall_s=time.perf_counter() - t0)
        base["record"] = record
    return base


def save_cell(out: Path, cell: Cell, result: Mapping[str, Any]) -> None:
    """Atomically write a cell's result file."""
    atomic_write_text(cell.path(out), json.dumps(result, allow_nan=False, separators=(",", ":")))


def load_cell(out: Path, cell: Cell) -> dict[str, Any] | None:
    """A saved result for ``cell``, or None if absent, unreadable, outdated or for another
    version of the scenario file."""
    try:
        data = json.loads(cell.path(out).read_text())
        if data.get("format") != CELL_FORMAT or data["cell"] != {
            "policy": cell.policy,
            "scenario": cell.scenario,
            "seed": cell.seed,
        }:
            return None
        if data.get("scenario_digest") not in (None, scenario_digest(cell.scenario_path)):
            return None
        return dict(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pending_cells(out: Path, cells: Iterable[Cell]) -> tuple[list[Cell], dict[Cell, dict]]:
    """Split ``cells`` into those still to run and the saved ``ok`` results (errors rerun)."""
    todo: list[Cell] = []
    done: dict[Cell, dict] = {}
    for c in cells:
        res = load_cell(out, c)
        if res is not None and res["record"].get("status") == "ok":
            done[c] = res
        else:
            todo.append(c)
    return todo, done


# ============================================================================ tables
def cells_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The per-cell table (``leaderboard.csv``): one row per cell, columns :data:`CELL_COLUMNS`."""
    rows = [{k: r["record"].get(k) for k in CELL_COLUMNS} for r in results]
    df = pd.DataFrame(rows, columns=list(CELL_COLUMNS))
    for k in (*METRIC_NAMES, "wall_s"):
        df[k] = pd.to_numeric(df[k], errors="coerce").astype(float)
    df["error"] = df["error"].fillna("")
    return df


def mean_ci95(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, 95% confidence half-width (Student t, n-1 dof) and n of the finite values.

    The half-width is NaN for fewer than two values (no spread to estimate).
    """
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, n
    half = float(stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, half, n


def meets_slo(slo_attainment: float, target: float) -> bool:
    """The SLO rule: NaN attainment (no online services) counts as meeting the target."""
    return bool(math.isnan(slo_attainment) or slo_attainment >= target)


def rank_policies(summary: pd.DataFrame) -> pd.Series:
    """Ranks (1 = best) within each scenario; needs ``scenario``, ``policy``, ``n``,
    ``meets_slo`` and ``<PRIMARY_METRIC>_mean`` columns.

    Order: policies meeting the SLO first, then by mean primary metric (lower is better; NaN,
    e.g. no job completed, after numbers), ties by policy name. Policies without a single
    successful cell get no rank (NaN).
    """
    ranks = pd.Series(np.nan, index=summary.index, dtype=float)
    col = f"{PRIMARY_METRIC}_mean"
    for _, grp in summary[summary["n"] > 0].groupby("scenario", sort=False):
        key = grp.assign(
            _miss=~grp["meets_slo"].astype(bool),
            _nan=grp[col].isna(),
        ).sort_values(["_miss", "_nan", col, "policy"], kind="stable")
        ranks.loc[key.index] = np.arange(1, len(key) + 1, dtype=float)
    return ranks


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
    # Scenario order as given, best policy first, unranked policies last.
    summary["_s"] = pd.factorize(summary["scenario"])[0]
    summary = summary.sort_values(["_s", "rank"], na_position="last", kind="stable")
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
    from tqdm import tqdm

    # Imported here: the backends import this module (workers unpickle run_cell from it).
    from gsg.backends import run_cells

    todo, done = pending_cells(out, cells)
    with tqdm(
        total=len(cells), initial=len(done), desc="cells", unit="cell", disable=not progress
    ) as bar:
        for cell, res in run_cells(todo, backend, workers, address):
            save_cell(out, cell, res)
            done[cell] = res
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
    from gsg import report  # matplotlib and torch: only the parent process needs them

    cells = cells_frame(results)
    summary = summarize(cells, slo_targets)
    write_csv(out / "leaderboard.csv", cells)
    write_csv(out / "summary.csv", summary)
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
        report.write_tensorboard(out / "tb", cells, summary)
    return summary
