"""The online duration predictor (PAI's CART) learns only from finished runs.

The "no leak" tests perturb the hidden truth: every run not finished by a time ``T`` is made
longer (its true ``work_s`` x a random factor in [1.5, 3]); up to ``T`` nothing a scheduler may
see changes, so every estimate, every policy decision and every observation before ``T`` must be
bit-identical. A policy, an observation or an estimate that read ``work_s`` of an unfinished job
would differ. (Longer only: a shorter run could really finish before ``T``.)
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs import gpu_sharing
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy, policy_names
from gpu_sharing_env.sim.build import ScenarioJobs, ScenarioWorkload, build_nodes, make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.workload.job import JobKind, JobSpec
from gpu_sharing_env.workload.predictor import (
    _FITS,
    INPUTS,
    OnlinePredictor,
    PredictorConfig,
    RunLog,
    audit_estimates,
)
from gpu_sharing_env.workload.synthetic import SyntheticWorkloadConfig, generate_workload


def _job(jid: int, group: str, work: float, user: str = "u0", gpus: float = 1.0) -> JobSpec:
    frac = gpus if gpus < 1 else 1.0
    return JobSpec(
        job_id=jid,
        kind=JobKind.OFFLINE,
        model="resnet50",
        submit_s=0.0,
        num_gpus=1 if gpus < 1 else int(gpus),
        gpu_frac=frac,
        mem_gb=4.0,
        cpu_cores=4.0,
        work_s=work,
        est_work_s=work,
        group=group,
        user=user,
    )


# ------------------------------------------------------------------------------ the predictor
def test_cold_start_is_the_prior_and_exact_mode_is_the_truth() -> None:
    p = OnlinePredictor(PredictorConfig(prior_work_s=500.0))
    assert p.estimate(_job(0, "g", 80.0), 0.0) == pytest.approx(500.0)
    assert OnlinePredictor(PredictorConfig(), exact=True).estimate(_job(1, "g", 80.0), 0.0) == 80.0


def test_estimate_never_reads_the_jobs_own_duration() -> None:
    p = OnlinePredictor(PredictorConfig(refit_every=1))
    for i in range(20):
        a = bool(i % 2)
        p.observe(_job(i, "a" if a else "b", 100.0 if a else 5000.0, "ua" if a else "ub"), i)
    e1 = p.estimate(_job(100, "a", 100.0, "ua"), 1.0)
    e2 = p.estimate(_job(101, "a", 1e6, "ua"), 1.0)  # the same submission, another truth
    assert e1 == e2
    assert e1 == pytest.approx(100.0, rel=0.05)  # learnt from group a's finished runs


def test_a_group_is_learnt_from_its_finished_runs() -> None:
    # 30 groups of distinct run times, 10 finished runs each: a new run of a known group is
    # estimated within the group's spread; an unknown group gets a coarse (user/request) guess.
    rng = np.random.default_rng(0)
    base = np.exp(rng.uniform(np.log(30), np.log(30_000), 30))
    p = OnlinePredictor(PredictorConfig(refit_every=10))
    jid = 0
    for _ in range(10):
        for g in range(30):
            p.observe(_job(jid, f"g{g}", base[g] * math.exp(0.1 * rng.standard_normal())), jid)
            jid += 1
    err = [abs(math.log(p.estimate(_job(999, f"g{g}", 1.0), 0.0) / base[g])) for g in range(30)]
    assert float(np.median(err)) < 0.35
    assert p.n_fits == 30  # every 10 runs (no fit without rows)


def test_refits_are_deterministic_and_match_the_cadence() -> None:
    w = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(3), 4 * 3600.0)
    a = OnlinePredictor(PredictorConfig(refit_every=7), w.history)
    b = OnlinePredictor(PredictorConfig(refit_every=7), w.history)
    for i, j in enumerate(w.jobs[:21]):
        assert a.observe(j, i) == ((i + 1) % 7 == 0)
        b.observe(j, i)
    assert [a.estimate(j, 9.0) for j in w.jobs] == [b.estimate(j, 9.0) for j in w.jobs]


def test_warm_start_uses_only_runs_finished_by_time_zero() -> None:
    h = RunLog(
        group=["g", "g", "g"],
        user=["u", "u", "u"],
        gpus=np.ones(3),
        work_s=np.array([100.0, 100.0, 1e6]),
        submit_s=np.array([-500.0, -300.0, -200.0]),  # the last one is still running at 0
    )
    p = OnlinePredictor(PredictorConfig(), h)
    assert p._hist_y.size == 2  # the warm start holds the two finished runs
    assert p.group_stats(_job(0, "g", 1.0), 0.0).runs_seen == 2
    st = p.group_stats(_job(0, "g", 1.0), 0.0)
    assert st.period_s == pytest.approx(150.0)  # submissions -500, -300, -200 (all seen)
    assert st.last_submit_s == -200.0


def test_input_sets_order_the_error_as_pai_fig12() -> None:
    # user + request alone is coarse; the group tag cuts the error (PAI Fig. 12).
    cfg = SyntheticWorkloadConfig(arrivals_per_h=40.0)
    w = generate_workload(cfg, np.random.default_rng(1), 24 * 3600.0)
    rec = [j for j in w.jobs if j.group]
    errs = {}
    for inputs in (("user", "request"), ("group", "user", "request")):
        p = OnlinePredictor(PredictorConfig(inputs=inputs), w.history)
        errs[inputs] = float(np.median([abs(math.log(p.estimate(j, 0.0) / j.work_s)) for j in rec]))
    assert errs[("group", "user", "request")] < 0.5 * errs[("user", "request")]


def test_audit_counts_estimates_that_used_unfinished_runs() -> None:
    finish = {1: 10.0, 2: 20.0}  # job 3 never finished
    made = {
        7: (15.0, 1),  # used run 1 (finished at 10): fine
        8: (15.0, 2),  # used runs 1, 2; 2 finished at 20 > 15: leaky
        9: (30.0, 3),  # used run 3, which never finished: leaky
        10: (0.0, 0),  # used no episode run: fine
    }
    a = audit_estimates(made, [1, 2, 3], finish)
    assert (a.checked, a.leaky, a.leaky_ids) == (4, 2, [8, 9])


def _features_by_formula(p: OnlinePredictor, group: str, user: str, r: float) -> list[float]:
    """The encoding as the module docstring states it, tag by tag."""
    n_all = len(p._rows_y) + p._hist_y.size
    mean = p._sum / n_all if n_all else 0.0
    x: list[float] = []
    for use, key, table in ((p._use_g, group, p._g), (p._use_u, user, p._u)):
        if use:
            n, s = table[key][:2] if key and key in table else (0.0, 0.0)
            x += [s / n if n > 0 else mean, math.log1p(n)]
    return [*x, r] if p._use_r else x


@pytest.mark.parametrize("inputs", [INPUTS, ("group",), ("user", "request"), ("request",)])
def test_features_are_the_ordered_statistics_of_each_tag(inputs: tuple[str, ...]) -> None:
    w = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(5), 6 * 3600.0)
    p = OnlinePredictor(PredictorConfig(inputs=inputs, refit_every=10**6), w.history)
    rng = np.random.default_rng(6)
    tags = [j.group for j in w.jobs[:40]] + [j.user for j in w.jobs[:40]] + ["", "nobody"]
    for i, j in enumerate(w.jobs[:300]):
        for _ in range(3):
            g, u = (tags[int(k)] for k in rng.integers(0, len(tags), 2))
            r = float(rng.normal())
            assert p._features(g, u, r) == _features_by_formula(p, g, u, r)
        p.observe(j, i)


@pytest.mark.parametrize(
    "cfg,exact",
    [(PredictorConfig(refit_every=40), False), (PredictorConfig(inputs=()), False),
     (PredictorConfig(), True)],
)  # fmt: skip
def test_estimate_many_is_estimate_of_each(cfg: PredictorConfig, exact: bool) -> None:
    # a queue's re-estimation asks for many at one instant: the same floats and records as
    # one estimate per spec in turn (a tree's, the fallback without one, the oracle's)
    w = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(8), 8 * 3600.0)
    p = OnlinePredictor(cfg, w.history, exact=exact)
    rng = np.random.default_rng(9)
    for step in range(6):
        for i, j in enumerate(w.jobs[step * 30 : (step + 1) * 30]):
            p.observe(j, step * 30 + i)
        specs = [w.jobs[int(k)] for k in rng.integers(0, len(w.jobs), 200)]
        specs += [replace(specs[0], job_id=10**6 + step, group="", user="")]
        q = copy.deepcopy(p)
        now = 100.0 * step
        got = p.estimate_many(specs, now)
        assert got == [q.estimate(s, now) for s in specs]
        assert list(p.made.items()) == list(q.made.items())


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="inputs"):
        PredictorConfig(inputs=("model",))
    with pytest.raises(ValueError, match="refit_every"):
        PredictorConfig(refit_every=0)


def test_fast_fit_is_sklearns_checked_fit_and_repeats_reuse_the_tree() -> None:
    # ``_fit_tree`` skips sklearn's input check (float32 X built here) and memoises by the
    # training rows: the tree must be the one a plain checked fit on float64 rows gives.
    from sklearn.tree import DecisionTreeRegressor

    w = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(4), 12 * 3600.0)
    _FITS.clear()
    q = OnlinePredictor(PredictorConfig(refit_every=50), w.history)
    for i, j in enumerate(w.jobs[:50]):
        q.observe(j, i)  # one refit: the history's latest 950 rows + 50 episode rows
    # the episode rows' float64 features, as ``_add`` computes them (the same runs in order)
    e = OnlinePredictor(PredictorConfig(refit_every=10**6), w.history)
    rows64 = []
    for i, j in enumerate(w.jobs[:50]):
        rows64.append(e._features(j.group, j.user, math.log2(max(j.num_gpus * j.gpu_frac, 1e-3))))
        e.observe(j, i)
    x64 = np.vstack([q._hist_x[-950:], np.array(rows64)])
    assert np.array_equal(q.training_set()[0], x64.astype(np.float32))
    y = np.concatenate([q._hist_y[-950:], q._rows_y])
    ref = DecisionTreeRegressor(criterion="absolute_error", max_leaf_nodes=11, random_state=0)
    t = ref.fit(x64, y).tree_
    fit = q._fit
    assert fit is not None and len(_FITS) == 1
    assert fit.feature == t.feature.tolist() and fit.threshold == t.threshold.tolist()
    assert fit.left == t.children_left.tolist() and fit.value == t.value[:, 0, 0].tolist()
    r = OnlinePredictor(PredictorConfig(refit_every=50), w.history)
    for i, j in enumerate(w.jobs[:50]):
        r.observe(j, i)
    assert r._fit is fit and len(_FITS) == 1  # the same rows: the same tree, not refitted
    assert r.n_fits == q.n_fits == 1


def test_group_stats_see_history_then_episode_submissions_in_order() -> None:
    # Submissions are indexed when first asked for (lazily): before and after that, and in a
    # copy made before it, the same times in the same order.
    h = RunLog(
        ["g", "g", ""],
        ["u", "u", "u"],
        np.ones(3),
        np.full(3, 10.0),
        np.array([-90.0, -30.0, -60.0]),
    )
    p = OnlinePredictor(PredictorConfig(), h)
    p.note_submit(_job(0, "g", 1.0), 5.0)
    c = copy.deepcopy(p)
    assert p.group_stats(_job(1, "g", 1.0), 6.0).period_s == pytest.approx(47.5)  # 60, 35
    p.note_submit(_job(2, "g", 1.0), 50.0)
    st = p.group_stats(_job(3, "g", 1.0), 60.0)
    assert (st.last_submit_s, st.period_s) == (50.0, pytest.approx(45.0))  # 60, 35, 45
    c.note_submit(_job(2, "g", 1.0), 50.0)
    assert c.group_stats(_job(3, "g", 1.0), 60.0) == st


# ------------------------------------------------------------------------ in the simulator
class _Log(SimObserver):
    """Per start (a decision that placed a job): when, what, and every estimate in force."""

    def __init__(self) -> None:
        self.starts: list[tuple[Any, ...]] = []

    def on_start(self, sim: Simulator, job_id: int, gpus: list[int], option: int) -> None:
        est = tuple(
            (j, st.spec.est_work_s)
            for j, st in sorted(sim.jobs.items())
            if not st.online and st.status is not Status.FUTURE
        )
        self.starts.append((sim.now, job_id, tuple(gpus), option, est))


def _lengthened(wl: ScenarioWorkload, unfinished: set[int], seed: int) -> Any:
    """``wl`` with the true run time of each job in ``unfinished`` made 1.5-3x longer."""

    def draw(rng: np.random.Generator) -> ScenarioJobs:
        jobs = wl(rng)
        f = np.random.default_rng(seed).uniform(1.5, 3.0, size=len(jobs))
        out = ScenarioJobs(
            replace(j, work_s=j.work_s * float(f[i])) if j.job_id in unfinished else j
            for i, j in enumerate(jobs)
        )
        out.predictor, out.drawn = jobs.predictor, jobs.drawn
        return out

    return draw


def _cut(sim: Simulator) -> tuple[float, set[int]]:
    """A time in the middle of the episode and the offline jobs unfinished then."""
    done = sorted(st.ledger.finish_t for st in sim.jobs.values() if st.status is Status.DONE)
    t = done[len(done) // 2]
    return t, {j for j, st in sim.jobs.items() if not st.online and not (st.ledger.finish_t <= t)}


def _before(log: _Log, t: float) -> list[tuple[Any, ...]]:
    return [s for s in log.starts if s[0] < t]


HEURISTICS = [p for p in policy_names("policy")]


@pytest.mark.parametrize("scenario", ["default", "pai-hetero"])
def test_no_policy_and_no_estimate_reads_an_unfinished_runs_duration(scenario: str) -> None:
    cfg = load_scenario(scenario)
    if scenario == "pai-hetero":
        cfg = replace(
            cfg, workload=replace(cfg.workload, offline=replace(cfg.workload.offline, max_jobs=150))
        )
    seed = 4
    for name in HEURISTICS:
        a = make_simulator(cfg)
        log_a = _Log()
        a.add_observer(log_a)
        run_episode(make_policy(name), a, seed)
        t, unfinished = _cut(a)
        assert unfinished and len(_before(log_a, t)) > 3, name
        b = Simulator(cfg, build_nodes(cfg), _lengthened(a.workload, unfinished, seed))
        log_b = _Log()
        b.add_observer(log_b)
        run_episode(make_policy(name), b, seed)
        # the truth did change: the unfinished runs take longer
        assert any(b.jobs[j].spec.work_s != a.jobs[j].spec.work_s for j in unfinished)
        assert _before(log_b, t) == _before(log_a, t), name


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [("GpuSharing-v0", {}), ("GpuSharing-v1", {}), ("GpuSharing-v1", {"job_history": True})],
)
def test_no_observation_reads_an_unfinished_runs_duration(
    env_id: str, kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def rollout(workload: Any = None) -> tuple[list[tuple[float, dict[str, np.ndarray]]], Any]:
        if workload is not None:  # the env builds its simulator with this workload
            monkeypatch.setattr(
                gpu_sharing,
                "make_simulator",
                lambda cfg, speed=None: Simulator(cfg, build_nodes(cfg), workload, speed=speed),
            )
        env = gym.make(env_id, scenario="default", **kwargs)
        sim = env.unwrapped.sim  # type: ignore[attr-defined]
        obs, info = env.reset(seed=11)
        rng = np.random.default_rng(0)
        out = [(sim.now, obs)]
        done = False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            obs, _, term, trunc, info = env.step(int(rng.choice(legal)))
            out.append((sim.now, obs))
            done = term or trunc
        return out, sim

    obs_a, sim_a = rollout()
    t, unfinished = _cut(sim_a)
    obs_b, _ = rollout(_lengthened(sim_a.workload, unfinished, 11))
    before_a = [o for o in obs_a if o[0] < t]
    before_b = [o for o in obs_b if o[0] < t]
    assert len(before_a) > 5 and len(before_a) == len(before_b)
    for (ta, oa), (tb, ob) in zip(before_a, before_b, strict=True):
        assert ta == tb
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k], err_msg=f"{env_id} {k} at t={ta}")


def test_leaky_estimates_zero_and_estimates_follow_the_history() -> None:
    sim = make_simulator(load_scenario("default"))
    run_episode(make_policy("first_fit"), sim, 0)
    pred = sim.predictor
    assert pred is not None and not pred.exact
    finish = {j: st.ledger.finish_t for j, st in sim.jobs.items() if st.status is Status.DONE}
    audit = audit_estimates(pred.made, pred.observed, finish)
    offline = [st for st in sim.jobs.values() if not st.online]
    assert audit.checked >= len(offline) - 2 and audit.leaky == 0
    # every finished offline run was handed over, in completion order
    done = sorted(
        (st.ledger.finish_t, j) for j, st in sim.jobs.items() if j in finish and not st.online
    )
    assert pred.observed == [j for _, j in done]


def test_history_observation_is_the_views_group_stats() -> None:
    from gpu_sharing_env.envs.observation_v1 import HISTORY_FEATURES
    from gpu_sharing_env.sim.view import ClusterView

    env = gym.make("GpuSharing-v1", scenario="default", job_history=True)
    obs, info = env.reset(seed=2)
    sim = env.unwrapped.sim  # type: ignore[attr-defined]
    for _ in range(40):
        legal = np.flatnonzero(info["action_mask"])
        obs, _, term, trunc, info = env.step(int(legal[-1]))
        if term or trunc:
            break
    hist = obs["history"].reshape(-1, len(HISTORY_FEATURES))
    view = ClusterView(sim)
    col = {f: i for i, f in enumerate(HISTORY_FEATURES)}
    for k, jv in enumerate(view.window):
        st = view.group_stats(jv.job_id)
        assert st is not None
        assert hist[k, col["has_group"]] == float(bool(jv.group))
        assert (hist[k, col["runs_seen"]] > 0) == (st.runs_seen > 0)
    assert obs["nodes"][0] > 0 and obs["nodes"][sim.n_gpus :].sum() == 0
    # GPUs of one node share its value; the default fleet has 4 nodes
    assert len(set(obs["nodes"][: sim.n_gpus].tolist())) == len(sim.cluster.nodes)


def test_trace_stats_scenario_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gpu_sharing_gym.commands.trace import main

    argv = ["stats", "--format", "synthetic", "--scenario", "default", "--seeds", "2", "--json"]
    assert main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    m = rep["metrics"]
    assert rep["seeds"] == [0, 1] and rep["estimates_checked"] > 50
    assert m["leaky_estimates"]["value"] == 0 and m["recurring_share"]["paper"] == 0.65
    assert 0.5 <= m["recurring_share"]["value"] <= 0.8
    assert m["periodic_gap_cv"]["value"] <= 0.3
    rec, one = m["estimate_error_recurring"]["value"], m["estimate_error_oneoff"]["value"]
    assert rec < 0.5 * one
    assert main(["stats", "--format", "philly", "--scenario", "default"]) == 2


def test_rows_written_at_the_training_set_are_the_rows_of_each_run() -> None:
    # a finished run's features wait in a list until the training set is asked for (one numpy
    # write a refit): the same float32 rows and log work as written one by one, across a
    # buffer's growth (1,024 rows past the warm start), a copy with rows pending and refits
    w = generate_workload(SyntheticWorkloadConfig(), np.random.default_rng(12), 48 * 3600.0)
    jobs = w.jobs * 3  # (each run seen thrice: 1,392 rows)
    cfg = PredictorConfig(refit_every=70, max_rows=5000)
    each, batch = OnlinePredictor(cfg, w.history), OnlinePredictor(cfg, w.history)
    start = each.training_set()
    n_hist = 0 if start is None else start[1].size
    want_x: list[list[float]] = []
    copied = None
    for i, j in enumerate(jobs):
        r = math.log2(max(j.num_gpus * j.gpu_frac, 1e-3))
        want_x.append(each._features(j.group, j.user, r))
        each.observe(j, i)
        batch.observe(j, i)
        each.training_set()  # (written now, one row)
        if i == 777:
            copied = copy.deepcopy(batch)  # rows pending in the copy
    assert copied is not None
    for i, j in enumerate(jobs[778:], start=778):
        copied.observe(j, i)
    for p in (each, batch, copied):
        rows = p.training_set()
        assert rows is not None
        x, y = rows
        assert x.dtype == np.float32 and y.dtype == np.float64
        assert x[n_hist:].tolist() == np.array(want_x, dtype=np.float32).tolist()
        assert y[n_hist:].tolist() == [math.log(max(j.work_s, 1e-9)) for j in jobs]
    assert each.n_fits == batch.n_fits == copied.n_fits == len(jobs) // 70


def test_median_is_numpys_bit_for_bit() -> None:
    # ``_median`` (the estimate before the first refit): ``float(np.median(values))``, the
    # same double, on lists with ties, 0.0 and -0.0 (numpy's own answer there), NaN, odd and
    # even lengths
    from gpu_sharing_env.workload.predictor import _median

    rng = np.random.default_rng(9)
    for _ in range(3000):
        n = int(rng.integers(1, 14))
        if rng.uniform() < 0.5:
            vals = rng.choice([0.0, -0.0, 1.0, 2.5, -1.0, 7.25, math.nan], size=n).tolist()
        else:
            vals = rng.lognormal(5.0, 2.0, size=n).tolist()
        got, want = _median(vals), float(np.median(vals))
        assert (math.isnan(got) and math.isnan(want)) or (
            np.float64(got).tobytes() == np.float64(want).tobytes()
        ), vals
