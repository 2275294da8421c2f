"""A model-based agent: decision-time rollout planning on the simulator, over sampled futures.

At each decision the planner lists a few candidate placements (the base heuristic's, plain
time-sharing's, MPS first-fit's and *packing*: the base heuristic's job time-shared onto the
busiest GPU that takes it; see :mod:`gpu_sharing_gym.agents.lookahead`), and scores each by Monte-Carlo
rollouts: on ``samples`` copies of the cluster whose hidden future is *redrawn* from what a
scheduler knows (:func:`sample_belief`), the candidate makes this decision and the next
``horizon`` ones, then the base heuristic runs the episode to its end. The candidate with the
best mean outcome (lowest ``jct_mean_s``, the SLO target first) is taken; all candidates of
one sample share that sample's future (common random numbers), so their difference is not
the luck of the draw. This is the rollout algorithm of Bertsekas and Tsitsiklis
(*Neuro-Dynamic Programming*, 1996, §6.1; Sutton and Barto, *Reinforcement Learning*, 2nd ed.,
2018, §8.10) with the simulator as the model, as in model-predictive control: one step of
policy improvement over the base heuristic, done online, for the state actually reached.

*Fortified* (the default, ``fortified=True``; Bertsekas, Tsitsiklis and Wu, "Rollout algorithms
for combinatorial optimization", *J. Heuristics* 3, 1997; Bertsekas, *Rollout, Policy Iteration,
and Distributed Reinforcement Learning*, 2020, §2.3): the rollout policy of the candidate taken
(the candidate's copy for the rest of its ``horizon`` decisions, then the base's copy), as it
stood after its first action, is kept as the *committed plan*. At every later decision point
it is asked first (exactly once, as its rollout asked it, so its state stays that of the
trajectory it was scored on), and its action, with itself as the continuation, is the first
candidate: the reference column of the comparison (ties, ``margin`` and ``min_t`` keep it,
and with ``slo_ref="base"`` it sets the SLO reference). Any candidate that beats it replaces
it. Without this, a first step scored under "this heuristic for 8 decisions" was followed
by a continuation re-chosen at each step, and on the true future (:class:`OraclePlanner`) the
planner could end worse than its base (``docs/agents.md``, Headroom). With it, on the true
future the cost of the committed plan never rises from one decision to the next, so the
episode is never worse than the base heuristic's (``tests/test_planner.py``).

What the planner may know is what any policy may know (:class:`ClusterView`): the queue with
*estimated* durations, the progress of running jobs, the cluster state, the scenario's workload
*distribution* and the speed model. :func:`sample_belief` replaces everything else in its copy:

* true durations of queued and running offline jobs: the estimate times ``exp(N(0, sigma))``
  (the scenario's ``estimate_sigma``: the error model of
  :mod:`gpu_sharing_env.workload.estimates`, inverted with a flat prior in log space),
  redrawn until longer than the work already done;
* future offline arrivals: dropped, and replaced by the arrivals after *now* of a fresh draw of
  the scenario's workload generator;
* true peak memory of queued jobs: redrawn from the synthetic generator's memory model
  (running jobs' memory is in use, hence observable, e.g. with ``nvidia-smi``);
* faults and online-load noise: fresh random streams; pending fault times of running jobs are
  redrawn.

``tests/test_planner.py`` checks that a decision does not change when the hidden truth does.
Online services arrive at time 0 in the shipped scenarios and their lifetimes are known
(``est_work_s == work_s``), so they are kept. Trace-driven workloads cannot be redrawn (the
trace *is* the future), so the planner refuses them rather than read the future.

Cost: about ``samples x candidates`` rollouts per decision where the candidates disagree;
on ``default`` about 10-25 s per episode with 4 samples on one core (heuristics take 0.03 s).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import replace
from statistics import NormalDist
from typing import Any

import numpy as np

from gpu_sharing_env.evaluation.runner import run_to_end
from gpu_sharing_env.sim.build import ScenarioWorkload
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload.synthetic import SyntheticWorkloadConfig
from gpu_sharing_gym.agents.envs import make_expert
from gpu_sharing_gym.agents.lookahead import CANDIDATES, EnvActions, Pack, Then, _objective
from gpu_sharing_gym.baselines.base import HeuristicPolicy

#: Redraws of a running job's duration before falling back to "done work + 10 % of estimate".
_MAX_REDRAWS = 16


class PlannerError(ValueError):
    """The scenario cannot be planned for without reading hidden truth."""


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**63 - 1))


#: What a partial oracle may be told (``sample_belief(know=...)``, :class:`PartialOraclePlanner`):
#: the true durations of the offline jobs in the system, the true offline arrivals to come, the
#: true peak memory of queued (and, with ``"arrivals"``, arriving) jobs, the true fault and
#: load-noise streams. Told all four, a sampled future is the true one.
KNOWABLE = ("durations", "arrivals", "memory", "streams")


def sample_belief(
    sim: Simulator,
    rng: np.random.Generator,
    observed: bool = True,
    know: Sequence[str] = (),
    censored: bool = False,
) -> Simulator:
    """A copy of ``sim`` with its hidden future redrawn (see the module doc); ``sim`` is not
    changed. The copy depends only on what a scheduler can observe and on ``rng``.

    ``observed`` (the default): the belief is fitted to what the episode has shown so far
    (:func:`observed_belief`: its arrival rate against the generator's, and the duration
    error of the jobs that finished); else the generator's averages and the scenario's
    ``estimate_sigma`` as they are.

    ``censored`` (with ``observed``): the duration error is fitted with the running jobs as
    right-censored observations (:func:`censored_error`: each is known to run longer than the
    work it has done), separately for jobs of recurring groups and the others
    (:func:`error_class`), and a running job's duration is drawn from its class's fitted error
    truncated to that work (:func:`_draw_after`, inverse CDF), instead of redrawn up to
    :data:`_MAX_REDRAWS` times and then believed to end 10 % of its estimate later. Without
    it, the jobs that run far past their estimate are believed always to be about to end
    (``docs/notes/2026-11-28-headroom-afternoon.md``). Where the workload is capped
    (``max_jobs``) and the draw reaches the cap, the arrivals to come are the draw's after as
    many as the episode has seen (:func:`_capped_future`), not thinned by the observed rate.

    ``know`` (a measurement, not a scheduler: the copy then reads hidden truth) keeps part of
    the truth (:data:`KNOWABLE`): ``"durations"``, the true durations of the offline jobs
    queued or running (and of the known arrivals, with ``"arrivals"``); ``"arrivals"``, the
    true offline arrivals to come (their times, shapes and estimates), their durations and
    memory redrawn like a queued job's; ``"memory"``, queued (and known arriving) jobs' true
    peak memory; ``"streams"``, the true fault and load-noise streams and pending faults.
    Everything else is redrawn as without it; told everything, the copy is the true future
    (``tests/test_planner.py``)."""
    unknown = set(know) - set(KNOWABLE)
    if unknown:
        raise ValueError(f"sample_belief: know={sorted(unknown)}: not in {KNOWABLE}")
    wl = sim.workload
    if not isinstance(wl, ScenarioWorkload) or wl.trace_jobs is not None:
        src = sim.cfg.source_path or sim.cfg.name
        raise PlannerError(
            f"{src}: workload.offline.source: the planner needs a synthetic workload to redraw"
            f" the future from (a trace is the future itself)"
        )
    s = sim.copy()
    sigma0 = s.cfg.workload.offline.estimate_sigma
    syn = wl.syn_cfg
    streams = (_seed(rng), _seed(rng))  # drawn either way: the later draws stay in step
    if "streams" not in know:
        s.reseed(*streams)
    draw = [sp for sp in wl(rng) if not sp.online]
    fits: list[tuple[float, float]] = []
    if observed:
        rate, mu, sigma = observed_belief(s, draw, sigma0)
        if censored:  # per error class (:func:`error_class`)
            fits = [censored_error(s, sigma0, k) for k in (0, 1)]
    else:
        rate, mu, sigma = 1.0, 0.0, sigma0
    # 1. durations (and queued jobs' memory) of offline jobs in the system
    live = [
        st
        for st in s.jobs.values()
        if not st.online and st.status in (Status.QUEUED, Status.RUNNING)
    ]
    for st in sorted(live, key=lambda st: st.spec.job_id):
        spec = st.spec
        done = s.progress(spec.job_id)
        work = spec.est_work_s
        if "durations" in know:
            work = spec.work_s
        elif censored and spec.est_work_s > 0:
            m, sd = fits[error_class(s, st)]
            c = _log_ratio(done, spec.est_work_s)
            work = spec.est_work_s * math.exp(_draw_after(m, sd, c, float(rng.uniform())))
        else:
            for _ in range(_MAX_REDRAWS):
                work = spec.est_work_s * math.exp(mu + sigma * float(rng.standard_normal()))
                if work > done:
                    break
            else:
                work = done + max(1.0, 0.1 * spec.est_work_s)
        new = replace(spec, work_s=work)
        if st.status is Status.QUEUED and "memory" not in know:
            new = replace(new, true_mem_gb=round(spec.mem_gb * _mem_use(syn, rng), 3))
        s.set_true_spec(spec.job_id, new)
    # 2. pending faults: redrawn from the fresh stream
    if "streams" not in know:
        s.redraw_faults()
    if "arrivals" in know:  # 3'. the true arrivals, their hidden truth redrawn (or kept)
        coming = [st.spec for st in s.jobs.values() if not st.online and st.status is Status.FUTURE]
        for spec in sorted(coming, key=lambda sp: sp.job_id):
            work = spec.work_s
            if "durations" not in know:
                work = spec.est_work_s * math.exp(mu + sigma * float(rng.standard_normal()))
            mem = spec.true_mem_gb
            if "memory" not in know:
                mem = round(spec.mem_gb * _mem_use(syn, rng), 3)
            s.set_true_spec(spec.job_id, replace(spec, work_s=work, true_mem_gb=mem))
        return s
    cap = s.cfg.workload.offline.max_jobs
    if censored and cap and len(draw) >= cap:
        s.replace_future_offline(_capped_future(s, draw))
        return s
    # 3. future arrivals: offline ones from a fresh draw of the generator, after now, thinned
    #    or topped up (from further draws) to the arrival rate observed so far
    future = [sp for sp in draw if sp.submit_s > s.now]
    if rate < 1.0:
        future = [sp for sp in future if rng.random() < rate]
    extra = rate - 1.0
    while extra > 0:
        more = [sp for sp in wl(rng) if not sp.online and sp.submit_s > s.now]
        future += [sp for sp in more if rng.random() < min(1.0, extra)]
        extra -= 1.0
    future.sort(key=lambda sp: (sp.submit_s, sp.job_id))
    s.replace_future_offline(future)
    return s


#: Prior weight (in jobs) of the generator's arrival rate and of the scenario's duration error
#: against what an episode has shown: a few observations move the belief little.
PRIOR_JOBS = 10.0
#: The observed arrival rate is believed within this factor of the generator's.
MAX_RATE_FACTOR = 3.0


def observed_belief(
    sim: Simulator, draw: Sequence[Any], sigma0: float
) -> tuple[float, float, float]:
    """``(rate, mu, sigma)``: what a scheduler can estimate from the episode so far.

    * ``rate``: offline arrivals seen by ``now`` over the number a draw of the generator
      (``draw``) has by then, shrunk towards 1 with :data:`PRIOR_JOBS` jobs of prior; future
      arrivals are thinned or topped up to it (a heavier day stays heavier).
    * ``mu``, ``sigma``: the log error of the duration estimates, ``log(true / estimated)``,
      over the offline jobs that finished (their true durations are known then), shrunk
      towards ``(0, sigma0)`` (the scenario's predictor error) with the same prior weight.
    """
    now = sim.now
    seen = sum(1 for st in sim.jobs.values() if not st.online and st.status is not Status.FUTURE)
    expected = sum(1 for sp in draw if sp.submit_s <= now)
    rate = (seen + PRIOR_JOBS) / (expected + PRIOR_JOBS)
    rate = min(MAX_RATE_FACTOR, max(1.0 / MAX_RATE_FACTOR, rate))
    logs = [
        math.log(st.spec.work_s / st.spec.est_work_s)
        for st in sim.jobs.values()
        if not st.online and st.status is Status.DONE and st.spec.est_work_s > 0
    ]
    n = len(logs)
    mu = sum(logs) / (PRIOR_JOBS + n)
    var = (PRIOR_JOBS * sigma0**2 + sum((x - mu) ** 2 for x in logs)) / (PRIOR_JOBS + n)
    return rate, mu, math.sqrt(var)


def _capped_future(sim: Simulator, draw: Sequence[Any]) -> list[Any]:
    """The arrivals to come where the workload is its first ``max_jobs`` jobs and the draw has
    that many: the draw's jobs after as many as the episode has seen, each after ``now`` by its
    gap from the draw's last one seen (so the count to come is the cap's, and the pace the
    generator's). Thinning the draw's arrivals after ``now`` to the observed rate instead
    (the ``observed`` belief) believes nothing more arrives once the draw reached its cap
    earlier than the episode, which on ``default-x2`` is hours before the window's end."""
    seen = sum(1 for st in sim.jobs.values() if not st.online and st.status is not Status.FUTURE)
    order = sorted(draw, key=lambda sp: (sp.submit_s, sp.job_id))
    anchor = order[seen - 1].submit_s if 0 < seen <= len(order) else 0.0
    now = sim.now
    future = [replace(sp, submit_s=now + max(sp.submit_s - anchor, 1.0)) for sp in order[seen:]]
    return sorted(future, key=lambda sp: (sp.submit_s, sp.job_id))


#: EM iterations of :func:`censored_error` (it moves by < 1e-6 after ~20 on ``default``).
_EM_ITERATIONS = 30


def _log_ratio(done: float, est: float) -> float:
    """``log(done / est)``, ``-inf`` where nothing is done yet (no information)."""
    return math.log(done / est) if done > 0 else -math.inf


def _tail(a: float) -> tuple[float, float]:
    """``(P(Z > a), E[Z | Z > a])`` for a standard normal ``Z``."""
    if a == -math.inf:
        return 1.0, 0.0
    sf = 0.5 * math.erfc(a / math.sqrt(2.0))
    if sf < 1e-300:  # far in the tail: the inverse Mills ratio's asymptote
        return 0.0, a + 1.0 / a
    return sf, math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi) / sf


