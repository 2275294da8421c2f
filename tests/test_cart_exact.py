"""The predictor's fast CART fit (``workload/cart.py``) builds scikit-learn's tree, bit for bit.

scikit-learn is the reference: on the predictor's real training sets (the warm start of
several scenarios and seeds, then after runs finish) and on random categorical data with ties
(few distinct values, duplicated columns, duplicated targets, mirrored halves), the tree
:func:`cart.fit` returns has scikit-learn's node ids, children, features, thresholds and values
(``==``), so every prediction is the same. The pieces it replicates (the introsort, the
Fenwick-tree absolute errors) are checked against scikit-learn's own test hooks.

Skipped where the installed scikit-learn is not a release cart replicates (the predictor then
fits with scikit-learn). Interpreted (`GSG_PURE_PYTHON=1`, ~0.3 s a 1,000-row fit): ~10-17 s.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from types import ModuleType

import numpy as np
import pytest
from sklearn.tree import DecisionTreeRegressor

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import ScenarioJobs, build_workload
from gpu_sharing_env.workload import cart, predictor
from gpu_sharing_env.workload.job import JobKind
from gpu_sharing_env.workload.predictor import _Fit

SKLEARN = version("scikit-learn")
pytestmark = pytest.mark.skipif(
    not SKLEARN.startswith(cart.SKLEARN_VERSIONS),
    reason=f"cart replicates scikit-learn {cart.SKLEARN_VERSIONS}, installed {SKLEARN}: the"
    " predictor fits with scikit-learn itself (update cart to the new release's builder)",
)


def _sklearn(x: np.ndarray, y: np.ndarray, leaves: int) -> DecisionTreeRegressor:
    return DecisionTreeRegressor(
        criterion="absolute_error", max_leaf_nodes=leaves, random_state=0
    ).fit(x, y)


def _same_tree(x: np.ndarray, y: np.ndarray, leaves: int, probe: np.ndarray) -> bool:
    """cart's tree is scikit-learn's (structure and predictions); False: cart gave none."""
    got = cart.fit_or_why(x, y, leaves)
    if isinstance(got, str):
        return False
    ref = _sklearn(x, y, leaves)
    t = ref.tree_
    assert got.children_left == t.children_left.tolist()
    assert got.children_right == t.children_right.tolist()
    assert got.feature == t.feature.tolist()
    assert got.threshold == t.threshold.tolist()
    assert got.value == t.value[:, 0, 0].tolist()
    fit = _Fit(got.children_left, got.children_right, got.feature, got.threshold, got.value)
    mine = [fit.predict(row) for row in probe.tolist()]
    assert mine == ref.predict(probe).tolist()
    return True


def _training_sets(scenario: str, seed: int, finished: tuple[int, ...]) -> list:
    """The predictor's training sets for ``scenario``'s episode ``seed``: its warm start, then
    after each count in ``finished`` of the episode's runs (in completion order at reference
    speed) has been observed."""
    jobs = build_workload(load_scenario(scenario))(np.random.default_rng(seed))
    assert isinstance(jobs, ScenarioJobs)
    p = jobs.predictor
    assert p is not None
    runs = sorted(
        (j for j in jobs if j.kind is JobKind.OFFLINE), key=lambda j: j.submit_s + j.work_s
    )
    out = [p.training_set()]
    done = 0
    for k in finished:
        for j in runs[done:k]:
            p.observe(j, j.job_id)
        done = k
        out.append(p.training_set())
    return [r for r in out if r is not None]


@pytest.mark.parametrize(
    ("scenario", "seed"), [("default", 0), ("default", 3), ("pai-busy", 1), ("pai-hetero", 2)]
)
def test_real_training_sets_give_sklearns_tree(scenario: str, seed: int) -> None:
    sets = _training_sets(scenario, seed, (150, 400))
    assert len(sets) == 3
    exact = 0
    for x, y in sets:
        probe = np.vstack([x[::7], x[::11] + np.float32(0.01)])
        exact += _same_tree(x, y, 11, probe)
    assert exact == len(sets)  # none needed scikit-learn


def _categorical(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(8, 260))
    f = int(rng.integers(1, 6))
    cols = [rng.integers(0, rng.integers(2, 9), n).astype(np.float32) for _ in range(f)]
    if f > 1 and rng.random() < 0.5:
        cols.append(cols[0].copy())  # a duplicated column: every cut tied between the two
    if rng.random() < 0.3:
        cols.append(np.log1p(rng.integers(0, 40, n)).astype(np.float32))  # count-like
    x = np.ascontiguousarray(np.column_stack(cols), dtype=np.float32)
    y = rng.lognormal(6.0, 1.5, n)
    if rng.random() < 0.5:
        y = np.round(y, -1)  # duplicated targets
    return x, np.log(np.maximum(y, 1.0))


def test_random_categorical_data_gives_sklearns_tree() -> None:
    rng = np.random.default_rng(7)
    exact = total = 0
    for _ in range(60):
        x, y = _categorical(rng)
        leaves = int(rng.choice([2, 3, 11, 40]))
        probe = np.vstack([x, x + np.float32(0.5)])
        exact += _same_tree(x, y, leaves, probe)
        total += 1
    assert exact == total


def _replay_like(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows like a PAI replay's training sets: the group's and the user's mean log run time
    equal on most rows (a user per group), constant counts, a few GPU requests, duplicated
    targets. Most near-best cuts are then one split under two columns (scored once)."""
    n = int(rng.integers(30, 600))
    group = rng.normal(6.0, 1.5, n).astype(np.float32)
    user = group.copy()
    differ = rng.random(n) < rng.choice([0.0, 0.01, 0.1])
    user[differ] = rng.normal(6.0, 1.5, int(differ.sum())).astype(np.float32)
    if rng.random() < 0.3:
        group[rng.random(n) < 0.2] = np.float32(6.0)  # ties inside the mean columns
    ones = np.full(n, np.float32(np.log1p(1.0)))
    request = np.log2(rng.choice([1, 1, 1, 2, 4, 8], n)).astype(np.float32)
    x = np.ascontiguousarray(np.column_stack([group, ones, user, ones, request]))
    y = np.log(np.maximum(np.round(rng.lognormal(6.0, 1.5, n), -1), 1.0))
    return x, y


