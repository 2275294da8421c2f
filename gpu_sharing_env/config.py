"""Configuration as data: YAML → validated, frozen dataclasses.

Every dataclass here (and any frozen dataclass a field refers to, such as the synthetic workload
generator's config) is loaded by :func:`from_dict`, which rejects unknown keys and wrong types,
and checks each field's rule (``field(metadata={"rule": (predicate, "text")})``). Errors are one
line naming the file, the key path and the rule, e.g.
``configs/scenarios/x.yaml: sharing.mps_sm_pcts[2]: must be in 1..100 (got 120)``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from gpu_sharing_env.configs import ROOT as CONFIG_ROOT

T = TypeVar("T")

#: The shipped scenarios (``configs/scenarios/``; package data: they install with the wheel).
SCENARIO_DIR = CONFIG_ROOT / "scenarios"


class ConfigError(ValueError):
    """A configuration file breaks a rule. The message is one line: file, key, rule."""


def rule(pred: Callable[[Any], bool], text: str) -> dict[str, Any]:
    """Field metadata attaching a validation rule."""
    return {"rule": (pred, text)}


def positive() -> dict[str, Any]:
    return rule(lambda v: v > 0, "must be > 0")


def non_negative() -> dict[str, Any]:
    return rule(lambda v: v >= 0, "must be >= 0")


def unit_interval() -> dict[str, Any]:
    return rule(lambda v: 0 <= v <= 1, "must be in [0, 1]")


# --------------------------------------------------------------------------------------------
# Scenario schema
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGroupConfig:
    """A group of identical nodes."""

    gpu_type: str
    """GPU type name (canonical or alias, see ``hardware.GPU_ALIASES``)."""
    count: int = field(default=1, metadata=positive())
    """Number of nodes in the group."""
    gpus_per_node: int = field(default=8, metadata=rule(lambda v: 1 <= v <= 16, "in 1..16"))
    """GPUs per node (PAI machines have 2 or 8)."""
    vcpus: float = field(default=96.0, metadata=positive())
    """Schedulable vCPUs per node."""
    host_mem_gb: float = field(default=512.0, metadata=positive())
    """Host memory per node."""
    interconnect: Literal["nvlink", "pcie"] = "pcie"
    """GPU interconnect inside the node."""


@dataclass(frozen=True)
class FleetFileConfig:
    """A fleet read from a real inventory file."""

    format: Literal["openb", "pai"]
    """Node list format: Alibaba openb v2023 node list or PAI v2020 machine spec."""
    path: str
    """Path of the file; relative paths are relative to the scenario file."""
    max_nodes: int = field(default=0, metadata=non_negative())
    """Keep only the first N nodes (0 = all)."""


@dataclass(frozen=True)
class ClusterConfig:
    """The fleet: node groups, or a node list file."""

    nodes: tuple[NodeGroupConfig, ...] = ()
    """Node groups (ignored when ``fleet`` is given)."""
    fleet: FleetFileConfig | None = None
    """A real inventory instead of ``nodes``."""


@dataclass(frozen=True)
class OfflineWorkloadConfig:
    """Offline training jobs: a synthetic generator or a trace."""

    source: Literal["synthetic", "trace"] = "synthetic"
    """Where jobs come from."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Synthetic generator parameters (``workload.synthetic.SyntheticWorkloadConfig`` fields)."""
    trace_format: str = ""
    """Trace format name (see ``workload.loaders.LOADERS``) when ``source`` is trace."""
    trace_path: str = ""
    """Trace path when ``source`` is trace; relative to the scenario file."""
    max_jobs: int = field(default=0, metadata=non_negative())
    """Keep only the first N jobs (0 = all)."""
    arrival_window_h: float = field(default=0.0, metadata=non_negative())
    """Synthetic jobs arrive during the first this-many hours (0 = the whole horizon). A horizon
    longer than the arrival window lets the heavy tail finish, so ``jct_mean_s`` covers every
    job rather than only the short ones."""
    estimate_sigma: float = field(default=0.5, metadata=non_negative())
    """``noise``: lognormal sigma of the duration-estimate error (0 = perfect estimates).
    ``cart``: 0 makes the predictor exact (an oracle); any other value leaves the simulator's
    estimates to the predictor and is read only by the planner's prior belief (its error model
    for the jobs it samples)."""
    estimate_groups: bool = True
    """Estimate a recurring job from its group's earlier members (PAI's predictor with the group
    tag, NSDI'22 Sec. 5.2); false: without the group tag (``cart``: the tree sees user and
    request only; ``noise``: every job from its own noisy run time)."""
    estimator: Literal["cart", "noise"] = "cart"
    """``cart``: PAI's CART predictor fitted online on finished runs (``workload.predictor``);
    ``estimate_sigma`` 0 makes it exact (an oracle). ``noise``: workload v1's error model
    (``workload.estimates``: the truth times lognormal noise, read before the episode)."""
    predictor: Mapping[str, Any] = field(default_factory=dict)
    """``workload.predictor.PredictorConfig`` fields for ``estimator: cart``."""


