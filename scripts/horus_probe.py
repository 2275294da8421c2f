"""Why Horus waits longer than Gandiva in ``gsg reproduce --experiment horus`` (issue 52).

Runs the experiment's scenario (``fidelity/horus.yaml``) per seed under Horus, Horus without
its fair queue (window in arrival order), Gandiva, Gandiva without oversubscribed
time-slicing (``max_ts_load=1``: it packs and takes empty GPUs only) and FIFO-exclusive, and
prints per arm: the median queueing delay (submit to first start, floored at 1 s as the
experiment's check), the share of jobs that start within 1 s, the share of placements onto an
already occupied GPU, the jobs' mean normalised progress rate (1: never slowed by a co-runner),
utilisation, utilisation of the occupied GPUs (per GPU-second with a resident), makespan and the
first day's mean utilisation; then ratios of median waits and of
utilisation, geometric means with 95 % intervals over seeds. It also checks that every arm
starts the same jobs (the median is over the same set).

    .venv/bin/python scripts/horus_probe.py --seeds 10
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from gpu_sharing_gym.baselines.gandiva import Gandiva
from gpu_sharing_gym.baselines.horus import Horus
from gpu_sharing_gym.baselines.reference import FifoExclusive
from gpu_sharing_gym.fidelity.common import scenario, t_interval
from gpu_sharing_gym.fidelity.horus import WAIT_RESOLUTION_S


class HorusNoFairQueue(Horus):
    """Horus' placement over the queue window in arrival order (no weighted fair queueing)."""

    name = "horus-fifo"

    def _decide(self, view: ClusterView) -> Decision | None:
        for job in view.window:
            d = self.place(view, job)
            if d is not None:
                return d
        return None


ARMS: dict[str, Callable[[], HeuristicPolicy]] = {
    "horus": Horus,
    "horus-fifo": HorusNoFairQueue,
    "gandiva": Gandiva,
    "gandiva-no-oversub": lambda: Gandiva(max_ts_load=1.0),
    "exclusive": FifoExclusive,
}
DAY_S = 86_400.0


def probe(make: Callable[[], HeuristicPolicy], seed: int) -> dict[str, object]:
    """One episode of the experiment's scenario with placement counting."""
    cfg = scenario("horus")
    sim = Simulator(cfg, build_nodes(cfg), build_workload(cfg))
    policy = make()
    counts = {"placed": 0, "shared": 0}
    decide = policy.decide

    def counting(view: ClusterView) -> Decision | None:
        d = decide(view)
        if d is not None and d.job_id in {j.job_id for j in view.queue}:
            counts["placed"] += 1
            counts["shared"] += int(view.n_res[d.gpu] > 0)
        return d

    policy.decide = counting  # type: ignore[method-assign]
    m = run_episode(policy, sim, seed)
    offline = [s for s in sim.jobs.values() if not s.spec.online]
    started = [s for s in offline if not math.isnan(s.ledger.first_start_t)]
    wait = np.array([s.ledger.first_start_t - s.spec.submit_s for s in started])
    ran = [s.ledger for s in offline if s.ledger.run_time_s > 0]
    ts = np.array(sim.timeseries)
    return {
        "started": sorted(s.spec.job_id for s in started),
        "p50": max(float(np.median(wait)), WAIT_RESOLUTION_S),
        "no_wait": float(np.mean(wait < 1.0)),
        "shared": counts["shared"] / max(1, counts["placed"]),
        "progress": float(np.mean([led.norm_integral / led.run_time_s for led in ran])),
        "util": m["gpu_util"],
        "makespan_h": m["makespan_s"] / 3600.0,
        "util_day1": float(ts[ts[:, 0] <= DAY_S, 1].mean()),
        "util_busy": sim.acc.util_s / sim.acc.busy_gpu_s,
    }


def column(rows: list[dict[str, object]], key: str) -> np.ndarray:
    """One quantity of every seed's row, as floats."""
    return np.array([float(r[key]) for r in rows])  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    args = ap.parse_args()
    seeds = range(args.seeds)
    res = {a: [probe(f, s) for s in seeds] for a, f in ARMS.items()}
    same = all(
        r["started"] == res["horus"][i]["started"] for rs in res.values() for i, r in enumerate(rs)
    )
    print(f"seeds 0-{args.seeds - 1}; every arm starts the same jobs: {same}")
    cols = ("p50", "no_wait", "shared", "progress", "util", "util_busy", "makespan_h", "util_day1")
    print("| arm | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for a, rs in res.items():
        cells = [f"{(np.median if c == 'p50' else np.mean)(column(rs, c)):.3g}" for c in cols]
        print(f"| {a} | " + " | ".join(cells) + " |")
    print("(p50: median over seeds of the per-seed median wait, s; the others: means over seeds)")
    for key, num, den in (
        ("p50", "gandiva", "horus"),
        ("p50", "gandiva-no-oversub", "horus"),
        ("p50", "horus-fifo", "horus"),
        ("p50", "exclusive", "horus"),
        ("util", "horus", "exclusive"),
        ("util_day1", "horus", "exclusive"),
        ("util_busy", "horus", "exclusive"),
    ):
        q = (column(res[num], key) / column(res[den], key)).tolist()
        mean, lo, hi, _ = t_interval(q, log=True)
        print(f"{key} {num}/{den}: {mean:.3g} [{lo:.3g}, {hi:.3g}]")


if __name__ == "__main__":
    main()
