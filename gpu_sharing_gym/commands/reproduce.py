"""Reproduce the seed papers' published findings with the simulator (docs/fidelity.md).

gsg reproduce --experiment all --json out/fidelity.json
gsg reproduce --experiment muxflow-online,pai-sjf --quick --seeds 1

Each experiment (``fidelity.EXPERIMENTS``) runs on a scenario built to match its paper's setup
and yields a record ``{"id", "paper", "claim", "paper_value", "sim_value", "holds", ...}``;
``holds`` is computed from the simulated numbers. Exit status: 0 done (whether or not the
claims hold), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from gpu_sharing_gym.fidelity import EXPERIMENTS


def _json_safe(x: Any) -> Any:
    """NaN/inf → None, recursively (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


def write_json(path: Path, records: list[dict[str, Any]]) -> None:
    """Write atomically: a temporary file in the same directory, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(_json_safe(records), indent=1, allow_nan=False) + "\n")
    os.replace(tmp, path)


def table(records: list[dict[str, Any]]) -> str:
    """A Markdown table: id, kind, paper value, simulated value, holds, wall time. A
    ``mechanism`` record's verdict says so (it checks wiring, not the paper's finding)."""
    rows = ["| id | kind | paper | simulated | holds | s |", "|---|---|---|---|---|---|"]
    for r in records:
        kind = r.get("kind", "claim")
        holds = "yes" if r["holds"] else "**no**"
        if kind != "claim":
            holds += f" ({kind} check)"
        rows.append(
            f"| `{r['id']}` | {kind} | {r['paper_value']} | {r['sim_value']} | {holds} "
            f"| {r['wall_s']} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="reproduce.py", description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", default="all", help="an id, a comma list or 'all'")
    ap.add_argument("--json", type=Path, default=None, help="write the records here")
    ap.add_argument("--quick", action="store_true", help="smaller scenarios (tests)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 3; quick 1)")
    args = ap.parse_args(argv)
    ids = list(EXPERIMENTS) if args.experiment == "all" else args.experiment.split(",")
    unknown = [i for i in ids if i not in EXPERIMENTS]
    if unknown:
        known = ", ".join(EXPERIMENTS)
        print(
            f"reproduce.py: error: unknown experiment {unknown[0]!r} (known: {known}, all)",
            file=sys.stderr,
        )
        return 2
    n = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    if n < 1:
        print("reproduce.py: error: --seeds: must be >= 1", file=sys.stderr)
        return 2
    seeds = list(range(n))
    records = []
    for exp_id in ids:
        rec = EXPERIMENTS[exp_id](seeds, args.quick)
        records.append(rec)
        kind = rec.get("kind", "claim")
        print(f"{exp_id} [{kind}]: holds={rec['holds']} ({rec['wall_s']} s)", file=sys.stderr)
    print(table(records))
    if args.json is not None:
        write_json(args.json, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
