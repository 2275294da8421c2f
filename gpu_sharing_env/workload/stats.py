"""Distribution summaries of a workload, and the PAI figures the synthetic generator targets.

:func:`summarize` turns any ``list[JobSpec]`` (a trace or a generated workload) into a
:class:`WorkloadStats`; :func:`stats_table` renders one or more of them side by side, optionally
with :data:`PAI_TARGETS` (each with its citation). ``scripts/trace.py stats`` prints these.

Conventions: hour of day is ``submit_s mod 86,400`` (loaders start the clock at midnight of the
trace's first day when the trace has wall-clock times; openb has none, so its profile is relative
to its own time 0); request bins count jobs by GPUs asked for (``<1`` = a fraction of one GPU);
"recurring" = in a group of at least 5 jobs, PAI's definition; durations are ``work_s``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpu_sharing_env.workload.job import JobSpec

REQUEST_BINS: tuple[str, ...] = ("<1", "1", "2", "3-4", "5-7", "8+")
RECURRING_MIN = 5


@dataclass(frozen=True)
class Target:
    """A figure from the PAI study the synthetic defaults aim at."""

    value: float
    tolerance: str
    source: str


#: What the synthetic generator's defaults target (Weng et al., "MLaaS in the Wild", NSDI'22).
#: Keys are :class:`WorkloadStats` metric names.
PAI_TARGETS: dict[str, Target] = {
    "frac_request_share": Target(
        0.60, ">= 0.5", "NSDI'22 Sec. 3.3 / Fig. 6: median GPU request is 0.5 GPU"
    ),
    "median_gpu_request": Target(0.5, "= 0.5", "NSDI'22 Sec. 3.3: median request 0.5 GPU"),
    "gang_share": Target(
        0.12, "0.05-0.2", "assumption: between Philly (7 % multi-GPU) and PAI's gang-heavy mix"
    ),
    "span_p99_p1_orders": Target(
        4.0, ">= 3.5", "NSDI'22 Fig. 5: run times span four orders of magnitude"
    ),
    "duration_p50_s": Target(
        900.0, "< Philly's 1,144 s", "NSDI'22 Fig. 5: PAI runs shorter than Philly"
    ),
    "diurnal_peak_trough": Target(
        3.0, "2-4.5", "NSDI'22 Fig. 4: diurnal submissions, morning peak (ratio: assumption)"
    ),
    "recurring_share": Target(
        0.65, "+- 0.05", "NSDI'22 Sec. 5.2 / Fig. 10: 65 % of tasks recur >= 5 times"
    ),
    "type_constrained_share": Target(
        0.06, "+- 0.02", "NSDI'22 Sec. 3.1: only 6 % of tasks ask for a GPU type"
    ),
    "top5pct_user_share": Target(
        0.77, "+- 0.1", "NSDI'22 Sec. 3.1: top 5 % of users submit ~77 % of instances"
    ),
}


@dataclass(frozen=True)
class WorkloadStats:
    """A workload's distribution summary (see the module docstring for conventions)."""

    jobs: int
    offline: int
    online: int
    span_h: float
    arrivals_per_h: float
    diurnal_profile: tuple[float, ...]
    diurnal_peak_trough: float
    request_mix: dict[str, float]
    frac_request_share: float
    median_gpu_request: float
    gang_share: float
    duration_q: dict[str, float]
    span_p99_p10_orders: float
    span_p99_p1_orders: float
    recurring_share: float
    type_constrained_share: float
    top5pct_user_share: float
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def duration_p50_s(self) -> float:
        return self.duration_q["p50"]

    def metrics(self) -> dict[str, float]:
        """Flat metric name -> value (the rows of :func:`stats_table`)."""
        out: dict[str, float] = {
            "jobs": self.jobs,
            "offline_share": self.offline / self.jobs if self.jobs else math.nan,
            "online_share": self.online / self.jobs if self.jobs else math.nan,
            "span_h": self.span_h,
            "arrivals_per_h": self.arrivals_per_h,
            "diurnal_peak_trough": self.diurnal_peak_trough,
        }
        out.update({f"request_{k}": v for k, v in self.request_mix.items()})
        out["frac_request_share"] = self.frac_request_share
        out["median_gpu_request"] = self.median_gpu_request
        out["gang_share"] = self.gang_share
        out.update({f"duration_{k}_s": v for k, v in self.duration_q.items()})
        out["span_p99_p10_orders"] = self.span_p99_p10_orders
        out["span_p99_p1_orders"] = self.span_p99_p1_orders
        out["recurring_share"] = self.recurring_share
        out["type_constrained_share"] = self.type_constrained_share
        out["top5pct_user_share"] = self.top5pct_user_share
        out.update(self.extra)
        return out


