"""An online duration predictor that learns only from finished runs (PAI's CART).

Weng et al., "MLaaS in the Wild", NSDI'22 Sec. 5.2 (notes in ``../shared/seeds/001_*.txt``):
most tasks recur, and PAI predicts a task's run time with a CART regression tree on the user,
the group tag and the resource request (at most 10 splits, mean absolute error as the split
criterion); the group tag is the input that matters most (Fig. 12).

:class:`OnlinePredictor` does that inside the simulation:

- **Rows** are finished runs: a warm start of runs that finished before the episode (the
  generator's pre-episode history, drawn from the same groups; a trace's earlier rows), then
  every offline run that finishes in the simulation, in completion order (:meth:`observe`).
  The observed duration is the run's exclusive-equivalent work on the reference GPU
  (``JobSpec.work_s`` of a run that has finished): the unit schedulers compare estimates with
  (``est_work_s`` minus observed progress), and one that does not depend on where the policy
  put the run (a wall time under sharing would feed the policy's own placements back into its
  estimates). A production log holds the wall time; with its GPU type and utilisation the
  normalisation is a division, which we skip.
- **Target**: log run time. Durations span four orders of magnitude; an absolute error in
  seconds would be decided by the longest jobs, and MAE on the log makes each leaf's value the
  median (a median-unbiased estimate).
- **Inputs** (``PredictorConfig.inputs``): ``group`` (the group's mean log run time over its
  finished runs, and how many there are), ``user`` (the same per user), ``request`` (log2 of
  the GPUs asked for). Categorical tags enter a tree with 11 leaves only through such an
  encoding; a group with no finished run gets the global mean and count 0. A training row's
  encoding is the one in force just before it finished (ordered target statistics).
- **Cadence**: the tree is refitted every ``refit_every`` finished runs, on the latest
  ``max_rows`` rows (a fit costs milliseconds, a step ~1 ms: never per step); the encodings
  (per group and user sums) are updated at every finished run, so a group's estimate moves
  with each run of it that finishes.

No estimate reads the true duration of the job itself or of a run that has not finished:
:meth:`estimate` sees the spec's submitted fields only (``group``, ``user``, the request), and
the rows hold only runs handed to :meth:`observe`. Each estimate records when it was made and
how many episode runs had been observed (:attr:`OnlinePredictor.made`); ``workload.audit``
checks those against the simulator's own completion times.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # compiled (gpu_sharing_env._compile): the warm start's passes without bounds checks
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.workload import cart
from gpu_sharing_env.workload.job import JobSpec

if cython.compiled:  # C's log, log1p and log2: the functions math's call for a float > 0
    from cython.cimports.gpu_sharing_env.workload.job import _take
    from cython.cimports.libc.math import log as _ln
    from cython.cimports.libc.math import log1p as _ln1p
    from cython.cimports.libc.math import log2 as _lg2
else:
    from math import log as _ln
    from math import log1p as _ln1p
    from math import log2 as _lg2

    # (``job.py``'s own, interpreted: run from source, this module takes ``job`` with it,
    # ``gpu_sharing_env._modes``)
    from gpu_sharing_env.workload.job import _take  # type: ignore[assignment]


#: ``JobSpec``'s slot descriptors the estimates read (compiled, ``_take``: a C member read).
_S_JOB_ID = JobSpec.__dict__["job_id"]
_S_GROUP = JobSpec.__dict__["group"]
_S_USER = JobSpec.__dict__["user"]
_S_NUM_GPUS = JobSpec.__dict__["num_gpus"]
_S_GPU_FRAC = JobSpec.__dict__["gpu_frac"]
_S_WORK_S = JobSpec.__dict__["work_s"]

INPUTS: tuple[str, ...] = ("group", "user", "request")


@dataclass(frozen=True)
class TagCodes:
    """Tags as small integers: run ``i``'s tag is ``names[index[i]]`` (``names`` distinct; a
    name no run has is allowed)."""

    names: list[str]
    index: np.ndarray


@dataclass(frozen=True)
class RunLog:
    """Runs submitted before the episode (arrays aligned by run).

    ``group_codes`` and ``user_codes``, where given, are ``group`` and ``user`` as
    :class:`TagCodes` (a generator that draws tags as integers hands them on, so the predictor
    needs no pass over the strings); None: the predictor codes the strings itself."""

    group: list[str]
    user: list[str]
    gpus: np.ndarray
    work_s: np.ndarray
    submit_s: np.ndarray
    group_codes: TagCodes | None = None
    user_codes: TagCodes | None = None

    @classmethod
    def empty(cls) -> RunLog:
        z = np.zeros(0)
        return cls([], [], z, z, z)

    @property
    def finish_s(self) -> np.ndarray:
        """When each run finished, having run on arrival at reference speed."""
        return self.submit_s + self.work_s

    def __len__(self) -> int:
        return len(self.group)


@dataclass(frozen=True)
class PredictorConfig:
    """Parameters of :class:`OnlinePredictor` (scenario key ``workload.offline.predictor``)."""

    inputs: tuple[str, ...] = INPUTS
    """Which of ``group``, ``user``, ``request`` the tree sees (PAI Fig. 12 compares sets)."""
    refit_every: int = 100
    """Finished runs between refits of the tree (encodings update at every run)."""
    max_rows: int = 1000
    """The tree is fitted on the latest this-many rows (a fit is ~5 ms at 1,000)."""
    max_leaf_nodes: int = 11
    """Leaves of the tree: 11 leaves = 10 splits, PAI's limit."""
    prior_work_s: float = 900.0
    """The estimate while no run has finished (the generator's median run time)."""

    def __post_init__(self) -> None:
        for name in self.inputs:
            if name not in INPUTS:
                raise ValueError(f"inputs: each one of {', '.join(INPUTS)} (got {name!r})")
        if self.refit_every < 1:
            raise ValueError("refit_every: must be >= 1")
        if self.max_rows < 2:
            raise ValueError("max_rows: must be >= 2")
        if not 2 <= self.max_leaf_nodes <= 64:
            raise ValueError("max_leaf_nodes: must be in 2..64")
        if not (math.isfinite(self.prior_work_s) and self.prior_work_s > 0):
            raise ValueError("prior_work_s: must be finite and > 0")