def test_replay_like_data_with_twin_columns_gives_sklearns_tree() -> None:
    rng = np.random.default_rng(11)
    exact = total = 0
    for _ in range(40):
        x, y = _replay_like(rng)
        probe = np.vstack([x, x + np.float32(0.05)])
        exact += _same_tree(x, y, 11, probe)
        total += 1
    assert exact == total


def test_nodes_of_equal_targets_and_symmetric_halves_give_sklearns_tree() -> None:
    # a node of equal targets has an impurity ~0 in either rounding and ties everywhere;
    # mirrored halves give siblings the same improvement
    x = np.array([[0], [1], [2], [3], [10], [11], [12], [13]], dtype=np.float32)
    for y in ([5, 5, 9, 9, 5, 5, 9, 9], [1, 5, 1, 5, 1, 5, 1, 5], [0, 0, 0, 9, 0, 0, 0, 9]):
        for leaves in (2, 3, 5):
            assert _same_tree(x, np.log1p(np.array(y, dtype=float)), leaves, x + 0.5)


def test_missing_values_are_left_to_sklearn() -> None:
    x = np.array([[0.0], [1.0], [2.0], [3.0]], dtype=np.float32)
    assert cart.fit_or_why(x, np.array([np.nan, 1.0, 2.0, 3.0]), 4) == "missing values"
    assert cart.fit(x, np.array([np.nan, 1.0, 2.0, 3.0]), 4) is None


def _codes(xt: np.ndarray) -> np.ndarray:
    """The rows' dense codes (the sorts' keys' high half), as ``_Builder`` makes them."""
    xt = np.ascontiguousarray(xt, dtype=np.float64)
    out = np.empty(xt.shape, dtype=np.intp)
    cart._dense_codes(xt, np.ascontiguousarray(np.argsort(xt, axis=1, kind="stable")), out)
    return out


