"""Evaluate policies on a scenario over seeds and print/save the schema's metrics.

gsg evaluate --policy first_fit --scenario default --seeds 3 --json out.json
gsg evaluate --policy all --scenario default --seeds 3
gsg evaluate --policy ppo_default,antman --scenario muxflow-t4 --seeds 5
gsg evaluate --policy my_pkg.sched:MyPolicy --scenario default    # any importable Policy

Prints one row per policy: the mean over the seeds of each metric, with the 95 % confidence
interval half-width (Student t over the seeds) for jct_mean_s and slo_attainment. A progress
bar counts episodes; during a long one (the planner) it shows the simulated clock and the jobs
done so far (on a terminal; elsewhere a plain line every 30 s, GSG_PROGRESS_INTERVAL). With
--json PATH each finished episode is kept at once in PATH's stem + .partial/ (runs/r.json ->
runs/r.partial/cells/, laid out as a leaderboard's cells/); Ctrl-C or SIGTERM leaves them there
and the same command run again resumes, computing only the missing episodes; PATH is written
(and the .partial/ folder removed) when every episode is done. Policy rows are named as given
(first_fit, my_pkg.sched:MyPolicy, runs/x/model.zip), as on the leaderboard.
Exit status: 0 done, 2 bad input, 130 Ctrl-C, 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml

from gpu_sharing_env.config import (
    ClusterConfig,
    ConfigError,
    FleetFileConfig,
    ScenarioConfig,
    from_dict,
    load_scenario,
)
from gpu_sharing_env.registry import UnknownPolicyError, make_policy, policy_names
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_gym.cells import (
    Cell,
    evaluation_record,
    pending_cells,
    run_cell,
    save_cell,
    scenario_digest,
)
from gpu_sharing_gym.ci import CI_NOTE, fmt_mean_ci, fmt_num, mean_ci95
from gpu_sharing_gym.plumbing import cli_args, collector
from gpu_sharing_gym.plumbing.cli_args import Parser, describe_seeds, fail
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by
from gpu_sharing_gym.plumbing.progress import KindETA, progress

if TYPE_CHECKING:
    import pandas as pd

PROG = "gsg evaluate"

SHOWN = [
    "jct_mean_s",
    "queue_delay_mean_s",
    "slo_attainment",
    "latency_p99_ms",
    "gpu_util",
    "norm_throughput_mean",
    "jobs_completed",
    "errors_total",
]
#: Of :data:`SHOWN`, the columns printed as "mean ± 95 % CI half-width" (the ranking metrics).
WITH_CI = ("jct_mean_s", "slo_attainment")
#: Seconds between two refreshes of the progress bar during an episode.
HEARTBEAT_S = 1.0


def override(
    sc: ScenarioConfig,
    trace: Path | None,
    trace_format: str | None,
    cluster: Path | None,
    cluster_format: str | None,
    max_jobs: int | None,
) -> ScenarioConfig:
    """Replace a scenario's workload and/or fleet from the command line."""
    off = sc.workload.offline
    if trace is not None:
        if not trace_format:
            raise ConfigError("--trace: give --trace-format too (openb, pai, philly, ...)")
        if not trace.is_file():
            raise ConfigError(f"{trace}: trace file not found")
        off = replace(
            off, source="trace", trace_format=trace_format, trace_path=str(trace.resolve())
        )
    if max_jobs is not None:
        off = replace(off, max_jobs=max_jobs)
    sc = replace(sc, workload=replace(sc.workload, offline=off))
    if cluster is not None:
        if not cluster.is_file():
            raise ConfigError(f"{cluster}: cluster file not found")
        fmt = cluster_format or ("yaml" if cluster.suffix in (".yaml", ".yml") else "")
        if fmt == "yaml":
            data = yaml.safe_load(cluster.read_text())
            data = data.get("cluster", data) if isinstance(data, dict) else data
            cl = from_dict(ClusterConfig, data, src=str(cluster), where="cluster")
        elif fmt in ("openb", "pai"):
            cl = ClusterConfig(fleet=FleetFileConfig(format=fmt, path=str(cluster.resolve())))  # type: ignore[arg-type]
        else:
            raise ConfigError(f"{cluster}: give --cluster-format openb, pai or yaml")
        sc = replace(sc, cluster=cl)
    return sc


#: The cyclic collector's full pass runs every this many middle-generation passes while the
#: episodes run (Python's default: 10); see :func:`main`.
FULL_GC_EVERY = 100


def _number(v: Any) -> float | None:
    """A record's metric as a float; None when absent or not a number."""
    return float(v) if isinstance(v, (int, float)) else None


