"""What every fidelity experiment shares: scenario variants, an instrumented episode, records.

An experiment runs policies (``baselines``) on a scenario built to match a paper's setup
(``configs/scenarios/fidelity/``) over paired seeds (every arm runs each seed's workload) and
states the paper's claim as *checks*: a quantity (one detail value, or a ratio of two arms'
values) compared with a bound. Each check's quantity is computed per seed and judged on its
95 % confidence interval (:data:`CI_METHOD`): the record's ``verdict`` is ``"holds"`` when every
check's interval lies on the paper's side of its bound, ``"depends on PARAM"`` when a
bracketed unpublished parameter (:class:`Bracket`) makes it hold at the documented central
choice but not at both ends, else ``"does not hold"``; ``holds`` is true for ``"holds"`` only.
Beside the direction, a check may carry the paper's published figure (``paper_band``: low and
high, either ``None`` for a one-sided figure) and whether the check's interval overlaps it
(``in_band``); the record collects them. The record carries the detail values, the per-seed
values and the checks so anyone can recompute it (``tests/test_reproduce.py`` does). Setup parameters (:class:`Param`, :data:`PARAMS`) can be
set for a run (``gsg reproduce --sweep``) without touching the experiment's code.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.physics.interference import MODEL_VERSION, SpeedModel
from gpu_sharing_env.sim.build import build_nodes, build_workload
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.faults import FaultCause
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import MonitorThresholds, latency_tuple
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.workload import WORKLOAD_VERSION
from gpu_sharing_gym.backends import run_tasks
from gpu_sharing_gym.baselines.base import Policy
from gpu_sharing_gym.ci import mean_ci95

#: Comparison operators a check may use.
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}

#: Fields every record has (``gsg reproduce`` writes them).
RECORD_FIELDS = (
    "id",
    "paper",
    "claim",
    "paper_value",
    "sim_value",
    "holds",
    "verdict",
    "kind",
)

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


class EpisodeRecorder(SimObserver):
    """Per-tick bookkeeping the metric schema does not hold, observed from outside the engine
    (:mod:`gpu_sharing_env.sim.observe`).

    After each load tick it records, per running online service, its request count, the mean
    latency the tick charged and the latency the same service would have alone at that load
    (the same Kingman model as ``online_slowdown``), and the number of GPUs hosting a service;
    and it counts faults per cause. Nothing it does feeds back into the episode.
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.online_ids: list[int] = []
        self._clear()
        sim.add_observer(self)

    def on_reset(self, sim: Simulator) -> None:
        self._clear()
        self.online_ids = [jid for jid, st in sim.jobs.items() if st.spec.online]

    def _clear(self) -> None:
        #: Faults per cause: the ones that struck a job (``root``) and the co-located jobs they
        #: took down with them (``propagated``).
        self.faults_root: dict[str, int] = {}
        self.faults_propagated: dict[str, int] = {}
        self.svc_req: dict[int, float] = {}
        self.svc_lat_w: dict[int, float] = {}
        self.svc_solo_w: dict[int, float] = {}
        self.online_gpus_max = 0
        self.online_ids = []

    def on_fault(self, sim: Simulator, job_id: int, cause: FaultCause, victim: bool) -> None:
        counts = self.faults_propagated if victim else self.faults_root
        counts[cause.value] = counts.get(cause.value, 0) + 1

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        tick = sim.cfg.tick_s
        for jid in self.online_ids:
            st = sim.jobs[jid]
            if st.status is not Status.RUNNING or st.spec.service is None:
                continue
            svc = st.spec.service
            sv = st.serving
            req = sv.rps * tick
            batch = st.effective_batch_size
            solo = latency_tuple(sv.solo_batch_ms, sv.rps, batch, svc.slo_ms)[0]
            self.svc_req[jid] = self.svc_req.get(jid, 0.0) + req
            self.svc_lat_w[jid] = self.svc_lat_w.get(jid, 0.0) + req * sv.latency_ms
            self.svc_solo_w[jid] = self.svc_solo_w.get(jid, 0.0) + req * solo
        hosting = int(np.count_nonzero(np.asarray(sim.cluster.online_count) > 0))
        self.online_gpus_max = max(self.online_gpus_max, hosting)

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
        * ``f_queue_delay_inst_mean_s`` / ``f_queue_delay_inst_high_s``: mean queueing delay per
          *instance* (PAI's unit, Sec. 6.3: a task of ``n`` whole GPUs is ``n`` instances that
          wait as long as it, a fractional task one), over all offline jobs and over the
          priority > 0 (high-GPU) ones.
        * ``f_queue_delay_p50_s``: the median queueing delay of offline jobs (Horus' fairness
          algorithm lowers the median wait, TPDS 2022).
        """
        slow = [
            self.svc_lat_w[j] / self.svc_solo_w[j] for j in self.svc_req if self.svc_solo_w[j] > 0
        ]
        offline = [s for s in self.sim.jobs.values() if not s.spec.online]
        started = [s for s in offline if not math.isnan(s.ledger.first_start_t)]

        def qd(jobs: list[Any]) -> float:
            d = [s.ledger.first_start_t - s.spec.submit_s for s in jobs]
            return float(np.mean(d)) if d else math.nan

        ran = [s.ledger for s in offline if s.ledger.run_time_s > 0]
        day1 = [row[3] for row in self.sim.timeseries if row[0] <= 86_400.0]
        np_ = [led.norm_integral / led.run_time_s for led in ran]

        def delays(jobs: list[Any]) -> np.ndarray:
            return np.array([s.ledger.first_start_t - s.spec.submit_s for s in jobs], dtype=float)

        def p90(d: np.ndarray) -> float:
            return float(np.percentile(d, 90)) if d.size else math.nan

        def per_instance(jobs: list[Any]) -> float:
            n = np.array([max(1, s.spec.num_gpus) for s in jobs], dtype=float)
            return float(np.average(delays(jobs), weights=n)) if jobs else math.nan

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
            "f_queue_delay_p50_s": float(np.median(every)) if every.size else math.nan,
            "f_queue_delay_inst_mean_s": per_instance(started),
            "f_queue_delay_inst_high_s": per_instance([s for s in started if s.spec.priority > 0]),
            "f_worst_service_slowdown": max(slow) if slow else math.nan,
            "f_online_gpus_max": float(self.online_gpus_max),
            "f_queue_delay_high_s": qd([s for s in started if s.spec.priority > 0]),
            "f_queue_delay_low_s": qd([s for s in started if s.spec.priority <= 0]),
            "f_qos_reached": float(np.mean([x >= qos for x in np_])) if np_ else math.nan,
            "f_jobs_done": float(sum(s.status is Status.DONE for s in offline)),
            "f_busy_gpu_frac_day1": float(np.mean(day1)) if day1 else math.nan,
        }


def episode(
    policy: Policy,
    cfg: ScenarioConfig,
    seed: int,
    speed: Callable[[ScenarioConfig], SpeedModel] | None = None,
) -> dict[str, float]:
    """One seeded episode on a fresh simulator (mechanisms never leak between policies), with
    the speed model ``speed(cfg)`` where given. A SysMonitor / xCUDA threshold set for the run
    (:func:`run_settings`, a parameter named like a field of ``MonitorThresholds``) replaces
    the simulator's default."""
    model = speed(cfg) if speed is not None else None
    over = {k: v for k, v in _RUN.values.items() if k in _MONITOR_FIELDS}
    thresholds = replace(MonitorThresholds(), **over) if over else None
    sim = Simulator(cfg, build_nodes(cfg), build_workload(cfg), speed=model, thresholds=thresholds)
    recorder = EpisodeRecorder(sim)
    m = run_episode(policy, sim, seed)
    return {**m, **recorder.extras()}


