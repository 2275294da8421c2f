"""Calibration of the sharing physics against measured co-located pairs (physics version 2).

The measurements are *derived ratios* shipped with the package, ``data/sharing_pairs.csv``
(sources, commits, licences and formulas in ``data/PROVENANCE.md``):

- ``tally_pairs``: Tally (ASPLOS'25) A100 artifact: BERT and Llama-2-7b inference at 50 % load
  beside six training jobs under time-slicing, TGS (priority time-sharing by throttling the
  low-priority context) and MPS: training throughput over solo, inference mean and p99 service
  latency over solo.
- ``nos_sharing``: nebuly-ai/nos A100 demo: 3/5/7 YOLOS pods under time-slicing and MPS
  (aggregate throughput over one pod alone) and 1/3/5/7 pods on 1g MIG instances (per-pod
  throughput over the whole GPU; a check of the MISO-fitted MIG curve, no parameter fitted).
- ``tally_priority``: Tally's own column of the same artifact (kernel-level priority: the
  training job's kernels are sliced and launched only while the inference job is idle), the
  measurement behind kernel-level priority under MPS (``interference.KP_*``; MuxFlow's xCUDA).
- ``tally_no_transform``: the same pairs under Tally with kernel transformation disabled (whole,
  unsliced training kernels held back while the inference job runs): the low end of xCUDA's
  protection bracket (``interference.KP_*_LOW``, fitted here with their own three coefficients).
- ``orion_mps``: Orion (EuroSys'24) V100 MPS point: ResNet50 inference at 30 requests/s beside
  ResNet50 training (training speed over solo, inference p50 and p99 in ms).

Every prediction goes through :class:`~gpu_sharing_env.physics.interference.AnalyticSpeedModel` itself
(``rates`` and ``latency_terms``), with each source model mapped to a zoo class
(``data/model_map.csv``) and, where the source measured them, the jobs' own solo busy fraction
and batch time. MPS contention (``KAPPA_*``) is fitted jointly with the pair datasets of
:mod:`gpu_sharing_env.calibration.fit` (this module adds the MPS throughput rows to that fit, see
:func:`mps_rows`); the time-slicing, priority and tail coefficients are fitted here with the
kappas fixed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from gpu_sharing_env.physics.interference import AnalyticSpeedModel, Resident, kp_coefficients
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim.online import latency

SHARING_DATASETS = (
    "tally_pairs", "tally_priority", "tally_no_transform", "nos_sharing", "orion_mps"
)  # fmt: skip
_MODES = {"time_sharing": SharingMode.TIME_SHARING, "tgs": SharingMode.TIME_SHARING,
          "mps": SharingMode.MPS, "tally": SharingMode.MPS, "tally_no_transform": SharingMode.MPS,
          "mig": SharingMode.MIG}  # fmt: skip
#: Mechanisms where the inference job has priority (TGS; Tally's kernel-level priority).
_PRIORITY = ("tgs", "tally", "tally_no_transform")
#: Tally's mechanism label -> its calibration dataset (the others go to ``tally_pairs``).
_TALLY_DATASET = {"tally": "tally_priority", "tally_no_transform": "tally_no_transform"}
#: Datasets predicted at the low end of the kernel-priority bracket: the ``*_low`` entries of
#: :data:`PARAMS` stand in for the model's ``kp_*`` keywords (``interference.kp_coefficients(0)``).
_LOW_DATASETS = ("tally_no_transform",)
#: Tally's inference load (fraction of solo capacity): the duty of the inference context.
TALLY_LOAD = 0.5
#: Orion's inference load: 32.2 requests/s x 6.498 ms solo kernel time per request.
ORION_RPS = 32.2


def _data_file(name: str) -> Path:
    return Path(str(resources.files("gpu_sharing_env") / "data" / name))


def load_sharing(path: str | Path | None = None) -> pd.DataFrame:
    """The shipped measured pairs (or ``path``), with a ``zoo`` column for victim/co-runner."""
    df = pd.read_csv(path if path is not None else _data_file("sharing_pairs.csv"))
    mp = pd.read_csv(_data_file("model_map.csv"))
    zoo = {(s, m): z for s, m, z in zip(mp.source, mp.model, mp.zoo_model, strict=True)}
    df["victim_zoo"] = [zoo.get((s, m), m) for s, m in zip(df.source, df.victim, strict=True)]
    df["corunner_zoo"] = [
        zoo.get((s, m), m) if isinstance(m, str) else ""
        for s, m in zip(df.source, df.corunner, strict=True)
    ]
    return df


@dataclass(frozen=True)
class Case:
    """One measured value and how to predict it."""

    dataset: str
    group: str  # the unit left out together in the held-out check (a model or a setup)
    models: tuple[str, ...]  # source model names taking part
    measured: float
    predict: Callable[[AnalyticSpeedModel], float]


def _rows(frame: pd.DataFrame) -> Iterator[Any]:
    """``frame.itertuples()``, typed loosely (rows of the CSV :func:`load_sharing` reads)."""
    return frame.itertuples()


def _tally_cases(df: pd.DataFrame) -> list[Case]:
    t = df[df.source == "tally"]
    busy = dict(zip(t[t.metric == "solo_busy"].victim, t[t.metric == "solo_busy"].value))
    solo_ms = dict(
        zip(t[t.metric == "latency_ms_solo"].victim, t[t.metric == "latency_ms_solo"].value)
    )
    cases = []
    rows = t[t.mechanism.isin(["time_sharing", "tgs", "mps", *_TALLY_DATASET])]
    for r in rows.pipe(_rows):
        online = r.victim_role == "online"
        if r.metric not in ("throughput_frac", "latency_mean_x", "latency_p99_x"):
            continue
        if online and r.metric == "throughput_frac":
            continue  # the server's own throughput: a consequence of its latency, not fitted
        inf, trn = (r.victim, r.corunner) if online else (r.corunner, r.victim)
        inf_zoo, trn_zoo = (
            (r.victim_zoo, r.corunner_zoo) if online else (r.corunner_zoo, r.victim_zoo)
        )
        prio = 1 if r.mechanism in _PRIORITY else 0
        pair = (
            Resident(inf_zoo, duty=TALLY_LOAD, online=True, priority=prio),
            Resident(trn_zoo, duty=busy[trn]),
        )
        mode = _MODES[r.mechanism]
        gpu = r.gpu

        def pred(m: AnalyticSpeedModel, pair: Any = pair, mode: Any = mode, gpu: str = gpu,
                 metric: str = r.metric, ms: float = solo_ms[inf]) -> float:  # fmt: skip
            rates = m.rates(gpu, mode, pair)
            if metric == "throughput_frac":
                return rates[1]
            wait, tail = m.latency_terms(gpu, mode, pair)[0]
            batch = ms / rates[0] + wait
            return (batch + (tail if metric == "latency_p99_x" else 0.0)) / ms

        dataset = _TALLY_DATASET.get(r.mechanism, "tally_pairs")
        cases.append(Case(dataset, "", (inf, trn), float(r.value), pred))
    return cases


def _nos_cases(df: pd.DataFrame) -> list[Case]:
    n_ = df[(df.source == "nos") & (df.n_tenants > 1)]
    cases = []
    for r in n_.pipe(_rows):
        n = int(r.n_tenants)
        if r.mechanism in ("time_sharing", "mps") and r.metric == "aggregate_x":
            pods = tuple(Resident(r.victim_zoo, duty=1.0, online=True) for _ in range(n))

            def pred_agg(m: AnalyticSpeedModel, pods: Any = pods, mode: Any = _MODES[r.mechanism],
                         gpu: str = r.gpu, n: int = n) -> float:  # fmt: skip
                return n * m.rates(gpu, mode, pods)[0]

            pred: Callable[[AnalyticSpeedModel], float] = pred_agg

        elif r.mechanism == "mig" and r.metric == "throughput_frac":
            # 1g.10gb on an A100-80GB: 1 of 7 compute and 1 of 8 memory slices
            pods = tuple(
                Resident(r.victim_zoo, mig_compute_slices=1, mig_mem_slices=1) for _ in range(n)
            )

            def pred_mig(m: AnalyticSpeedModel, pods: Any = pods, gpu: str = r.gpu) -> float:
                return m.rates(gpu, SharingMode.MIG, pods)[0]

            pred = pred_mig

        else:
            continue
        cases.append(Case("nos_sharing", f"{r.mechanism}:{n}", (r.victim,), float(r.value), pred))
    return cases


def _orion_cases(df: pd.DataFrame) -> list[Case]:
    o = df[df.source == "orion"]
    kernel = dict(zip(o[o.metric == "kernel_ms"].victim_role, o[o.metric == "kernel_ms"].value))
    inf_ms, step_ms = kernel["online"], kernel["offline"]
    pair = (
        Resident("resnet50", duty=ORION_RPS * inf_ms / 1000.0, online=True),
        Resident("resnet50", duty=ZOO["resnet50"].duty),
    )
    gpu = str(o.gpu.iloc[0])
    mode = SharingMode.MPS
    cases = []
    for r in o[o.mechanism == "mps"].pipe(_rows):
        if r.victim_role == "offline":
            measured = float(r.value) * step_ms / 1000.0  # iterations/s over solo (1000/step_ms)

            def pred_step(m: AnalyticSpeedModel) -> float:
                return m.rates(gpu, mode, pair)[1]

            pred: Callable[[AnalyticSpeedModel], float] = pred_step

        elif r.metric in ("latency_ms_p50", "latency_ms_p99"):
            measured = float(r.value)

            def pred_lat(m: AnalyticSpeedModel, metric: str = r.metric) -> float:
                f = m.rates(gpu, mode, pair)[0]
                wait, tail = m.latency_terms(gpu, mode, pair)[0]
                s = latency(inf_ms / f + wait, ORION_RPS, 1, slo_ms=1e9)
                # the model's mean stands in for the median (the queue is light)
                return s.mean_ms if metric == "latency_ms_p50" else s.p99_ms + tail

            pred = pred_lat

        else:
            continue
        cases.append(Case("orion_mps", "orion", ("resnet50",), measured, pred))
    return cases


def cases(df: pd.DataFrame | None = None) -> list[Case]:
    """Every measured value of the three datasets with its predictor."""
    df = load_sharing() if df is None else df
    return _tally_cases(df) + _nos_cases(df) + _orion_cases(df)


# -- fitting ---------------------------------------------------------------------------------

#: The coefficients fitted here: (AnalyticSpeedModel keyword, start, lower, upper). A ``_low``
#: suffix marks the same keyword at the low end of the kernel-priority bracket
#: (``interference.KP_*_LOW``), used only for :data:`_LOW_DATASETS`.
PARAMS = (
    ("context_switch_overhead", 0.05, 0.0, 0.5),
    ("ts_online_weight", 1.5, 0.0, 10.0),
    ("ts_slice_ms", 2.0, 0.0, 50.0),
    ("prio_block", 0.5, 0.0, 1.0),
    ("prio_residual", 0.5, 0.0, 10.0),
    ("mps_tail_ms", 10.0, 0.0, 500.0),
    ("kp_block", 1.0, 0.0, 2.0),
    ("kp_residual", 0.1, 0.0, 10.0),
    ("kp_tail_ms", 1.0, 0.0, 500.0),
    ("kp_block_low", 1.0, 0.0, 2.0),
    ("kp_residual_low", 0.1, 0.0, 10.0),
    ("kp_tail_ms_low", 1.0, 0.0, 500.0),
)
_LOW = "_low"


def shipped() -> dict[str, float]:
    """The shipped values of :data:`PARAMS`: the model's defaults (``interference``'s constants),
    and for the ``_low`` ones the low end of the kernel-priority bracket."""
    defaults = inspect.signature(AnalyticSpeedModel).parameters
    low = kp_coefficients(0.0)
    return {
        name: float(low[name.removesuffix(_LOW)])
        if name.endswith(_LOW)
        else float(defaults[name].default)
        for name, *_ in PARAMS
    }


@dataclass(frozen=True)
class Models:
    """The model at the shipped protection level and at the low end of the kernel-priority
    bracket (only the ``kp_*`` keywords differ); :meth:`predict` picks by dataset."""

    main: AnalyticSpeedModel
    low: AnalyticSpeedModel

    def predict(self, case: Case) -> float:
        """``case``'s prediction by the model its dataset is measured at."""
        return case.predict(self.low if case.dataset in _LOW_DATASETS else self.main)


