"""A CSV read into string columns without pandas: the reader of the Alibaba formats (openb, PAI).

A replay (``gsg evaluate --trace ... --trace-format pai``) reads its trace and fleet here, so its
process never imports pandas (~42 MB and ~6-9 % of a 20,000-job replay's time,
``docs/notes/2026-11-28-replay-speed.md``). The result is the same as pandas' reader (the
frame functions of :mod:`~gpu_sharing_env.workload.loaders._common`): the same cells, the same
float64 values bit for bit and the same one-line errors, checked by
``tests/test_trace_reader.py`` on fixtures and the shared data (``engine="pandas"`` reads
through pandas, the reference). Where pandas gives no one-line error, this reader does: a data
row with more fields than the header (pandas takes the extra leading fields as an index and
shifts the row, or raises its own parser error), a quote left open and a file that is not
UTF-8 are :class:`TraceError` here, naming the line.

Parsing rules (pandas' ``read_csv(dtype=str, keep_default_na=False)``): the file's first line is
the header unless ``names`` is imposed; lines that are empty or only spaces are skipped; a short
row is padded with empty cells; a header cell that is empty is named ``Unnamed: i`` and a repeated
one ``name.1``, ``name.2``, ...; names are then stripped; a leading byte-order mark is dropped.
A number is a decimal literal (sign, digits, point, exponent; the cell stripped first), as
``pd.to_numeric`` accepts it: ``1_000``, non-ASCII digits and ``0x10`` are not numbers, and
``inf`` or ``nan`` are not finite (both rejected as pandas' path rejects them).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpu_sharing_env.workload.loaders._common import (
    EMPTY_WORDS,
    TraceError,
    check_numbers,
    csv_header,
    first_bad,
    read_csv,
)

#: What ``pd.to_numeric`` parses as a number (before the finite check), checked per cell; it
#: agrees with pandas 3.1 on 400,000 generated strings (random floats' reprs, %e/%f/%g forms
#: of 0-25 digits, 40-digit strings, and odd forms: ``1_000``, ``0x10``, Arabic digits, ...).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: An integer literal: a column of nothing else is read by ``pd.to_numeric`` as integers.
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: The longest field the reader takes (the csv module's default is 131,072 characters; pandas
#: has no limit): 2**31 - 1, the largest the C long of every platform holds.
_FIELD_LIMIT = 2**31 - 1
#: The readers: the stdlib ``csv`` module, or pandas (the reference, for the differential test).
ENGINES = ("csv", "pandas")


@dataclass(frozen=True)
class Table:
    """A CSV's data rows as raw string columns (``table[name]``: one cell per row, unstripped).

    Attributes:
        columns: Column name -> cells, every list ``rows`` long.
        rows: Data rows.
        engine: The reader that made it (``csv`` or ``pandas``); :func:`numeric` converts
            the cells with the same one.
    """

    columns: dict[str, list[str]]
    rows: int
    engine: str = "csv"

    def __contains__(self, col: object) -> bool:
        return col in self.columns

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, col: str) -> list[str]:
        return self.columns[col]

    def get(self, col: str) -> list[str] | None:
        """Column ``col``, or None when the file has none."""
        return self.columns.get(col)

    def stripped(self, col: str) -> list[str]:
        """Column ``col``'s cells, stripped of surrounding whitespace."""
        return list(map(str.strip, self.columns[col]))


def _header_names(cells: list[str]) -> list[str]:
    """pandas' column names for a header row: empty -> ``Unnamed: i``, repeats -> ``x.1``...
    (its ``dedup_names``), then stripped."""
    names = [c if c != "" else f"Unnamed: {i}" for i, c in enumerate(cells)]
    counts: dict[str, int] = {}
    for i, col in enumerate(names):
        cur = counts.get(col, 0)
        while cur > 0:
            counts[col] = cur + 1
            col = f"{col}.{cur}"
            cur = counts.get(col, 0)
        names[i] = col
        counts[col] = cur + 1
    return [n.strip() for n in names]


