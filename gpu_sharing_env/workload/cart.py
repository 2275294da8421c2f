# cython: boundscheck=False, wraparound=False
"""The predictor's CART fit, fast: scikit-learn's tree, bit for bit.

:class:`~gpu_sharing_env.workload.predictor.OnlinePredictor` fits
``DecisionTreeRegressor(criterion="absolute_error", max_leaf_nodes=k, random_state=0)``.
:func:`fit` builds the tree that call builds (the same node ids, children, split features,
thresholds and values) with a faster split search. ``tests/test_cart_exact.py`` checks it
against scikit-learn; ``SKLEARN_VERSIONS`` names the releases it replicates.

What scikit-learn 1.9 does (``sklearn/tree/_tree.pyx`` ``BestFirstTreeBuilder``,
``_splitter.pyx`` ``node_split_best``, ``_partitioner.pyx``, ``_criterion.pyx`` ``MAE``,
``_utils.pyx`` ``WeightedFenwickTree``, ``utils/_sorting.pyx``), for unit weights, every
feature visited, ``min_samples_leaf=1``:

- A node's value is the median of its ``y`` (the mean of the two middle values for an even
  count); its impurity the mean absolute error around it.
- A node's split: the features are visited in an order drawn from ``random_state`` (its own
  ``rand_r``, a Fisher-Yates draw over a feature array kept from node to node); for each, the
  node's samples are sorted by it (an introsort, in place: the order of equal values is the
  sort's), and every position ``p`` where ``x[p] > x[p-1] + 1e-7`` (float32:
  ``FEATURE_THRESHOLD``) is a candidate, scored ``-(AE_left + AE_right)``
  (``proxy_impurity_improvement``; AE: absolute error around each side's median, summed with
  a Fenwick tree over the samples in that sorted order). The first strictly best wins. The
  threshold is ``x[p-1] / 2 + x[p] / 2`` in double; the samples are then partitioned in place
  (``x <= threshold`` left). A node is a leaf under 2 samples, with an impurity
  ``<= DBL_EPSILON``, without a candidate, or with an improvement ``< -DBL_EPSILON``.
- Best first: each node's split is searched when the node is created (children left then
  right, numbered in that order); nodes wait in a ``std::vector`` heap on their improvement
  (a leaf's 0), the top one is expanded next, until ``max_leaf_nodes - 1`` nodes are split.

Here the samples array, the feature array, the random draws and the heap are kept as
scikit-learn keeps them (the same sort, partition and heap operations, replayed), but the
candidates are scored by :func:`_scan_node`: a sorted linked list with a moving median, O(n)
per feature and node where scikit-learn ranks the targets again and runs its Fenwick tree
twice (O(n log n)). Its sums round differently, so a decision is taken on its numbers only
by a margin above a bound on both computations' rounding error (:func:`_error_bound`); inside
the margin the numbers compared are scikit-learn's own, recomputed as it computes them (its
ranks, its Fenwick tree, its arithmetic, on the orders its sorts and partitions left):
candidates near the best (:func:`_exact_proxies`, common: the absolute error is flat where a
sample moves between a side's two middle values, and two features can cut the same
samples), impurities and improvements near zero or near another node's
(:meth:`_Builder.impurity`, :meth:`_Builder.exact_improvement`). Equal numbers then resolve
as scikit-learn resolves them (the first in its visiting order; the heap's order).

Work skipped where the result is provably the same: a feature with one value on every row is
constant in every node without its sort (which would move no sample); a column equal to an
earlier one (a twin) reuses its absolute errors (the same samples on each side of every
candidate); a node's sorted targets and their ranks are read off one sort of all the rows; a
child's order by a feature whose values on its samples are distinct is read off its parent's
order by it (:func:`_inherit`: distinct values sort to one order, whatever the sort's moves).

The sorts move one integer a sample, ``code << 32 | payload`` (:data:`_KEY_SHIFT`): the code
compares as the value does (its rank among the column's distinct values, or a float32's bits,
:func:`_float_codes`), so the introsort makes scikit-learn's moves; the payload is the row (or
the position) scikit-learn moves beside the value.

The loops are typed for Cython by ``cart.pxd`` beside this file: the builder, its nodes and
its heap are extension types, the builder's work arrays are made once a fit and typed once (a
node slices them; its orders live at its samples' columns in the buffer of its depth's
parity). Compiled, a fit is ~3-5x faster than scikit-learn's (process time, the predictor's
training sets, ``docs/notes/2026-12-01-cart-fit-arrays.md``). Interpreted it is ~30x slower:
the predictor calls :func:`fit` only where :data:`COMPILED` (``scripts/bench_cart.py`` times
both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Whether this module runs compiled (a Cython extension) rather than from its source.
COMPILED: bool = not __file__.endswith(".py")
#: The scikit-learn releases whose tree builder this module replicates (version prefixes):
#: another one may build other trees, and the predictor then fits scikit-learn's.
SKLEARN_VERSIONS: tuple[str, ...] = ("1.9.",)

#: scikit-learn's ``FEATURE_THRESHOLD`` (float32): positions closer than this are not cut.
FEATURE_THRESHOLD = np.float32(1e-7)
#: scikit-learn's ``EPSILON`` (``np.finfo('double').eps``): impurity and improvement floors.
DBL_EPSILON = float(np.finfo(np.float64).eps)
_UNIT_ROUNDOFF = 2.0**-53
_TREE_LEAF = -1
_TREE_UNDEFINED = -2
_RAND_R_MAX = 2147483647
#: The splitter's first ``rand_r`` state: ``RandomState(0).randint(0, RAND_R_MAX)``
#: (``Splitter.init``; the estimator draws nothing from it before).
_SEED = int(np.random.RandomState(0).randint(0, _RAND_R_MAX))


@dataclass(frozen=True)
class Tree:
    """A fitted tree in scikit-learn's node order (``tree_.children_left`` and so on)."""

    children_left: list[int]
    children_right: list[int]
    feature: list[int]
    threshold: list[float]
    value: list[float]


def _error_bound(n: int, y_abs_max: float) -> float:
    """A bound on the rounding error of an absolute-error sum over ``n`` values ``|y| <= Y``
    (``n * Y`` at most), as either scikit-learn or :func:`_scan_node` computes it, with a
    wide margin: both add and subtract the values at most ~3n times, each rounding off at most
    ``u * n * Y`` (``u = 2**-53``); the bound is ~10x that."""
    return 64.0 * (n + 16) * n * y_abs_max * _UNIT_ROUNDOFF


# ---------------------------------------------------------------- scikit-learn's mechanics
def _rand_int(state: list[int], high: int) -> int:
    """``rand_int(0, high, &state)`` (``sklearn/utils/_random.pxd`` ``our_rand_r``)."""
    # (the masks and the modulus in typed locals: compiled, C arithmetic, no Python int)
    mask = 0xFFFFFFFF  # uint32's wrap-around
    modulus = _RAND_R_MAX + 1
    s = state[0]
    if s == 0:
        s = 1
    s ^= (s << 13) & mask
    s ^= s >> 17
    s ^= (s << 5) & mask
    state[0] = s
    return (s % modulus) % high


