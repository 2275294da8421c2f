"""Reproduce the seed papers' published findings with the simulator (docs/fidelity.md).

gsg reproduce --experiment all --json out/fidelity.json          # seeds 0-29, 2 workers
gsg reproduce --experiment muxflow-online,pai-sjf --quick --seeds 1
gsg reproduce --experiment pai-sjf --sweep predictor_sigma=0:1.5:7 --out out/sweep-sigma
gsg reproduce --experiment all --backend ray --ray-address auto --json out/fidelity.json

Each experiment (``fidelity.EXPERIMENTS``) runs on a scenario built to match its paper's setup
over paired seeds and yields a record ``{"id", "paper", "claim", "paper_value", "sim_value",
"holds", "verdict", ...}``; the verdict is computed from the simulated numbers (each check's
95 % confidence interval over seeds, ``fidelity.common``). ``--sweep`` runs one experiment
along a setup parameter and writes PREFIX.json/.csv/.png (``fidelity.sweep``). Episodes run
in ``--workers`` forked processes, or with ``--backend ray`` as Ray tasks (``--ray-address``:
an existing cluster), the same numbers as one process. Exit status: 0 done (whether or not the
claims hold), 2 bad input, 130 Ctrl-C, 143 SIGTERM (nothing written then). A progress bar
counts experiments (off a terminal, a plain line every 30 s; --quiet: none).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpu_sharing_env.evaluation.runner import strict_json
from gpu_sharing_gym.backends import (
    BackendError,
    add_backend_args,
    backend_session,
    check_backend_args,
)
from gpu_sharing_gym.fidelity import EXPERIMENTS
from gpu_sharing_gym.fidelity.common import params_for, run_experiment
from gpu_sharing_gym.fidelity.sweep import SweepError, parse_spec, sweep, write
from gpu_sharing_gym.plumbing import cli_args
from gpu_sharing_gym.plumbing.cli_args import Parser, fail
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by
from gpu_sharing_gym.plumbing.progress import progress

#: Paired seeds per claim: the project's evaluation standard (30 seeds, as the learned agent's
#: unseen-seed test). Several claims are effects of a few percent (MuxFlow's ablation, the
#: SJF predictors, GPUPool over No-Sharing) whose per-seed spread needs about this many seeds
#: to put a 95 % interval on one side of 1 (docs/fidelity.md: 5, 10 and 30 seeds side by side).
DEFAULT_SEEDS = 30
#: A sweep runs every value of its parameter: fewer seeds per point.
SWEEP_SEEDS = 10


def write_json(path: Path, records: list[dict[str, Any]]) -> None:
    """Write atomically (:func:`gpu_sharing_gym.plumbing.fileio.atomic_write_text`)."""
    atomic_write_text(path, json.dumps(strict_json(records), indent=1, allow_nan=False) + "\n")


def _band(r: dict[str, Any]) -> str:
    """The record's ``in_band`` as a table cell: how many of its checks with a published
    figure overlap it ("-": the paper gives no figure)."""
    rows = r.get("paper_band") or []
    if not rows:
        return "-"
    n = sum(bool(b["in_band"]) for b in rows)
    return f"{'yes' if n == len(rows) else 'no'} ({n}/{len(rows)})"


def table(records: list[dict[str, Any]]) -> str:
    """A Markdown table: id, kind, paper value, simulated value (mean [95 % CI]), whether the
    intervals overlap the paper's figures (``in_band``), verdict, wall time. A ``mechanism``
    record's verdict says so (it checks wiring, not the paper's finding)."""
    rows = [
        "| id | kind | paper | simulated | in band | verdict | s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        kind = r.get("kind", "claim")
        verdict = r.get("verdict", "holds" if r["holds"] else "does not hold")
        holds = verdict if r["holds"] else f"**{verdict}**"
        if kind != "claim":
            holds += f" ({kind} check)"
        rows.append(
            f"| `{r['id']}` | {kind} | {r['paper_value']} | {r['sim_value']} | {_band(r)} "
            f"| {holds} | {r['wall_s']} |"
        )
    return "\n".join(rows)


def summary(records: list[dict[str, Any]]) -> str:
    """One line: how many records hold (plain "holds") and how many of those with a published
    figure are in band."""
    figured = [r for r in records if r.get("in_band") is not None]
    held = sum(bool(r["holds"]) for r in records)
    inband = sum(bool(r["in_band"]) for r in figured)
    return (
        f"{held} of {len(records)} hold; {inband} of {len(figured)} records with a published "
        "figure in band"
    )


def _error(msg: str) -> int:
    return fail("gsg reproduce", msg)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="gsg reproduce", description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", default="all", help="an id, a comma list or 'all'")
    ap.add_argument(
        "--json", type=cli_args.output_file, default=None, help="write the records here"
    )
    ap.add_argument("--quick", action="store_true", help="smaller scenarios (tests)")
    ap.add_argument(
        "--seeds",
        type=cli_args.positive_int,
        default=None,
        help=f"seeds 0..N-1 (default {DEFAULT_SEEDS}; a sweep {SWEEP_SEEDS}; quick 1)",
    )
    ap.add_argument(
        "--workers",
        type=cli_args.positive_int,
        default=None,
        help="episode processes (default 2; quick 1)",
    )
    ap.add_argument(
        "--sweep",
        default=None,
        metavar="NAME=LO:HI:N",
        help="run one --experiment at N values of setup parameter NAME; writes --out.{json,csv,png}",
    )
    ap.add_argument(
        "--out",
        type=cli_args.output_file,
        default=None,
        help="--sweep's output prefix (default out/sweep-ID-NAME)",
    )
    add_backend_args(ap)
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    ids = list(EXPERIMENTS) if args.experiment == "all" else args.experiment.split(",")
    unknown = [i for i in ids if i not in EXPERIMENTS]
    if unknown:
        known = ", ".join(EXPERIMENTS)
        return _error(f"unknown experiment {unknown[0]!r} (known: {known}, all)")
    default_n = SWEEP_SEEDS if args.sweep is not None else DEFAULT_SEEDS
    n = args.seeds if args.seeds is not None else (1 if args.quick else default_n)
    if n < 1:
        return _error("--seeds: must be >= 1")
    workers = args.workers if args.workers is not None else (1 if args.quick else 2)
    if workers < 1:
        return _error("--workers: must be >= 1")
    try:
        check_backend_args(args)
    except BackendError as e:
        return _error(str(e))
    seeds = list(range(n))
    if args.sweep is not None:
        return _sweep(args, ids, seeds, workers)
    records = []
    run = {"backend": args.backend, "address": args.ray_address}
    try:
        with (
            backend_session(args.backend, workers, args.ray_address),
            progress(len(ids), "reproduce", "experiment", disable=args.quiet) as bar,
        ):
            for exp_id in ids:
                bar.set_postfix_str(exp_id)
                rec = run_experiment(exp_id, EXPERIMENTS[exp_id], seeds, args.quick, workers, **run)
                records.append(rec)
                bar.update(1)
                kind = rec.get("kind", "claim")
                line = f"{exp_id} [{kind}]: {rec['verdict']} ({rec['wall_s']} s)"
                bar.write(line, file=sys.stderr)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: --json is written only when done
        print(
            f"\ngsg reproduce: {stopped_by(e)} after {len(records)} of {len(ids)} experiments; "
            "nothing written",
            file=sys.stderr,
        )
        return exit_code(e)
    except BackendError as e:
        return _error(str(e))
    print(table(records))
    print(summary(records), file=sys.stderr)
    total = sum(r["wall_s"] for r in records)
    where = f"{workers} worker(s)" if args.backend == "local" else "Ray"
    print(f"wall time: {total:.1f} s ({where}, seeds 0-{n - 1})", file=sys.stderr)
    if args.json is not None:
        write_json(args.json, records)
    return 0


def _sweep(args: argparse.Namespace, ids: list[str], seeds: list[int], workers: int) -> int:
    """``--sweep``: one experiment along one setup parameter."""
    if len(ids) != 1:
        return _error("--sweep: name one --experiment (not a list, not 'all')")
    exp_id = ids[0]
    try:
        name, values = parse_spec(args.sweep)
    except SweepError as e:
        return _error(str(e))
    known = params_for(exp_id)
    if name not in known:
        return _error(
            f"--sweep: unknown parameter {name!r} for experiment {exp_id!r} "
            f"(known: {', '.join(known) or 'none'})"
        )
    prefix = args.out if args.out is not None else Path("out") / f"sweep-{exp_id}-{name}"
    try:
        with (
            backend_session(args.backend, workers, args.ray_address),
            progress(len(values), "sweep", "point", disable=args.quiet) as bar,
        ):

            def on_point(p: dict[str, Any]) -> None:
                bar.update(1)
                bar.write(
                    f"{name}={p['value']:g}: {p['verdict']} ({p['wall_s']} s)", file=sys.stderr
                )

            doc = sweep(
                exp_id, EXPERIMENTS[exp_id], name, values, seeds, args.quick, workers, on_point,
                args.backend, args.ray_address,
            )  # fmt: skip
    except KeyboardInterrupt as e:
        print(f"\ngsg reproduce: {stopped_by(e)}; nothing written", file=sys.stderr)
        return exit_code(e)
    except BackendError as e:
        return _error(str(e))
    text = json.dumps(strict_json(doc), indent=1, allow_nan=False) + "\n"
    for path in write(doc, prefix, text):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