@dataclass(frozen=True)
class OnlineWorkloadConfig:
    """Online inference services."""

    num_services: int = field(default=0, metadata=non_negative())
    """Number of services (0 = none)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Service generator parameters (``workload.services.ServiceWorkloadConfig`` fields)."""


@dataclass(frozen=True)
class WorkloadConfig:
    offline: OfflineWorkloadConfig = OfflineWorkloadConfig()
    online: OnlineWorkloadConfig = OnlineWorkloadConfig()


def _pcts_ok(v: tuple[int, ...]) -> bool:
    return len(v) > 0 and all(1 <= p <= 100 for p in v)


@dataclass(frozen=True)
class SharingConfig:
    """Which sharing modes the scheduler may use and what they cost."""

    modes: tuple[Literal["exclusive", "time_sharing", "mps", "mig"], ...] = (
        "exclusive",
        "time_sharing",
        "mps",
        "mig",
    )
    """Allowed sharing modes."""
    mps_sm_pcts: tuple[int, ...] = field(
        default=(25, 50, 75, 100), metadata=rule(_pcts_ok, "non-empty, each in 1..100")
    )
    """SM percentages (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) offered as placement options."""
    mig_compute_slices: tuple[int, ...] = field(
        default=(1, 2, 3, 4, 7),
        metadata=rule(lambda v: all(c in (1, 2, 3, 4, 7) for c in v), "each in {1,2,3,4,7}"),
    )
    """MIG instance sizes (compute slices of 7) offered as placement options."""
    max_residents: int = field(default=4, metadata=rule(lambda v: 1 <= v <= 8, "in 1..8"))
    """Most jobs one GPU (or its MIG instances together) may host."""
    mps_start_s: float = field(default=2.0, metadata=non_negative())
    """Starting an MPS control daemon on an empty GPU (assumption: seconds, as measured by users
    of nvidia-cuda-mps-control; small next to job durations)."""
    mig_reconfig_s: float = field(default=5.0, metadata=non_negative())
    """Creating a GPU instance on free slices (MISO, SoCC'22, reports seconds-scale
    reconfiguration)."""
    mig_mode_switch_s: float = field(default=60.0, metadata=non_negative())
    """Enabling/disabling MIG mode, which needs a GPU reset (assumption: about a minute)."""
    migration_s: float = field(default=30.0, metadata=non_negative())
    """Checkpoint-restore pause of a migrated job (Gandiva, OSDI'18, reports migrations of
    seconds to about a minute; assumption: 30 s)."""
    online_priority: bool = True
    """Time-sharing gives online services priority (AntMan / PB-time-sharing)."""
    gpulets: int = field(default=0, metadata=rule(lambda v: 0 <= v <= 7, "in 0..7"))
    """GPULet's gpulets (Choi et al., ATC'22), opt-in. 0 (default): every MPS client is its own
    SM partition. N >= 1 (with ``mps`` among the modes): a GPU in MPS mode holds at most N SM
    partitions (gpulets), and the placement options ``gpulet1`` .. ``gpuletN`` place a job in
    the k-th partition of a GPU, where it shares that partition's SM share in time with the
    jobs already there (``interference.AnalyticSpeedModel``; ``docs/fidelity.md``, GPULet)."""