#: A sort key: a value's dense code (its rank among the distinct values, ``==`` ones alike)
#: above ``_KEY_SHIFT`` bits, the payload (a row or a position) below: the sorts move one
#: integer where scikit-learn's move a value and an index, and compare the codes as it
#: compares the values (``<``, ``>``, ``==`` alike), so they make the same moves.
#: (Written out: compiled, these are C integers, and ``1 << 32`` of a C int overflows.)
_KEY_SHIFT = 32
_KEY_MASK = 0xFFFFFFFF  # (1 << _KEY_SHIFT) - 1
#: The rows a fit takes, fewer than this (payloads below ``_KEY_SHIFT`` bits); scikit-learn
#: fits more.
_MAX_ROWS = 0x80000000  # 1 << (_KEY_SHIFT - 1)


def _dense_codes(rows: np.ndarray, order: np.ndarray, out: np.ndarray) -> None:
    """``out[f, i]``: the rank of ``rows[f, i]`` among row ``f``'s distinct values (``==``:
    ``0.0`` and ``-0.0`` alike), given ``order[f]``, the row's positions sorted by value."""
    for f in range(rows.shape[0]):
        c = 0
        for i in range(rows.shape[1]):
            r = order[f, i]
            if i > 0 and rows[f, r] != rows[f, order[f, i - 1]]:
                c += 1
            out[f, r] = c


def _float_codes(bits: np.ndarray, out: np.ndarray) -> None:
    """``out[f, i]``: a code of the float32 whose bits (int32) are ``bits[f, i]``, in the
    floats' order (``<``, ``==`` alike; no ``-0.0``, no NaN): a non-negative float's bits
    count up with it, a negative one's down (its sign bit set: the rest flipped)."""
    for f in range(bits.shape[0]):
        for i in range(bits.shape[1]):
            b = bits[f, i]
            out[f, i] = b if b >= 0 else b ^ 0x7FFFFFFF


def _sort(values: np.ndarray, idx: np.ndarray, lo: int, n: int) -> None:
    """``simultaneous_sort(&values[lo], &idx[lo], n, use_three_way_partition=True)``:
    scikit-learn's introsort, the same swaps (float32 values compare alike as doubles), on
    the values' keys (:data:`_KEY_SHIFT`). (The fit sorts keys it makes itself: ``_sort_by``,
    ``_ranks_into``; this is the sort as scikit-learn's API has it.)"""
    if n == 0:
        return
    seg = values[lo : lo + n].copy()
    codes = np.empty((1, n), dtype=np.intp)
    _dense_codes(seg.reshape(1, n), np.argsort(seg, kind="stable").reshape(1, n), codes)
    keys = (codes[0] << _KEY_SHIFT) | np.arange(n, dtype=np.intp)
    _sort_keys(keys, n)
    perm = keys & _KEY_MASK
    values[lo : lo + n] = seg[perm]
    idx[lo : lo + n] = idx[lo : lo + n][perm]


def _sort_keys(keys: np.ndarray, n: int) -> None:
    """scikit-learn's introsort (``simultaneous_sort``) of ``keys[:n]`` by their codes."""
    if n == 0:
        return
    _introsort(keys, 0, n, 2 * int(math.log2(n)))