@dataclass(frozen=True, slots=True)
class GroupStats:
    """What the log says about a job's group when it is asked (no truth of unfinished runs)."""

    runs_seen: int
    """Finished runs of the group (history included)."""
    mean_log_s: float
    """Mean log run time of those runs (nan: none)."""
    std_log_s: float
    """Their standard deviation (nan: fewer than two)."""
    last_submit_s: float
    """The group's latest submission before now (nan: none)."""
    period_s: float
    """Median gap between the group's submissions (nan: fewer than two)."""


@dataclass
class _Fit:
    """A fitted tree as plain lists (walked in Python: ~2 us against sklearn's ~50 us)."""

    left: list[int]
    right: list[int]
    feature: list[int]
    threshold: list[float]
    value: list[float]
    exp_value: list[float] | None = field(default=None, compare=False, repr=False)
    """``math.exp`` of each node's value (built on first use: :meth:`exp_at`)."""

    def leaf(self, x: list[float]) -> int:
        """The leaf ``x`` falls in (:func:`_leaf`)."""
        return _leaf(self.left, self.right, self.feature, self.threshold, x)

    def predict(self, x: list[float]) -> float:
        return self.value[self.leaf(x)]

    def exp_at(self, x: list[float]) -> float:
        """``math.exp(self.predict(x))`` (the same double: the exp of the leaf's value)."""
        return _fit_exp(self, x)


def _fit_exp(fit: _Fit, x: list[float]) -> float:
    """:meth:`_Fit.exp_at` as a function (compiled, ``predictor.pxd``: the estimates' C call,
    no method lookups)."""
    e = fit.exp_value
    if e is None:
        e = fit.exp_value = [math.exp(v) for v in fit.value]
    return e[_leaf(fit.left, fit.right, fit.feature, fit.threshold, x)]


def _leaf(
    left: list[int], right: list[int], feat: list[int], thr: list[float], x: list[float]
) -> int:
    """The leaf ``x`` falls in, of the tree ``left``/``right``/``feat``/``thr`` (scikit-learn's
    node arrays as lists). Compiled (``predictor.pxd``), the node is a C index and the lists
    typed; the comparison stays Python's, of the feature's and the threshold's floats."""
    node = 0
    while left[node] != -1:
        node = left[node] if x[feat[node]] <= thr[node] else right[node]
    return node


#: Trees fitted lately, by their training set: the same rows give the same tree
#: (``random_state=0``), so an episode whose warm start repeats an earlier one's (the same
#: seed under another policy, an evaluation's repeats) reuses its tree instead of refitting.
_FITS: OrderedDict[tuple[int, int, bytes, bytes], _Fit] = OrderedDict()
_FITS_CAP = 32


#: Whether fits go through :func:`cart.fit`: ``None`` (the default) where
#: :mod:`~gpu_sharing_env.workload.cart` runs compiled (interpreted it is slower than
#: scikit-learn) and replicates the installed scikit-learn; ``False``: scikit-learn's always
#: (the same trees; ``scripts/bench_cart.py`` compares the two).
FAST_CART: bool | None = None


def _cart_replicates_sklearn() -> bool:
    global _CART_OK
    if FAST_CART is not None:
        return FAST_CART
    if _CART_OK is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("scikit-learn")
        except PackageNotFoundError:  # pragma: no cover (a dependency)
            v = ""
        _CART_OK = cart.COMPILED and v.startswith(cart.SKLEARN_VERSIONS)
    return _CART_OK


_CART_OK: bool | None = None


def _fit_tree(x: np.ndarray, y: np.ndarray, max_leaf_nodes: int) -> _Fit:
    """``DecisionTreeRegressor(absolute_error, max_leaf_nodes, random_state=0)`` fitted on
    ``x`` (float32, C order) and ``y`` (float64), as plain lists; memoised in :data:`_FITS`.

    Compiled, :func:`cart.fit` builds the same tree faster (or says it cannot be sure of it,
    and scikit-learn fits it)."""
    key = (max_leaf_nodes, x.shape[1], x.tobytes(), y.tobytes())
    fit = _FITS.get(key)
    if fit is not None:
        _FITS.move_to_end(key)
        return fit
    tree = cart.fit(x, y, max_leaf_nodes) if _cart_replicates_sklearn() else None
    if tree is not None:
        fit = _Fit(
            tree.children_left, tree.children_right, tree.feature, tree.threshold, tree.value
        )
    else:
        fit = _fit_sklearn(x, y, max_leaf_nodes)
    _FITS[key] = fit
    if len(_FITS) > _FITS_CAP:
        _FITS.popitem(last=False)
    return fit


def _fit_sklearn(x: np.ndarray, y: np.ndarray, max_leaf_nodes: int) -> _Fit:
    """scikit-learn's tree (the reference :mod:`~gpu_sharing_env.workload.cart` replicates)."""
    from sklearn.tree import DecisionTreeRegressor  # (imported on first fit: ~0.3 s)

    t = (
        DecisionTreeRegressor(
            criterion="absolute_error", max_leaf_nodes=max_leaf_nodes, random_state=0
        )
        .fit(x, y, check_input=False)
        .tree_
    )
    return _Fit(
        t.children_left.tolist(),
        t.children_right.tolist(),
        t.feature.tolist(),
        t.threshold.tolist(),
        t.value[:, 0, 0].tolist(),
    )


#: Whether this module runs compiled (a Cython extension) rather than from its source.
_COMPILED: bool = not __file__.endswith(".py")


def _write_rows(
    x32: np.ndarray,
    y64: np.ndarray,
    start: int,
    rows: list[list[float]],
    ys: list[float],
    first: int,
) -> None:
    """``x32[start:start + len(rows)] = rows`` and ``y64[...] = ys[first:]``, the rows' values
    (Python floats) rounded to float32 by a C cast: round to nearest even, as numpy casts a
    float64 array to float32 (``predictor.pxd`` types it; interpreted it is not called)."""
    for i in range(len(rows)):
        row = rows[i]
        for j in range(len(row)):
            x32[start + i, j] = row[j]
        y64[start + i] = ys[first + i]