@dataclass(frozen=True)
class FaultConfig:
    """Failures, their propagation and recovery."""

    rate_per_gpu_h: Mapping[str, float] = field(
        default_factory=lambda: {"user_signal": 0.0, "app_error": 0.0, "xid": 0.0},
        metadata=rule(
            lambda m: (
                set(m) <= {"user_signal", "app_error", "xid"} and all(v >= 0 for v in m.values())
            ),
            "keys among user_signal, app_error, xid; values >= 0",
        ),
    )
    """Poisson failure rate per GPU-hour of running, by cause."""
    mixed_handling: bool = False
    """MuxFlow's mixed error handling: graceful exit on SIGINT/SIGTERM, so user signals do not
    take down the MPS server (MuxFlow found them ~99% of propagated errors)."""
    restart_delay_s: float = field(default=30.0, metadata=non_negative())
    """Online service outage after a failure (restart in place)."""
    max_attempts: int = field(default=3, metadata=positive())
    """An offline job that fails this many times is given up (counted in jobs_failed)."""
    oom_delay_s: float = field(default=60.0, metadata=non_negative())
    """Time after placement at which an over-committed job reaches peak memory and OOMs."""


@dataclass(frozen=True)
class MechanismConfig:
    """Cluster mechanisms a scheduler may deploy (a policy may switch them on)."""

    protection: bool = False
    """MuxFlow's SysMonitor: a state machine on each service GPU's device metrics (utilisation,
    SM activity, SM clock, memory) that closes it to new offline work, throttles, then evicts
    offline work (``sim.online``); offline work goes only to healthy GPUs."""
    dynamic_sm: bool = False
    """MuxFlow's dynamic SM allocation: an offline MPS client beside an online service gets
    the SM share the online service leaves at its current load."""
    mixed_error_handling: bool = False
    """MuxFlow's mixed error handling (same effect as ``faults.mixed_handling``; a scheduler
    that deploys it switches it on here)."""
    launch_quota: bool = False
    """GPUPool's per-launch thread-block quota (its hardware co-design, Tan et al., PACT'22):
    the SM share of an MPS client is a kernel-launch parameter set for the pair it runs in, so
    a client alone on its GPU (its partner finished) launches with the solo setting and runs at
    full speed, and a partner joining restores the pair's split. Without it an MPS client keeps
    its SM limit for its whole run, as ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` does."""
    kernel_priority: bool = False
    """Kernel-level priority under MPS (MuxFlow's xCUDA; Tally): an offline client beside an
    online service of higher priority (``sharing.online_priority``) launches its kernels into
    the service's idle time, so the service keeps near-solo latency (fitted on Tally's A100
    pairs, ``interference.KP_*``). Without it MPS ignores priorities."""
    kernel_priority_level: float = field(
        default=1.0, metadata=rule(lambda v: 0.0 <= v <= 1.0, "in [0, 1]")
    )
    """Protection level of ``kernel_priority`` (xCUDA's is unpublished): 0 = Tally without
    kernel transformation (whole kernels held back), 1 = Tally's default (sliced, preemptible
    kernels; the documented central choice, ``KP_LEVEL_CENTRAL``); linear in between
    (``interference.kp_coefficients``, ``KP_LEVEL_CENTRAL``). Read when the simulator is built."""


@dataclass(frozen=True)
class EnvConfig:
    """Gymnasium adapter sizing."""

    queue_window: int = field(default=8, metadata=rule(lambda v: 1 <= v <= 64, "in 1..64"))
    """Pending jobs visible (and placeable) per decision."""
    max_gpus: int = field(default=0, metadata=non_negative())
    """Padded GPU count of the observation (0 = the cluster's own size)."""
    max_candidates: int = field(
        default=0, metadata=rule(lambda v: v == 0 or v >= 2, "must be 0 or >= 2")
    )
    """``GpuSharing-v3``'s default ``max_candidates`` (rows of its candidate table; 0: 4,096,
    v2's default). More legal moves than this raise ``TooManyCandidates``."""


