"""Where time-sharing's online slowdown in ``gsg reproduce --experiment muxflow-online`` comes
from (issue 52): the pair physics, the services' load, and the fleet average against load.

Three tables:

1. *The pair*: each of the scenario's service models on a T4 beside each offline model under
   plain time-slicing (equal turns, ``AnalyticSpeedModel``): the service's batch time over
   its solo batch time (turn-taking stretch and time-slice wait; the slowdown at no load) and
   the solo utilisation above which its queue is unstable beside the co-runner. Beside it,
   the measurement the time-slicing coefficients are fitted on: Tally's inference service
   time under time-slicing beside training at 50 % load (``data/sharing_pairs.csv``).
2. *The load*: the services' utilisation of their T4 alone (request rate x solo batch time /
   batch), each service's mean over the day and its peak, over the seeds, against MuxFlow's
   "over 99 % of GPUs below 60 % GPU utilisation" (Sec. 2, the seed notes).
3. *The fleet*: time-sharing's average slowdown (the experiment's statistic) and the worst
   service's, with 95 % intervals over seeds, at the scenario's peak cap (``max_load`` 0.25 of
   the V100 capacity) and lower caps: what-ifs, not settings.

    .venv/bin/python scripts/muxflow_online_probe.py --seeds 10
"""

from __future__ import annotations

import argparse
from importlib import resources

import numpy as np
import pandas as pd

from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.physics.interference import AnalyticSpeedModel, Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.workload.services import SERVING_BATCH
from gpu_sharing_gym.baselines.reference import TimeSharing
from gpu_sharing_gym.fidelity.common import EpisodeRecorder, Variant, check, run_variants, scenario

#: The scenario's services (``fidelity/muxflow.yaml``) and offline models, and the GPU.
SERVICES = ("resnet50", "mobilenet", "yolov3", "gnn", "bert", "gpt2")
OFFLINE = ("resnet50", "vgg16", "densenet201", "inceptionv3")
GPU = "T4"
#: MuxFlow's figure for its online GPUs (Sec. 2): over 99 % below 60 % GPU utilisation.
PAPER_UTIL = 0.6
#: The time-sharing arm's scenario overrides (``fidelity/muxflow.py`` ``_plain_ts``).
PLAIN_TS = {"sharing.online_priority": False, "workload.online.params.priority": 0}
#: Peak caps run in table 3 (the scenario's first).
CAPS = (0.25, 0.20, 0.15, 0.10)


def pair(model: AnalyticSpeedModel, svc: str, off: str, batch: int) -> tuple[float, float]:
    """``(stretch, rho_max)``: the service's batch time beside ``off`` over its solo batch time
    as its load goes to 0, and the solo utilisation at which its queue becomes unstable."""
    solo = model.batch_latency_ms(svc, GPU, batch)
    residents = [
        Resident(svc, duty=1e-6, online=True, batch=batch),
        Resident(off, duty=ZOO[off].duty),
    ]
    f = model.rates(GPU, SharingMode.TIME_SHARING, residents)[0]
    wait = model.latency_terms(GPU, SharingMode.TIME_SHARING, residents)[0][0]
    stretch = (solo / f + wait) / solo
    return stretch, 1.0 / stretch


def tally_time_slicing() -> pd.Series:
    """Tally's inference mean service time under time-slicing over solo (50 % load)."""
    path = resources.files("gpu_sharing_env") / "data" / "sharing_pairs.csv"
    df = pd.read_csv(str(path))
    sel = (
        (df.source == "tally")
        & (df.mechanism == "time_sharing")
        & (df.victim_role == "online")
        & (df.metric == "latency_mean_x")
    )
    return df[sel].set_index(["victim", "corunner"]).value


class LoadRecorder(EpisodeRecorder):
    """The experiment's recorder, plus each service's solo utilisation per tick."""

    def _clear(self) -> None:
        super()._clear()
        self.util: dict[int, list[float]] = {}

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        super().on_tick(sim, changed)
        for jid in self.online_ids:
            st = sim.jobs[jid]
            if st.spec.service is None:
                continue
            u = st.serving.rps * st.serving.solo_batch_ms / 1000.0 / st.effective_batch_size
            self.util.setdefault(jid, []).append(u)


