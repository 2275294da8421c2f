"""Compare the analytic speed model with the measurements in ``../shared/data``.

Usage: ``gsg calibrate --data ../shared/data --json calibration.json``

Prints one row per dataset (shipped-coefficient error, fresh-fit error, leave-one-model-out
error, number of points) and the freshly fitted coefficients; with ``--json PATH`` writes the
errors there as JSON and prints the file's absolute path (without it, nothing is written).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from gpu_sharing_env.calibration.fit import CalibrationDataError, run
from gpu_sharing_gym.plumbing.cli_args import Parser, fail, output_file
from gpu_sharing_gym.plumbing.fileio import atomic_write_text

PROG = "gsg calibrate"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="data dir")
    parser.add_argument(
        "--json",
        type=output_file,
        default=None,
        help="write the errors here (JSON); nothing is written without it",
    )
    parser.add_argument("--no-heldout", action="store_true", help="skip pair-dataset refits")
    args = parser.parse_args(argv)
    try:
        report = run(args.data, heldout=not args.no_heldout)
    except CalibrationDataError as exc:
        return fail(PROG, str(exc))
    with pd.option_context("display.width", 120, "display.precision", 3):
        print(report.table().to_string())
    print(
        "\nfreshly fitted coefficients (shipped ones live in gpu_sharing_env/physics/zoo.py and interference.py):"
    )
    print(json.dumps(report.fitted, indent=1))
    if args.json is None:
        print("\nnothing written (pass --json PATH to save)")
        return 0
    path = args.json.resolve()
    try:
        atomic_write_text(path, report.to_json() + "\n")
    except OSError as exc:
        return fail(PROG, f"--json: {path}: {exc.strerror or exc}")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