@dataclass(frozen=True)
class ScenarioConfig:
    """A complete experiment: cluster, workload, sharing, faults, objective."""

    name: str
    """Scenario name."""
    cluster: ClusterConfig
    """The fleet."""
    workload: WorkloadConfig = WorkloadConfig()
    """Offline jobs and online services."""
    horizon_h: float = field(default=24.0, metadata=positive())
    """Simulated time limit (hours); episodes end earlier when all offline work is done."""
    tick_s: float = field(default=300.0, metadata=positive())
    """Online load update / SLO accounting interval (load is smooth over minutes: MuxFlow)."""
    slo_target: float = field(default=0.95, metadata=unit_interval())
    """Leaderboard: policies must reach this slo_attainment to rank by JCT."""
    sharing: SharingConfig = SharingConfig()
    faults: FaultConfig = FaultConfig()
    mechanisms: MechanismConfig = MechanismConfig()
    env: EnvConfig = EnvConfig()
    description: str = ""
    """Free text."""
    source_path: str = ""
    """Set by the loader: where this scenario came from."""


# --------------------------------------------------------------------------------------------
# Generic loading
# --------------------------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, where: str, src: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, where, src)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{src}: {where}: bad value {value!r}")
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{src}: {where}: must be one of {allowed} (got {value!r})")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{src}: {where}: must be a list (got {value!r})")
        item_t = args[0] if args else Any
        return tuple(_convert(item_t, v, f"{where}[{i}]", src) for i, v in enumerate(value))
    if origin in (Mapping, dict, typing.Mapping) or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{src}: {where}: must be a mapping (got {value!r})")
        vt = args[1] if len(args) == 2 else Any
        return {str(k): _convert(vt, v, f"{where}.{k}", src) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_dict(tp, value, src=src, where=where)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{src}: {where}: must be true or false (got {value!r})")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{src}: {where}: must be an integer (got {value!r})")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{src}: {where}: must be a number (got {value!r})")
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{src}: {where}: must be finite (got {value!r})")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{src}: {where}: must be a string (got {value!r})")
        return value
    raise ConfigError(f"{src}: {where}: unsupported type {_type_name(tp)}")


def from_dict(cls: type[T], data: Any, *, src: str = "<config>", where: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``, validating keys, types and rules."""
    prefix = f"{where}." if where else ""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{src}: {where or '<top>'}: must be a mapping (got {data!r})")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{src}: {prefix}{unknown[0]}: unknown key (allowed: {', '.join(sorted(fields))})"
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key = f"{prefix}{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{src}: {key}: required key is missing")
            continue
        value = _convert(hints[name], data[name], key, src)
        check = f.metadata.get("rule")
        if check is not None:
            pred, text = check
            if not pred(value):
                raise ConfigError(f"{src}: {key}: {text} (got {data[name]!r})")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{src}: {where or '<top>'}: {e}") from None


def all_scenario_names() -> list[str]:
    """Every shipped scenario as its name relative to ``SCENARIO_DIR`` without ``.yaml``
    (``default``, ``heldout/heldout_load``, ``fidelity/muxflow``, ...)."""
    return sorted(
        q.relative_to(SCENARIO_DIR).with_suffix("").as_posix()
        for q in SCENARIO_DIR.rglob("*.y*ml")
        if q.suffix in (".yaml", ".yml")
    )


def resolve_scenario_path(name_or_path: str | Path) -> Path:
    """A shipped scenario's name (``default``, ``heldout/heldout_load``; a nested scenario's
    file name alone when it is unique, ``heldout_load``) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise ConfigError(f"{p}: scenario file not found")
        return p
    name = str(name_or_path)
    for cand in (SCENARIO_DIR / f"{name}.yaml", SCENARIO_DIR / f"{name}.yml"):
        if cand.is_file() and SCENARIO_DIR in cand.resolve().parents:
            return cand
    names = all_scenario_names()
    by_stem = [n for n in names if n.rsplit("/", 1)[-1] == name]
    if len(by_stem) == 1:
        return resolve_scenario_path(by_stem[0])
    raise ConfigError(f"scenario {name!r}: not found (known: {', '.join(names)}; or a .yaml path)")


def load_scenario(name_or_path: str | Path) -> ScenarioConfig:
    """Load and validate a scenario by name or path."""
    path = resolve_scenario_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ConfigError(f"{path}: {line}invalid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: <top>: must be a mapping")
    data.setdefault("name", path.stem)
    data["source_path"] = str(path)
    return from_dict(ScenarioConfig, data, src=str(path))


def scenario_names() -> list[str]:
    """Names of the scenarios shipped in ``configs/scenarios/`` (not the held-out set)."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
