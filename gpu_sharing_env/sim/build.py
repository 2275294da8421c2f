"""From a scenario (config data) to a ready :class:`~gpu_sharing_env.sim.engine.Simulator`."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from gpu_sharing_env.config import ConfigError, ScenarioConfig, from_dict
from gpu_sharing_env.physics.hardware import get_gpu_type
from gpu_sharing_env.physics.interference import SpeedModel
from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Simulator, WorkloadFn
from gpu_sharing_env.workload.draws import DRAWS
from gpu_sharing_env.workload.estimates import attach_estimates
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.workload.loaders import LOADERS, load_openb_nodes, load_pai_machines
from gpu_sharing_env.workload.predictor import INPUTS, OnlinePredictor, PredictorConfig, RunLog
from gpu_sharing_env.workload.services import ServiceWorkloadConfig, generate_services
from gpu_sharing_env.workload.synthetic import (
    SHARED,
    SyntheticWorkload,
    SyntheticWorkloadConfig,
    fleet_capacity,
    generate_workload,
)


def _rel(cfg: ScenarioConfig, path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute() and cfg.source_path:
        cand = Path(cfg.source_path).parent / p
        if cand.exists() or not p.exists():
            p = cand
    return p


def build_nodes(cfg: ScenarioConfig) -> list[NodeSpec]:
    """The scenario's fleet."""
    src = cfg.source_path or cfg.name
    fleet = cfg.cluster.fleet
    if fleet is not None:
        path = _rel(cfg, fleet.path)
        loader = load_openb_nodes if fleet.format == "openb" else load_pai_machines
        nodes = list(loader(path))
        return nodes[: fleet.max_nodes] if fleet.max_nodes else nodes
    if not cfg.cluster.nodes:
        raise ConfigError(f"{src}: cluster: give node groups under 'nodes' or a 'fleet' file")
    out: list[NodeSpec] = []
    for gi, grp in enumerate(cfg.cluster.nodes):
        try:
            gtype = get_gpu_type(grp.gpu_type).name
        except ValueError as e:
            raise ConfigError(f"{src}: cluster.nodes[{gi}].gpu_type: {e}") from None
        for i in range(grp.count):
            out.append(
                NodeSpec(
                    name=f"{gtype}-g{gi}-n{i}",
                    gpu_type=gtype,
                    num_gpus=grp.gpus_per_node,
                    vcpus=grp.vcpus,
                    host_mem_gb=grp.host_mem_gb,
                    interconnect=Interconnect(grp.interconnect),
                )
            )
    return out


class ScenarioJobs(list[JobSpec]):
    """A scenario's jobs for one episode, with the duration predictor that goes with them
    (``None``: the estimates are attached to the specs already, ``estimator: noise``)."""

    predictor: OnlinePredictor | None = None
    #: The generator's draw (history, patterns) of a synthetic workload; None for a trace.
    drawn: SyntheticWorkload | None = None
    #: The predictor ``predictor`` was copied from as drawn, where one is kept unchanged (a
    #: shared past's warm start, ``ClusterPast.warm``): what :meth:`kept` keeps.
    origin: OnlinePredictor | None = None

    def fresh(self) -> ScenarioJobs:
        """A copy with a list and a predictor of its own (what a simulator changes); the specs
        and the generator's draw are shared (never changed)."""
        out = ScenarioJobs(self)
        out.predictor = copy.deepcopy(self.predictor)  # (OnlinePredictor.__deepcopy__)
        out.drawn = self.drawn
        out.origin = self.origin
        return out

    def kept(self) -> ScenarioJobs:
        """What the memo of draws keeps (``workload/draws.py``), as drawn: a copy whose
        :meth:`fresh` equals this one's ``fresh()`` now, made before a simulator changes this
        one. Where the predictor was copied from one kept unchanged (``origin``), that one
        (no copy made: ``fresh()`` copies it); else a copy of it."""
        if self.origin is None:
            return self.fresh()
        out = ScenarioJobs(self)
        out.predictor = self.origin
        out.drawn = self.drawn
        out.origin = self.origin
        return out


