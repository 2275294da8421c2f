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
field: a job's GPU activity is its model class's ``duty`` in ``gpu_sharing_env.zoo``. The default
model mix weights low-duty classes (CTR, RL, GNN) as PAI reports them.

Time 0 is Monday 00:00 of the simulated week.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gpu_sharing_env.nodes import GPU_TYPE_NAMES
from gpu_sharing_env.workload.job import MODEL_CLASSES, JobKind, JobSpec
from gpu_sharing_env.zoo import ZOO

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
    """Share of jobs that belong to recurring groups repeating >= ``group_size_min`` times. PAI:
    65 % of tasks recur at least 5 times (NSDI'22 Sec. 5.2, Fig. 10)."""
    group_size_min: int = 5
    """Smallest recurring group (PAI counts groups of >= 5 instances)."""
    group_size_mean: float = 12.0
    """Mean recurring group size (min + geometric tail; ASSUMPTION)."""
    group_duration_sigma: float = 0.2
    """Lognormal sigma of run times within a group around the group's base run time. PAI:
    recurring (batch-inference) tasks have stable run times (Fig. 11); 0.2 is an ASSUMPTION."""
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
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, horizon_s: float
) -> np.ndarray:
    """Non-homogeneous Poisson arrivals by thinning (Lewis & Shedler 1979)."""
    peak = (
        cfg.arrivals_per_h
        / 3600.0
        * (7.0 / (5.0 + 2.0 * cfg.weekend_factor))
        * max(1.0, cfg.weekend_factor)
        * (1.0 + cfg.diurnal_amplitude)
    )
    n = int(rng.poisson(peak * horizon_s)) if peak > 0 else 0
    t = np.sort(rng.uniform(0.0, horizon_s, size=n))
    keep = rng.uniform(0.0, peak, size=n) < arrival_rate_per_s(cfg, t)
    return t[keep]