def _median(values: list[float]) -> float:
    """``float(np.median(values))``, the same double, for a non-empty list: the middle value
    sorted, or the two middle ones' sum halved (numpy's mean of two). With a NaN or a -0.0
    among them (numpy's partition may order those otherwise), numpy's median itself. (A
    replay's first refit waits for ``refit_every`` runs: its estimates before it each asked
    numpy, ~91 k instructions a call of its Python code, 491 calls in ``reserve_pack``'s at
    the trace's arrivals.)"""
    if any(v != v or (v == 0.0 and math.copysign(1.0, v) < 0.0) for v in values):
        return float(np.median(values))
    s = sorted(values)
    m = len(s)
    return s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2


def _count(table: dict[str, list[float]], key: str, y: float) -> None:
    """A run of tag ``key`` with log work ``y`` finished: its entry ``[n, sum, sum of squares]``
    in ``table`` counts it."""
    e = table.get(key)
    if e is None:
        table[key] = [1.0, y, y * y]
    else:
        e[0] += 1.0
        e[1] += y
        e[2] += y * y


def _encode(e: list[float] | None, mean: float, x: list[float]) -> None:
    """Append a tag's two inputs to ``x``: from its entry ``e`` (``[n, sum, sum of squares]``
    of its runs' log work; None: no run) the mean (``mean`` where there is none) and
    ``log1p(n)``. (Compiled, ``predictor.pxd``: ``n`` a C double, the entry's float itself.)"""
    n = e[0] if e is not None else 0.0
    if n > 0:
        x.append(e[1] / n)  # type: ignore[index]
    else:
        x.append(mean)
    x.append(_ln1p(n))  # (``math.log1p``: compiled, C's, the function it calls)


