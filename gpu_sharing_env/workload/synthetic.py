"""A synthetic offline-job generator whose default statistics follow Alibaba PAI.

Source of the targets: Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in
Large-Scale Heterogeneous GPU Clusters", NSDI'22 (the PAI v2020 trace study; our notes in
``../shared/seeds/001_*.txt``). Each default below names the figure it follows; where the paper
gives only a shape (e.g. a CDF plot) the number is an ASSUMPTION read off that shape and says so.
``docs/workloads.md`` tabulates targets against what the generator produces, and
``python scripts/trace.py stats - --format synthetic`` prints the comparison.

What is modelled: diurnal (and weekly) non-homogeneous Poisson arrivals; fractional GPU requests
(most tasks ask for < 1 GPU); a minority of gang jobs of 2/4/8 GPUs; lognormal run times spanning
four orders of magnitude; recurring groups (most recurring groups repeat >= 5 times, with similar
run times); a minority of high-GPU NLP tasks pinned to high-end GPUs; GPU-type constraints on a
few percent of tasks; a heavy-tailed user population; declared vs. true GPU memory with a small
over-use (OOM) probability.

Low real GPU usage (PAI: median use 0.042 GPU against a median request of 0.5 GPU) is not a job
field: a job's GPU activity is its model class's ``duty`` in ``gpu_sharing_env.physics.zoo``. The default
model mix weights low-duty classes (CTR, RL, GNN) as PAI reports them.

Time 0 is Monday 00:00 of the simulated week.
"""

from __future__ import annotations

import bisect
import copy
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

try:  # compiled (gpu_sharing_env._compile): the typed passes' directives; else no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.physics.hardware import get_gpu_type
from gpu_sharing_env.physics.nodes import GPU_TYPE_NAMES
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.workload.job import MODEL_CLASSES, JobKind, JobSpec, new_spec
from gpu_sharing_env.workload.predictor import (
    OnlinePredictor,
    PredictorConfig,
    RunLog,
    TagCodes,
    lexsort2,
)

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
#: GPU memory of the reference GPU (V100-16GB); a fractional request of ``f`` GPU declares ``f``
#: of it (PAI grants a fractional request that share of GPU memory, NSDI'22 Sec. 5.1).
REF_GPU_MEM_GB = 16.0

#: Default training model mix (ASSUMPTION anchored on PAI's case studies, NSDI'22 Sec. 6):
#: CTR models (DeepFM, DCN) > 6.7 % of tasks -> deepfm 0.10 and ncf 0.05; GNNs 2 % of instances
#: -> gnn 0.03; many RL tasks -> ppo 0.08; NLP with advanced language models 6.4 % -> bert,
#: transformer, gpt2 together 0.10 here plus the high-GPU tasks below; the rest split over
#: vision, speech and sequence models. Weights sum to 1.
DEFAULT_MODEL_MIX: Mapping[str, float] = {
    "resnet50": 0.16,
    "resnet18": 0.08,
    "vgg16": 0.05,
    "densenet201": 0.04,
    "inceptionv3": 0.05,
    "mobilenet": 0.05,
    "bert": 0.04,
    "transformer": 0.05,
    "gpt2": 0.01,
    "gnn": 0.03,
    "deepfm": 0.10,
    "ncf": 0.05,
    "ppo": 0.08,
    "yolov3": 0.06,
    "deepspeech2": 0.04,
    "cyclegan": 0.03,
    "lstm": 0.08,
}
#: Models of high-GPU tasks: PAI's high-GPU case study is NLP with advanced language models
#: (BERT, ALBERT, XLNet; NSDI'22 Sec. 6.1). The split is an ASSUMPTION.
DEFAULT_HIGH_GPU_MIX: Mapping[str, float] = {"bert": 0.5, "transformer": 0.25, "gpt2": 0.25}


#: ``SyntheticWorkloadConfig.past``'s values: the scenario's one past, or one per episode.
SHARED, PER_EPISODE = "shared", "per_episode"
PASTS = (SHARED, PER_EPISODE)

#: ``SyntheticWorkloadConfig.fleet``: per GPU type of the fleet, ``(name, memory GB, GPUs)``.
FleetCapacity = tuple[tuple[str, float, int], ...]


def fleet_capacity(gpus: Iterable[tuple[str, int]]) -> FleetCapacity:
    """The :attr:`SyntheticWorkloadConfig.fleet` of a fleet given as ``(GPU type, GPUs)`` per
    node: per type (canonical name, sorted) its memory and how many GPUs the fleet has."""
    count: dict[str, int] = {}
    for name, n in gpus:
        canon = get_gpu_type(name).name
        count[canon] = count.get(canon, 0) + int(n)
    return tuple((t, float(get_gpu_type(t).mem_gb), count[t]) for t in sorted(count))


