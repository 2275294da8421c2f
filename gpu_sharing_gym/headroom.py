"""How much one-step lookahead can gain over the best heuristic: the headroom table (issue 25).

    gsg headroom --scenarios default --seeds 7101-7110 --out runs/headroom
    gsg headroom --scenarios default-x2,heldout_load --seeds 7101-7105 \\
        --samples 4 --out runs/headroom
    gsg headroom --scenarios default --agents ppo --out runs/headroom
    gsg headroom --scenarios pai-busy --seeds 7101-7105 --samples 4 \\
        --backend ray --ray-address auto --out runs/headroom-pai     (on a Ray cluster)
    gsg headroom --scenarios mig-a100 --seeds 7101-7105 --samples 4 --cut-h 2 \\
        --out runs/headroom-mig                    (rollouts cut 2 simulated hours ahead)

Per scenario, on the given seeds:

1. every registered heuristic (``policy_names("policy")``) runs; the *best heuristic* is the
   leaderboard's first: the lowest mean ``jct_mean_s`` among those whose mean
   ``slo_attainment`` meets the scenario's ``slo_target``
   (:func:`gpu_sharing_gym.leaderboard.rank_key`);
2. the honest rollout planner (:class:`~gpu_sharing_gym.agents.planner.RolloutPlanner`,
   ``belief="observed"``, or ``--belief censored``: futures sampled from what the episode
   has shown so far; ``--min-t``: its deviation test) runs with
   that heuristic as its base and, as candidates for each decision, the other heuristics among
   the ``--top`` best (only those without cluster mechanisms can be: ``make_expert``) plus
   ``pack``;
3. the same planner on the true future
   (:class:`~gpu_sharing_gym.agents.planner.OraclePlanner`, marked ``oracle``): a ceiling;
4. with ``--decompose``, the honest planner told part of the truth
   (:class:`~gpu_sharing_gym.agents.planner.PartialOraclePlanner`, marked ``oracle``): the true
   durations of the jobs in the system (``planner_knows_durations``), or the true arrivals to
   come with their durations sampled (``planner_knows_arrivals``), or both
   (``planner_knows_both``; faults, load noise and memory still sampled): where the oracle's
   gain over the honest planner comes from;
5. with ``--agents``, learned agents (a shipped agent's name or a ``model.zip``) on the same
   seeds, each judged by issue 25's bar: where the headroom is at least 15 % of the best
   heuristic's mean, at least 10 % better than it; elsewhere, at least half the headroom closed.

``--horizon`` is the number of decisions a candidate keeps making in a rollout before the
base takes over; a rollout runs to the end of the episode unless ``--cut-h`` cuts it that many
simulated hours after the decision (scored on the state reached:
:func:`~gpu_sharing_gym.agents.planner.cut_metrics`), which is what makes large scenarios
affordable. A cut changes the planners' cells (a new ``cut_s`` in their settings).

*Headroom* is the oracle planner's mean ``jct_mean_s`` minus the best heuristic's, with the
95 % CI of the paired per-seed differences (Student t, n - 1 degrees of freedom); the honest
planner's row, paired the same way, shows how much of it is reachable without hidden truth.

Every episode is a *cell* saved as ``OUT/cells/<scenario>/<policy>/<seed>.json`` (atomically)
as soon as it finishes; a rerun computes only the missing cells (and those whose scenario file,
physics version, planner settings or agent checkpoint changed), so Ctrl-C or SIGTERM loses at
most the episodes in flight. The planner's base and candidates come from the heuristics'
ranking on the given seeds, so another seed set can mean other planner settings and new planner
cells. A cell does not record the code of the policies: after changing a baseline, use a fresh
``--out``. Cells run in ``--workers`` local processes, or with ``--backend ray`` as Ray tasks
(``--ray-address auto``: the cluster of ``ray start``; every node needs the project and the
scenario files at the same paths); the driver alone writes ``OUT``, and the numbers do not
depend on where a cell ran.
The table goes to stdout and to ``OUT/headroom.md``; its numbers to ``OUT/headroom.json``.
Exit status: 0 done, 1 some episode failed, 2 bad input, 130 Ctrl-C, 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from gpu_sharing_env.config import ConfigError, load_scenario
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_env.evaluation.runner import evaluate, json_safe
from gpu_sharing_env.physics.interference import MODEL_VERSION
from gpu_sharing_env.registry import make_policy, policy_names
from gpu_sharing_gym.agents.envs import make_expert
from gpu_sharing_gym.agents.lookahead import CANDIDATES
from gpu_sharing_gym.agents.planner import (
    OraclePlanner,
    PartialOraclePlanner,
    PlannerError,
    RolloutPlanner,
)
from gpu_sharing_gym.backends import (
    BackendError,
    add_backend_args,
    backend_session,
    check_backend_args,
    run_tasks,
)
from gpu_sharing_gym.cells import policy_digest, policy_dir, scenario_digest
from gpu_sharing_gym.ci import fmt_num, mean_ci95
from gpu_sharing_gym.leaderboard import meets_slo, rank_key
from gpu_sharing_gym.plumbing.cli_args import (
    Parser,
    fail,
    non_negative_float,
    non_negative_int,
    output_dir,
    positive_float,
    positive_int,
    seed_spec,
)
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.interrupt import exit_code, exit_process, sigterm_raises, stopped_by
from gpu_sharing_gym.plumbing.progress import progress

PROG = "gsg headroom"
#: Bumped when the cell file layout changes (older files are recomputed).
FORMAT = 1
#: The planner rows' policy names (and cell directories).
PLANNER, ORACLE = "planner", "planner_oracle"
#: ``--planners``: the planner rows each choice runs.
PLANNER_CHOICES: dict[str, tuple[str, ...]] = {
    "both": (ORACLE, PLANNER),
    "oracle": (ORACLE,),
    "honest": (PLANNER,),
}
#: ``--decompose``'s rows: the honest planner told one part of the truth (policy name: what).
PARTIAL: dict[str, tuple[str, ...]] = {
    "planner_knows_durations": ("durations",),
    "planner_knows_arrivals": ("arrivals",),
    "planner_knows_both": ("durations", "arrivals"),
}
#: ``--belief``: the honest planner's beliefs (``RolloutPlanner(belief=...)``), the default first.
HONEST_BELIEFS = ("observed", "censored")
#: Headroom at or above this share of the best heuristic's mean JCT is flagged (issue 25).
FLAG_SHARE = 0.15
#: Issue 25's bar for a learned agent: where the headroom is flagged, at least this much better
#: than the best heuristic (a share of its mean JCT); elsewhere, at least this share of the
#: headroom closed.
AGENT_GAIN, AGENT_CLOSED = 0.10, 0.5


class InputError(ValueError):
    """Bad command-line input: one line, exit status 2."""


# ============================================================================ cells
@dataclass(frozen=True)
class Cell:
    """One episode: ``policy`` (a heuristic's registry name, :data:`PLANNER`, :data:`ORACLE`
    or an agent: a shipped agent's name or a checkpoint path) on ``scenario`` (loaded from
    ``scenario_path``) with ``seed``; a planner's constructor arguments in ``params`` (sorted
    ``(key, value)`` pairs), an agent's checkpoint hash (``("checkpoint", digest)``), empty
    for a heuristic."""

    policy: str
    scenario: str
    scenario_path: str
    seed: int
    params: tuple[tuple[str, Any], ...] = field(default=())

    def path(self, out: Path) -> Path:
        return out / "cells" / self.scenario / policy_dir(self.policy) / f"{self.seed}.json"

    def key(self) -> dict[str, Any]:
        """What a saved file must match to be reused (besides the scenario file's digest)."""
        return {
            "policy": self.policy,
            "scenario": self.scenario,
            "seed": self.seed,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params},
            "model_version": MODEL_VERSION,
        }


