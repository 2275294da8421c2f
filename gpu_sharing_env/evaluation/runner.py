"""The evaluation loop every policy runs through, and per-seed records.

The loop is the env's step semantics without the Gymnasium wrapper: while a decision is needed,
ask the policy; *wait* (or a decision-less turn) advances the simulator to the next event.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_env.physics.interference import MODEL_VERSION
from gpu_sharing_env.policy import HeuristicPolicy, Policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload import WORKLOAD_VERSION

#: Safety net against a policy that loops without time passing.
MAX_DECISIONS_PER_INSTANT = 100_000


def _scope(policy: Policy) -> str:
    """The simulator's ``decision_scope`` for ``policy``: a heuristic may declare that it chooses
    from the whole queue; everything that acts through the codec chooses from the window."""
    return policy.decision_scope if isinstance(policy, HeuristicPolicy) else "window"


def reads_estimates(policy: Policy) -> bool:
    """Whether ``policy``'s episodes need duration estimates: False only for a heuristic whose
    own class declares ``reads_estimates = False`` (``HeuristicPolicy.reads_estimates``: a
    subclass inherits no base's declaration); everything that acts through the codec reads
    the env's observation, which carries estimates."""
    if not isinstance(policy, HeuristicPolicy):
        return True
    return bool(type(policy).__dict__.get("reads_estimates", True))


def start_episode(policy: Policy, sim: Simulator, seed: int, *, estimates: bool = True) -> None:
    """Reset ``sim`` to episode ``seed`` as ``policy`` runs it (the scenario's mechanisms with
    the policy's, its decision scope and its queue order) and reset ``policy``. ``estimates``:
    False runs the episode without the duration predictor (``Simulator.reset``; only
    :func:`evaluate` asks it, for a policy that declares it reads none)."""
    # The scenario's mechanisms, then the policy's: a simulator reused across policies must
    # not keep a previous policy's mechanisms (e.g. MuxFlow's protection) switched on.
    mechanisms = sim.cfg.mechanisms
    if policy.mechanisms:
        mechanisms = replace(mechanisms, **dict(policy.mechanisms))
    # The scope through ``reset``: it runs to the first decision point. (A policy's queue
    # order: a heuristic's class attribute, an agent's from its training env.)
    sim.reset(
        seed,
        mechanisms=mechanisms,
        decision_scope=_scope(policy),
        window_order=getattr(policy, "window_order", "fifo"),
        estimates=estimates,
    )
    policy.reset(seed)


def run_episode(
    policy: Policy,
    sim: Simulator,
    seed: int,
    on_reset: Callable[[Simulator], object] | None = None,
    *,
    estimates: bool = True,
) -> dict[str, float]:
    """Run one episode of ``policy`` on ``sim`` with ``seed``; return the metrics.

    ``on_reset(sim)``, if given, is called once the episode is reset (where the env calls its
    reward's ``reset``), before the policy's first decision. ``estimates``: as
    :func:`start_episode`'s.
    """
    start_episode(policy, sim, seed, estimates=estimates)
    if on_reset is not None:
        on_reset(sim)
    return run_to_end(policy, sim)


def run_to_end(policy: Policy, sim: Simulator, until_s: float = math.inf) -> dict[str, float]:
    """Let ``policy`` schedule ``sim`` from its current state to the end; return the metrics.

    ``until_s``: stop instead at the first decision point at or after that time (a rollout
    cut short; the metrics are then those of the state reached)."""
    # (an agent trained with migration slots gets them here too: the same running jobs)
    moves = 0 if isinstance(policy, HeuristicPolicy) else getattr(policy, "migration_slots", 0)
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options), int(moves))
    same_instant = 0
    last_t = -1.0
    sim.set_decision_scope(_scope(policy))
    # ``sim.advance`` runs to the next decision point or the end of the episode: after it a
    # decision is needed unless the episode is over, so ``needs_decision`` is asked only after
    # a decision was applied (it was asked twice per job, the second time for nothing)
    need = sim.needs_decision()
    while not sim.done and sim.now < until_s:
        if not need:
            sim.advance()
            need = True
            continue
        view = ClusterView(sim, codec)
        if isinstance(policy, HeuristicPolicy):
            # Heuristics think in decisions (which may also migrate running jobs).
            d = policy.decide(view)
        else:
            d = codec.to_decision(sim, int(policy.act(view, None, codec.mask(sim))))
        if d is None:
            sim.advance()
            continue
        sim.apply(d)
        need = sim.needs_decision()
        same_instant = same_instant + 1 if sim.now == last_t else 0
        last_t = sim.now
        if same_instant > MAX_DECISIONS_PER_INSTANT:
            raise RuntimeError(f"policy {policy.name} made too many decisions at t={sim.now}")
    return sim.metrics()


def evaluate(
    policy: Policy, scenario: ScenarioConfig, seeds: list[int], sim: Simulator | None = None
) -> list[dict[str, Any]]:
    """One record per seed: ``policy``, ``scenario``, ``seed``, ``oracle``, ``model_version`` (the
    sharing physics, ``interference.MODEL_VERSION``), the schema metrics.

    A policy that declares it reads no estimate (:func:`reads_estimates`) runs without the
    duration predictor: the same records, without the predictor's work."""
    sim = sim if sim is not None else make_simulator(scenario)
    estimates = reads_estimates(policy)
    out: list[dict[str, Any]] = []
    for seed in seeds:
        t0 = time.perf_counter()
        m = run_episode(policy, sim, seed, estimates=estimates)
        rec: dict[str, Any] = {
            "policy": policy.name,
            "scenario": scenario.name,
            "seed": seed,
            "oracle": bool(policy.oracle),
            "model_version": MODEL_VERSION,
            "workload_version": WORKLOAD_VERSION,
        }
        rec.update({k: m[k] for k in METRIC_NAMES})
        rec.update({k: v for k, v in m.items() if k not in METRIC_NAMES})
        rec["x_wall_s"] = time.perf_counter() - t0
        out.append(rec)
    return out


def json_safe(rec: Mapping[str, Any]) -> dict[str, Any]:
    """NaN/inf → None and NumPy scalars → Python ones, in nested dicts and lists too
    (strict JSON)."""
    return {k: strict_json(v) for k, v in rec.items()}


def strict_json(v: Any) -> Any:
    """Any value with NaN/inf → None and NumPy scalars → Python ones, recursively."""
    if isinstance(v, float | np.floating) and not math.isfinite(float(v)):
        return None
    if isinstance(v, np.floating | np.integer):
        return v.item()
    if isinstance(v, Mapping):
        return {k: strict_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [strict_json(x) for x in v]
    return v