@dataclass(frozen=True)
class SyntheticWorkloadConfig:
    """Parameters of :func:`generate_jobs`; defaults follow PAI (see the module docstring)."""

    arrivals_per_h: float = 10.0
    """Mean job arrivals per hour over a week. Scale with the cluster: PAI saw on the order of
    10^6 tasks in two months on > 6,500 GPUs, ~0.1 task/GPU/h; 10/h suits a ~16-GPU scenario
    whose jobs are small and short (an ASSUMPTION chosen for load, not a PAI figure)."""
    diurnal_amplitude: float = 0.5
    """Relative amplitude A of the daily cycle ``1 + A cos(2 pi (t - peak)/day)``; the
    peak/trough ratio is (1+A)/(1-A) = 3. PAI: submissions follow a clear diurnal pattern
    (NSDI'22 Fig. 4); 3x is an ASSUMPTION read off its hourly curve."""
    peak_hour: float = 10.0
    """Hour of day of the arrival peak. PAI: submissions concentrate in the morning (Fig. 4)."""
    weekend_factor: float = 0.8
    """Weekend / weekday arrival rate. PAI: weekdays see slightly more submissions than weekends
    (Fig. 4); 0.8 is an ASSUMPTION."""
    gpu_request_sizes: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    """GPU request sizes: fractions of one GPU (< 1) or whole-GPU gang sizes (integers).
    PAI's pai_task_table expresses requests as plan_gpu percent (25/50/100, ...)."""
    gpu_request_weights: tuple[float, ...] = (0.15, 0.45, 0.28, 0.05, 0.04, 0.03)
    """Probabilities of ``gpu_request_sizes``. PAI: median request 0.5 GPU (NSDI'22 Sec. 3.3,
    Fig. 6) -> 60 % fractional; gang jobs of 2/4/8 GPUs 12 % (ASSUMPTION between Philly's 7 %
    multi-GPU jobs and PAI's gang-heavy instance count)."""
    duration_median_s: float = 900.0
    """Median exclusive run time on the reference GPU. PAI instances run shorter than Philly's
    (NSDI'22 Fig. 5; Philly median 1,144 s in philly.csv); 15 min is an ASSUMPTION."""
    duration_sigma: float = 2.0
    """Lognormal sigma of run times: p99/p1 spans 10^(2*2.326*2/ln 10) = 10^4.0, PAI's "four
    orders of magnitude" (Fig. 5)."""
    duration_min_s: float = 10.0
    """Run times are clipped below here."""
    duration_max_s: float = 14 * DAY_S
    """Run times are clipped above here (PAI's longest instances run for days)."""
    recurring_share: float = 0.65
    """Share of arrivals that come from recurring groups (periodic or bursty); every recurring
    group runs >= ``group_size_min`` times in the log (pre-episode history included). PAI: 65 %
    of tasks recur at least 5 times (NSDI'22 Sec. 5.2, Fig. 10)."""
    periodic_share: float = 0.6
    """Share of recurring arrivals from periodic groups (the rest: bursty sweeps). PAI names
    periodic training and batch inference as the recurring kinds (Sec. 5.2) but gives no split:
    0.6 is an ASSUMPTION (sweep it)."""
    period_h_choices: tuple[float, ...] = (1.0, 6.0, 24.0)
    """Periods of periodic groups (hours): hourly and daily jobs, and one in between. PAI gives no
    period mix (ASSUMPTION)."""
    period_weights: tuple[float, ...] = (0.3, 0.2, 0.5)
    """Probabilities of ``period_h_choices`` per group, among the periods at least
    ``period_run_ratio`` times the group's run time (ASSUMPTION)."""
    period_run_ratio: float = 2.0
    """A periodic group's period is at least this many times its base run time (a job that runs
    every hour runs well under an hour); a run longer than half the longest period gets the
    longest period (ASSUMPTION)."""
    period_jitter: float = 0.05
    """Standard deviation of a periodic submission around its slot, as a fraction of the period
    (cron-like schedules plus upstream delays; ASSUMPTION). The gaps' CV is about sqrt(2) x this."""
    group_size_min: int = 5
    """Fewest members of one bursty sweep (PAI counts groups of >= 5 instances as recurring)."""
    group_size_mean: float = 12.0
    """Mean members of one bursty sweep (min + geometric tail; ASSUMPTION)."""
    burst_spacing_s: float = 60.0
    """Mean gap between the members of one sweep (exponential; "within minutes"; ASSUMPTION)."""
    burst_gap_h: float = 72.0
    """Mean time between two sweeps of one bursty group (Poisson, diurnal like other arrivals;
    ASSUMPTION)."""
    inference_share: float = 0.5
    """Share of periodic groups that are batch inference (fixed batches, stable run times,
    Fig. 11); the others are periodic training. ASSUMPTION: PAI says "many"."""
    inference_duration_sigma: float = 0.1
    """Lognormal sigma of run times inside a batch-inference group. PAI Fig. 11: stable run
    times; 0.1 is an ASSUMPTION."""
    group_duration_sigma: float = 0.3
    """Lognormal sigma of run times inside a training group (periodic training, sweeps): wider
    than batch inference (ASSUMPTION)."""
    history_h: float = 168.0
    """Pre-episode history the generator also draws (the same groups and processes, before time
    0): the runs that finished by time 0 warm-start the duration predictor
    (``workload.predictor``), as a production cluster's logs would. A week is an ASSUMPTION."""
    past: str = "shared"
    """Where the recurring groups and the history come from. ``shared`` (workload version 3):
    the cluster has one past, drawn once per scenario from ``past_seed`` (its groups'
    templates, periods and phases, and the runs of ``[-history_h, 0)``), the same for every
    episode; an episode's seed draws only its future (:func:`shared_past`). ``per_episode``
    (version 2): every episode draws its own groups and history."""
    past_seed: int = 0
    """Seed of the shared past (``past: shared``): another value, another cluster."""
    fleet: FleetCapacity | None = None
    """The fleet the cluster's past ran on (``past: shared``; workload version 4): per GPU
    type ``(name, memory GB, GPUs)`` (:func:`fleet_capacity`). Not a scenario parameter: the
    scenario loader (``sim/build.py``) sets it from ``cluster``. A recurring group whose
    request no empty fleet could hold is redrawn (:func:`_fit_groups`); None (a config built
    without a fleet): the groups as drawn (version 3)."""
    num_users: int = 100
    """Users (and so job owners)."""
    user_zipf_exponent: float = 1.6
    """Zipf exponent of user activity: with 100 users the top 5 % own 77 % of jobs, PAI's
    "~77 % of instances come from the top 5 % of users" (NSDI'22 Sec. 3.1)."""
    high_gpu_share: float = 0.04
    """Share of high-GPU tasks (whole GPUs, NLP models, pinned to ``high_end_types``, priority
    1). PAI: 6.4 % of tasks are NLP with advanced models, 73 % of which need > 16 GB GPUs
    (Sec. 6.1) -> 0.064 * 0.73 = 4.7 %, rounded down to 4 %."""
    high_gpu_models: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_HIGH_GPU_MIX))
    """Model mix of high-GPU tasks."""
    high_end_types: tuple[str, ...] = ("V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB")
    """GPU types high-GPU tasks may use (> 16 GB, V100/A100 class)."""
    type_constraint_share: float = 0.02
    """Share of other tasks pinned to one of ``type_constraint_sets``. PAI: only 6 % of tasks ask
    for a GPU type (Sec. 3.1), of which the high-GPU tasks are ~4 points."""
    type_constraint_sets: tuple[str, ...] = ("T4", "V100-16GB|V100-32GB", "A100-40GB|A100-80GB")
    """Allowed-type sets for constrained tasks, ``|``-separated (openb's gpu_spec style)."""
    model_mix: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_MODEL_MIX))
    """Model-class weights of ordinary tasks (see :data:`DEFAULT_MODEL_MIX`)."""
    cpu_per_gpu_median: float = 6.0
    """Median vCPUs per GPU instance for a model of typical CPU appetite. PAI: median request of
    6 vCPU per instance (Sec. 3.3); scaled per model by ``zoo`` cpu_cores / 4."""
    cpu_sigma: float = 0.5
    """Lognormal sigma of vCPU requests (PAI's requests are heavy-tailed, Fig. 6)."""
    mem_use_median: float = 0.6
    """Median true / declared GPU memory. PAI: memory use well below requests (Sec. 3.3: GPU
    memory P90 below 60 % on almost all machines, Sec. 4.1); 0.6 is an ASSUMPTION."""
    mem_use_sigma: float = 0.35
    """Lognormal sigma of true / declared GPU memory (capped at 0.95 outside over-use)."""
    mem_overuse_prob: float = 0.03
    """Probability that true memory exceeds the declaration by 5-50 % (OOM risk). PAI: ~3 % of
    instances use more GPU than requested (Sec. 3.3, Fig. 6d); taken for memory as well."""
    checkpoint_interval_s: float = 1800.0
    """Checkpoint interval of every job (ASSUMPTION: 30 min)."""

    def __post_init__(self) -> None:
        _check(self.arrivals_per_h >= 0, "arrivals_per_h", "must be >= 0")
        _check(0 <= self.diurnal_amplitude < 1, "diurnal_amplitude", "must be in [0, 1)")
        _check(0 <= self.peak_hour < 24, "peak_hour", "must be in [0, 24)")
        _check(self.weekend_factor > 0, "weekend_factor", "must be > 0")
        sizes, weights = self.gpu_request_sizes, self.gpu_request_weights
        _check(len(sizes) > 0, "gpu_request_sizes", "must not be empty")
        _check(len(sizes) == len(weights), "gpu_request_weights", "one weight per size")
        for s in sizes:
            ok = (0 < s < 1) or (s >= 1 and float(s).is_integer())
            _check(ok, "gpu_request_sizes", f"fractions in (0, 1) or whole numbers (got {s})")
        _check(all(w >= 0 for w in weights) and sum(weights) > 0, "gpu_request_weights", ">= 0")
        _check(self.duration_median_s > 0, "duration_median_s", "must be > 0")
        _check(self.duration_sigma >= 0, "duration_sigma", "must be >= 0")
        _check(0 < self.duration_min_s <= self.duration_max_s, "duration_min_s", "0 < min <= max")
        _check(0 <= self.recurring_share <= 1, "recurring_share", "must be in [0, 1]")
        _check(0 <= self.periodic_share <= 1, "periodic_share", "must be in [0, 1]")
        pc, pw = self.period_h_choices, self.period_weights
        _check(len(pc) > 0 and all(p > 0 for p in pc), "period_h_choices", "non-empty, each > 0")
        _check(len(pw) == len(pc), "period_weights", "one weight per period")
        _check(all(w >= 0 for w in pw) and sum(pw) > 0, "period_weights", ">= 0, not all 0")
        _check(self.period_run_ratio > 0, "period_run_ratio", "must be > 0")
        _check(0 <= self.period_jitter <= 0.5, "period_jitter", "must be in [0, 0.5]")
        _check(self.burst_spacing_s >= 0, "burst_spacing_s", "must be >= 0")
        _check(self.burst_gap_h > 0, "burst_gap_h", "must be > 0")
        _check(0 <= self.inference_share <= 1, "inference_share", "must be in [0, 1]")
        _check(self.inference_duration_sigma >= 0, "inference_duration_sigma", "must be >= 0")
        _check(self.history_h >= 0, "history_h", "must be >= 0")
        _check(self.past in PASTS, "past", f"one of {', '.join(PASTS)} (got {self.past!r})")
        seed_ok = isinstance(self.past_seed, int) and not isinstance(self.past_seed, bool)
        _check(seed_ok and self.past_seed >= 0, "past_seed", "an integer >= 0")
        if self.fleet is not None:
            _check(isinstance(self.fleet, tuple), "fleet", "a tuple of (GPU type, GB, GPUs)")
            for row in self.fleet:
                ok = (
                    isinstance(row, tuple)
                    and len(row) == 3
                    and row[0] in GPU_TYPE_NAMES
                    and isinstance(row[1], float)
                    and row[1] > 0
                    and isinstance(row[2], int)
                    and row[2] >= 0
                )
                _check(ok, "fleet", f"(known GPU type, GB > 0, GPUs >= 0) rows (got {row!r})")
        _check(self.group_size_min >= 2, "group_size_min", "must be >= 2")
        _check(self.group_size_mean >= self.group_size_min, "group_size_mean", ">= min")
        _check(self.group_duration_sigma >= 0, "group_duration_sigma", "must be >= 0")
        _check(self.num_users >= 1, "num_users", "must be >= 1")
        _check(self.user_zipf_exponent >= 0, "user_zipf_exponent", "must be >= 0")
        _check(0 <= self.high_gpu_share <= 1, "high_gpu_share", "must be in [0, 1]")
        _check(0 <= self.type_constraint_share <= 1, "type_constraint_share", "in [0, 1]")
        _mix_ok(self.model_mix, "model_mix")
        _mix_ok(self.high_gpu_models, "high_gpu_models")
        for name in self.high_end_types:
            _check(name in GPU_TYPE_NAMES, "high_end_types", f"unknown GPU type {name!r}")
        for spec in self.type_constraint_sets:
            for name in spec.split("|"):
                _check(name in GPU_TYPE_NAMES, "type_constraint_sets", f"unknown GPU {name!r}")
        _check(self.cpu_per_gpu_median > 0, "cpu_per_gpu_median", "must be > 0")
        _check(self.cpu_sigma >= 0, "cpu_sigma", "must be >= 0")
        _check(0 < self.mem_use_median <= 0.95, "mem_use_median", "must be in (0, 0.95]")
        _check(self.mem_use_sigma >= 0, "mem_use_sigma", "must be >= 0")
        _check(0 <= self.mem_overuse_prob <= 1, "mem_overuse_prob", "must be in [0, 1]")
        _check(self.checkpoint_interval_s > 0, "checkpoint_interval_s", "must be > 0")


def _check(ok: bool, name: str, rule: str) -> None:
    if not ok:
        raise ValueError(f"{name}: {rule}")


def _mix_ok(mix: Mapping[str, float], name: str) -> None:
    _check(len(mix) > 0, name, "must not be empty")
    for m, w in mix.items():
        _check(m in MODEL_CLASSES, name, f"unknown model class {m!r}")
        _check(w >= 0 and math.isfinite(w), name, f"weight of {m!r} must be >= 0")
    _check(sum(mix.values()) > 0, name, "weights must not all be 0")


def arrival_rate_per_s(cfg: SyntheticWorkloadConfig, t_s: np.ndarray) -> np.ndarray:
    """Arrival intensity at times ``t_s`` (time 0 = Monday 00:00); its weekly mean is
    ``cfg.arrivals_per_h / 3600``."""
    weekday_level = 7.0 / (5.0 + 2.0 * cfg.weekend_factor)  # weekly mean stays 1
    day = np.floor(np.asarray(t_s) / DAY_S) % 7
    level = np.where(day >= 5, weekday_level * cfg.weekend_factor, weekday_level)
    phase = 2.0 * np.pi * (np.asarray(t_s) - cfg.peak_hour * 3600.0) / DAY_S
    return cfg.arrivals_per_h / 3600.0 * level * (1.0 + cfg.diurnal_amplitude * np.cos(phase))


def _arrivals(
    cfg: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    t0_s: float,
    t1_s: float,
    scale: float = 1.0,
) -> np.ndarray:
    """Non-homogeneous Poisson arrivals in ``[t0_s, t1_s)`` at ``scale`` x
    :func:`arrival_rate_per_s`, by thinning (Lewis & Shedler 1979)."""
    peak = (
        scale
        * cfg.arrivals_per_h
        / 3600.0
        * (7.0 / (5.0 + 2.0 * cfg.weekend_factor))
        * max(1.0, cfg.weekend_factor)
        * (1.0 + cfg.diurnal_amplitude)
    )
    span = t1_s - t0_s
    dc = draw_capsule(rng)
    n = _poisson(rng, dc, peak * span) if peak > 0 and span > 0 else 0
    t = np.sort(_uniforms(rng, dc, t0_s, t1_s, n))
    u = _uniforms(rng, dc, 0.0, peak, n)
    if not COMPILED:
        return t[u < scale * arrival_rate_per_s(cfg, t)]
    # arrival_rate_per_s's arithmetic in two typed passes around numpy's own cos (~12 numpy
    # calls fewer; the same doubles: each element's operations in numpy's order)
    phase = np.empty(n)
    _phases(t, cfg.peak_hour * 3600.0, phase)
    week = 7.0 / (5.0 + 2.0 * cfg.weekend_factor)
    out = np.empty(n)
    m = _thin(
        t,
        u,
        np.cos(phase),
        week,
        week * cfg.weekend_factor,
        cfg.arrivals_per_h / 3600.0,
        cfg.diurnal_amplitude,
        scale,
        out,
    )
    return out[:m]