def loads(seeds: range, cap: float = CAPS[0]) -> dict[str, np.ndarray]:
    """Per service over the seeds: its model, mean and peak solo utilisation of its T4, and its
    slowdown under the time-sharing arm (request-weighted mean latency over solo), at peak cap
    ``cap`` (``max_load``; the scenario's by default)."""
    cfg = scenario("muxflow", **PLAIN_TS, **{"workload.online.params.max_load": cap})
    model, mean, peak, slow = [], [], [], []
    for seed in seeds:
        sim = Simulator(cfg, build_nodes(cfg), build_workload(cfg))
        rec = LoadRecorder(sim)
        run_episode(TimeSharing(), sim, seed)
        for jid, u in rec.util.items():
            model.append(sim.jobs[jid].spec.model)
            mean.append(float(np.mean(u)))
            peak.append(float(np.max(u)))
            slow.append(rec.svc_lat_w[jid] / rec.svc_solo_w[jid])
    return {"model": np.array(model), "mean": np.array(mean), "peak": np.array(peak),
            "slow": np.array(slow)}  # fmt: skip


def fleet(cap: float, seeds: range) -> dict[str, tuple[float, float, float]]:
    """Time-sharing's average and worst-service slowdown at peak cap ``cap``: (value, lo, hi)."""
    cfg = scenario("muxflow", **PLAIN_TS, **{"workload.online.params.max_load": cap})
    keys = ("online_slowdown", "f_worst_service_slowdown")
    d = run_variants([Variant("ts", TimeSharing, cfg)], list(seeds), keys)
    out = {}
    for k in keys:
        c = check(k, d, f"ts.{k}", ">=", 1.0)
        out[k] = (c["value"], *c["ci"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    args = ap.parse_args()
    seeds = range(args.seeds)
    model = AnalyticSpeedModel()

    print(f"1. The pair on a {GPU}, plain time-slicing: the service's batch time beside the")
    print("   offline job over alone (no load), and the solo utilisation where its queue turns")
    print("   unstable")
    print(f"   {'service':12s} " + " ".join(f"{o:>18s}" for o in OFFLINE))
    for svc in SERVICES:
        b = int(SERVING_BATCH.get(svc, 8))
        cells = []
        for off in OFFLINE:
            s, r = pair(model, svc, off, b)
            cells.append(f"{s:6.2f}x, u<{r:.2f}")
        print(f"   {svc + ' b' + str(b):12s} " + " ".join(f"{c:>18s}" for c in cells))
    t = tally_time_slicing()
    print(f"   Tally (A100, 50 % load, time-slicing): inference service time {t.min():.2f}-"
          f"{t.max():.2f}x solo, median {t.median():.2f} over {len(t)} pairs")  # fmt: skip

    ld = loads(seeds)
    print(f"\n2. The services' solo {GPU} utilisation (seeds 0-{args.seeds - 1}, "
          f"{len(ld['mean'])} services; MuxFlow: over 99 % of GPUs below {PAPER_UTIL:.0%})")  # fmt: skip
    print(f"   {'service':10s} {'n':>4s} {'day mean':>9s} {'peak':>6s} {'max peak':>9s} "
          f"{'slowdown (TS)':>14s}")  # fmt: skip
    for m in SERVICES:
        sel = ld["model"] == m
        if sel.any():
            print(f"   {m:10s} {sel.sum():4d} {ld['mean'][sel].mean():9.3f} "
                  f"{ld['peak'][sel].mean():6.3f} {ld['peak'][sel].max():9.3f} "
                  f"{np.median(ld['slow'][sel]):14.2f}")  # fmt: skip
    print(f"   all        day mean above {PAPER_UTIL:.0%}: {np.mean(ld['mean'] > PAPER_UTIL):.3f}; "
          f"peak above {PAPER_UTIL:.0%}: {np.mean(ld['peak'] > PAPER_UTIL):.3f}")  # fmt: skip
    print("   (slowdown: median over the services of the model)")

    print(f"\n3. Time-sharing's slowdown against the services' peak cap (seeds 0-{args.seeds - 1})")
    for cap in CAPS:
        f = fleet(cap, seeds)
        a, w = f["online_slowdown"], f["f_worst_service_slowdown"]
        top = loads(seeds, cap)["peak"].max()
        tag = " (the scenario)" if cap == CAPS[0] else ""
        print(f"   max_load {cap:.2f}{tag}: highest T4 peak {top:.2f}; average {a[0]:.3g} "
              f"[{a[1]:.3g}, {a[2]:.3g}], worst service {w[0]:.3g} [{w[1]:.3g}, {w[2]:.3g}]")  # fmt: skip


if __name__ == "__main__":
    main()
