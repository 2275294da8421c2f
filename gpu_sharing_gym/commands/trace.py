"""Inspect workloads: distribution summaries of traces and of the synthetic generator.

Usage::

    gsg trace stats ../shared/data/philly_via_sia/philly.csv --format philly
    gsg trace stats ../shared/data/alibaba_v2023/openb_pod_list_default.csv --format openb
    gsg trace stats - --format synthetic --seed 1 --horizon-h 336

Formats: openb, pai, philly, philly-raw, helios, synthetic. For synthetic, PATH is ``-`` or a
seed, and the PAI figures the defaults target are printed beside the generated ones.
A malformed trace exits with status 2 and a one-line message naming file, row and field.
"""

from __future__ import annotations

import argparse
import sys

from gpu_sharing_env.workload.loaders import READERS, TraceError
from gpu_sharing_env.workload.stats import trace_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gsg trace", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stats", help="print a distribution summary")
    st.add_argument("path", help="trace file; for --format synthetic '-' or a seed")
    st.add_argument("--format", required=True, choices=[*READERS, "synthetic"])
    st.add_argument("--seed", type=int, default=None, help="synthetic seed (default 0)")
    st.add_argument("--horizon-h", type=float, default=336.0, help="synthetic window, hours")
    st.add_argument("--max-jobs", type=int, default=None, help="keep the first N jobs")
    st.add_argument("--no-profile", action="store_true", help="omit the 24-bin profile")
    args = parser.parse_args(argv)
    try:
        text = trace_report(
            args.format,
            args.path,
            seed=args.seed,
            horizon_h=args.horizon_h,
            max_jobs=args.max_jobs,
            profile=not args.no_profile,
        )
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
