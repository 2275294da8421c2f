"""PAI fidelity setups (issue 23): the coarse SJF predictor has no group tag; the busy PAI
scenario is the pinned fidelity setup at a higher load and is in the standard leaderboard set."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import yaml

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import build_workload, make_simulator
from gpu_sharing_gym.fidelity.common import scenario
from gpu_sharing_gym.fidelity.pai import SJF_PREDICTORS

ROOT = Path(__file__).resolve().parents[1]


def _cfg(groups: bool) -> ScenarioConfig:
    return scenario(
        "pai-sjf",
        **{"workload.offline.arrival_window_h": 2.0, "workload.offline.estimate_groups": groups},
    )


def _errors(groups: bool) -> list[float]:
    """|log(estimate / truth)| of the started offline jobs with a group, ``pai-sjf`` (2 h,
    seed 7, ``sjf_predicted``)."""
    sim = make_simulator(_cfg(groups))
    run_episode(make_policy("sjf_predicted"), sim, 7)
    return [
        abs(math.log(st.spec.est_work_s / st.spec.work_s))
        for st in sim.jobs.values()
        if not st.online and st.ledger.first_start_t >= 0 and st.spec.group
    ]


def test_coarse_predictor_ignores_the_group_tag() -> None:
    assert SJF_PREDICTORS["sjf_coarse"]["estimate_groups"] is False
    assert "estimate_groups" not in SJF_PREDICTORS["sjf_predicted"]
    wl_g, wl_n = build_workload(_cfg(True)), build_workload(_cfg(False))
    assert "group" in wl_g.pred_cfg.inputs  # type: ignore[attr-defined]
    assert "group" not in wl_n.pred_cfg.inputs  # type: ignore[attr-defined]
    # the same jobs; only the predictor's inputs differ
    assert wl_g(np.random.default_rng(7)) == wl_n(np.random.default_rng(7))
    # the group tag is what makes recurring jobs predictable (PAI Fig. 12)
    assert float(np.median(_errors(True))) < 0.5 * float(np.median(_errors(False)))


def test_busy_pai_is_the_pinned_setup_busier_and_a_standard_scenario() -> None:
    # pai-busy: the fidelity PAI fleet and tasks at 95/h, above the 80/h pin (its YAML says why)
    busy, pinned = load_scenario("pai-busy"), scenario("pai")
    assert busy.cluster == pinned.cluster
    rate = busy.workload.offline.params["arrivals_per_h"]
    assert rate == 95.0 > pinned.workload.offline.params["arrivals_per_h"] == 80.0
    same_rate = {**busy.workload.offline.params, "arrivals_per_h": 80.0}
    assert dataclasses.replace(busy.workload.offline, params=same_rate) == pinned.workload.offline
    assert busy.workload.online.num_services > 0 and busy.slo_target == 0.95
    board = yaml.safe_load((ROOT / "configs/leaderboards/standard.yaml").read_text())
    assert "pai-busy" in board["scenarios"]
