"""``gsg reproduce --experiment ID --sweep NAME=LO:HI:N``: one experiment's checks against a
setup parameter (:data:`~gpu_sharing_gym.fidelity.common.PARAMS`), so a reader sees where the
claim holds.

At each of ``N`` evenly spaced values from ``LO`` to ``HI`` the experiment runs over the same
paired seeds; every check's quantity (its mean over seeds and 95 % interval) is written to
``PREFIX.json`` and ``PREFIX.csv`` and plotted against the parameter in ``PREFIX.png`` (one
panel per check: the mean, its interval as a band, the bound as a dashed line).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from gpu_sharing_gym.fidelity.common import PARAMS, run_experiment


class SweepError(ValueError):
    """A bad ``--sweep`` argument (its message is the CLI's one line)."""


def parse_spec(spec: str) -> tuple[str, list[float]]:
    """``"NAME=LO:HI:N"`` -> (NAME, N values from LO to HI evenly spaced)."""
    name, eq, rng = spec.partition("=")
    parts = rng.split(":")
    if not eq or not name or len(parts) != 3:
        raise SweepError(f"--sweep {spec!r}: expected NAME=LO:HI:N")
    try:
        lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise SweepError(f"--sweep {spec!r}: LO and HI must be numbers, N an integer") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise SweepError(f"--sweep {spec!r}: need finite LO <= HI")
    if n < 1 or (n == 1 and lo != hi):
        raise SweepError(f"--sweep {spec!r}: N must be >= 2 (1 only when LO == HI)")
    return name, [float(v) for v in np.linspace(lo, hi, n)]


def sweep(
    exp_id: str,
    fn: Callable[[Sequence[int], bool], dict[str, Any]],
    param: str,
    values: Sequence[float],
    seeds: Sequence[int],
    quick: bool,
    workers: int,
    on_point: Callable[[dict[str, Any]], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> dict[str, Any]:
    """Run ``exp_id`` at each value of ``param``, its episodes on ``backend`` (local processes
    or Ray tasks, :func:`~gpu_sharing_gym.fidelity.common.run_experiment`); returns the
    sweep's JSON document. A bracket declared on another parameter stays at its central value
    (its ends are not run)."""
    points = []
    for value in values:
        rec = run_experiment(
            exp_id, fn, seeds, quick, workers, {param: value}, False, backend, address
        )
        point = {
            "value": value,
            "verdict": rec["verdict"],
            "holds": rec["holds"],
            "wall_s": rec["wall_s"],
            "checks": [
                {k: c[k] for k in ("name", "op", "bound", "value", "ci", "n", "ok")}
                for c in rec["checks"]
            ],
        }
        points.append(point)
        if on_point is not None:
            on_point(point)
    return {
        "experiment": exp_id,
        "param": param,
        "param_doc": PARAMS[param].doc,
        "seeds": list(seeds),
        "quick": quick,
        "ci_method": rec["ci_method"],
        "points": points,
    }


def _atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def to_csv(doc: dict[str, Any]) -> str:
    """One row per (value, check): value, check, op, bound, mean, ci_low, ci_high, ok."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([doc["param"], "check", "op", "bound", "mean", "ci_low", "ci_high", "n", "ok"])
    for p in doc["points"]:
        for c in p["checks"]:
            w.writerow(
                [p["value"], c["name"], c["op"], c["bound"], c["value"], *c["ci"], c["n"], c["ok"]]
            )
    return buf.getvalue()


def plot(doc: dict[str, Any]) -> bytes:
    """PNG bytes: one panel per check against the parameter."""
    names = [c["name"] for c in doc["points"][0]["checks"]]
    x = np.array([p["value"] for p in doc["points"]], dtype=float)
    fig, axes = plt.subplots(
        len(names), 1, figsize=(6.4, 2.2 * len(names) + 0.8), sharex=True, squeeze=False
    )
    for i, (ax, name) in enumerate(zip(axes[:, 0], names, strict=True)):
        cs = [p["checks"][i] for p in doc["points"]]
        y = np.array([c["value"] for c in cs], dtype=float)
        lo = np.array([c["ci"][0] for c in cs], dtype=float)
        hi = np.array([c["ci"][1] for c in cs], dtype=float)
        ax.fill_between(x, lo, hi, alpha=0.25, color="C0", label="95 % CI")
        ax.plot(x, y, "o-", color="C0", label="mean over seeds")
        ok = np.array([c["ok"] for c in cs], dtype=bool)
        ax.plot(x[ok], y[ok], "o", color="C2", label="holds (CI beyond bound)")
        ax.axhline(cs[0]["bound"], ls="--", color="0.3", lw=1, label=f"bound ({cs[0]['op']})")
        ax.set_title(f"{name} {cs[0]['op']} {cs[0]['bound']:g}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="best")
    axes[-1, 0].set_xlabel(doc["param"])
    seeds = doc["seeds"]
    fig.suptitle(
        f"{doc['experiment']}: checks vs {doc['param']} (seeds {seeds[0]}-{seeds[-1]}, "
        f"{'quick' if doc['quick'] else 'full'} scenarios)",
        fontsize=10,
    )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def write(doc: dict[str, Any], prefix: Path, json_text: str) -> list[Path]:
    """``PREFIX.json``, ``PREFIX.csv``, ``PREFIX.png``, each written atomically."""
    out = [prefix.with_name(prefix.name + ext) for ext in (".json", ".csv", ".png")]
    _atomic(out[0], json_text.encode())
    _atomic(out[1], to_csv(doc).encode())
    _atomic(out[2], plot(doc))
    return out
