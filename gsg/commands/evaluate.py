"""Evaluate policies on a scenario over seeds and print/save the schema's metrics.

gsg evaluate --policy first_fit --scenario default --seeds 3 --json out.json
gsg evaluate --policy all --scenario default --seeds 3
gsg evaluate --policy ppo_default,antman --scenario muxflow-t4 --seeds 5
gsg evaluate --policy my_pkg.sched:MyPolicy --scenario default    # any importable Policy
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import yaml
from tqdm import tqdm

from gpu_sharing_env.config import (
    ClusterConfig,
    ConfigError,
    FleetFileConfig,
    ScenarioConfig,
    from_dict,
    load_scenario,
)
from gpu_sharing_env.registry import UnknownPolicyError, make_policy, policy_names
from gpu_sharing_env.runner import evaluate, json_safe
from gpu_sharing_env.sim.build import make_simulator

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument(
        "--policy",
        default="all",
        help="'all' (the heuristic policies) or a comma list of registered names "
        f"({', '.join(policy_names())}), module:Class, or a trained agent's model.zip path",
    )
    ap.add_argument("--scenario", default="default", help="scenario name or YAML path")
    ap.add_argument("--seeds", type=int, default=3, help="evaluate seeds 0..N-1")
    ap.add_argument("--json", type=Path, default=None, help="write one record per seed here")
    ap.add_argument("--trace", type=Path, default=None, help="replace the offline workload")
    ap.add_argument("--trace-format", default=None, help="openb, pai, philly, philly-raw, helios")
    ap.add_argument("--cluster", type=Path, default=None, help="replace the fleet (CSV or YAML)")
    ap.add_argument("--cluster-format", default=None, choices=["openb", "pai", "yaml"])
    ap.add_argument("--max-jobs", type=int, default=None, help="keep only the first N jobs")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    try:
        names = policy_names("policy") if args.policy == "all" else args.policy.split(",")
        policies = [make_policy(n.strip()) for n in names]
        scenario = load_scenario(args.scenario)
        scenario = override(
            scenario, args.trace, args.trace_format, args.cluster, args.cluster_format,
            args.max_jobs,
        )  # fmt: skip
        sim = make_simulator(scenario)
    except (ConfigError, UnknownPolicyError, ValueError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print(f"{PROG}: error: --seeds: must be >= 1", file=sys.stderr)
        return 2
    records = []
    bar = tqdm(
        total=len(policies) * args.seeds, unit="episode", disable=args.quiet, file=sys.stderr,
        dynamic_ncols=True,
    )  # fmt: skip
    with bar:
        for pol in policies:
            for seed in range(args.seeds):
                bar.set_description(f"{pol.name} seed {seed}")
                try:
                    records += evaluate(pol, scenario, [seed], sim=sim)
                except ValueError as e:  # e.g. an agent that does not fit this scenario
                    bar.close()
                    print(f"{PROG}: error: {e}", file=sys.stderr)
                    return 2
                bar.update()
    df = pd.DataFrame(records)
    table = df.groupby("policy", sort=False)[SHOWN].mean()
    target = scenario.slo_target
    table["meets_slo"] = table["slo_attainment"].fillna(1.0) >= target
    table = table.sort_values(["meets_slo", "jct_mean_s"], ascending=[False, True])
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(
            f"scenario {scenario.name}: mean over seeds 0..{args.seeds - 1} (SLO target {target})"
        )
        print(table.to_string())
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps([json_safe(r) for r in records], indent=1))
        tmp.replace(args.json)
        print(f"wrote {len(records)} records to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