#: A job is of error class 0 (:func:`error_class`) when its group has at least this many
#: finished runs other than itself.
RECURRING_RUNS = 2


def error_class(sim: Simulator, st: Any) -> int:
    """0 where the job's group has :data:`RECURRING_RUNS` finished runs besides the job itself
    (the online predictor's estimate rests on them: PAI's recurring jobs, median |log error|
    ~0.2 on workload v2), else 1 (a new or rare group: ~1.7; every job where the scenario has
    no online predictor). What the cluster's log says now (``ClusterView.group_stats``)."""
    pred = sim.predictor
    if pred is None or not st.spec.group:
        return 1
    runs = pred.group_stats(st.spec, sim.now).runs_seen - (st.status is Status.DONE)
    return 0 if runs >= RECURRING_RUNS else 1


def censored_error(sim: Simulator, sigma0: float, cls: int | None = None) -> tuple[float, float]:
    """``(mu, sigma)`` of the log duration error ``log(true / estimated)`` from the offline
    jobs (of :func:`error_class` ``cls``; None: all) that finished (observed) and those
    running (right-censored at ``log(done / estimated)``: they run at least that long),
    shrunk towards ``(0, sigma0)`` with
    :data:`PRIOR_JOBS` jobs of prior as :func:`observed_belief` does; the maximum of that
    penalised likelihood by EM (Tobit: a censored value is replaced by its conditional mean and
    second moment under the current fit). Only what a scheduler sees: estimates, finished runs'
    durations and running jobs' progress."""
    obs: list[float] = []
    cens: list[float] = []
    for st in sim.jobs.values():
        if st.online or st.spec.est_work_s <= 0 or st.status not in (Status.DONE, Status.RUNNING):
            continue
        if cls is not None and error_class(sim, st) != cls:
            continue
        if st.status is Status.DONE:
            obs.append(math.log(st.spec.work_s / st.spec.est_work_s))
        elif st.status is Status.RUNNING:
            c = _log_ratio(sim.progress(st.spec.job_id), st.spec.est_work_s)
            if c > -math.inf:
                cens.append(c)
    n = len(obs) + len(cens)
    s1, s2 = sum(obs), sum(x * x for x in obs)
    mu, sigma = 0.0, sigma0
    for _ in range(_EM_ITERATIONS if cens else 1):
        e1, e2 = s1, s2
        for c in cens:
            a = (c - mu) / sigma
            _, lam = _tail(a)
            m1 = mu + sigma * lam
            var = sigma * sigma * max(0.0, 1.0 + a * lam - lam * lam)
            e1 += m1
            e2 += var + m1 * m1
        mu = e1 / (PRIOR_JOBS + n)
        var_sum = e2 - 2.0 * mu * e1 + n * mu * mu  # sum of E[(x - mu)^2]
        sigma = math.sqrt(max(1e-12, (PRIOR_JOBS * sigma0**2 + var_sum) / (PRIOR_JOBS + n)))
    return mu, sigma


