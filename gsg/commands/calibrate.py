"""Compare the analytic speed model with the measurements in ``../shared/data``.

Usage: ``python scripts/calibrate.py --data ../shared/data --json calibration.json``

Prints one row per dataset (shipped-coefficient error, fresh-fit error, leave-one-model-out
error, number of points) and the freshly fitted coefficients; writes the errors as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gpu_sharing_env.calibration import CalibrationDataError, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="data dir")
    parser.add_argument("--json", type=Path, default=None, help="write the errors here")
    parser.add_argument("--no-heldout", action="store_true", help="skip pair-dataset refits")
    args = parser.parse_args(argv)
    try:
        report = run(args.data, heldout=not args.no_heldout)
    except CalibrationDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 120, "display.precision", 3):
        print(report.table().to_string())
    print("\nfreshly fitted coefficients (shipped ones live in zoo.py / interference.py):")
    print(json.dumps(report.fitted, indent=1))
    if args.json is not None:
        args.json.write_text(report.to_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
