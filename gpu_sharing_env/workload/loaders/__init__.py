"""Trace loaders: real job and fleet formats in, one schema out.

Every job loader returns ``list[JobSpec]`` (``job_id`` 0..n-1 in submission order, all OFFLINE,
``est_work_s`` equal to ``work_s`` until :func:`~gpu_sharing_env.workload.estimates.attach_estimates`
replaces it); every fleet loader returns ``list[NodeSpec]``. The ``read_*`` variants return a
:class:`TraceLoad` that also counts the rows read, skipped (by reason) and censored.
Malformed input raises :class:`TraceError` with a one-line message naming the file, the 1-based
data row, the field and the rule, e.g.
``philly.csv: row 17: field 'duration': must be a finite number >= 0 (got 'nan')``.

Formats, mapping choices and the assumptions behind them: ``docs/workloads.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_sharing_env.physics.nodes import NodeSpec
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.workload.loaders._common import (
    MIN_WORK_S,
    NAME_HINTS,
    REF_GPU_MEM_GB,
    TraceError,
    TraceLoad,
    model_from_name,
)
from gpu_sharing_env.workload.loaders.alibaba import (
    OPENB_GPU_MODELS,
    OPENB_QOS_PRIORITY,
    PAI_GPU_MODELS,
    PAI_TASK_COLUMNS,
    load_openb_nodes,
    load_pai_machines,
    read_openb_pods,
    read_pai_tasks,
)
from gpu_sharing_env.workload.loaders.helios import read_helios
from gpu_sharing_env.workload.loaders.philly import read_philly, read_philly_raw

__all__ = [
    "LOADERS",
    "MIN_WORK_S",
    "NAME_HINTS",
    "NODE_LOADERS",
    "OPENB_GPU_MODELS",
    "OPENB_QOS_PRIORITY",
    "PAI_GPU_MODELS",
    "PAI_TASK_COLUMNS",
    "READERS",
    "REF_GPU_MEM_GB",
    "TraceError",
    "TraceLoad",
    "load_helios",
    "load_openb_nodes",
    "load_openb_pods",
    "load_pai_machines",
    "load_pai_tasks",
    "load_philly",
    "load_philly_raw",
    "model_from_name",
    "read_helios",
    "read_openb_pods",
    "read_pai_tasks",
    "read_philly",
    "read_philly_raw",
    "read_trace",
]

#: Trace readers by format name (``TraceLoad`` out).
READERS: dict[str, Callable[..., TraceLoad]] = {
    "openb": read_openb_pods,
    "pai": read_pai_tasks,
    "philly": read_philly,
    "philly-raw": read_philly_raw,
    "helios": read_helios,
}


def load_openb_pods(path: Path | str, **kwargs: Any) -> list[JobSpec]:
    """Jobs of an openb v2023 pod list; see :func:`read_openb_pods` for mapping and options."""
    return read_openb_pods(path, **kwargs).jobs


def load_pai_tasks(path: Path | str, **kwargs: Any) -> list[JobSpec]:
    """Jobs of a PAI v2020 ``pai_task_table``; see :func:`read_pai_tasks`."""
    return read_pai_tasks(path, **kwargs).jobs


def load_philly(path: Path | str, **kwargs: Any) -> list[JobSpec]:
    """Jobs of Sia's processed ``philly.csv``; see :func:`read_philly`."""
    return read_philly(path, **kwargs).jobs


def load_philly_raw(path: Path | str, **kwargs: Any) -> list[JobSpec]:
    """Jobs of the raw Philly ``cluster_job_log`` JSON; see :func:`read_philly_raw`."""
    return read_philly_raw(path, **kwargs).jobs


def load_helios(path: Path | str, **kwargs: Any) -> list[JobSpec]:
    """Jobs of a Helios ``cluster_log.csv``; see :func:`read_helios`."""
    return read_helios(path, **kwargs).jobs


#: Job loaders by format name (``list[JobSpec]`` out); scenario files name these keys.
LOADERS: dict[str, Callable[..., list[JobSpec]]] = {
    "openb": load_openb_pods,
    "pai": load_pai_tasks,
    "philly": load_philly,
    "philly-raw": load_philly_raw,
    "helios": load_helios,
}

#: Fleet loaders by format name.
NODE_LOADERS: dict[str, Callable[..., list[NodeSpec]]] = {
    "openb": load_openb_nodes,
    "pai": load_pai_machines,
}


def read_trace(fmt: str, path: Path | str, **kwargs: Any) -> TraceLoad:
    """Read ``path`` in format ``fmt`` (a key of :data:`READERS`).

    Raises:
        TraceError: Unknown format or malformed file.
    """
    reader = READERS.get(fmt)
    if reader is None:
        raise TraceError(f"{path}: format {fmt!r}: must be one of {', '.join(READERS)}")
    return reader(path, **kwargs)
