"""Core replay benchmark: events/s and decisions/s of a first-fit replay at several sizes.

    gsg bench replay --sizes 64,4096 --jobs-per-gpu 4 --json out.json

The workload is the synthetic PAI-like generator, scaled so every size sees the same load per
GPU; the policy is ``first_fit`` through the standard evaluation loop (the same loop the
leaderboard uses), so the figure includes decision overhead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import Any

from gpu_sharing_env.config import NodeGroupConfig, load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import UnknownPolicyError, make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_gym.plumbing.cli_args import Parser, fail, output_file, positive_float
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by
from gpu_sharing_gym.plumbing.progress import is_tty, progress

PROG = "gsg bench replay"


def scaled(n_gpus: int, jobs_per_gpu: float, horizon_h: float):
    base = load_scenario("default")
    groups = (
        NodeGroupConfig("A100-40GB", max(1, n_gpus // 32), 8, 64.0, 512.0, "nvlink"),
        NodeGroupConfig("V100-16GB", max(1, n_gpus // 32), 8, 64.0, 512.0, "nvlink"),
        NodeGroupConfig("T4", max(1, n_gpus // 4), 2, 32.0, 128.0, "pcie"),
    )
    n_jobs = int(jobs_per_gpu * n_gpus)
    off = replace(
        base.workload.offline,
        max_jobs=n_jobs,
        params={**base.workload.offline.params, "arrivals_per_h": n_jobs / horizon_h},
    )
    on = replace(base.workload.online, num_services=max(1, n_gpus // 16))
    return replace(
        base,
        name=f"bench-{n_gpus}",
        horizon_h=horizon_h,
        cluster=replace(base.cluster, nodes=groups),
        workload=replace(base.workload, offline=off, online=on),
    )


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="64,4096")
    ap.add_argument("--jobs-per-gpu", type=positive_float, default=2.0)
    ap.add_argument("--horizon-h", type=positive_float, default=24.0)
    ap.add_argument("--policy", default="first_fit")
    ap.add_argument("--json", type=output_file, default=None)
    ap.add_argument("--quiet", action="store_true", help="no periodic progress lines (off a TTY)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        make_policy(args.policy)
    except ValueError as e:  # UnknownPolicyError lists the known names
        msg = str(e) if isinstance(e, UnknownPolicyError) else f"--sizes: integers expected ({e})"
        return fail(PROG, msg)
    rows: list[dict[str, Any]] = []
    # Each size prints its row; off a terminal (CI, nohup) a plain line every 30 s tells how
    # far a long replay is. --json is written only when every size is done.
    bar = progress(len(sizes), "replay", "size", disable=args.quiet or is_tty(sys.stderr))
    try:
        with bar:
            for size in sizes:
                cfg = scaled(size, args.jobs_per_gpu, args.horizon_h)
                sim = make_simulator(cfg)
                bar.set_postfix_str(f"{size} GPUs")
                t0 = time.perf_counter()
                m = run_episode(make_policy(args.policy), sim, seed=0)
                wall = time.perf_counter() - t0
                rows.append(
                    {
                        "gpus": sim.n_gpus,
                        "jobs": int(m["jobs_submitted"]),
                        "events": sim.n_events,
                        "decisions": int(m["decisions"]),
                        "wall_s": round(wall, 3),
                        "events_per_s": round(sim.n_events / wall),
                        "decisions_per_s": round(m["decisions"] / wall),
                    }
                )
                bar.update(1)
                print(rows[-1], flush=True)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM
        print(
            f"\n{PROG}: {stopped_by(e)} after {len(rows)} sizes; nothing written", file=sys.stderr
        )
        return exit_code(e)
    if args.json:
        atomic_write_text(args.json, json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
