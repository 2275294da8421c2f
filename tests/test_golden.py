"""Golden results: episodes for fixed seeds are bit-identical to the recorded ones.

The simulator's hot paths are optimised (incremental state, caches, vectorised numpy); none of
that may change a single result. This test replays fixed-seed episodes of the reference
policies and a fixed-seed, random-masked-action ``GpuSharing-v0`` rollout and compares every
metric (exact floats, as ``float.hex``) and a hash of every observation, reward and mask with
``tests/golden/*.json``, recorded from the code before the optimisations.

Paper baselines (``muxflow``, ...) are deliberately left out: their re-implementations may be
changed on purpose. The SysMonitor and dynamic-SM mechanisms they deploy are covered by running
``first_fit`` with the mechanisms switched on.

Bit-identity holds for one numeric stack: each file records the numpy/scipy versions it was
made with (``_stack``). Under another stack (a numpy release moves the last bit of some sums)
metrics are compared to a relative 1e-9 and the hashes, which one ulp changes, are not.

A deliberate change of the model (not an optimisation) regenerates the files::

    python tests/test_golden.py --regen
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_gym.baselines import make_policy
from tests.helpers import assert_golden_metrics, numeric_stack

GOLDEN = Path(__file__).resolve().parent / "golden"
METRICS_FILE = GOLDEN / "metrics.json"
ENV_FILE = GOLDEN / "env.json"

POLICIES = ("first_fit", "time_sharing", "random", "fifo_exclusive")
#: (scenario, policy, seed, mechanisms switched on before the episode)
EPISODES: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    *(("default", p, s, ()) for p in POLICIES for s in (0, 1)),
    *(("mig-a100", p, 0, ()) for p in POLICIES),
    *(("muxflow-t4", p, 0, ()) for p in ("first_fit", "time_sharing")),
    ("muxflow-t4", "first_fit", 1, ("protection", "dynamic_sm")),
    ("muxflow-t4", "time_sharing", 1, ("protection",)),
    ("pai-hetero", "first_fit", 0, ()),
)
#: (scenario, episode seed, action seed, steps) of the env rollouts.
ROLLOUTS: tuple[tuple[str, int, int, int], ...] = (
    ("default", 0, 0, 300),
    ("muxflow-t4", 3, 1, 300),
    ("mig-a100", 5, 2, 300),
)


def _hex(v: Any) -> str:
    x = float(v)
    return "nan" if math.isnan(x) else x.hex()


def _key(scenario: str, policy: str, seed: int, mech: tuple[str, ...]) -> str:
    return f"{scenario}/{policy}/{seed}" + (f"+{'+'.join(mech)}" if mech else "")


def episode_record(scenario: str, policy: str, seed: int, mech: tuple[str, ...]) -> dict[str, Any]:
    """Every metric (float.hex) plus a hash of the per-tick time series and the event count."""
    cfg = load_scenario(scenario)
    if mech:  # the scenario's own mechanisms (run_episode resets a simulator to them)
        mechanisms = dataclasses.replace(cfg.mechanisms, **dict.fromkeys(mech, True))
        cfg = dataclasses.replace(cfg, mechanisms=mechanisms)
    sim = make_simulator(cfg)
    m = run_episode(make_policy(policy), sim, seed=seed)
    h = hashlib.sha256()
    for row in sim.timeseries:
        h.update(",".join(_hex(x) for x in row).encode())
    return {
        "metrics": {k: _hex(v) for k, v in sorted(m.items())},
        "timeseries_sha256": h.hexdigest(),
        "n_events": sim.n_events,
    }


def rollout_record(scenario: str, seed: int, action_seed: int, steps: int) -> dict[str, Any]:
    """A hash of observations, rewards, masks and flags of a random masked rollout."""
    import gymnasium as gym

    import gpu_sharing_env  # noqa: F401  (registers GpuSharing-v0)

    env = gym.make("GpuSharing-v0", scenario=scenario)
    rng = np.random.default_rng(action_seed)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    episodes = 0
    final: dict[str, str] = {}

    def feed(obs: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        for k in sorted(obs):
            h.update(k.encode())
            h.update(np.ascontiguousarray(obs[k]).tobytes())
        h.update(np.ascontiguousarray(info["action_mask"]).tobytes())
        h.update(_hex(info["sim_time_s"]).encode())

    feed(obs, info)
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        a = int(legal[rng.integers(legal.size)])
        obs, r, term, trunc, info = env.step(a)
        feed(obs, info)
        h.update(f"{a}|{_hex(r)}|{term}|{trunc}".encode())
        if term or trunc:
            episodes += 1
            final = {k: _hex(v) for k, v in sorted(info["metrics"].items())}
            h.update(json.dumps(final, sort_keys=True).encode())
            obs, info = env.reset()
            feed(obs, info)
    env.close()
    return {"sha256": h.hexdigest(), "episodes": episodes, "last_metrics": final}


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `python tests/test_golden.py --regen`")
    return dict(json.loads(path.read_text()))


@pytest.mark.parametrize("case", EPISODES, ids=[_key(*c) for c in EPISODES])
def test_episode_metrics_are_golden(case: tuple[str, str, int, tuple[str, ...]]) -> None:
    golden = _load(METRICS_FILE)
    want = golden[_key(*case)]
    exact = golden.get("_stack") == numeric_stack()
    got = episode_record(*case)
    # metric by metric first: a failure names the metric that moved
    assert_golden_metrics(got["metrics"], want["metrics"], exact)
    if exact:
        assert got["n_events"] == want["n_events"]
        assert got["timeseries_sha256"] == want["timeseries_sha256"]


@pytest.mark.parametrize("case", ROLLOUTS, ids=[f"{c[0]}/{c[1]}" for c in ROLLOUTS])
def test_env_rollout_is_golden(case: tuple[str, int, int, int]) -> None:
    golden = _load(ENV_FILE)
    want = golden[f"{case[0]}/{case[1]}/{case[2]}/{case[3]}"]
    exact = golden.get("_stack") == numeric_stack()
    got = rollout_record(*case)
    assert_golden_metrics(got["last_metrics"], want["last_metrics"], exact)
    assert got["episodes"] == want["episodes"]
    if exact:
        assert got["sha256"] == want["sha256"]


def test_another_numeric_stack_tolerates_an_ulp_but_not_a_model_change() -> None:
    want = {"a": (1.0).hex(), "b": (2.5).hex()}
    ulp = {"a": math.nextafter(1.0, 2.0).hex(), "b": (2.5).hex()}
    assert_golden_metrics(ulp, want, exact=False)
    with pytest.raises(AssertionError):
        assert_golden_metrics(ulp, want, exact=True)
    with pytest.raises(AssertionError, match="'a'"):
        assert_golden_metrics({"a": (1.0 + 1e-6).hex(), "b": (2.5).hex()}, want, exact=False)


def regenerate() -> None:
    GOLDEN.mkdir(exist_ok=True)
    metrics: dict[str, Any] = {_key(*c): episode_record(*c) for c in EPISODES}
    metrics["_stack"] = numeric_stack()
    METRICS_FILE.write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
    rollouts: dict[str, Any] = {"/".join(map(str, c)): rollout_record(*c) for c in ROLLOUTS}
    rollouts["_stack"] = numeric_stack()
    ENV_FILE.write_text(json.dumps(rollouts, indent=1, sort_keys=True) + "\n")
    print(f"wrote {METRICS_FILE} ({len(metrics)} episodes) and {ENV_FILE} ({len(rollouts)})")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit("usage: python tests/test_golden.py --regen")
    regenerate()
