"""Online inference services: request-rate curves, SLOs and footprints.

MuxFlow (Zhao et al., "MuxFlow: Efficient and Safe GPU Sharing in Large-Scale Production Deep
Learning Clusters"; notes in ``../shared/seeds/000_*.txt``) observed online services whose GPU
load is smooth over minutes and periodic over days, at 20-190 queries/s per service, in models
spanning CNNs, GNNs and language models. Each service becomes one ONLINE :class:`JobSpec` whose
:class:`ServiceSpec` carries a sinusoidal daily rate curve; the simulator adds slow multiplicative
noise (``noise_frac``) from the episode seed.

SLO: a multiple (drawn in ``[slo_factor_min, slo_factor_max]``, default 5-10x) of the solo
V100 latency of one batch, ``zoo.ZOO[model].batch_a_ms + batch_c_ms * batch`` (fitted on
iGniter's V100 measurements where the model has them), floored at ``slo_floor_ms``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.workload.job import MODEL_CLASSES, JobKind, JobSpec, ServiceSpec, new_spec
from gpu_sharing_env.workload.synthetic import _choice_p, _uniforms, draw_capsule

#: Inference model mix (ASSUMPTION): vision (resnet50, mobilenet, yolov3), language (bert,
#: gpt2) and recommendation (deepfm, ncf) services, the families MuxFlow serves online.
DEFAULT_SERVICE_MIX: Mapping[str, float] = {
    "resnet50": 0.20,
    "mobilenet": 0.10,
    "yolov3": 0.10,
    "bert": 0.20,
    "gpt2": 0.05,
    "deepfm": 0.20,
    "ncf": 0.15,
}
#: Serving batch size per model class (ASSUMPTION: small batches for latency-bound vision and
#: language models, large ones for embedding-bound recommendation models).
SERVING_BATCH: Mapping[str, int] = {
    "resnet50": 8,
    "mobilenet": 16,
    "yolov3": 4,
    "bert": 8,
    "gpt2": 1,
    "deepfm": 64,
    "ncf": 64,
}
#: Serving GPU memory per model class, GB (ASSUMPTION: weights + activations of one batch +
#: framework context; inference needs no optimiser state, so well below training footprints).
SERVING_MEM_GB: Mapping[str, float] = {
    "resnet50": 2.0,
    "mobilenet": 1.0,
    "yolov3": 3.0,
    "bert": 3.0,
    "gpt2": 4.0,
    "deepfm": 2.0,
    "ncf": 1.0,
}


@dataclass(frozen=True)
class ServiceWorkloadConfig:
    """Parameters of :func:`generate_services`."""

    num_services: int = 4
    """Number of services."""
    model_mix: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SERVICE_MIX))
    """Model-class weights (:data:`DEFAULT_SERVICE_MIX`); models without a
    :data:`SERVING_BATCH` entry serve batches of 8 and use ``zoo`` mem_gb / 4."""
    peak_rps_min: float = 20.0
    """Smallest daily peak, queries/s (MuxFlow: 20-190 queries/s per service)."""
    peak_rps_max: float = 190.0
    """Largest daily peak, queries/s (MuxFlow)."""
    max_load: float = 0.6
    """Peak demand is capped at this fraction of the service's solo capacity on the reference
    GPU (``batch / latency``) so that every service is feasible alone (ASSUMPTION)."""
    trough_ratio_min: float = 0.2
    """Smallest base/peak ratio. MuxFlow: online GPU utilisation swings widely within a day
    (Fig. 3); 0.2-0.5 is an ASSUMPTION."""
    trough_ratio_max: float = 0.5
    """Largest base/peak ratio."""
    peak_hour: float = 20.0
    """Mean hour of the daily peak (ASSUMPTION: user-facing traffic peaks in the evening)."""
    peak_hour_jitter: float = 2.0
    """Per-service peak hour is uniform in ``peak_hour +- jitter``."""
    period_s: float = 86_400.0
    """Period of the rate curve (MuxFlow: periodic over days)."""
    noise_frac: float = 0.05
    """Multiplicative rate noise the simulator applies (smooth over minutes)."""
    slo_factor_min: float = 5.0
    """Smallest SLO as a multiple of the solo batch latency."""
    slo_factor_max: float = 10.0
    """Largest SLO multiple."""
    slo_floor_ms: float = 10.0
    """No SLO below this (MuxFlow: ~10 ms extra latency is imperceptible for recommendation and
    translation services)."""
    cpu_cores: float = 4.0
    """vCPUs per service instance (ASSUMPTION)."""
    lifetime_s: float = 0.0
    """Service lifetime (``work_s``); 0 = the whole horizon."""
    submit_s: float = 0.0
    """Submission time of every service."""
    priority: int = 10
    """Scheduling priority (online first, as in AntMan / PB-time-sharing)."""

    def __post_init__(self) -> None:
        _check(self.num_services >= 0, "num_services", "must be >= 0")
        _check(len(self.model_mix) > 0, "model_mix", "must not be empty")
        for m, w in self.model_mix.items():
            _check(m in MODEL_CLASSES, "model_mix", f"unknown model class {m!r}")
            _check(w >= 0 and math.isfinite(w), "model_mix", f"weight of {m!r} must be >= 0")
        _check(sum(self.model_mix.values()) > 0, "model_mix", "weights must not all be 0")
        _check(0 < self.peak_rps_min <= self.peak_rps_max, "peak_rps_min", "0 < min <= max")
        _check(0 < self.max_load <= 1, "max_load", "must be in (0, 1]")
        lo, hi = self.trough_ratio_min, self.trough_ratio_max
        _check(0 <= lo <= hi <= 1, "trough_ratio_min", "0 <= min <= max <= 1")
        _check(0 <= self.peak_hour < 24, "peak_hour", "must be in [0, 24)")
        _check(0 <= self.peak_hour_jitter <= 12, "peak_hour_jitter", "must be in [0, 12]")
        _check(self.period_s > 0, "period_s", "must be > 0")
        _check(0 <= self.noise_frac < 1, "noise_frac", "must be in [0, 1)")
        _check(0 < self.slo_factor_min <= self.slo_factor_max, "slo_factor_min", "0 < min <= max")
        _check(self.slo_floor_ms >= 0, "slo_floor_ms", "must be >= 0")
        _check(self.cpu_cores >= 0, "cpu_cores", "must be >= 0")
        _check(self.lifetime_s >= 0, "lifetime_s", "must be >= 0")
        _check(self.submit_s >= 0, "submit_s", "must be >= 0")


def _check(ok: bool, name: str, rule: str) -> None:
    if not ok:
        raise ValueError(f"{name}: {rule}")


def solo_latency_ms(model: str, batch: int) -> float:
    """Solo latency of one batch on the reference GPU at 100 % SM (``zoo`` linear fit)."""
    p = ZOO[model]
    return p.batch_a_ms + p.batch_c_ms * batch


#: ``JobSpec``'s defaults of the fields a service leaves at them (``true_mem_gb``,
#: ``gpu_types``, ``checkpoint_interval_s``, ``group``), for :data:`new_spec`'s positional call.
_SVC_DEFAULTS: tuple[object, ...] = tuple(
    f.default
    for f in fields(JobSpec)
    if f.name in ("true_mem_gb", "gpu_types", "checkpoint_interval_s", "group")
)


def generate_services(
    cfg: ServiceWorkloadConfig, rng: np.random.Generator, horizon_s: float, first_job_id: int
) -> list[JobSpec]:
    """Draw ``cfg.num_services`` ONLINE jobs with ids ``first_job_id, first_job_id + 1, ...``.

    Each service holds one whole GPU's worth of request (``gpu_frac`` 1; offline work shares it
    through the sharing modes). ``work_s`` is the lifetime (``cfg.lifetime_s`` or the horizon),
    ``est_work_s`` equals it (a service's lifetime is known). Deterministic given ``rng``.

    Args:
        cfg: Generator parameters.
        rng: Source of randomness.
        horizon_s: Episode length; the default lifetime.
        first_job_id: Id of the first service (after the offline jobs).
    """
    n = cfg.num_services
    if n == 0:
        return []
    life = cfg.lifetime_s if cfg.lifetime_s > 0 else float(horizon_s)
    if not (math.isfinite(life) and life > 0):
        raise ValueError(f"horizon_s: must be > 0 when lifetime_s is 0 (got {horizon_s})")
    names = list(cfg.model_mix)
    w = np.array([cfg.model_mix[m] for m in names], dtype=float)
    # (``_choice_p``: ``rng.choice(len(names), size=n, p=...)``'s indices from the same draws;
    # the arrays as lists of their doubles: a float's arithmetic below is a float64's)
    models = [names[i] for i in _choice_p(rng, w / w.sum(), n).tolist()]
    # (``rng.uniform(lo, hi, size=n)`` as ``synthetic._uniforms``: compiled, numpy's own C
    # draw on the same bit generator, without the method's argument handling)
    dc = draw_capsule(rng)
    peak_draw = _uniforms(rng, dc, cfg.peak_rps_min, cfg.peak_rps_max, n).tolist()
    trough = _uniforms(rng, dc, cfg.trough_ratio_min, cfg.trough_ratio_max, n).tolist()
    jit = cfg.peak_hour_jitter
    peak_h = (cfg.peak_hour + _uniforms(rng, dc, -jit, jit, n)).tolist()
    slo_f = _uniforms(rng, dc, cfg.slo_factor_min, cfg.slo_factor_max, n).tolist()
    out: list[JobSpec] = []
    online = JobKind.ONLINE
    true_mem, types, ckpt, group = _SVC_DEFAULTS
    for i, model in enumerate(models):
        batch = int(SERVING_BATCH.get(model, 8))
        lat_ms = solo_latency_ms(model, batch)
        capacity_rps = batch / (lat_ms / 1000.0)
        peak = float(min(peak_draw[i], cfg.max_load * capacity_rps))
        # ServiceSpec's sine peaks a quarter period after phase_s.
        phase = (peak_h[i] % 24.0) * 3600.0 * cfg.period_s / 86_400.0 - cfg.period_s / 4.0
        svc = ServiceSpec(
            slo_ms=round(max(cfg.slo_floor_ms, float(slo_f[i]) * lat_ms), 2),
            batch_size=batch,
            base_rps=round(peak * float(trough[i]), 3),
            peak_rps=round(peak, 3),
            period_s=cfg.period_s,
            phase_s=float(phase % cfg.period_s),
            noise_frac=cfg.noise_frac,
        )
        mem = float(SERVING_MEM_GB.get(model, ZOO[model].mem_gb / 4.0))
        out.append(
            new_spec(  # (``JobSpec(...)``'s spec and checks, its fields in their order)
                first_job_id + i,  # job_id
                online,  # kind
                model,
                cfg.submit_s,
                1,  # num_gpus
                1.0,  # gpu_frac
                mem,  # mem_gb
                cfg.cpu_cores,
                life,  # work_s
                life,  # est_work_s
                true_mem,  # (-1.0: mem_gb)
                types,
                ckpt,
                group,
                f"svc{i}",  # user
                cfg.priority,
                svc,  # service
            )
        )
    return out