def test_sorting_by_a_feature_is_the_introsorts_order() -> None:
    # ``_sort_by`` skips the sort where the values come strictly increasing (a twin column
    # sorted just before): the order must be the introsort's on every input, sorted or not
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 300))
        row = rng.integers(0, int(rng.choice([2, 8, 10**6])), 2 * n).astype(np.float64)
        idx = rng.choice(2 * n, n, replace=False).astype(np.intp)
        if rng.random() < 0.5:  # presorted samples (ties or none)
            idx = idx[np.argsort(row[idx], kind="stable")]
        vals, hi, out = np.empty(n), np.empty(n), np.empty(n, dtype=np.intp)
        got_idx = idx.copy()
        code, keys = _codes(row[None])[0], np.empty(n, dtype=np.intp)
        const = cart._sort_by(row, row + 1e-7, code, got_idx, keys, vals, hi, out)
        ref_vals, ref_idx = row[idx], idx.copy()
        cart._sort(ref_vals, ref_idx, 0, n)
        assert got_idx.tolist() == ref_idx.tolist() == out.tolist()
        assert vals.tolist() == ref_vals.tolist() and const == (ref_vals[-1] <= hi[0])


def test_the_introsort_is_sklearns() -> None:
    from sklearn.utils._sorting import _py_simultaneous_sort

    rng = np.random.default_rng(1)
    for n in (1, 2, 15, 16, 17, 100, 1000):
        for dup in (2, 5, n):
            v = rng.integers(0, dup, n).astype(np.float64)
            if dup == n:
                v = rng.standard_normal(n)
            a, ia = v.copy(), rng.permutation(n).astype(np.intp)
            b, ib = a.copy(), ia.copy()
            _py_simultaneous_sort(a, ia, n, use_three_way_partition=True)
            cart._sort(b, ib, 0, n)
            assert a.tolist() == b.tolist() and ia.tolist() == ib.tolist()


def test_the_fenwick_absolute_errors_are_sklearns() -> None:
    from sklearn.tree._criterion import _py_precompute_absolute_errors

    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 8, 37, 200):
        y = np.round(rng.lognormal(2.0, 1.0, n), 1)
        sorted_y, ranks = cart._ranks(y)
        ys = np.ascontiguousarray(y[:, None])
        idx = np.arange(n, dtype=np.intp)
        fwd, _ = _py_precompute_absolute_errors(ys, None, idx, 0, n, n)
        bwd, _ = _py_precompute_absolute_errors(ys, None, idx, n - 1, -1, n)
        for p in range(1, n + 1):
            assert cart._fenwick_ae(sorted_y, ranks, n, 0, 1, p) == fwd[p - 1]
        for p in range(n):
            assert cart._fenwick_ae(sorted_y, ranks, n, n - 1, -1, n - p) == bwd[p]


def test_the_scan_gives_the_absolute_errors_up_to_rounding() -> None:
    rng = np.random.default_rng(3)
    n = 57
    y = rng.standard_normal(n)
    ys = np.sort(y)
    rank = np.argsort(np.argsort(y, kind="stable"), kind="stable")
    seqs = np.ascontiguousarray(np.stack([rank, rank[::-1].copy()]), dtype=np.intp)
    left = np.empty((2, n + 1))
    right = np.empty((2, n + 1))
    ident = np.arange(n, dtype=np.intp)  # (the samples are their ranks: seqs is the order)
    links = np.empty(n + 1, dtype=np.intp), np.empty(n + 1, dtype=np.intp)
    cart._scan_node(ys, ident, seqs, left, right, np.arange(2, dtype=np.intp), *links)
    twin_left, twin_right = np.empty((2, n + 1)), np.empty((2, n + 1))
    twins = np.zeros(2, dtype=np.intp)  # 0's
    cart._scan_node(ys, ident, seqs, twin_left, twin_right, twins, *links)
    assert twin_left.tolist() == [left[0].tolist()] * 2
    assert twin_right.tolist() == [right[0].tolist()] * 2
    for f, seq in enumerate(seqs):
        vals = ys[seq]
        for k in range(n + 1):
            a, b = vals[:k], vals[k:]
            ae_a = float(np.abs(a - np.median(a)).sum()) if k else 0.0
            ae_b = float(np.abs(b - np.median(b)).sum()) if k < n else 0.0
            assert left[f, k] == pytest.approx(ae_a, abs=1e-12)
            assert right[f, k] == pytest.approx(ae_b, abs=1e-12)


