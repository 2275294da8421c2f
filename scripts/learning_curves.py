"""Validation JCT against wall-clock time for training runs (``gsg train`` run directories).

    python scripts/learning_curves.py runs/new runs/old --labels "new recipe,ppo_v1 recipe" \
        --out docs/img/learning_curves.png

Reads each run's ``metrics.json`` (its ``eval_history``: validation ``jct_mean_s`` and
``slo_attainment`` at each evaluation, with the run's wall-clock seconds by then, ``wall_s``),
prints one table row per evaluation and draws JCT against minutes, marking evaluations that miss
the scenario's SLO target with a hollow marker. The best baseline on the same seeds is drawn as
a horizontal line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any


def load_history(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run's evaluation history (entries with ``wall_s``) and its ``metrics.json``."""
    path = run / "metrics.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"learning_curves: {path}: {e}") from None
    hist = [h for h in data.get("eval_history", []) if "wall_s" in h]
    if not hist:
        raise SystemExit(f"learning_curves: {path}: eval_history has no wall_s entries")
    return hist, data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="gsg train run directories")
    ap.add_argument("--labels", default=None, help="comma list, one per run (default: dir names)")
    ap.add_argument("--out", type=Path, default=None, help="PNG to write")
    ap.add_argument("--slo-target", type=float, default=0.95)
    args = ap.parse_args(argv)
    labels = args.labels.split(",") if args.labels else [r.name for r in args.runs]
    if len(labels) != len(args.runs):
        print("learning_curves: --labels: one label per run", file=sys.stderr)
        return 2
    curves = []
    for run, label in zip(args.runs, labels, strict=True):
        hist, data = load_history(run)
        curves.append((label, hist, data))
        print(f"{label} ({run}):")
        print(f"  {'min':>6} {'steps':>9} {'jct_mean_s':>11} {'slo':>7}")
        for h in hist:
            print(f"  {h['wall_s'] / 60:>6.1f} {h['timesteps']:>9} {h['jct_mean_s']:>11.0f} "
                  f"{h['slo_attainment']:>7.4f}")  # fmt: skip
    if args.out is None:
        return 0
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.8 + 0.18 * max(0, len(curves) - 4)))
    # one marker per run, cycling (a fixed-length zip would drop the runs after the fifth)
    for (label, hist, _), marker in zip(curves, itertools.cycle("os^dvPX*"), strict=False):
        x = [h["wall_s"] / 60 for h in hist]
        y = [h["jct_mean_s"] for h in hist]
        (line,) = ax.plot(x, y, label=label, marker=marker, markersize=4)
        miss = [(a, b) for a, b, h in zip(x, y, hist, strict=True)
                if h["slo_attainment"] < args.slo_target]  # fmt: skip
        if miss:
            ax.scatter(*zip(*miss, strict=True), s=40, facecolors="white",
                       edgecolors=line.get_color(), zorder=3)  # fmt: skip
    base = curves[0][2]
    best = base.get("best_baseline")
    for name, rec in base.get("baselines", {}).items():
        if name in ("speed_sjf", best):
            ax.axhline(rec["jct_mean_s"], ls="--", lw=1, color="grey")
            ax.annotate(name, (0, rec["jct_mean_s"]), fontsize=8, color="grey",
                        xytext=(2, 2), textcoords="offset points")  # fmt: skip
    ax.set_xlabel("wall-clock minutes (2 cores; pretraining included)")
    ax.set_ylabel("validation mean JCT (s)")
    ax.set_title("Validation JCT against wall-clock (hollow: misses the SLO target)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, frameon=False)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