def summary_rows(records: Sequence[Mapping[str, Any]], slo_target: float) -> list[dict[str, Any]]:
    """Per policy (best first: meeting the SLO, then lowest mean JCT; ties in the records' order):
    ``policy``, the :data:`SHOWN` metrics as display strings, "mean ± 95 % CI half-width" for
    :data:`WITH_CI` (plain means for the rest), ``meets_slo`` and ``n`` (seeds). No pandas: a
    replay's process stays without it (docs/notes/2026-11-28-replay-speed.md)."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(r.get("policy"), []).append(r)
    rows: list[dict[str, Any]] = []
    for pol, grp in groups.items():
        row: dict[str, Any] = {"policy": pol}
        for m in SHOWN:
            mean, half, _ = mean_ci95(_number(r.get(m)) for r in grp)
            row[m] = fmt_mean_ci(mean, half) if m in WITH_CI else fmt_num(mean)
            row[f"_{m}"] = mean
        slo = row["_slo_attainment"]
        row["meets_slo"] = bool(slo != slo or slo >= slo_target)  # NaN: no online services
        row["n"] = len(grp)
        rows.append(row)
    jct = "_jct_mean_s"
    return sorted(
        rows,
        key=lambda r: (
            not r["meets_slo"],
            math.isnan(r[jct]),
            0.0 if math.isnan(r[jct]) else r[jct],
        ),
    )


#: The columns of the printed table, after the policy.
COLUMNS = [*SHOWN, "meets_slo", "n"]


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """:func:`summary_rows` as text, laid out as pandas' ``DataFrame.to_string`` lays out
    :func:`summary_table`: the policy column left-aligned under its name's own line, the others
    right-aligned, each cell after one space (two before a number or a truth value)."""
    names = [str(r["policy"]) for r in rows]
    width0 = max(len("policy"), *map(len, names))
    cols = []
    for c in COLUMNS:
        lead = " " if c in ("meets_slo", "n") else ""  # pandas' sign space of numeric columns
        cells = [" " + str(r[c]) for r in rows]
        w = max(len(lead + c), *map(len, cells))
        cols.append([(lead + c).rjust(w), *(x.rjust(w) for x in cells)])
    lines = [" ".join([" " * width0, *(col[0] for col in cols)])]
    lines.append("policy".ljust(len(lines[0])))
    for i, nm in enumerate(names, start=1):
        lines.append(" ".join([nm.ljust(width0), *(col[i] for col in cols)]))
    return "\n".join(lines)


def summary_table(records: Sequence[Mapping[str, Any]], slo_target: float) -> pd.DataFrame:
    """:func:`summary_rows` as a frame indexed by policy (columns :data:`COLUMNS`)."""
    import pandas as pd

    rows = summary_rows(records, slo_target)
    return pd.DataFrame(rows).set_index("policy")[COLUMNS]


class Heartbeat:
    """Keeps a progress bar moving during one long episode: every ``every`` seconds (from a
    daemon thread) its postfix shows how far the episode is, ``sim 5.2 h, 40/60 jobs done``
    (an episode ends when every offline job is done or at the horizon), and its elapsed time
    is redrawn. A planner episode takes tens of seconds or more; without this the bar would
    stand still until the episode ends."""

    def __init__(self, bar: Any, sim: Any, every: float = HEARTBEAT_S) -> None:
        self.bar, self.sim, self.every = bar, sim, every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def status(self) -> str:
        """``sim <clock> h[, <done>/<total> jobs done]`` of the running episode."""
        text = f"sim {float(getattr(self.sim, 'now', 0.0)) / 3600.0:.1f} h"
        total, left = getattr(self.sim, "offline_jobs", (0, 0))
        if total > 0:
            text += f", {total - left}/{total} jobs done"
        return text

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            self.bar.set_postfix_str(self.status(), refresh=True)

    def __enter__(self) -> Heartbeat:
        if not getattr(self.bar, "disable", True):
            self._thread = threading.Thread(target=self._beat, name="gsg-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _variant(args: argparse.Namespace) -> str:
    """A digest of the command-line overrides of the scenario (empty without any): what, besides
    the scenario file, decides an episode (``Cell.variant``)."""
    files = [p for p in (args.trace, args.cluster) if p is not None]
    if not files and args.max_jobs is None:
        return ""
    parts = [str(args.trace), args.trace_format, str(args.cluster), args.cluster_format,
             args.max_jobs, *(scenario_digest(p) for p in files)]  # fmt: skip
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def cells_dir(json_path: Path) -> Path:
    """Where ``gsg evaluate --json PATH`` keeps its finished episodes until it is done:
    ``PATH`` without its suffix, plus ``.partial`` (``runs/r.json`` -> ``runs/r.partial``),
    holding a ``cells/`` folder as a leaderboard's output directory does."""
    return json_path.with_name(json_path.stem + ".partial")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--policy",
        default="all",
        help="a comma list of registered names or 'all' (every heuristic policy) "
        f"({', '.join(policy_names())}), module:Class, or a trained agent's model.zip path",
    )
    ap.add_argument("--scenario", default="default", help="scenario name or YAML path")
    ap.add_argument(
        "--seeds",
        type=cli_args.seeds,
        default=[0, 1, 2],
        metavar="N|LIST",
        help="N: seeds 0..N-1 (default 3); or a list: 0,1,2 or 800-859",
    )
    ap.add_argument(
        "--json",
        type=cli_args.output_file,
        default=None,
        help="write one record per episode here (finished episodes are kept in PATH's stem + "
        ".partial/ until then: an interrupted run resumes when the command is run again)",
    )
    ap.add_argument("--trace", type=Path, default=None, help="replace the offline workload")
    ap.add_argument("--trace-format", default=None, help="openb, pai, philly, philly-raw, helios")
    ap.add_argument("--cluster", type=Path, default=None, help="replace the fleet (CSV or YAML)")
    ap.add_argument("--cluster-format", default=None, choices=["openb", "pai", "yaml"])
    ap.add_argument(
        "--max-jobs", type=cli_args.positive_int, default=None, help="keep only the first N jobs"
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # The fleet, the trace's jobs and the policies live to the end of the process: no
        # collector pass while they are built, and none scans them afterwards (frozen).
        with collector.deferred():
            # "all" (every registered heuristic) may stand in a list: "my.zip,all"
            names: list[str] = []
            for tok in (t.strip() for t in args.policy.split(",")):
                names += (
                    [n for n in policy_names("policy") if n not in names] if tok == "all" else [tok]
                )
            if len(set(names)) != len(names):
                raise ValueError(f"--policy: a policy named twice in {args.policy!r}")
            policies = {n: make_policy(n) for n in names}
            scenario = load_scenario(args.scenario)
            scenario = override(
                scenario, args.trace, args.trace_format, args.cluster, args.cluster_format,
                args.max_jobs,
            )  # fmt: skip
            sim = make_simulator(scenario)
    except (ConfigError, UnknownPolicyError, ValueError, OSError) as e:
        return fail(PROG, str(e))
    seeds: list[int] = args.seeds
    source = str(Path(scenario.source_path or args.scenario).resolve())
    variant = _variant(args)
    cells = [Cell(n, scenario.name, source, seed, variant) for n in names for seed in seeds]
    store = cells_dir(args.json) if args.json is not None else None
    todo, done = pending_cells(store, cells) if store is not None else (cells, {})
    if done and not args.quiet:
        print(f"{PROG}: {len(done)} of {len(cells)} episodes read from {store}", file=sys.stderr)
    # What an episode allocates (the job records of its reset, the runtime state) is
    # long-lived too and holds almost no cycles: each episode runs in ``collector.deferred``
    # (no pass in a 20,000-job replay; what it leaves is frozen, its predecessor's state freed
    # by reference counting at the next reset). Where an episode is long enough for passes,
    # a full pass every 100 middle-generation passes, not 10 (Python's default re-scanned the
    # long-lived state for nothing, up to 4 % of such an episode: docs/notes/
    # 2026-11-28-replay-speed.md).
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], FULL_GC_EVERY))
    try:
        # the ETA per policy: a planner episode costs ~20 s, a heuristic's 0.05 s
        timed = [(c.policy, r["record"].get("wall_s")) for c, r in done.items()]
        eta = KindETA([c.policy for c in todo], 1, timed)
        with progress(
            len(cells), unit="episode", disable=args.quiet, initial=len(done), eta=eta.text
        ) as bar:
            for cell in todo:
                bar.set_description(f"{cell.policy} seed {cell.seed}")
                bar.set_postfix_str("", refresh=False)
                try:
                    with Heartbeat(bar, sim), collector.deferred():
                        res = run_cell(
                            cell, scenario, policies[cell.policy], sim, detail=False, catch=False
                        )
                except ValueError as e:  # e.g. an agent that does not fit this scenario
                    bar.close()
                    return fail(PROG, str(e))
                if store is not None:
                    save_cell(store, cell, res)  # kept at once: a stopped run resumes here
                done[cell] = res
                eta.finished(cell.policy, res["record"].get("wall_s"))
                bar.update()
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: the finished episodes are kept
        finished = [done[c] for c in cells if c in done]
        if store is not None and finished:
            kept = f"kept in {store}; run the same command again to resume"
        elif store is not None:
            kept = "nothing to keep yet"
        else:
            kept = "nothing kept (with --json PATH they are, and the same command resumes)"
        print(
            f"\n{PROG}: {stopped_by(e)} after {len(finished)} of {len(cells)} episodes; {kept}",
            file=sys.stderr,
        )
        return exit_code(e)
    finally:
        gc.set_threshold(*thresholds)
    records = [evaluation_record(done[c]) for c in cells]
    target = scenario.slo_target
    print(f"scenario {scenario.name}: mean over {describe_seeds(seeds)} (SLO target {target})")
    print(format_table(summary_rows(records, target)))
    print(f"{CI_NOTE}; the other columns are means")
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(records, indent=1, allow_nan=False))
        if store is not None:
            shutil.rmtree(store, ignore_errors=True)  # everything is in the JSON now
        print(f"wrote {len(records)} records to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
