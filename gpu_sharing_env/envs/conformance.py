"""A conformance test users run on their own scenarios (like PettingZoo's ``api_test``).

    from gpu_sharing_env.envs.conformance import api_test
    report = api_test("configs/scenarios/my_cluster.yaml", num_steps=300)

or ``python -m gpu_sharing_env.envs.conformance my_cluster.yaml [--interface v1]``. It raises
:class:`ConformanceError` (an ``AssertionError``) naming the first broken rule:

* masks are well formed: 1-D int8 of the action space's size, binary, never all zero, wait
  legal, equal to ``info["action_mask"]``, and only legal where a job and a real GPU are;
* every masked-legal action is accepted by the simulator's ``check``, and sampled ones step
  without error (on copies of the env) leaving the capacity invariants intact;
* masked-out actions are rejected: ``invalid_action="raise"`` raises ``ValueError``, ``"noop"``
  flags ``info["invalid_action"]`` and behaves exactly as *wait*;
* observations lie in the observation space, rewards are finite, episodes end with the metric
  schema in ``info["metrics"]``;
* determinism: two same-seeded envs sampling through the mask with same-seeded action spaces
  produce identical observations, rewards, masks and terminations (across automatic
  ``reset()`` calls too);
* the cluster's invariants (``sim.cluster.check_invariants()``) hold after every step.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.interfaces import INTERFACES, CandidateMoves
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_env.sim.codec import WAIT

EnvSource = str | os.PathLike[str] | ScenarioConfig | Callable[[], gym.Env[Any, Any]]


class ConformanceError(AssertionError):
    """The env breaks a rule of the contract; the message names it."""


@dataclass
class ConformanceReport:
    """What was exercised."""

    steps: int = 0
    episodes: int = 0
    legal_checked: int = 0
    legal_stepped: int = 0
    illegal_checked: int = 0
    illegal_stepped: int = 0


def _require(ok: bool, msg: str) -> None:
    if not ok:
        raise ConformanceError(msg)


def _factory(source: EnvSource, env_kwargs: dict[str, Any]) -> Callable[[], gym.Env[Any, Any]]:
    if callable(source) and not isinstance(source, ScenarioConfig):
        return source
    return lambda: GpuSharingEnv(scenario=source, **env_kwargs)  # type: ignore[arg-type]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return isinstance(b, tuple | list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def check_mask(env: GpuSharingEnv, mask: np.ndarray, where: str) -> None:
    """The mask's form (1-D, int8, binary, wait legal, legal only on real slots and GPUs, or
    for ``GpuSharing-v2`` and ``-v3`` on its candidates)."""
    n = int(env.action_space.n)  # type: ignore[attr-defined]
    _require(isinstance(mask, np.ndarray), f"{where}: mask is not a numpy array")
    _require(mask.ndim == 1 and mask.shape == (n,), f"{where}: mask shape {mask.shape} != ({n},)")
    _require(mask.dtype == np.int8, f"{where}: mask dtype {mask.dtype} != int8")
    _require(bool(np.all((mask == 0) | (mask == 1))), f"{where}: mask is not binary")
    _require(int(mask.sum()) >= 1, f"{where}: mask is all zero")
    _require(mask[WAIT] == 1, f"{where}: wait (action 0) is not legal")
    if isinstance(env.interface, CandidateMoves):  # the first len(moves) actions, no others
        k = len(env.interface.candidates.moves)
        _require(bool(mask[:k].all()) and not mask[k:].any(), f"{where}: mask != candidates")
        return
    sim = env.sim
    table = mask[1:].reshape(env.codec.window, env.max_gpus, env.codec.n_options)
    n_window = len(sim.window_jobs())
    _require(not table[n_window:].any(), f"{where}: an empty queue slot has a legal action")
    _require(not table[:, sim.n_gpus :].any(), f"{where}: a padding GPU has a legal action")
    _require(
        not table[:, :, len(sim.options) :].any(), f"{where}: a padding option has a legal action"
    )
    if not sim.done and n_window:
        _require(
            bool(mask[1:].any()),
            f"{where}: the env stopped at a point with nothing to decide (only wait legal)",
        )


def api_test(
    source: EnvSource = "default",
    *,
    num_steps: int = 300,
    seed: int = 0,
    max_legal_checks: int = 256,
    probes: int = 1,
    probe_every: int = 5,
    **env_kwargs: Any,
) -> ConformanceReport:
    """Run the conformance checks (module docstring) and return what was exercised.

    Args:
        source: A scenario name, YAML path or ``ScenarioConfig`` (the env is built with
            ``env_kwargs``, e.g. ``interface="v2"``; v0 by default), or a zero-argument factory returning a ``GpuSharing`` env
            (possibly wrapped).
        num_steps: Steps of the main trajectory (episodes restart as needed).
        seed: Seed of the first episode and of the action sampling.
        max_legal_checks: Legal actions checked against the simulator per step (sampled when
            more are legal).
        probes: Legal and illegal actions actually stepped on copies of the env per probed step.
        probe_every: Probe (step copies of the env) every this many steps; copies cost
            milliseconds, the other checks microseconds.
    """
    make = _factory(source, env_kwargs)
    env_a, env_b = make(), make()
    ua, ub = env_a.unwrapped, env_b.unwrapped
    _require(isinstance(ua, GpuSharingEnv), "the factory must build a GpuSharingEnv")
    assert isinstance(ua, GpuSharingEnv) and isinstance(ub, GpuSharingEnv)
    rng = np.random.default_rng(seed)
    report = ConformanceReport()
    obs_a, info_a = env_a.reset(seed=seed)
    obs_b, info_b = env_b.reset(seed=seed)
    env_a.action_space.seed(seed)
    env_b.action_space.seed(seed)
    for step in range(num_steps):
        where = f"step {step} (t={ua.sim.now:.1f}s)"
        _require(obs_a in env_a.observation_space, f"{where}: observation outside the space")
        _require(_same(obs_a, obs_b), f"{where}: same-seeded envs observe differently")
        mask = ua.action_masks()
        check_mask(ua, mask, where)
        _require("action_mask" in info_a, f"{where}: info has no action_mask")
        _require(_same(mask, info_a["action_mask"]), f"{where}: action_masks() != info mask")
        _require(_same(mask, ub.action_masks()), f"{where}: same-seeded envs mask differently")
        ua.sim.cluster.check_invariants()
        n_probe = probes if step % probe_every == 0 else 0
        _check_legal(ua, mask, rng, max_legal_checks, n_probe, where, report)
        _check_illegal(ua, mask, rng, n_probe, where, report)
        a = env_a.action_space.sample(mask=mask)
        b = env_b.action_space.sample(mask=ub.action_masks())
        _require(int(a) == int(b), f"{where}: same-seeded action spaces sample differently")
        obs_a, r_a, term_a, trunc_a, info_a = env_a.step(a)
        obs_b, r_b, term_b, trunc_b, info_b = env_b.step(b)
        report.steps += 1
        _require(math.isfinite(float(r_a)), f"{where}: reward {r_a} is not finite")
        _require(_same(float(r_a), float(r_b)), f"{where}: same-seeded rewards differ")
        _require((term_a, trunc_a) == (term_b, trunc_b), f"{where}: episode ends differ")
        _require(_same(info_a, info_b), f"{where}: same-seeded infos differ")
        if term_a or trunc_a:
            if term_a:
                missing = [k for k in METRIC_NAMES if k not in info_a.get("metrics", {})]
                _require(not missing, f"{where}: info['metrics'] lacks {missing}")
            report.episodes += 1
            obs_a, info_a = env_a.reset()
            obs_b, info_b = env_b.reset()
    ua.sim.cluster.check_invariants()
    env_a.close()
    env_b.close()
    return report


def _check_legal(
    env: GpuSharingEnv,
    mask: np.ndarray,
    rng: np.random.Generator,
    max_checks: int,
    probes: int,
    where: str,
    report: ConformanceReport,
) -> None:
    legal = np.flatnonzero(mask[1:]) + 1
    if legal.size > max_checks:
        legal = rng.choice(legal, size=max_checks, replace=False)
    for a in legal:
        why = env.explain(int(a))
        _require(why is None, f"{where}: masked-legal action {a} rejected: {why}")
        report.legal_checked += 1
    for a in rng.permutation(legal)[:probes]:
        probe = copy.deepcopy(env)
        probe.invalid_action = "raise"
        try:
            obs, *_ = probe.step(int(a))
        except ValueError as e:
            raise ConformanceError(f"{where}: masked-legal action {a} failed: {e}") from None
        probe.sim.cluster.check_invariants()
        _require(obs in probe.observation_space, f"{where}: observation outside the space")
        report.legal_stepped += 1


def _check_illegal(
    env: GpuSharingEnv,
    mask: np.ndarray,
    rng: np.random.Generator,
    probes: int,
    where: str,
    report: ConformanceReport,
) -> None:
    illegal = np.flatnonzero(mask == 0)
    if illegal.size:
        a = int(illegal[rng.integers(illegal.size)])
        _require(env.explain(a) is not None, f"{where}: masked-out action {a} has no reason")
        report.illegal_checked += 1
    for a in rng.permutation(illegal)[:probes]:
        a = int(a)
        strict = copy.deepcopy(env)
        strict.invalid_action = "raise"
        try:
            strict.step(a)
        except ValueError:
            pass
        else:
            raise ConformanceError(f"{where}: illegal action {a} accepted with 'raise'")
        lax, waiter = copy.deepcopy(env), copy.deepcopy(env)
        lax.invalid_action = "noop"
        obs_l, r_l, term_l, _, info_l = lax.step(a)
        obs_w, r_w, term_w, _, _ = waiter.step(WAIT)
        _require(info_l.get("invalid_action") is True, f"{where}: 'noop' did not flag {a}")
        _require(
            _same(obs_l, obs_w) and _same(float(r_l), float(r_w)) and term_l == term_w,
            f"{where}: 'noop' on illegal action {a} did not behave as wait",
        )
        report.illegal_stepped += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the GpuSharing conformance checks.")
    ap.add_argument("scenario", help="scenario name or YAML path")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-gpus", type=int, default=None, help="v0 and v1 only")
    ap.add_argument("--interface", default="v0", choices=list(INTERFACES), help="the env version")
    args = ap.parse_args(argv)
    kw = {} if args.max_gpus is None else {"max_gpus": args.max_gpus}
    try:
        rep = api_test(
            args.scenario, num_steps=args.steps, seed=args.seed, interface=args.interface, **kw
        )
    except ConformanceError as e:
        print(f"conformance: FAILED: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"conformance: error: {e}", file=sys.stderr)
        return 2
    print(f"conformance: passed ({rep})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
