"""SenseTime Helios (Hu et al., SC'21) ``cluster_log.csv`` of ``S-Lab-System-Group/HeliosData``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.workload.loaders._common import (
    MODEL_SEED,
    Columns,
    TraceLoad,
    assign_models,
    build_jobs,
    day_origin,
    numeric,
    read_csv,
    timestamps,
)


def read_helios(
    path: Path | str,
    *,
    max_jobs: int | None = None,
    window_s: tuple[float, float] | None = None,
    model_seed: int = MODEL_SEED,
) -> TraceLoad:
    """Read a Helios cluster log (``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,
    start_time,end_time,duration,queue``; ``vc`` optional).

    Mapping: one row = one OFFLINE job of ``gpu_num`` whole GPUs (Helios has no fractional
    requests or GPU types); ``submit_time`` -> ``submit_s`` from midnight of the first day;
    ``duration`` (s) -> ``work_s``; ``cpu_num / gpu_num`` -> vCPUs per GPU (the model's typical
    figure when ``cpu_num`` is absent); ``user`` (else ``vc``) -> ``user``. Jobs of every ``state``
    are kept (a cancelled or failed job still occupied its GPUs for ``duration``). Rows with
    ``gpu_num`` 0 (CPU jobs) are skipped and counted. Model classes are a seeded draw.

    Raises:
        TraceError: Missing column, bad value (e.g. negative ``duration``).
    """
    df = read_csv(path, ["gpu_num", "submit_time", "duration"])
    gpus = numeric(df, "gpu_num", path, lo=0, integer=True).to_numpy().astype(int)
    dur = numeric(df, "duration", path, lo=0).to_numpy()
    sub = timestamps(df, "submit_time", path).to_numpy()
    rows = np.flatnonzero(gpus >= 1)
    models = assign_models(len(df), model_seed)[rows]
    if "cpu_num" in df:
        cpu = numeric(df, "cpu_num", path, lo=0, optional=True).to_numpy()[rows] / gpus[rows]
        fallback = np.array([ZOO[m].cpu_cores for m in models], dtype=float)
        cpu = np.where(np.isfinite(cpu), cpu, fallback)
    else:
        cpu = np.array([ZOO[m].cpu_cores for m in models], dtype=float)
    user_col = "user" if "user" in df else ("vc" if "vc" in df else None)
    users = df[user_col].astype(str).str.strip().tolist() if user_col else None
    cols = Columns(
        submit_s=sub[rows] - day_origin(sub[rows]),
        work_s=dur[rows],
        num_gpus=gpus[rows],
        gpu_frac=np.ones(rows.size),
        cpu_cores=cpu,
        models=models,
        users=[users[i] for i in rows.tolist()] if users is not None else None,
    )
    skipped = {"cpu_only": int(len(df) - rows.size)}
    return build_jobs(cols, path, len(df), skipped=skipped, max_jobs=max_jobs, window_s=window_s)
