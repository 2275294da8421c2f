"""Alibaba traces: openb v2023 (FGD, ATC'23) pods and nodes; PAI v2020 (NSDI'22) machines and
tasks. Formats and mapping choices are written up in ``docs/workloads.md``.

Every reader here reads with :mod:`~gpu_sharing_env.workload.loaders._table` (the stdlib
``csv`` module, no pandas: a replay's process stays without it); ``engine="pandas"`` reads the
same file through pandas instead, with the same result (the reference of
``tests/test_trace_reader.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from gpu_sharing_env.physics.nodes import GPU_TYPE_NAMES, Interconnect, NodeSpec
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
)
from gpu_sharing_env.workload.loaders._table import numeric, read_table

#: openb ``model`` / ``gpu_spec`` names -> canonical GPU types. G1-G3 are undisclosed internal
#: codes (openb README); the mapping is an ASSUMPTION from the node shapes in
#: ``openb_node_list_gpu_node.csv``: G2 (549 nodes x 8 GPUs, 96 vCPU, 384 GiB) is the fleet's
#: volume mid-range part, taken as A10 (24 GB, Alibaba Cloud's volume GPU of 2022-23);
#: G3 (39 nodes x 8 GPUs, 128 vCPU, 768 GiB), the rarest and best-provisioned, as A100-40GB;
#: G1 (absent from the lists) as T4. Override with ``gpu_map=``.
OPENB_GPU_MODELS: dict[str, str] = {
    "T4": "T4",
    "P100": "P100",
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
    "A10": "A10",
    "G1": "T4",
    "G2": "A10",
    "G3": "A100-40GB",
}
#: openb ``qos`` -> ``JobSpec.priority``. Every pod is an OFFLINE job (the trace has no request
#: rates); LS/Guaranteed pods outrank Burstable and best-effort ones (Kubernetes QoS order).
OPENB_QOS_PRIORITY: dict[str, int] = {"guaranteed": 3, "ls": 2, "burstable": 1, "be": 0}
#: PAI ``gpu_type`` -> canonical GPU type. PAI's bare "V100" sits beside "V100M32", so it is the
#: 16 GB part. MISC (280 8-GPU machines) is undisclosed; ASSUMPTION: older low-end GPUs, which
#: PAI's reserving-and-packing policy packs together with the other low-end types, modelled as
#: P100. Override with ``gpu_map=``.
PAI_GPU_MODELS: dict[str, str] = {
    "T4": "T4",
    "P100": "P100",
    "V100": "V100-16GB",
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
    "MISC": "P100",
}
#: Header of the public ``pai_task_table.csv`` (shipped header-less with a ``.header`` file).
PAI_TASK_COLUMNS: list[str] = [
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
]
_NVLINK_TYPES = {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB"}


def _interconnect(gpu_type: str, num_gpus: int) -> Interconnect:
    """8-GPU V100/A100/H100 servers are SXM boards with NVLink (PAI: V100 machines have NVLink,
    NSDI'22 Sec. 4.1); everything else is PCIe (T4, P100 PCIe cards, A10 is PCIe-only)."""
    return Interconnect.NVLINK if num_gpus >= 8 and gpu_type in _NVLINK_TYPES else Interconnect.PCIE


def _map_type(name: str, table: Mapping[str, str], path: Path | str, row: int, col: str) -> str:
    canonical = table.get(name.strip().upper())
    if canonical is None or canonical not in GPU_TYPE_NAMES:
        raise fail(path, row, col, f"unknown GPU type (known: {', '.join(table)})", name)
    return canonical


def _upper(table: Mapping[str, str] | None, default: Mapping[str, str]) -> dict[str, str]:
    return {k.upper(): v for k, v in (table if table is not None else default).items()}


def read_openb_pods(
    path: Path | str,
    *,
    max_jobs: int | None = None,
    window_s: tuple[float, float] | None = None,
    model_seed: int = MODEL_SEED,
    gpu_map: Mapping[str, str] | None = None,
    engine: str = "csv",
) -> TraceLoad:
    """Read an openb v2023 pod list (``openb_pod_list_*.csv``).

    Mapping: one pod = one OFFLINE job; ``num_gpu`` -> ``num_gpus``; ``gpu_milli``/1000 ->
    ``gpu_frac`` for 1-GPU pods (multi-GPU pods take whole GPUs); ``cpu_milli`` -> vCPUs per
    GPU; ``gpu_spec`` (``|``-separated) -> ``gpu_types`` via :data:`OPENB_GPU_MODELS`; ``qos``
    -> ``priority`` via :data:`OPENB_QOS_PRIORITY`; ``work_s`` = ``deletion_time`` -
    ``creation_time`` (the run time is not in the trace; this includes any pending time).
    Pods with ``num_gpu`` 0 are CPU-only: skipped and counted (``skipped["cpu_only"]``). Pods
    with no ``deletion_time``, or still ``Running`` at the last deletion time in the file, are
    censored (``TraceLoad.censored_ids``). The trace clock has no wall-clock origin; time 0 is
    the trace's 0.

    Args:
        path: The CSV.
        max_jobs: Keep the first N jobs (after windowing).
        window_s: ``(start, end)`` seconds of trace time to keep; ``start`` becomes 0.
        model_seed: Seed of the model-class draw (the trace names no models).
        gpu_map: Replaces :data:`OPENB_GPU_MODELS`.
        engine: ``csv`` or ``pandas`` (the same result; see the module's docstring).

    Raises:
        TraceError: Missing column, bad value, unknown GPU type or QoS, negative duration.
    """
    req = ["cpu_milli", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time"]
    df = read_table(path, req, engine=engine)
    table = _upper(gpu_map, OPENB_GPU_MODELS)
    num_gpu = numeric(df, "num_gpu", path, lo=0, integer=True)
    cpu = numeric(df, "cpu_milli", path, lo=0)
    milli = numeric(df, "gpu_milli", path, lo=0, hi=1000)
    c = numeric(df, "creation_time", path, lo=0)
    d = numeric(df, "deletion_time", path, lo=0, optional=True)
    gpu = num_gpu >= 1
    first_bad(gpu & (milli <= 0), df, "gpu_milli", path, "must be > 0 for GPU pods")
    trace_end = float(np.nanmax(np.fmax(d, c)))
    with np.errstate(invalid="ignore"):
        first_bad(d < c, df, "deletion_time", path, "must be >= creation_time (negative duration)")
    qos = [q.lower() for q in df.stripped("qos")]
    bad_qos = np.array([q not in OPENB_QOS_PRIORITY for q in qos], dtype=bool)
    first_bad(bad_qos, df, "qos", path, "must be one of LS, BE, Burstable, Guaranteed")
    censored = np.isnan(d)
    if "pod_phase" in df:
        running = np.array([p == "Running" for p in df.stripped("pod_phase")], dtype=bool)
        censored |= running & (d >= trace_end)
    end = np.where(np.isnan(d), trace_end, d)
    spec = df.stripped("gpu_spec") if "gpu_spec" in df else None

    rows = np.flatnonzero(gpu)
    n_gpu = num_gpu[rows].astype(int)
    frac = np.where(n_gpu == 1, milli[rows] / 1000.0, 1.0)
    types: list[tuple[str, ...]] = []
    for i in rows.tolist():
        raw = "" if spec is None else spec[i]
        if raw.lower() in ("", "nan"):
            types.append(())
            continue
        names = [t for t in raw.split("|") if t.strip()]
        mapped = [_map_type(t, table, path, i + 1, "gpu_spec") for t in names]
        types.append(tuple(dict.fromkeys(mapped)))
    models = assign_models(len(df), model_seed, df.get("name"))[rows]
    cols = Columns(
        submit_s=c[rows],
        work_s=(end - c)[rows],
        num_gpus=n_gpu,
        gpu_frac=frac,
        cpu_cores=cpu[rows] / 1000.0 / n_gpu,
        models=models,
        gpu_types=types,
        priority=np.array([OPENB_QOS_PRIORITY[q] for q in qos], dtype=np.int64)[rows],
        censored=censored[rows],
    )
    skipped = {"cpu_only": int(len(df) - rows.size)}
    return build_jobs(cols, path, len(df), skipped=skipped, max_jobs=max_jobs, window_s=window_s)


def read_pai_tasks(
    path: Path | str,
    *,
    max_jobs: int | None = None,
    window_s: tuple[float, float] | None = None,
    model_seed: int = MODEL_SEED,
    gpu_map: Mapping[str, str] | None = None,
    engine: str = "csv",
) -> TraceLoad:
    """Read the public PAI v2020 ``pai_task_table.csv`` (header optional: the official file has
    none and the columns of :data:`PAI_TASK_COLUMNS` are assumed).

    Mapping: one task (all its ``inst_num`` instances, gang-scheduled) = one OFFLINE job.
    ``plan_gpu`` is percent of a GPU per instance; the task's total ``inst_num * plan_gpu/100``
    GPUs become ``gpu_frac`` when <= 1, else ``num_gpus = ceil(total)`` whole GPUs (the schema
    has no gang of fractional instances; rounded tasks are counted in ``skipped["rounded_up"]``,
    which does not drop them). ``plan_cpu`` (percent of a core per instance) -> vCPUs per GPU.
    ``gpu_type`` -> a one-type constraint via :data:`PAI_GPU_MODELS`, except MISC and empty, which
    mean "any". Submission = ``start_time`` (the task table has no submit time; queueing delay is
    lost); ``work_s`` = ``end_time - start_time``; no ``end_time`` = censored at the last end
    time. Tasks with empty ``plan_gpu`` (CPU tasks) or no ``start_time`` are skipped and counted.
    Model classes come from name hints in ``job_name``/``task_name`` when present, else the
    seeded draw. Arguments as :func:`read_openb_pods`'s.

    Raises:
        TraceError: Missing column, bad value, unknown GPU type, negative duration.
    """
    req = ["inst_num", "start_time", "end_time", "plan_gpu"]
    df = read_table(path, req, names=PAI_TASK_COLUMNS, engine=engine)
    table = _upper(gpu_map, PAI_GPU_MODELS)
    plan_gpu = numeric(df, "plan_gpu", path, lo=0, optional=True)
    inst = numeric(df, "inst_num", path, lo=1, integer=True)
    start = numeric(df, "start_time", path, lo=0, optional=True)
    end = numeric(df, "end_time", path, lo=0, optional=True)
    cpu = numeric(df, "plan_cpu", path, lo=0, optional=True) if "plan_cpu" in df else None
    s, e = start, np.where(end == 0, np.nan, end)  # 0 marks "not ended" in the public table
    with np.errstate(invalid="ignore"):
        first_bad(e < s, df, "end_time", path, "must be >= start_time (negative duration)")
    g = plan_gpu
    is_gpu = np.isfinite(g) & (g > 0)
    started = np.isfinite(s)
    rows = np.flatnonzero(is_gpu & started)
    if rows.size == 0:
        raise TraceError(f"{path}: no GPU tasks with a start_time")
    last_end = float(np.nanmax(np.fmax(e, s)))
    total = inst[rows] * g[rows] / 100.0
    n_gpus = np.where(total <= 1.0, 1, np.ceil(total - 1e-9)).astype(int)
    frac = np.where(total <= 1.0, total, 1.0)
    cpu_total = (
        inst[rows] * np.nan_to_num(cpu[rows]) / 100.0 if cpu is not None else np.zeros(rows.size)
    )
    types: list[tuple[str, ...]] = [()] * rows.size
    if "gpu_type" in df:
        # Mapped once per distinct value (a trace names a handful), in row order so the first
        # bad row is the one reported.
        all_types = df.stripped("gpu_type")
        raw_types = [all_types[i] for i in rows.tolist()]
        mapped: dict[str, tuple[str, ...]] = {}
        for k, (i, raw) in enumerate(zip(rows.tolist(), raw_types, strict=True)):
            hit = mapped.get(raw)
            if hit is None:
                hit = (
                    ()
                    if raw.upper() in ("", "NAN", "MISC")
                    else (_map_type(raw, table, path, i + 1, "gpu_type"),)
                )
                mapped[raw] = hit
            types[k] = hit
    name_cols = [df[c] for c in ("job_name", "task_name") if c in df]
    hint = [" ".join(parts) for parts in zip(*name_cols, strict=True)] if name_cols else None
    models = assign_models(len(df), model_seed, hint)[rows]
    origin = day_origin(s[rows])
    ends = np.where(np.isnan(e), last_end, e)
    cols = Columns(
        submit_s=s[rows] - origin,
        work_s=(ends - s)[rows],
        num_gpus=n_gpus,
        gpu_frac=frac,
        cpu_cores=cpu_total / np.maximum(n_gpus, 1),
        models=models,
        gpu_types=types,
        censored=np.isnan(e)[rows],
    )
    skipped = {
        "cpu_only": int(np.sum(~is_gpu)),
        "never_started": int(np.sum(is_gpu & ~started)),
        "rounded_up": int(np.sum((total > 1.0) & (np.abs(total - np.round(total)) > 1e-9))),
    }
    return build_jobs(cols, path, len(df), skipped=skipped, max_jobs=max_jobs, window_s=window_s)


def _read_nodes(
    path: Path | str,
    cols: tuple[str, str, str, str, str],
    table: Mapping[str, str],
    *,
    cpu_scale: float,
    mem_scale: float,
    engine: str,
) -> list[NodeSpec]:
    name_c, type_c, cpu_c, mem_c, gpu_c = cols
    df = read_table(path, list(cols), engine=engine)
    gpus = numeric(df, gpu_c, path, lo=0, integer=True).astype(int)
    cpu = numeric(df, cpu_c, path, lo=0, lo_open=True) * cpu_scale
    mem = numeric(df, mem_c, path, lo=0, lo_open=True) * mem_scale
    name_l = df.stripped(name_c)
    first_bad(
        np.array([n == "" for n in name_l], dtype=bool), df, name_c, path, "must not be empty"
    )
    first_row = {n: i for i, n in reversed(list(enumerate(name_l)))}
    dup = np.array([first_row[n] != i for i, n in enumerate(name_l)], dtype=bool)
    first_bad(dup, df, name_c, path, "must be unique")
    out: list[NodeSpec] = []
    type_l = df[type_c]
    gpus_l, cpu_l, mem_l = gpus.tolist(), cpu.tolist(), mem.tolist()
    mapped: dict[str, str] = {}
    for i in np.flatnonzero(gpus > 0).tolist():
        gtype = mapped.get(type_l[i])
        if gtype is None:
            gtype = mapped[type_l[i]] = _map_type(type_l[i], table, path, i + 1, type_c)
        out.append(
            NodeSpec(
                name=name_l[i],
                gpu_type=gtype,
                num_gpus=gpus_l[i],
                vcpus=cpu_l[i],
                host_mem_gb=mem_l[i],
                interconnect=_interconnect(gtype, gpus_l[i]),
            )
        )
    return out


def load_openb_nodes(
    path: Path | str, *, gpu_map: Mapping[str, str] | None = None, engine: str = "csv"
) -> list[NodeSpec]:
    """Read an openb node list (``sn,cpu_milli,memory_mib,gpu,model``) into a fleet.

    Nodes with 0 GPUs (``openb_node_list_all_node.csv`` has 310) are left out. ``model`` maps via
    :data:`OPENB_GPU_MODELS` (G1-G3: stated assumption); MiB are converted to GB (/1024).

    Raises:
        TraceError: Missing column, bad value, unknown GPU model, duplicate ``sn``.
    """
    table = _upper(gpu_map, OPENB_GPU_MODELS)
    cols = ("sn", "model", "cpu_milli", "memory_mib", "gpu")
    return _read_nodes(path, cols, table, cpu_scale=1e-3, mem_scale=1.0 / 1024.0, engine=engine)


def load_pai_machines(
    path: Path | str, *, gpu_map: Mapping[str, str] | None = None, engine: str = "csv"
) -> list[NodeSpec]:
    """Read PAI v2020 ``pai_machine_spec.csv`` (``machine,gpu_type,cap_cpu,cap_mem,cap_gpu``).

    CPU-only machines (``gpu_type`` CPU, ``cap_gpu`` 0; 83 in the public file) are left out;
    MISC maps to the assumption in :data:`PAI_GPU_MODELS`. ``cap_mem`` is in GB.

    Raises:
        TraceError: Missing column, bad value, unknown GPU type, duplicate machine.
    """
    table = _upper(gpu_map, PAI_GPU_MODELS)
    cols = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
    return _read_nodes(path, cols, table, cpu_scale=1.0, mem_scale=1.0, engine=engine)