def _bin(g: float) -> str:
    if g < 1:
        return "<1"
    if g <= 2:
        return str(int(g))
    if g <= 4:
        return "3-4"
    return "5-7" if g < 8 else "8+"


def diurnal_profile(submit_s: np.ndarray) -> np.ndarray:
    """Mean arrivals per hour at each hour of day (24 values) over the covered hours."""
    if submit_s.size == 0:
        return np.zeros(24)
    hours = np.floor(submit_s / 3600.0).astype(np.int64)
    counts = np.bincount(hours % 24, minlength=24).astype(float)
    covered = np.arange(hours.min(), hours.max() + 1) % 24
    n_hours = np.bincount(covered, minlength=24).astype(float)
    return np.divide(counts, n_hours, out=np.zeros(24), where=n_hours > 0)


def summarize(jobs: Sequence[JobSpec], horizon_s: float | None = None) -> WorkloadStats:
    """Summarize ``jobs``.

    Args:
        jobs: Any workload.
        horizon_s: Submission window for the mean arrival rate; default the span from the
            first to the last submission.
    """
    n = len(jobs)
    offline = [j for j in jobs if not j.online]
    submit = np.array([j.submit_s for j in offline], dtype=float)
    span = (
        (float(submit.max() - submit.min()) if submit.size else 0.0)
        if horizon_s is None
        else horizon_s
    )
    rate = len(offline) / (span / 3600.0) if span > 0 else math.nan
    prof = diurnal_profile(submit)
    lo = float(prof[prof > 0].min()) if (prof > 0).any() else math.nan
    peak_trough = float(prof.max() / lo) if lo == lo and lo > 0 else math.nan
    gpus = np.array([j.num_gpus * j.gpu_frac for j in offline], dtype=float)
    m = max(1, len(offline))
    bins = Counter(_bin(g) for g in gpus)
    mix = {b: bins.get(b, 0) / m for b in REQUEST_BINS}
    dur = np.array([j.work_s for j in offline], dtype=float)
    qs = {"p1": 1, "p10": 10, "p50": 50, "p90": 90, "p99": 99}
    dq = {k: float(np.percentile(dur, q)) if dur.size else math.nan for k, q in qs.items()}
    sizes = Counter(j.group for j in offline if j.group)
    recurring = sum(1 for j in offline if j.group and sizes[j.group] >= RECURRING_MIN)
    users = Counter(j.user for j in offline if j.user)
    top = sorted(users.values(), reverse=True)
    k_top = max(1, math.ceil(0.05 * len(top))) if top else 0
    top_share = sum(top[:k_top]) / sum(top) if top else math.nan
    return WorkloadStats(
        jobs=n,
        offline=len(offline),
        online=n - len(offline),
        span_h=span / 3600.0,
        arrivals_per_h=rate,
        diurnal_profile=tuple(float(x) for x in prof),
        diurnal_peak_trough=peak_trough,
        request_mix=mix,
        frac_request_share=mix["<1"],
        median_gpu_request=float(np.median(gpus)) if gpus.size else math.nan,
        gang_share=float(np.mean(gpus > 1)) if gpus.size else math.nan,
        duration_q=dq,
        span_p99_p10_orders=_orders(dq["p99"], dq["p10"]),
        span_p99_p1_orders=_orders(dq["p99"], dq["p1"]),
        recurring_share=recurring / m,
        type_constrained_share=sum(1 for j in offline if j.gpu_types) / m,
        top5pct_user_share=top_share,
    )


def _orders(hi: float, lo: float) -> float:
    return math.log10(hi / lo) if hi > 0 and lo > 0 else math.nan