def planner_params(
    base: str,
    candidates: Sequence[str],
    samples: int,
    horizon: int,
    oracle: bool,
    know: Sequence[str] = (),
    cut_s: float | None = None,
    belief: str = "observed",
    min_t: float = 1.0,
    slo_ref: str = "target",
) -> tuple[tuple[str, Any], ...]:
    """The planner's constructor arguments as a cell's ``params`` (the oracle has one true
    future, so its ``samples`` is 1 whatever was asked; a partial oracle, ``know``, samples
    the rest of the future; ``cut_s`` only where rollouts are cut and ``min_t`` only where it is
    not the planner's default 1.0 and there are samples to test, ``slo_ref`` only where it is not
    the default ``"target"``, so cells of earlier runs keep the key they had before these
    options existed)."""
    kw: dict[str, Any] = {
        "base": base,
        "candidates": tuple(candidates),
        "samples": 1 if oracle else samples,
        "horizon": horizon,
        "fortified": True,  # the planner's default (recorded: older cells were not)
    }
    if not oracle:
        kw["belief"] = "observed" if know else belief  # a partial oracle samples the rest so
    if know:
        kw["know"] = tuple(know)
    if cut_s is not None:
        kw["cut_s"] = float(cut_s)
    if min_t != 1.0 and not oracle:
        kw["min_t"] = float(min_t)
    if slo_ref != "target":
        kw["slo_ref"] = slo_ref
    return tuple(sorted(kw.items()))