# (a typed pass over arrays it was handed or made, every index below their length by
# construction: compiled without bounds checks)
@cython.boundscheck(False)
@cython.wraparound(False)
def _phases(t: np.ndarray, shift: float, out: np.ndarray) -> None:
    """``out[i]`` = :func:`arrival_rate_per_s`'s phase of ``t[i]``: ``2.0 * np.pi * (t -
    shift) / DAY_S`` as numpy evaluates it (the scalar ``2.0 * pi`` first). Typed
    (``synthetic.pxd``)."""
    k = 2.0 * math.pi
    day = DAY_S
    for i in range(t.shape[0]):
        out[i] = k * (t[i] - shift) / day


@cython.boundscheck(False)
@cython.wraparound(False)
def _thin(
    t: np.ndarray,
    u: np.ndarray,
    c: np.ndarray,
    week: float,
    weekend: float,
    r0: float,
    amp: float,
    scale: float,
    out: np.ndarray,
) -> int:
    """The thinning's kept times ``t[u < scale * rate]`` written to ``out``, how many returned:
    ``rate`` is :func:`arrival_rate_per_s` at ``t`` with ``c`` the cos of its phases
    (:func:`_phases`), element by element its numpy operations (``floor(t / DAY_S) % 7 >= 5``
    picks ``weekend`` over ``week``; ``(r0 * level) * (1.0 + amp * c)``). Typed
    (``synthetic.pxd``: C's ``floor``, exact like numpy's; ``%`` of doubles with Python's
    sign rule, numpy's)."""
    day = DAY_S
    m = 0
    for i in range(t.shape[0]):
        q = t[i] / day
        if COMPILED:
            fl = c_floor(q)  # type: ignore[name-defined]  # noqa: F821
        else:
            fl = math.floor(q)
        d = fl % 7.0
        lvl = weekend if d >= 5 else week
        rate = r0 * lvl * (1.0 + amp * c[i])
        if u[i] < scale * rate:
            out[m] = t[i]
            m += 1
    return m


#: Submission patterns of a template (:attr:`SyntheticWorkload.pattern`).
ONE_OFF, PERIODIC, BURSTY = "one-off", "periodic", "bursty"


@dataclass(frozen=True)
class SyntheticWorkload:
    """What :func:`generate_workload` draws: the episode's jobs and the log before it.

    Attributes:
        jobs: Jobs submitted in ``[0, horizon)``, ``job_id`` 0..n-1 in submission order.
        history: Runs submitted in ``[-history_h, 0)`` (:class:`RunLog`); they ran on arrival
            at reference speed, so a run finished at ``submit_s + work_s`` (only those finished
            by time 0 are a predictor's warm start).
        pattern: Group tag -> its submission pattern (``"periodic"`` or ``"bursty"``).
        period_s: Group tag -> its true period (periodic groups only; for statistics, never for
            schedulers).
        batch_inference: Group tags of batch-inference groups (run-time sigma
            ``inference_duration_sigma``; the other groups: ``group_duration_sigma``).
        past: ``past: shared``: the scenario's :class:`ClusterPast` (its history is
            ``history``); ``per_episode``: None.
    """

    jobs: list[JobSpec]
    history: RunLog
    pattern: dict[str, str]
    period_s: dict[str, float]
    batch_inference: frozenset[str] = frozenset()
    past: ClusterPast | None = None


#: Whether this module runs compiled (a Cython extension) rather than from its source.
COMPILED: bool = not __file__.endswith(".py")


def _capsule(rng: np.random.Generator) -> object:
    """What :func:`_random` draws through: compiled, ``rng``'s bit generator's capsule (a
    numpy ``Generator`` exactly: a subclass may override ``random``); else None."""
    if COMPILED and type(rng) is np.random.Generator:
        return rng.bit_generator.capsule
    return None


def _random(rng: np.random.Generator, cap: object) -> float:
    """``rng.random()``. Compiled, with ``cap`` from :func:`_capsule`, its bit generator's
    ``next_double`` called directly (``_bitgen.pxd``: the double ``Generator.random`` returns,
    the same stream, without the method call's ~3.7 k instructions); else the method."""
    if cap is not None:
        return next_double(cap)  # type: ignore[name-defined,no-any-return]  # noqa: F821
    return rng.random()


#: Whether numpy's C distributions draw here (compiled, and they drew what the ``Generator``
#: methods draw at import: :func:`_init_c_draws`).
_C_DRAWS: bool = False


def draw_capsule(rng: np.random.Generator) -> object:
    """What the draws below draw through: compiled, with numpy's C distributions checked at
    import (:func:`_init_c_draws`), ``rng``'s bit generator's capsule (a numpy ``Generator``
    exactly: a subclass may override its methods); else None (the methods)."""
    if _C_DRAWS and type(rng) is np.random.Generator:
        return rng.bit_generator.capsule
    return None


# Each draw below is a ``Generator`` method's call, or (``dc`` from :func:`draw_capsule`) the
# C function that method runs (``_npyrandom.pxd``), element by element in the method's order
# on the same bit generator: the same values, the same stream after, without the method's
# argument handling (~3-5 k instructions a call). Arguments the method would refuse go to it.


def _std_normal(rng: np.random.Generator, dc: object) -> float:
    """``rng.standard_normal()``."""
    if dc is None:
        return float(rng.standard_normal())
    return normal1(dc)  # type: ignore[name-defined,no-any-return]  # noqa: F821


def _std_normals(rng: np.random.Generator, dc: object, n: int) -> np.ndarray:
    """``rng.standard_normal(n)``."""
    if dc is None:
        return rng.standard_normal(n)
    out = np.empty(n)
    normal_fill(dc, out)  # type: ignore[name-defined]  # noqa: F821
    return out


def _uniforms(rng: np.random.Generator, dc: object, lo: float, hi: float, n: int) -> np.ndarray:
    """``rng.uniform(lo, hi, size=n)`` (a range ``hi - lo`` not in ``[+0.0, inf)`` goes to
    the method: its error)."""
    r = hi - lo
    if dc is None or not 0.0 <= r < math.inf or math.copysign(1.0, r) < 0.0:
        return rng.uniform(lo, hi, size=n)
    out = np.empty(n)
    cont_fill(dc, True, lo, r, out)  # type: ignore[name-defined]  # noqa: F821
    return out


def _exponentials(rng: np.random.Generator, dc: object, scale: float, n: int) -> np.ndarray:
    """``rng.exponential(scale, size=n)`` (a scale not in ``(0, inf)`` goes to the method)."""
    if dc is None or not 0.0 < scale < math.inf:
        return rng.exponential(scale, size=n)
    out = np.empty(n)
    cont_fill(dc, False, scale, 0.0, out)  # type: ignore[name-defined]  # noqa: F821
    return out


def _geometrics(rng: np.random.Generator, dc: object, p: float, n: int) -> np.ndarray:
    """``rng.geometric(p, size=n)`` (a ``p`` not in ``(0, 1]`` goes to the method)."""
    if dc is None or not 0.0 < p <= 1.0:
        return rng.geometric(p, size=n)
    out = np.empty(n, dtype=np.int64)
    geometric_fill(dc, p, out)  # type: ignore[name-defined]  # noqa: F821
    return out


def _poisson(rng: np.random.Generator, dc: object, lam: float) -> int:
    """``int(rng.poisson(lam))`` (a ``lam`` not in ``[0, 1e15]`` goes to the method: numpy's
    bound is ~9.2e18)."""
    if dc is None or not 0.0 <= lam <= 1e15:
        return int(rng.poisson(lam))
    return poisson1(dc, lam)  # type: ignore[name-defined,no-any-return]  # noqa: F821


def _integers(rng: np.random.Generator, dc: object, high: int, n: int) -> np.ndarray:
    """``rng.integers(0, high, size=n)`` (int64; a ``high`` not in ``[1, 2**62]`` goes to the
    method)."""
    if dc is None or not 1 <= high <= 2**62:
        return rng.integers(0, high, size=n)
    out = np.empty(n, dtype=np.int64)
    integers_fill(dc, high - 1, out)  # type: ignore[name-defined]  # noqa: F821
    return out


def _probe(rng: np.random.Generator, dc: object) -> list[object]:
    """A few of each draw above from ``rng`` (:func:`_init_c_draws`' comparison)."""
    return [
        _std_normal(rng, dc),
        _std_normals(rng, dc, 300),
        _uniforms(rng, dc, 0.0, 1.0, 20),
        _uniforms(rng, dc, 1.05, 1.5, 20),
        _uniforms(rng, dc, -604800.0, 86400.0, 20),
        _exponentials(rng, dc, 60.0, 200),
        _geometrics(rng, dc, 1.0 / 8.0, 40),
        _geometrics(rng, dc, 0.5, 40),
        _poisson(rng, dc, 3.5),
        _poisson(rng, dc, 2500.0),
        _integers(rng, dc, 7, 41),
        _integers(rng, dc, 3, 1),
        _integers(rng, dc, 2**40, 5),
        _std_normal(rng, dc),
        rng.bit_generator.state,
    ]