def read_table(
    path: Path | str,
    required: Iterable[str],
    *,
    names: list[str] | None = None,
    engine: str = "csv",
) -> Table:
    """Read a CSV as raw strings and check its columns (as :func:`_common.read_csv`).

    Args:
        path: The file.
        required: Columns that must be present.
        names: Header to use when the file has none (detected: first line lacks ``required[0]``).
        engine: ``csv`` (the stdlib; no pandas) or ``pandas`` (``_common.read_csv``).

    Raises:
        TraceError: Missing file or column, empty file, no data rows, a row longer than the
            header, not UTF-8.
    """
    if engine == "pandas":
        df = read_csv(path, required, names=names)
        cols = {str(c): df[c].astype(str).tolist() for c in df.columns}
        return Table(cols, len(df), "pandas")
    if engine != "csv":
        raise ValueError(f"engine {engine!r}: must be one of {', '.join(ENGINES)}")
    p, req, header = csv_header(path, required, names)
    limit = csv.field_size_limit(_FIELD_LIMIT)  # pandas reads fields of any length
    reader = None
    try:
        with p.open("r", encoding="utf-8-sig", newline="") as fh:
            # strict: a quote left open at the end of the file is an error, as in pandas
            reader = csv.reader(fh, strict=True)
            # pandas skips empty lines and lines of spaces, not a line of a quoted ""
            lines = [r for r in reader if len(r) > 1 or (r and (r[0] == "" or r[0].strip()))]
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: line {_bad_utf8_line(p)}: not UTF-8 text ({e.reason})") from None
    except csv.Error as e:
        where = f"line {reader.line_num}" if reader is not None else "line 1"
        raise TraceError(f"{path}: {where}: not a well-formed CSV ({e})") from None
    finally:
        csv.field_size_limit(limit)
    if header is None:
        head, data = _header_names(lines[0]) if lines else [], lines[1:]
    else:
        head, data = list(header), lines
    width = len(head)
    for k, r in enumerate(data, start=1):
        if len(r) > width:
            raise TraceError(f"{path}: row {k}: {len(r)} fields, more than the header's {width}")
    for col in req:
        if col not in head:
            raise TraceError(f"{path}: field {col!r}: required column is missing")
    if not data:
        raise TraceError(f"{path}: no data rows")
    for r in data:
        if len(r) < width:
            r.extend([""] * (width - len(r)))
    return Table(dict(zip(head, map(list, zip(*data, strict=True)), strict=True)), len(data))


def _bad_utf8_line(p: Path) -> int:
    """The first line of ``p`` that is not UTF-8 (the decoder's own offset counts from its
    current chunk, not the file); only read on that error's path."""
    with p.open("rb") as fh:
        for k, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8-sig" if k == 1 else "utf-8")
            except UnicodeDecodeError:
                return k
    return 1


def _number(cell: str) -> float:
    return float(cell) if _NUMBER.fullmatch(cell) else math.nan


def _integer_column(raw: list[str]) -> bool:
    """Whether ``pd.to_numeric`` reads the cells as an int64 or uint64 column (then cast to
    float64: the same values as Python's float(), except that "-0" becomes +0.0)."""
    if not all(_INTEGER.fullmatch(c) for c in raw):
        return False
    ints = [int(c) for c in raw]
    lo, hi = min(ints), max(ints)
    return lo >= -(2**63) and (hi < 2**63 or (lo >= 0 and hi < 2**64))


def _numbers(raw: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Stripped cells -> (float64 values, NaN where a cell is no number; empty cells)."""
    v, empty = _parse(raw)
    negative_zero = (v == 0) & np.signbit(v)
    if negative_zero.any() and _integer_column(raw):
        v[negative_zero] = 0.0
    return v, empty


def _parse(raw: list[str]) -> tuple[np.ndarray, np.ndarray]:
    # Fast path, a column of finite numbers and blank cells only (most columns; a PAI task
    # table's plan_gpu is blank for its CPU tasks): Python's float() accepts what _NUMBER does,
    # and beyond it only non-ASCII digits, underscores, inf and nan. A blank cell is NaN and
    # empty, as _number and _empty make it.
    joined = "".join(raw)
    if joined.isascii() and "_" not in joined:
        blank = "" in raw
        try:
            if blank:
                v = np.array([float(c) if c else math.nan for c in raw], dtype=np.float64)
            else:
                v = np.array(list(map(float, raw)), dtype=np.float64)
        except ValueError:
            pass
        else:
            if not blank:
                if np.isfinite(v).all():  # else "nan" or "inf": cell by cell below
                    return v, np.zeros(len(raw), dtype=bool)
            else:
                empty = np.array([not c for c in raw], dtype=bool)
                if (np.isfinite(v) | empty).all():  # else "nan" or "inf": cell by cell below
                    return v, empty
    return np.fromiter(map(_number, raw), dtype=np.float64, count=len(raw)), _empty(raw)


def _empty(raw: list[str]) -> np.ndarray:
    """Per stripped cell: whether it counts as empty."""
    return np.fromiter(
        (c == "" or c.lower() in EMPTY_WORDS for c in raw), dtype=bool, count=len(raw)
    )


def numeric(table: Table, col: str, path: Path | str, **rule: Any) -> np.ndarray:
    """Column ``col`` as float64, checked against ``rule`` (``lo``, ``lo_open``, ``hi``,
    ``optional``, ``integer``: as :func:`_common.numeric`'s); the first bad row raises."""
    raw = table.stripped(col)
    if table.engine == "pandas":
        import pandas as pd

        vals = pd.to_numeric(pd.Series(raw, dtype=str), errors="coerce")
        v = vals.astype("float64").to_numpy()
        empty = _empty(raw)
    else:
        v, empty = _numbers(raw)
    bad, text = check_numbers(v, empty, **rule)
    first_bad(bad, table, col, path, text)
    return v
