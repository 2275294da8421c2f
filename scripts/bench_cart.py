"""The predictor's CART fit: scikit-learn's against ``workload/cart.py``'s, side by side.

1. Fit time on the predictor's real training sets (each scenario's warm start for a few seeds,
   then after 100 and 300 of the episode's runs have finished), the two fits interleaved, the
   same trees checked (``tests/test_cart_exact.py`` checks them on more data).
2. Raw ``GpuSharing-v1`` steps/s on ``default`` (random legal actions, resets included,
   ``gsg bench``'s loop) with the predictor fitting scikit-learn's trees, then cart's, beside
   CartPole-v1 in the same run.

``cart`` is fast compiled only (``gpu_sharing_env.COMPILED`` lists it after ``make setup``);
interpreted the predictor keeps scikit-learn's fit, and part 2 compares it with itself.

    python scripts/bench_cart.py [--seconds 10] [--seeds 3] [--scenarios default,pai-busy]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import ScenarioJobs, build_workload
from gpu_sharing_env.workload import cart, predictor
from gpu_sharing_env.workload.job import JobKind


def training_sets(scenario: str, seeds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The predictor's training sets: warm start, then after 100 and 300 finished runs."""
    out = []
    make = build_workload(load_scenario(scenario))
    for seed in range(seeds):
        jobs = make(np.random.default_rng(seed))
        assert isinstance(jobs, ScenarioJobs)
        p = jobs.predictor
        assert p is not None
        runs = sorted(
            (j for j in jobs if j.kind is JobKind.OFFLINE), key=lambda j: j.submit_s + j.work_s
        )
        done = 0
        for k in (0, 100, 300):
            for j in runs[done:k]:
                p.observe(j, j.job_id)
            done = k
            rows = p.training_set()
            if rows is not None:
                out.append(rows)
    return out


def bench_fits(scenario: str, seeds: int, reps: int) -> tuple[float, float, float, float, int]:
    """ms per fit, scikit-learn's and cart's: the medians, then the medians over the training
    sets of each one's fastest rep (steadier under load); how many of cart's were none."""
    sets = training_sets(scenario, seeds)
    predictor._fit_sklearn(*sets[0], 11)  # sklearn imported before timing
    t_sk: list[float] = []
    t_cart: list[float] = []
    best_sk: list[float] = []
    best_cart: list[float] = []
    none = 0
    for x, y in sets:
        ref = predictor._fit_sklearn(x, y, 11)
        for _ in range(reps):
            t0 = time.perf_counter()
            predictor._fit_sklearn(x, y, 11)
            t1 = time.perf_counter()
            tree = cart.fit(x, y, 11)
            t2 = time.perf_counter()
            t_sk.append(t1 - t0)
            t_cart.append(t2 - t1)
        best_sk.append(min(t_sk[-reps:]))
        best_cart.append(min(t_cart[-reps:]))
        if tree is None:
            none += 1
        else:
            assert (tree.feature, tree.threshold, tree.value) == (
                ref.feature,
                ref.threshold,
                ref.value,
            ), "cart's tree is not scikit-learn's"
    med = statistics.median
    return med(t_sk) * 1e3, med(t_cart) * 1e3, med(best_sk) * 1e3, med(best_cart) * 1e3, none


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="per env measurement")
    ap.add_argument("--seeds", type=int, default=3, help="episodes' warm starts per scenario")
    ap.add_argument("--reps", type=int, default=5, help="timed fits per training set")
    ap.add_argument("--scenarios", default="default,pai-busy")
    args = ap.parse_args(argv)
    print(f"cart compiled: {cart.COMPILED}  (interpreted: the predictor fits scikit-learn's)")
    head = ("scenario", "sets", "sklearn ms", "cart ms", "x faster", "fastest:", "x faster")
    print("{:<12} {:>5} {:>11} {:>8} {:>9} {:>16} {:>9} none".format(*head))
    for sc in args.scenarios.split(","):
        sk, ca, sk1, ca1, none = bench_fits(sc, args.seeds, args.reps)
        n = 3 * args.seeds
        print(
            f"{sc:<12} {n:>5} {sk:>11.2f} {ca:>8.2f} {sk / ca:>9.2f} {sk1:>7.2f} /{ca1:>7.2f}"
            f" {sk1 / ca1:>9.2f} {none:>4}"
        )

    from gpu_sharing_gym.bench.suite import cartpole_steps_per_s, env_steps_per_s

    rates: dict[str, list[float]] = {"sklearn": [], "cart": []}
    cartpole: list[float] = []
    for _ in range(2):  # alternated, so drifting load hits both alike
        cartpole.append(cartpole_steps_per_s(args.seconds / 2))
        for mode, flag in (("sklearn", False), ("cart", None)):
            predictor.FAST_CART = flag
            predictor._FITS.clear()
            env = gym.make("GpuSharing-v1", scenario="default")
            rates[mode].append(env_steps_per_s(env, args.seconds / 2)[0])
            env.close()
    predictor.FAST_CART = None
    cp = statistics.mean(cartpole)
    print(f"\nraw GpuSharing-v1 on default, random legal actions ({args.seconds:g} s each)")
    print(f"{'predictor fit':<14} {'steps/s':>9} {'x CartPole':>11}")
    for mode, rs in rates.items():
        r = statistics.mean(rs)
        print(f"{mode:<14} {r:>9.0f} {r / cp:>11.4f}")
    print(f"{'CartPole-v1':<14} {cp:>9.0f}")
    gain = statistics.mean(rates["cart"]) / statistics.mean(rates["sklearn"])
    print(f"cart / sklearn steps/s: {gain:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
