"""What every fidelity experiment shares: scenario variants, an instrumented episode, records.

An experiment runs policies (``baselines``) on a scenario built to match a paper's setup
(``configs/scenarios/fidelity/``), averages the metrics over seeds and states the paper's claim
as *checks*: a quantity read off the averaged metrics (one detail value, or a ratio of two)
compared with a bound. ``holds`` is the conjunction of the checks, computed here from the
simulated numbers and nothing else; the record carries the detail values and the checks so
anyone can recompute it (``tests/test_reproduce.py`` does).
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.runner import run_episode
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.faults import FaultCause
from gpu_sharing_env.sim.online import latency_tuple
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_gym.baselines.base import Policy

#: Comparison operators a check may use.
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}

#: Fields every record has (``gsg reproduce`` writes them).
RECORD_FIELDS = ("id", "paper", "claim", "paper_value", "sim_value", "holds", "kind")

#: What a record's ``holds`` says (``kind``): ``"claim"``, the paper's finding reproduced (or not)
#: as an outcome of the simulation; ``"mechanism"``, a check that a mechanism the simulator
#: implements after the paper is wired as described, where the paper's number is an input of
#: the setup and the result follows from it (it cannot independently confirm the finding).
RECORD_KINDS = ("claim", "mechanism")


def scenario(name: str, **over: Any) -> ScenarioConfig:
    """A fidelity scenario (``configs/scenarios/fidelity/NAME.yaml``) with overrides.

    Overrides are dotted paths into the frozen config, e.g.
    ``{"sharing.online_priority": False, "workload.online.params.priority": 0}``; a path ending
    inside a ``params`` mapping sets that key of the mapping.
    """
    cfg = load_scenario(f"fidelity/{name}")
    for path, value in over.items():
        cfg = _set(cfg, path.split("."), value)
    return cfg


def _set(obj: Any, keys: list[str], value: Any) -> Any:
    head, rest = keys[0], keys[1:]
    if isinstance(obj, Mapping):
        inner = obj.get(head)
        return {**obj, head: _set(inner, rest, value) if rest else value}
    inner = getattr(obj, head)
    return replace(obj, **{head: _set(inner, rest, value) if rest else value})


class InstrumentedSimulator(Simulator):
    """The simulator unchanged, plus per-tick bookkeeping the metric schema does not hold.

    After each load tick it records, per running online service, its request count, the mean
    latency the tick charged and the latency the same service would have alone at that load
    (the same Kingman model as ``online_slowdown``), and the number of GPUs hosting a service.
    Nothing it does feeds back into the episode.
    """

    def reset(self, seed: int) -> None:
        #: Faults per cause: the ones that struck a job (``root``) and the co-located jobs they
        #: took down with them (``propagated``).
        self.faults_root: dict[str, int] = {}
        self.faults_propagated: dict[str, int] = {}
        self.svc_req: dict[int, float] = {}
        self.svc_lat_w: dict[int, float] = {}
        self.svc_solo_w: dict[int, float] = {}
        self.online_gpus_max = 0
        super().reset(seed)

    def _fail(self, st: JobState, cause: FaultCause, victim: bool = False) -> None:
        counts = self.faults_propagated if victim else self.faults_root
        counts[cause.value] = counts.get(cause.value, 0) + 1
        super()._fail(st, cause, victim)

    def _tick(self) -> bool:
        changed = super()._tick()
        tick = self.cfg.tick_s
        for jid in self._online_ids:
            st = self.jobs[jid]
            if st.status is not Status.RUNNING or st.spec.service is None:
                continue
            svc = st.spec.service
            req = st.rps * tick
            batch = st.effective_batch_size
            solo = latency_tuple(st.solo_batch_ms, st.rps, batch, svc.slo_ms)[0]
            self.svc_req[jid] = self.svc_req.get(jid, 0.0) + req
            self.svc_lat_w[jid] = self.svc_lat_w.get(jid, 0.0) + req * st.latency_ms
            self.svc_solo_w[jid] = self.svc_solo_w.get(jid, 0.0) + req * solo
        hosting = int(np.count_nonzero(np.asarray(self.cluster.online_count) > 0))
        self.online_gpus_max = max(self.online_gpus_max, hosting)
        return changed

    def extras(self, qos: float = 0.5) -> dict[str, float]:
        """Episode quantities beyond the schema, prefixed ``f_``.

        * ``f_worst_service_slowdown``: the largest per-service request-weighted mean latency
          over the same service's solo latency (``online_slowdown`` is the fleet's average).
        * ``f_online_gpus_max``: most GPUs hosting an online service at a tick.
        * ``f_queue_delay_high_s`` / ``f_queue_delay_low_s``: mean queueing delay of offline jobs
          with priority > 0 (PAI's high-GPU tasks in the synthetic workload) and of the others.
        * ``f_qos_reached``: share of offline jobs that ran whose time-averaged normalised
          progress was at least ``qos`` (GPUPool's ``QoS_reached``).
        * ``f_busy_gpu_frac_day1``: mean share of GPUs with a resident over the first day's
          ticks (the load a scenario puts on its fleet while jobs arrive).
        * ``f_faults_<cause>`` / ``f_propagated_<cause>``: per fault cause (``sim.faults``),
          the faults that struck a job and the co-located jobs they took down.
        * ``f_queue_delay_p90_frac_s`` / ``f_queue_delay_p90_whole_s``: 90th percentile of the
          queueing delay of offline jobs asking for a fraction of a GPU (PAI's GPU-sharing
          instances) and for whole GPUs; ``f_queued_1000s_whole``: share of the whole-GPU ones
          that waited more than 1,000 s; ``f_queue_delay_p90_high_s``: the p90 of the
          priority > 0 (high-GPU) ones; ``f_no_queue_share``: share of offline jobs that started
          within a second of arriving (the statistics PAI reports, NSDI'22 Sec. 3.2 and 6.3).
        """
        slow = [
            self.svc_lat_w[j] / self.svc_solo_w[j] for j in self.svc_req if self.svc_solo_w[j] > 0
        ]
        offline = [s for s in self.jobs.values() if not s.spec.online]
        started = [s for s in offline if not math.isnan(s.first_start_t)]

        def qd(jobs: list[Any]) -> float:
            d = [s.first_start_t - s.spec.submit_s for s in jobs]
            return float(np.mean(d)) if d else math.nan

        ran = [s for s in offline if s.run_time_s > 0]
        day1 = [row[3] for row in self.timeseries if row[0] <= 86_400.0]
        np_ = [s.norm_integral / s.run_time_s for s in ran]

        def delays(jobs: list[Any]) -> np.ndarray:
            return np.array([s.first_start_t - s.spec.submit_s for s in jobs], dtype=float)

        def p90(d: np.ndarray) -> float:
            return float(np.percentile(d, 90)) if d.size else math.nan

        frac = delays([s for s in started if s.spec.gpu_frac < 1.0])
        whole = delays([s for s in started if s.spec.gpu_frac >= 1.0])
        every = delays(started)
        faults = {
            f"f_{kind}_{c.value}": float(counts.get(c.value, 0))
            for kind, counts in (
                ("faults", self.faults_root),
                ("propagated", self.faults_propagated),
            )
            for c in FaultCause
        }
        return {
            **faults,
            "f_queue_delay_p90_frac_s": p90(frac),
            "f_queue_delay_p90_whole_s": p90(whole),
            "f_queued_1000s_whole": float(np.mean(whole > 1000.0)) if whole.size else math.nan,
            "f_queue_delay_p90_high_s": p90(delays([s for s in started if s.spec.priority > 0])),
            "f_no_queue_share": float(np.mean(every < 1.0)) if every.size else math.nan,
            "f_worst_service_slowdown": max(slow) if slow else math.nan,
            "f_online_gpus_max": float(self.online_gpus_max),
            "f_queue_delay_high_s": qd([s for s in started if s.spec.priority > 0]),
            "f_queue_delay_low_s": qd([s for s in started if s.spec.priority <= 0]),
            "f_qos_reached": float(np.mean([x >= qos for x in np_])) if np_ else math.nan,
            "f_jobs_done": float(sum(s.status is Status.DONE for s in offline)),
            "f_busy_gpu_frac_day1": float(np.mean(day1)) if day1 else math.nan,
        }


def episode(policy: Policy, cfg: ScenarioConfig, seed: int) -> dict[str, float]:
    """One seeded episode on a fresh simulator (mechanisms never leak between policies)."""
    sim = InstrumentedSimulator(cfg, build_nodes(cfg), build_workload(cfg))
    m = run_episode(policy, sim, seed)
    return {**m, **sim.extras()}


@dataclass(frozen=True)
class Variant:
    """One arm of an experiment: a label, a policy factory and the scenario it runs on."""

    label: str
    policy: Callable[[], Policy]
    cfg: ScenarioConfig


def run_variants(
    variants: Sequence[Variant], seeds: Sequence[int], keys: Sequence[str]
) -> dict[str, float]:
    """Mean over ``seeds`` of each metric in ``keys`` per variant: ``{"label.key": value}``.

    Also ``label.<key>_sum`` for error and fault counts (``errors_*``, ``f_faults_*``,
    ``f_propagated_*``), summed over seeds.
    """
    out: dict[str, float] = {}
    for v in variants:
        rows = [episode(v.policy(), v.cfg, s) for s in seeds]
        for k in keys:
            vals = np.array([r[k] for r in rows], dtype=float)
            out[f"{v.label}.{k}"] = float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan
            if k.startswith(("errors_", "f_faults_", "f_propagated_")):
                out[f"{v.label}.{k}_sum"] = float(np.nansum(vals))
    return out


def ratio(num: float, den: float) -> float:
    """``num / den``, NaN where ``den`` is 0 (a check on it fails instead of raising)."""
    return num / den if den != 0 else math.nan


def check(
    name: str, detail: Mapping[str, float], num: str, op: str, bound: float, den: str | None = None
) -> dict[str, Any]:
    """A claim's direction: ``detail[num] (/ detail[den]) op bound``; NaN never passes (a
    ratio over zero is NaN)."""
    value = ratio(detail[num], detail[den]) if den is not None else detail[num]
    ok = bool(math.isfinite(value) and OPS[op](value, bound))
    return {
        "name": name,
        "num": num,
        "den": den,
        "op": op,
        "bound": bound,
        "value": value,
        "ok": ok,
    }


def record(
    exp_id: str,
    paper: str,
    claim: str,
    paper_value: str,
    checks: Sequence[dict[str, Any]],
    detail: Mapping[str, float],
    seeds: Sequence[int],
    t0: float,
    kind: str = "claim",
) -> dict[str, Any]:
    """The experiment's record; ``sim_value`` lists every check's simulated value; ``kind`` is
    one of :data:`RECORD_KINDS`."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"kind={kind!r}: must be one of {RECORD_KINDS}")
    sim_value = "; ".join(f"{c['name']} = {c['value']:.3g}" for c in checks)
    return {
        "id": exp_id,
        "kind": kind,
        "paper": paper,
        "claim": claim,
        "paper_value": paper_value,
        "sim_value": sim_value,
        "holds": all(c["ok"] for c in checks),
        "checks": list(checks),
        "detail": dict(detail),
        "seeds": list(seeds),
        "wall_s": round(time.perf_counter() - t0, 2),
    }
