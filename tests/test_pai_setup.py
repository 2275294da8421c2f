"""PAI fidelity setups (issue 23): the coarse SJF predictor has no group tag; the busy PAI
scenario is the pinned fidelity setup at a higher load and is in the standard leaderboard set."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import yaml

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import build_workload
from gpu_sharing_gym.fidelity.common import scenario
from gpu_sharing_gym.fidelity.pai import SJF_PREDICTORS

ROOT = Path(__file__).resolve().parents[1]


def _jobs(groups: bool) -> list:
    cfg = scenario(
        "pai-sjf",
        **{"workload.offline.arrival_window_h": 2.0, "workload.offline.estimate_groups": groups},
    )
    return build_workload(cfg)(np.random.default_rng(7))


def test_coarse_predictor_ignores_the_group_tag() -> None:
    assert SJF_PREDICTORS["sjf_coarse"]["estimate_groups"] is False
    assert "estimate_groups" not in SJF_PREDICTORS["sjf_predicted"]
    with_g, without = _jobs(True), _jobs(False)
    assert [j.work_s for j in with_g] == [j.work_s for j in without]
    seen: set[str] = set()
    moved = 0
    for a, b in zip(with_g, without, strict=True):
        if a.group and a.group in seen:  # group history exists: only PAI's predictor uses it
            moved += a.est_work_s != b.est_work_s
        else:
            assert a.est_work_s == b.est_work_s
        if a.group:
            seen.add(a.group)
    assert moved > 0


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