def _same(a: object, b: object) -> bool:
    """``a`` and ``b`` (:func:`_probe`'s) equal bit for bit."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return a.hex() == b.hex()
    return type(a) is type(b) and a == b


def _init_c_draws(probe: Callable[[np.random.Generator, object], list[object]] = _probe) -> bool:
    """Compiled: turn numpy's C distributions on (:data:`_C_DRAWS`) where ``probe`` draws the
    same through them as through the ``Generator`` methods from a probe seed (a numpy at run
    time whose distributions differ from the one this module was built with: off, with one
    warning); returns whether they are on."""
    global _C_DRAWS
    _C_DRAWS = False
    if not COMPILED:
        return False
    a = np.random.default_rng(20261201)
    b = np.random.default_rng(20261201)
    try:
        mine = probe(a, a.bit_generator.capsule)
        ok = all(_same(x, y) for x, y in zip(mine, probe(b, None), strict=True))
    except Exception:
        ok = False
    if not ok:
        warnings.warn(
            "gpu-sharing-gym: numpy's C distributions differ from this numpy's Generator; "
            "the workload draws through the Generator's methods",
            RuntimeWarning,
            stacklevel=2,
        )
    _C_DRAWS = ok
    return ok


def _fixed(x: float, n: int) -> float:
    """``float(f"{x:.{n}f}")``, which is ``round(x, n)``: both take the correctly rounded
    decimal digits of ``x`` from CPython's ``_Py_dg_dtoa`` (mode 3) and read them back with
    ``_Py_dg_strtod``. Compiled (``_decimal.pxd``), the f-string's two C calls without its
    string objects (~2.7 k instructions a call in a reset's job loop)."""
    if COMPILED:
        return fixed(x, n)  # type: ignore[name-defined,no-any-return]  # noqa: F821
    return float(f"{x:.{n}f}")


def _periodic_draws(
    cfg: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    period_s: float,
    t0_s: float,
    t1_s: float,
    cap: object = None,
    dc: object = None,
) -> tuple[float, int, np.ndarray]:
    """A periodic group's draws: its phase (:func:`_periodic_phase`), the index ``k0`` of its
    first slot and one N(0, 1) per slot, the slots ``phase + k * period`` (``k = k0, k0 + 1,
    ...``) covering ``[t0_s, t1_s)``; :func:`_periodic_times` jitters them. (``cap``:
    :func:`_random`'s; ``dc``: :func:`draw_capsule`'s.)"""
    phase = _periodic_phase(cfg, rng, period_s, cap)
    k0 = math.floor((t0_s - phase) / period_s)
    k1 = math.ceil((t1_s - phase) / period_s)
    return phase, k0, _std_normals(rng, dc, k1 + 1 - k0)


def _periodic_phase(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, period_s: float, cap: object
) -> float:
    """A periodic group's phase in ``[0, period_s)``: a daily group's follows the diurnal
    arrival curve (morning peak); others are uniform."""
    # (``x * rng.random()`` is ``rng.uniform(0.0, x)``: the same double drawn, numpy's
    # ``0.0 + x * u``, without the call's argument handling)
    if period_s >= DAY_S:
        top = cfg.arrivals_per_h / 3600.0 * 7.0 / (5.0 + 2.0 * cfg.weekend_factor)
        top *= 1.0 + cfg.diurnal_amplitude
        # arrival_rate_per_s on [0, DAY_S) (a weekday), the same operations on one float
        rate0 = cfg.arrivals_per_h / 3600.0 * (7.0 / (5.0 + 2.0 * cfg.weekend_factor))
        amp, peak_s = cfg.diurnal_amplitude, cfg.peak_hour * 3600.0
        while True:  # rejection: phase density proportional to a weekday's arrival rate
            ph = DAY_S * _random(rng, cap)
            if top <= 0:
                break
            u = top * _random(rng, cap)
            if u < rate0 * (1.0 + amp * float(np.cos(2.0 * np.pi * (ph - peak_s) / DAY_S))):
                break
        return ph % period_s
    return period_s * _random(rng, cap)


def _periodic_times(
    cfg: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    periods_s: list[float],
    t0_s: float,
    t1_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The submissions in ``[t0_s, t1_s)`` of periodic groups ``0..len(periods_s)-1`` and the
    group of each, group by group, each group's in slot order (jitter may swap two:
    :func:`generate_workload` sorts every submission at once): each slot jittered by N(0,
    jitter x period). The groups draw in turn (:func:`_periodic_draws`); the arithmetic then
    runs once over every group's slots, element by element one group's operations
    (``phase + period * k``, then ``+ (jitter * period) * z``): the same doubles."""
    n = len(periods_s)
    cap, dc = _capsule(rng), draw_capsule(rng)
    if dc is not None and n:  # (compiled) each group's draws and slots in one typed pass
        bound = sum(int((t1_s - t0_s) / p) + 4 for p in periods_s)
        t_out = np.empty(bound)
        g_out = np.empty(bound, dtype=np.intp)
        jitters = [cfg.period_jitter * p for p in periods_s]
        m = _periodic_pass(cfg, rng, periods_s, jitters, t0_s, t1_s, cap, dc, t_out, g_out)
        return t_out[:m], g_out[:m].astype(np.int64, copy=False)
    draws = [_periodic_draws(cfg, rng, p, t0_s, t1_s, cap, dc) for p in periods_s]
    sizes = [d[2].size for d in draws]
    if not n or not sum(sizes):
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    if COMPILED:  # the same arithmetic in one typed pass (~12 numpy calls fewer)
        t_out = np.empty(sum(sizes))
        g_out = np.empty(sum(sizes), dtype=np.intp)
        m = _slot_times(
            [d[0] for d in draws],
            [d[1] for d in draws],
            periods_s,
            [cfg.period_jitter * p for p in periods_s],
            np.concatenate([d[2] for d in draws]),
            sizes,
            t0_s,
            t1_s,
            t_out,
            g_out,
        )
        return t_out[:m], g_out[:m].astype(np.int64, copy=False)
    group = np.repeat(np.arange(n, dtype=np.int64), sizes)
    first = np.cumsum(sizes) - np.asarray(sizes)  # each group's first slot's row
    k = np.arange(group.size) - first[group] + np.array([d[1] for d in draws])[group]
    period = np.asarray(periods_s, dtype=float)[group]
    jitter = np.array([cfg.period_jitter * p for p in periods_s])[group]
    t = np.array([d[0] for d in draws])[group] + period * k
    t = t + jitter * np.concatenate([d[2] for d in draws])
    keep = (t >= t0_s) & (t < t1_s)
    return t[keep], group[keep]


def _slot_times(
    phases: list[float],
    k0s: list[int],
    periods: list[float],
    jitters: list[float],
    z: np.ndarray,
    sizes: list[int],
    t0_s: float,
    t1_s: float,
    t_out: np.ndarray,
    g_out: np.ndarray,
) -> int:
    """:func:`_periodic_times`' arithmetic, group by group (:func:`_group_slots`; group
    ``g``'s N(0, 1) are the next ``sizes[g]`` of ``z``); returns how many were written."""
    row = 0
    m = 0
    for g in range(len(sizes)):
        m = _group_slots(
            phases[g], k0s[g], periods[g], jitters[g], z, row, sizes[g], t0_s, t1_s,
            t_out, g_out, g, m,
        )  # fmt: skip
        row += sizes[g]
    return m


@cython.boundscheck(False)
@cython.wraparound(False)
def _group_slots(
    ph: float,
    k0: int,
    per: float,
    jit: float,
    z: np.ndarray,
    row: int,
    size: int,
    t0_s: float,
    t1_s: float,
    t_out: np.ndarray,
    g_out: np.ndarray,
    g: int,
    m: int,
) -> int:
    """Periodic group ``g``'s slots (``synthetic.pxd``): slot ``j`` at ``ph + per * k`` (``k =
    k0 + j``, an integer below 2**53 made a double, as numpy's ``float64 * int64``), then ``+
    jit * z[row + j]``; those in ``[t0_s, t1_s)`` written to ``t_out`` from ``m`` on, with
    ``g`` in ``g_out``; returns the new ``m``."""
    for j in range(size):
        kf = k0 + j
        t = ph + per * kf
        t = t + jit * z[row + j]
        if t >= t0_s and t < t1_s:
            t_out[m] = t
            g_out[m] = g
            m += 1
    return m


def _periodic_pass(
    cfg: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    periods: list[float],
    jitters: list[float],
    t0_s: float,
    t1_s: float,
    cap: object,
    dc: object,
    t_out: np.ndarray,
    g_out: np.ndarray,
) -> int:
    """Compiled, with ``dc`` (:func:`draw_capsule`): :func:`_periodic_times`' draws and slots
    group by group, each group's draws as :func:`_periodic_draws` makes them (its phase, then
    its N(0, 1) into a scratch row, numpy's C fill) and its slots at once
    (:func:`_group_slots`): no array a group. Returns how many slots were written."""
    z = np.empty(0)
    m = 0
    for g in range(len(periods)):
        per = periods[g]
        ph = _periodic_phase(cfg, rng, per, cap)
        k0 = math.floor((t0_s - ph) / per)
        size = math.ceil((t1_s - ph) / per) + 1 - k0
        if m + size > t_out.shape[0]:  # (never: ``t_out`` holds every slot's bound)
            raise IndexError("periodic slots beyond their bound")
        if size > z.shape[0]:
            z = np.empty(size)
        normal_fill(dc, z[:size])  # type: ignore[name-defined]  # noqa: F821
        m = _group_slots(ph, k0, per, jitters[g], z, 0, size, t0_s, t1_s, t_out, g_out, g, m)
    return m


# :func:`generate_workload`'s per-run arithmetic, element by element numpy's operations on
# the same doubles (``synthetic.pxd``; ``lab`` indexes the templates' arrays):
@cython.boundscheck(False)
@cython.wraparound(False)
def _scaled_at(a: np.ndarray, lab: np.ndarray, z: np.ndarray, out: np.ndarray) -> None:
    """``out = a[lab] * z``."""
    for i in range(z.shape[0]):
        out[i] = a[lab[i]] * z[i]


@cython.boundscheck(False)
@cython.wraparound(False)
def _clipped_at(
    a: np.ndarray, lab: np.ndarray, e: np.ndarray, lo: float, hi: float, out: np.ndarray
) -> None:
    """``out = np.clip(a[lab] * e, lo, hi)`` (numpy's clip: a NaN stays, else the larger of it
    and ``lo`` (``v > lo``), then the smaller of that and ``hi`` (``v < hi``))."""
    for i in range(e.shape[0]):
        v = a[lab[i]] * e[i]
        if v == v:
            v = v if v > lo else lo
            v = v if v < hi else hi
        out[i] = v


@cython.boundscheck(False)
@cython.wraparound(False)
def _mem_use(
    e: np.ndarray, med: float, r: np.ndarray, p: float, over: np.ndarray, out: np.ndarray
) -> None:
    """``out = np.where(r < p, over, np.maximum(np.minimum(med * e, 0.95), 0.05))`` (numpy's
    minimum and maximum: a NaN stays, else ``v < 0.95`` and ``v >= 0.05`` pick ``v``)."""
    for i in range(e.shape[0]):
        if r[i] < p:
            out[i] = over[i]
        else:
            v = med * e[i]
            if v == v:
                v = v if v < 0.95 else 0.95
                v = v if v >= 0.05 else 0.05
            out[i] = v


def _choice_p(rng: np.random.Generator, p: np.ndarray, size: int) -> np.ndarray:
    """``rng.choice(p.size, size=size, p=p)``: the same indices from the same draws, without
    its checks' ~20 numpy calls where ``p`` passes them. numpy's sampler with ``p``
    (``Generator.choice`` with replacement, as numpy 2.x has it): the cumulative sum of ``p``
    divided by its last value, one ``random`` double per sample, each sample the
    ``searchsorted(side="right")`` of its double. A ``p`` that is not a 1-D vector of
    non-negative finite weights summing to 1 within 1e-9 (numpy's tolerance is ~1.5e-8) goes
    to ``rng.choice`` itself (its error, or its answer)."""
    return _choice_w(rng, (p, _cdf_of(p)), size)


def _cdf_of(p: np.ndarray) -> np.ndarray | None:
    """:func:`_choice_p`'s cumulative weights of ``p`` (None: ``p`` fails its checks)."""
    pl = p.tolist() if p.ndim == 1 else None
    if not pl or not all(v >= 0.0 for v in pl) or not abs(math.fsum(pl) - 1.0) <= 1e-9:
        return None
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return cdf


def _choice_w(
    rng: np.random.Generator, w: tuple[np.ndarray, np.ndarray | None], size: int
) -> np.ndarray:
    """:func:`_choice_p` of ``w = (p, _cdf_of(p))`` (made once for a scenario's weights:
    :func:`_weights`). (Its doubles ``rng.uniform(0.0, 1.0, size)``: ``rng.random(size)``'s,
    numpy's ``0.0 + 1.0 * u`` being ``u``.)"""
    p, cdf = w
    if cdf is None:
        return rng.choice(p.size, size=size, p=p)
    return cdf.searchsorted(_uniforms(rng, draw_capsule(rng), 0.0, 1.0, size), side="right")


#: What a scenario's weights give every reset, by their values (:func:`_weights`): read-only
#: arrays and lists (never handed out to be changed).
_CONSTANTS: dict[tuple[object, ...], object] = {}
_CONSTANTS_CAP = 64


def _constant(key: tuple[object, ...], make: Callable[[], object]) -> object:
    """``make()``, once per ``key`` (a value of the configuration, hashable: a config whose
    fields change between resets gets its own entry)."""
    hit = _CONSTANTS.get(key)
    if hit is None:
        if len(_CONSTANTS) >= _CONSTANTS_CAP:
            _CONSTANTS.clear()
        hit = _CONSTANTS[key] = make()
    return hit


def _weights(key: tuple[object, ...], weights: list[float]) -> tuple[np.ndarray, np.ndarray | None]:
    """``(p, _cdf_of(p))`` of ``p = w / w.sum()`` for ``w`` the float array of ``weights``
    (once per ``key``)."""

    def make() -> tuple[np.ndarray, np.ndarray | None]:
        w = np.array(weights, dtype=float)
        p = w / w.sum()
        return p, _cdf_of(p)

    return _constant(key, make)  # type: ignore[return-value]


def _mix(mix: Mapping[str, float]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray | None]]:
    """A model mix's names (an object array) and its :func:`_weights`."""
    items = tuple(mix.items())

    def make() -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray | None]]:
        names = [m for m, _ in items]
        return np.asarray(names, dtype=object), _weights(("w", items), [w for _, w in items])

    return _constant(("mix", items), make)  # type: ignore[return-value]


