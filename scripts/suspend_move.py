"""A scripted policy that suspends, and its paired measurement beside speed_sjf_queue.

:class:`SuspendLongest` is ``speed_sjf_queue`` (:class:`~gpu_sharing_gym.baselines.speed_sjf.SpeedSJFQueue`)
plus one move, the simulator's suspension (``Decision.suspend``, Gandiva's suspend-resume):
where speed_sjf_queue waits, no GPU is empty and a best-effort job of its window waits whose
predicted duration is at most ``1 / ratio`` of a running offline job's predicted time left
(estimates over profiled solo speed: what ``ClusterView`` gives any heuristic), the running job
with the longest predicted time left among those alone on GPUs the short job may use is
suspended; its GPUs, now empty, then hold the short job (speed_sjf_queue's next decision, at
the same instant) and it waits in the queue with its progress kept, to resume where it runs
alone at least as fast as where it was. It is no
registered baseline (no leaderboard row): the tests drive it directly and through
``GpuSharing-v2(suspend=True)`` (``tests/test_suspend.py``), and this script measures it::

    python scripts/suspend_move.py                # default, seeds 0-9
    SCENARIO=default SEEDS=0-9 python scripts/suspend_move.py

Prints one JSON line: per policy the mean ``jct_mean_s`` and the lowest SLO attainment, the
paired difference (suspending minus speed_sjf_queue: mean, 95 % t interval, seeds better and
equal, per seed), the suspensions per episode.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
from scipy import stats

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.speed_sjf import SpeedSJFQueue, predicted_duration_s


class SuspendLongest(SpeedSJFQueue):
    """speed_sjf_queue that suspends its longest running job for a much shorter waiting one
    (module doc).

    Args:
        ratio: A running job is suspended only if its predicted time left is at least
            ``ratio`` times the shortest waiting job's predicted duration.
        min_left_s: Nor if its predicted time left is below this (Gandiva's
            ``min_remaining_s`` for a migration).
    """

    name = "suspend_longest"

    def __init__(self, ratio: float = 4.0, min_left_s: float = 300.0) -> None:
        super().__init__()
        self.ratio = ratio
        self.min_left_s = min_left_s
        self._left: dict[int, int] = {}

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self._left = {}

    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        if d is None:
            d = self._suspension(view)
            if d is not None:
                self._left[d.job_id] = view.job(d.job_id).gpus[0]
        else:
            self._left.pop(d.job_id, None)  # (resumed)
        return d

    def _opportunistic_gpu(
        self, view: ClusterView, job: JobView, col: np.ndarray, keep_headroom: bool
    ) -> int | None:
        """speed_sjf_queue's GPU for ``job``; a job it suspended resumes only on a GPU where it
        runs at least as fast alone as where it was (else it waits)."""
        left = self._left.get(job.job_id)
        if left is not None:
            floor = view.solo_speed(job.model, left)
            fast = [view.solo_speed(job.model, g) >= floor for g in range(view.n_gpus)]
            col = col & np.array(fast)
        return super()._opportunistic_gpu(view, job, col, keep_headroom)

    def _suspension(self, view: ClusterView) -> Decision | None:
        if bool(((view.n_res == 0) & view.ready).any()):
            return None  # a GPU is free: what blocks the queue is not a lack of GPUs
        waiting = [j for j in view.decidable if not j.online and j.priority == 0]
        if not waiting:
            return None
        pred = {j.job_id: predicted_duration_s(view, j) for j in waiting}
        job = min(waiting, key=lambda j: (pred[j.job_id], j.submit_s, j.job_id))
        short = pred[job.job_id]
        best: tuple[float, int] | None = None  # (-time left, job id): the longest, then lowest id
        for jid in view.suspendable():  # (running offline jobs past their setup, not just placed)
            jv = view.job(jid)
            if not all(view.ready[x] for x in jv.gpus):
                continue  # a GPU being reconfigured
            # only a job alone on its GPUs empties GPUs that the short job may use
            if len(jv.gpus) < job.num_gpus or any(view.n_res[x] != 1 for x in jv.gpus):
                continue
            x = jv.gpus[0]
            if job.gpu_types and view.type_name[x] not in job.gpu_types:
                continue
            if view.mem_cap_gb[x] < job.mem_gb:
                continue
            speed = min(view.solo_speed(jv.model, x) for x in jv.gpus)
            left = jv.est_remaining_s / max(speed, 1e-9)
            if left < self.min_left_s or left < self.ratio * short:
                continue
            if best is None or (-left, jv.job_id) < best:
                best = (-left, jv.job_id)
        return Decision.suspend(best[1]) if best is not None else None


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> None:
    scenario = os.environ.get("SCENARIO", "default")
    seeds = _seeds(os.environ.get("SEEDS", "0-9"))
    cfg = load_scenario(scenario)
    sim = make_simulator(cfg)
    rows: dict[str, list[dict[str, float]]] = {"speed_sjf_queue": [], "suspend_longest": []}
    for seed in seeds:
        rows["speed_sjf_queue"].append(run_episode(SpeedSJFQueue(), sim, seed))
        rows["suspend_longest"].append(run_episode(SuspendLongest(), sim, seed))
    jct = {k: np.array([m["jct_mean_s"] for m in v]) for k, v in rows.items()}
    diff = jct["suspend_longest"] - jct["speed_sjf_queue"]
    half = (
        float(stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff)))
        if len(diff) > 1
        else math.nan
    )
    out = {
        "scenario": scenario,
        "seeds": f"{seeds[0]}-{seeds[-1]}",
        "jct_mean_s": {k: round(float(v.mean()), 1) for k, v in jct.items()},
        "slo_attainment_min": {
            k: round(min(m["slo_attainment"] for m in v), 4) for k, v in rows.items()
        },
        "diff_mean_s": round(float(diff.mean()), 1),
        "diff_ci95_s": [round(float(diff.mean()) - half, 1), round(float(diff.mean()) + half, 1)],
        "seeds_better": int((diff < 0).sum()),
        "seeds_equal": int((diff == 0).sum()),
        "diff_per_seed_s": [round(float(x), 1) for x in diff],
        "suspensions": [int(m.get("x_suspensions", 0.0)) for m in rows["suspend_longest"]],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
