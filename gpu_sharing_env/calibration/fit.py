"""Calibration of the analytic speed model against the measurements in ``../shared/data``.

Readers turn each third-party file (PROVENANCE.md §2) into a tidy frame; :func:`run` compares the
model with each dataset three ways and returns ``{dataset: {...}}``:

- ``median_abs_rel_err`` (headline): the *shipped* coefficients (``zoo.ZOO``, the constants in
  ``interference`` and the calibration-only profiles below) evaluated through
  :class:`~gpu_sharing_env.physics.interference.AnalyticSpeedModel` itself;
- ``fit_median_abs_rel_err``: a fresh least-squares fit (log residuals, soft-L1 loss);
- ``heldout_median_abs_rel_err``: leave-one-model-out. The model's own parameters are dropped,
  the rest (global coefficients included) are refitted without its rows, and it is predicted
  with population defaults: for the pair datasets one pooled profile fitted to predict every
  other model (:meth:`_PairArrays.population_default`), elsewhere the median of the other
  models' fitted parameters.

Only numpy/pandas/scipy; data is read only from the path given. The files are never copied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from gpu_sharing_env.calibration import sharing as calibration_sharing
from gpu_sharing_env.calibration.sharing import SHARING_DATASETS, mps_rows, ts_check
from gpu_sharing_env.physics import interference as itf
from gpu_sharing_env.physics.interference import REFERENCE_GPU, AnalyticSpeedModel, Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.zoo import MEDIAN_BW, ZOO, ModelProfile

#: The datasets read from ``../shared/data``.
SHARED_DATASETS = ("miso_mig", "igniter_solo", "igniter_pairs", "gavel_pairs", "lucid_pairs")
#: Every dataset in a report: the shared ones, the MPS throughput rows of the shipped measured
#: pairs (``mps_sharing``, fitted jointly with the shared pairs) and the shipped pair datasets of
#: :mod:`gpu_sharing_env.calibration.sharing`.
DATASETS = (*SHARED_DATASETS, "mps_sharing", *SHARING_DATASETS)
V100 = REFERENCE_GPU

#: MISO model -> the zoo class whose ``mig_k`` it sets.
MISO_TO_ZOO = {
    "resnet": "resnet50",
    "mobilenet": "mobilenet",
    "bert": "bert",
    "cyclegan": "cyclegan",
    "embedding": "deepfm",
    "gnn": "gnn",
    "deepspeech2": "deepspeech2",
    "transformer": "transformer",
}
#: iGniter network -> the zoo class whose ``sm_k``/``batch_a_ms``/``batch_c_ms`` it sets.
IGNITER_TO_ZOO = {"alexnet": "mobilenet", "resnet50": "resnet50", "vgg19": "vgg16", "ssd": "yolov3"}
#: Calibration-only bandwidth intensity of the iGniter networks. Fitted by scripts/calibrate.py
#: on igniter_pairs (jointly with KAPPA_* on the three pair datasets).
IGNITER_BW = {"alexnet": 0.277, "resnet50": 0.269, "ssd": 0.233, "vgg19": 0.270}
#: Gavel job family -> (zoo class it informs, duty, bw_intensity). duty/bw fitted by
#: scripts/calibrate.py on gavel_pairs (V100, scale factor 1, both jobs single-GPU), jointly with
#: the other MPS pairs. These calibration-only profiles follow the physics-v2 fit; the zoo's
#: "G:" bw_intensity values stay at the version-1 fit (0.11-1.0): fed back into the zoo and
#: refitted, bw_intensity and KAPPA_BW trade off until every family sits at 1.0 (a degenerate
#: optimum with the same errors), so the zoo keeps the spread the v1 fit found.
GAVEL_FAMILIES: dict[str, tuple[str, float, float]] = {
    "A3C": ("ppo", 0.791, 0.786),
    "CycleGAN": ("cyclegan", 1.00, 0.817),
    "LM": ("lstm", 1.00, 0.40),
    "Recommendation": ("deepfm", 1.00, 1.00),
    "ResNet-18": ("resnet18", 0.977, 0.178),
    "ResNet-50": ("resnet50", 1.00, 1.00),
    "Transformer": ("transformer", 1.00, 0.50),
}
#: Lucid model -> zoo class it informs (duty and bw come from Lucid's own solo measurements).
LUCID_TO_ZOO = {
    "ResNet18": "resnet18",
    "ResNet50": "resnet50",
    "MobileNetV2": "mobilenet",
    "MobileNetV3": "mobilenet",
    "EfficientNet": "mobilenet",
    "VGG": "vgg16",
    "DCGAN": "cyclegan",
    "LSTM": "lstm",
    "NeuMF": "ncf",
    "PPO": "ppo",
    "TD3": "ppo",
    "PointNet": "gnn",
    "BERT": "bert",
    "Transformer": "transformer",
}
_MIG_SLICES = {"1g.5gb": (1, 1), "2g.10gb": (2, 2), "3g.20gb": (3, 4), "4g.20gb": (4, 4)}


class CalibrationDataError(FileNotFoundError):
    """The data directory or one of its files is missing."""


# ------------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------------


def _read_csv(root: Path, rel: str) -> pd.DataFrame:
    path = root / rel
    if not path.is_file():
        raise CalibrationDataError(f"calibration data file missing: {path}")
    return pd.read_csv(path)


def read_miso(root: Path) -> pd.DataFrame:
    """MISO A100 MIG: speed of each (model, batch) on 1g..4g relative to 7g.40gb (median iter)."""
    d = _read_csv(root, "miso_mig/miso_a100_mig_iter_time_summary.csv")
    ref = d[d.mig_profile == "7g.40gb"].set_index(["model", "batch_size"]).median_iter_s
    d = d[d.mig_profile.isin(list(_MIG_SLICES))].copy()
    d["ref_s"] = [ref.get((m, b), np.nan) for m, b in zip(d.model, d.batch_size)]
    d = d.dropna(subset=["ref_s"])
    return pd.DataFrame(
        {
            "model": d.model.to_numpy(),
            "batch": d.batch_size.to_numpy(),
            "profile": d.mig_profile.to_numpy(),
            "c": [_MIG_SLICES[p][0] for p in d.mig_profile],
            "m": [_MIG_SLICES[p][1] for p in d.mig_profile],
            "speed": (d.ref_s / d.median_iter_s).to_numpy(),
        }
    )


def read_igniter_solo(root: Path) -> pd.DataFrame:
    """iGniter V100 MPS solo latency; each row carries the (model, batch)'s largest-SM anchor."""
    d = _read_csv(root, "igniter/igniter_v100_mps_solo_profile.csv")
    d = d.assign(s=d.mps_sm_pct / 100.0)
    top = d.loc[d.groupby(["model", "batch_size"]).s.idxmax()].set_index(["model", "batch_size"])
    idx = list(zip(d.model, d.batch_size))
    return pd.DataFrame(
        {
            "model": d.model.to_numpy(),
            "batch": d.batch_size.to_numpy(),
            "s": d.s.to_numpy(),
            "latency_ms": d.latency_ms.to_numpy(),
            "anchor_s": top.s.reindex(idx).to_numpy(),
            "anchor_ms": top.latency_ms.reindex(idx).to_numpy(),
        }
    )