def _pick(rng: np.random.Generator, mix: Mapping[str, float], size: int) -> np.ndarray:
    names, w = _mix(mix)
    return names[_choice_w(rng, w, size)]


def _requests(
    sizes: tuple[float, ...], weights: tuple[float, ...]
) -> tuple[
    np.ndarray,
    tuple[np.ndarray, np.ndarray | None],
    np.ndarray | None,
    tuple[np.ndarray, np.ndarray | None] | None,
]:
    """The request sizes (a float array), their :func:`_weights`, the whole-GPU sizes (None:
    none) and their weights renormalised (None: they weigh 0, drawn uniformly), once per
    sizes and weights."""

    def make() -> tuple[object, ...]:
        sizes_r = np.asarray(sizes, dtype=float)
        w = np.asarray(weights, dtype=float)
        p = w / w.sum()
        whole = sizes_r >= 1
        if not whole.any():
            return sizes_r, (p, _cdf_of(p)), None, None
        ww = w[whole] / w[whole].sum() if w[whole].sum() > 0 else None
        return sizes_r, (p, _cdf_of(p)), sizes_r[whole], None if ww is None else (ww, _cdf_of(ww))

    return _constant(("req", sizes, weights), make)  # type: ignore[return-value]


def _zipf(n: int, exponent: float) -> tuple[np.ndarray, np.ndarray | None]:
    """The users' Zipf weights ``1 / k ** exponent`` (``k = 1..n``) normalised, with their
    cumulative weights (:func:`_choice_w`), once per ``n`` and ``exponent``."""

    def make() -> tuple[np.ndarray, np.ndarray | None]:
        zipf = 1.0 / np.arange(1, n + 1) ** exponent
        p = zipf / zipf.sum()
        return p, _cdf_of(p)

    return _constant(("zipf", n, exponent), make)  # type: ignore[return-value]


@cython.boundscheck(False)
@cython.wraparound(False)
def _names_at(names: list[str], idx: np.ndarray) -> list[str]:
    """``[names[i] for i in idx]`` for an ``intp`` vector ``idx`` (the tags of the history's
    runs). Compiled (``synthetic.pxd``), a C index a run (~20 instructions, against ~110 for
    an object array's fancy index and ``tolist``)."""
    if not COMPILED:
        return [names[i] for i in idx.tolist()]
    out: list[str] = [""] * idx.shape[0]
    for i in range(idx.shape[0]):
        out[i] = names[idx[i]]
    return out


def _group_tags(n: int) -> list[str]:
    """``[f"g{k}" for k in range(n)]`` (the strings made once per process)."""
    while len(_G_TAGS) < n:
        _G_TAGS.append(f"g{len(_G_TAGS)}")
    return _G_TAGS[:n]


_G_TAGS: list[str] = []


def _user_tags(n: int) -> list[str]:
    """``[f"u{u}" for u in range(n)]`` (a fresh list; the strings made once)."""
    return list(_constant(("users", n), lambda: [f"u{u}" for u in range(n)]))  # type: ignore[call-overload]


def generate_jobs(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, horizon_s: float
) -> list[JobSpec]:
    """The jobs of :func:`generate_workload` (the same draws)."""
    return generate_workload(cfg, rng, horizon_s).jobs


def generate_workload(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, horizon_s: float
) -> SyntheticWorkload:
    """Draw the offline jobs submitted in ``[0, horizon_s)`` and the ``history_h`` before.

    Deterministic given ``rng``'s state (and, ``past: shared``, the configuration). Three
    submission processes (PAI Sec. 5.2, Figs. 10-11):

    - one-off jobs: the diurnal Poisson process at ``(1 - recurring_share)`` of the rate;
    - periodic groups (``periodic_share`` of recurring arrivals): a fixed period (hourly to
      daily) with jitter; batch inference (``inference_share``, run-time sigma
      ``inference_duration_sigma``) or periodic training (``group_duration_sigma``);
    - bursty groups (hyper-parameter sweeps): sweeps at diurnal Poisson times, one every
      ``burst_gap_h`` per group, of ``group_size_min``+ members ``burst_spacing_s`` apart.

    Groups are added until their summed rate reaches their share of ``arrivals_per_h``. A group
    fixes what its user submits (model, request, type constraint, CPUs, user) and a base run
    time (lognormal, ``duration_median_s``/``duration_sigma``); a run's time is the base times
    ``exp(N(0, sigma))`` with the group's sigma. Jobs are OFFLINE, ``job_id`` 0..n-1 in
    submission order, ``est_work_s == work_s`` (the simulator's predictor replaces it); group
    tags are ``"g<k>"`` and one-off jobs have ``group == ""``.

    ``past: shared`` (the default, workload version 3): the groups (templates, periods,
    phases) and the history are the scenario's own (:func:`shared_past`, drawn once from
    ``past_seed``); ``rng`` draws the future only (:func:`_future`). ``past: per_episode``
    (version 2): ``rng`` draws the groups, the history and the future (:func:`_per_episode`).

    Args:
        cfg: Generator parameters.
        rng: Source of randomness.
        horizon_s: Length of the submission window.
    """
    if horizon_s <= 0:
        return SyntheticWorkload([], RunLog.empty(), {}, {})
    if cfg.past == PER_EPISODE:
        return _per_episode(cfg, rng, horizon_s)
    return _future(cfg, shared_past(cfg), rng, horizon_s)


@dataclass(frozen=True)
class _Groups:
    """The recurring groups' draws (:func:`_draw_groups`): periodic groups ``0..n_per-1``'
    base run times and periods, then ``n_burst`` bursty groups'; ``cfg_d``: the
    configuration with the diurnal amplitude the other processes swing with."""

    per_base: list[float]
    per_period: list[float]
    cfg_d: SyntheticWorkloadConfig
    n_burst: int
    inference: np.ndarray
    burst_base: np.ndarray

    @property
    def n_per(self) -> int:
        return len(self.per_base)