@dataclass
class ScenarioWorkload:
    """The jobs of a scenario as a function of the episode's generator (offline + online).

    A plain callable object (not a closure) so simulators and envs pickle. With ``estimator:
    cart`` (the default) the jobs come with a fresh :class:`OnlinePredictor`, warm-started with
    the generator's pre-episode history (a trace: none), which the simulator feeds finished runs
    and asks for estimates; the specs' own ``est_work_s`` is then a placeholder until arrival.
    With a shared past (``past: shared``) the warm start is made once per past and copied.
    """

    cfg: ScenarioConfig
    syn_cfg: SyntheticWorkloadConfig
    svc_cfg: ServiceWorkloadConfig
    trace_jobs: list[JobSpec] | None = None
    pred_cfg: PredictorConfig = field(default_factory=PredictorConfig)

    def __call__(self, rng: np.random.Generator) -> ScenarioJobs:
        # (an equal workload's draw from the same state, when one was made lately: the paired
        # reward's reference starts its env's episode again, workload/draws.py)
        return DRAWS.draw(self, rng, True, lambda: self._draw(rng, True))

    def without_predictor(self, rng: np.random.Generator) -> ScenarioJobs:
        """The same jobs as ``self(rng)`` (the same draws from ``rng``), with no predictor
        built (``predictor`` None: no warm start), for an episode without estimates
        (``Simulator.reset(estimates=False)``)."""
        return DRAWS.draw(self, rng, False, lambda: self._draw(rng, False))

    def _draw(self, rng: np.random.Generator, predict: bool) -> ScenarioJobs:
        off = self.cfg.workload.offline
        on = self.cfg.workload.online
        horizon_s = self.cfg.horizon_h * 3600.0
        history: RunLog | None = None
        drawn: SyntheticWorkload | None = None
        if self.trace_jobs is None:
            window_s = off.arrival_window_h * 3600.0 if off.arrival_window_h else horizon_s
            drawn = generate_workload(self.syn_cfg, rng, min(window_s, horizon_s))
            jobs = drawn.jobs[: off.max_jobs] if off.max_jobs else drawn.jobs
            history = drawn.history
        else:
            jobs = list(self.trace_jobs)
        predictor: OnlinePredictor | None = None
        origin: OnlinePredictor | None = None
        if off.estimator == "noise":
            jobs = attach_estimates(
                jobs, rng, sigma=off.estimate_sigma, use_groups=off.estimate_groups
            )
        elif predict:
            exact = off.estimate_sigma == 0
            if drawn is not None and drawn.past is not None:  # (the past's warm start, a copy)
                origin = drawn.past.warm(self.pred_cfg, exact)
                predictor = copy.deepcopy(origin)  # (OnlinePredictor.__deepcopy__)
            else:
                predictor = OnlinePredictor(self.pred_cfg, history, exact=exact)
        first_id = max((j.job_id for j in jobs), default=-1) + 1
        if on.num_services:
            jobs += generate_services(self.svc_cfg, rng, horizon_s, first_id)
        out = ScenarioJobs(jobs)
        out.predictor = predictor
        out.drawn = drawn
        out.origin = origin
        return out


def build_workload(cfg: ScenarioConfig, nodes: Sequence[NodeSpec] | None = None) -> WorkloadFn:
    """A function of the episode's generator returning its jobs (offline + online).

    A synthetic workload with a shared past knows the fleet it runs on
    (``SyntheticWorkloadConfig.fleet``, from ``nodes``, default :func:`build_nodes`): its
    recurring groups are ones that fleet can run."""
    src = cfg.source_path or cfg.name
    off = cfg.workload.offline
    on = cfg.workload.online
    if "fleet" in off.params:
        raise ConfigError(
            f"{src}: workload.offline.params.fleet: set from the cluster, not a parameter"
        )
    syn_cfg = from_dict(
        SyntheticWorkloadConfig, dict(off.params), src=src, where="workload.offline.params"
    )
    if off.source == "synthetic" and syn_cfg.past == SHARED:
        gpus = nodes if nodes is not None else build_nodes(cfg)
        syn_cfg = replace(syn_cfg, fleet=fleet_capacity((n.gpu_type, n.num_gpus) for n in gpus))
    svc_params = {"num_services": on.num_services, **dict(on.params)}
    svc_cfg = from_dict(ServiceWorkloadConfig, svc_params, src=src, where="workload.online.params")
    trace_jobs: list[JobSpec] | None = None
    if off.source == "trace":
        if off.trace_format not in LOADERS:
            raise ConfigError(
                f"{src}: workload.offline.trace_format: one of {', '.join(sorted(LOADERS))}"
                f" (got {off.trace_format!r})"
            )
        trace_jobs = list(LOADERS[off.trace_format](_rel(cfg, off.trace_path)))
        if off.max_jobs:
            trace_jobs = trace_jobs[: off.max_jobs]
    pred = dict(off.predictor)
    if not off.estimate_groups:
        pred.setdefault("inputs", [i for i in INPUTS if i != "group"])
    pred_cfg = from_dict(PredictorConfig, pred, src=src, where="workload.offline.predictor")
    return ScenarioWorkload(cfg, syn_cfg, svc_cfg, trace_jobs, pred_cfg)


def make_simulator(cfg: ScenarioConfig, speed: SpeedModel | None = None) -> Simulator:
    """Build the simulator a scenario describes (call ``reset(seed)`` to start an episode)."""
    nodes = build_nodes(cfg)
    return Simulator(cfg, nodes, build_workload(cfg, nodes), speed=speed)