def _model(params: dict[str, float], kappas: tuple[float, float] | None) -> Models:
    kw: dict[str, Any] = {k: v for k, v in params.items() if not k.endswith(_LOW)}
    if kappas is not None:
        kw["kappa_compute"], kw["kappa_bw"] = kappas
    low = {k.removesuffix(_LOW): v for k, v in params.items() if k.endswith(_LOW)}
    return Models(AnalyticSpeedModel(ZOO, **kw), AnalyticSpeedModel(ZOO, **{**kw, **low}))


def _fitted_cases(cs: list[Case]) -> list[Case]:
    # MIG rows are a check of the MISO fit (no parameter here moves them)
    return [c for c in cs if not c.group.startswith("mig:")]


def fit(cs: list[Case], kappas: tuple[float, float] | None = None) -> dict[str, float]:
    """Least squares on log(pred/meas), each dataset weighted equally, soft-L1 loss."""
    cs = _fitted_cases(cs)
    counts = {d: sum(c.dataset == d for c in cs) for d in SHARING_DATASETS}
    w = np.array([1.0 / np.sqrt(counts[c.dataset]) for c in cs])
    y = np.array([c.measured for c in cs])
    names = [p[0] for p in PARAMS]

    def res(x: np.ndarray) -> np.ndarray:
        m = _model(dict(zip(names, map(float, x), strict=True)), kappas)
        pred = np.array([m.predict(c) for c in cs])
        return np.asarray(np.log(np.maximum(pred, 1e-9) / y) * w)

    x = least_squares(
        res,
        [p[1] for p in PARAMS],
        bounds=([p[2] for p in PARAMS], [p[3] for p in PARAMS]),
        loss="soft_l1",
    ).x
    return dict(zip(names, map(float, x), strict=True))