@dataclass(frozen=True)
class Variant:
    """One arm of an experiment: a label, a policy factory and the scenario it runs on;
    ``speed``, where set, builds the arm's speed model from the scenario (default: the
    simulator's own, ``Simulator``)."""

    label: str
    policy: Callable[[], Policy]
    cfg: ScenarioConfig
    speed: Callable[[ScenarioConfig], SpeedModel] | None = None


# --------------------------------------------------------------------------------------------
# Setup parameters an experiment can be run at (``gsg reproduce --sweep``, brackets)


@dataclass(frozen=True)
class Param:
    """A named setup parameter that a run can set (``gsg reproduce --sweep NAME=LO:HI:N``, a
    :class:`Bracket`): ``cfg(cfg, value)`` rewrites an arm's scenario, ``policy(factory,
    value)`` its policy factory (either or both). ``arms``: the arm labels it applies to
    (``None``: every arm); ``experiments``: the experiment ids it is meaningful for (``None``:
    every experiment). Register with :func:`register_param`; :func:`run_variants` applies the
    values set by :func:`run_settings` to every arm it runs, so an experiment module needs no
    code beyond the registration."""

    name: str
    doc: str
    cfg: Callable[[ScenarioConfig, float], ScenarioConfig] | None = None
    policy: Callable[[Callable[[], Policy], float], Callable[[], Policy]] | None = None
    arms: frozenset[str] | None = None
    experiments: frozenset[str] | None = None

    def applies_to(self, exp_id: str) -> bool:
        return self.experiments is None or exp_id in self.experiments

    def apply(self, v: Variant, value: float) -> Variant:
        if self.arms is not None and v.label not in self.arms:
            return v
        cfg = self.cfg(v.cfg, value) if self.cfg is not None else v.cfg
        policy = self.policy(v.policy, value) if self.policy is not None else v.policy
        return replace(v, policy=policy, cfg=cfg)


