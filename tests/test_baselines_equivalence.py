"""Golden results of the PAI and MuxFlow baselines: fixed-seed episodes are bit-identical.

``muxflow``, ``reserve_pack``, ``load_balance`` and ``sjf_predicted`` are vectorised for large
fleets (issue 9: per-GPU allocation sums kept by the cluster, candidate GPUs and KM weights
computed as arrays). That may not change a single decision: this test replays fixed-seed
episodes and compares every metric (exact floats, as ``float.hex``) and a hash of the
decision sequence with ``tests/golden/baselines.json``, whose metrics were recorded from the
code before the vectorisation.

A deliberate change of a baseline (not an optimisation) regenerates the file::

    python tests/test_baselines_equivalence.py --regen
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines import make_policy
from gpu_sharing_gym.baselines.base import HeuristicPolicy
from tests.helpers import assert_golden_metrics, numeric_stack

GOLDEN_FILE = Path(__file__).resolve().parent / "golden" / "baselines.json"

#: (scenario, policy, seed)
EPISODES: tuple[tuple[str, str, int], ...] = (
    ("default", "muxflow", 0),
    ("default", "reserve_pack", 0),
    ("pai-hetero", "muxflow", 0),
    ("pai-hetero", "reserve_pack", 0),
    ("pai-hetero", "load_balance", 0),
    ("pai-hetero", "sjf_predicted", 0),
)


def _hex(v: Any) -> str:
    x = float(v)
    return "nan" if math.isnan(x) else x.hex()


def episode_record(scenario: str, policy: str, seed: int) -> dict[str, Any]:
    """Every metric (float.hex) and a hash of (time, decision) per call of ``decide``."""
    sim = make_simulator(load_scenario(scenario))
    pol = make_policy(policy)
    assert isinstance(pol, HeuristicPolicy)
    h = hashlib.sha256()
    calls = 0
    decide = pol.decide

    def recorded(view: ClusterView) -> Decision | None:
        nonlocal calls
        d = decide(view)
        calls += 1
        step = "-" if d is None else f"{d.job_id},{d.gpu},{d.option}"
        h.update(f"{_hex(view.now_s)}:{step};".encode())
        return d

    pol.decide = recorded  # type: ignore[method-assign]
    m = run_episode(pol, sim, seed=seed)
    return {
        "metrics": {k: _hex(v) for k, v in sorted(m.items())},
        "decide_calls": calls,
        "decisions_sha256": h.hexdigest(),
    }


def _key(case: tuple[str, str, int]) -> str:
    return "/".join(map(str, case))


@pytest.mark.parametrize("case", EPISODES, ids=[_key(c) for c in EPISODES])
def test_baseline_episode_is_golden(case: tuple[str, str, int]) -> None:
    if not GOLDEN_FILE.exists():
        pytest.fail(f"{GOLDEN_FILE} is missing: run `python {__file__} --regen`")
    golden = json.loads(GOLDEN_FILE.read_text())
    want = golden[_key(case)]
    # bit for bit under the numeric stack the file was made with (tests/test_golden.py)
    exact = golden.get("_stack") == numeric_stack()
    got = episode_record(*case)
    assert_golden_metrics(got["metrics"], want["metrics"], exact)  # names the metric that moved
    if exact:
        assert got["decide_calls"] == want["decide_calls"]
        assert got["decisions_sha256"] == want["decisions_sha256"]


def regenerate() -> None:
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    records: dict[str, Any] = {_key(c): episode_record(*c) for c in EPISODES}
    records["_stack"] = numeric_stack()
    GOLDEN_FILE.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN_FILE} ({len(records)} episodes)")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit("usage: python tests/test_baselines_equivalence.py --regen")
    regenerate()