def errors(cs: list[Case], models: Models) -> dict[str, float]:
    """Median |pred/meas - 1| per dataset."""
    out = {}
    for d in SHARING_DATASETS:
        sub = [c for c in cs if c.dataset == d]
        out[d] = float(np.median([abs(models.predict(c) / c.measured - 1.0) for c in sub]))
    return out


def heldout_errors(cs: list[Case], kappas: tuple[float, float] | None = None) -> dict[str, float]:
    """Leave one out and refit the coefficients above (kappas fixed): each Tally dataset one
    model at a time (every pair of that dataset it takes part in), nos one
    (mechanism, pod count) at a time, Orion as a whole."""
    out = {}
    for d in SHARING_DATASETS:
        sub = [c for c in cs if c.dataset == d]
        errs = []
        if d in ("tally_pairs", *_TALLY_DATASET.values()):
            groups = sorted({m for c in sub for m in c.models})
            members = [[c for c in sub if g in c.models] for g in groups]
        else:
            groups = sorted({c.group for c in sub})
            members = [[c for c in sub if c.group == g] for g in groups]
        for left in members:
            keep = [c for c in cs if all(c is not x for x in left)]
            m = _model(fit(keep, kappas), kappas)
            errs += [abs(m.predict(c) / c.measured - 1.0) for c in left]
        out[d] = float(np.median(errs))
    return out