def _draw_after(mu: float, sigma: float, c: float, u: float) -> float:
    """The ``u``-quantile of ``N(mu, sigma)`` truncated to values above ``c`` (inverse CDF)."""
    sf, _ = _tail((c - mu) / sigma)
    if sf <= 0.0:  # beyond double precision: the truncated normal is ~ c + Exp(a / sigma)
        a = (c - mu) / sigma
        return c - sigma / a * math.log(max(u, 1e-300))
    p = min(max(u * sf, 1e-300), 1.0 - 1e-16)
    return max(c, mu - sigma * NormalDist().inv_cdf(p))


def _mem_use(syn: SyntheticWorkloadConfig, rng: np.random.Generator) -> float:
    """One draw of the synthetic generator's peak-memory / declared-memory ratio
    (``gpu_sharing_env.workload.synthetic.generate_jobs``)."""
    if rng.uniform() < syn.mem_overuse_prob:
        return float(rng.uniform(1.05, 1.5))
    use = syn.mem_use_median * math.exp(syn.mem_use_sigma * float(rng.standard_normal()))
    return max(min(use, 0.95), 0.05)


#: What the rollouts' futures are drawn from (``RolloutPlanner(belief=...)``).
BELIEFS = ("observed", "censored", "prior", "oracle")


class RolloutPlanner(HeuristicPolicy):
    """Rollout planning over sampled futures, improving on a base heuristic (module doc).

    Args:
        base: The heuristic the rollouts continue with (and the first candidate).
        candidates: Other heuristics proposing a first action (``"pack"`` is built in).
        samples: Sampled futures per decision.
        horizon: Decisions a candidate keeps making in its rollout before ``base`` takes over.
        margin: A candidate replaces the base action only if its mean objective is lower by
            this relative margin.
        min_t: ... and only if its paired gain over the samples is at least ``min_t``
            standard errors (0: off).
        seed: Mixed with the episode seed into the planner's own random stream.
        belief: ``"observed"`` (the default): sampled futures follow the arrival rate and
            the duration error the episode has shown so far (:func:`observed_belief`);
            ``"censored"``: the same, the duration error fitted with running jobs as censored
            observations and running jobs' durations drawn beyond their progress
            (:func:`sample_belief`'s ``censored``);
            ``"prior"``: the generator's averages and the scenario's ``estimate_sigma``;
            ``"oracle"``: no redraw, the rollouts run on the true future (a ceiling for
            measurement: the policy is then marked ``oracle`` and reads hidden truth).
        slo_ref: What a candidate's SLO attainment is held to in the rollout objective:
            ``"target"`` (the scenario's target: SLO first, the default) or ``"base"`` (the
            target, or the base action's attainment in the same sampled future where that is
            lower: where the base misses the target, JCT is not traded for SLO; a JCT
            teacher, ``docs/agents.md``).
        fortified: Keep the committed plan as the first candidate at every later decision
            (module doc); on the true future the planner is then never worse than ``base``.
        know: Parts of the hidden truth the sampled futures keep (:data:`KNOWABLE`; only
            :class:`PartialOraclePlanner`, marked as an oracle: a measurement of where the
            oracle's gain comes from).
        cut_s: Simulated seconds a rollout runs past the decision (None, the default: to the
            end of the episode). A cut rollout stops at the first decision point at or after
            ``now + cut_s`` and is scored by :func:`cut_metrics` at that time: every offline
            job arrived by then counts its completion time, or where it has not finished its
            time in the system so far plus its work left at solo reference speed; SLO
            attainment is that of the requests served until the stop.
            Rollouts then cost about ``cut_s`` of simulation instead of the rest of the
            episode, the objective weighs the next ``cut_s`` only, and the fortified
            planner's guarantee (never worse than ``base`` on the true future) no longer
            holds.
    """

    name = "planner"

    def __init__(
        self,
        base: str = "antman",
        candidates: Sequence[str] = CANDIDATES,
        samples: int = 8,
        horizon: int = 8,
        margin: float = 0.0,
        min_t: float = 1.0,
        seed: int = 0,
        slo_ref: str = "target",
        belief: str = "observed",
        fortified: bool = True,
        know: Sequence[str] = (),
        cut_s: float | None = None,
    ) -> None:
        if samples < 1 or horizon < 0 or margin < 0 or min_t < 0:
            raise ValueError("planner: samples >= 1, horizon >= 0, margin >= 0, min_t >= 0")
        if cut_s is not None and not cut_s > 0:
            raise ValueError(f"planner: cut_s={cut_s!r}: must be > 0 (None: no cut)")
        self.cut_s = cut_s
        if belief not in BELIEFS:
            raise ValueError(f"planner: belief={belief!r}: must be one of {', '.join(BELIEFS)}")
        if (belief == "oracle") != (self.oracle and not know):
            raise ValueError("planner: belief='oracle' is OraclePlanner's (marked as an oracle)")
        if bool(know) != (self.oracle and belief != "oracle"):
            raise ValueError("planner: know=... is PartialOraclePlanner's (marked as an oracle)")
        if set(know) - set(KNOWABLE):
            raise ValueError(f"planner: know={list(know)!r}: each must be one of {KNOWABLE}")
        self.know = tuple(know)
        self.belief = belief
        if belief == "oracle":
            samples = 1  # one true future: more samples would repeat it
        if slo_ref not in ("target", "base"):
            raise ValueError(f"planner: slo_ref={slo_ref!r}: must be 'target' or 'base'")
        self.slo_ref = slo_ref
        self.base_name = base
        self.candidate_names = tuple(candidates)
        self.samples, self.horizon, self.margin, self.seed = samples, horizon, margin, seed
        self.min_t = min_t
        self.fortified = fortified
        self.reset(0)
        # The queue order is its base's (``speed_sjf_queue``: predicted): the runner sets the
        # simulator's from it, and every rollout runs on a copy in that order.
        self.window_order = self.base.window_order

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.base = make_expert(self.base_name)
        self.others: dict[str, HeuristicPolicy] = {
            n: make_expert(n) for n in self.candidate_names if n != "pack"
        }
        if "pack" in self.candidate_names:
            self.others["pack"] = Pack(self.base)
        for p in (self.base, *self.others.values()):
            p.reset(seed)
        self.plan_rng = np.random.default_rng([seed, self.seed, 0x9E3779B9])
        #: Decisions planned / where a candidate other than the base one was taken.
        self.n_planned = self.n_changed = 0
        #: The committed plan (``fortified``): the rollout policy whose trajectory the episode
        #: follows, as it stood after the last real decision.
        self.plan: Then | None = None
        #: Whether the policies run as the env runs them (set by :meth:`act`).
        self.env_actions = False
        #: More first actions to score at the next decision, each followed by the base (set
        #: by a caller before :meth:`decide`, consumed by it): a DAgger student's own action,
        #: so a value label compares it with the heuristics' (:mod:`gpu_sharing_gym.agents.expert`).
        self.extra: list[Decision | None] = []
        #: (first action, mean rollout objective) of every candidate scored at the last
        #: decision (objective 0.0 for all when there was nothing to choose); None before any.
        self.last_scores: list[tuple[Decision | None, float]] | None = None

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        # Under the env (a teacher labelling env states), the base, the candidates and every
        # rollout run as the env runs them: nothing the action codec cannot encode (Gandiva's
        # migrations) is proposed or imagined. Switched at the episode's first action, before
        # any policy has state.
        if not self.env_actions:
            self.env_actions = True
            self.base = EnvActions(self.base)
            self.others = {
                n: Pack(self.base) if n == "pack" else EnvActions(p) for n, p in self.others.items()
            }
        return view.action_of(self.decide(view))

    def decide(self, view: ClusterView) -> Decision | None:
        # The committed plan (fortified) is asked first, once per real decision point, as its
        # rollout asked it: its state then stays that of the trajectory it was scored on.
        plan = self.plan if self.fortified else None
        d_plan = plan.decide(view) if plan is not None else None
        d_base = self.base.decide(view)
        if d_base is None and d_plan is None:
            self.extra, self.last_scores = [], [(None, 0.0)]
            return None
        sim = view.lookahead_copy()  # the model: its hidden future redrawn, never read
        window = {st.job_id for st in sim.window_jobs()}
        # (first action, the rollout policy after it; None: built from the live policies)
        cands: list[tuple[Decision | None, HeuristicPolicy | None, Then | None]] = []
        seen: set[tuple[int, int, int] | None] = set()
        if plan is not None:
            cands.append((d_plan, None, plan))  # the incumbent: its ties and margins win
            seen.add(_key(d_plan))
        if d_base is not None and _key(d_base) not in seen:
            cands.append((d_base, None, None))
            seen.add(_key(d_base))
        for p in self.others.values():
            d = p.decide(view)
            if d is None or d.job_id not in window:
                continue  # waits and migrations are not candidates
            if _key(d) not in seen:
                seen.add(_key(d))
                cands.append((d, p, None))
        extra, self.extra = self.extra, []
        for d in extra:  # (then the base, like the base's own action)
            if (d is None or d.job_id in window) and _key(d) not in seen:
                seen.add(_key(d))
                cands.append((d, None, None))
        self.last_scores = [(d, 0.0) for d, _, _ in cands]
        if len(cands) == 1 and not self.fortified:
            return cands[0][0]  # nothing to choose (a plan is judged by its first action)
        # each candidate's rollout policy as it stands after the first action: its own copies
        # of the policies (policy state is part of the world: imagined futures never write
        # into the live ones, e.g. Gandiva's migration cool-downs, any policy's random stream)
        starts = [
            start if start is not None
            else Then(copy.deepcopy(then), self.horizon, copy.deepcopy(self.base))
            for _, then, start in cands
        ]  # fmt: skip
        if len(cands) == 1:
            best = 0  # nothing to choose: the plan goes on
        else:
            self.n_planned += 1
            scores = self._scores(sim, [d for d, _, _ in cands], starts)
            self.last_scores = [
                (d, float(m)) for (d, _, _), m in zip(cands, scores.mean(axis=0), strict=True)
            ]
            best = self._choose(scores)
        first = cands[best][0]
        self.n_changed += _key(first) != _key(d_base)
        if self.fortified:
            self.plan = starts[best]  # followed from here on unless a candidate beats it
        return first

    def _scores(
        self, sim: Simulator, firsts: Sequence[Decision | None], starts: Sequence[Then]
    ) -> np.ndarray:
        """``scores[sample, candidate]``: the objective of ``firsts[i]`` then ``starts[i]``
        (run on a copy) to the end, in each sampled future (column 0: the reference)."""
        target = sim.cfg.slo_target
        t_end = math.inf if self.cut_s is None else sim.now + self.cut_s
        scores = np.zeros((self.samples, len(firsts)))
        for k in range(self.samples):
            if self.belief == "oracle":
                world = sim.copy()  # the true future, its random streams included
            else:
                world = sample_belief(
                    sim,
                    self.plan_rng,
                    observed=self.belief in ("observed", "censored"),
                    know=self.know,
                    censored=self.belief == "censored",
                )
            for i, (first, start) in enumerate(zip(firsts, starts, strict=True)):
                s2 = world if i == len(firsts) - 1 else world.copy()
                if first is None:
                    s2.advance()  # the plan waits here (as the runner does on a wait)
                else:
                    s2.apply(first)
                m = run_to_end(copy.deepcopy(start), s2, t_end)
                if self.cut_s is not None:
                    m = cut_metrics(s2, t_end)
                if i == 0:  # the reference comes first: it sets the sample's SLO reference
                    target = self.slo_reference(sim.cfg.slo_target, m["slo_attainment"])
                scores[k, i] = _objective(m, target)
        return scores

    def slo_reference(self, slo_target: float, base_slo: float) -> float:
        """The SLO attainment a candidate is held to in one sampled future (``slo_ref``)."""
        return slo_target if self.slo_ref == "target" else min(slo_target, base_slo)

    def _choose(self, scores: np.ndarray) -> int:
        """The candidate to take from ``scores[sample, candidate]`` (column 0: the base)."""
        mean = scores.mean(axis=0)
        best = int(np.argmin(mean))  # ties keep the base action (listed first)
        if best == 0 or mean[best] > mean[0] * (1.0 - self.margin):
            return 0
        if self.min_t > 0 and self.samples > 1:
            # paired over the samples (common random numbers): deviate only when the gain is
            # ``min_t`` standard errors clear of zero, not the luck of a heavy-tailed draw
            diff = scores[:, 0] - scores[:, best]
            se = float(diff.std(ddof=1)) / math.sqrt(self.samples)
            if float(diff.mean()) < self.min_t * se:
                return 0
        return best