def test_the_predictors_estimates_are_the_same_with_either_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def estimates(fast: bool) -> list[float]:
        monkeypatch.setattr(predictor, "FAST_CART", fast)
        predictor._FITS.clear()  # trees are memoised by their rows: fit them again
        jobs = build_workload(load_scenario("pai-busy"))(np.random.default_rng(4))
        assert isinstance(jobs, ScenarioJobs) and jobs.predictor is not None
        p = jobs.predictor
        offline = [j for j in jobs if j.kind is JobKind.OFFLINE]
        out = [p.estimate(j, 0.0) for j in offline]  # the warm start's fit
        for j in sorted(offline, key=lambda j: j.submit_s + j.work_s)[:200]:
            p.observe(j, j.job_id)  # refits at 100 and 200
        assert p.n_fits == 3
        return out + [p.estimate(j, 1.0) for j in offline]

    assert estimates(True) == estimates(False)
    predictor._FITS.clear()


def test_features_of_one_value_are_constant_without_their_sort() -> None:
    # ``_visit`` takes a feature with one value on every row as constant without sorting by
    # it: the same draws, the same visit and the same samples' order as sorting it
    rng = np.random.default_rng(5)
    for _ in range(200):
        n_rows, nf = int(rng.integers(2, 120)), int(rng.integers(1, 6))
        cols = [rng.integers(0, int(rng.choice([2, 5, 1000])), n_rows) for _ in range(nf)]
        for f in rng.choice(nf, int(rng.integers(0, nf + 1)), replace=False):
            cols[f] = np.full(n_rows, rng.integers(0, 3))
        xt = np.ascontiguousarray(np.stack(cols).astype(np.float32), dtype=np.float64)
        xt_hi = np.ascontiguousarray((xt.astype(np.float32) + cart.FEATURE_THRESHOLD), np.float64)
        same = np.empty(nf, dtype=np.uint8)
        cart._same_rows(xt, same)
        assert same.tolist() == [int(len(set(r.tolist())) == 1) for r in xt]
        idx0 = rng.choice(n_rows, int(rng.integers(1, n_rows + 1)), replace=False).astype(np.intp)
        feats0, rand0 = rng.permutation(nf).tolist(), [int(rng.integers(1, 2**31))]
        out = []
        for flags in (same, np.zeros(nf, dtype=np.uint8)):
            n = idx0.size
            idx, feats, rand = idx0.copy(), list(feats0), list(rand0)
            xs, xs_hi = np.empty((nf, n)), np.empty((nf, n))
            order = np.empty((nf, n), dtype=np.intp)
            none = np.zeros(nf, dtype=np.uint8)
            keys, code = np.empty(n, dtype=np.intp), _codes(xt)
            vf = cart._visit(
                xt, xt_hi, code, idx, keys, xs, xs_hi, order, feats, rand, flags, order, none
            )
            k = len(vf)
            out.append((vf, feats, rand, idx.tolist(), xs[:k].tolist(), order[:k].tolist()))
        assert out[0] == out[1]


def test_a_nodes_targets_and_ranks_come_off_one_sort() -> None:
    rng = np.random.default_rng(6)
    for _ in range(300):
        n_rows = int(rng.integers(1, 200))
        y = np.round(rng.normal(0.0, 2.0, n_rows), int(rng.choice([0, 1, 6])))
        by_y = np.argsort(y, kind="stable")
        idx = rng.choice(n_rows, int(rng.integers(1, n_rows + 1)), replace=False).astype(np.intp)
        n = idx.size
        mark = np.zeros(n_rows, dtype=np.uint8)
        rank = np.full(n_rows, -1, dtype=np.intp)
        ys = np.empty(n)
        cart._node_ranks(y, by_y, idx, mark, rank, ys)
        assert ys.tolist() == np.sort(y[idx]).tolist()
        assert sorted(rank[idx].tolist()) == list(range(n))
        assert ys[rank[idx]].tolist() == y[idx].tolist()
        assert (np.delete(rank, idx) == -1).all() and not mark.any()
        # equal targets ranked by row
        for a in idx.tolist():
            for b in idx.tolist():
                if y[a] == y[b] and a < b:
                    assert rank[a] < rank[b]