def _group_labels(cfg: SyntheticWorkloadConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    """Template index per job: recurring groups first (ids 0..G-1), then singletons."""
    n_rec = round(cfg.recurring_share * n)
    sizes: list[int] = []
    p = 1.0 / (cfg.group_size_mean - cfg.group_size_min + 1.0)
    while sum(sizes) < n_rec:
        sizes.append(cfg.group_size_min + int(rng.geometric(p)) - 1)
    if sizes:
        sizes[-1] -= sum(sizes) - n_rec
        if sizes[-1] < cfg.group_size_min:
            tail = sizes.pop()
            if sizes:
                sizes[-1] += tail
            else:
                n_rec = 0
    labels = np.empty(n, dtype=np.int64)
    order = rng.permutation(n)
    rec_slots = np.repeat(np.arange(len(sizes)), sizes)
    labels[order[:n_rec]] = rng.permutation(rec_slots)
    labels[order[n_rec:]] = len(sizes) + np.arange(n - n_rec)
    return labels


def _pick(rng: np.random.Generator, mix: Mapping[str, float], size: int) -> np.ndarray:
    names = list(mix)
    w = np.array([mix[m] for m in names], dtype=float)
    return np.asarray(names, dtype=object)[rng.choice(len(names), size=size, p=w / w.sum())]


def generate_jobs(
    cfg: SyntheticWorkloadConfig, rng: np.random.Generator, horizon_s: float
) -> list[JobSpec]:
    """Draw the offline jobs submitted in ``[0, horizon_s)``.

    Deterministic given ``rng``'s state. Jobs are OFFLINE, ``job_id`` 0..n-1 in submission
    order; ``work_s`` is the exclusive run time on the reference GPU (V100-16GB) and
    ``est_work_s`` equals it (attach estimates with ``estimates.attach_estimates``). Recurring
    jobs share ``group`` (``"g<k>"``) and their model, request, constraints and user; jobs
    outside groups have ``group == ""``.

    Args:
        cfg: Generator parameters.
        rng: Source of randomness.
        horizon_s: Length of the submission window.
    """
    if horizon_s <= 0:
        return []
    times = _arrivals(cfg, rng, horizon_s)
    n = times.size
    if n == 0:
        return []
    labels = _group_labels(cfg, rng, n)
    n_tpl = int(labels.max()) + 1
    counts = np.bincount(labels, minlength=n_tpl)
    in_group = counts[labels] >= cfg.group_size_min

    # Per template (a recurring group or a one-off job): what the user submits.
    high = rng.uniform(size=n_tpl) < cfg.high_gpu_share
    models = _pick(rng, cfg.model_mix, n_tpl)
    models[high] = _pick(rng, cfg.high_gpu_models, int(high.sum()))
    sizes = np.asarray(cfg.gpu_request_sizes, dtype=float)
    weights = np.asarray(cfg.gpu_request_weights, dtype=float)
    req = sizes[rng.choice(sizes.size, size=n_tpl, p=weights / weights.sum())]
    whole = sizes >= 1
    if whole.any():
        ww = weights[whole] / weights[whole].sum() if weights[whole].sum() > 0 else None
        req_high = sizes[whole][rng.choice(int(whole.sum()), size=n_tpl, p=ww)]
        req = np.where(high, req_high, req)
    other_share = cfg.type_constraint_share / max(1e-12, 1.0 - cfg.high_gpu_share)
    constrained = (rng.uniform(size=n_tpl) < other_share) & ~high
    sets = [tuple(s.split("|")) for s in cfg.type_constraint_sets]
    set_idx = rng.integers(0, max(1, len(sets)), size=n_tpl)
    base_dur = cfg.duration_median_s * np.exp(cfg.duration_sigma * rng.standard_normal(n_tpl))
    zipf = 1.0 / np.arange(1, cfg.num_users + 1) ** cfg.user_zipf_exponent
    users = rng.choice(cfg.num_users, size=n_tpl, p=zipf / zipf.sum())
    cpu_noise = np.exp(cfg.cpu_sigma * rng.standard_normal(n_tpl))

    # Per job: run-time jitter inside a group, true memory use.
    jitter = np.exp(cfg.group_duration_sigma * rng.standard_normal(n))
    dur = base_dur[labels] * np.where(in_group, jitter, 1.0)
    dur = np.clip(dur, cfg.duration_min_s, cfg.duration_max_s)
    use = np.minimum(cfg.mem_use_median * np.exp(cfg.mem_use_sigma * rng.standard_normal(n)), 0.95)
    over = rng.uniform(size=n) < cfg.mem_overuse_prob
    use = np.where(over, rng.uniform(1.05, 1.5, size=n), np.maximum(use, 0.05))

    group_name: dict[int, str] = {}  # named in order of first appearance
    jobs: list[JobSpec] = []
    # Python lists (the same values as the arrays' elements), cheaper to index per job.
    labels_l, times_l, dur_l, use_l, in_group_l = (
        labels.tolist(),
        times.tolist(),
        dur.tolist(),
        use.tolist(),
        in_group.tolist(),
    )
    models_l, req_l, high_l, constrained_l = (
        models.tolist(),
        req.tolist(),
        high.tolist(),
        constrained.tolist(),
    )
    set_idx_l, users_l, cpu_noise_l = set_idx.tolist(), users.tolist(), cpu_noise.tolist()
    for i in range(n):
        k = labels_l[i]
        model = str(models_l[k])
        r = req_l[k]
        frac = r if r < 1 else 1.0
        num_gpus = 1 if r < 1 else int(r)
        prof = ZOO[model]
        mem = frac * REF_GPU_MEM_GB if r < 1 else prof.mem_gb
        cpu = cfg.cpu_per_gpu_median * prof.cpu_cores / 4.0 * cpu_noise_l[k]
        if high_l[k]:
            types: tuple[str, ...] = tuple(cfg.high_end_types)
        elif constrained_l[k] and sets:
            types = sets[set_idx_l[k]]
        else:
            types = ()
        w = dur_l[i]
        if in_group_l[i] and k not in group_name:
            group_name[k] = f"g{len(group_name)}"
        jobs.append(
            JobSpec(
                job_id=i,
                kind=JobKind.OFFLINE,
                model=model,
                submit_s=times_l[i],
                num_gpus=num_gpus,
                gpu_frac=frac,
                mem_gb=round(mem, 2),
                cpu_cores=round(min(max(cpu, 1.0), 32.0), 1),
                work_s=w,
                est_work_s=w,
                true_mem_gb=round(mem * use_l[i], 3),
                gpu_types=types,
                checkpoint_interval_s=cfg.checkpoint_interval_s,
                group=group_name.get(k, ""),
                user=f"u{users_l[k]}",
                priority=1 if high_l[k] else 0,
            )
        )
    return jobs
