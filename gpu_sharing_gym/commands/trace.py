"""Inspect workloads: distribution summaries of traces and of the synthetic generator.

Usage::

    gsg trace stats ../shared/data/philly_via_sia/philly.csv --format philly
    gsg trace stats ../shared/data/alibaba_v2023/openb_pod_list_default.csv --format openb
    gsg trace stats - --format synthetic --seed 1 --horizon-h 336
    gsg trace stats --format synthetic --scenario pai-busy --json

Formats: openb, pai, philly, philly-raw, helios, synthetic. For synthetic, PATH is ``-`` or a
seed, and the PAI figures the defaults target are printed beside the generated ones. With
``--scenario`` the scenario's own workload is run (``--seeds`` episodes, ``--policy``) and its
recurrence and duration-predictor statistics printed beside PAI's (``workload_report``).
A malformed trace exits with status 2 and a one-line message naming file, row and field.
"""

from __future__ import annotations

import json
import sys

from gpu_sharing_env.config import ConfigError
from gpu_sharing_env.evaluation.runner import strict_json
from gpu_sharing_env.workload.loaders import READERS, TraceError
from gpu_sharing_env.workload.stats import trace_report
from gpu_sharing_gym.plumbing.cli_args import (
    Parser,
    fail,
    non_negative_int,
    positive_float,
    positive_int,
)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="gsg trace", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stats", help="print a distribution summary")
    st.add_argument(
        "path", nargs="?", default="-", help="trace file; for --format synthetic '-' or a seed"
    )
    st.add_argument("--format", required=True, choices=[*READERS, "synthetic"])
    st.add_argument(
        "--seed", type=non_negative_int, default=None, help="synthetic seed (default 0)"
    )
    st.add_argument(
        "--horizon-h", type=positive_float, default=336.0, help="synthetic window, hours"
    )
    st.add_argument("--max-jobs", type=positive_int, default=None, help="keep the first N jobs")
    st.add_argument("--no-profile", action="store_true", help="omit the 24-bin profile")
    st.add_argument("--scenario", default=None, help="synthetic: a scenario's workload, run")
    st.add_argument("--seeds", type=positive_int, default=3, help="--scenario: episodes 0..N-1")
    st.add_argument("--policy", default="first_fit", help="--scenario: the policy run")
    st.add_argument("--json", action="store_true", help="--scenario: print JSON")
    args = parser.parse_args(argv)
    if args.scenario is not None:
        if args.format != "synthetic":
            return fail("gsg trace", "--scenario: only with --format synthetic")
        from gpu_sharing_gym.workload_report import scenario_stats, stats_text

        try:
            rep = scenario_stats(args.scenario, args.seeds, args.policy)
        except (ConfigError, ValueError) as exc:
            return fail("gsg trace", str(exc))
        print(json.dumps(strict_json(rep), indent=1) if args.json else stats_text(rep))
        return 0
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
        return fail("gsg trace", str(exc))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