def test_twins_are_the_first_equal_feature() -> None:
    a = np.array([1.0, 2.0, 2.0])
    b = np.array([1.0, 2.0, 3.0])
    xt = np.ascontiguousarray(np.stack([a, b, a, b.copy(), a, np.zeros(3)]))
    assert cart._twins(xt) == [0, 1, 0, 1, 0, 5]
    assert cart._twins(np.ascontiguousarray(np.zeros((0, 4)))) == []


def test_twin_columns_and_negative_zero_targets_give_sklearns_tree() -> None:
    # twins share one scan; a -0.0 target keeps the per-node argsort (its order among 0.0s)
    rng = np.random.default_rng(13)
    for i in range(40):
        x, y = _replay_like(rng)
        if i % 2:
            y = np.where(rng.random(y.size) < 0.3, -0.0, y)
            y[rng.random(y.size) < 0.2] = 0.0
        x = np.ascontiguousarray(np.column_stack([x, x[:, 0], x[:, 4]]))  # more twins
        assert _same_tree(x, y, 11, np.vstack([x, x + np.float32(0.05)]))


def test_features_within_the_threshold_of_one_value_give_sklearns_tree() -> None:
    # scikit-learn takes a feature whose values lie within ``FEATURE_THRESHOLD`` of each other
    # as constant (and skips it in the node's descendants); here two float32 neighbours (6e-8
    # apart near 0.7) that are not equal, so cart's sort of them could reorder the samples
    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(20, 300))
        a = np.float32(rng.uniform(0.5, 0.9))
        b = np.nextafter(a, np.float32(2))
        assert 0 < b - a <= cart.FEATURE_THRESHOLD
        x = np.stack(
            [
                np.where(rng.random(n) < 0.5, a, b),
                rng.integers(0, 4, n),
                rng.integers(0, 3, n),
                np.where(rng.random(n) < 0.5, a, b) * np.float32(rng.integers(1, 3)),
            ],
            1,
        ).astype(np.float32)
        y = np.round(rng.normal(5, 2, n), 1)
        assert _same_tree(np.ascontiguousarray(x), y, 11, x[:50])


def test_the_scan_reads_the_ranks_through_the_orders_in_place() -> None:
    # ``_scan_node(ys, rank, order, ...)`` reads ``rank[order[f, i]]`` in place: the absolute
    # errors of the gathered sequences (``rank[order]`` with the identity as ranks), only the
    # first ``len(src)`` rows of ``order`` read
    rng = np.random.default_rng(4)
    n = 41
    y = np.round(rng.standard_normal(n), 1)  # (ties)
    ys = np.sort(y)
    rank = np.argsort(np.argsort(y, kind="stable"), kind="stable").astype(np.intp)
    order = np.stack([rng.permutation(n) for _ in range(4)]).astype(np.intp)
    for src in ([0, 1, 2], [0, 0, 2]):
        s = np.array(src, dtype=np.intp)
        got = np.empty((3, n + 1)), np.empty((3, n + 1))
        want = np.empty((3, n + 1)), np.empty((3, n + 1))
        links = np.empty(n + 1, dtype=np.intp), np.empty(n + 1, dtype=np.intp)
        cart._scan_node(ys, rank, order, *got, s, *links)
        gathered = np.ascontiguousarray(rank[order[:3]])
        cart._scan_node(ys, np.arange(n, dtype=np.intp), gathered, *want, s, *links)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_same_targets_is_the_equality_of_the_targets_bytes() -> None:
    # The near candidates' orders are numbered by the targets in each order, bit for bit (as
    # their bytes compare): ``_same_targets`` against ``tobytes`` on orders that differ by a
    # swap of two samples (equal targets, 0.0 against -0.0, unequal ones) or at random
    rng = np.random.default_rng(7)
    seen = {True: 0, False: 0}
    for _ in range(400):
        n = int(rng.integers(1, 25))
        if rng.uniform() < 0.6:
            y = rng.choice([0.0, -0.0, 1.5, 2.0, -3.25], size=n).astype(np.float64)
        else:
            y = rng.standard_normal(n)
        order = np.empty((3, n), dtype=np.intp)
        order[0] = rng.permutation(n)
        order[1] = order[0]
        i, j = rng.integers(0, n, size=2)
        order[1, i], order[1, j] = order[0, j], order[0, i]
        order[2] = rng.permutation(n)
        for f in range(3):
            for g in range(3):
                want = y[order[f]].tobytes() == y[order[g]].tobytes()
                assert cart._same_targets(y, order, f, g) == want, (y, order, f, g)
                seen[want] += 1
    assert min(seen.values()) > 100