def build_policy(cell: Cell) -> Any:
    if cell.policy == PLANNER:
        return RolloutPlanner(**dict(cell.params))
    if cell.policy == ORACLE:
        return OraclePlanner(**dict(cell.params))
    if cell.policy in PARTIAL:
        return PartialOraclePlanner(**dict(cell.params))
    return make_policy(cell.policy)


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; returns the content of its file. A failure becomes ``status="error"``
    with a one-line message (such cells are not saved, so a rerun tries them again), except
    :class:`PlannerError` (the scenario cannot be planned for), which propagates."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"format": FORMAT, "cell": cell.key()}
    try:
        out["scenario_digest"] = scenario_digest(cell.scenario_path)
        cfg = load_scenario(cell.scenario_path)
        policy = build_policy(cell)
        (rec,) = evaluate(policy, cfg, [cell.seed])
    except PlannerError:
        raise
    except Exception as e:
        lines = str(e).strip().splitlines()
        msg = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
        out.update(status="error", error=msg, wall_s=time.perf_counter() - t0)
        return out
    record = {"oracle": bool(rec["oracle"]), **{k: rec[k] for k in METRIC_NAMES}}
    out.update(status="ok", error="", wall_s=time.perf_counter() - t0)
    out["slo_target"] = cfg.slo_target
    out["record"] = json_safe(record)
    if isinstance(policy, RolloutPlanner):
        out["planned"] = {"decisions": policy.n_planned, "changed": policy.n_changed}
    return out