def mps_rows(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """The MPS throughput rows for the joint kappa fit of :mod:`gpu_sharing_env.calibration.fit`:
    ``source, d_i, b_i, d_j, b_j, n_j, y`` with ``y`` the victim's rate (per pod for nos: aggregate / n)
    beside ``n_j`` identical co-runners at full SM (``_mps_pair`` form, ``d_i = 1`` online)."""
    df = load_sharing() if df is None else df
    out = []
    t = df[df.source == "tally"]
    busy = dict(zip(t[t.metric == "solo_busy"].victim, t[t.metric == "solo_busy"].value))
    for r in t[(t.mechanism == "mps") & (t.victim_role == "offline")].pipe(_rows):
        if r.metric == "throughput_frac":
            b_i = ZOO[r.victim_zoo].bw_intensity
            b_j = ZOO[r.corunner_zoo].bw_intensity
            out.append(("tally", busy[r.victim], b_i, TALLY_LOAD, b_j, 1, float(r.value)))
    n_ = df[(df.source == "nos") & (df.mechanism == "mps") & (df.metric == "aggregate_x")]
    for r in n_.pipe(_rows):
        b = ZOO[r.victim_zoo].bw_intensity
        n = int(r.n_tenants)
        out.append(("nos", 1.0, b, 1.0, b, n - 1, float(r.value) / n))
    o = df[(df.source == "orion") & (df.mechanism == "mps") & (df.victim_role == "offline")]
    k = df[(df.source == "orion") & (df.metric == "kernel_ms")]
    kern = dict(zip(k.victim_role, k.value))
    b = ZOO["resnet50"].bw_intensity
    for r in o.pipe(_rows):
        d_j = ORION_RPS * kern["online"] / 1000.0
        y = float(r.value) * kern["offline"] / 1000
        out.append(("orion", ZOO["resnet50"].duty, b, d_j, b, 1, y))
    return pd.DataFrame(out, columns=["source", "d_i", "b_i", "d_j", "b_j", "n_j", "y"])


def ts_check(lucid: pd.DataFrame, gavel: pd.DataFrame, duties: dict[str, float],
             overhead: float) -> dict[str, float]:  # fmt: skip
    """Median error of the Lucid and Gavel pairs predicted as *time-sliced* (offline
    turn-taking, the fitted switch loss), to compare with their MPS fit."""
    keep = 1.0 - overhead
    d, do = lucid.duty.to_numpy(), lucid.duty_o.to_numpy()
    lu = keep / ((1.0 - d) + d * (1.0 + do))
    med = float(np.median(list(duties.values())))
    gd = gavel.family.map(lambda f: duties.get(f, med)).to_numpy()
    go = gavel.other_family.map(lambda f: duties.get(f, med)).to_numpy()
    gv = keep / ((1.0 - gd) + gd * (1.0 + go))
    return {
        "lucid_pairs": float(np.median(np.abs(lu / lucid.speed.to_numpy() - 1.0))),
        "gavel_pairs": float(np.median(np.abs(gv / gavel.rate.to_numpy() - 1.0))),
    }


@dataclass
class SharingReport:
    """Errors of the shipped and freshly fitted coefficients, held-out errors, the fit."""

    errors: dict[str, dict[str, float]]
    fitted: dict[str, float]


def run(kappas: tuple[float, float] | None = None, *, heldout: bool = True) -> SharingReport:
    """Evaluate the shipped coefficients, refit, and hold out (see :func:`heldout_errors`)."""
    cs = cases()
    shipped_err = errors(cs, _model(shipped(), None))
    fitted = fit(cs, kappas)
    fit_err = errors(cs, _model(fitted, kappas))
    held = heldout_errors(cs, kappas) if heldout else dict.fromkeys(SHARING_DATASETS, np.nan)
    out = {
        d: {
            "n": sum(c.dataset == d for c in cs),
            "median_abs_rel_err": round(shipped_err[d], 4),
            "fit_median_abs_rel_err": round(fit_err[d], 4),
            "heldout_median_abs_rel_err": round(held[d], 4),
        }
        for d in SHARING_DATASETS
    }
    return SharingReport(out, {k: round(v, 3) for k, v in fitted.items()})


__all__ = [
    "SHARING_DATASETS", "Case", "Models", "SharingReport", "cases", "fit", "load_sharing", "run"
]  # fmt: skip