#: Sweepable parameters by name (:func:`register_param`).
PARAMS: dict[str, Param] = {}

#: Parameters that :func:`episode` applies to the simulator's SysMonitor / xCUDA thresholds.
_MONITOR_FIELDS = frozenset(f.name for f in fields(MonitorThresholds))


def register_param(param: Param) -> Param:
    """Add ``param`` to :data:`PARAMS` (a name registered twice must be the same parameter:
    a module imported again re-registers harmlessly)."""
    old = PARAMS.get(param.name)
    if old is not None and old != param:
        raise ValueError(f"sweep parameter {param.name!r} registered twice, differently")
    PARAMS[param.name] = param
    return param


def params_for(exp_id: str) -> list[str]:
    """Names of the parameters experiment ``exp_id`` can be run at, sorted."""
    return sorted(n for n, p in PARAMS.items() if p.applies_to(exp_id))


@dataclass(frozen=True)
class Bracket:
    """An unpublished setup parameter whose plausible values span measured alternatives:
    ``central`` is the documented choice, ``low`` and ``high`` the ends of the measured span;
    ``source`` cites the measurements. :func:`run_experiment` runs the claim at all three and
    judges it at ``central`` (``docs/fidelity.md``, "How verdicts are computed")."""

    param: str
    low: float
    central: float
    high: float
    source: str


#: Bracketed parameter per experiment id (:func:`declare_bracket`).
BRACKETS: dict[str, Bracket] = {}


def declare_bracket(exp_id: str, bracket: Bracket) -> Bracket:
    """Declare that experiment ``exp_id`` is judged over ``bracket`` (its ``param`` must be
    registered, :func:`register_param`, by the time the experiment runs)."""
    if not bracket.low <= bracket.central <= bracket.high:
        raise ValueError(f"{exp_id}: bracket {bracket.param}: need low <= central <= high")
    BRACKETS[exp_id] = bracket
    return bracket


def _scale_arrivals(cfg: ScenarioConfig, factor: float) -> ScenarioConfig:
    rate = float(cfg.workload.offline.params.get("arrivals_per_h", 0.0))
    return _set(cfg, ["workload", "offline", "params", "arrivals_per_h"], rate * factor)


def _set_estimate_sigma(cfg: ScenarioConfig, sigma: float) -> ScenarioConfig:
    return _set(cfg, ["workload", "offline", "estimate_sigma"], float(sigma))