def _exact_proxy(sorted_y: np.ndarray, ranks: np.ndarray, p: int) -> float:
    # scikit-learn's ``proxy_impurity_improvement`` at local position ``p``, a pass of each
    # side's Fenwick tree (``MAE``'s forward and backward passes, ``children_impurity``)
    n = sorted_y.shape[0]
    ae_left = cart._fenwick_ae(sorted_y, ranks, n, 0, 1, p)
    ae_right = cart._fenwick_ae(sorted_y, ranks, n, n - 1, -1, n - p)
    w_left = float(p)
    w_right = float(n) - w_left
    return -w_right * (ae_right / (w_right * 1)) - w_left * (ae_left / (w_left * 1))


def test_the_scores_of_many_positions_in_one_pass_are_each_positions() -> None:
    # ``_exact_proxies`` scores several positions of one order with one left and one right
    # pass of the Fenwick trees: each score is ``_exact_proxy``'s (above) at its position, bit
    # for bit
    # (targets with ties, from scikit-learn's ranks; one position, several, all of them)
    rng = np.random.default_rng(11)
    tree_w, tree_wy = np.empty(301), np.empty(301)
    for _ in range(200):
        n = int(rng.integers(2, 300))
        y = np.round(rng.lognormal(2.0, 1.0, n), int(rng.choice([0, 1, 6])))
        sorted_y, ranks = cart._ranks(y)
        k = int(rng.integers(1, n))
        ps = np.sort(rng.choice(np.arange(1, n), size=k, replace=False)).astype(np.intp)
        got = np.empty(k)
        scratch = np.empty(k), np.empty(k), np.empty(k, dtype=np.intp)
        cart._exact_proxies(sorted_y, ranks, ps, got, tree_w, tree_wy, *scratch)
        want = [_exact_proxy(sorted_y, ranks, int(p)) for p in ps]
        assert got.tobytes() == np.array(want).tobytes(), (y, ps)


def test_distinct_targets_rank_alike_in_every_order() -> None:
    # a node whose targets are all distinct (``not _has_ties(ys)``): its targets sorted (``ys``)
    # and each sample's rank (``rank``, ``_node_ranks``) are what scikit-learn's sort of the
    # targets in any order gives (``_ranks``), so the exact scores need no sort; with a tie
    # (``0.0`` and ``-0.0`` count as one) they may not be
    rng = np.random.default_rng(12)
    seen = {True: 0, False: 0}
    for _ in range(300):
        n_rows = int(rng.integers(2, 120))
        y = np.round(rng.normal(0.0, 2.0, n_rows), int(rng.choice([0, 1, 8])))
        if rng.uniform() < 0.2:
            y[rng.integers(0, n_rows)] = -0.0
            y[rng.integers(0, n_rows)] = 0.0
        idx = rng.choice(n_rows, int(rng.integers(2, n_rows + 1)), replace=False).astype(np.intp)
        rank = np.empty(n_rows, dtype=np.intp)
        ys = np.empty(idx.size)
        cart._node_ranks(y, np.argsort(y, kind="stable"), idx, np.zeros(n_rows, np.uint8), rank, ys)
        ties = cart._has_ties(ys)
        assert ties == (np.unique(y[idx]).size < idx.size)
        seen[ties] += 1
        if not ties:
            for _ in range(3):
                order = rng.permutation(idx)
                sorted_y, ranks = cart._ranks(y[order])
                assert sorted_y.tobytes() == ys.tobytes()
                assert ranks.tolist() == rank[order].tolist()
    assert min(seen.values()) > 50