def read_igniter_pairs(root: Path) -> pd.DataFrame:
    """iGniter V100 MPS pairs, both sides stacked: A gets pct %, B the rest."""
    p = _read_csv(root, "igniter/igniter_v100_mps_pair_interference.csv")
    s = p.mps_sm_pct_a.to_numpy() / 100.0
    a = pd.DataFrame(
        {"model": p.model_a, "other": p.model_b, "batch": p.batch_a, "s": s,
         "latency_ms": p.latency_a_ms}
    )  # fmt: skip
    b = pd.DataFrame(
        {"model": p.model_b, "other": p.model_a, "batch": p.batch_b, "s": 1.0 - s,
         "latency_ms": p.latency_b_ms}
    )  # fmt: skip
    return pd.concat([a, b], ignore_index=True)


def read_gavel_pairs(root: Path, gpu_type: str = "v100") -> pd.DataFrame:
    """Gavel co-located throughput / isolated throughput, single-GPU jobs on ``gpu_type``.

    Zero throughputs (pairs Gavel could not co-locate, e.g. out of memory) are dropped.
    ``v100`` and ``v100_unconsolidated`` are identical at scale factor 1.
    """
    d = _read_csv(root, "gavel/gavel_throughputs_flat.csv")
    d = d[(d.gpu_type == gpu_type) & (d.scale_factor == 1)]
    solo = d[d.colocated_job_type.isna()].set_index("job_type").throughput_self_steps_per_s
    q = d[d.colocated_job_type.notna() & (d.colocated_scale_factor == 1)]
    rate = q.throughput_self_steps_per_s.to_numpy() / q.job_type.map(solo).to_numpy()
    out = pd.DataFrame(
        {
            "job": q.job_type.to_numpy(),
            "family": [j.split(" (")[0] for j in q.job_type],
            "other_family": [j.split(" (")[0] for j in q.colocated_job_type],
            "rate": rate,
        }
    )
    return out[out.rate > 0].reset_index(drop=True)