register_param(
    Param(
        "load",
        "multiplier on every arm's offline arrival rate (workload.offline.params.arrivals_per_h)",
        cfg=_scale_arrivals,
        experiments=frozenset(
            {
                "muxflow-online",
                "muxflow-offline",
                "muxflow-ablation",
                "muxflow-errors",
                "pai-reserve-pack",
                "pai-sjf",
                "gpupool-stp",
                "horus",
            }
        ),  # gpulet has no offline arrivals
    )
)
register_param(
    Param(
        "predictor_sigma",
        "lognormal sigma of the PAI predictor's duration estimates (the sjf_predicted arm's "
        "workload.offline.estimate_sigma; FIFO, the coarse arm and the oracle keep theirs)",
        cfg=_set_estimate_sigma,
        arms=frozenset({"sjf_predicted"}),
        experiments=frozenset({"pai-sjf"}),
    )
)


@dataclass
class _Run:
    """What :func:`run_settings` sets for the experiment being run."""

    values: dict[str, float] = field(default_factory=dict)
    workers: int = 1
    backend: str = "local"
    address: str | None = None


_RUN = _Run()


@contextlib.contextmanager
def run_settings(
    values: Mapping[str, float] | None = None,
    workers: int | None = None,
    backend: str | None = None,
    address: str | None = None,
) -> Iterator[None]:
    """Within this block :func:`run_variants` applies the parameter ``values`` (names in
    :data:`PARAMS`) to every arm and runs episodes in ``workers`` processes, or as Ray tasks
    with ``backend="ray"`` (``address``: an existing cluster); unset, each is inherited."""
    global _RUN
    unknown = sorted(set(values or {}) - set(PARAMS))
    if unknown:
        raise KeyError(f"unknown setup parameter {unknown[0]!r} (known: {', '.join(PARAMS)})")
    old = _RUN
    _RUN = _Run(
        {**old.values, **(values or {})},
        old.workers if workers is None else max(1, workers),
        old.backend if backend is None else backend,
        old.address if address is None else address,
    )
    try:
        yield
    finally:
        _RUN = old


def setting(name: str, default: Any = None) -> Any:
    """The value :func:`run_settings` set for parameter ``name`` (``default`` when unset), for
    an experiment that reads a parameter itself rather than through :attr:`Param.cfg` or
    :attr:`Param.policy`."""
    return _RUN.values.get(name, default)


# --------------------------------------------------------------------------------------------
# Episodes, per seed and in parallel

#: (variant, seed) tasks of the running :func:`run_variants`; forked workers inherit it, so
#: nothing (policy factories included) needs to pickle but the metrics coming back.
_TASKS: list[tuple[Variant, int]] = []


def _run_task(i: int) -> dict[str, float]:
    v, seed = _TASKS[i]
    return episode(v.policy(), v.cfg, seed, v.speed)


def _run_shipped(task: tuple[int, Variant, int, dict[str, float]]) -> dict[str, float]:
    """A Ray task's episode: the variant travels with it (Ray's cloudpickle carries the policy
    factories), and so do the parameter values, which a Ray worker does not inherit."""
    global _RUN
    _, v, seed, values = task
    old = _RUN
    _RUN = _Run(dict(values))
    try:
        return episode(v.policy(), v.cfg, seed, v.speed)
    finally:
        _RUN = old


def _episodes(
    tasks: list[tuple[Variant, int]],
    workers: int,
    backend: str = "local",
    address: str | None = None,
) -> list[dict[str, float]]:
    """Every task's episode metrics, in task order, through the one runner
    (:func:`gpu_sharing_gym.backends.run_tasks`). Each episode is a pure function of its
    (policy, scenario, seed) on a fresh simulator, so ``workers`` > 1 (forked processes) or
    Ray tasks return exactly what one process does."""
    global _TASKS
    n = min(workers, len(tasks))
    if backend != "ray" and (n <= 1 or "fork" not in mp.get_all_start_methods()):
        return [episode(v.policy(), v.cfg, s, v.speed) for v, s in tasks]
    out: dict[int, dict[str, float]] = {}
    if backend == "ray":
        shipped = [(i, v, s, dict(_RUN.values)) for i, (v, s) in enumerate(tasks)]
        with contextlib.closing(run_tasks(_run_shipped, shipped, backend, n, address)) as res:
            for (i, *_), metrics in res:
                out[i] = metrics
    else:
        _TASKS = tasks  # the forked workers inherit it: policy factories need not pickle
        try:
            fork = mp.get_context("fork")
            with contextlib.closing(
                run_tasks(_run_task, range(len(tasks)), "local", n, None, fork)
            ) as res:
                out.update(res)
        finally:
            _TASKS = []
    return [out[i] for i in range(len(tasks))]