def test_a_childs_orders_read_off_its_parents_are_its_sorts() -> None:
    # ``_node`` reads a child's order by a feature off its parent's (``_inherit``) where the
    # feature's values on the child's samples are distinct (sure where they were on the
    # parent's, else checked): the same visit, draws, samples' order and sorted values as
    # sorting the child's samples by each feature
    rng = np.random.default_rng(8)
    for _ in range(300):
        n_rows, nf = int(rng.integers(4, 150)), int(rng.integers(1, 6))
        cols = []
        for _f in range(nf):
            kind = int(rng.integers(3))
            if kind == 0:  # distinct values
                cols.append(rng.permutation(n_rows) * float(rng.choice([1.0, 0.37])))
            elif kind == 1:  # distinct but for a few ties
                c = rng.permutation(n_rows).astype(float)
                c[rng.choice(n_rows, 2, replace=False)] = c[int(rng.integers(n_rows))]
                cols.append(c)
            else:  # categorical
                cols.append(rng.integers(0, int(rng.integers(2, 9)), n_rows).astype(float))
        xt = np.ascontiguousarray(np.stack(cols).astype(np.float32), dtype=np.float64)
        xt_hi = np.ascontiguousarray((xt.astype(np.float32) + cart.FEATURE_THRESHOLD), np.float64)
        same = np.zeros(nf, dtype=np.uint8)
        none = np.zeros(nf, dtype=np.uint8)
        mark = np.zeros(n_rows, dtype=np.uint8)
        n = int(rng.integers(2, n_rows + 1))
        p_idx = rng.choice(n_rows, n, replace=False).astype(np.intp)
        feats, rand = rng.permutation(nf).tolist(), [int(rng.integers(1, 2**31))]
        p_xs, p_hi = np.empty((nf, n)), np.empty((nf, n))
        p_order = np.empty((nf, n), dtype=np.intp)
        code, keys = _codes(xt), np.empty(n, dtype=np.intp)
        vf = cart._visit(
            xt, xt_hi, code, p_idx, keys, p_xs, p_hi, p_order, feats, rand, same, p_order, none
        )
        cand: list[int] = []
        for r in range(len(vf)):
            cand += [r, vf[r], int(cart._ties(p_xs[r], n) == 0)]
        child = p_idx[rng.random(n) < rng.random()]
        m = child.size
        if m == 0:
            continue
        out = []
        for inherit in (True, False):
            idx, fs, rd = child.copy(), list(feats), list(rand)
            known = np.zeros(nf, dtype=np.uint8)
            pre = np.empty((nf, m), dtype=np.intp)
            if inherit:
                cart._inherit(p_order, cand, idx, mark, xt, pre, known)
                assert not mark.any()
            xs, xs_hi = np.empty((nf, m)), np.empty((nf, m))
            order = np.empty((nf, m), dtype=np.intp)
            vf2 = cart._visit(
                xt, xt_hi, code, idx, keys, xs, xs_hi, order, fs, rd, same, pre, known
            )
            k = len(vf2)
            out.append((vf2, fs, rd, idx.tolist(), xs[:k].tolist(), order[:k].tolist()))
        assert out[0] == out[1]


