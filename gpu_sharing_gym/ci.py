"""Means over seeds and their 95 % confidence intervals, and how every report prints them.

Every "mean ± x" the harness shows (``gsg evaluate``, ``gsg leaderboard``'s terminal tables,
``LEADERBOARD.md``, ``index.html``, the SLO plot) is the mean over the seeds ± the half-width of
its two-sided 95 % confidence interval from Student's t distribution with n − 1 degrees of
freedom: ``t.ppf(0.975, n - 1) * s / sqrt(n)``, ``s`` the sample standard deviation (ddof = 1).
With a single seed there is no spread to estimate, so no interval is shown.

Light on purpose (numpy; scipy once an interval is computed): ``gsg evaluate`` uses it without
matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

#: The legend printed under (or above) every table with "mean ± x" cells.
CI_NOTE = (
    "± = 95 % CI half-width over seeds (t-distribution, n − 1 degrees of freedom); "
    "no interval with a single seed"
)


def mean_ci95(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean, 95 % confidence half-width (Student t, n − 1 dof) and n of the finite values.

    The half-width is NaN for fewer than two values (no spread to estimate).
    """
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, n
    from scipy import stats  # about a second to import: only once an interval is needed

    half = float(stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, half, n


def fmt_num(x: float | None) -> str:
    """Compact number: thousands without decimals, fractions with three."""
    if x is None or not math.isfinite(x):
        return "–"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_mean_ci(mean: float | None, half: float | None) -> str:
    """``mean ± half`` (the half-width is left out when there is none, e.g. one seed)."""
    if half is None or mean is None or not math.isfinite(half) or not math.isfinite(mean):
        return fmt_num(mean)
    return f"{fmt_num(mean)} ± {fmt_num(half)}"