#: Separator of a per-seed detail key: ``"label.key@seed"`` holds seed ``seed``'s value.
SEED_SEP = "@"


def run_variants(
    variants: Sequence[Variant], seeds: Sequence[int], keys: Sequence[str]
) -> dict[str, float]:
    """Mean over ``seeds`` of each metric in ``keys`` per variant: ``{"label.key": value}``,
    and each seed's value, ``{"label.key@seed": value}`` (the arms share each seed's workload:
    paired); :func:`check` reads those to give a quantity's confidence interval and
    :func:`record` moves them to the record's ``per_seed``.

    Also ``label.<key>_sum`` for error and fault counts (``errors_*``, ``f_faults_*``,
    ``f_propagated_*``), summed over seeds. The parameter values set by :func:`run_settings`
    apply to every arm first.
    """
    arms = list(variants)
    for name, value in _RUN.values.items():
        arms = [PARAMS[name].apply(v, value) for v in arms]
    tasks = [(v, s) for v in arms for s in seeds]
    results = iter(_episodes(tasks, _RUN.workers, _RUN.backend, _RUN.address))
    out: dict[str, float] = {}
    for v in arms:
        rows = [next(results) for _ in seeds]
        for k in keys:
            vals = np.array([r[k] for r in rows], dtype=float)
            out[f"{v.label}.{k}"] = float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan
            for s, x in zip(seeds, vals, strict=True):
                out[f"{v.label}.{k}{SEED_SEP}{s}"] = float(x)
            if k.startswith(("errors_", "f_faults_", "f_propagated_")):
                out[f"{v.label}.{k}_sum"] = float(np.nansum(vals))
    return out


def per_seed(detail: Mapping[str, float], key: str) -> dict[int, float] | None:
    """Seed -> value of ``key`` from ``detail``'s ``key@seed`` entries; ``None`` when it has
    none (a constant, or a quantity pooled over seeds)."""
    pre = key + SEED_SEP
    out = {
        int(k[len(pre) :]): v
        for k, v in detail.items()
        if k.startswith(pre) and k[len(pre) :].isdigit()
    }
    return out or None


def derive(detail: dict[str, float], name: str, fn: Callable[..., float], *keys: str) -> float:
    """``detail[name] = fn(*(detail[k] for k in keys))`` and the same per seed (a key without
    per-seed values enters every seed as its constant), so a check on ``name`` gets a
    confidence interval; returns the seed-averaged inputs' value."""
    detail[name] = fn(*(detail[k] for k in keys))
    series = [per_seed(detail, k) for k in keys]
    seeds = _common_seeds(series)
    for s in seeds or ():
        args = [detail[k] if sr is None else sr[s] for k, sr in zip(keys, series, strict=True)]
        detail[f"{name}{SEED_SEP}{s}"] = fn(*args)
    return detail[name]


def _common_seeds(series: Sequence[Mapping[int, float] | None]) -> list[int] | None:
    present = [set(sr) for sr in series if sr is not None]
    if not present:
        return None
    return sorted(set.intersection(*present))


# --------------------------------------------------------------------------------------------
# Checks, confidence intervals and verdicts

#: How a check's interval is computed (recorded with every record).
CI_METHOD = (
    "Student t over paired seeds: the check's quantity (a detail value or a ratio of two arms' "
    "values) per seed; a positive quantity (every seed's value and the bound > 0) on the log "
    "scale, exp(mean(log q) +- t(0.975, n-1) * sd(log q) / sqrt(n)) around the geometric "
    "mean (so A/B > 1 and B/A < 1 get the same verdict), any other linearly, mean +- "
    "t(0.975, n-1) * sd / sqrt(n); one seed, or a quantity pooled over seeds: the point"
)

#: A record's ``verdict``: ``"holds"`` (``holds`` true), ``"depends on PARAM"`` (a bracketed
#: parameter: holds at the central value, not at an end; ``holds`` false) or ``"does not hold"``.
VERDICTS = ("holds", "depends on", "does not hold")