def _draw_groups(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, cap: object, dc: object
) -> _Groups:
    """The templates' first draws: periodic groups, then bursty groups (``cap``:
    :func:`_capsule`'s, ``dc``: :func:`draw_capsule`'s)."""
    rec_rate_h = cfg.arrivals_per_h * cfg.recurring_share
    per_rate_h = rec_rate_h * cfg.periodic_share
    burst_rate_h = rec_rate_h - per_rate_h
    lo_sig = cfg.duration_sigma
    periods_h = np.asarray(cfg.period_h_choices, dtype=float)
    pw = np.asarray(cfg.period_weights, dtype=float)
    # Which periods a base run time allows (``p >= ratio * base``) decides the period
    # weights; it depends only on how many of the distinct periods lie below ``ratio * base``,
    # so that count indexes them: each set computed with numpy once (the same values as per
    # draw) and looked up per draw.
    periods_s = [p * 3600.0 for p in periods_h.tolist()]
    inv_longest = 1.0 / float(periods_h.max())
    distinct_s = sorted(set(periods_s))
    # (the table is the same every reset of these periods and weights: kept, filled as met)
    by_ok: list[tuple[float, list[float]] | None] = _constant(  # type: ignore[assignment]
        ("periods", tuple(periods_s), tuple(pw.tolist())),
        lambda: [None] * (len(distinct_s) + 1),
    )
    med, d_lo, d_hi, ratio = (
        cfg.duration_median_s,
        cfg.duration_min_s,
        cfg.duration_max_s,
        cfg.period_run_ratio,
    )
    per_base: list[float] = []
    per_period: list[float] = []
    got = 0.0
    while got < per_rate_h:
        # np.clip's value for a finite float (exp never gives NaN here)
        base = min(max(med * math.exp(lo_sig * _std_normal(rng, dc)), d_lo), d_hi)
        below = bisect.bisect_left(distinct_s, ratio * base)
        hit = by_ok[below]
        if hit is None:
            ok = np.array([p >= ratio * base for p in periods_s])
            w = (
                np.where(ok, pw, 0.0)
                if ok.any()
                else np.where(periods_h == periods_h.max(), 1.0, 0.0)
            )
            w = w / w.sum()
            cdf = w.cumsum()
            cdf /= cdf[-1]
            hit = by_ok[below] = (float(np.sum(w / periods_h)), cdf.tolist())
        # A group submits 1/period runs per hour, and short runs get short periods: keep a
        # drawn group with probability (1 / longest period) / E[1 / period | base], so that
        # runs (not groups) follow the lognormal run-time distribution.
        if _random(rng, cap) * hit[0] > inv_longest:
            continue
        # rng.choice(len(w), p=w)'s draw: one double against the normalised cumulative weights
        p_h = float(periods_h[bisect.bisect_right(hit[1], _random(rng, cap))])
        per_base.append(base)
        per_period.append(p_h * 3600.0)
        got += 1.0 / p_h
    n_per = len(per_base)
    # Groups that run more often than daily submit around the clock; the other processes (and
    # daily phases) swing harder so that all arrivals keep the configured daily swing.
    flat_h = sum(3600.0 / p for p in per_period if p < DAY_S)
    amp = cfg.diurnal_amplitude
    if cfg.arrivals_per_h > flat_h:
        amp = min(0.95, amp * cfg.arrivals_per_h / (cfg.arrivals_per_h - flat_h))
    cfg_d = copy.copy(cfg)  # (amp is in [0, 0.95]: valid, so no __post_init__ walk)
    object.__setattr__(cfg_d, "diurnal_amplitude", amp)
    k_mean = cfg.group_size_mean
    n_burst = round(burst_rate_h * cfg.burst_gap_h / k_mean) if burst_rate_h > 0 else 0
    if burst_rate_h > 0:
        n_burst = max(1, n_burst)
    inference = np.zeros(n_per + n_burst, dtype=bool)
    inference[:n_per] = _uniforms(rng, dc, 0.0, 1.0, n_per) < cfg.inference_share
    burst_base = cfg.duration_median_s * np.exp(lo_sig * _std_normals(rng, dc, n_burst))
    return _Groups(per_base, per_period, cfg_d, n_burst, inference, burst_base)