def read_lucid_pairs(root: Path) -> pd.DataFrame:
    """Lucid RTX 3090 pairs, both sides stacked, with each side's solo gpu_util / gmem_util."""
    c = _read_csv(root, "lucid/colocate_info.csv")
    solo = _read_csv(root, "lucid/single_data.csv").set_index(
        ["model", "dataset", "batchsize", "amp"]
    )
    sides = []
    for i, j in ((1, 2), (2, 1)):
        ki = list(zip(c[f"model{i}"], c[f"dataset{i}"], c[f"batchsize{i}"], c[f"amp{i}"]))
        kj = list(zip(c[f"model{j}"], c[f"dataset{j}"], c[f"batchsize{j}"], c[f"amp{j}"]))
        si, sj = solo.reindex(ki), solo.reindex(kj)
        sides.append(
            pd.DataFrame(
                {
                    "model": c[f"model{i}"].to_numpy(),
                    "other": c[f"model{j}"].to_numpy(),
                    "duty": si.gpu_util.to_numpy() / 100.0,
                    "bw": si.gmem_util.to_numpy() / 100.0,
                    "duty_o": sj.gpu_util.to_numpy() / 100.0,
                    "bw_o": sj.gmem_util.to_numpy() / 100.0,
                    "speed": c[f"speed{i}"].to_numpy(),
                }
            )
        )
    d = pd.concat(sides, ignore_index=True).dropna()
    d[["duty", "duty_o"]] = d[["duty", "duty_o"]].clip(0.01, 1.0)
    d[["bw", "bw_o"]] = d[["bw", "bw_o"]].clip(0.0, 1.0)
    return d.reset_index(drop=True)


@dataclass(frozen=True)
class Data:
    """All five datasets, read once."""

    miso: pd.DataFrame
    igniter_solo: pd.DataFrame
    igniter_pairs: pd.DataFrame
    gavel: pd.DataFrame
    lucid: pd.DataFrame


def load(root: str | Path) -> Data:
    """Read every dataset under ``root`` (the shared ``data`` directory)."""
    root = Path(root)
    if not root.is_dir():
        raise CalibrationDataError(f"calibration data directory not found: {root}")
    return Data(
        read_miso(root),
        read_igniter_solo(root),
        read_igniter_pairs(root),
        read_gavel_pairs(root),
        read_lucid_pairs(root),
    )


# ------------------------------------------------------------------------------------------------
# Vectorised forms (the same closed forms as interference.AnalyticSpeedModel, for fitting)
# ------------------------------------------------------------------------------------------------


def _g(k: Any, s: Any) -> Any:
    k = np.maximum(k, 1e-6)
    return (1.0 - np.exp(-k * s)) / (1.0 - np.exp(-k))


def _mps_pair(
    d_i: Any, s_i: Any, k_i: Any, b_i: Any, d_j: Any, s_j: Any, b_j: Any, kc: float, kb: float
) -> Any:
    ov = np.clip((s_i + s_j - 1.0) / s_i, 0.0, 1.0)
    contention = 1.0 + d_j * (kc * ov + kb * b_i * b_j)
    return 1.0 / ((1.0 - d_i) + d_i * contention / _g(k_i, s_i))


def _mig(k: Any, c: Any, m: Any, w: float) -> Any:
    return _g(k, (c / 7.0) ** (1.0 - w) * (m / 8.0) ** w)


def _err(pred: Any, meas: Any) -> float:
    return float(np.median(np.abs(np.asarray(pred) / np.asarray(meas) - 1.0)))


def _lsq(fun: Callable[[np.ndarray], np.ndarray], x0: list[float], lo: list[float],
         hi: list[float]) -> np.ndarray:  # fmt: skip
    return np.asarray(least_squares(fun, x0, bounds=(lo, hi), loss="soft_l1").x)


# -- MIG -----------------------------------------------------------------------------------------


def fit_miso(df: pd.DataFrame) -> tuple[float, dict[str, float]]:
    """Memory weight and per-model ``mig_k``."""
    models = sorted(df.model.unique())
    idx = df.model.map({m: i for i, m in enumerate(models)}).to_numpy()
    c, m, y = df.c.to_numpy(), df.m.to_numpy(), df.speed.to_numpy()

    def res(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(_mig(x[1:][idx], c, m, x[0]) / y))

    n = len(models)
    x = _lsq(res, [0.3] + [2.0] * n, [0.0] + [0.0] * n, [1.0] + [50.0] * n)
    return float(x[0]), dict(zip(models, map(float, x[1:])))


