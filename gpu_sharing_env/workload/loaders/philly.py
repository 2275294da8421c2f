"""Microsoft Philly (Jeon et al., ATC'19): Sia's processed ``philly.csv`` and the public raw
``cluster_job_log`` JSON of ``msr-fiddle/philly-traces``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.workload.loaders._common import (
    MODEL_SEED,
    Columns,
    TraceError,
    TraceLoad,
    assign_models,
    build_jobs,
    day_origin,
    fail,
    first_bad,
    numeric,
    read_csv,
    read_json_list,
    timestamps,
)

#: Philly records no CPU request; ASSUMPTION: the model class's typical vCPUs per GPU.
_CPU = {m: p.cpu_cores for m, p in ZOO.items()}


def read_philly(
    path: Path | str,
    *,
    max_jobs: int | None = None,
    window_s: tuple[float, float] | None = None,
    model_seed: int = MODEL_SEED,
) -> TraceLoad:
    """Read Sia's processed Philly trace (``timestamp,duration,num_gpus,gpu_time,cluster``).

    Mapping: one row = one OFFLINE job of ``num_gpus`` whole GPUs (Philly has no fractional
    requests or GPU types); ``timestamp`` (submission date-time) -> ``submit_s`` counted from
    midnight of the first day (hour of day is kept); ``duration`` (s) -> ``work_s``; ``cluster``
    (virtual cluster) -> ``user``. Rows with ``num_gpus`` 0 are skipped and counted. Model
    classes are a seeded draw (the trace names none).

    Raises:
        TraceError: Missing column, bad value (e.g. ``duration`` NaN or negative).
    """
    df = read_csv(path, ["timestamp", "duration", "num_gpus"])
    ts = timestamps(df, "timestamp", path)
    dur = numeric(df, "duration", path, lo=0)
    gpus = numeric(df, "num_gpus", path, lo=0, integer=True).to_numpy().astype(int)
    rows = np.flatnonzero(gpus >= 1)
    secs = ts.to_numpy()
    models = assign_models(len(df), model_seed)[rows]
    users = df["cluster"].astype(str).str.strip().tolist() if "cluster" in df else None
    cols = Columns(
        submit_s=secs[rows] - day_origin(secs[rows]),
        work_s=dur.to_numpy()[rows],
        num_gpus=gpus[rows],
        gpu_frac=np.ones(rows.size),
        cpu_cores=np.array([_CPU[m] for m in models], dtype=float),
        models=models,
        users=[users[i] for i in rows.tolist()] if users is not None else None,
    )
    skipped = {"cpu_only": int(len(df) - rows.size)}
    return build_jobs(cols, path, len(df), skipped=skipped, max_jobs=max_jobs, window_s=window_s)


def _get(entry: Any, key: str, path: Path | str, row: int) -> Any:
    if not isinstance(entry, dict):
        raise TraceError(f"{path}: row {row}: must be a JSON object (got {type(entry).__name__})")
    if key not in entry:
        raise fail(path, row, key, "required field is missing")
    return entry[key]


def _time(value: Any) -> str:
    return "" if value is None or str(value).strip() in ("", "None", "null") else str(value)


def read_philly_raw(
    path: Path | str,
    *,
    max_jobs: int | None = None,
    window_s: tuple[float, float] | None = None,
    model_seed: int = MODEL_SEED,
) -> TraceLoad:
    """Read the raw Philly ``cluster_job_log`` (a JSON array; JSON lines also accepted).

    Each entry: ``jobid, status, vc, user, submitted_time, attempts[{start_time, end_time,
    detail[{ip, gpus[...]}]}]``. Mapping: GPUs = GPUs listed across the first attempt's
    ``detail``; ``work_s`` = last attempt's end - first attempt's start (retries included, as in
    the Philly analysis notebook); ``vc`` -> ``user``; ``submit_s`` from midnight of the first day.
    Jobs with no attempt or no start are skipped (``never_started``), with no GPUs ``cpu_only``;
    a missing last end time is censored at the latest time in the file. Rows are 1-based entries.

    Raises:
        TraceError: Not a JSON array, missing field, bad time, end before start.
    """
    data = read_json_list(path)
    sub, start, end, gpus, vcs, names = [], [], [], [], [], []
    for k, entry in enumerate(data, start=1):
        sub.append(_time(_get(entry, "submitted_time", path, k)))
        attempts = _get(entry, "attempts", path, k)
        if not isinstance(attempts, list):
            raise fail(path, k, "attempts", "must be a list", attempts)
        first = attempts[0] if attempts else {}
        last = attempts[-1] if attempts else {}
        if not isinstance(first, dict) or not isinstance(last, dict):
            raise fail(path, k, "attempts", "must be a list of objects", attempts)
        start.append(_time(first.get("start_time")))
        end.append(_time(last.get("end_time")))
        detail = first.get("detail") or []
        if not isinstance(detail, list):
            raise fail(path, k, "attempts.detail", "must be a list", detail)
        n = 0
        for d in detail:
            g = d.get("gpus") if isinstance(d, dict) else None
            if not isinstance(g, list):
                raise fail(path, k, "attempts.detail.gpus", "must be a list", g)
            n += len(g)
        gpus.append(n)
        vcs.append(str(entry.get("vc") or ""))
        names.append(str(entry.get("jobid") or ""))
    import pandas as pd  # date-time parsing (timestamps); imported only when a trace needs it

    df = pd.DataFrame(
        {"submitted_time": sub, "attempts.start_time": start, "attempts.end_time": end}
    )
    t_sub = timestamps(df, "submitted_time", path).to_numpy()
    t_start = timestamps(df, "attempts.start_time", path, optional=True).to_numpy()
    t_end = timestamps(df, "attempts.end_time", path, optional=True).to_numpy()
    with np.errstate(invalid="ignore"):
        first_bad(t_end < t_start, df, "attempts.end_time", path, "must be >= start_time")
    g = np.asarray(gpus, dtype=int)
    started = np.isfinite(t_start)
    rows = np.flatnonzero(started & (g >= 1))
    if rows.size == 0:
        raise TraceError(f"{path}: no GPU job with a start time")
    latest = float(np.nanmax(np.fmax(np.fmax(t_sub, t_start), t_end)))
    ends = np.where(np.isnan(t_end), latest, t_end)
    models = assign_models(len(df), model_seed, names)[rows]
    cols = Columns(
        submit_s=t_sub[rows] - day_origin(t_sub[rows]),
        work_s=(ends - t_start)[rows],
        num_gpus=g[rows],
        gpu_frac=np.ones(rows.size),
        cpu_cores=np.array([_CPU[m] for m in models], dtype=float),
        models=models,
        users=[vcs[i] for i in rows.tolist()],
        censored=np.isnan(t_end)[rows],
    )
    skipped = {
        "never_started": int(np.sum(~started)),
        "cpu_only": int(np.sum(started & (g < 1))),
    }
    return build_jobs(cols, path, len(df), skipped=skipped, max_jobs=max_jobs, window_s=window_s)
