"""Every tree a replay fits: ``workload/cart.py``'s against scikit-learn's, node for node.

Runs ``scripts/evaluate.py`` with the arguments given (one process, as the side-by-side runs
it), records every training set the predictor fits on (``predictor._fit_tree``'s inputs), then
fits each with :func:`cart.fit_or_why` and with scikit-learn's
``DecisionTreeRegressor(criterion="absolute_error", max_leaf_nodes=11, random_state=0)`` and
compares the trees (children, features, thresholds, values: ``==``). Exits 1 if one differs
or cart declined one. ``--save sets.npz`` keeps the training sets (``x0, y0, x1, ...``) for
profiling a fit alone.

    python scripts/check_cart_replay.py [--save sets.npz] -- --policy first_fit \\
        --scenario S.yaml --trace T.csv --trace-format pai --cluster C.csv \\
        --cluster-format pai --seeds 1 --quiet
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import numpy as np

from gpu_sharing_env.workload import cart, predictor


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--save", type=Path, help="write the training sets to this .npz")
    ap.add_argument("evaluate_args", nargs=argparse.REMAINDER, help="after --: evaluate.py's")
    args = ap.parse_args(argv)
    rest = args.evaluate_args[1:] if args.evaluate_args[:1] == ["--"] else args.evaluate_args
    sets: list[tuple[np.ndarray, np.ndarray, int]] = []
    fit_tree = predictor._fit_tree

    def recording(x: np.ndarray, y: np.ndarray, max_leaf_nodes: int) -> predictor._Fit:
        sets.append((x.copy(), y.copy(), max_leaf_nodes))
        return fit_tree(x, y, max_leaf_nodes)

    predictor._fit_tree = recording  # type: ignore[assignment]
    script = Path(__file__).with_name("evaluate.py")
    sys.argv = [str(script), *rest]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        predictor._fit_tree = fit_tree
    if args.save is not None:
        arrays = {f"x{i}": x for i, (x, _, _) in enumerate(sets)}
        arrays.update({f"y{i}": y for i, (_, y, _) in enumerate(sets)})
        np.savez(args.save, **arrays)
    bad = 0
    for i, (x, y, leaves) in enumerate(sets):
        got = cart.fit_or_why(x, y, leaves)
        ref = predictor._fit_sklearn(x, y, leaves)
        if isinstance(got, str):
            print(f"set {i}: cart declined ({got})")
            bad += 1
        elif (
            got.children_left,
            got.children_right,
            got.feature,
            got.threshold,
            got.value,
        ) != (ref.left, ref.right, ref.feature, ref.threshold, ref.value):
            print(f"set {i}: cart's tree is not scikit-learn's")
            bad += 1
    print(f"{len(sets)} training sets, {bad} trees differ from scikit-learn's", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