def _miso_fit_heldout(df: pd.DataFrame) -> tuple[float, float]:
    w, ks = fit_miso(df)
    fit = _err(_mig(df.model.map(ks).to_numpy(), df.c.to_numpy(), df.m.to_numpy(), w), df.speed)
    preds = np.empty(len(df))
    for model in ks:
        rows = (df.model == model).to_numpy()
        w_o, ks_o = fit_miso(df[~rows])
        sub = df[rows]
        preds[rows] = _mig(np.median(list(ks_o.values())), sub.c.to_numpy(), sub.m.to_numpy(), w_o)
    return fit, _err(preds, df.speed)


# -- MPS SM-share curve (solo) -------------------------------------------------------------------


def fit_igniter_solo(df: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Per network ``(a_ms, c_ms, sm_k)`` of ``latency = (a + c * batch) / g(sm_k, s)``."""
    out = {}
    for model, d in df.groupby("model"):
        b, s, y = d.batch.to_numpy(), d.s.to_numpy(), d.latency_ms.to_numpy()

        def res(x: np.ndarray, b: Any = b, s: Any = s, y: Any = y) -> np.ndarray:
            return np.asarray(np.log((x[0] + x[1] * b) / _g(x[2], s) / y))

        x = _lsq(res, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [100.0, 100.0, 50.0])
        out[str(model)] = (float(x[0]), float(x[1]), float(x[2]))
    return out


def fit_sm_curve(df: pd.DataFrame) -> tuple[dict[str, float], float]:
    """Per network large-batch ``sm_k`` and the global ``SM_BATCH_BETA`` of the batch-dependent
    SM-share curve ``g(sm_k (1 + beta / batch), s)``, fitted on the latency relative to each
    (model, batch)'s anchor share (what ``igniter_solo`` scores)."""
    d = df[df.s < df.anchor_s]
    models = sorted(d.model.unique())
    mi = d.model.map({m: i for i, m in enumerate(models)}).to_numpy()
    b, s, y = d.batch.to_numpy(float), d.s.to_numpy(float), d.latency_ms.to_numpy(float)
    sa, la = d.anchor_s.to_numpy(float), d.anchor_ms.to_numpy(float)
    n = len(models)

    def res(x: np.ndarray) -> np.ndarray:
        k = x[:n][mi] * (1.0 + x[n] / b)
        return np.asarray(np.log(la * _g(k, sa) / _g(k, s) / y))

    x = _lsq(res, [1.0] * n + [1.0], [0.0] * (n + 1), [50.0] * n + [100.0])
    return dict(zip(models, map(float, x[:n]))), float(x[n])


def _solo_relative(df: pd.DataFrame, ks: Any) -> tuple[np.ndarray, np.ndarray]:
    """Predicted vs measured latency below each (model, batch)'s anchor SM share."""
    rows = (df.s < df.anchor_s).to_numpy()
    d = df[rows]
    k = np.asarray(ks)[rows] if np.ndim(ks) else ks
    pred = d.anchor_ms.to_numpy() * _g(k, d.anchor_s.to_numpy()) / _g(k, d.s.to_numpy())
    return pred, d.latency_ms.to_numpy()


def _igniter_solo_fit_heldout(df: pd.DataFrame) -> tuple[float, float]:
    """Fitted and leave-one-network-out error of the batch-dependent SM-share curve (the
    held-out network takes the others' median ``sm_k`` and their refitted ``beta``)."""
    ks, beta = fit_sm_curve(df)
    mult = 1.0 + beta / df.batch.to_numpy(float)
    fit = _err(*_solo_relative(df, df.model.map(ks).to_numpy() * mult))
    held = np.empty(len(df))
    for m in ks:
        own = (df.model == m).to_numpy()
        ks_o, beta_o = fit_sm_curve(df[~own])
        k_o = float(np.median(list(ks_o.values())))
        held[own] = k_o * (1.0 + beta_o / df.batch.to_numpy(float)[own])
    held[~np.isin(df.model.to_numpy(), list(ks))] = np.nan
    return fit, _err(*_solo_relative(df, held))


# -- MPS pairs (igniter, gavel, lucid jointly) ---------------------------------------------------


@dataclass
class PairFit:
    """Jointly fitted pair-interference parameters."""

    kappa_compute: float
    kappa_bw: float
    igniter_bw: dict[str, float]
    gavel: dict[str, tuple[float, float]]  # family -> (duty, bw)
    #: The parameters of a model without its own: the medians of the others' when ``None``,
    #: else the pooled profile of :meth:`_PairArrays.population_default`.
    igniter_bw_default: float | None = None
    gavel_default: tuple[float, float] | None = None


class _PairArrays:
    """The three pair datasets as integer-coded numpy arrays (fitting calls this many times)."""

    def __init__(
        self, data: Data, solo: Mapping[str, tuple[float, float, float]], sm_beta: float = 0.0
    ) -> None:
        ip, gv, lu = data.igniter_pairs, data.gavel, data.lucid
        self.ig = sorted(solo)
        self.fams = sorted(set(gv.family) | set(gv.other_family))
        ic = {m: i for i, m in enumerate(self.ig)}
        fc = {f: i for i, f in enumerate(self.fams)}
        acks = np.array([solo[m] for m in self.ig])
        self.i_m = ip.model.map(ic).to_numpy(int)
        self.i_o = ip.other.map(ic).to_numpy(int)
        self.i_s = ip.s.to_numpy(float)
        self.i_solo = acks[self.i_m, 0] + acks[self.i_m, 1] * ip.batch.to_numpy(float)
        self.i_k = acks[self.i_m, 2] * (1.0 + sm_beta / ip.batch.to_numpy(float))
        self.i_y = ip.latency_ms.to_numpy(float)
        self.g_f = gv.family.map(fc).to_numpy(int)
        self.g_o = gv.other_family.map(fc).to_numpy(int)
        self.g_y = gv.rate.to_numpy(float)
        self.l_cols = [lu[c].to_numpy(float) for c in ("duty", "bw", "duty_o", "bw_o")]
        self.l_y = lu.speed.to_numpy(float)
        ms = mps_rows()
        self.m_cols = [ms[c].to_numpy(float) for c in ("d_i", "b_i", "d_j", "b_j", "n_j")]
        self.m_y = ms.y.to_numpy(float)
        self.names = {
            "igniter_pairs": (ip.model.to_numpy(), ip.other.to_numpy()),
            "gavel_pairs": (gv.family.to_numpy(), gv.other_family.to_numpy()),
            "lucid_pairs": (lu.model.to_numpy(), lu.other.to_numpy()),
            "mps_sharing": (ms.source.to_numpy(), ms.source.to_numpy()),
        }

    def _igniter(self, p: PairFit) -> tuple[np.ndarray, np.ndarray]:
        med_bw = (
            float(np.median(list(p.igniter_bw.values())))
            if p.igniter_bw_default is None
            else p.igniter_bw_default
        )
        bw = np.array([p.igniter_bw.get(m, med_bw) for m in self.ig])
        r = _mps_pair(1.0, self.i_s, self.i_k, bw[self.i_m], 1.0, 1.0 - self.i_s,
                      bw[self.i_o], p.kappa_compute, p.kappa_bw)  # fmt: skip
        return self.i_solo / r, self.i_y

    def _gavel(self, p: PairFit) -> tuple[np.ndarray, np.ndarray]:
        med = p.gavel_default or (
            float(np.median([v[0] for v in p.gavel.values()])),
            float(np.median([v[1] for v in p.gavel.values()])),
        )
        fam = np.array([p.gavel.get(f, med) for f in self.fams])
        rg = _mps_pair(fam[self.g_f, 0], 1.0, 0.0, fam[self.g_f, 1], fam[self.g_o, 0], 1.0,
                       fam[self.g_o, 1], p.kappa_compute, p.kappa_bw)  # fmt: skip
        return rg, self.g_y

    def preds(self, p: PairFit) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Predicted and measured values; models without parameters get population defaults
        (the medians of the others' unless ``p`` carries a pooled profile)."""
        d, b, do, bo = self.l_cols
        rl = _mps_pair(d, 1.0, 0.0, b, do, 1.0, bo, p.kappa_compute, p.kappa_bw)
        di, bi, dj, bj, nj = self.m_cols
        rm = _mps_pair(di, 1.0, 0.0, bi, nj * dj, 1.0, bj, p.kappa_compute, p.kappa_bw)
        return {
            "igniter_pairs": self._igniter(p),
            "gavel_pairs": self._gavel(p),
            "lucid_pairs": (rl, self.l_y),
            "mps_sharing": (rm, self.m_y),
        }

    def fit(self, leave_out: tuple[str, str] | None = None) -> PairFit:
        """Fit kappas, iGniter bw and Gavel (duty, bw), each dataset weighted equally.

        ``leave_out=(dataset, model)`` drops every row of that dataset the model takes part in
        and leaves the model's own parameters out of the fit.
        """
        masks = {k: np.ones(len(v[0]), bool) for k, v in self.names.items()}
        ig, fams = list(self.ig), list(self.fams)
        if leave_out is not None:
            ds, model = leave_out
            a, o = self.names[ds]
            masks[ds] = (a != model) & (o != model)
            ig = [m for m in ig if not (ds == "igniter_pairs" and m == model)]
            fams = [f for f in fams if not (ds == "gavel_pairs" and f == model)]
        ni, nf = len(ig), len(fams)

        def unpack(x: np.ndarray) -> PairFit:
            return PairFit(
                float(x[0]),
                float(x[1]),
                dict(zip(ig, map(float, x[2 : 2 + ni]))),
                {f: (float(x[2 + ni + i]), float(x[2 + ni + nf + i])) for i, f in enumerate(fams)},
            )

        def res(x: np.ndarray) -> np.ndarray:
            parts = self.preds(unpack(x))
            return np.concatenate(
                [
                    np.log(pr[masks[k]] / y[masks[k]]) / np.sqrt(masks[k].sum())
                    for k, (pr, y) in parts.items()
                ]
            )

        x0 = [0.6, 1.0] + [0.3] * ni + [0.8] * nf + [0.3] * nf
        lo = [0.0, 0.0] + [0.0] * ni + [0.05] * nf + [0.0] * nf
        hi = [5.0, 20.0] + [1.0] * ni + [1.0] * nf + [1.0] * nf
        return unpack(_lsq(res, x0, lo, hi))

    def population_default(self, p: PairFit, ds: str, keep: np.ndarray) -> PairFit:
        """``p`` with the profile of a model that has no parameters of its own fitted as one
        pooled population profile: the single value that best predicts each of the other
        models' own rows of ``ds`` (among ``keep``) when it stands in for that model's fitted
        one (its co-runners keep theirs; a model's pairs with itself are skipped), each model
        weighted equally. Unlike the median of the per-model fits, this is the profile that
        predicts a typical model best, whatever the spread and the bounds of the fitted ones
        (Gavel's: several families sit at ``bw = 1``). Only ``igniter_pairs`` and
        ``gavel_pairs`` have per-model parameters; other datasets return ``p``."""
        if ds == "igniter_pairs":
            models, x0, lo, hi = list(p.igniter_bw), [0.3], [0.0], [1.0]
            predict = self._igniter
        elif ds == "gavel_pairs":
            models, x0, lo, hi = list(p.gavel), [0.8, 0.3], [0.05, 0.0], [1.0, 1.0]
            predict = self._gavel
        else:
            return p
        a, o = self.names[ds]

        def stand_in(model: str, x: np.ndarray) -> PairFit:
            if ds == "igniter_pairs":
                return replace(p, igniter_bw={**p.igniter_bw, model: float(x[0])})
            return replace(p, gavel={**p.gavel, model: (float(x[0]), float(x[1]))})

        rows = {m: keep & (a == m) & (o != m) for m in models}

        def res(x: np.ndarray) -> np.ndarray:
            parts = []
            for m, r in rows.items():
                pred, y = predict(stand_in(m, x))
                parts.append(np.log(pred[r] / y[r]) / np.sqrt(max(int(r.sum()), 1)))
            return np.concatenate(parts)

        x = _lsq(res, x0, lo, hi)
        if ds == "igniter_pairs":
            return replace(p, igniter_bw_default=float(x[0]))
        return replace(p, gavel_default=(float(x[0]), float(x[1])))


def fit_pairs(data: Data, solo: Mapping[str, tuple[float, float, float]]) -> PairFit:
    """Fit the pair-interference parameters on all three pair datasets."""
    return _PairArrays(data, solo).fit()


def _shipped_pair_fit(arr: _PairArrays) -> PairFit:
    """The shipped pair coefficients in :class:`PairFit` form."""
    return PairFit(
        itf.KAPPA_COMPUTE,
        itf.KAPPA_BW,
        dict(IGNITER_BW),
        {f: (duty, bw) for f, (_, duty, bw) in GAVEL_FAMILIES.items()},
    )


def _pairs_heldout(arr: _PairArrays) -> dict[str, float]:
    """Leave-one-model-out for the pair datasets: the model's own rows, predicted with the
    pooled population profile of the others (:meth:`_PairArrays.population_default`; its
    co-runners keep their refitted parameters)."""
    out = {}
    for ds, (col, other) in arr.names.items():
        preds = np.full(len(col), np.nan)
        for model in sorted(set(col)):
            own = col == model
            refit = arr.fit((ds, model))
            refit = arr.population_default(refit, ds, (col != model) & (other != model))
            preds[own] = arr.preds(refit)[ds][0][own]
        out[ds] = _err(preds, arr.preds(arr.fit())[ds][1])
    return out


# ------------------------------------------------------------------------------------------------
# Shipped coefficients through the real model
# ------------------------------------------------------------------------------------------------


def _calib_profile(name: str, **kw: float) -> ModelProfile:
    base = {"duty": 1.0, "mem_gb": 1.0, "bw_intensity": MEDIAN_BW, "cpu_cores": 1.0,
            "sm_k": 0.0, "mig_k": 0.0, "batch_a_ms": 0.0, "batch_c_ms": 0.0}  # fmt: skip
    base.update(kw)
    return ModelProfile(name=name, solo_speed=MappingProxyType({V100: 1.0}), **base)


def shipped_profiles(data: Data) -> dict[str, ModelProfile]:
    """Calibration-only profiles built from the shipped constants (zoo + this module)."""
    prof: dict[str, ModelProfile] = {}
    for miso, zoo_name in MISO_TO_ZOO.items():
        prof[f"miso:{miso}"] = _calib_profile(f"miso:{miso}", mig_k=ZOO[zoo_name].mig_k)
    for net, zoo_name in IGNITER_TO_ZOO.items():
        z = ZOO[zoo_name]
        prof[f"igniter:{net}"] = _calib_profile(
            f"igniter:{net}", sm_k=z.sm_k, bw_intensity=IGNITER_BW[net],
            batch_a_ms=z.batch_a_ms, batch_c_ms=z.batch_c_ms,
        )  # fmt: skip
    for fam, (_, duty, bw) in GAVEL_FAMILIES.items():
        prof[f"gavel:{fam}"] = _calib_profile(f"gavel:{fam}", duty=duty, bw_intensity=bw)
    for i, bw in enumerate(sorted(set(data.lucid.bw) | set(data.lucid.bw_o))):
        prof[f"lucid:{bw!r}"] = _calib_profile(f"lucid:{i}", bw_intensity=float(bw))
    return prof


def shipped_errors(data: Data, model: AnalyticSpeedModel | None = None) -> dict[str, float]:
    """Median |pred/meas - 1| of the shipped coefficients, through ``AnalyticSpeedModel``."""
    sm = model or AnalyticSpeedModel(shipped_profiles(data))
    out: dict[str, float] = {}
    mig = SharingMode.MIG
    mi = data.miso
    pred = [
        sm.rates("A100-40GB", mig, [Resident(f"miso:{m}", mig_compute_slices=int(c),
                                             mig_mem_slices=int(k))])[0]
        for m, c, k in zip(mi.model, mi.c, mi.m)
    ]  # fmt: skip
    out["miso_mig"] = _err(pred, mi.speed)
    # iGniter solo: the SM-share curve relative to the (model, batch)'s largest measured share.
    so = data.igniter_solo[data.igniter_solo.s < data.igniter_solo.anchor_s]
    pred = []
    for m, b, s, sa, la in zip(so.model, so.batch, so.s, so.anchor_s, so.anchor_ms):
        k = itf.sm_share_k(sm.profile(f"igniter:{m}").sm_k, int(b), sm.sm_batch_beta)
        pred.append(la * itf.sm_share_curve(k, sa) / itf.sm_share_curve(k, s))
    out["igniter_solo"] = _err(pred, so.latency_ms)
    mps = SharingMode.MPS
    ip = data.igniter_pairs
    pred = []
    for m, o, b, s in zip(ip.model, ip.other, ip.batch, ip.s):
        r = sm.rates(V100, mps, [Resident(f"igniter:{m}", sm_frac=s, batch=int(b)),
                                 Resident(f"igniter:{o}", sm_frac=1.0 - s)])[0]  # fmt: skip
        pred.append(sm.batch_latency_ms(f"igniter:{m}", V100, int(b)) / r)
    out["igniter_pairs"] = _err(pred, ip.latency_ms)
    gv = data.gavel
    prof = sm.profiles
    pred = [
        sm.rates(V100, mps, [Resident(f"gavel:{f}", duty=prof[f"gavel:{f}"].duty),
                             Resident(f"gavel:{o}", duty=prof[f"gavel:{o}"].duty)])[0]
        for f, o in zip(gv.family, gv.other_family)
    ]  # fmt: skip
    out["gavel_pairs"] = _err(pred, gv.rate)
    lu = data.lucid
    pred = [
        sm.rates(V100, mps, [Resident(f"lucid:{b!r}", duty=d),
                             Resident(f"lucid:{bo!r}", duty=do)])[0]
        for d, b, do, bo in zip(lu.duty, lu.bw, lu.duty_o, lu.bw_o)
    ]  # fmt: skip
    out["lucid_pairs"] = _err(pred, lu.speed)
    return out


# ------------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """Errors per dataset plus the freshly fitted coefficients (to paste when re-shipping)."""

    errors: dict[str, dict[str, float]]
    fitted: dict[str, Any]

    def table(self) -> pd.DataFrame:
        """One row per dataset."""
        return pd.DataFrame(self.errors).T[
            ["n", "median_abs_rel_err", "fit_median_abs_rel_err", "heldout_median_abs_rel_err"]
        ]

    def to_json(self) -> str:
        """``{dataset: {"median_abs_rel_err", "heldout_median_abs_rel_err", "n", ...}}``."""
        return json.dumps(self.errors, indent=2, sort_keys=True)


def run(root: str | Path, *, heldout: bool = True) -> Report:
    """Read ``root``, fit, evaluate shipped and fitted coefficients, and hold models out."""
    data = load(root)
    shipped = shipped_errors(data)
    w, mig_k = fit_miso(data.miso)
    miso_fit, miso_held = _miso_fit_heldout(data.miso)
    solo = fit_igniter_solo(data.igniter_solo)
    solo_fit, solo_held = _igniter_solo_fit_heldout(data.igniter_solo)
    sm_ks, sm_beta = fit_sm_curve(data.igniter_solo)
    arr = _PairArrays(data, {m: (a, c, sm_ks[m]) for m, (a, c, _) in solo.items()}, sm_beta)
    pf = arr.fit()
    pair_fit = {k: _err(*v) for k, v in arr.preds(pf).items()}
    pair_held = _pairs_heldout(arr) if heldout else dict.fromkeys(pair_fit, np.nan)
    kappas = (pf.kappa_compute, pf.kappa_bw)
    sharing = calibration_sharing.run(kappas, heldout=heldout)
    shipped["mps_sharing"] = _err(*arr.preds(_shipped_pair_fit(arr))["mps_sharing"])
    n = {
        "miso_mig": len(data.miso),
        "mps_sharing": len(arr.m_y),
        "igniter_solo": int((data.igniter_solo.s < data.igniter_solo.anchor_s).sum()),
        "igniter_pairs": len(data.igniter_pairs),
        "gavel_pairs": len(data.gavel),
        "lucid_pairs": len(data.lucid),
    }
    fit = {"miso_mig": miso_fit, "igniter_solo": solo_fit, **pair_fit}
    held = {"miso_mig": miso_held, "igniter_solo": solo_held, **pair_held}
    errors = {
        ds: {
            "n": n[ds],
            "median_abs_rel_err": round(shipped[ds], 4),
            "fit_median_abs_rel_err": round(fit[ds], 4),
            "heldout_median_abs_rel_err": round(held[ds], 4),
        }
        for ds in (*SHARED_DATASETS, "mps_sharing")
    }
    errors.update(sharing.errors)
    lucid_gavel_ts = ts_check(
        data.lucid, data.gavel, {f: v[0] for f, v in pf.gavel.items()},
        sharing.fitted["context_switch_overhead"],
    )  # fmt: skip
    fitted = {
        "MIG_MEM_WEIGHT": round(w, 3),
        "mig_k": {k: round(v, 3) for k, v in mig_k.items()},
        "igniter_solo (a_ms, c_ms; batch-blind sm_k)": {
            k: tuple(round(x, 3) for x in v) for k, v in solo.items()
        },
        "igniter_solo sm_k (large-batch)": {k: round(v, 3) for k, v in sm_ks.items()},
        "SM_BATCH_BETA": round(sm_beta, 3),
        "KAPPA_COMPUTE": round(pf.kappa_compute, 3),
        "KAPPA_BW": round(pf.kappa_bw, 3),
        "IGNITER_BW": {k: round(v, 3) for k, v in pf.igniter_bw.items()},
        "GAVEL_FAMILIES (duty, bw)": {
            k: (round(v[0], 3), round(v[1], 3)) for k, v in pf.gavel.items()
        },
        "sharing (AnalyticSpeedModel keywords)": sharing.fitted,
        "lucid/gavel pairs as time-sliced (fitted error; MPS above)": {
            k: round(v, 3) for k, v in lucid_gavel_ts.items()
        },
    }
    return Report(errors, fitted)