def depends_on(param: str) -> str:
    """The verdict of a claim that holds at a bracket's central value only."""
    return f"{VERDICTS[1]} {param}"


def ratio(num: float, den: float) -> float:
    """``num / den``, NaN where ``den`` is 0 (a check on it fails instead of raising)."""
    return num / den if den != 0 else math.nan


def t_interval(values: Sequence[float], log: bool = False) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of the finite ``values``: the leaderboard's Student t interval of
    their mean (:func:`gpu_sharing_gym.ci.mean_ci95`; ``log``: of their logs, mapped back,
    around the geometric mean); the point for one value; NaNs for none."""
    x = [v for v in values if math.isfinite(v)]
    if not x:
        return math.nan, math.nan, math.nan, 0
    mean, half, n = mean_ci95(np.log(x).tolist() if log else x)
    half = 0.0 if n == 1 else half
    if log:
        return math.exp(mean), math.exp(mean - half), math.exp(mean + half), n
    return mean, mean - half, mean + half, n


def beyond(op: str, lo: float, hi: float, bound: float) -> bool:
    """Whether the whole interval ``[lo, hi]`` is on the ``op bound`` side (NaN never is)."""
    edge = lo if op in (">", ">=") else hi
    return bool(math.isfinite(lo) and math.isfinite(hi) and OPS[op](edge, bound))


def check(
    name: str,
    detail: Mapping[str, float],
    num: str,
    op: str,
    bound: float,
    den: str | None = None,
    floor: float | None = None,
    band: tuple[float | None, float | None] | None = None,
) -> dict[str, Any]:
    """A claim's direction: ``detail[num] (/ detail[den]) op bound``, judged on the quantity's
    95 % confidence interval over seeds (:data:`CI_METHOD`): ``ok`` when the whole interval is
    on the ``op bound`` side. ``value`` is the quantity's mean over seeds (geometric on the
    ``"log"`` ``scale``), ``ci`` its interval, ``n`` the seeds it has a finite value for
    (``None``: pooled, no per-seed values; ``scale`` ``"point"``),
    ``pooled`` the quantity read off the seed-averaged detail, ``point_ok`` whether ``value``
    alone is on the side. NaN never passes (a ratio over zero is NaN), nor does a check some
    seed has no finite value for.

    ``floor`` (a ratio of durations): values below it count as it, the measurement's
    resolution. A queueing delay of 0 s is "no wait", not an infinitely better arm: with a
    floor of 1 s (the PAI trace's timestamps are whole seconds) a seed where one arm never
    waits gives the ratio of the other's wait to 1 s, and a seed where neither waits gives 1
    (no effect), where a plain ratio would be infinite or undefined and fail the check.

    ``band``: the paper's published figure for the same quantity, ``(low, high)`` (a point is
    ``(x, x)``; an "up to 1.5x" slowdown is ``(1.0, 1.5)``, from no effect to the figure;
    ``None`` on a side: unbounded there, a figure with one bound and no direction), at the
    figure's printed precision (:func:`published`, :func:`reduction_band`,
    :func:`increase_band`: "45 %" stands for 44.5-45.5 %). The check then carries
    ``paper_band`` and ``in_band``, whether its interval overlaps the band (:func:`overlaps`);
    magnitudes, not only the direction."""
    if floor is not None:
        detail = {k: (max(v, floor) if k.partition(SEED_SEP)[0] in (num, den) else v)
                  for k, v in detail.items()}  # fmt: skip
    pooled = ratio(detail[num], detail[den]) if den is not None else detail[num]
    series = [per_seed(detail, num), per_seed(detail, den) if den is not None else None]
    seeds = _common_seeds(series)
    scale = "point"
    if seeds is None:
        value, lo, hi, n = pooled, pooled, pooled, None
    else:
        sn, sd = series
        q = [
            (detail[num] if sn is None else sn[s])
            if den is None
            else ratio(detail[num] if sn is None else sn[s], detail[den] if sd is None else sd[s])
            for s in seeds
        ]
        log = bound > 0 and all(v > 0 for v in q if math.isfinite(v))
        value, lo, hi, n = t_interval(q, log=log)
        scale = "log" if log else "linear"
    return {
        "name": name,
        "num": num,
        "den": den,
        "op": op,
        "bound": bound,
        "value": value,
        "ci": [lo, hi],
        "n": n,
        "scale": scale,
        "pooled": pooled,
        **({"floor": floor} if floor is not None else {}),
        **(
            {"paper_band": {"low": band[0], "high": band[1]}, "in_band": overlaps(lo, hi, band)}
            if band is not None
            else {}
        ),
        "point_ok": bool(math.isfinite(value) and OPS[op](value, bound)),
        # every seed must have a value: a seed whose quantity is NaN (a ratio over zero) fails
        # the check instead of dropping out of the interval
        "ok": beyond(op, lo, hi, bound) and (seeds is None or n == len(seeds)),
    }


def overlaps(lo: float, hi: float, band: tuple[float | None, float | None]) -> bool:
    """Whether the interval ``[lo, hi]`` overlaps the paper's ``band`` (``None``: unbounded on
    that side); NaN never does."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    b_lo, b_hi = band
    return (b_lo is None or hi >= b_lo) and (b_hi is None or lo <= b_hi)