def _mixed(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows with continuous columns (distinct values: their orders are read off the parent's),
    categorical ones, a constant one and a duplicated one; targets with or without ties."""
    n = int(rng.integers(2, 400))
    cols = [
        rng.normal(0.0, 1.0, n),
        rng.integers(0, int(rng.integers(2, 12)), n),
        np.full(n, 3.0),
        rng.lognormal(1.0, 1.0, n),
    ]
    cols.append(cols[int(rng.integers(0, 4))].copy())
    x = np.ascontiguousarray(np.column_stack(cols), dtype=np.float32)
    y = rng.lognormal(3.0, 1.0, n)
    if rng.random() < 0.5:
        y = np.round(y)
    return x, np.log1p(y)


def test_deep_trees_on_the_reused_work_arrays_give_sklearns_tree() -> None:
    # ``_Builder`` makes a node's work arrays once a fit and keeps each node's orders in the
    # buffer of its depth's parity (its children read them): deep trees (up to 200 leaves)
    # reuse every buffer many times over, tiny sets (2 rows) are the edge
    rng = np.random.default_rng(17)
    for _ in range(40):
        x, y = _mixed(rng)
        leaves = int(rng.choice([2, 11, 40, 200]))
        assert _same_tree(x, y, leaves, np.vstack([x, x + np.float32(0.25)]))


def _cart_source() -> ModuleType:
    """cart.py's source as a module of its own, interpreted (beside the compiled one)."""
    import importlib.util

    path = cart.__file__.rsplit("/", 1)[0] + "/cart.py"
    spec = importlib.util.spec_from_file_location("_cart_source", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclass looks its module up)
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    assert not mod.COMPILED
    return mod


def test_the_source_interpreted_builds_the_compiled_tree() -> None:
    # the same source, compiled (typed views on the builder's work arrays, extension types)
    # and interpreted (numpy views), builds one tree; interpreted runs (GSG_PURE_PYTHON=1)
    # compare the source with itself
    src = _cart_source()
    rng = np.random.default_rng(19)
    sets = [_mixed(rng) for _ in range(6)] + [_replay_like(rng) for _ in range(3)]
    for i, (x, y) in enumerate(sets):
        leaves = (2, 11, 40)[i % 3]
        got = src.fit_or_why(x[:250], y[:250], leaves)
        want = cart.fit_or_why(x[:250], y[:250], leaves)
        assert isinstance(got, src.Tree) and isinstance(want, cart.Tree)
        assert got.__dict__ == want.__dict__


def test_float32_codes_order_the_values_as_they_compare() -> None:
    # the sorts compare codes where scikit-learn compares the values: a float32's code (its
    # bits, -0.0 made 0.0) must order and equate as the values do (``<``, ``==``)
    rng = np.random.default_rng(23)
    special = np.array(
        [0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, 3.4e38, -3.4e38, 1.0, -1.0], np.float32
    )
    for _ in range(50):
        v = np.concatenate(
            [special, rng.normal(0, 10.0 ** rng.integers(-30, 30), 40).astype(np.float32)]
        )
        v = rng.permutation(v)[None, :]
        code = np.empty(v.shape, dtype=np.intp)
        cart._float_codes((v + np.float32(0.0)).view(np.int32), code)
        a, b = v[0][:, None], v[0][None, :]
        ca, cb = code[0][:, None], code[0][None, :]
        assert ((a < b) == (ca < cb)).all() and ((a == b) == (ca == cb)).all()


def test_the_sorts_keys_are_the_values_order_with_the_rows_below() -> None:
    # a key is a value's code above _KEY_SHIFT bits, the payload below: codes of either kind
    # (dense ranks, float32 bits, negative ones too) sort to the introsort's order
    rng = np.random.default_rng(29)
    for _ in range(100):
        n = int(rng.integers(1, 400))
        v = rng.choice(rng.normal(0, 5, int(rng.integers(1, 50))), n).astype(np.float32)
        bits_code = np.empty((1, n), dtype=np.intp)
        cart._float_codes((v[None] + np.float32(0.0)).view(np.int32), bits_code)
        idx0 = rng.permutation(n).astype(np.intp)
        ref_v, ref_i = v.astype(np.float64), idx0.copy()
        from sklearn.utils._sorting import _py_simultaneous_sort

        _py_simultaneous_sort(ref_v, ref_i, n, use_three_way_partition=True)
        for code in (bits_code[0], _codes(v[None])[0]):
            keys = (code << 32) | idx0  # (position i: value v[i], payload idx0[i])
            cart._sort_keys(keys, n)
            assert (keys & 0xFFFFFFFF).tolist() == ref_i.tolist()


def test_negative_zero_features_tie_with_zero_as_in_sklearn() -> None:
    # ``-0.0 == 0.0``: scikit-learn's sorts take them as ties, so the sorts' keys must too
    # (the float32 codes are made of the bits after ``+ 0.0``); the tie order shows in the
    # trees through the orders the sorts leave
    rng = np.random.default_rng(31)
    for _ in range(30):
        n = int(rng.integers(20, 300))
        x = rng.choice(np.array([-0.0, 0.0, -0.0, 1.0, -1.0], np.float32), (n, 3))
        x[:, 2] = rng.normal(0, 1, n).astype(np.float32)
        y = np.round(rng.normal(5, 2, n), 1)
        assert _same_tree(np.ascontiguousarray(x), y, 11, x[:40])