def _introsort(keys: np.ndarray, lo: int, n: int, maxd: int) -> None:
    while n > 15:
        if maxd <= 0:
            _heapsort(keys, lo, n)
            return
        maxd -= 1
        a = keys[lo] >> _KEY_SHIFT
        b = keys[lo + n // 2] >> _KEY_SHIFT
        c = keys[lo + n - 1] >> _KEY_SHIFT
        if a < b:
            pivot = b if b < c else (c if a < c else a)
        elif b < c:
            pivot = a if a < c else c
        else:
            pivot = b
        below = pivot << _KEY_SHIFT  # a key below: its value < the pivot
        above = (pivot + 1) << _KEY_SHIFT  # a key from here: its value > the pivot
        i = 0
        left = 0
        r = n
        while i < r:
            k = keys[lo + i]
            if k < below:
                keys[lo + i] = keys[lo + left]
                keys[lo + left] = k
                i += 1
                left += 1
            elif k >= above:
                r -= 1
                keys[lo + i] = keys[lo + r]
                keys[lo + r] = k
            else:
                i += 1
        _introsort(keys, lo, left, maxd)
        lo += r
        n -= r
    for i in range(1, n):
        k = keys[lo + i]
        above = ((k >> _KEY_SHIFT) + 1) << _KEY_SHIFT  # keys with a greater value
        j = i
        while j > 0 and keys[lo + j - 1] >= above:
            keys[lo + j] = keys[lo + j - 1]
            j -= 1
        keys[lo + j] = k


def _heapsort(keys: np.ndarray, lo: int, n: int) -> None:
    start = (n - 2) // 2
    while True:
        _sift_down(keys, lo, start, n)
        if start == 0:
            break
        start -= 1
    end = n - 1
    while end > 0:
        k = keys[lo]
        keys[lo] = keys[lo + end]
        keys[lo + end] = k
        _sift_down(keys, lo, 0, end)
        end -= 1


def _sift_down(keys: np.ndarray, lo: int, start: int, end: int) -> None:
    root = start
    while True:
        child = root * 2 + 1
        maxind = root
        if child < end and keys[lo + maxind] >> _KEY_SHIFT < keys[lo + child] >> _KEY_SHIFT:
            maxind = child
        if child + 1 < end and keys[lo + maxind] >> _KEY_SHIFT < keys[lo + child + 1] >> _KEY_SHIFT:
            maxind = child + 1
        if maxind == root:
            break
        k = keys[lo + root]
        keys[lo + root] = keys[lo + maxind]
        keys[lo + maxind] = k
        root = maxind


def _sort_by(
    xrow: np.ndarray,
    xrow_hi: np.ndarray,
    code: np.ndarray,
    idx: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    vals_hi: np.ndarray,
    out: np.ndarray,
) -> bool:
    """Sort the samples ``idx`` by a feature (``xrow``; ``code``: its values' dense codes,
    :func:`_dense_codes`) as the splitter does; their sorted values in ``vals`` (``vals_hi``:
    + ``FEATURE_THRESHOLD``), the order in ``out`` (``keys``: scratch). Returns whether the
    feature is constant there (``max <= min + FEATURE_THRESHOLD``)."""
    n = idx.shape[0]
    # Values already strictly increasing (a twin of the feature sorted just before, with no
    # ties): the sort's result is the one sorted order there is, the input itself. (The
    # codes compare as the values do.)
    done = True
    for i in range(n):
        keys[i] = (code[idx[i]] << _KEY_SHIFT) | idx[i]
        if i > 0 and done and not code[idx[i - 1]] < code[idx[i]]:
            done = False
    if not done:
        _sort_keys(keys, n)
    for i in range(n):
        s = keys[i] & _KEY_MASK
        idx[i] = s
        out[i] = s
        vals[i] = xrow[s]
        vals_hi[i] = xrow_hi[s]
    return vals[n - 1] <= vals_hi[0]


def _take_sorted(
    xrow: np.ndarray,
    xrow_hi: np.ndarray,
    pre: np.ndarray,
    idx: np.ndarray,
    vals: np.ndarray,
    vals_hi: np.ndarray,
    out: np.ndarray,
) -> bool:
    """:func:`_sort_by` where the samples ``idx`` hold distinct values of the feature and
    ``pre`` is them in ascending order: the sort's result (the one sorted order there is),
    written into ``idx`` without it."""
    n = idx.shape[0]
    for i in range(n):
        idx[i] = pre[i]
        out[i] = pre[i]
        vals[i] = xrow[pre[i]]
        vals_hi[i] = xrow_hi[pre[i]]
    return vals[n - 1] <= vals_hi[0]


def _ties(vals: np.ndarray, cap: int) -> int:
    """How many neighbours of sorted ``vals`` are equal (``not <``), counted up to ``cap``."""
    t = 0
    for i in range(1, vals.shape[0]):
        if not vals[i - 1] < vals[i]:
            t += 1
            if t >= cap:
                break
    return t


def _inherit(
    porder: np.ndarray,
    cand: list[int],
    idx: np.ndarray,
    mark: np.ndarray,
    xt: np.ndarray,
    pre: np.ndarray,
    known: np.ndarray,
) -> None:
    """A child's sorted orders read off its parent's: for each candidate ``(r, f, sure)`` in
    ``cand`` (flat; ``r``: a row of the parent's ``porder``, its samples sorted by feature
    ``f``), the child's samples ``idx`` in that order, in ``pre[f]``; ``known[f]`` where their
    values are distinct there (``sure``: they were on the parent's samples), so that this is
    the order any sort gives them (:func:`_visit`). ``mark``: zeros, left zeroed."""
    n = idx.shape[0]
    for i in range(n):
        mark[idx[i]] = 1
    for j in range(0, len(cand), 3):
        r = cand[j]
        f = cand[j + 1]
        m = 0
        for i in range(porder.shape[1]):
            s = porder[r, i]
            if mark[s]:
                pre[f, m] = s
                m += 1
        ok = 1
        if not cand[j + 2]:
            for i in range(1, n):
                if not xt[f, pre[f, i - 1]] < xt[f, pre[f, i]]:
                    ok = 0
                    break
        known[f] = ok
    for i in range(n):
        mark[idx[i]] = 0


def _visit(
    xt: np.ndarray,
    xt_hi: np.ndarray,
    xcode: np.ndarray,
    idx: np.ndarray,
    keys: np.ndarray,
    xs: np.ndarray,
    xs_hi: np.ndarray,
    order: np.ndarray,
    feats: list[int],
    rand: list[int],
    same: np.ndarray,
    pre: np.ndarray,
    known: np.ndarray,
) -> list[int]:
    """``node_split_best``'s visit of the features: drawn from ``rand`` (Fisher-Yates over
    ``feats``, kept from node to node), each one sorts the node's samples ``idx`` in place
    (:func:`_sort_by`; ``xcode``: the rows' dense codes, ``keys``: scratch). Returns the non-constant features in the order visited; the ``k``-th
    one's sorted values are ``xs[k]`` (and ``xs_hi[k]``), its order ``order[k]``. (A typed
    loop: compiled, the rows are memoryview slices, no Python object per feature.)

    A feature with ``same[f]`` (one value on every row of the training set) is constant in
    every node and its sort leaves ``idx`` as it is (the introsort moves no sample among equal
    values: its partition swaps only values unequal to the pivot, its insertion sort shifts
    only past a strictly greater one): it is taken as constant without the sort.

    A feature with ``known[f]`` takes ``pre[f]`` as its sorted order without the sort:
    :func:`_node` sets it where the feature's values on the node's samples are all distinct,
    the samples in their order (read off the parent's sorted order, :func:`_inherit`):
    distinct values sort to one order, whatever the sort's moves and its input."""
    nf = xt.shape[0]
    vf: list[int] = []
    f_i = nf
    n_found = 0
    while f_i > n_found:
        f_j = _rand_int(rand, f_i - n_found) + n_found
        feat = feats[f_j]
        k = len(vf)
        if same[feat]:
            is_const = True
        elif known[feat]:
            is_const = _take_sorted(
                xt[feat], xt_hi[feat], pre[feat], idx, xs[k], xs_hi[k], order[k]
            )
        else:
            is_const = _sort_by(
                xt[feat], xt_hi[feat], xcode[feat], idx, keys, xs[k], xs_hi[k], order[k]
            )
        if is_const:
            feats[f_j], feats[n_found] = feats[n_found], feats[f_j]  # constant
            n_found += 1
            continue
        f_i -= 1
        feats[f_i], feats[f_j] = feats[f_j], feats[f_i]
        vf.append(feat)
    return vf


def _near(
    ae_left: np.ndarray,
    ae_right: np.ndarray,
    xs: np.ndarray,
    xs_hi: np.ndarray,
    margin: float,
    out: np.ndarray,
    cand: np.ndarray,
    score: np.ndarray,
) -> int:
    """The candidates within ``margin`` of the best: ``f * (n - 1) + p - 1`` for feature row
    ``f`` and position ``p`` (``xs[f, p] > xs_hi[f, p - 1]``), ascending, in ``out``; how many
    (0: no candidate). A candidate's score is ``-(ae_left[f, p] + ae_right[f, p])``. (Every
    candidate and its score are kept in ``cand`` and ``score``, as long as ``out``, for the
    second pass.)"""
    k = ae_left.shape[0]
    n = ae_left.shape[1] - 1
    top = -math.inf
    found = False
    m = 0
    for f in range(k):
        for p in range(1, n):
            if xs[f, p] > xs_hi[f, p - 1]:
                v = -(ae_left[f, p] + ae_right[f, p])
                cand[m] = f * (n - 1) + p - 1
                score[m] = v
                m += 1
                if not found or v > top:
                    top = v
                    found = True
    if not found:
        return 0
    floor = top - margin
    j = 0
    for i in range(m):
        if score[i] >= floor:
            out[j] = cand[i]
            j += 1
    return j


def _node_ranks(
    y: np.ndarray,
    by_y: np.ndarray,
    idx: np.ndarray,
    mark: np.ndarray,
    rank: np.ndarray,
    ys: np.ndarray,
) -> None:
    """A node's targets sorted, in ``ys``, and each sample's rank in them, ``rank[sample]``,
    read off ``by_y`` (every row by target, stably): O(N) a node where an argsort of the node's
    targets is O(n log n). Equal targets are ranked by row. ``mark``: N zeros (left zeroed)."""
    n = idx.shape[0]
    for i in range(n):
        mark[idx[i]] = 1
    j = 0
    for i in range(by_y.shape[0]):
        r = by_y[i]
        if mark[r]:
            mark[r] = 0
            rank[r] = j
            ys[j] = y[r]
            j += 1
            if j == n:
                break


def _same_targets(y: np.ndarray, order: np.ndarray, f: int, g: int) -> bool:
    """Whether ``y[order[f]]`` and ``y[order[g]]`` are the same doubles, bit for bit (what
    their bytes' equality says: ``0.0`` and ``-0.0`` differ; ``y`` holds no NaN), without
    gathering either."""
    for i in range(order.shape[1]):
        a = y[order[f, i]]
        b = y[order[g, i]]
        if a != b or (a == 0.0 and math.copysign(1.0, a) != math.copysign(1.0, b)):
            return False
    return True


def _same_rows(xt: np.ndarray, out: np.ndarray) -> None:
    """``out[f]``: whether row ``f`` of ``xt`` holds one value (``==``) all along."""
    for f in range(xt.shape[0]):
        out[f] = 1
        for i in range(1, xt.shape[1]):
            if xt[f, i] != xt[f, 0]:
                out[f] = 0
                break


def _twins(xt: np.ndarray) -> list[int]:
    """Per row ``f`` of ``xt``: the first row equal (``==``) to it all along (``f`` if none)."""
    nf = xt.shape[0]
    out = list(range(nf))
    for f in range(nf):
        for g in range(f):
            if out[g] != g:
                continue
            same = True
            for i in range(xt.shape[1]):
                if xt[f, i] != xt[g, i]:
                    same = False
                    break
            if same:
                out[f] = g
                break
    return out


def _has_ties(ys: np.ndarray) -> bool:
    """Whether sorted ``ys`` holds two equal (``==``) values."""
    for i in range(1, ys.shape[0]):  # noqa: SIM110 (a typed loop compiled)
        if ys[i] == ys[i - 1]:
            return True
    return False


def _has_negative_zero(y: np.ndarray) -> bool:
    """Whether ``y`` holds a -0.0."""
    for i in range(y.shape[0]):  # noqa: SIM110 (a typed loop compiled; any() is a generator)
        if y[i] == 0.0 and math.copysign(1.0, y[i]) < 0.0:
            return True
    return False


def _partition(xrow: np.ndarray, idx: np.ndarray, thr: float) -> None:
    """``partition_samples_final``: ``idx``'s samples with ``x <= thr`` first, by its swaps."""
    ps = 0
    pe = idx.shape[0]
    while ps < pe:
        if xrow[idx[ps]] <= thr:
            ps += 1
        else:
            pe -= 1
            idx[ps], idx[pe] = idx[pe], idx[ps]


def _fenwick_ae(
    sorted_y: np.ndarray, ranks: np.ndarray, n: int, first: int, step: int, count: int
) -> float:
    """scikit-learn's ``precompute_absolute_errors`` after ``count`` samples, from local
    position ``first`` by ``step`` (+1: a left side, -1: a right side): the absolute error it
    stores for the last one (its Fenwick tree's sums, its search, its median, its arithmetic)."""
    out = np.empty(1)
    counts = np.array([count], dtype=np.intp)
    _fenwick_aes(sorted_y, ranks, n, first, step, counts, out, np.empty(n + 1), np.empty(n + 1))
    return float(out[0])


def _fenwick_aes(
    sorted_y: np.ndarray,
    ranks: np.ndarray,
    n: int,
    first: int,
    step: int,
    counts: np.ndarray,
    out: np.ndarray,
    tree_w: np.ndarray,
    tree_wy: np.ndarray,
) -> None:
    """:func:`_fenwick_ae` after each of ``counts`` samples (ascending), in ``out``, its trees in
    ``tree_w`` and ``tree_wy`` (each at least ``n + 1`` long, zeroed here): one tree, its samples
    added once. scikit-learn adds them one at a time and reads its tree
    after each, so the tree after ``c`` samples is the same (the same additions in the same
    order) whether it goes on to more or not."""
    for i in range(n + 1):
        tree_w[i] = 0.0
        tree_wy[i] = 0.0
    max_pow2 = 1
    while max_pow2 <= n:
        max_pow2 <<= 1
    max_pow2 >>= 1
    total_w = 0.0
    total_wy = 0.0
    p = first
    done = 0
    for j in range(counts.shape[0]):
        while done < counts[j]:
            rank = ranks[p]
            yv = sorted_y[rank]
            i = rank + 1
            while i <= n:
                tree_w[i] += 1.0
                tree_wy[i] += yv
                i += i & -i
            total_w += 1.0
            total_wy += yv
            p += step
            done += 1
        out[j] = _fenwick_query(sorted_y, n, max_pow2, total_w, total_wy, tree_w, tree_wy)


def _fenwick_query(
    sorted_y: np.ndarray,
    n: int,
    max_pow2: int,
    total_w: float,
    total_wy: float,
    tree_w: np.ndarray,
    tree_wy: np.ndarray,
) -> float:
    """The absolute error around the median of the samples in the tree (``total_w`` of them,
    their targets summing to ``total_wy``), as ``precompute_absolute_errors`` reads it."""
    target = 0.5 * total_w
    # WeightedFenwickTree.search(target)
    cur = 0
    cum_w = 0.0
    cum_wy = 0.0
    bit = max_pow2
    equal_bit = 0
    equal_target = 0.0
    while bit != 0:
        nxt = cur + bit
        if nxt <= n:
            node_w = tree_w[nxt]
            if target == node_w:
                equal_target = target
                equal_bit = bit
                break
            elif target > node_w:
                target -= node_w
                cur = nxt
                cum_w += node_w
                cum_wy += tree_wy[nxt]
        bit >>= 1
    if bit == 0:
        prev = cur
    else:
        prev = cur
        while bit != 0:
            nxt = prev + bit
            if nxt <= n:
                node_w = tree_w[nxt]
                if target > node_w:
                    target -= node_w
                    prev = nxt
            bit >>= 1
        bit = equal_bit
        target = equal_target
        while bit != 0:
            nxt = cur + bit
            if nxt <= n:
                node_w = tree_w[nxt]
                if target >= node_w:
                    target -= node_w
                    cur = nxt
                    cum_w += node_w
                    cum_wy += tree_wy[nxt]
            bit >>= 1
    if cur != prev:
        median = (sorted_y[prev] + sorted_y[cur]) / 2
    else:
        median = sorted_y[cur]
    w_right = total_w - cum_w
    wy_right = total_wy - cum_wy
    return 0.0 + ((wy_right - median * w_right) + (median * cum_w - cum_wy))


def _ranks(y_in_order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``MAE.reset``'s ``compute_ranks``: the targets sorted (scikit-learn's introsort, from
    the order its feature sort left), and each sample's rank in them."""
    n = y_in_order.shape[0]
    y = np.ascontiguousarray(y_in_order, dtype=np.float64)
    codes = np.empty((1, n), dtype=np.intp)
    _dense_codes(y.reshape(1, n), np.argsort(y, kind="stable").reshape(1, n), codes)
    sorted_y = np.empty(n)
    ranks = np.empty(n, dtype=np.intp)
    rows = np.arange(n, dtype=np.intp)
    _ranks_into(y, codes[0], rows, sorted_y, np.empty(n, dtype=np.intp), ranks)
    return sorted_y, ranks


def _ranks_into(
    y: np.ndarray,
    ycode: np.ndarray,
    rows: np.ndarray,
    sorted_y: np.ndarray,
    keys: np.ndarray,
    rk: np.ndarray,
) -> None:
    """:func:`_ranks` of ``y[rows]`` (``ycode``: ``y``'s dense codes), into ``sorted_y`` and
    ``rk`` (``keys``: scratch, as long as ``rows``)."""
    n = rows.shape[0]
    for i in range(n):
        keys[i] = (ycode[rows[i]] << _KEY_SHIFT) | i
    _sort_keys(keys, n)
    for i in range(n):
        p = keys[i] & _KEY_MASK
        rk[p] = i
        sorted_y[i] = y[rows[p]]


def _gather_int(src: np.ndarray, at: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = src[at[i]]`` for ``i < len(at)`` (an intp source)."""
    for i in range(at.shape[0]):
        out[i] = src[at[i]]


def _exact_proxies(
    sorted_y: np.ndarray,
    ranks: np.ndarray,
    ps: np.ndarray,
    out: np.ndarray,
    tree_w: np.ndarray,
    tree_wy: np.ndarray,
    ae_left: np.ndarray,
    ae_right: np.ndarray,
    counts: np.ndarray,
) -> None:
    """scikit-learn's ``proxy_impurity_improvement`` at each of the local positions ``ps`` of a
    node (ascending, distinct; :func:`_ranks`; ``MAE``'s forward and backward passes,
    ``children_impurity``), in ``out``: the left sides' trees in one pass from the first sample
    on, the right sides' in one from the last (:func:`_fenwick_aes`; ``tree_w``, ``tree_wy``),
    the same numbers as a pass per position (``tests/test_cart_exact.py``). ``ae_left``,
    ``ae_right``, ``counts``: scratch, at least ``len(ps)`` long."""
    n = sorted_y.shape[0]
    m = ps.shape[0]
    for j in range(m):
        counts[j] = ps[j]
    _fenwick_aes(sorted_y, ranks, n, 0, 1, counts[:m], ae_left, tree_w, tree_wy)
    for j in range(m):
        counts[j] = n - ps[m - 1 - j]
    _fenwick_aes(sorted_y, ranks, n, n - 1, -1, counts[:m], ae_right, tree_w, tree_wy)
    for j in range(m):
        w_left = float(ps[j])
        w_right = float(n) - w_left
        imp_left = ae_left[j] / (w_left * 1)
        imp_right = ae_right[m - 1 - j] / (w_right * 1)
        out[j] = -w_right * imp_right - w_left * imp_left


# ---------------------------------------------------------------- the fast scan
def _scan_node(
    ys: np.ndarray,
    rank: np.ndarray,
    order: np.ndarray,
    ae_left: np.ndarray,
    ae_right: np.ndarray,
    src: np.ndarray,
    nxt: np.ndarray,
    prv: np.ndarray,
) -> None:
    """Absolute errors around the median of every prefix and suffix of a node's samples.

    ``ys`` (n, float64): the node's targets sorted; ``rank[s]``: sample ``s``'s rank in ``ys``;
    ``order`` (at least F rows of n, intp): per feature, the node's samples in that feature's
    order (F: ``src``'s length; ``rank[order[f]]``, read in place, not gathered). Fills
    ``ae_left[f, k]``: the absolute error of the first ``k`` samples in feature ``f``'s order
    around their median, ``ae_right[f, k]``: that of the samples from ``k`` on (k = 0..n). A
    row ``f`` with ``src[f] != f`` (``src[f] < f``: a twin's) is a copy of row ``src[f]``, not
    scanned.

    The absolute error of k values around their median is the sum of the ``k // 2`` largest
    minus the sum of the ``k // 2`` smallest. Starting from all n, samples are taken out one
    at a time (last first for the prefixes, first first for the suffixes) from a linked list
    in rank order, with a pointer to the ``k // 2``-th value and the sum below it: each step
    moves the pointer by at most one link (``nxt``, ``prv``: the list's, ``n + 1`` long).
    """
    n = ys.shape[0]
    n_features = src.shape[0]
    total = 0.0
    for i in range(n):
        total += ys[i]
    half = n // 2
    low0 = 0.0
    for i in range(half):
        low0 += ys[i]
    for f in range(n_features):
        if src[f] != f:
            for i in range(n + 1):
                ae_left[f, i] = ae_left[src[f], i]
                ae_right[f, i] = ae_right[src[f], i]
            continue
        for direction in range(2):
            for i in range(n):
                nxt[i] = i + 1
                prv[i] = i - 1
            t = total
            low = low0
            lo = half
            # k samples left: the prefix's absolute error at ae_left[f, k], its last sample
            # (order[f, k - 1]) taken out next; the suffix's at ae_right[f, n - k], its first
            # (order[f, n - k]): at w + step * k, then the sample at that - 1 + direction
            if direction == 0:
                out = ae_left[f]
                w = 0
                step = 1
            else:
                out = ae_right[f]
                w = n
                step = -1
            k = n
            while k >= 1:
                odd = k & 1
                at = w + step * k
                out[at] = t - low - low - (ys[lo] if odd else 0.0)
                if k == 1:
                    break
                r = rank[order[f, at - 1 + direction]]
                if r < lo:
                    low -= ys[r]
                    if odd:
                        low += ys[lo]
                        lo = nxt[lo]
                elif r == lo:
                    if odd:
                        lo = nxt[lo]
                    else:
                        lo = prv[lo]
                        low -= ys[lo]
                elif not odd:
                    lo = prv[lo]
                    low -= ys[lo]
                a = prv[r]  # unlink r
                b = nxt[r]
                if a >= 0:
                    nxt[a] = b
                prv[b] = a
                t -= ys[r]
                k -= 1
        ae_left[f, 0] = 0.0
        ae_left[f, 1] = 0.0
        ae_right[f, n - 1] = 0.0
        ae_right[f, n] = 0.0


# ---------------------------------------------------------------- the builder
_LEAF, _SPLIT, _UNSURE = 0, 1, 2


class _Node:
    """A node of the tree being built: its samples are ``samples[start:end]`` (an extension
    type compiled, ``cart.pxd``: typed fields, no instance dict)."""

    def __init__(
        self,
        node_id: int,
        start: int,
        end: int,
        value: float,
        parent: _Node | None,
        is_left: bool,
        depth: int,
    ) -> None:
        self.node_id = node_id
        self.start = start
        self.end = end
        self.value = value
        self.parent = parent
        self.is_left = is_left
        self.depth = depth
        # _LEAF, _SPLIT, _UNSURE (improvement ~0: split or leaf, not known yet)
        self.kind = _LEAF
        self.improvement = 0.0  # ours (within the margin of scikit-learn's) unless exact
        self.exact = False
        self.feature = _TREE_UNDEFINED
        self.threshold = float(_TREE_UNDEFINED)
        self.pos = 0  # the left child's samples are samples[start:start + pos]
        self.ae_left = 0.0
        self.ae_right = 0.0
        self.post: np.ndarray | None = None  # samples[start:end] as the split left them
        # (kept for the children, until they are made) the rows of the node's orders
        # (``_Builder.orders[depth & 1, :, start:end]``, per visited feature row its samples
        # sorted by it) a child reads its own orders off (:func:`_inherit`'s ``cand``;
        # None: none)
        self.inherit: list[int] | None = None


class _Builder:
    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.xt = xt = np.ascontiguousarray(x.T, dtype=np.float64)  # (F, N): float32 values
        # x + FEATURE_THRESHOLD in float32, as the splitter compares
        self.xt_hi = np.ascontiguousarray((x.T + FEATURE_THRESHOLD).astype(np.float64))
        self.y_np = y = np.ascontiguousarray(y, dtype=np.float64)
        self.y = self.y_np
        self.n = y.shape[0]
        self.n_features = x.shape[1]
        self.samples_np = np.arange(self.n, dtype=np.intp)
        self.samples = self.samples_np
        self.features = list(range(self.n_features))
        self.rand = [_SEED]
        self.tol_ae = _error_bound(self.n, float(np.abs(y).max()))
        # an improvement is (AE_node - AE_left - AE_right) / N: three sums' errors
        self.tol_imp = 4.0 * self.tol_ae / self.n
        self.tol_gap = 2.0 * self.tol_imp  # two improvements closer: compared exactly
        self.next_id = 0
        # a feature with one value on every row: constant in every node, never sorted (_visit)
        self.same = np.empty(self.n_features, dtype=np.uint8)
        _same_rows(self.xt, self.same)
        # twin[f]: the first feature whose column equals f's on every row (f itself if none):
        # twins have the same sorted values in every node, so the same candidates, and the
        # same samples on each side of each (their orders differ at most among ties)
        self.twin = _twins(self.xt)
        # the rows by target, stably: a node's targets sorted and their ranks are read off it
        # (_node_ranks), unless a target is -0.0 (its order among 0.0s would show in ys)
        self.by_y = by_y = np.argsort(y, kind="stable")
        self.mark = np.zeros(self.n, dtype=np.uint8)
        self.signed_zero = _has_negative_zero(y)
        # the sorts' keys (_KEY_SHIFT): each row's feature values' and target's dense codes
        xcode = np.empty((self.n_features, self.n), dtype=np.intp)
        if x.dtype == np.float32:
            # float32 values (the predictor's): their bits, as integers in the values' order
            # (-0.0 made 0.0 first), without a sort
            bits = (np.ascontiguousarray(x.T) + np.float32(0.0)).view(np.int32)
            _float_codes(bits, xcode)
        else:
            _dense_codes(xt, np.argsort(xt, axis=1, kind="stable"), xcode)
        self.xcode = xcode
        ycode = np.empty((1, self.n), dtype=np.intp)
        _dense_codes(y.reshape(1, self.n), by_y.reshape(1, self.n), ycode)
        self.ycode = ycode[0]
        self.keys = np.empty(self.n, dtype=np.intp)
        # the nodes' work arrays, made once a fit (typed once, compiled: a node slices them):
        # per sample its rank in the node's sorted targets, those targets
        n = self.n
        nf = self.n_features
        self.rank_np = np.empty(n, dtype=np.intp)
        self.rank = self.rank_np
        self.ys_np = np.empty(n)
        self.ys = self.ys_np
        # a node's orders (per visited feature row, its samples sorted by it) at its samples'
        # columns, in the buffer of its depth's parity: they are read by its children's
        # _inherit, made right after one another; nodes of one parity live at disjoint columns
        # (the frontier's) but for a node's own ancestors, whose children are made already
        self.orders_np = np.empty((2, nf, n), dtype=np.intp)
        self.orders = self.orders_np
        self.xs = np.empty((nf, n))  # the visited features' sorted values
        self.xs_hi = np.empty((nf, n))  # + FEATURE_THRESHOLD (float32)
        self.pre = np.empty((nf, n), dtype=np.intp)  # orders read off the parent's
        self.known = np.empty(nf, dtype=np.uint8)
        self.ae_l = np.empty((nf, n + 1))
        self.ae_r = np.empty((nf, n + 1))
        self.near = np.empty(max(nf * (n - 1), 1), dtype=np.intp)
        self.cand = np.empty(max(nf * (n - 1), 1), dtype=np.intp)  # _near's candidates
        self.score = np.empty(max(nf * (n - 1), 1))
        self.src = np.empty(nf, dtype=np.intp)
        self.nxt = np.empty(n + 1, dtype=np.intp)  # _scan_node's linked list
        self.prv = np.empty(n + 1, dtype=np.intp)
        # the exact scores' (_exact_proxies): trees, targets in an order, ranks, positions
        self.tree_w = np.empty(n + 1)
        self.tree_wy = np.empty(n + 1)
        self.yo = np.empty(n)
        self.rks = np.empty(n, dtype=np.intp)
        self.ps = np.empty(n, dtype=np.intp)
        self.got = np.empty(n)
        self.ae_a = np.empty(n)
        self.ae_b = np.empty(n)
        self.counts = np.empty(n, dtype=np.intp)

    def node(self, start: int, end: int, parent: _Node | None, is_left: bool) -> _Node:
        """A new node on ``samples[start:end]``, its split searched as scikit-learn's
        ``_add_split_node`` does."""
        return _node(self, start, end, parent, is_left)

    def impurity(self, nd: _Node) -> float:
        """scikit-learn's impurity of ``nd``: the root's ``node_impurity``, or
        ``children_impurity`` of its parent's split (on the order its partition left)."""
        par = nd.parent
        if par is None:
            sorted_y, ranks = _ranks(self.y_np)  # the root, before any sort
            return _fenwick_ae(sorted_y, ranks, self.n, self.n - 1, -1, self.n) / (self.n * 1.0)
        assert par.post is not None
        n = par.end - par.start
        sorted_y, ranks = _ranks(self.y_np[par.post])
        w_left = float(par.pos)
        if nd.is_left:
            return _fenwick_ae(sorted_y, ranks, n, 0, 1, par.pos) / (w_left * 1)
        w_right = float(n) - w_left
        return _fenwick_ae(sorted_y, ranks, n, n - 1, -1, n - par.pos) / (w_right * 1)

    def exact_improvement(self, nd: _Node) -> None:
        """Make ``nd.improvement`` scikit-learn's (``impurity_improvement``; a split whose
        improvement is below ``-DBL_EPSILON`` is a leaf, 0)."""
        if nd.exact:
            return
        if nd.kind == _LEAF:
            nd.improvement = 0.0
            nd.exact = True
            return
        assert nd.post is not None
        n = nd.end - nd.start
        sorted_y, ranks = _ranks(self.y_np[nd.post])
        w = float(n)
        w_left = float(nd.pos)
        w_right = w - w_left
        imp_left = _fenwick_ae(sorted_y, ranks, n, 0, 1, nd.pos) / (w_left * 1)
        imp_right = _fenwick_ae(sorted_y, ranks, n, n - 1, -1, n - nd.pos) / (w_right * 1)
        imp = (w / self.n) * (
            self.impurity(nd) - (w_right / w * imp_right) - (w_left / w * imp_left)
        )
        nd.exact = True
        nd.kind = _LEAF if imp + DBL_EPSILON < 0.0 else _SPLIT
        nd.improvement = 0.0 if nd.kind == _LEAF else imp

    def is_split(self, nd: _Node) -> bool:
        """Whether scikit-learn made ``nd`` a split node (its record's ``is_leaf``)."""
        if nd.kind == _UNSURE:
            self.exact_improvement(nd)
        return nd.kind == _SPLIT

    def less(self, a: _Node, b: _Node) -> bool:
        """scikit-learn's ``_compare_records(a, b)``: ``a.improvement < b.improvement`` (a
        leaf's is 0), ours where the margin decides it, else its exact values."""
        if not (a.exact and b.exact) and abs(a.improvement - b.improvement) <= self.tol_gap:
            self.exact_improvement(a)
            self.exact_improvement(b)
        return a.improvement < b.improvement


def _node(b: _Builder, start: int, end: int, parent: _Node | None, is_left: bool) -> _Node:
    """:meth:`_Builder.node` (typed, ``cart.pxd``: compiled, the builder's work arrays are
    typed views, sliced per node without a Python object; no array is made but ``post``)."""
    depth = 0 if parent is None else parent.depth + 1
    nd = _Node(b.next_id, start, end, 0.0, parent, is_left, depth)
    b.next_id += 1
    n = end - start
    idx = b.samples[start:end]  # a view: sorted in place
    y = b.y
    rank = b.rank  # per sample (row): its rank in ys
    ys = b.ys[:n]
    if b.signed_zero:
        idx_a = b.samples_np[start:end]
        yv = b.y_np[idx_a]
        by_y = np.argsort(yv, kind="stable")
        b.ys_np[:n] = yv[by_y]
        b.rank_np[idx_a[by_y]] = np.arange(n)
    else:
        _node_ranks(y, b.by_y, idx, b.mark, rank, ys)
    h = n // 2
    nd.value = float(ys[h]) if n & 1 else (float(ys[h - 1]) + float(ys[h])) / 2.0
    if n < 2:
        return nd
    if parent is None:
        ys_a = b.ys_np[:n]
        ae = float(ys_a[h + (n & 1) :].sum() - ys_a[:h].sum())
    else:
        ae = parent.ae_left if is_left else parent.ae_right
    # impurity ae / n <= DBL_EPSILON: a leaf, without a split search (and its draws,
    # which the nodes after it see); ~0: scikit-learn's own rounding decides
    if ae - n * DBL_EPSILON <= b.tol_ae and b.impurity(nd) <= DBL_EPSILON:
        return nd
    # node_split_best: visit the features, sorting the samples by each
    order = b.orders[depth & 1, :, start:end]  # per visited feature: samples, sorted
    xs = b.xs[:, :n]  # their values
    xs_hi = b.xs_hi[:, :n]  # the values + FEATURE_THRESHOLD (float32)
    # features whose values on these samples are distinct: their sorted order read off the
    # parent's, in place of their sorts (_visit; known[f])
    known = b.known
    for f in range(b.n_features):
        known[f] = 0
    pre = order  # (unread where nothing is known)
    if parent is not None and parent.inherit is not None:
        pre = b.pre[:, :n]
        porder = b.orders[(depth - 1) & 1, :, parent.start : parent.end]
        _inherit(porder, parent.inherit, idx, b.mark, b.xt, pre, known)
    vf = _visit(
        b.xt,
        b.xt_hi,
        b.xcode,
        idx,
        b.keys,
        xs,
        xs_hi,
        order,
        b.features,
        b.rand,
        b.same,
        pre,
        known,
    )
    k = len(vf)
    if k == 0:
        return nd
    # the absolute errors of a twin's row are its first twin's (scanned once): equal at
    # every candidate position (the same samples on each side), up to a rounding within
    # the bound (_error_bound holds for any order of the sums); other positions unread
    first: dict[int, int] = {}  # twin class -> its first row
    twin = b.twin
    src = b.src[:k]
    for j in range(k):
        src[j] = first.setdefault(twin[vf[j]], j)
    ae_l = b.ae_l[:k, : n + 1]
    ae_r = b.ae_r[:k, : n + 1]
    _scan_node(ys, rank, order, ae_l, ae_r, src, b.nxt, b.prv)
    near = b.near
    n_near = _near(ae_l, ae_r, xs, xs_hi, 4.0 * b.tol_ae, near, b.cand, b.score)
    if n_near == 0:
        return nd
    best = near[0]
    if n_near > 1:
        # scored exactly as scikit-learn does, in its visiting order (features in the
        # order drawn, positions ascending): the first strictly best wins. A score is a
        # function of the targets in the feature's order and the position: candidates of
        # two features that order the targets alike (a duplicated column, or columns that
        # cut the same samples) at one position score the same, and where every near
        # candidate is one such split the first one wins without a score.
        cands: list[tuple[int, int, int]] = []  # (candidate, its order's number, position)
        ranked: dict[int, int] = {}  # feature -> the number of its targets' order
        firsts: list[int] = []  # per number: the first feature row with that order
        for j in range(n_near):
            c = near[j]
            f = c // (n - 1)
            p = c - f * (n - 1)
            r = ranked.get(f)
            if r is None:
                r = 0
                while r < len(firsts) and not _same_targets(y, order, firsts[r], f):
                    r += 1
                if r == len(firsts):
                    firsts.append(f)
                ranked[f] = r
            cands.append((c, r, p))
        pairs = {(r, p) for _, r, p in cands}
        if len(pairs) > 1:
            # each order's positions scored in one pass of its trees (_exact_proxies)
            at: dict[int, list[int]] = {}
            for r, p in pairs:
                at.setdefault(r, []).append(p + 1)
            scores: dict[tuple[int, int], float] = {}
            # targets all distinct: each order's sorted targets are ys and its ranks are
            # the samples' (the one sorted order there is), no sort (_ranks) to replay
            distinct = not _has_ties(ys)
            rks = b.rks[:n]
            sorted_y = ys
            for r, ps in at.items():
                if distinct:
                    _gather_int(rank, order[firsts[r]], rks)
                else:
                    sorted_y = b.yo[:n]
                    _ranks_into(y, b.ycode, order[firsts[r]], sorted_y, b.keys, rks)
                ps.sort()
                m = len(ps)
                psv = b.ps[:m]
                for j in range(m):
                    psv[j] = ps[j]
                got = b.got
                _exact_proxies(
                    sorted_y, rks, psv, got, b.tree_w, b.tree_wy, b.ae_a, b.ae_b, b.counts
                )
                for j in range(m):
                    scores[r, ps[j] - 1] = got[j]
            best_val = -math.inf
            for c, r, p in cands:
                v = scores[r, p]
                if v > best_val:
                    best, best_val = c, v
    f = best // (n - 1)
    p = best - f * (n - 1) + 1
    nd.ae_left = float(ae_l[f, p])
    nd.ae_right = float(ae_r[f, p])
    w = float(n)
    a_l, a_r = nd.ae_left, nd.ae_right
    imp = (w / b.n) * (ae / w - (n - p) / w * (a_r / (n - p)) - p / w * (a_l / p))
    nd.threshold = float(xs[f, p - 1]) / 2.0 + float(xs[f, p]) / 2.0
    nd.feature = vf[f]
    nd.pos = p
    _partition(b.xt[nd.feature], idx, nd.threshold)
    nd.post = b.samples_np[start:end].copy()
    # the features whose values are distinct here (so on a child's samples): a child reads
    # its order off this node's (a feature with a tie here is sorted again: its children
    # often hold one too, ~2 % more instructions a fit in all where they were tried)
    cand: list[int] = []
    cap = n // 16 + 1
    for j in range(k):
        f = vf[j]
        t = 0 if known[f] else _ties(xs[j], cap)
        if t < cap:
            cand += [j, f, 1 if t == 0 else 0]
    if cand:
        nd.inherit = cand
    nd.improvement = imp
    # ~0 (never < 0 but by rounding): a split or a leaf, found out if it matters
    nd.kind = _SPLIT if imp > b.tol_gap else _UNSURE
    return nd


class _Heap:
    """libstdc++'s ``push_heap`` / ``pop_heap`` (``__push_heap``, ``__adjust_heap``) on the
    frontier, comparing scikit-learn's improvements (:meth:`_Builder.less`)."""

    def __init__(self, b: _Builder) -> None:
        self.b = b
        self.items: list[_Node] = []

    def push(self, nd: _Node) -> None:
        self.items.append(nd)
        self._sift_up(len(self.items) - 1, 0, nd)

    def _sift_up(self, hole: int, top: int, nd: _Node) -> None:
        a = self.items
        parent = (hole - 1) // 2
        while hole > top and self.b.less(a[parent], nd):
            a[hole] = a[parent]
            hole = parent
            parent = (hole - 1) // 2
        a[hole] = nd

    def pop(self) -> _Node:
        a = self.items
        if len(a) > 1:
            last = len(a) - 1
            nd = a[last]
            a[last] = a[0]
            # __adjust_heap(first, 0, last, nd)
            hole = 0
            child = 0
            while child < (last - 1) // 2:
                child = 2 * (child + 1)
                if self.b.less(a[child], a[child - 1]):
                    child -= 1
                a[hole] = a[child]
                hole = child
            if last & 1 == 0 and child == (last - 2) // 2:
                child = 2 * (child + 1)
                a[hole] = a[child - 1]
                hole = child - 1
            self._sift_up(hole, 0, nd)
        return a.pop()


def fit(x: np.ndarray, y: np.ndarray, max_leaf_nodes: int) -> Tree | None:
    """scikit-learn's ``DecisionTreeRegressor(criterion="absolute_error",
    max_leaf_nodes=max_leaf_nodes, random_state=0).fit(x, y)`` tree (module docstring), or
    ``None`` for inputs it does not take (missing values, under 2 rows): fit scikit-learn's.

    ``x``: (N, F) float32 (the array scikit-learn fits on), ``y``: (N,) float64.
    """
    out = fit_or_why(x, y, max_leaf_nodes)
    return out if isinstance(out, Tree) else None


def fit_or_why(x: np.ndarray, y: np.ndarray, max_leaf_nodes: int) -> Tree | str:
    """:func:`fit`, with why not where it returns ``None``."""
    n = y.shape[0]
    if n < 2 or x.ndim != 2 or x.shape[1] < 1 or max_leaf_nodes < 2:
        return "degenerate input"
    if n >= _MAX_ROWS:
        return "too many rows"
    if not (np.isfinite(y).all() and np.isfinite(x).all()):
        return "missing values"  # scikit-learn's own rules
    return _build(_Builder(x, y), max_leaf_nodes)


def _build(b: _Builder, max_leaf_nodes: int) -> Tree:
    """Best first, as ``BestFirstTreeBuilder.build``: its frontier is a ``std::vector`` kept a
    heap by ``push_heap`` / ``pop_heap`` on ``improvement <`` (a leaf's is 0), replayed here
    swap for swap (:class:`_Heap`), so equal improvements leave it in the same order."""
    root = _node(b, 0, b.n, None, True)
    nodes = [root]
    heap = _Heap(b)
    heap.push(root)
    budget = max_leaf_nodes - 1
    children: dict[int, tuple[int, int]] = {}
    while heap.items and budget > 0:
        nd = heap.pop()
        if not b.is_split(nd):
            continue
        left = _node(b, nd.start, nd.start + nd.pos, nd, True)
        right = _node(b, nd.start + nd.pos, nd.end, nd, False)
        nd.inherit = None  # (read by its children only)
        children[nd.node_id] = (left.node_id, right.node_id)
        nodes += [left, right]
        heap.push(left)
        heap.push(right)
        budget -= 1
    k = len(nodes)
    cl = [_TREE_LEAF] * k
    cr = [_TREE_LEAF] * k
    feat = [_TREE_UNDEFINED] * k
    thr = [float(_TREE_UNDEFINED)] * k
    for nd in nodes:
        if nd.node_id in children:
            cl[nd.node_id], cr[nd.node_id] = children[nd.node_id]
            feat[nd.node_id] = nd.feature
            thr[nd.node_id] = nd.threshold
    return Tree(cl, cr, feat, thr, [nd.value for nd in nodes])