def _codes(keys: list[str]) -> tuple[list[str], np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` of tags (the distinct tags in code-point order,
    each key's index among them), with a dict instead of a string array's sort."""
    ids: dict[str, int] = {}
    first = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.intp)
    names = list(ids)
    srt = sorted(range(len(names)), key=names.__getitem__)  # str order: numpy's for '<U'
    rank = np.empty(len(names), dtype=np.intp)
    rank[srt] = np.arange(len(names))
    return [names[i] for i in srt], rank[first]


def lexsort2(minor: np.ndarray, major: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))`` of two vectors: where ``major`` holds no two equal values
    and no NaN, its sort is the one order there is, and its stable ``argsort`` gives it in
    about half lexsort's time (one sort, not two); else lexsort itself."""
    order = np.argsort(major, kind="stable")
    s = major[order]
    if s.size > 1 and (s[-1] != s[-1] or bool((s[1:] == s[:-1]).any())):  # (NaNs sort last)
        return np.lexsort((minor, major))
    return order


def _blocks(codes: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.argsort(codes, kind="stable")`` and ``np.bincount(codes, minlength=m)`` of codes in
    ``0..m-1``: the rows grouped by code, in row order inside, and each code's rows. Codes that
    fit in 16 bits are sorted as such (numpy sorts those by radix; a stable order is one
    order)."""
    small = codes.astype(np.int16) if m <= 1 << 15 else codes
    return np.argsort(small, kind="stable"), np.bincount(codes, minlength=m)


def _sorted_codes(tags: TagCodes, order: np.ndarray) -> tuple[list[str], np.ndarray]:
    """What :func:`_codes` gives for the tags of runs ``order`` (in that order), from their
    codes: every name in code-point order (names no run in ``order`` has included: their
    blocks are empty, so the present names keep their order) and each run's index among
    them."""
    names = tags.names
    key = tuple(names)
    hit = _NAME_ORDERS.get(key)  # (the users' names are the same every reset of a scenario)
    if hit is None:
        srt = sorted(range(len(names)), key=names.__getitem__)  # str order: numpy's for '<U'
        rank = np.empty(len(names), dtype=np.intp)
        rank[srt] = np.arange(len(names))
        if len(_NAME_ORDERS) >= 64:
            _NAME_ORDERS.clear()
        hit = _NAME_ORDERS[key] = (tuple(names[i] for i in srt), rank)
    return list(hit[0]), hit[1][tags.index[order]]


#: Names (a tuple) -> themselves in code-point order and each one's rank there
#: (:func:`_sorted_codes`; the rank array is only read).
_NAME_ORDERS: dict[tuple[str, ...], tuple[tuple[str, ...], np.ndarray]] = {}


def _fill_table(
    table: dict[str, list[float]],
    codes: list[str],
    cnt: list[float],
    tot: list[float],
    sq: list[float],
) -> None:
    """``table[key] = [n, sum, sum of squares]`` of each non-empty tag ``codes[c]`` with a
    finished run (a coded name may have none), in code order. (Typed, ``predictor.pxd``: a C
    index.)"""
    for c in range(len(codes)):
        key = codes[c]
        if key and cnt[c] > 0:
            table[key] = [cnt[c], tot[c], sq[c]]


def _tag_stats(
    inv: np.ndarray, m: int, y: np.ndarray, mean: np.ndarray, empty_first: bool
) -> tuple[np.ndarray, np.ndarray, list[float], list[float], list[float]]:
    """The warm start's statistics of one tag, rows in finish order with codes ``inv`` in
    ``0..m-1`` and log work ``y``: each row's mean log work over the earlier rows of its code
    (``mean``, the mean over all earlier rows, where there is none) and their count (0 for
    code 0 where ``empty_first``: the empty tag), then per code its rows' count, sum and sum of
    squares (the table's ``[n, sum, sum of squares]``). numpy's expressions
    (:func:`_tag_stats_typed` is the same in one typed pass)."""
    n = y.size
    by, count = _blocks(inv, m)  # grouped by key, in finish order inside
    ys, cs = y[by], np.cumsum(y[by])
    # each row's key block's first row (in ``by`` order; ``searchsorted`` of the sorted keys in
    # themselves: the rows of smaller keys)
    start = np.repeat(np.cumsum(count) - count, count)
    prior_n = np.empty(n)
    prior_s = np.empty(n)
    prior_n[by] = np.arange(n) - start
    prior_s[by] = cs - ys - (cs[start] - ys[start])
    if empty_first:
        prior_n[inv == 0] = 0.0
    known = prior_n > 0
    col = np.where(known, prior_s / np.maximum(prior_n, 1.0), mean)
    cnt = count.astype(float).tolist()
    tot = np.bincount(inv, weights=y, minlength=m).tolist()
    sq = np.bincount(inv, weights=y * y, minlength=m).tolist()
    return col, prior_n, cnt, tot, sq


def _tag_stats_typed(
    inv: np.ndarray, m: int, y: np.ndarray, mean: np.ndarray, empty_first: bool
) -> tuple[np.ndarray, np.ndarray, list[float], list[float], list[float]]:
    """:func:`_tag_stats` in one typed pass (``predictor.pxd``), the same doubles: the rows
    grouped by code by a counting sort (the stable order), the running sum ``cs`` over them
    in that order as ``np.cumsum`` adds (from the first value, one by one), each row's prior
    sum ``(cs - ys) - (cs[start] - ys[start])`` as numpy's expression groups it, the per-code
    sums from 0.0 in row order as ``np.bincount`` adds its weights."""
    n = y.size
    col = np.empty(n)
    prior_n = np.empty(n)
    sums = np.zeros((3, m))  # count, sum, sum of squares per code
    _tag_pass(inv, y, mean, empty_first, col, prior_n, sums, np.empty(n), np.empty(n))
    cnt, tot, sq = sums.tolist()
    return col, prior_n, cnt, tot, sq


# (the warm start's passes: every index is a row below n or a code below m by construction,
# ``_codes``/``_sorted_codes``' inverse and the counting sort's positions; compiled, unchecked)
@cython.boundscheck(False)
@cython.wraparound(False)
def _prior_means(y: np.ndarray, mean: np.ndarray) -> float:
    """``mean[i]``: the mean of ``y[:i]`` as the warm start computes it (``np.cumsum(y)``
    minus ``y``, over ``i``; 0.0 for the first row); returns the sum of all (``cum[-1]``,
    0.0 for none). Typed (``predictor.pxd``), the same doubles."""
    n = y.shape[0]
    acc = 0.0
    for i in range(n):
        acc = y[i] if i == 0 else acc + y[i]  # (np.cumsum: the first value, then sums)
        mean[i] = (acc - y[i]) / i if i > 0 else 0.0
    return float(acc) if n else 0.0


@cython.boundscheck(False)
@cython.wraparound(False)
def _tag_pass(
    inv: np.ndarray,
    y: np.ndarray,
    mean: np.ndarray,
    empty_first: bool,
    col: np.ndarray,
    prior_n: np.ndarray,
    sums: np.ndarray,
    ys: np.ndarray,
    cs: np.ndarray,
) -> None:
    """:func:`_tag_stats_typed`'s loops: ``sums`` (3 x codes, zeroed) gets each code's count,
    sum and sum of squares; ``col`` and ``prior_n`` each row's; ``ys``/``cs`` are scratch (the
    rows' values grouped by code, their running sum)."""
    n = y.shape[0]
    m = sums.shape[1]
    # counting sort: each code's first position, then each row's position (stable)
    fill = np.zeros(m + 1, dtype=np.intp)
    pos = np.empty(n, dtype=np.intp)
    _count_sort(inv, fill, pos)
    for i in range(n):
        ys[pos[i]] = y[i]
    for p in range(n):
        cs[p] = ys[p] if p == 0 else cs[p - 1] + ys[p]
    for i in range(n):
        c = inv[i]
        p = pos[i]
        s = fill[c]  # (its block's first position)
        k = p - s
        sums[0, c] += 1.0
        sums[1, c] += y[i]
        sums[2, c] += y[i] * y[i]
        prior = (cs[p] - ys[p]) - (cs[s] - ys[s])
        nk = 0.0 if empty_first and c == 0 else float(k)
        prior_n[i] = nk
        col[i] = prior / nk if nk > 0 else mean[i]


def _subs_by_code(
    codes: np.ndarray, times: np.ndarray, sub: np.ndarray, lists: list[list[float] | None]
) -> list[int]:
    """Each code's times (``lists[c]``, None where no run has code ``c``), runs taken in the
    order ``sub``; returns the codes in the order of their first run there. What
    :meth:`OnlinePredictor._build_subs` reads off ``_blocks`` (each code's runs in a stable
    order) in one typed pass (``predictor.pxd``): a ``float`` a run, appended."""
    order: list[int] = []
    for j in range(sub.shape[0]):
        i = sub[j]
        c = codes[i]
        got = lists[c]
        if got is None:
            got = lists[c] = []
            order.append(c)
        got.append(times[i])
    return order


@cython.boundscheck(False)
@cython.wraparound(False)
def _count_sort(inv: np.ndarray, first: np.ndarray, pos: np.ndarray) -> None:
    """``first[c]`` (``m + 1`` zeros in): the first position of code ``c`` in the rows sorted
    stably by code; ``pos[i]``: row ``i``'s position there (a counting sort)."""
    n = inv.shape[0]
    m = first.shape[0] - 1
    for i in range(n):
        first[inv[i] + 1] += 1
    for c in range(m):
        first[c + 1] += first[c]
    # (first[c] now counts the rows of codes below c: code c's first position; the next row
    # of code c goes to first[c] + how many of its rows came before, kept in first[c + 1]'s
    # place would lose it, so count them apart)
    seen = np.zeros(m, dtype=np.intp)
    for i in range(n):
        c = inv[i]
        pos[i] = first[c] + seen[c]
        seen[c] += 1


def _bisect_left(times: list[float], x: float) -> int:
    """``bisect.bisect_left(times, x)`` of a list of floats: CPython's loop (the same probes),
    each comparison of two floats (compiled, ``predictor.pxd``: C doubles, the same order)."""
    lo = 0
    hi = len(times)
    while lo < hi:
        mid = (lo + hi) // 2
        t = times[mid]
        if t < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _stats_hit(
    g: dict[str, list[float]],
    subs: dict[str, list[float]],
    stats: dict[str, tuple[float, int, Any]],
    group: str,
    now: float,
) -> Any:
    """:meth:`OnlinePredictor.group_stats`' kept answer for ``group`` at ``now`` while it holds
    (the group's finished runs ``g`` and its submissions before ``now`` in ``subs`` counted as
    when it was made), else None (``stats``: ``_stats``, or ``group_numbers``' ``_nums``). Compiled (``predictor.pxd``), the dictionaries' look-ups and
    the submissions' bisection are C calls."""
    e = g.get(group) if group else None
    times = subs.get(group) if group else None
    k = _bisect_left(times, now) if times is not None else 0
    runs = e[0] if e is not None else 0.0
    hit = stats.get(group)
    if hit is not None and hit[0] == runs and hit[1] == k:
        return hit[2]
    return None


def _new_gaps(times: list[float], done: int, k: int) -> list[float] | None:
    """The gaps ``times[i] - times[i - 1]`` for ``i`` in ``done..k-1``, in order; None where
    one is NaN or -0.0 (:meth:`OnlinePredictor._median_gap` then asks numpy). Compiled
    (``predictor.pxd``), each gap a C double: the same subtraction of the same floats (the
    sign of a zero gap, a rare tie, asked of ``math.copysign``)."""
    new: list[float] = []
    if done >= k:
        return new
    prev = times[done - 1]
    for i in range(done, k):
        t = times[i]
        g = t - prev
        if g != g or (g == 0.0 and math.copysign(1.0, g) < 0.0):
            return None
        new.append(g)
        prev = t
    return new


class OnlinePredictor:
    """PAI's CART run-time predictor, fitted online on finished runs (module docstring).

    Args:
        cfg: Parameters.
        history: Runs before the episode; those finished by time 0 are the warm start, all of
            them count as submissions (for :meth:`group_stats`).
        exact: An oracle: every estimate is the job's true ``work_s`` (``estimate_sigma: 0``).
    """

    # (Compiled, ``predictor.pxd``: an extension type whose fields are these slots, typed, and
    # whose estimate, observation and submission are C calls from the lifecycle: each was ~13 k
    # instructions of generic attribute reads and Python calls on a plain object.)
    __slots__ = (
        "_fit",
        "_fit_base",
        "_fit_expv",
        "_fit_feat",
        "_fit_left",
        "_fit_right",
        "_fit_src",
        "_fit_thr",
        "_g",
        "_gaps",
        "_hist_x",
        "_hist_y",
        "_n_hist",
        "_nums",
        "_pending",
        "_periods",
        "_rows_y",
        "_since_fit",
        "_stale",
        "_stats",
        "_subs",
        "_subs_base",
        "_subs_hist",
        "_subs_todo",
        "_sum",
        "_u",
        "_use_g",
        "_use_r",
        "_use_u",
        "_x32",
        "_y64",
        "cfg",
        "exact",
        "made",
        "n_fits",
        "observed",
    )

    def __init__(
        self, cfg: PredictorConfig, history: RunLog | None = None, *, exact: bool = False
    ) -> None:
        self.cfg = cfg
        self.exact = exact
        self._use_g = "group" in cfg.inputs
        self._use_u = "user" in cfg.inputs
        self._use_r = "request" in cfg.inputs
        # Episode rows, in the order they became known: log work (the features: ``_x32``).
        self._rows_y: list[float] = []
        self._g: dict[str, list[float]] = {}  # group -> [n, sum, sum of squares] of log work
        self._u: dict[str, list[float]] = {}
        self._sum = 0.0
        self._fit: _Fit | None = None
        self._set_fit(None)
        #: The tree of the warm start's rows alone (fitted at the first refit without episode
        #: rows), shared by this predictor's copies (a shared past's warm start is copied every
        #: episode, and each copy's first estimate fits those same rows): ``[None]`` until then.
        self._fit_base: list[_Fit | None] = [None]
        self._since_fit = 0
        #: Episode job ids observed, in completion order (the rows after the warm start).
        self.observed: list[int] = []
        #: Per job id: (time the estimate in force was made, episode runs observed then).
        self.made: dict[int, tuple[float, int]] = {}
        self.n_fits = 0
        # group -> submission times seen; built on the first group_stats (few episodes ask):
        # until then the history (all its submissions) and the episode's wait.
        self._subs: dict[str, list[float]] | None = None
        self._subs_hist = history
        self._subs_todo: list[tuple[str, float]] = []
        #: The history's part of ``_subs`` (group -> its submissions before the episode, in
        #: time order), made at the first build and shared by this predictor's copies (a
        #: shared past's warm start is copied every episode): its lists are never changed, a
        #: build copies them.
        self._subs_base: list[dict[str, list[float]] | None] = [None]
        #: (group, n) -> the median gap of the group's first n submissions (its lists only
        #: grow, so a prefix never changes): an event asks for every queued job's group.
        self._periods: dict[tuple[str, int], float] = {}
        #: group -> (n, the gaps between its first n submissions, sorted): the period's median
        #: as the group's submissions before now grow (:meth:`_median_gap`).
        self._gaps: dict[str, tuple[int, list[float]]] = {}
        #: group -> (its finished runs counted, its submissions before the time asked, the
        #: answer): :meth:`group_stats` changes only when one of the two counts does.
        self._stats: dict[str, tuple[float, int, GroupStats]] = {}
        #: The same for :meth:`group_numbers`' answers.
        self._nums: dict[str, tuple[float, int, tuple[int, float, float, float]]] = {}
        #: The warm start's rows as arrays (features, log work), before the episode's rows.
        self._hist_x = np.zeros((0, self._n_features()))
        self._hist_y = np.zeros(0)
        if history is not None and len(history):
            self._warm_start(history)
        self._n_hist: int = self._hist_y.size  # (the warm start's rows: fixed from here)
        #: Every row's features as the tree is fitted on them (float32: the warm start's, then
        #: each episode row's when it became known) and its log work, in row order: the
        #: training set is the last ``max_rows`` of them, a slice (capacity grows by doubling).
        n_hist = self._hist_y.size
        self._x32 = np.empty((n_hist + 1024, self._hist_x.shape[1]), dtype=np.float32)
        self._x32[:n_hist] = self._hist_x
        self._y64 = np.empty(n_hist + 1024)
        self._y64[:n_hist] = self._hist_y
        #: The latest episode rows' features, not yet in ``_x32`` (:meth:`_flush`, when the
        #: training set is asked for: one numpy write a refit instead of one a row).
        self._pending: list[list[float]] = []
        self._stale = True  # fitted when first asked (a draw nobody asks costs no fit)

    def _n_features(self) -> int:
        return 2 * self._use_g + 2 * self._use_u + self._use_r

    def _warm_start(self, history: RunLog) -> None:
        """:meth:`_add` for each history run finished by time 0, in finish order, vectorised
        (the same ordered statistics); every history submission is noted."""
        fin = history.finish_s
        order = lexsort2(history.submit_s, fin)
        order = order[fin[order] <= 0.0]
        y = np.log(np.maximum(history.work_s[order], 1e-9))
        n = y.size
        if _COMPILED:  # one typed pass each (~60 numpy calls fewer a reset)
            mean = np.empty(n)
            total = _prior_means(y, mean)
        else:
            cum = np.cumsum(y)
            before = cum - y  # sum of the rows before each one
            idx = np.arange(n, dtype=np.float64)
            mean = np.divide(before, idx, out=np.zeros(n), where=idx > 0)
            total = float(cum[-1]) if n else 0.0
        cols: list[np.ndarray] = []
        for use, keys, tags, table in (
            (self._use_g, history.group, history.group_codes, self._g),
            (self._use_u, history.user, history.user_codes, self._u),
        ):
            if tags is None:
                codes, inv = _codes(np.asarray(keys, dtype=object)[order].tolist())
            else:
                codes, inv = _sorted_codes(tags, order)
            empty_first = bool(codes) and codes[0] == ""  # ("" sorts first)
            stats = _tag_stats_typed if _COMPILED else _tag_stats
            col, prior_n, cnt, tot, sq = stats(inv, len(codes), y, mean, empty_first)
            if use:
                cols.append(col)
                cols.append(np.log1p(prior_n))
            _fill_table(table, codes, cnt, tot, sq)
        if self._use_r:
            cols.append(np.log2(np.maximum(history.gpus[order], 1e-3)))
        self._hist_x = np.column_stack(cols) if cols else np.zeros((n, 0))
        self._hist_y = y
        self._sum = total

    def __deepcopy__(self, memo: dict[int, Any]) -> OnlinePredictor:
        # A planner copies the simulator per rollout: share the config and the fitted tree
        # (replaced on refit, never changed), copy the rest.
        new = OnlinePredictor.__new__(OnlinePredictor)  # (no ``__init__``: every slot below)
        new.cfg = self.cfg
        new.exact = self.exact
        new._use_g, new._use_u, new._use_r = self._use_g, self._use_u, self._use_r
        new._sum = self._sum
        new._fit, new._fit_src = self._fit, self._fit_src
        new._fit_left, new._fit_right = self._fit_left, self._fit_right
        new._fit_feat, new._fit_thr, new._fit_expv = self._fit_feat, self._fit_thr, self._fit_expv
        new._since_fit = self._since_fit
        new.n_fits = self.n_fits
        new._subs = self._subs
        new._subs_hist = self._subs_hist
        new._subs_base = self._subs_base  # (shared: its lists are never changed)
        new._fit_base = self._fit_base  # (shared: the tree of the same rows)
        new._hist_x, new._hist_y = self._hist_x, self._hist_y  # (never changed)
        new._n_hist = self._n_hist
        new._stale = self._stale
        new._rows_y = list(self._rows_y)
        new._x32 = self._x32.copy()
        new._y64 = self._y64.copy()
        new._pending = list(self._pending)  # (its rows are never changed)
        new._g = {k: list(v) for k, v in self._g.items()}
        new._u = {k: list(v) for k, v in self._u.items()}
        new.observed = list(self.observed)
        new.made = dict(self.made)
        if self._subs is not None:
            new._subs = {k: list(v) for k, v in self._subs.items()}
        new._subs_todo = list(self._subs_todo)
        new._periods, new._gaps = {}, {}  # (the copy's lists grow apart from these)
        new._stats, new._nums = {}, {}
        memo[id(self)] = new
        return new

    # ------------------------------------------------------------------ rows
    @cython.locals(y=cython.double, w=cython.double, g=cython.double)
    def _add(self, group: str, user: str, gpus: float, work_s: float) -> None:
        w = work_s
        y = _ln(1e-9 if w < 1e-9 else w)  # ``math.log(max(work_s, 1e-9))``
        # Its features from the runs known before it (ordered target statistics): what an
        # estimate of it made just before it finished would have seen, so the tree learns the
        # mapping it is later asked for (a leave-one-out encoding instead leaks the row's own
        # target into a small user's mean, inverted).
        g = gpus
        self._pending.append(self._features(group, user, _lg2(1e-3 if g < 1e-3 else g)))
        self._rows_y.append(y)
        self._sum += y
        if group:
            _count(self._g, group, y)
        if user:
            _count(self._u, user, y)

    def observe(self, spec: JobSpec, job_id: int) -> bool:
        """A run of ``spec`` finished (now): it becomes a row. Returns whether the tree was
        refitted (every ``refit_every`` runs)."""
        self._add(
            _take(spec, _S_GROUP),
            _take(spec, _S_USER),
            _take(spec, _S_NUM_GPUS) * _take(spec, _S_GPU_FRAC),
            _take(spec, _S_WORK_S),
        )
        self.observed.append(job_id)
        self._since_fit += 1
        if self._since_fit >= self.cfg.refit_every:
            self._refit()
            return True
        return False

    def note_submit(self, spec: JobSpec, now: float) -> None:
        """A job was submitted now (its group's submission pattern, for :meth:`group_stats`)."""
        group = _take(spec, _S_GROUP)
        if group:
            if self._subs is None:
                self._subs_todo.append((group, now))
            else:
                self._subs.setdefault(group, []).append(now)

    # ------------------------------------------------------------------ model
    @cython.locals(n_all=cython.Py_ssize_t, mean=cython.double)
    def _features(self, group: str, user: str, r: float) -> list[float]:
        """A row's inputs now: per tag used (group, then user), its finished runs' mean log
        work (the global mean where it has none) and ``log1p`` of their count; then ``r``."""
        x: list[float] = []
        n_all = len(self._rows_y) + self._n_hist  # every row: the mean log work of all of them
        mean = self._sum / n_all if n_all else 0.0
        if self._use_g:
            _encode(self._g.get(group) if group else None, mean, x)
        if self._use_u:
            _encode(self._u.get(user) if user else None, mean, x)
        if self._use_r:
            x.append(r)
        return x

    def _flush(self) -> None:
        """Write the pending rows (:meth:`_add`) into the row buffers."""
        rows = self._pending
        if not rows:
            return
        end = self._hist_y.size + len(self._rows_y)
        start = end - len(rows)
        while end > self._y64.size:  # (full: twice the room)
            self._x32 = np.concatenate([self._x32, np.empty_like(self._x32)])
            self._y64 = np.concatenate([self._y64, np.empty_like(self._y64)])
        # (float32 rows from Python floats: each rounded as numpy casts a float64 array, the
        # same as a row written alone)
        if _COMPILED:  # a typed loop (numpy's assignment of nested lists: ~600 per value)
            _write_rows(self._x32, self._y64, start, rows, self._rows_y, start - self._hist_y.size)
        else:
            self._x32[start:end] = rows
            self._y64[start:end] = self._rows_y[start - self._hist_y.size :]
        self._pending = []

    def training_set(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows the tree is fitted on now: features (float32, C order) and log run times
        (``None``: under 2 rows, or no input): the latest ``max_rows`` rows, the episode's
        and, before them, the warm start's latest ones."""
        self._flush()
        end = self._hist_y.size + len(self._rows_y)
        start = max(0, end - self.cfg.max_rows)
        if end - start < 2 or not self.cfg.inputs:
            return None
        # sklearn fits on float32 X (it converts a float64 X itself): kept as float32 here,
        # C-ordered, it is the array sklearn's input check would make, and that check is skipped.
        # (Views of the row buffers: rows are only appended, a full buffer is replaced.)
        return self._x32[start:end], self._y64[start:end]

    def _refit(self) -> None:
        self._since_fit = 0
        self._stale = False
        base = self._fit_base
        warm = not self._rows_y  # (the training set is the warm start's rows alone)
        if warm and base[0] is not None:  # (``_fit_tree``'s memo without its key: ~120 k)
            self._set_fit(base[0])
            self.n_fits += 1
            return
        rows = self.training_set()
        if rows is None:
            self._set_fit(None)
            return
        fit = _fit_tree(*rows, self.cfg.max_leaf_nodes)
        if warm:
            base[0] = fit
        self._set_fit(fit)
        self.n_fits += 1

    def _set_fit(self, fit: _Fit | None) -> None:
        """``_fit`` := ``fit``, with its node lists and its leaves' exps kept beside it (the
        estimates' walk reads them as typed fields, compiled; the exps are the ones
        :func:`_fit_exp` makes on first use, made here)."""
        self._fit = self._fit_src = fit
        if fit is None:
            self._fit_left = self._fit_right = self._fit_feat = self._fit_thr = None
            self._fit_expv = None
            return
        e = fit.exp_value
        if e is None:
            e = fit.exp_value = [math.exp(v) for v in fit.value]
        self._fit_left, self._fit_right = fit.left, fit.right
        self._fit_feat, self._fit_thr, self._fit_expv = fit.feature, fit.threshold, e

    def predict_log(self, spec: JobSpec) -> float:
        """The model's log run time for ``spec`` now (records nothing)."""
        if self._stale:
            self._refit()
        if self._fit is not None:
            x = self._features(spec.group, spec.user, math.log2(spec.num_gpus * spec.gpu_frac))
            return self._fit.predict(x)
        if self._rows_y or self._hist_y.size:
            return _median([*self._hist_y.tolist(), *self._rows_y])
        return math.log(self.cfg.prior_work_s)

    @cython.locals(r=cython.double)
    def estimate(self, spec: JobSpec, now: float) -> float:
        """The estimate of ``spec``'s run time made now (recorded in :attr:`made`)."""
        self.made[_take(spec, _S_JOB_ID)] = (now, len(self.observed))
        if self.exact:
            return spec.work_s
        if self._stale:
            self._refit()
        fit = self._fit
        if fit is not None:  # (predict_log's, with the leaf's exp memoised: ``_fit_exp``)
            if fit is not self._fit_src:
                self._set_fit(fit)  # (``_fit`` set from outside)
            r = _take(spec, _S_NUM_GPUS) * _take(spec, _S_GPU_FRAC)
            x = self._features(
                _take(spec, _S_GROUP), _take(spec, _S_USER), _lg2(r) if r > 0.0 else math.log2(r)
            )
            return self._fit_expv[  # type: ignore[index]
                _leaf(self._fit_left, self._fit_right, self._fit_feat, self._fit_thr, x)  # type: ignore[arg-type]
            ]
        return math.exp(self.predict_log(spec))

    def estimate_many(self, specs: list[JobSpec], now: float) -> list[float]:
        """:meth:`estimate` of each of ``specs`` in turn, made now: the same estimates and
        records. (A queue's re-estimation after a refit asks for thousands at one instant:
        one model state answers them all, so the specs that share a group, a user and a
        request share one answer.)"""
        made = self.made
        when = (now, len(self.observed))
        for spec in specs:
            made[spec.job_id] = when
        if self.exact:
            return [spec.work_s for spec in specs]
        if self._stale:
            self._refit()
        fit = self._fit
        if fit is None:  # (no tree: one answer whatever the spec)
            return [math.exp(self.predict_log(spec)) for spec in specs[:1]] * len(specs)
        out: list[float] = []
        memo: dict[tuple[str, str, float], float] = {}
        for spec in specs:
            r = spec.num_gpus * spec.gpu_frac
            key = (spec.group, spec.user, r)
            est = memo.get(key)
            if est is None:
                x = self._features(spec.group, spec.user, math.log2(r))
                est = memo[key] = _fit_exp(fit, x)
            out.append(est)
        return out

    def _build_subs(self) -> dict[str, list[float]]:
        """Submission times per group: every history submission in time order (the history's
        part made once, ``_subs_base``), then the episode's in the order noted."""
        subs: dict[str, list[float]] = {}
        if self._subs_hist is not None:
            base = self._subs_base[0]
            if base is None:
                base = self._subs_base[0] = self._hist_subs()
            for g, times in base.items():
                subs[g] = list(times)
        for g, t in self._subs_todo:
            if g:
                subs.setdefault(g, []).append(t)
        self._subs_hist, self._subs_todo = None, []
        return subs

    def _hist_subs(self) -> dict[str, list[float]]:
        """The history's submission times per group, in time order (``_subs_hist``'s)."""
        todo: list[tuple[str, float]] = []
        h = self._subs_hist
        subs: dict[str, list[float]] = {}
        if h is not None and len(h):
            sub = np.argsort(h.submit_s, kind="stable")
            gc = h.group_codes
            if (
                _COMPILED
                and gc is not None
                and gc.index.dtype == np.intp
                and h.submit_s.dtype == np.float64
            ):
                # one typed pass over the runs in time order (the same lists, in the same order)
                names = gc.names
                lists: list[list[float] | None] = [None] * len(names)
                for c in _subs_by_code(
                    np.ascontiguousarray(gc.index),
                    np.ascontiguousarray(h.submit_s),
                    sub,
                    lists,
                ):
                    g = names[c]
                    if g:
                        subs[g] = lists[c]  # type: ignore[assignment]
            elif gc is not None:
                # by code: each group's times in one slice, the groups in the order of their
                # first submission (the dict the per-string loop built)
                names = gc.names
                by, count = _blocks(gc.index[sub], len(names))
                times = h.submit_s[sub][by].tolist()
                ends = np.cumsum(count)
                code = np.flatnonzero(count)
                first = by[(ends - count)[code]]  # each code's first submission (stable)
                ends_l, count_l = ends.tolist(), count.tolist()
                for c in code[np.argsort(first)].tolist():
                    g = names[c]
                    if g:
                        subs[g] = times[ends_l[c] - count_l[c] : ends_l[c]]
            else:
                groups = np.asarray(h.group, dtype=object)[sub].tolist()
                todo = list(zip(groups, h.submit_s[sub].tolist(), strict=True)) + todo
        for g, t in todo:
            if g:
                subs.setdefault(g, []).append(t)
        return subs

    def group_stats(self, spec: JobSpec, now: float) -> GroupStats:
        """What the log says about ``spec``'s group now (the same object while neither its
        finished runs nor its submissions before ``now`` change: its runs' sums only grow with
        their count, and a count of submissions before ``now`` fixes the last and the period)."""
        group = spec.group
        if self._subs is None:
            self._subs = self._build_subs()
        out = _stats_hit(self._g, self._subs, self._stats, group, now)
        if out is not None:  # (the kept answer holds: a typed read, compiled)
            return out
        runs, k, n, mean, std, last, period = self._group_parts(group, now)
        out = GroupStats(n, mean, std, last, period)
        self._stats[group] = (runs, k, out)
        return out

    def group_numbers(self, group: str, now: float) -> tuple[int, float, float, float]:
        """:meth:`group_stats` of a job of ``group`` as the tuple (``runs_seen``,
        ``mean_log_s``, ``std_log_s``, ``period_s``): the same numbers, no ``GroupStats``
        made (a frozen dataclass: ~5 k instructions), the same tuple while they hold (kept
        apart from ``group_stats``' answers). What a candidate builder's group columns read
        (``envs/candidates.py``, ``_group_cols``)."""
        if self._subs is None:
            self._subs = self._build_subs()
        kept = _stats_hit(self._g, self._subs, self._nums, group, now)
        if kept is not None:
            return kept  # type: ignore[no-any-return]
        runs, k, n, mean, std, _, period = self._group_parts(group, now)
        out = (n, mean, std, period)
        self._nums[group] = (runs, k, out)
        return out

    def _group_parts(
        self, group: str, now: float
    ) -> tuple[float, int, int, float, float, float, float]:
        """Of ``group`` now (``_subs`` built): its finished runs counted, its submissions
        before ``now`` counted, and ``group_stats``' five numbers."""
        assert self._subs is not None
        e = self._g.get(group) if group else None
        # a group's times are in time order (the history's sorted, then the episode's as they
        # come), so the submissions before now are a prefix
        times = self._subs.get(group, []) if group else []
        k = _bisect_left(times, now)  # (``bisect.bisect_left``'s index: ``_stats_hit``'s)
        runs = e[0] if e is not None else 0.0
        nan = math.nan
        if e is None:
            n, mean, std = 0, nan, nan
        else:
            n = int(e[0])
            mean = e[1] / e[0]
            std = math.sqrt(max(0.0, e[2] / e[0] - mean * mean)) if n >= 2 else nan
        last = times[k - 1] if k else nan
        period = nan
        if k >= 2:
            key = (group, k)
            p = self._periods.get(key)
            if p is None:
                p = self._periods[key] = self._median_gap(group, times, k)
            period = p
        return runs, k, n, mean, std, last, period

    def _median_gap(self, group: str, times: list[float], k: int) -> float:
        """``float(np.median(np.diff(times[:k])))``, the same double, from the group's gaps
        kept sorted as its prefix grows: the middle gap, or the two middle ones' sum halved
        (numpy's mean of two). Where a gap is NaN or -0.0 (numpy's partition may order those
        otherwise) or ``k`` is below what is kept, numpy's median itself."""
        done, gaps = self._gaps.get(group, (1, []))
        if k < done:
            return float(np.median(np.diff(times[:k])))
        new = _new_gaps(times, done, k)
        if new is None:
            return float(np.median(np.diff(times[:k])))
        if len(new) > 16:
            gaps = sorted(gaps + new)
        else:
            for g in new:
                bisect.insort(gaps, g)
        self._gaps[group] = (k, gaps)
        m = len(gaps)
        return gaps[m // 2] if m % 2 else (gaps[m // 2 - 1] + gaps[m // 2]) / 2


@dataclass
class EstimateAudit:
    """The independent leak check's verdict (:func:`audit_estimates`)."""

    checked: int = 0
    leaky: int = 0
    leaky_ids: list[int] = field(default_factory=list)


def audit_estimates(
    made: dict[int, tuple[float, int]],
    observed: list[int],
    finish_t: dict[int, float],
) -> EstimateAudit:
    """Count estimates that used a run not finished when they were made.

    Independent of the predictor's bookkeeping of what finished: ``finish_t`` is the
    simulator's completion time of each job that completed (its own record), and an estimate
    made at ``t`` after ``k`` observed runs used ``observed[:k]``; it is leaky if one of those
    has no completion at or before ``t``.
    """
    out = EstimateAudit()
    # latest[k]: the latest completion among observed[:k] (inf if one never completed)
    latest = [-math.inf]
    for used in observed:
        latest.append(max(latest[-1], finish_t.get(used, math.inf)))
    for jid, (t, k) in sorted(made.items()):
        out.checked += 1
        if k >= len(latest) or not latest[k] <= t:
            out.leaky += 1
            out.leaky_ids.append(jid)
    return out