def _fmt(v: float) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    if float(v).is_integer() and abs(v) >= 10:
        return f"{int(v):,}"
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def stats_table(
    columns: dict[str, WorkloadStats], *, targets: dict[str, Target] | None = None
) -> pd.DataFrame:
    """One row per metric, one column per workload; with ``targets``, add the target value,
    its tolerance and its source for the metrics that have one."""
    names = list(next(iter(columns.values())).metrics()) if columns else []
    data: dict[str, list[str]] = {}
    for label, st in columns.items():
        met = st.metrics()
        data[label] = [_fmt(met.get(k, math.nan)) for k in names]
    if targets is not None:
        data["PAI target"] = [_fmt(targets[k].value) if k in targets else "" for k in names]
        data["tolerance"] = [targets[k].tolerance if k in targets else "" for k in names]
        data["source"] = [targets[k].source if k in targets else "" for k in names]
    return pd.DataFrame(data, index=pd.Index(names, name="metric"))


def profile_table(columns: dict[str, WorkloadStats]) -> pd.DataFrame:
    """The 24-bin diurnal profiles (arrivals per hour at each hour of day) side by side."""
    return pd.DataFrame(
        {k: [round(x, 2) for x in st.diurnal_profile] for k, st in columns.items()},
        index=pd.Index(range(24), name="hour"),
    )


def trace_report(
    fmt: str,
    source: str,
    *,
    seed: int | None = None,
    horizon_h: float = 336.0,
    max_jobs: int | None = None,
    profile: bool = True,
) -> str:
    """The text ``scripts/trace.py stats`` prints.

    Args:
        fmt: A trace format (``loaders.READERS`` key) or ``"synthetic"``.
        source: Trace path; for ``synthetic``, ``"-"`` or a seed.
        seed: Synthetic seed (overrides a seed given as ``source``; default 0).
        horizon_h: Synthetic submission window.
        max_jobs: Keep the first N jobs.
        profile: Append the 24-bin diurnal profile.

    Raises:
        TraceError: Unknown format, bad synthetic source, malformed trace.
    """
    from gpu_sharing_env.workload.loaders import TraceError, read_trace
    from gpu_sharing_env.workload.synthetic import SyntheticWorkloadConfig, generate_jobs

    lines: list[str] = []
    if fmt == "synthetic":
        if seed is None:
            try:
                seed = 0 if source in ("-", "") else int(source)
            except ValueError:
                raise TraceError(
                    f"{source}: for --format synthetic give '-' or an integer seed"
                ) from None
        if not (math.isfinite(horizon_h) and horizon_h > 0):
            raise TraceError(f"--horizon-h: must be > 0 (got {horizon_h})")
        cfg = SyntheticWorkloadConfig()
        jobs = generate_jobs(cfg, np.random.default_rng(seed), horizon_h * 3600.0)
        jobs = jobs[:max_jobs] if max_jobs is not None else jobs
        st = summarize(jobs, horizon_h * 3600.0 if max_jobs is None else None)
        lines.append(
            f"synthetic workload: default SyntheticWorkloadConfig, seed {seed}, "
            f"horizon {horizon_h:g} h"
        )
        table = stats_table({"synthetic": st}, targets=PAI_TARGETS)
        cols = {"synthetic": st}
    else:
        load = read_trace(fmt, source, max_jobs=max_jobs)
        st = summarize(load.jobs)
        skipped = ", ".join(f"{k} {v:,}" for k, v in load.skipped.items()) or "none"
        lines.append(
            f"{source} ({fmt}): {load.rows:,} rows read, {len(load.jobs):,} jobs; "
            f"skipped: {skipped}; censored {len(load.censored_ids):,}; "
            f"run time raised to 1 s: {load.clamped:,}"
        )
        table = stats_table({fmt: st})
        cols = {fmt: st}
    with pd.option_context("display.width", 200, "display.max_colwidth", 90):
        lines.append(table.to_string())
        if profile:
            lines.append("\ndiurnal profile (mean arrivals per hour at each hour of day):")
            lines.append(profile_table(cols).T.to_string())
    return "\n".join(lines)