def _sweeps(
    cfg_d: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    dc: object,
    n_per: int,
    n_burst: int,
    t0_s: float,
    t1_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The bursty groups' (``n_per..n_per+n_burst-1``) sweeps started in ``[t0_s, t1_s)``:
    their members' times before ``t1_s`` and each one's group."""
    starts = _arrivals(cfg_d, rng, t0_s, t1_s, n_burst / cfg_d.burst_gap_h / cfg_d.arrivals_per_h)
    owner = n_per + _integers(rng, dc, n_burst, starts.size)
    p = 1.0 / (cfg_d.group_size_mean - cfg_d.group_size_min + 1.0)
    sizes = cfg_d.group_size_min + _geometrics(rng, dc, p, starts.size) - 1
    # Every sweep's gaps in one draw (the same doubles as a draw per sweep, in turn); a
    # sweep's times are its start plus the running sum of its gaps after the first: one
    # row per sweep (its first gap 0.0, zeros after its last), summed along the rows by
    # np.cumsum (an accumulation adds in order from the row's first value: the same
    # doubles as adding them one by one from 0.0), kept where a member is before the
    # horizon, sweep by sweep and member by member.
    n_gaps = int(sizes.sum())
    spacing = cfg_d.burst_spacing_s
    gaps = _exponentials(rng, dc, spacing, n_gaps) if spacing else np.zeros(n_gaps)
    if COMPILED:  # the same sums in one typed pass (~12 numpy calls fewer)
        t_out = np.empty(n_gaps)
        g_out = np.empty(n_gaps, dtype=np.intp)
        m = _sweep_times(starts, sizes, gaps, owner, t1_s, t_out, g_out)
        return t_out[:m], g_out[:m].astype(np.int64, copy=False)
    return _sweep_rows(starts, sizes, gaps, owner, t1_s)


def _sweep_rows(
    starts: np.ndarray, sizes: np.ndarray, gaps: np.ndarray, owner: np.ndarray, t1_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_sweeps`' times and groups by numpy (interpreted; :func:`_sweep_times` compiled,
    the same doubles)."""
    n_gaps = int(sizes.sum())
    n_sw = int(sizes.size)
    width = int(sizes.max()) if n_sw else 0
    first = np.cumsum(sizes) - sizes
    row = np.repeat(np.arange(n_sw), sizes)
    pad = np.zeros((n_sw, width))
    pad[row, np.arange(n_gaps) - first[row]] = gaps
    if width:
        pad[:, 0] = 0.0
    t_sw = starts[:, None] + np.cumsum(pad, axis=1)
    keep = (np.arange(width) < sizes[:, None]) & (t_sw < t1_s)
    return t_sw[keep], np.broadcast_to(owner[:, None], t_sw.shape)[keep].astype(np.int64)


@cython.boundscheck(False)
@cython.wraparound(False)
def _sweep_times(
    starts: np.ndarray,
    sizes: np.ndarray,
    gaps: np.ndarray,
    owner: np.ndarray,
    t1_s: float,
    t_out: np.ndarray,
    g_out: np.ndarray,
) -> int:
    """:func:`_sweeps`' times, sweep by sweep (sweep ``s``: ``sizes[s]`` members from
    ``starts[s]``, its gaps the next ``sizes[s]`` of ``gaps``, the first not used): member
    ``j``'s time is the start plus ``((0.0 + gap 1) + gap 2) ... + gap j``, the running sum
    ``np.cumsum`` makes of the sweep's padded row; those before ``t1_s`` are written, with
    their group ``owner[s]``, in order. Returns how many."""
    m = 0
    at = 0
    for s in range(starts.shape[0]):
        size = sizes[s]
        acc = 0.0
        for j in range(size):
            if j:
                acc += gaps[at + j]
            t = starts[s] + acc
            if t < t1_s:
                t_out[m] = t
                g_out[m] = owner[s]
                m += 1
        at += size
    return m


def _other_runs(
    cfg: SyntheticWorkloadConfig,
    grp: _Groups,
    rng: np.random.Generator,
    dc: object,
    t0_s: float,
    t1_s: float,
    times: list[np.ndarray],
    labels: list[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, int]:
    """The periodic submissions in ``[t0_s, t1_s)`` (``times``, ``labels``) with the bursty
    groups' and the one-off jobs' (templates ``n_grp..``) drawn after them: every submission
    sorted by time, then template; and how many one-off jobs."""
    n_per, n_burst = grp.n_per, grp.n_burst
    if n_burst:
        t_sw, lab_sw = _sweeps(grp.cfg_d, rng, dc, n_per, n_burst, t0_s, t1_s)
        times.append(t_sw)
        labels.append(lab_sw)
    one = _arrivals(grp.cfg_d, rng, t0_s, t1_s, 1.0 - cfg.recurring_share)
    times.append(one)
    labels.append(n_per + n_burst + np.arange(one.size, dtype=np.int64))
    t_all = np.concatenate(times)
    lab = np.concatenate(labels)
    order = lexsort2(lab, t_all)
    return t_all[order], lab[order], int(one.size)


def _templates_and_runs(
    cfg: SyntheticWorkloadConfig,
    grp: _Groups,
    rng: np.random.Generator,
    dc: object,
    lab: np.ndarray,
    n_one: int,
) -> tuple[_Templates, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every template's fields (the groups', then ``n_one`` one-off jobs'), base run time and
    sigma, then each run's (of template ``lab[i]``) run time and memory use."""
    n_grp = grp.n_per + grp.n_burst
    n_tpl = n_grp + n_one
    tpl = _draw_templates(cfg, rng, dc, n_tpl, n_grp)
    base_dur = np.concatenate([np.asarray(grp.per_base, dtype=float), grp.burst_base, tpl.one_base])
    sig = np.zeros(n_tpl)
    sig[:n_grp] = np.where(grp.inference, cfg.inference_duration_sigma, cfg.group_duration_sigma)
    dur, use = _run_draws(cfg, rng, dc, base_dur, sig, lab)
    return tpl, base_dur, sig, dur, use


@dataclass(frozen=True)
class _Templates:
    """What templates ``0..n-1`` submit (:func:`_draw_templates`); ``one_base``: the base run
    times of the one-off templates (the last ``n - n_grp``)."""

    high: np.ndarray
    models: np.ndarray
    req: np.ndarray
    constrained: np.ndarray
    set_idx: np.ndarray
    one_base: np.ndarray
    users: np.ndarray
    cpu_noise: np.ndarray


def _draw_templates(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, dc: object, n_tpl: int, n_grp: int
) -> _Templates:
    """Per template (``n_grp`` groups, then one-off jobs): what the user submits."""
    high = _uniforms(rng, dc, 0.0, 1.0, n_tpl) < cfg.high_gpu_share
    models = _pick(rng, cfg.model_mix, n_tpl)
    models[high] = _pick(rng, cfg.high_gpu_models, int(high.sum()))
    sizes_r, req_w, sizes_whole, whole_w = _requests(
        tuple(cfg.gpu_request_sizes), tuple(cfg.gpu_request_weights)
    )
    req = sizes_r[_choice_w(rng, req_w, n_tpl)]
    if sizes_whole is not None:
        pick = (
            rng.choice(sizes_whole.size, size=n_tpl)
            if whole_w is None
            else _choice_w(rng, whole_w, n_tpl)
        )
        req_high = sizes_whole[pick]
        req = np.where(high, req_high, req)
    other_share = cfg.type_constraint_share / max(1e-12, 1.0 - cfg.high_gpu_share)
    constrained = (_uniforms(rng, dc, 0.0, 1.0, n_tpl) < other_share) & ~high
    set_idx = _integers(rng, dc, max(1, len(_type_sets(cfg))), n_tpl)
    one_base = cfg.duration_median_s * np.exp(
        cfg.duration_sigma * _std_normals(rng, dc, n_tpl - n_grp)
    )
    users = _choice_w(rng, _zipf(cfg.num_users, cfg.user_zipf_exponent), n_tpl)
    cpu_noise = np.exp(cfg.cpu_sigma * _std_normals(rng, dc, n_tpl))
    return _Templates(high, models, req, constrained, set_idx, one_base, users, cpu_noise)


def _type_sets(cfg: SyntheticWorkloadConfig) -> list[tuple[str, ...]]:
    """``type_constraint_sets`` split (once per value)."""
    return _constant(  # type: ignore[return-value]
        ("sets", tuple(cfg.type_constraint_sets)),
        lambda: [tuple(s.split("|")) for s in cfg.type_constraint_sets],
    )


def _run_draws(
    cfg: SyntheticWorkloadConfig,
    rng: np.random.Generator,
    dc: object,
    base_dur: np.ndarray,
    sig: np.ndarray,
    lab: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per run (of template ``lab[i]``): its run time (jitter around the template's base) and
    its true memory use (a share of the declared)."""
    n = lab.size
    if dc is not None:  # (compiled) the same draws and doubles, typed passes around np.exp
        x = np.empty(n)
        _scaled_at(sig, lab, _std_normals(rng, dc, n), x)  # sig[lab] * z
        dur = np.empty(n)
        _clipped_at(base_dur, lab, np.exp(x), cfg.duration_min_s, cfg.duration_max_s, dur)
        e = np.exp(cfg.mem_use_sigma * _std_normals(rng, dc, n))
        use = np.empty(n)
        _mem_use(
            e,
            cfg.mem_use_median,
            _uniforms(rng, dc, 0.0, 1.0, n),  # (drawn before the next: arguments in order)
            cfg.mem_overuse_prob,
            _uniforms(rng, dc, 1.05, 1.5, n),
            use,
        )
        return dur, use
    dur = base_dur[lab] * np.exp(sig[lab] * _std_normals(rng, dc, n))
    dur = np.clip(dur, cfg.duration_min_s, cfg.duration_max_s)
    use = np.minimum(
        cfg.mem_use_median * np.exp(cfg.mem_use_sigma * _std_normals(rng, dc, n)), 0.95
    )
    over = _uniforms(rng, dc, 0.0, 1.0, n) < cfg.mem_overuse_prob
    use = np.where(over, _uniforms(rng, dc, 1.05, 1.5, n), np.maximum(use, 0.05))
    return dur, use


def _tags(cfg: SyntheticWorkloadConfig, n_grp: int) -> tuple[list[str], list[str]]:
    """The group tags (``"g<k>"``, then ``""`` for one-off jobs) and the user tags."""
    return [*_group_tags(n_grp), ""], _user_tags(cfg.num_users)


def _history_log(
    cfg: SyntheticWorkloadConfig,
    tpl: _Templates,
    n_grp: int,
    lab: np.ndarray,
    t_all: np.ndarray,
    dur: np.ndarray,
    n_past: int,
) -> RunLog:
    """The runs ``0..n_past-1`` (those before time 0) as a :class:`RunLog`."""
    hl = lab[:n_past]
    hreq = tpl.req[hl]
    # tags by lookup (one string per template and user, indexed by the history's rows)
    g_ix, u_ix = np.minimum(hl, n_grp), tpl.users[hl]
    g_tags_l, u_tags_l = _tags(cfg, n_grp)
    return RunLog(
        group=_names_at(g_tags_l, g_ix),
        user=_names_at(u_tags_l, u_ix),
        gpus=np.where(hreq < 1, hreq, np.floor(hreq)),
        work_s=dur[:n_past].copy(),
        submit_s=t_all[:n_past].copy(),
        group_codes=TagCodes(g_tags_l, g_ix),
        user_codes=TagCodes(u_tags_l, u_ix),
    )


def _job_specs(
    cfg: SyntheticWorkloadConfig,
    tpl: _Templates,
    n_grp: int,
    lab_e: np.ndarray,
    t_e: np.ndarray,
    dur_e: np.ndarray,
    use_e: np.ndarray,
) -> list[JobSpec]:
    """The episode's jobs: run ``i`` of template ``lab_e[i]`` submitted at ``t_e[i]``, ``job_id``
    ``i``."""
    g_tags_l, u_tags_l = _tags(cfg, n_grp)
    sets = _type_sets(cfg)
    jobs: list[JobSpec] = []
    # Python lists of the episode's runs and of their templates' fields (the same values as
    # the arrays' elements), cheaper to index per job.
    lab_l, t_l, dur_l, use_l = lab_e.tolist(), t_e.tolist(), dur_e.tolist(), use_e.tolist()
    models_l, req_l, high_l, constrained_l = (
        tpl.models[lab_e].tolist(),
        tpl.req[lab_e].tolist(),
        tpl.high[lab_e].tolist(),
        tpl.constrained[lab_e].tolist(),
    )
    set_idx_l, users_l = tpl.set_idx[lab_e].tolist(), tpl.users[lab_e].tolist()
    cpu_noise_l = tpl.cpu_noise[lab_e].tolist()
    cpu_med, ckpt, offline = cfg.cpu_per_gpu_median, cfg.checkpoint_interval_s, JobKind.OFFLINE
    high_types = tuple(cfg.high_end_types)
    #: template -> what its runs share (a periodic group submits several in one episode).
    #: ``_fixed(x, 2)`` is ``round(x, 2)``, the same double in less time.
    shared: dict[int, tuple[str, int, float, float, float, float, tuple[str, ...], str, str, int]]
    shared = {}
    for i, k in enumerate(lab_l):
        tpl_i = shared.get(k)
        if tpl_i is None:
            model = str(models_l[i])
            r = req_l[i]
            frac = r if r < 1 else 1.0
            prof = ZOO[model]
            mem = frac * REF_GPU_MEM_GB if r < 1 else prof.mem_gb
            cpu = cpu_med * prof.cpu_cores / 4.0 * cpu_noise_l[i]
            if high_l[i]:
                types: tuple[str, ...] = high_types
            elif constrained_l[i] and sets:
                types = sets[set_idx_l[i]]
            else:
                types = ()
            tpl_i = shared[k] = (
                model,
                1 if r < 1 else int(r),  # num_gpus
                frac,  # gpu_frac
                _fixed(mem, 2),  # mem_gb: round(mem, 2)
                _fixed(min(max(cpu, 1.0), 32.0), 1),  # cpu_cores: round(.., 1)
                mem,  # (for true_mem_gb)
                types,  # gpu_types
                g_tags_l[k if k < n_grp else n_grp],  # group ("" for a one-off job)
                u_tags_l[users_l[i]],  # user
                1 if high_l[i] else 0,  # priority
            )
        model, num_gpus, frac, mem_gb, cpu_cores, mem, types, group, user, priority = tpl_i
        w = dur_l[i]
        jobs.append(
            new_spec(  # (positional: JobSpec's fields in their order, new_spec's parameters)
                i,  # job_id
                offline,  # kind
                model,
                t_l[i],  # submit_s
                num_gpus,
                frac,  # gpu_frac
                mem_gb,
                cpu_cores,
                w,  # work_s
                w,  # est_work_s
                _fixed(mem * use_l[i], 3),  # true_mem_gb: round(.., 3)
                types,  # gpu_types
                ckpt,  # checkpoint_interval_s
                group,
                user,
                priority,
                None,  # service
            )
        )
    return jobs


def _group_meta(
    grp: _Groups,
) -> tuple[dict[str, str], dict[str, float], frozenset[str]]:
    """The groups' patterns, periods and batch-inference tags (:class:`SyntheticWorkload`)."""
    n_per = grp.n_per
    g_names = _group_tags(n_per + grp.n_burst)  # (f"g{k}")
    pattern = {g: PERIODIC if k < n_per else BURSTY for k, g in enumerate(g_names)}
    period = {g_names[k]: grp.per_period[k] for k in range(n_per)}
    infer = frozenset(g_names[k] for k in np.flatnonzero(grp.inference).tolist())
    return pattern, period, infer


def _per_episode(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, horizon_s: float
) -> SyntheticWorkload:
    """``past: per_episode`` (workload version 2): the groups, the history over
    ``[-history_h, 0)`` and the future, every draw from ``rng``."""
    t0 = -cfg.history_h * 3600.0
    cap, dc = _capsule(rng), draw_capsule(rng)
    grp = _draw_groups(cfg, rng, cap, dc)
    n_per, n_burst = grp.n_per, grp.n_burst
    n_grp = n_per + n_burst
    # Submissions of every template over [t0, horizon).
    # (Their order before the sort below does not matter: equal times and labels are the same.)
    t_per, lab_per = _periodic_times(grp.cfg_d, rng, grp.per_period, t0, horizon_s)
    t_all, lab, n_one = _other_runs(cfg, grp, rng, dc, t0, horizon_s, [t_per], [lab_per])
    tpl, _, _, dur, use = _templates_and_runs(cfg, grp, rng, dc, lab, n_one)
    n_past = int((t_all < 0).sum())  # sorted by time: the history is the prefix
    history = _history_log(cfg, tpl, n_grp, lab, t_all, dur, n_past)
    jobs = _job_specs(cfg, tpl, n_grp, lab[n_past:], t_all[n_past:], dur[n_past:], use[n_past:])
    return SyntheticWorkload(jobs, history, *_group_meta(grp))


@dataclass(frozen=True, eq=False)
class ClusterPast:
    """A scenario's cluster before its episodes (``past: shared``, :func:`shared_past`): its
    recurring groups and the runs of ``[-history_h, 0)``, the same for every episode.

    Attributes:
        groups: The groups' templates (periods, base run times, batch inference).
        phases: Periodic group ``g``'s slots are ``phases[g] + k * period`` ...
        next_slot: ... the past owns those with ``k < next_slot[g]`` (their nominal time
            before 0), the future the others.
        templates: What each group submits.
        base: Each group's base run time.
        sig: Each group's run-time sigma.
        history: The runs submitted in ``[-history_h, 0)``.
        pattern, period_s, batch_inference: As :class:`SyntheticWorkload`'s.
    """

    groups: _Groups
    phases: list[float]
    next_slot: list[int]
    templates: _Templates
    base: np.ndarray
    sig: np.ndarray
    history: RunLog
    pattern: dict[str, str]
    period_s: dict[str, float]
    batch_inference: frozenset[str]
    #: The groups whose drawn template no empty fleet could run, redrawn (:func:`_fit_groups`).
    refit: tuple[int, ...] = ()
    #: (predictor config, exact) -> the predictor warm-started on :attr:`history`.
    predictors: dict[tuple[object, bool], OnlinePredictor] = field(default_factory=dict)

    @property
    def n_grp(self) -> int:
        return self.groups.n_per + self.groups.n_burst

    def warm(self, cfg: PredictorConfig, exact: bool) -> OnlinePredictor:
        """The :class:`OnlinePredictor` warm-started on the history (made once per past and
        configuration), itself: never to be changed (:meth:`predictor` hands out copies)."""
        key = (cfg, exact)
        pred = self.predictors.get(key)
        if pred is None:
            pred = self.predictors[key] = OnlinePredictor(cfg, self.history, exact=exact)
        return pred

    def predictor(self, cfg: PredictorConfig, exact: bool) -> OnlinePredictor:
        """A fresh copy of the :class:`OnlinePredictor` warm-started on the history (the warm
        start made once per past and configuration)."""
        return copy.deepcopy(self.warm(cfg, exact))  # (OnlinePredictor.__deepcopy__)


#: The past's generator: ``default_rng([past_seed, _PAST_STREAM])`` (not an episode seed's).
_PAST_STREAM = 0x9A57
#: A misfit group ``g``'s redraws: ``default_rng([past_seed, _FIT_STREAM, g])`` (the past's
#: other draws untouched); at most :data:`_FIT_TRIES` templates.
_FIT_STREAM = 0xF1EE7
_FIT_TRIES = 200


def _template_fits(
    cfg: SyntheticWorkloadConfig, fleet: FleetCapacity, tpl: _Templates, k: int
) -> bool:
    """Could template ``k``'s jobs run on ``fleet`` empty? The simulator's rule
    (``JobTable.feasible``): at least ``num_gpus`` GPUs of an allowed type whose memory holds
    the job's declared ``mem_gb`` (a gang may span nodes)."""
    r = float(tpl.req[k])
    num_gpus = 1 if r < 1 else int(r)
    mem_gb = _fixed(r * REF_GPU_MEM_GB if r < 1 else ZOO[str(tpl.models[k])].mem_gb, 2)
    sets = _type_sets(cfg)
    if tpl.high[k]:
        types: tuple[str, ...] = tuple(cfg.high_end_types)
    elif tpl.constrained[k] and sets:
        types = sets[int(tpl.set_idx[k])]
    else:
        types = ()
    n = 0
    for name, cap, count in fleet:
        if (not types or name in types) and cap >= mem_gb - 1e-9:
            n += count
    return n >= num_gpus


def _fit_groups(cfg: SyntheticWorkloadConfig, tpl: _Templates, n_grp: int) -> tuple[int, ...]:
    """Redraw, in place, what a recurring group submits (model, request, type constraint: the
    fields that decide where it can run) where no empty ``cfg.fleet`` could run it: a
    recurring group is a script resubmitted on this cluster, and its past runs ran here.
    Group ``g``'s redraws come from its own generator (``_FIT_STREAM``), so a past without
    such a group is drawn as without a fleet; its user, CPU draw, base run time, period and
    phase stay. After :data:`_FIT_TRIES` misfits the group is kept as drawn (the simulator
    fails its runs, as any job the fleet cannot hold). Returns the groups redrawn."""
    fleet = cfg.fleet
    if fleet is None:
        return ()
    out: list[int] = []
    for g in range(n_grp):
        if _template_fits(cfg, fleet, tpl, g):
            continue
        rng = np.random.default_rng([cfg.past_seed, _FIT_STREAM, g])
        dc = draw_capsule(rng)
        for _ in range(_FIT_TRIES):
            new = _draw_templates(cfg, rng, dc, 1, 1)
            if _template_fits(cfg, fleet, new, 0):
                for f in ("high", "models", "req", "constrained", "set_idx"):
                    getattr(tpl, f)[g] = getattr(new, f)[0]
                out.append(g)
                break
    return tuple(out)


def _draw_past(cfg: SyntheticWorkloadConfig) -> ClusterPast:
    """:func:`shared_past`'s draw, from ``past_seed``'s own generator."""
    rng = np.random.default_rng([cfg.past_seed, _PAST_STREAM])
    t0 = -cfg.history_h * 3600.0
    cap, dc = _capsule(rng), draw_capsule(rng)
    grp = _draw_groups(cfg, rng, cap, dc)
    n_per, n_burst = grp.n_per, grp.n_burst
    n_grp = n_per + n_burst
    phases: list[float] = []
    next_slot: list[int] = []
    times: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    for g, per in enumerate(grp.per_period):
        ph = _periodic_phase(grp.cfg_d, rng, per, cap)
        k0 = math.floor((t0 - ph) / per)
        ka = math.ceil((0.0 - ph) / per)  # the first slot at or after time 0
        k = np.arange(k0, max(k0, ka), dtype=np.int64)
        t = ph + per * k + (cfg.period_jitter * per) * _std_normals(rng, dc, k.size)
        keep = (t >= t0) & (t < 0.0)
        phases.append(ph)
        next_slot.append(ka)
        times.append(t[keep])
        labels.append(np.full(int(keep.sum()), g, dtype=np.int64))
    t_all, lab, n_one = _other_runs(cfg, grp, rng, dc, t0, 0.0, times, labels)
    tpl, base_dur, sig, dur, _ = _templates_and_runs(cfg, grp, rng, dc, lab, n_one)
    refit = _fit_groups(cfg, tpl, n_grp)  # (no draw from ``rng``: the history's requests)
    history = _history_log(cfg, tpl, n_grp, lab, t_all, dur, t_all.size)
    # (the groups' rows: what their future runs submit)
    tpl_g = _Templates(
        tpl.high[:n_grp].copy(),
        tpl.models[:n_grp].copy(),
        tpl.req[:n_grp].copy(),
        tpl.constrained[:n_grp].copy(),
        tpl.set_idx[:n_grp].copy(),
        np.zeros(0),
        tpl.users[:n_grp].copy(),
        tpl.cpu_noise[:n_grp].copy(),
    )
    return ClusterPast(
        grp,
        phases,
        next_slot,
        tpl_g,
        base_dur[:n_grp].copy(),
        sig[:n_grp].copy(),
        history,
        *_group_meta(grp),
        refit,
    )


#: ``SyntheticWorkloadConfig``'s field names, in order (:func:`_past_key`).
_FIELDS = tuple(SyntheticWorkloadConfig.__dataclass_fields__)
#: Pasts drawn in this process, by configuration (:func:`_past_key`); the latest few kept.
_PASTS: OrderedDict[tuple[object, ...], ClusterPast] = OrderedDict()
_PASTS_CAP = 8


#: Field values that are no mapping, told by their exact type (``isinstance(v, Mapping)``
#: asks the ABC's hook, ~40 of them a reset).
_PLAIN = (float, int, str, bool, tuple, type(None))


def _past_key(cfg: SyntheticWorkloadConfig) -> tuple[object, ...]:
    """Every field of ``cfg`` as a hashable value (a mapping as its items, in order: the
    draws index them in order)."""
    out = []
    for f in _FIELDS:
        v = getattr(cfg, f)
        if type(v) in _PLAIN or not isinstance(v, Mapping):
            out.append((f, v))
        else:
            out.append((f, tuple(v.items())))
    return tuple(out)


def shared_past(cfg: SyntheticWorkloadConfig) -> ClusterPast:
    """The cluster's past under ``cfg`` (``past: shared``): drawn from ``past_seed`` at the
    first call, then the same object (the process keeps the latest :data:`_PASTS_CAP`; a
    draw again gives the same values in any process)."""
    key = _past_key(cfg)
    past = _PASTS.get(key)
    if past is not None:
        _PASTS.move_to_end(key)
        return past
    past = _PASTS[key] = _draw_past(cfg)
    while len(_PASTS) > _PASTS_CAP:
        _PASTS.popitem(last=False)
    return past


def _future(
    cfg: SyntheticWorkloadConfig, past: ClusterPast, rng: np.random.Generator, horizon_s: float
) -> SyntheticWorkload:
    """``past: shared``: the submissions of ``[0, horizon_s)`` from ``rng``, the groups'
    continuing ``past``'s (their periodic slots from ``next_slot`` on, jittered afresh; their
    sweeps; their templates) and new one-off jobs; then every run's time and memory use."""
    grp = past.groups
    n_per, n_grp = grp.n_per, past.n_grp
    dc = draw_capsule(rng)
    times: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    if n_per:
        pers = grp.per_period
        sizes = [
            max(0, math.ceil((horizon_s - ph) / per) + 1 - ka)
            for ph, per, ka in zip(past.phases, pers, past.next_slot, strict=True)
        ]
        n_slots = sum(sizes)
        t_out = np.empty(n_slots)
        g_out = np.empty(n_slots, dtype=np.intp)
        m = _slot_times(
            past.phases,
            past.next_slot,
            pers,
            [cfg.period_jitter * p for p in pers],
            _std_normals(rng, dc, n_slots),
            sizes,
            0.0,
            horizon_s,
            t_out,
            g_out,
        )
        times.append(t_out[:m])
        labels.append(g_out[:m].astype(np.int64, copy=False))
    t_all, lab, n_one = _other_runs(cfg, grp, rng, dc, 0.0, horizon_s, times, labels)
    new = _draw_templates(cfg, rng, dc, n_one, 0)
    g = past.templates
    tpl = _Templates(
        *(np.concatenate([getattr(g, f), getattr(new, f)]) for f in _Templates.__dataclass_fields__)
    )
    base_dur = np.concatenate([past.base, new.one_base])
    sig = np.concatenate([past.sig, np.zeros(n_one)])
    dur, use = _run_draws(cfg, rng, dc, base_dur, sig, lab)
    jobs = _job_specs(cfg, tpl, n_grp, lab, t_all, dur, use)
    return SyntheticWorkload(
        jobs, past.history, past.pattern, past.period_s, past.batch_inference, past
    )


_init_c_draws()
