"""scripts/reproduce.py and the fidelity experiments: record fields and types, each check's
confidence interval, ``ok``, the ``verdict`` and ``holds`` recomputed from the record's own
detail and per-seed values, brackets, sweeps, parallel workers, the CLI's errors and its
outputs. Never a hard-coded simulated value: the experiments may or may not reproduce
their papers; these tests check that each record says honestly which."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from gpu_sharing_env.physics.interference import MODEL_VERSION
from gpu_sharing_env.workload import WORKLOAD_VERSION
from gpu_sharing_gym.baselines.pai import SjfPredicted
from gpu_sharing_gym.commands.reproduce import summary, table
from gpu_sharing_gym.fidelity import EXPERIMENTS, OPS, RECORD_FIELDS, RECORD_KINDS, common
from gpu_sharing_gym.fidelity.common import (
    PARAMS,
    Bracket,
    Param,
    check,
    declare_bracket,
    derive,
    record,
    register_param,
    run_experiment,
    setting,
)
from gpu_sharing_gym.fidelity.pai import PAI_QUEUEING, FifoQueue, LoadBalanceQueue, ReservePackQueue

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reproduce.py"


def _series(rec: dict[str, Any], key: str) -> list[float] | None:
    vals = rec["per_seed"].get(key)
    return None if vals is None else [math.nan if v is None else float(v) for v in vals]


def _recompute_check(rec: dict[str, Any], c: dict[str, Any]) -> bool:
    """The check's mean, 95 % Student t interval over seeds and ``ok`` from the record's own
    numbers (``docs/fidelity.md``, "How verdicts are computed")."""
    detail = rec["detail"]
    fl = c.get("floor")

    def div(a: float, b: float) -> float:  # a ratio over zero is NaN (``common.ratio``)
        if fl is not None:  # durations below the floor count as it
            a, b = max(a, fl), max(b, fl)
        return a / b if b != 0 else math.nan

    pooled = detail[c["num"]] if c["den"] is None else div(detail[c["num"]], detail[c["den"]])
    assert pooled == pytest.approx(c["pooled"], nan_ok=True)
    sn = _series(rec, c["num"])
    sd = _series(rec, c["den"]) if c["den"] is not None else None
    if sn is None and sd is None:  # pooled over seeds: the point
        value = lo = hi = pooled
        assert c["n"] is None
    else:
        k = len(rec["seeds"])
        nums = sn if sn is not None else [detail[c["num"]]] * k
        q = (
            nums
            if c["den"] is None
            else [div(a, b) for a, b in zip(nums, sd if sd is not None else [detail[c["den"]]] * k)]
        )
        x = np.array([v for v in q if math.isfinite(v)])
        assert c["n"] == x.size
        # A positive quantity is judged on the log scale (geometric mean), any other linearly.
        log = c["bound"] > 0 and bool(np.all(x > 0))
        assert c["scale"] == ("log" if log else "linear")
        y = np.log(x) if log else x
        mean = float(y.mean()) if x.size else math.nan
        half = (
            stats.t.ppf(0.975, x.size - 1) * y.std(ddof=1) / math.sqrt(x.size) if x.size > 1 else 0
        )
        back = np.exp if log else float
        value, lo, hi = back(mean), back(mean - half), back(mean + half)
    assert value == pytest.approx(c["value"], nan_ok=True)
    assert [lo, hi] == pytest.approx(c["ci"], nan_ok=True)
    edge = lo if c["op"] in (">", ">=") else hi
    passed = math.isfinite(lo) and math.isfinite(hi) and OPS[c["op"]](edge, c["bound"])
    passed = passed and (c["n"] is None or c["n"] == len(rec["seeds"]))  # no seed left out
    assert passed == c["ok"]
    return passed


def _recompute(rec: dict[str, Any]) -> bool:
    """``holds`` and ``verdict`` from the checks (and the bracket's ends, if any)."""
    central = all([_recompute_check(rec, c) for c in rec["checks"]])
    b = rec.get("bracket")
    if b is None:
        verdict = "holds" if central else "does not hold"
    else:
        ends = [all(c["ok"] for c in b["ends"][e]["checks"]) for e in ("low", "high")]
        verdict = (
            "does not hold" if not central else "holds" if all(ends) else f"depends on {b['param']}"
        )
    assert rec["verdict"] == verdict
    # A record's bands are its checks' (paper figure, our interval, overlap), recomputed.
    rows = [c for c in rec["checks"] if "paper_band" in c]
    for c in rows:
        lo, hi = c["ci"]
        b_lo, b_hi = c["paper_band"]["low"], c["paper_band"]["high"]
        over = math.isfinite(lo) and math.isfinite(hi)
        over = over and (b_lo is None or hi >= b_lo) and (b_hi is None or lo <= b_hi)
        assert c["in_band"] == over
    assert [r["check"] for r in rec["paper_band"]] == [c["name"] for c in rows]
    assert rec["in_band"] == (all(c["in_band"] for c in rows) if rows else None)
    return verdict == "holds"


@pytest.fixture(scope="module")
def records() -> dict[str, dict[str, Any]]:
    return {exp_id: run_experiment(exp_id, fn, [0], True) for exp_id, fn in EXPERIMENTS.items()}


def test_registry_covers_the_issue() -> None:
    assert set(EXPERIMENTS) >= {
        "muxflow-online",
        "muxflow-offline",
        "muxflow-ablation",
        "muxflow-errors",
        "pai-reserve-pack",
        "pai-sjf",
        "gpupool-stp",
        "horus",
        "gpulet",
    }


@pytest.mark.parametrize("exp_id", list(EXPERIMENTS))
def test_record_fields_and_direction(records: dict[str, dict[str, Any]], exp_id: str) -> None:
    rec = records[exp_id]
    assert set(RECORD_FIELDS) <= set(rec)
    assert rec["id"] == exp_id
    for key in ("paper", "claim", "paper_value", "sim_value"):
        assert isinstance(rec[key], str) and rec[key]
    assert isinstance(rec["holds"], bool)
    assert rec["verdict"] in common.VERDICTS or rec["verdict"].startswith("depends on ")
    assert rec["checks"] and rec["seeds"] == [0]
    assert rec["model_version"] == MODEL_VERSION and rec["workload_version"] == WORKLOAD_VERSION
    assert all(isinstance(v, float) for v in rec["detail"].values())
    assert all(len(v) == 1 for v in rec["per_seed"].values())
    # Every number a check reads is in the detail or per_seed; intervals and verdict recompute.
    assert rec["holds"] == _recompute(rec)


def test_experiments_are_seeded(records: dict[str, dict[str, Any]]) -> None:
    again = EXPERIMENTS["horus"]([0], True)
    assert again["detail"] == records["horus"]["detail"]


def test_records_say_what_kind_of_check_they_are(records: dict[str, dict[str, Any]]) -> None:
    # muxflow-errors takes the paper's cause mix as its input: a mechanism check, and says so.
    assert records["muxflow-errors"]["kind"] == "mechanism"
    assert {r["kind"] for i, r in records.items() if i != "muxflow-errors"} == {"claim"}
    assert set(RECORD_KINDS) == {"claim", "mechanism"}
    rows = table([records["muxflow-errors"], records["gpulet"]]).splitlines()
    assert rows[0].startswith("| id | kind |") and "| verdict |" in rows[0]
    assert rows[2].startswith("| `muxflow-errors` | mechanism |")
    assert "(mechanism check)" in rows[2]
    assert rows[3].startswith("| `gpulet` | claim |")


def test_muxflow_errors_draws_fault_causes_per_fault(records: dict[str, dict[str, Any]]) -> None:
    d = records["muxflow-errors"]["detail"]
    # Causes are drawn per fault from the paper's mix: the realised counts are in the record,
    # mostly user signals but not a fixed ratio, and mixed handling stops exactly those.
    signal = d["with.f_faults_user_signal_sum"]
    other = d["with.f_faults_app_error_sum"] + d["with.f_faults_xid_sum"]
    assert signal > 0 and d["with.realised_user_signal_share"] == signal / (signal + other)
    assert d["with.f_propagated_user_signal_sum"] == 0.0
    assert d["without.f_propagated_user_signal_sum"] > 0.0
    share = d["with.realised_user_signal_share"]
    if share < 1.0:
        assert d["expected_log10_reduction"] == pytest.approx(-math.log10(1.0 - share))
    else:  # every realised fault a user signal: mixed handling stops all, no finite ratio
        assert math.isnan(d["expected_log10_reduction"])


def test_a_check_over_zero_fails_instead_of_raising() -> None:
    c = check("x", {"a": 1.0, "b": 0.0}, "a", ">", 1.0, "b")
    assert math.isnan(c["value"]) and c["ok"] is False


def test_pai_experiments_schedule_the_whole_queue(records: dict[str, dict[str, Any]]) -> None:
    # PAI's scheduler and simulator see every queued task, not an env's queue window.
    for policy in (ReservePackQueue, LoadBalanceQueue, FifoQueue, SjfPredicted):
        assert policy.decision_scope == "queue"
    d = records["pai-reserve-pack"]["detail"]
    # PAI's published queueing statistics sit beside the simulated ones.
    for k in PAI_QUEUEING:
        assert d[f"pai.{k}"] == PAI_QUEUEING[k] and f"reserve_pack.{k}" in d


def test_muxflow_ablation_runs_on_diverse_offline_jobs() -> None:
    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.physics.zoo import ZOO
    from gpu_sharing_gym.fidelity.muxflow import _arms

    cfg = load_scenario("fidelity/muxflow-ablation")
    mix = cfg.workload.offline.params["model_mix"]
    bw = [ZOO[m].bw_intensity for m in mix]
    duty = [ZOO[m].duty for m in mix]
    assert len(mix) >= 6 and max(bw) - min(bw) > 0.9 and max(duty) - min(duty) > 0.8
    arms = _arms(True, ["muxflow", "muxflow_m"], "muxflow-ablation")
    assert {a.cfg.name for a in arms} == {"muxflow-ablation"}


def test_unknown_experiment_is_one_line_error(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--experiment", "nope", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "unknown experiment 'nope'" in proc.stderr and "muxflow-online" in proc.stderr
    assert not out.exists()


def test_cli_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--experiment",
            "gpulet,horus",
            "--quick",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    recs = json.loads(out.read_text())
    assert [r["id"] for r in recs] == ["gpulet", "horus"]
    for r in recs:
        assert set(RECORD_FIELDS) <= set(r)
    assert "| `gpulet` |" in proc.stdout
    assert not list(out.parent.glob("*.tmp"))


def test_checks_judge_the_interval_over_paired_seeds() -> None:
    # Seed 0 and 1 of two arms: ratios 1.2 and 1.4, t(0.975, 1) = 12.71: the interval (log
    # scale, around the geometric mean) straddles 1, so the check fails though the mean is
    # above the bound.
    d = {"a.x": 1.3, "a.x@0": 1.2, "a.x@1": 1.4, "b.x": 1.0, "b.x@0": 1.0, "b.x@1": 1.0}
    c = check("r", d, "a.x", ">", 1.0, "b.x")
    logs = np.log([1.2, 1.4])
    half = stats.t.ppf(0.975, 1) * np.std(logs, ddof=1) / math.sqrt(2)
    assert c["value"] == pytest.approx(math.sqrt(1.2 * 1.4)) and c["n"] == 2
    assert c["ci"] == pytest.approx(list(np.exp([logs.mean() - half, logs.mean() + half])))
    assert c["scale"] == "log" and c["point_ok"] and not c["ok"]
    # The log scale makes A/B > 1 and B/A < 1 the same verdict, with mirrored intervals.
    d2 = {"a.x": 1.3, "a.x@0": 1.29, "a.x@1": 1.31, "b.x": 1.0, "b.x@0": 1.0, "b.x@1": 1.0}
    ab, ba = check("r", d2, "a.x", ">", 1.0, "b.x"), check("r", d2, "b.x", "<", 1.0, "a.x")
    assert ab["ok"] and ba["ok"] and ab["ci"] == pytest.approx([1 / x for x in ba["ci"][::-1]])
    # An upper bound reads the interval's high end.
    assert not check("r", d2, "a.x", "<", 1.305)["ok"]
    # A quantity that is not positive is judged linearly.
    d3 = {"y": 0.0, "y@0": -1.0, "y@1": 1.0}
    c3 = check("r", d3, "y", "<", 5.0)
    assert c3["scale"] == "linear" and c3["value"] == 0.0 and not c3["ok"]
    # A quantity with no per-seed values (pooled over seeds) is judged at its point.
    c4 = check("s", {"x_sum": 0.0}, "x_sum", "<=", 0.0)
    assert c4["ok"] and c4["n"] is None and c4["ci"] == [0.0, 0.0] and c4["scale"] == "point"


def test_derive_keeps_per_seed_values() -> None:
    d = {"a": 2.0, "a@0": 1.0, "a@1": 3.0, "k": 10.0}
    assert derive(d, "y", lambda a, k: a * k, "a", "k") == 20.0
    assert (d["y@0"], d["y@1"]) == (10.0, 30.0)
    rec = record("x", "p", "c", "v", [check("y", d, "y", ">", 0.0)], d, [0, 1], 0.0)
    assert rec["per_seed"]["y"] == [10.0, 30.0] and "y@0" not in rec["detail"]


@pytest.fixture
def toy_param() -> Any:
    """A parameter ``toy`` and an experiment whose effect is the parameter's value (with a
    small spread over seeds), so the bracket's verdicts can be steered."""
    register_param(Param("toy", "test parameter", experiments=frozenset({"toy"})))

    def fn(seeds: Any, quick: bool) -> dict[str, Any]:
        v = float(setting("toy", 1.0))
        d: dict[str, float] = {"arm.x": v, "one": 1.0}
        d.update({f"arm.x@{s}": v + 0.001 * (s - 0.5) for s in seeds})
        return record("toy", "p", "c", "v", [check("x", d, "arm.x", ">", 1.0)], d, seeds, 0.0)

    yield fn
    PARAMS.pop("toy")
    common.BRACKETS.pop("toy", None)


@pytest.mark.parametrize(
    ("low", "central", "high", "verdict"),
    [
        (1.5, 2.0, 2.5, "holds"),
        (0.5, 2.0, 2.5, "depends on toy"),
        (0.5, 0.8, 2.5, "does not hold"),
    ],
)
def test_bracketed_claims(
    toy_param: Any, low: float, central: float, high: float, verdict: str
) -> None:
    declare_bracket("toy", Bracket("toy", low, central, high, "test"))
    rec = run_experiment("toy", toy_param, [0, 1], True)
    # Only a plain "holds" counts: a claim that needs the central value is not reproduced.
    assert rec["verdict"] == verdict and rec["holds"] == (verdict == "holds")
    assert rec["settings"] == {"toy": central}
    assert set(rec["bracket"]["ends"]) == {"low", "high"} and rec["bracket"]["source"] == "test"
    assert rec["holds"] == _recompute(rec)


def test_parallel_workers_give_the_sequential_numbers() -> None:
    one = run_experiment("horus", EXPERIMENTS["horus"], [0, 1], True, workers=1)
    two = run_experiment("horus", EXPERIMENTS["horus"], [0, 1], True, workers=2)
    assert one["detail"] == two["detail"] and one["per_seed"] == two["per_seed"]
    assert one["checks"] == two["checks"]
    assert one["holds"] == _recompute(one)


def test_sweep_writes_json_csv_png(tmp_path: Path) -> None:
    prefix = tmp_path / "sw"
    proc = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--experiment", "horus", "--quick", "--quiet"),
            *("--sweep", "load=0.5:1:2", "--out", str(prefix)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "sw.json").read_text())
    assert doc["param"] == "load" and [p["value"] for p in doc["points"]] == [0.5, 1.0]
    names = [c["name"] for c in doc["points"][0]["checks"]]
    rows = (tmp_path / "sw.csv").read_text().splitlines()
    assert rows[0].startswith("load,check,") and len(rows) == 1 + 2 * len(names)
    assert (tmp_path / "sw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--experiment", "gpulet", "--sweep", "load=1:2:3"], "unknown parameter 'load'"),
        (["--experiment", "horus", "--sweep", "nope=1:2:3"], "(known: load)"),
        (["--experiment", "horus", "--sweep", "load=1:2"], "expected NAME=LO:HI:N"),
        (["--experiment", "all", "--sweep", "load=1:2:3"], "name one --experiment"),
    ],
)
def test_bad_sweep_is_one_line_error(tmp_path: Path, args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(tmp_path / "sw")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert not list(tmp_path.iterdir())


def test_a_floor_reads_a_zero_wait_as_the_resolution() -> None:
    """A queueing delay of 0 s under arm b is its best case, not a NaN: with ``floor`` (the
    trace's 1 s resolution) the seed's ratio is a / 1 s, and a seed where neither waits is 1."""
    from gpu_sharing_gym.fidelity.common import SEED_SEP

    a, b = [300.0, 50.0, 0.0, 120.0], [100.0, 0.0, 0.0, 60.0]
    d = {"a.w": float(np.mean(a)), "b.w": float(np.mean(b))}
    d.update({f"a.w{SEED_SEP}{s}": v for s, v in enumerate(a)})
    d.update({f"b.w{SEED_SEP}{s}": v for s, v in enumerate(b)})
    plain = check("r", d, "a.w", ">", 1.0, "b.w")
    assert plain["n"] == 2 and not plain["ok"]  # seeds 1 and 2 have no ratio: the check fails
    c = check("r", d, "a.w", ">", 1.0, "b.w", floor=1.0)
    assert c["n"] == 4 and c["floor"] == 1.0
    assert c["value"] == pytest.approx(float(np.exp(np.mean(np.log([3.0, 50.0, 1.0, 2.0])))))
    # the floor only touches the two arms' values, never the caller's detail
    assert d["b.w@1"] == 0.0


def test_a_seed_without_a_value_fails_the_check() -> None:
    """A NaN seed (a ratio over zero) is not dropped from the interval: the check fails."""
    from gpu_sharing_gym.fidelity.common import SEED_SEP

    d = {"a.x": 1.5, **{f"a.x{SEED_SEP}{s}": v for s, v in enumerate([1.3, 1.4, math.nan])}}
    c = check("r", d, "a.x", ">", 1.0)
    assert c["n"] == 2 and c["point_ok"] and not c["ok"]
    d[f"a.x{SEED_SEP}2"] = 1.35
    assert check("r", d, "a.x", ">", 1.0)["ok"]


def test_a_band_is_the_papers_figure_beside_the_interval() -> None:
    """``paper_band``: the published figure; ``in_band`` when the interval overlaps it, one
    side open for an "up to" figure; the record collects every check's band."""
    from gpu_sharing_gym.fidelity.common import SEED_SEP

    d = {"a.x": 1.3, **{f"a.x{SEED_SEP}{s}": v for s, v in enumerate([1.25, 1.3, 1.35])}}
    inside = check("in", d, "a.x", ">", 1.0, band=(1.1, 2.24))
    above = check("above", d, "a.x", ">", 1.0, band=(1.5, 1.6))
    open_low = check("up to", d, "a.x", ">", 1.0, band=(None, 1.26))
    assert inside["in_band"] and not above["in_band"] and open_low["in_band"]
    # an "up to 3x" gain runs from no effect (1) to 3x: an effect the other way is not in it
    d_low = {"b.x": 0.3, **{f"b.x{SEED_SEP}{s}": v for s, v in enumerate([0.25, 0.3, 0.35])}}
    assert not check("wrong way", d_low, "b.x", ">", 1.0, band=(1.0, 3.0))["in_band"]
    assert above["paper_band"] == {"low": 1.5, "high": 1.6}
    assert above["ok"]  # the direction holds while the magnitude misses the paper's
    rec = record(
        "x", "p", "c", "v", [inside, check("no figure", d, "a.x", ">", 1.0)], d, [0, 1, 2], 0.0
    )
    assert rec["in_band"] is True and [r["check"] for r in rec["paper_band"]] == ["in"]
    rec2 = record("x", "p", "c", "v", [inside, above], d, [0, 1, 2], 0.0)
    assert rec2["in_band"] is False
    assert (
        record("x", "p", "c", "v", [check("n", d, "a.x", ">", 1.0)], d, [0], 0.0)["in_band"] is None
    )


def test_table_and_summary_count_plain_holds_and_bands() -> None:
    from gpu_sharing_gym.fidelity.common import SEED_SEP

    d = {"a.x": 1.3, **{f"a.x{SEED_SEP}{s}": v for s, v in enumerate([1.25, 1.3, 1.35])}}
    fig = record(
        "f", "p", "c", "v", [check("x", d, "a.x", ">", 1.0, band=(1.1, 2.0))], d, [0, 1, 2], 0.0
    )
    miss = record(
        "m", "p", "c", "v", [check("x", d, "a.x", ">", 1.0, band=(2.0, 3.0))], d, [0, 1, 2], 0.0
    )
    none = record("n", "p", "c", "v", [check("x", d, "a.x", ">", 2.0)], d, [0, 1, 2], 0.0)
    dep = {**fig, "verdict": "depends on kp_level", "holds": False}
    rows = table([fig, miss, none, dep]).splitlines()
    assert "| in band |" in rows[0]
    assert "| yes (1/1) |" in rows[2] and "| no (0/1) |" in rows[3] and "| - |" in rows[4]
    assert "**depends on kp_level**" in rows[5]
    assert (
        summary([fig, miss, none, dep])
        == "2 of 4 hold; 2 of 3 records with a published figure in band"
    )


def test_a_printed_figure_stands_for_the_values_that_round_to_it() -> None:
    """``published``: a band at the figure's printed precision (half a unit of its last digit
    on each side); the reduction and increase bands follow (PAI's "45 %": 1.802-1.835)."""
    from gpu_sharing_gym.fidelity.common import increase_band, published, reduction_band
    from gpu_sharing_gym.fidelity.pai import RP_OVERALL_BAND

    assert published("45") == pytest.approx((44.5, 45.5))
    assert published("1.10", "2.24") == pytest.approx((1.095, 2.245))
    assert published("23.7", "30.7") == pytest.approx((23.65, 30.75))
    assert reduction_band("45") == pytest.approx((1 / 0.555, 1 / 0.545))
    assert reduction_band("45") == RP_OVERALL_BAND
    assert increase_band("32", "61.5") == pytest.approx((1.315, 1.6155))
    lo, hi = reduction_band("45")
    assert lo < 1 / 0.55 < hi  # the point the paper prints lies inside its band
