"""Learned predictors shared by the paper baselines, trained on offline profiling runs.

The papers profile before they schedule: MuxFlow trains a small MLP on measured speeds of
online/offline pairs, GPUPool a gradient-boosted-tree co-execution predictor, GPULet a linear
interference model, Horus a regressor from model features to GPU utilisation. Here every training
set comes from :meth:`ClusterView.profile` (measured normalised speeds with 3% noise: data, not the
simulator's formulas) and from the public model-class profiles of :mod:`gpu_sharing_env.physics.zoo`
(the "profiled features" a scheduler may know about a model class). No predictor reads hidden
truth.

Training is cheap (a few hundred samples) and cached at module level, keyed by everything it
depends on: the predictor kind, the seed, the cluster's GPU types and a *fingerprint* of the
profiler (the measured speeds of a fixed probe pair, so a different speed model retrains).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import ThreadpoolController, threadpool_limits

from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload.job import MODEL_CLASSES

#: Lowest / highest SM fraction MuxFlow's dynamic allocation gives the offline client beside an
#: online service (the deployed mechanism's bounds; see ``MechanismConfig.dynamic_sm``).
DYN_SM_MIN, DYN_SM_MAX = 0.1, 0.9
#: Head-room factor of dynamic SM allocation over the online service's SM activity.
DYN_SM_HEADROOM = 1.2

_CACHE: dict[tuple[Any, ...], Any] = {}
#: The process's native thread pools, found once (``_pools``): ``threadpool_limits`` scans the
#: loaded libraries (``/proc/self/maps``) at every entry, ~4 ms each.
_POOLS: dict[str, Any] = {}


def _pools(user_api: str) -> Any:
    """A thread-pool controller built once: every pool (``"all"``) or one kind (``"blas"``)."""
    hit = _POOLS.get(user_api)
    if hit is None:
        if "all" not in _POOLS:
            _POOLS["all"] = ThreadpoolController()
        hit = _POOLS[user_api] = (
            _POOLS["all"] if user_api == "all" else _POOLS["all"].select(user_api=user_api)
        )
    return hit


def one_blas_thread() -> Any:
    """A context with one BLAS thread (cheap to enter: the controller is built once).

    Predictions are per decision and small (MuxFlow: queue window x services rows); on a
    shared machine BLAS threads contend and cost several times the work. The thread count
    does not change a prediction (the same batch gives the same bits with 1 or 2 threads).
    """
    return _pools("blas").limit(limits=1)


def one_thread() -> Any:
    """A context with one thread for every native thread pool (BLAS and OpenMP), as
    ``threadpool_limits(1)`` gives, but cheap to enter (the controller is built once). For fits
    that run per decision (Horus' k-means of the queue)."""
    return _pools("all").limit(limits=1)


def model_features(model: str) -> tuple[float, float, float]:
    """Profiled features of a model class: solo SM activity, bandwidth intensity, SM-curve k."""
    p = ZOO[model]
    return (p.duty, p.bw_intensity, p.sm_k)


def graph_features(model: str) -> tuple[float, ...]:
    """Model-graph-like features (Horus' predictor inputs): bandwidth intensity, SM scaling,
    per-sample and fixed inference cost (a FLOPs proxy), typical memory and CPU per GPU."""
    p = ZOO[model]
    return (
        p.bw_intensity,
        p.sm_k,
        math.log(p.batch_c_ms + 1e-3),
        math.log(p.batch_a_ms),
        p.mem_gb,
        p.cpu_cores,
    )


def offline_share(online_duty: float) -> float:
    """The SM fraction dynamic SM allocation leaves an offline client beside an online service."""
    return min(DYN_SM_MAX, max(DYN_SM_MIN, 1.0 - DYN_SM_HEADROOM * online_duty))


def offline_share_array(online_duty: np.ndarray) -> np.ndarray:
    """:func:`offline_share` elementwise (the same operations, so the same floats)."""
    return np.minimum(DYN_SM_MAX, np.maximum(DYN_SM_MIN, 1.0 - DYN_SM_HEADROOM * online_duty))


#: ``sm_limited`` per fleet: id of ``view.gpu_types`` -> (that tuple, type name -> flag).
_SM_LIMIT: dict[int, tuple[tuple[Any, ...], dict[str, float]]] = {}


def sm_limited(view: ClusterView, gpu_type: str) -> float:
    """1.0 if the GPU type enforces MPS SM percentages (public hardware catalogue)."""
    fleet = view.gpu_types  # static: the same tuple in every snapshot of a simulator
    hit = _SM_LIMIT.get(id(fleet))
    if hit is None or hit[0] is not fleet:
        flags: dict[str, float] = {}
        for t in fleet:
            flags.setdefault(t.name, float(t.mps_sm_limit))
        if len(_SM_LIMIT) > 16:
            _SM_LIMIT.clear()
        hit = _SM_LIMIT[id(fleet)] = (fleet, flags)
    return hit[1].get(gpu_type, 1.0)


def fingerprint(view: ClusterView) -> tuple[Any, ...]:
    """Cache key of the profiler: the cluster's GPU types and a probe pair's measured speeds."""
    types = tuple(sorted(set(view.type_name)))
    probe = view.profile(
        types[0],
        SharingMode.MPS,
        [Resident("resnet50", sm_frac=0.5), Resident("bert", sm_frac=0.5, online=True)],
    )
    return (types, tuple(round(x, 9) for x in probe))


def cached(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """Module-level memo: trained predictors are reused across episodes and policy objects."""
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) > 256:
            _CACHE.clear()
        # One BLAS/OpenMP thread: these fits are tiny, and thread start-up and contention on a
        # shared machine cost ten times the work itself.
        with threadpool_limits(1):
            hit = _CACHE[key] = build()
    return hit


# ------------------------------------------------------------------------------------ MuxFlow
@dataclass(frozen=True)
class PairSpeedPredictor:
    """MuxFlow's speed predictor: normalised offline throughput beside an online service.

    Input row: ``model_features(offline) + (online bw_intensity, online SM activity, offline SM
    fraction, SM-limit flag)``; output: offline speed / its solo speed on that GPU, in (0, 1].
    """

    net: Any
    holdout_mae: float

    @staticmethod
    def row(
        offline: str, online: str, online_duty: float, off_share: float, limited: float
    ) -> list[float]:
        return [
            *model_features(offline),
            ZOO[online].bw_intensity,
            online_duty,
            off_share,
            limited,
        ]

    @staticmethod
    def rows(
        offline: np.ndarray,
        online_bw: np.ndarray,
        online_duty: np.ndarray,
        off_share: np.ndarray,
        limited: np.ndarray,
    ) -> np.ndarray:
        """:meth:`row` for many pairs at once: ``offline`` holds the offline models'
        :func:`model_features` (one row per pair), the others one value per pair."""
        return np.column_stack([offline, online_bw, online_duty, off_share, limited])

    def predict(self, rows: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
        if len(rows) == 0:
            return np.zeros(0)
        x = np.asarray(rows, dtype=float)
        with one_blas_thread():
            y = _pipeline_predict(self.net, x)
        return np.clip(y, 0.01, 1.0)


#: Per fitted pipeline: id -> (the pipeline, (scaler, MLP) of :func:`_pipeline_predict`'s direct
#: path, or None where the pipeline's own ``predict`` must run).
_DIRECT: dict[int, tuple[Any, tuple[Any, Any] | None]] = {}


def _pipeline_predict(net: Any, x: np.ndarray) -> np.ndarray:
    """``net.predict(x)`` for a fitted ``StandardScaler`` + ``MLPRegressor`` pipeline without
    scikit-learn's per-call input validation (about half of a call on a MuxFlow batch): the
    scaler's copy, centring and scaling, then the network's own forward pass, on the same
    arrays, so the same BLAS calls and the same floats. The first batch of each pipeline is
    also run through ``net.predict``; the direct path is kept only if the two agree bit for bit.
    """
    hit = _DIRECT.get(id(net))
    if hit is None or hit[0] is not net:
        y = net.predict(x)
        parts = _direct_parts(net)
        if parts is not None and not np.array_equal(
            _direct_predict(*parts, x).view(np.int64), np.asarray(y, dtype=float).view(np.int64)
        ):
            parts = None
        if len(_DIRECT) > 64:
            _DIRECT.clear()
        _DIRECT[id(net)] = (net, parts)
        return np.asarray(y)
    if hit[1] is None or x.ndim != 2 or x.dtype != np.float64:
        return np.asarray(net.predict(x))
    return _direct_predict(*hit[1], x)


def _direct_parts(net: Any) -> tuple[Any, Any] | None:
    steps = getattr(net, "steps", None)
    if steps is None or len(steps) != 2:
        return None
    sc, mlp = steps[0][1], steps[1][1]
    ok = (
        isinstance(sc, StandardScaler)
        and sc.with_mean
        and sc.with_std
        and getattr(sc, "mean_", None) is not None
        and getattr(sc, "scale_", None) is not None
        and isinstance(mlp, MLPRegressor)
        and hasattr(mlp, "_forward_pass_fast")
    )
    return (sc, mlp) if ok else None


def _direct_predict(sc: Any, mlp: Any, x: np.ndarray) -> np.ndarray:
    xs = np.array(x, dtype=np.float64, copy=True)  # StandardScaler.transform's copy
    xs -= sc.mean_
    xs /= sc.scale_
    y = mlp._forward_pass_fast(xs, check_input=False)
    return np.asarray(y.ravel() if y.shape[1] == 1 else y)


def train_pair_speed(
    view: ClusterView, seed: int, n: int = 500, kernel_priority: bool = False
) -> PairSpeedPredictor:
    """Profile ``n`` random (offline, online, load, SM split, GPU type) samples, fit the MLP.

    As the paper (4 layers, hidden 64): an MLP with three hidden layers of 64 units, fitted by
    L-BFGS (deterministic given ``seed``), on 80% of the samples; the other 20% are held out to
    report its error (``holdout_mae``). ``kernel_priority``: profile with the online service at
    a higher priority, as deployed with kernel-level priority (MuxFlow's xCUDA).
    """

    def build() -> PairSpeedPredictor:
        rng = np.random.default_rng(seed)
        types = sorted(set(view.type_name))
        xs: list[list[float]] = []
        ys: list[float] = []
        for _ in range(n):
            off = MODEL_CLASSES[int(rng.integers(len(MODEL_CLASSES)))]
            on = MODEL_CLASSES[int(rng.integers(len(MODEL_CLASSES)))]
            gt = types[int(rng.integers(len(types)))]
            duty_on = float(rng.uniform(0.02, 0.8))
            # Half the samples at the dynamic-SM split (what deployment uses), half anywhere.
            s = offline_share(duty_on) if rng.random() < 0.5 else float(rng.uniform(0.1, 0.9))
            res = [
                Resident(off, sm_frac=s, duty=ZOO[off].duty),
                Resident(
                    on, sm_frac=1.0 - s, duty=duty_on, online=True, priority=int(kernel_priority)
                ),
            ]
            xs.append(PairSpeedPredictor.row(off, on, duty_on, s, sm_limited(view, gt)))
            ys.append(view.profile(gt, SharingMode.MPS, res)[0])
        x, y = np.asarray(xs), np.asarray(ys)
        cut = int(0.8 * n)
        net = make_pipeline(
            StandardScaler(),
            MLPRegressor(
                hidden_layer_sizes=(64, 64, 64),
                solver="lbfgs",
                max_iter=300,
                alpha=1e-3,
                random_state=seed,
            ),
        )
        net.fit(x[:cut], y[:cut])  # one fit: the held-out 20% measure its error
        mae = float(np.mean(np.abs(np.clip(net.predict(x[cut:]), 0.01, 1.0) - y[cut:])))
        return PairSpeedPredictor(net, mae)

    key: tuple[Any, ...] = ("muxflow", seed, n, fingerprint(view), kernel_priority)
    if kernel_priority:
        # the profiler's kernel-priority coefficients (its protection level) are part of what
        # it measures: a throttled probe pair tells them apart
        probe = [
            Resident("resnet50", sm_frac=0.5),
            Resident("bert", sm_frac=0.5, duty=0.5, online=True, priority=1),
        ]
        mps = view.profile(key[3][0][0], SharingMode.MPS, probe)
        key += (tuple(round(x, 9) for x in mps),)
    pred: PairSpeedPredictor = cached(key, build)
    return pred


# ------------------------------------------------------------------------------------ GPUPool
@dataclass(frozen=True)
class CoExecutionPredictor:
    """GPUPool's co-execution predictor: normalised progress of job i when paired with j.

    Input row: ``model_features(i) + model_features(j) + (s_i, s_j, SM-limit flag)``.
    """

    gbt: Any
    holdout_mae: float

    @staticmethod
    def row(mi: str, mj: str, s_i: float, s_j: float, limited: float) -> list[float]:
        return [*model_features(mi), *model_features(mj), s_i, s_j, limited]

    def predict(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        if not rows:
            return np.zeros(0)
        return np.clip(self.gbt.predict(np.asarray(rows, dtype=float)), 0.01, 1.0)


def train_co_execution(
    view: ClusterView, seed: int, splits: Sequence[tuple[float, float]], n_pairs: int = 300
) -> CoExecutionPredictor:
    """Profile ``n_pairs`` random offline pairs at the given MPS SM splits; fit gradient-boosted
    trees (as the paper's kernel-wise GBT predictor, here at job granularity)."""

    def build() -> CoExecutionPredictor:
        rng = np.random.default_rng(seed)
        types = sorted(set(view.type_name))
        xs: list[list[float]] = []
        ys: list[float] = []
        for _ in range(n_pairs):
            a = MODEL_CLASSES[int(rng.integers(len(MODEL_CLASSES)))]
            b = MODEL_CLASSES[int(rng.integers(len(MODEL_CLASSES)))]
            gt = types[int(rng.integers(len(types)))]
            s_a, s_b = splits[int(rng.integers(len(splits)))]
            lim = sm_limited(view, gt)
            res = [
                Resident(a, sm_frac=s_a, duty=ZOO[a].duty),
                Resident(b, sm_frac=s_b, duty=ZOO[b].duty),
            ]
            np_a, np_b = view.profile(gt, SharingMode.MPS, res)
            xs += [
                CoExecutionPredictor.row(a, b, s_a, s_b, lim),
                CoExecutionPredictor.row(b, a, s_b, s_a, lim),
            ]
            ys += [np_a, np_b]
        x, y = np.asarray(xs), np.asarray(ys)
        cut = 2 * int(0.8 * n_pairs)
        gbt = GradientBoostingRegressor(
            n_estimators=150, max_depth=3, learning_rate=0.1, random_state=seed
        )
        gbt.fit(x[:cut], y[:cut])
        mae = float(np.mean(np.abs(np.clip(gbt.predict(x[cut:]), 0.01, 1.0) - y[cut:])))
        gbt.fit(x, y)
        return CoExecutionPredictor(gbt, mae)

    key = ("gpupool", seed, n_pairs, tuple(splits), fingerprint(view))
    pred: CoExecutionPredictor = cached(key, build)
    return pred


# ------------------------------------------------------------------------------------ GPULet
@dataclass(frozen=True)
class LinearInterference:
    """GPULet's interference model: extra latency fraction of a service from one co-runner,
    linear in two pair factors (the paper used the pair's L2 and DRAM-bandwidth utilisations;
    here bandwidth intensity product times the co-runner's activity, and the co-runner's
    activity alone). Several co-runners add up."""

    coef: tuple[float, float]
    intercept: float
    holdout_mae: float

    @staticmethod
    def factors(model: str, other: str, other_duty: float) -> tuple[float, float]:
        return (ZOO[model].bw_intensity * ZOO[other].bw_intensity * other_duty, other_duty)

    def slowdown(self, model: str, others: Sequence[tuple[str, float]]) -> float:
        """Predicted latency inflation ``L_shared / L_alone - 1`` (>= 0)."""
        total = 0.0
        for other, duty in others:
            f1, f2 = self.factors(model, other, duty)
            total += max(0.0, self.intercept + self.coef[0] * f1 + self.coef[1] * f2)
        return total


def train_linear_interference(view: ClusterView, seed: int, n: int = 300) -> LinearInterference:
    """Profile services beside random co-runners on disjoint MPS partitions; fit least squares."""

    def build() -> LinearInterference:
        rng = np.random.default_rng(seed)
        types = sorted(set(view.type_name))
        xs: list[tuple[float, float]] = []
        ys: list[float] = []
        for _ in range(n):
            m = MODEL_CLASSES[int(rng.integers(len(MODEL_CLASSES)))]
            o = MODEL_CLASSES[int(rng.integers(len(MODEL_CLASSES)))]
            gt = types[int(rng.integers(len(types)))]
            s = float(rng.choice([0.25, 0.5, 0.75]))
            d_m = float(rng.uniform(0.05, 0.8))
            d_o = float(rng.uniform(0.05, 1.0))
            me = Resident(m, sm_frac=s, duty=d_m, online=True)
            alone = view.profile(gt, SharingMode.MPS, [me])[0]
            shared = view.profile(
                gt, SharingMode.MPS, [me, Resident(o, sm_frac=1.0 - s, duty=d_o)]
            )[0]
            xs.append(LinearInterference.factors(m, o, d_o))
            ys.append(alone / shared - 1.0)
        x, y = np.asarray(xs), np.asarray(ys)
        cut = int(0.8 * n)
        lr = LinearRegression().fit(x[:cut], y[:cut])
        mae = float(np.mean(np.abs(lr.predict(x[cut:]) - y[cut:])))
        lr.fit(x, y)
        return LinearInterference(
            (float(lr.coef_[0]), float(lr.coef_[1])), float(lr.intercept_), mae
        )

    pred: LinearInterference = cached(("gpulet", seed, n, fingerprint(view)), build)
    return pred


# ------------------------------------------------------------------------------------ Horus
@dataclass(frozen=True)
class UtilPredictor:
    """Horus' prediction engine: GPU utilisation and memory of a job from model features.

    Predictions for every known model class are computed once, in one batch (the regressors are
    deterministic), so the scheduler's hot path is a dictionary look-up.
    """

    util_by_model: dict[str, float]
    mem_by_model: dict[str, float]

    def util(self, model: str) -> float:
        return self.util_by_model[model]

    def mem_gb(self, model: str) -> float:
        return self.mem_by_model[model]


def train_util(seed: int) -> UtilPredictor:
    """Fit tree regressors (Horus used tree-based regressors) from graph-like features to the
    measured solo utilisation and memory of the public model-class profiles."""

    def build() -> UtilPredictor:
        x = np.asarray([graph_features(m) for m in MODEL_CLASSES])
        util = np.asarray([ZOO[m].duty for m in MODEL_CLASSES])
        mem = np.asarray([ZOO[m].mem_gb for m in MODEL_CLASSES])
        um = GradientBoostingRegressor(n_estimators=200, max_depth=2, random_state=seed)
        mm = GradientBoostingRegressor(n_estimators=200, max_depth=2, random_state=seed)
        um.fit(x, util)
        mm.fit(x[:, :4], mem)  # memory from graph features only (not the memory figure itself)
        u = np.clip(um.predict(x), 0.01, 1.0)
        m = np.maximum(mm.predict(x[:, :4]), 0.1)
        return UtilPredictor(
            {k: float(v) for k, v in zip(MODEL_CLASSES, u)},
            {k: float(v) for k, v in zip(MODEL_CLASSES, m)},
        )

    pred: UtilPredictor = cached(("horus", seed), build)
    return pred
