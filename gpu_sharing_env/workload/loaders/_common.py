"""Shared machinery of the trace loaders: errors, vectorised validation, model assignment.

Validation is column-wise (a trace of 80 k rows is checked in milliseconds); the first
offending row is reported in a one-line :class:`TraceError` naming the file, the 1-based data
row (the header is not counted), the field and the rule. The frame functions here
(:func:`read_csv`, :func:`numeric`, :func:`timestamps`) use pandas, imported when first called:
the Philly and Helios readers parse date-times with it. The Alibaba readers (openb, PAI: the
replay path) read with :mod:`gpu_sharing_env.workload.loaders._table` instead, without pandas.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.workload.job import JobSpec, offline_specs
from gpu_sharing_env.workload.synthetic import DEFAULT_MODEL_MIX

if TYPE_CHECKING:
    import pandas as pd

#: GPU memory of the reference GPU (V100-16GB). A fractional request of ``f`` GPU is granted
#: ``f`` of this memory, as PAI's sharing scheduler grants a proportional share of GPU memory
#: (Weng et al., NSDI'22, Sec. 5.1) and openb's ``gpu_milli`` is a share of the whole device.
REF_GPU_MEM_GB = 16.0
#: Shortest run time kept; traces contain 0-second rows (openb: pods deleted on creation).
MIN_WORK_S = 1.0
#: Default seed of the model-class assignment for traces that name no model.
MODEL_SEED = 0

#: Substrings of job/task names that reveal the model class (first match wins, case-insensitive).
#: A key must not follow a letter (``"gat"`` does not match ``"agate"``); keys of three letters
#: or fewer must not be followed by one either (``"rl"`` does not match ``"rlhf"``).
NAME_HINTS: tuple[tuple[str, str], ...] = (
    ("resnet18", "resnet18"),
    ("resnet", "resnet50"),
    ("vgg", "vgg16"),
    ("densenet", "densenet201"),
    ("inception", "inceptionv3"),
    ("mobilenet", "mobilenet"),
    ("gpt", "gpt2"),
    ("bert", "bert"),
    ("transformer", "transformer"),
    ("graphsage", "gnn"),
    ("gnn", "gnn"),
    ("gat", "gnn"),
    ("deepfm", "deepfm"),
    ("ctr", "deepfm"),
    ("ncf", "ncf"),
    ("ppo", "ppo"),
    ("rl", "ppo"),
    ("yolo", "yolov3"),
    ("deepspeech", "deepspeech2"),
    ("cyclegan", "cyclegan"),
    ("dcgan", "cyclegan"),
    ("gan", "cyclegan"),
    ("lstm", "lstm"),
)


#: A key starts a word (no letter before it), as :func:`_hint_key` requires.
_WORD_START = "(?<![a-z])"


def _hint_key(key: str) -> str:
    """``key`` as a pattern (a short one must also end a word), less :data:`_WORD_START`."""
    return re.escape(key) + ("(?![a-z])" if len(key) <= 3 else "")


@cache
def _hint_res() -> list[tuple[re.Pattern[str], str]]:
    """:data:`NAME_HINTS` as patterns, in order (compiled at the first use, not at import: the
    23 compiles and the alternation: ~55 M instructions, callgrind, of a replay whose names hint
    at nothing)."""
    return [(re.compile(_WORD_START + _hint_key(k), re.I), m) for k, m in NAME_HINTS]


@cache
def _any_hint() -> re.Pattern[str]:
    """Any hint at all (the alternation of every key, the shared lookbehind tested once per
    position): a name matches it iff it matches some pattern of :func:`_hint_res`, so names
    without a hint (most of a trace) cost one search."""
    return re.compile(
        _WORD_START + "(?:" + "|".join(_hint_key(k) for k, _ in NAME_HINTS) + ")", re.I
    )


class TraceError(ValueError):
    """A trace file breaks the schema; the message is one line naming file, row, field, rule."""


@dataclass(frozen=True)
class TraceLoad:
    """What a loader read, beyond the jobs.

    Attributes:
        jobs: The jobs, ``job_id`` 0..n-1 in submission order.
        path: The file read.
        rows: Data rows (or JSON entries) in the file.
        skipped: Rows not turned into jobs, by reason (e.g. ``"cpu_only"``).
        censored_ids: ``job_id`` of jobs still running at the end of the trace; their ``work_s``
            runs to the trace end (a lower bound on the true run time).
        clamped: Rows whose run time was below :data:`MIN_WORK_S` and was raised to it.
    """

    jobs: list[JobSpec]
    path: str
    rows: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    censored_ids: tuple[int, ...] = ()
    clamped: int = 0


def fail(path: Path | str, row: int | None, col: str, rule: str, got: Any = None) -> TraceError:
    """Build the one-line error ``FILE: row N: field 'COL': RULE (got 'V')``."""
    where = f"row {row}: " if row is not None else ""
    tail = f" (got {str(got)!r})" if got is not None else ""
    return TraceError(f"{path}: {where}field {col!r}: {rule}{tail}")


def csv_header(
    path: Path | str, required: Iterable[str], names: list[str] | None
) -> tuple[Path, list[str], list[str] | None]:
    """The checks before a CSV is parsed: the file, the required columns as a list, and the
    header to impose (``names`` when the first line lacks ``required[0]``, else None: the file's
    own first line is the header)."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{path}: file not found")
    req = list(required)
    with p.open("r", encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
    if not first.strip():
        raise TraceError(f"{path}: file is empty")
    return p, req, None if names is None or req[0] in first.split(",") else names


def read_csv(
    path: Path | str, required: Iterable[str], *, names: list[str] | None = None
) -> pd.DataFrame:
    """Read a CSV as strings (raw values kept for messages) and check its columns.

    Args:
        path: The file.
        required: Columns that must be present.
        names: Header to use when the file has none (detected: first line lacks ``required[0]``).
    """
    import pandas as pd

    p, req, header = csv_header(path, required, names)
    df = pd.read_csv(
        p, dtype=str, keep_default_na=False, names=header, header=0 if header is None else None
    )
    df.columns = [str(c).strip() for c in df.columns]
    for col in req:
        if col not in df.columns:
            raise TraceError(f"{path}: field {col!r}: required column is missing")
    if df.empty:
        raise TraceError(f"{path}: no data rows")
    return df.reset_index(drop=True)


def read_json_list(path: Path | str) -> list[Any]:
    """Read a JSON array (or JSON lines) file."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{path}: file not found")
    text = p.read_text(encoding="utf-8", errors="replace").strip()
    if not text:
        raise TraceError(f"{path}: file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            raise TraceError(f"{path}: line {e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(data, list):
        raise TraceError(f"{path}: top level: must be a JSON array of jobs")
    if not data:
        raise TraceError(f"{path}: no data rows")
    return data


#: Cells that count as empty (case-insensitive, after stripping) besides "".
EMPTY_WORDS = ("nan", "none", "null")


def numeric(
    df: pd.DataFrame,
    col: str,
    path: Path | str,
    *,
    lo: float | None = None,
    lo_open: bool = False,
    hi: float | None = None,
    optional: bool = False,
    integer: bool = False,
) -> pd.Series:
    """Column ``col`` as float64, checked vectorised; the first bad row raises.

    Args:
        df: String-typed frame from :func:`read_csv`.
        col: Column name.
        path: File, for the message.
        lo: Lower bound (inclusive unless ``lo_open``).
        lo_open: Make ``lo`` exclusive.
        hi: Upper bound (inclusive).
        optional: Empty cells become NaN instead of an error.
        integer: Values must be whole numbers.
    """
    import pandas as pd

    raw = df[col].astype(str).str.strip()
    vals = pd.to_numeric(raw, errors="coerce").astype("float64")
    empty = raw.eq("") | raw.str.lower().isin(EMPTY_WORDS)
    bad, rule = check_numbers(
        vals.to_numpy(),
        empty.to_numpy(),
        lo=lo,
        lo_open=lo_open,
        hi=hi,
        optional=optional,
        integer=integer,
    )
    first_bad(bad, df, col, path, rule)
    return vals


def check_numbers(
    v: np.ndarray,
    empty: np.ndarray,
    *,
    lo: float | None = None,
    lo_open: bool = False,
    hi: float | None = None,
    optional: bool = False,
    integer: bool = False,
) -> tuple[np.ndarray, str]:
    """The rows of a parsed column ``v`` (NaN where a cell is no number) that break the rule,
    and the rule's text (arguments as in :func:`numeric`; ``empty`` marks the empty cells)."""
    bad = ~np.isfinite(v)
    if optional:
        bad &= ~empty
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    rule = "must be a finite " + ("integer" if integer else "number")
    rule += (" " + " and ".join(parts)) if parts else ""
    if optional:
        rule += " or empty"
    with np.errstate(invalid="ignore"):
        if lo is not None:
            bad |= np.isfinite(v) & ((v <= lo) if lo_open else (v < lo))
        if hi is not None:
            bad |= np.isfinite(v) & (v > hi)
        if integer:
            bad |= np.isfinite(v) & (np.floor(v) != v)
    return bad, rule


def first_bad(bad: np.ndarray, df: Any, col: str, path: Path | str, rule: str) -> None:
    """Raise for the first True in ``bad`` (1-based data row); ``df`` is a pandas frame or a
    :class:`~gpu_sharing_env.workload.loaders._table.Table` (its raw cell goes in the message)."""
    idx = np.flatnonzero(bad)
    if idx.size:
        i = int(idx[0])
        cells = df[col]
        raise fail(path, i + 1, col, rule, cells.iloc[i] if hasattr(cells, "iloc") else cells[i])


def timestamps(
    df: pd.DataFrame, col: str, path: Path | str, *, optional: bool = False
) -> pd.Series:
    """Column ``col`` as seconds since the epoch (float); datetime strings or numbers."""
    import pandas as pd

    raw = df[col].astype(str).str.strip()
    empty = raw.eq("") | raw.str.lower().isin((*EMPTY_WORDS, "nat"))
    num = pd.to_numeric(raw, errors="coerce")
    if num[~empty].notna().all():
        secs = num.astype("float64")
    else:
        dt = pd.to_datetime(raw.where(~empty), errors="coerce", format="mixed")
        secs = (dt - pd.Timestamp(0)).dt.total_seconds().astype("float64")
    bad = ~np.isfinite(secs.to_numpy())
    if optional:
        bad &= ~empty.to_numpy()
    rule = "must be a date-time (YYYY-MM-DD HH:MM:SS) or seconds" + (
        " or empty" if optional else ""
    )
    first_bad(bad, df, col, path, rule)
    return secs


def draw_models(n: int, seed: int) -> np.ndarray:
    """Deterministic model classes for ``n`` trace rows (row order), drawn from the synthetic
    generator's default training mix (``synthetic.DEFAULT_MODEL_MIX``) with ``seed``."""
    names = list(DEFAULT_MODEL_MIX)
    w = np.array([DEFAULT_MODEL_MIX[m] for m in names])
    rng = np.random.default_rng(seed)
    return np.asarray(names, dtype=object)[rng.choice(len(names), size=n, p=w / w.sum())]


def model_from_name(name: str) -> str | None:
    """The model class a job name hints at (e.g. ``"bert-finetune"`` -> ``"bert"``), or None."""
    for pat, model in _hint_res():
        if pat.search(name):
            return model
    return None


def assign_models(n: int, seed: int, names: Iterable[Any] | None = None) -> np.ndarray:
    """Model per row: a name hint when there is one, else the seeded draw for that row.

    ``names``: one name per row (a list or a pandas Series; each taken as ``str(name)``)."""
    models = draw_models(n, seed)
    if names is not None:
        found: dict[str, str | None] = {}
        text = list(map(str, names))
        for i in _hinted_rows(text):
            nm = text[i]
            hint = found[nm] if nm in found else found.setdefault(nm, model_from_name(nm))
            if hint is not None:
                models[i] = hint
    return models


def _hinted_rows(text: list[str]) -> list[int]:
    """The rows whose name has any hint (a match of :func:`_any_hint`), ascending. ASCII names
    (a trace's) are joined by newlines and each key found with ``str.find`` in the lowercased
    text, then its bounds checked as :func:`_hint_key` writes them (a newline is no letter, so
    it bounds a key as a name's ends do); otherwise the pattern searches name by name."""
    joined = "\n".join(text)
    if not joined.isascii() or joined.count("\n") != len(text) - 1:
        any_hint = _any_hint()
        return [i for i, nm in enumerate(text) if any_hint.search(nm) is not None]
    joined = joined.lower()
    letters = frozenset("abcdefghijklmnopqrstuvwxyz")
    end = len(joined)
    hits: set[int] = set()
    for key, _ in NAME_HINTS:
        n, short = len(key), len(key) <= 3
        pos = joined.find(key)
        while pos >= 0:
            if (pos == 0 or joined[pos - 1] not in letters) and not (
                short and pos + n < end and joined[pos + n] in letters
            ):
                hits.add(pos)
            pos = joined.find(key, pos + 1)
    if not hits:
        return []
    starts = list(accumulate((len(nm) + 1 for nm in text[:-1]), initial=0))
    return sorted({bisect_right(starts, p) - 1 for p in hits})


def mem_for(models: np.ndarray, gpu_frac: np.ndarray) -> np.ndarray:
    """Declared GPU memory: a share of :data:`REF_GPU_MEM_GB` for fractional requests, else the
    model's typical training memory (``zoo.ZOO[model].mem_gb``)."""
    table = {m: ZOO[m].mem_gb for m in set(models.tolist())}
    model_mem = np.array([table[m] for m in models.tolist()], dtype=float)
    return np.where(gpu_frac < 1.0, np.maximum(gpu_frac * REF_GPU_MEM_GB, 0.5), model_mem)


@dataclass
class Columns:
    """Per-row job fields, aligned arrays, before windowing and sorting."""

    submit_s: np.ndarray
    work_s: np.ndarray
    num_gpus: np.ndarray
    gpu_frac: np.ndarray
    cpu_cores: np.ndarray
    models: np.ndarray
    gpu_types: list[tuple[str, ...]] | None = None
    users: list[str] | None = None
    groups: list[str] | None = None
    priority: np.ndarray | None = None
    censored: np.ndarray | None = None
    mem_gb: np.ndarray | None = None


def build_jobs(
    cols: Columns,
    path: Path | str,
    rows: int,
    *,
    skipped: Mapping[str, int],
    max_jobs: int | None,
    window_s: tuple[float, float] | None,
) -> TraceLoad:
    """Window, sort by submission (stable: file order breaks ties), number 0..n-1, build specs.

    ``window_s = (start, end)`` keeps jobs submitted in ``[start, end)`` seconds of the trace's
    own clock and shifts them so that ``start`` becomes 0; ``max_jobs`` then keeps the first N.
    """
    n = len(cols.submit_s)
    keep = np.ones(n, dtype=bool)
    shift = 0.0
    if window_s is not None:
        lo, hi = window_s
        if not (math.isfinite(lo) and hi > lo >= 0):
            raise TraceError(f"{path}: window_s: need 0 <= start < end (got {window_s})")
        keep &= (cols.submit_s >= lo) & (cols.submit_s < hi)
        shift = lo
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(cols.submit_s[idx], kind="stable")]
    if max_jobs is not None:
        idx = idx[: max(0, int(max_jobs))]
    clamped = int(np.sum(cols.work_s[idx] < MIN_WORK_S))
    work = np.maximum(cols.work_s, MIN_WORK_S)
    mem = cols.mem_gb if cols.mem_gb is not None else mem_for(cols.models, cols.gpu_frac)
    # Whole columns to Python values at once (the same floats and ints as element by element).
    n_keep = idx.size
    models = [str(m) for m in np.asarray(cols.models, dtype=object)[idx].tolist()]
    submit = (np.asarray(cols.submit_s, dtype=float)[idx] - shift).tolist()
    n_gpus = np.asarray(cols.num_gpus)[idx].astype(np.int64).tolist()
    frac = np.asarray(cols.gpu_frac, dtype=float)[idx].tolist()
    mem_l = np.asarray(mem, dtype=float)[idx].tolist()
    cpu = np.asarray(cols.cpu_cores, dtype=float)[idx].tolist()
    works = np.asarray(work, dtype=float)[idx].tolist()
    ix = idx.tolist()
    types = [cols.gpu_types[i] for i in ix] if cols.gpu_types is not None else [()] * n_keep
    groups = [cols.groups[i] for i in ix] if cols.groups is not None else [""] * n_keep
    users = [cols.users[i] for i in ix] if cols.users is not None else [""] * n_keep
    prio = (
        np.asarray(cols.priority)[idx].astype(np.int64).tolist()
        if cols.priority is not None
        else [0] * n_keep
    )
    jobs = offline_specs(
        model=models,
        submit_s=[max(0.0, x) for x in submit],
        num_gpus=n_gpus,
        gpu_frac=frac,
        mem_gb=mem_l,
        cpu_cores=cpu,
        work_s=works,
        gpu_types=types,
        group=groups,
        user=users,
        priority=prio,
    )
    censored: list[int] = (
        np.flatnonzero(np.asarray(cols.censored, dtype=bool)[idx]).tolist()
        if cols.censored is not None
        else []
    )
    return TraceLoad(jobs, str(path), rows, dict(skipped), tuple(censored), clamped)


def day_origin(secs: np.ndarray) -> float:
    """Midnight (UTC of the trace's clock) of the first day, so hour-of-day survives rebasing."""
    finite = secs[np.isfinite(secs)]
    return float(np.floor(finite.min() / 86_400.0) * 86_400.0) if finite.size else 0.0