def load_cell(out: Path, cell: Cell) -> dict[str, Any] | None:
    """The saved ``ok`` result of ``cell``, or None if absent, unreadable, of another format,
    another scenario file or other planner settings."""
    try:
        data = json.loads(cell.path(out).read_text())
        if (
            data.get("format") != FORMAT
            or data["cell"] != cell.key()
            or data.get("status") != "ok"
            or data.get("scenario_digest") != scenario_digest(cell.scenario_path)
        ):
            return None
        return dict(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def run_cells(
    out: Path,
    cells: Sequence[Cell],
    workers: int,
    desc: str,
    quiet: bool = False,
    backend: str = "local",
    address: str | None = None,
) -> tuple[dict[Cell, dict[str, Any]], list[str]]:
    """Saved results of ``cells``, running the missing ones on ``backend`` with ``workers``
    processes (:func:`gpu_sharing_gym.backends.run_tasks`; progress lines headed ``desc``);
    each is saved the moment it finishes. Returns ``(results of the ok cells, error lines)``."""
    done: dict[Cell, dict[str, Any]] = {}
    todo: list[Cell] = []
    for c in cells:
        saved = load_cell(out, c)
        if saved is not None:
            done[c] = saved
        else:
            todo.append(c)
    errors: list[str] = []
    if not todo:
        return done, errors
    with progress(len(todo), desc, "episode", disable=quiet) as bar:
        _run(out, todo, workers, bar, done, errors, backend, address)
    return done, errors


def _run(
    out: Path,
    todo: Sequence[Cell],
    workers: int,
    bar: Any,
    done: dict[Cell, dict[str, Any]],
    errors: list[str],
    backend: str = "local",
    address: str | None = None,
) -> None:
    def finish(c: Cell, res: dict[str, Any]) -> None:
        if res["status"] == "ok":
            atomic_write_text(c.path(out), json.dumps(res, allow_nan=False, indent=1) + "\n")
            done[c] = res
        else:
            errors.append(f"{c.scenario} {c.policy} seed {c.seed}: {res['error']}")
        bar.update(1)
        bar.set_postfix_str(f"{c.scenario} {c.policy} seed {c.seed} {res['wall_s']:.0f}s")

    if backend == "local" and (workers <= 1 or len(todo) <= 1):
        for c in todo:
            bar.set_postfix_str(f"{c.scenario} {c.policy} seed {c.seed}")
            finish(c, run_cell(c))
        return
    # closing(): an interrupt in this loop stops the backend's workers now
    with closing(run_tasks(run_cell, todo, backend, min(workers, len(todo)), address)) as res:
        for cell, result in res:
            finish(cell, result)


# ============================================================================ the table
@dataclass
class Row:
    """One policy on one scenario over the seeds (``jct`` and ``slo`` by seed)."""

    policy: str
    jct: dict[int, float]
    slo: dict[int, float]
    oracle: bool = False
    wall_s: float = 0.0
    changed: float = math.nan  # share of planned decisions where a candidate replaced the base

    def mean(self, seeds: Sequence[int]) -> tuple[float, float]:
        m, h, _ = mean_ci95([self.jct[s] for s in seeds])
        return m, h

    def slo_mean(self, seeds: Sequence[int]) -> float:
        x = [self.slo[s] for s in seeds if math.isfinite(self.slo[s])]
        return float(np.mean(x)) if x else math.nan


def rows_from(results: Mapping[Cell, Mapping[str, Any]], policy: str, seeds: Sequence[int]) -> Row:
    """The :class:`Row` of ``policy`` from cell results (only cells of those seeds)."""
    jct: dict[int, float] = {}
    slo: dict[int, float] = {}
    wall = 0.0
    planned = changed = 0
    oracle = False
    for c, r in results.items():
        if c.policy != policy or c.seed not in seeds:
            continue
        rec = r["record"]
        jct[c.seed] = float(rec["jct_mean_s"]) if rec["jct_mean_s"] is not None else math.nan
        slo[c.seed] = (
            float(rec["slo_attainment"]) if rec["slo_attainment"] is not None else math.nan
        )
        oracle = oracle or bool(rec["oracle"])
        wall += float(r["wall_s"])
        if "planned" in r:
            planned += r["planned"]["decisions"]
            changed += r["planned"]["changed"]
    share = changed / planned if planned else math.nan
    return Row(policy, jct, slo, oracle, wall, share)


def rank_heuristics(rows: Sequence[Row], seeds: Sequence[int], slo_target: float) -> list[Row]:
    """Heuristics with every seed, in the leaderboard's order (SLO met first, then mean JCT)."""
    full = [r for r in rows if all(s in r.jct for s in seeds)]

    def key(r: Row) -> tuple[bool, bool, float]:
        m, _ = r.mean(seeds)
        return rank_key(not meets_slo(r.slo_mean(seeds), slo_target), m)

    return sorted(full, key=lambda r: (key(r), r.policy))


def expert_ok(name: str) -> bool:
    """Whether ``name`` can be a planner's base or candidate (a heuristic without cluster
    mechanisms, its decisions expressible as env actions)."""
    try:
        make_expert(name)
    except ValueError:
        return False
    return True


def paired(a: Row, b: Row, seeds: Sequence[int]) -> dict[str, float]:
    """``a - b`` per seed: mean, 95 % CI half-width, share of ``b``'s mean, seeds where a is
    lower."""
    d = [a.jct[s] - b.jct[s] for s in seeds]
    m, h, n = mean_ci95(d)
    ref, _ = b.mean(seeds)
    return {
        "diff_mean_s": m,
        "diff_ci95_s": h,
        "diff_pct": 100.0 * m / ref,
        "diff_lo_pct": 100.0 * (m - h) / ref if math.isfinite(h) else math.nan,
        "diff_hi_pct": 100.0 * (m + h) / ref if math.isfinite(h) else math.nan,
        "better": float(sum(x < 0 for x in d)),
        "n": float(n),
    }


@dataclass
class ScenarioResult:
    """Everything the table shows for one scenario."""

    scenario: str
    seeds: list[int]
    slo_target: float
    best: Row
    ranked: list[Row]
    candidates: list[str]
    planner: Row | None = None
    oracle: Row | None = None
    n_heuristics: int = 0
    agents: list[Row] = field(default_factory=list)
    partial: list[Row] = field(default_factory=list)
    cut_s: float | None = None  # the planners' rollout cut (None: rollouts run to the end)
    belief: str = "observed"  # the honest planner's (``--belief``)
    min_t: float = 1.0  # the honest planner's (``--min-t``)
    slo_ref: str = "target"  # every planner's (``--slo-ref``)
    planners: tuple[str, ...] = (ORACLE, PLANNER)  # the planner rows run (``--planners``)

    def partial_rows(self) -> list[Row]:
        """``--decompose``'s rows that have every seed."""
        return [r for r in self.partial if self.has(r)]

    def headroom_share(self, r: Row) -> float:
        """``r``'s paired gain over the best heuristic as a share of the oracle's (NaN where
        the oracle gains nothing or its row is incomplete)."""
        if not self.has(self.oracle):
            return math.nan
        assert self.oracle is not None
        head = paired(self.oracle, self.best, self.seeds)["diff_mean_s"]
        return paired(r, self.best, self.seeds)["diff_mean_s"] / head if head < 0 else math.nan

    def has(self, r: Row | None) -> TypeGuard[Row]:
        """Whether row ``r`` has every seed."""
        return r is not None and all(s in r.jct for s in self.seeds)

    def to_json(self) -> dict[str, Any]:
        s = self.seeds

        def row(r: Row) -> dict[str, Any]:
            m, h = r.mean(s)
            out = {
                "policy": r.policy,
                "oracle": r.oracle,
                "jct_mean_s": m,
                "jct_ci95_s": h,
                "slo_attainment": r.slo_mean(s),
                "meets_slo": meets_slo(r.slo_mean(s), self.slo_target),
                "wall_s": r.wall_s,
                "jct_by_seed": {str(k): r.jct[k] for k in s},
            }
            if r is not self.best:
                out["vs_best"] = paired(r, self.best, s)
            if math.isfinite(r.changed):
                out["changed_share"] = r.changed
            return out

        data: dict[str, Any] = {
            "scenario": self.scenario,
            "seeds": s,
            "slo_target": self.slo_target,
            "base": self.best.policy,
            "candidates": self.candidates,
            "heuristics": [row(r) for r in self.ranked],
        }
        if self.cut_s is not None:
            data["rollout_cut_s"] = self.cut_s
        if self.belief != HONEST_BELIEFS[0]:
            data["belief"] = self.belief
        if self.min_t != 1.0:
            data["min_t"] = self.min_t
        if self.slo_ref != "target":
            data["slo_ref"] = self.slo_ref
        if self.has(self.planner):
            data["planner"] = row(self.planner)
        if self.has(self.oracle):
            data["oracle"] = row(self.oracle)
            head = paired(self.oracle, self.best, s)
            data["headroom_pct"] = -head["diff_pct"]
            data["headroom_at_least_15pct"] = -head["diff_pct"] >= 100 * FLAG_SHARE
        partial = [
            {**row(r), "headroom_share": self.headroom_share(r)} for r in self.partial_rows()
        ]
        if partial:
            data["partial_oracles"] = partial
        agents = []
        for r in self.agents:
            if not all(k in r.jct for k in s):
                continue
            a = row(r)
            a.update(self.agent_bar(r))
            agents.append(a)
        if agents:
            data["agents"] = agents
        return json_safe(data)  # NaN (no CI, no headroom) -> null, at every depth

    def agent_bar(self, agent: Row) -> dict[str, Any]:
        """Issue 25's bar for ``agent`` (complete rows only): ``headroom_closed`` (its paired
        gain over the best heuristic as a share of the oracle's; NaN without headroom) and
        ``meets_bar``: at least :data:`AGENT_GAIN` better than the best heuristic where the
        headroom is flagged, else at least :data:`AGENT_CLOSED` of the headroom closed; and it
        meets the SLO target either way."""
        s = self.seeds
        p = paired(agent, self.best, s)
        slo_ok = meets_slo(agent.slo_mean(s), self.slo_target)
        if not self.has(self.oracle):
            return {"headroom_closed": math.nan, "meets_bar": False}
        assert self.oracle is not None
        head = paired(self.oracle, self.best, s)
        closed = self.headroom_share(agent)
        if -head["diff_pct"] >= 100 * FLAG_SHARE:
            ok = p["diff_pct"] <= -100 * AGENT_GAIN
        elif math.isfinite(closed):
            ok = closed >= AGENT_CLOSED
        else:  # no headroom at all (the oracle is no better): level with the best heuristic
            ok = p["diff_mean_s"] <= 0
        return {"headroom_closed": closed, "meets_bar": bool(ok and slo_ok)}


def _signed(x: float, text: str) -> str:
    return ("−" if x < 0 else "+") + text.lstrip("-")


def _pct(p: Mapping[str, float]) -> str:
    m, lo, hi = p["diff_pct"], p["diff_lo_pct"], p["diff_hi_pct"]
    text = _signed(m, f"{m:.1f} %")
    if not math.isfinite(lo):
        return text
    return f"{text} [{_signed(lo, f'{lo:.1f}')}, {_signed(hi, f'{hi:.1f}')}]"


def _diff(p: Mapping[str, float]) -> str:
    m, h = p["diff_mean_s"], p["diff_ci95_s"]
    text = _signed(m, fmt_num(abs(m)))
    return text if not math.isfinite(h) else f"{text} ± {fmt_num(h)}"


def markdown(results: Sequence[ScenarioResult]) -> str:
    """The headroom table (markdown): per scenario the best heuristic, the honest planner and
    the oracle planner, each paired against the best heuristic; then one summary line each."""
    lines = [
        "| scenario | seeds | policy | jct_mean_s | SLO | vs best heuristic (paired, s) "
        "| % [95 % CI] | seeds better | s/episode |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    for res in results:
        s, n = res.seeds, len(res.seeds)
        rows: list[tuple[str, Row]] = [(f"best heuristic: **{res.best.policy}**", res.best)]
        if res.planner is not None and all(k in res.planner.jct for k in s):
            rows.append((f"planner ({res.belief} belief)", res.planner))
        if res.oracle is not None and all(k in res.oracle.jct for k in s):
            rows.append(("planner_oracle (**oracle**: true future)", res.oracle))
        for r in res.partial_rows():
            told = " and ".join(PARTIAL[r.policy])
            rows.append((f"{r.policy} (**oracle**: true {told} only)", r))
        agents = [a for a in res.agents if all(k in a.jct for k in s)]
        rows += [(f"agent: **{a.policy}**", a) for a in agents]
        for label, r in rows:
            m, h = r.mean(s)
            slo = r.slo_mean(s)
            slo_txt = fmt_num(slo) + ("" if meets_slo(slo, res.slo_target) else " (misses)")
            if r is res.best:
                vs = pct = better = "–"
            else:
                p = paired(r, res.best, s)
                vs, pct, better = _diff(p), _pct(p), f"{p['better']:.0f}/{n}"
            lines.append(
                f"| {res.scenario} | {n} | {label} | {fmt_num(m)} ± {fmt_num(h)} | {slo_txt} "
                f"| {vs} | {pct} | {better} | {r.wall_s / n:.1f} |"
            )
        runner_up = ", ".join(f"{r.policy} {fmt_num(r.mean(s)[0])}" for r in res.ranked[1:5])
        note = (
            f"- **{res.scenario}** (seeds {_seed_text(s)}, SLO target {res.slo_target:g}): "
            f"best of {res.n_heuristics} heuristics {res.best.policy}"
            f" (next: {runner_up}); planner base {res.best.policy}, candidates"
            f" {', '.join(res.candidates)}"
            + ("" if res.min_t == 1.0 else f"; the planner deviates at t >= {res.min_t:g}")
            + ("" if res.slo_ref == "target" else "; rollouts' SLO held to the base's")
            + ("." if res.cut_s is None else f"; rollouts cut at {res.cut_s / 3600:g} h.")
        )
        if res.has(res.oracle):
            head = paired(res.oracle, res.best, s)
            share = round(-head["diff_pct"], 1) + 0.0  # no "-0.0"
            flag = "**at least 15 %**" if share >= 100 * FLAG_SHARE else "below 15 %"
            note += (
                f" Headroom (oracle − best): {_diff(head)} s, {share:.1f} % of the best"
                f" heuristic's mean ({flag})"
            )
            if res.has(res.planner):
                honest = paired(res.planner, res.best, s)
                if head["diff_mean_s"] < 0 and honest["diff_mean_s"] < 0:
                    reach = f"{100 * honest['diff_mean_s'] / head['diff_mean_s']:.0f} % of it"
                else:
                    reach = "none of it"
                note += (
                    f"; the honest planner reaches {_pct(honest)}, i.e. {reach}"
                    f" (deviates from its base on {100 * res.planner.changed:.0f} % of planned"
                    f" decisions)."
                )
            elif PLANNER in res.planners:
                note += "; the honest planner's row is incomplete."
            else:
                note += "; the honest planner not run (`--planners oracle`)."
            for r in res.partial_rows():
                share = res.headroom_share(r)
                told = " and ".join(PARTIAL[r.policy])
                if not math.isfinite(share):
                    tail = "."
                elif share < 0:
                    tail = ", none of the headroom (behind the best heuristic)."
                else:
                    tail = f", {100 * share:.0f} % of the headroom."
                note += f" Told the true {told} only: {_pct(paired(r, res.best, s))}{tail}"
        elif ORACLE in res.planners:
            note += " Planner rows incomplete."
        else:
            note += " The oracle not run (`--planners honest`): no headroom."
        for a in agents:
            p = paired(a, res.best, s)
            note += f" Agent {a.policy}: {_pct(p)} against the best heuristic"
            if res.has(res.oracle):
                bar = res.agent_bar(a)
                closed = bar["headroom_closed"]
                if math.isfinite(closed):
                    note += (
                        f", {100 * closed:.0f} % of the headroom closed"
                        if closed >= 0
                        else ", none of the headroom closed (behind the best heuristic)"
                    )
                met = "meets" if bar["meets_bar"] else "misses"
                note += f": {met} issue 25's bar."
            else:
                note += "."
        notes.append(note)
    return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


def _seed_text(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}-{s[-1]}"
    return ",".join(str(x) for x in s)


# ============================================================================ the command
def parse_seeds(text: str) -> list[int]:
    """``7101-7110``, ``1,2,5`` or both (``1-3,9``): distinct seeds >= 0, in order."""
    try:
        return seed_spec(text)
    except ValueError as e:
        raise InputError(f"--seeds: {e} (got {text!r})") from None


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scenarios", default="default", help="comma-separated names or YAML paths")
    ap.add_argument("--seeds", default="7101-7110", help="e.g. 7101-7110 or 1,2,5")
    ap.add_argument("--out", required=True, type=output_dir, help="output directory (resumable)")
    ap.add_argument("--samples", type=positive_int, default=8, help="sampled futures per decision")
    ap.add_argument(
        "--horizon", type=non_negative_int, default=8, help="decisions a candidate keeps making"
    )
    ap.add_argument(
        "--cut-h",
        type=positive_float,
        default=None,
        metavar="H",
        help="cut each rollout H simulated hours after the decision (default: run to the end)",
    )
    ap.add_argument(
        "--belief",
        choices=HONEST_BELIEFS,
        default=HONEST_BELIEFS[0],
        help="the honest planner's belief (agents/planner.py; default: %(default)s)",
    )
    ap.add_argument(
        "--min-t",
        type=non_negative_float,
        default=1.0,
        metavar="T",
        help="a candidate replaces the plan only if its paired gain over the sampled futures is"
        " T standard errors clear of zero (default: %(default)s)",
    )
    ap.add_argument(
        "--slo-ref",
        choices=("target", "base"),
        default="target",
        help="what a candidate's SLO attainment is held to in the planners' rollouts: the"
        " scenario's target, or the base heuristic's where that misses it (JCT first;"
        " agents/planner.py; default: %(default)s)",
    )
    ap.add_argument(
        "--planners",
        choices=PLANNER_CHOICES,
        default="both",
        help="which planner rows run: the oracle (true future), the honest planner, or both"
        " (default: %(default)s; on the PAI fleets the honest planner costs hours an episode)",
    )
    ap.add_argument(
        "--top", type=positive_int, default=5, help="the N best heuristics (base included) propose"
    )
    ap.add_argument(
        "--agents",
        default="",
        help="comma list of learned agents (shipped names or model.zip paths) to judge by the bar",
    )
    ap.add_argument(
        "--decompose",
        action="store_true",
        help="add the planner told the true durations, the true arrivals, or both (oracles)",
    )
    ap.add_argument("--workers", type=positive_int, default=1, help="processes (default 1)")
    add_backend_args(ap)
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap


def _scenarios(text: str) -> dict[str, tuple[str, float]]:
    out: dict[str, tuple[str, float]] = {}
    for name in (t.strip() for t in text.split(",")):
        if not name:
            continue
        try:
            cfg = load_scenario(name)
        except ConfigError as e:
            raise InputError(f"--scenarios: {e}") from None
        if cfg.name in out:
            raise InputError(f"--scenarios: scenario {cfg.name!r} given twice")
        out[cfg.name] = (str(Path(cfg.source_path or name).resolve()), cfg.slo_target)
    if not out:
        raise InputError(f"--scenarios: no scenario in {text!r}")
    return out


def _agents(text: str) -> list[str]:
    """``--agents``: each loaded once here, so a bad name or checkpoint is one line, exit 2."""
    out: list[str] = []
    for name in (t.strip() for t in text.split(",")):
        if not name or name in out:
            continue
        if name in (PLANNER, ORACLE):
            raise InputError(f"--agents: {name} is a row of the table already")
        try:
            make_policy(name)
        except Exception as e:  # unknown name, unreadable or incompatible checkpoint
            lines = str(e).strip().splitlines()
            raise InputError(f"--agents: {lines[0] if lines else type(e).__name__}") from None
        out.append(name)
    return out


def _heuristics() -> list[str]:
    return [n for n in policy_names("policy") if not getattr(make_policy(n), "oracle", False)]


def headroom(
    out: Path,
    scenarios: Mapping[str, tuple[str, float]],
    seeds: Sequence[int],
    samples: int = 8,
    horizon: int = 8,
    top: int = 5,
    workers: int = 1,
    quiet: bool = False,
    log: Any = None,
    agents: Sequence[str] = (),
    decompose: bool = False,
    backend: str = "local",
    address: str | None = None,
    cut_s: float | None = None,
    belief: str = "observed",
    min_t: float = 1.0,
    slo_ref: str = "target",
    planners: Sequence[str] = (ORACLE, PLANNER),
) -> tuple[list[ScenarioResult], list[str]]:
    """Compute (or load) every cell and return the per-scenario results and error lines; the
    missing cells run on ``backend`` (:func:`gpu_sharing_gym.backends.run_tasks`: ``local``
    processes or Ray tasks, ``address`` an existing Ray cluster). ``planners``: which of the
    oracle (``planner_oracle``) and the honest planner (``planner``) run; a row not run is
    left out of the table, its cells neither computed nor read."""
    planners = tuple(p for p in (ORACLE, PLANNER) if p in planners)
    heur = _heuristics()
    hcells = [
        Cell(h, scen, path, seed)
        for scen, (path, _) in scenarios.items()
        for h in heur
        for seed in seeds
    ]
    errors: list[str] = []
    hres, err = run_cells(out, hcells, workers, "headroom: heuristics", quiet, backend, address)
    errors += err
    results: list[ScenarioResult] = []
    pcells: list[Cell] = []
    for scen, (path, target) in scenarios.items():
        rows = [
            rows_from({c: r for c, r in hres.items() if c.scenario == scen}, h, seeds) for h in heur
        ]
        ranked = rank_heuristics(rows, seeds, target)
        experts = [r for r in ranked if expert_ok(r.policy)]
        if not experts:
            raise InputError(f"{scen}: no heuristic without cluster mechanisms finished every seed")
        best = experts[0]
        if ranked[0] is not best and log is not None:
            print(f"{scen}: {ranked[0].policy} ranks first but has cluster mechanisms;"
                  f" the planner's base is {best.policy}", file=log)  # fmt: skip
        # the other top heuristics, then the planner's built-in candidates (time-sharing, MPS
        # first-fit, pack) not among them
        cands = [r.policy for r in experts[1:top]]
        cands += [c for c in CANDIDATES if c not in cands and c != best.policy]
        res = ScenarioResult(
            scen, list(seeds), target, best, ranked, cands, n_heuristics=len(heur), cut_s=cut_s,
            belief=belief, min_t=min_t, slo_ref=slo_ref, planners=planners,
        )  # fmt: skip
        results.append(res)
        for seed in seeds:  # seed-major: a partial run still pairs both planners by seed
            for name, oracle in ((ORACLE, True), (PLANNER, False)):
                if name not in planners:
                    continue
                params = planner_params(
                    best.policy, cands, samples, horizon, oracle, (), cut_s, belief, min_t, slo_ref
                )
                pcells.append(Cell(name, scen, path, seed, params))
            for name, know in PARTIAL.items() if decompose else ():
                params = planner_params(
                    best.policy,
                    cands,
                    samples,
                    horizon,
                    False,
                    know,
                    cut_s,
                    "observed",
                    min_t,
                    slo_ref,
                )
                pcells.append(Cell(name, scen, path, seed, params))
    # an agent's cells carry its checkpoint's hash: a replaced checkpoint is evaluated again
    digests = {a: policy_digest(a) for a in agents}
    acells = [
        Cell(a, scen, path, seed, (("checkpoint", digests[a]),) if digests[a] else ())
        for scen, (path, _) in scenarios.items()
        for a in agents
        for seed in seeds
    ]
    pres, err = run_cells(
        out, pcells + acells, workers, "headroom: planners and agents", quiet, backend, address
    )
    errors += err
    for res in results:
        mine = {c: r for c, r in pres.items() if c.scenario == res.scenario}
        res.planner = rows_from(mine, PLANNER, seeds) if PLANNER in planners else None
        res.oracle = rows_from(mine, ORACLE, seeds) if ORACLE in planners else None
        res.agents = [rows_from(mine, a, seeds) for a in agents]
        res.partial = [rows_from(mine, n, seeds) for n in PARTIAL] if decompose else []
    return results, errors


def write_outputs(out: Path, results: Sequence[ScenarioResult]) -> str:
    table = markdown(results)
    atomic_write_text(out / "headroom.md", table)
    data = [r.to_json() for r in results]
    atomic_write_text(out / "headroom.json", json.dumps(data, indent=1, allow_nan=False) + "\n")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
        scenarios = _scenarios(args.scenarios)
        agents = _agents(args.agents)
        if args.out.exists() and not args.out.is_dir():
            raise InputError(f"--out: {args.out} exists and is not a directory")
        check_backend_args(args)
    except (InputError, BackendError) as e:
        return fail(PROG, str(e))
    t0 = time.monotonic()
    try:
        with sigterm_raises(), backend_session(args.backend, args.workers, args.ray_address):
            results, errors = headroom(
                args.out, scenarios, seeds, args.samples, args.horizon, args.top,
                args.workers, args.quiet, log=sys.stderr, agents=agents,
                decompose=args.decompose, backend=args.backend, address=args.ray_address,
                cut_s=None if args.cut_h is None else 3600.0 * args.cut_h, belief=args.belief,
                min_t=args.min_t, slo_ref=args.slo_ref,
                planners=PLANNER_CHOICES[args.planners],
            )  # fmt: skip
    except KeyboardInterrupt as e:
        print(
            f"{PROG}: {stopped_by(e)}; finished episodes are saved under {args.out}/cells:"
            " rerun the same command to resume",
            file=sys.stderr,
        )
        return exit_code(e)
    except (InputError, PlannerError, BackendError) as e:
        return fail(PROG, str(e))
    sys.stdout.write(write_outputs(args.out, results))
    print(f"wall time of this run: {time.monotonic() - t0:.0f} s; table in {args.out}/headroom.md")
    for line in errors:
        print(f"{PROG}: failed: {line}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    exit_process(main())