def published(low: str, high: str | None = None) -> tuple[float, float]:
    """The values a figure stands for as the paper prints it: every value that rounds to it,
    from half a unit of ``low``'s last printed digit below it to half a unit of ``high``'s
    above (``high`` None: a point). "45" stands for 44.5 to 45.5, "1.10" for 1.095 to 1.105,
    "23.7"-"30.7" for 23.65 to 30.75: a printed figure is no more precise than its digits.
    The figures are strings so that their precision is the paper's ("1.10" is not "1.1")."""

    def half(s: str) -> float:
        digits = len(s.partition(".")[2])
        return 0.5 * 10.0**-digits

    hi = low if high is None else high
    return float(low) - half(low), float(hi) + half(hi)


def reduction_band(low: str, high: str | None = None) -> tuple[float, float]:
    """A published *reduction* of ``low`` (to ``high``) percent as a band of the ratio
    baseline / ours, ``1 / (1 - p / 100)``, at the figure's printed precision
    (:func:`published`): "45" % is 1.802 to 1.835."""
    lo, hi = published(low, high)
    return 1.0 / (1.0 - lo / 100.0), 1.0 / (1.0 - hi / 100.0)


def increase_band(low: str, high: str | None = None) -> tuple[float, float]:
    """A published *increase* of ``low`` (to ``high``) percent as a band of the ratio
    ours / baseline, ``1 + p / 100``, at the figure's printed precision (:func:`published`)."""
    lo, hi = published(low, high)
    return 1.0 + lo / 100.0, 1.0 + hi / 100.0


def _bands(checks: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], bool | None]:
    """The record's ``paper_band`` (per check with a published figure: its name, the band and
    our value with its interval) and ``in_band`` (every such check's interval overlaps its
    band; ``None`` when the paper gives no figure for any check)."""
    rows = [
        {"check": c["name"], **c["paper_band"], "value": c["value"], "ci": c["ci"],
         "in_band": c["in_band"]}
        for c in checks
        if "paper_band" in c
    ]  # fmt: skip
    return rows, (all(r["in_band"] for r in rows) if rows else None)