def cut_metrics(sim: Simulator, t_end: float) -> dict[str, float]:
    """``jct_mean_s`` and ``slo_attainment`` of a rollout stopped at or after ``t_end``
    (``RolloutPlanner(cut_s=...)``), as of ``t_end``: over the offline jobs submitted by then and
    not given up, a job finished by then counts its JCT; one unfinished counts its time in the
    system so far plus the work it has left at solo reference speed (``work_s`` minus its
    progress: the rollout's own world's, sampled for the honest planner), a lower bound of its
    JCT; the SLO attainment is the simulator's at ``now``. Candidates that share a sampled
    future are so scored over the same jobs and the same instant, whatever their last decision
    point. Without the work left, a cut rollout favours starving long jobs (a job queued and
    one half done would cost the same), and on ``default-x2`` the oracle with 1-8 h cuts ended
    up to 3.5x worse than its base (``docs/notes/2026-11-28-headroom-afternoon.md``). Once the
    episode is over nothing is added (its own ``jct_mean_s``)."""
    stop = min(t_end, sim.now)
    over = sim.done
    jct = []
    for st in sim.jobs.values():
        if (
            st.online
            or st.spec.submit_s > stop
            or st.status not in (Status.DONE, Status.QUEUED, Status.RUNNING)
        ):
            continue
        if st.status is Status.DONE and st.ledger.finish_t <= stop:
            jct.append(st.ledger.finish_t - st.spec.submit_s)
            continue
        left = 0.0 if over else max(0.0, st.spec.work_s - sim.progress(st.spec.job_id))
        if st.status is Status.DONE:  # finished between the cut and the stop
            left = 0.0 if over else st.ledger.finish_t - stop
        jct.append(stop - st.spec.submit_s + left)
    slo = sim.metrics()["slo_attainment"]
    return {"jct_mean_s": float(np.mean(jct)) if jct else 0.0, "slo_attainment": slo}


def _key(d: Decision | None) -> tuple[int, int, int] | None:
    """What makes two first actions the same (None: a wait)."""
    return None if d is None else (d.job_id, d.gpu, d.option)


class OraclePlanner(RolloutPlanner):
    """The rollout planner on the true future (``belief="oracle"``): a ceiling for what one-step
    lookahead can gain, marked as an oracle on the leaderboard (it reads hidden truth)."""

    name = "planner_oracle"
    oracle = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "belief": "oracle"})


class PartialOraclePlanner(RolloutPlanner):
    """The honest planner told part of the hidden truth (``know``: :data:`KNOWABLE`), the rest
    sampled from the observed belief: where the oracle's gain over the honest planner comes
    from (``gsg headroom --decompose``). Marked as an oracle."""

    name = "planner_knows"
    oracle = True

    def __init__(self, know: Sequence[str] = KNOWABLE, **kwargs: Any) -> None:
        if not know:
            raise ValueError("planner: PartialOraclePlanner needs know=... (what it is told)")
        super().__init__(**{**kwargs, "belief": "observed", "know": tuple(know)})


#: Planners loadable by name (``gsg evaluate --policy planner``).
PLANNERS = {"planner": RolloutPlanner, "planner_oracle": OraclePlanner}