def _sim_value(checks: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for c in checks:
        lo, hi = c["ci"]
        ci = "" if c.get("n") is None or lo == hi else f" [{lo:.3g}, {hi:.3g}]"
        parts.append(f"{c['name']} = {c['value']:.3g}{ci}")
    return "; ".join(parts)


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
    """The experiment's record; ``sim_value`` lists every check's mean and 95 % interval;
    ``verdict`` is ``"holds"`` when every check's interval is on the paper's side, else
    ``"does not hold"`` (:func:`run_experiment` adds ``"depends on PARAM"``); ``holds`` is
    true for ``"holds"`` only. ``paper_band`` and ``in_band``: :func:`_bands`.
    ``model_version`` and ``workload_version``: the sharing physics and the workload model the
    numbers come from (records of different versions are not comparable). The detail's per-seed values move to ``per_seed`` (``{key:
    [value per seed in seeds order]}``). ``kind`` is one of :data:`RECORD_KINDS`."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"kind={kind!r}: must be one of {RECORD_KINDS}")
    plain: dict[str, float] = {}
    seeded: dict[str, dict[int, float]] = {}
    for k, v in detail.items():
        base, sep, tail = k.rpartition(SEED_SEP)
        if sep and tail.isdigit():
            seeded.setdefault(base, {})[int(tail)] = v
        else:
            plain[k] = v
    ok = all(c["ok"] for c in checks)
    bands, in_band = _bands(checks)
    return {
        "id": exp_id,
        "kind": kind,
        "paper": paper,
        "claim": claim,
        "paper_value": paper_value,
        "sim_value": _sim_value(checks),
        "holds": ok,
        "verdict": VERDICTS[0] if ok else VERDICTS[2],
        "paper_band": bands,
        "in_band": in_band,
        "ci_method": CI_METHOD,
        "checks": list(checks),
        "detail": plain,
        "per_seed": {k: [s.get(i, math.nan) for i in seeds] for k, s in seeded.items()},
        "seeds": list(seeds),
        "settings": dict(_RUN.values),
        # the physics and workload model the numbers come from (as the runner's records)
        "model_version": MODEL_VERSION,
        "workload_version": WORKLOAD_VERSION,
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def _end(rec: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("name", "value", "ci", "ok", "op", "bound")
    return {
        "verdict": rec["verdict"],
        "sim_value": rec["sim_value"],
        "checks": [{k: c[k] for k in keep} for c in rec["checks"]],
        "wall_s": rec["wall_s"],
    }


def bracket_verdict(central: bool, low: bool, high: bool, param: str = "the bracket") -> str:
    """The verdict of a bracketed claim from whether it holds at each value: at all three,
    ``"holds"``; at the central choice only (or with one end), ``"depends on PARAM"`` (which
    does not count as holding); not at the central choice, ``"does not hold"``."""
    if not central:
        return VERDICTS[2]
    return VERDICTS[0] if low and high else depends_on(param)


def run_experiment(
    exp_id: str,
    fn: Callable[[Sequence[int], bool], dict[str, Any]],
    seeds: Sequence[int],
    quick: bool = False,
    workers: int = 1,
    values: Mapping[str, float] | None = None,
    brackets: bool = True,
    backend: str = "local",
    address: str | None = None,
) -> dict[str, Any]:
    """Run experiment ``exp_id`` (``fn(seeds, quick)``) at the parameter ``values`` with
    ``workers`` processes (or as Ray tasks: ``backend="ray"``, ``address`` a cluster). With
    a bracket declared for it (:data:`BRACKETS`; ``brackets`` true and its parameter not set
    in ``values``) it runs at the central value, then at both ends: the record is the central
    run's, with ``bracket`` (the parameter, its source and each end's verdict and checks) and
    the verdict of :func:`bracket_verdict`. ``wall_s`` is the whole time. With ``brackets``
    false the bracketed parameter, unless set, runs at its central value only."""
    t0 = time.perf_counter()
    values = dict(values or {})
    b = BRACKETS.get(exp_id)
    if b is None or not brackets or b.param in values:
        if b is not None:  # a bracketed parameter not set runs at its documented choice
            values.setdefault(b.param, b.central)
        with run_settings(values, workers, backend, address):
            rec = fn(seeds, quick)
        rec["wall_s"] = round(time.perf_counter() - t0, 2)
        return rec
    runs = {}
    for end in ("central", "low", "high"):
        with run_settings({**values, b.param: getattr(b, end)}, workers, backend, address):
            runs[end] = fn(seeds, quick)
    rec = runs["central"]
    rec["bracket"] = {
        "param": b.param,
        "source": b.source,
        "low": b.low,
        "central": b.central,
        "high": b.high,
        "ends": {end: _end(runs[end]) for end in ("low", "high")},
    }
    central, low, high = (runs[e]["verdict"] == VERDICTS[0] for e in ("central", "low", "high"))
    rec["verdict"] = bracket_verdict(central, low, high, param=b.param)
    rec["holds"] = rec["verdict"] == VERDICTS[0]
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    return rec
