"""What moving running online services to the other GPU kind is worth (issue 53).

    python scripts/service_moves.py default-x2 --seeds 0-9 --variant at:1800
    python scripts/service_moves.py default-x2 --seeds 0-9 --variant at:1800,back:2.0
    python scripts/service_moves.py heldout_load --policy speed_sjf_queue --variant back:1.0

A policy (an agent such as ``ppo``, or a heuristic) runs as ``gsg evaluate`` runs it, wrapped so
that at every decision point, before it decides, a rule may *move* running services with direct
``Decision``s (``Simulator.apply`` migrates a running job: ``Lifecycle.migrate``, which does not
refuse a service; v1's migration slots never offer one). The policy then decides on the state
after the moves. ``--variant`` is a comma-separated list of:

* ``at:T``: at the first decision point at or after T seconds, every service running on an
  A100 moves to a T4 (the legal T4 placement with the fewest residents; on ties its own option).
* ``rs``: the ``at:T`` move goes where AntMan right-sizes a service (``right_sized``): a GPU of
  another type than A100 without an online resident whose *peak* duty (the spec's declared
  peak rate times the profiled batch latency, ``gandiva.est_duty``) stays under 0.6, unoccupied
  first, the least capable first; a service that fits nowhere stays.
* ``light:Q``: the ``at:T`` move only if at most a share Q of the GPUs have a resident then.
* ``back:R``: at every decision point, a service off the A100s whose *observed* p99 latency
  (the last load tick's, ``JobView.p99_ms``) is over R times its SLO moves to the A100 with the
  fewest residents, at most ``--max-back`` times per service.
* ``hint``: an agent with a hint places the services where its hint does
  (``hint_deviations.py --override service``): with ``ppo``, speed_sjf_queue's service placements.

Every rule reads what a scheduler sees (placements, observed latency, declared peaks and
profiles): none is an oracle. A moved service serves nothing for ``sharing.migration_s``
(30 s): the simulator charges it (``Lifecycle.migrate``, physics v6), as a fault's restart.
One JSON line per seed: mean JCT, SLO attainment, the moves made.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.policy import HeuristicPolicy, Policy
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.state import JobState, Status
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.gandiva import est_duty
from gpu_sharing_gym.plumbing.cli_args import seed_spec

#: AntMan's right-sizing bound on a service's peak duty (``AntMan.service_max_duty``'s default)
SERVICE_MAX_DUTY = 0.6


def kind_of(sim: Simulator, gpu: int) -> str:
    """The GPU's kind: its type name up to the first dash (``A100``, ``V100``, ``T4``)."""
    return str(sim.cluster.type_name_of[gpu]).split("-")[0]


def running_services(sim: Simulator) -> list[JobState]:
    """The running online services, ascending job id."""
    jobs = sim.table.jobs
    return [
        jobs[j] for j in sorted(jobs) if jobs[j].spec.online and jobs[j].status is Status.RUNNING
    ]


def _legal(sim: Simulator, st: JobState, gpu: int) -> list[int]:
    return [
        o
        for o in range(len(sim.cluster.options))
        if sim.legality.check(Decision(st.spec.job_id, gpu, o)) is None
    ]


def fewest_residents(sim: Simulator, st: JobState, kind: str) -> tuple[int, int] | None:
    """The legal (gpu, option) of kind ``kind`` with the fewest residents (ties: the service's
    own option, then the lowest option, then the lowest GPU); None if there is none."""
    c = sim.cluster
    best: tuple[tuple[int, bool, int, int], int, int] | None = None
    for g in range(c.n_gpus):
        if kind_of(sim, g) != kind or g in st.gpus:
            continue
        for o in _legal(sim, st, g):
            key = (len(c.residents[g]), o != st.option, o, g)
            if best is None or key < best[0]:
                best = (key, g, o)
    return None if best is None else (best[1], best[2])


def right_sized(sim: Simulator, st: JobState) -> tuple[int, int] | None:
    """Where AntMan would right-size service ``st`` off the A100s (module doc, ``rs``)."""
    view = ClusterView(sim)
    job = view.job(st.spec.job_id)
    c, jobs = sim.cluster, sim.table.jobs
    best: tuple[tuple[bool, float, bool, int, int], int, int] | None = None
    for g in range(c.n_gpus):
        if kind_of(sim, g) == "A100" or g in st.gpus:
            continue
        if any(jobs[r].spec.online for r in c.residents[g]):
            continue  # one guarantee job per GPU, as AntMan
        if est_duty(view, job, g) > SERVICE_MAX_DUTY:
            continue
        for o in _legal(sim, st, g):
            key = (len(c.residents[g]) > 0, view.solo_speed(job.model, g), o != st.option, o, g)
            if best is None or key < best[0]:
                best = (key, g, o)
    return None if best is None else (best[1], best[2])


class Moves:
    """The move rule of a ``--variant`` (module doc); :meth:`apply` at every decision point."""

    def __init__(self, variant: str, max_back: int = 1) -> None:
        self.at = self.back = self.light = math.inf
        self.rs = self.hint = False
        for part in filter(None, variant.split(",")):
            name, _, arg = part.partition(":")
            if name in ("at", "back", "light") and arg:
                setattr(self, name, float(arg))
            elif name in ("rs", "hint") and not arg:
                setattr(self, name, True)
            elif part != "none":
                raise SystemExit(f"--variant: {part!r}? (at:T, rs, light:Q, back:R, hint, none)")
        self.max_back = max_back
        self.reset()

    def reset(self) -> None:
        self.done_at = False
        self.backs: Counter[int] = Counter()
        #: (time, job id, from GPU type, to GPU type) of every move this episode
        self.log: list[tuple[float, int, str, str]] = []
        #: the share of GPUs with a resident when the ``at`` rule fired (-1: not yet)
        self.occupied_at = -1.0

    def _move(self, sim: Simulator, st: JobState, dest: tuple[int, int]) -> None:
        g, o = dest
        frm = str(sim.cluster.type_name_of[st.gpus[0]])
        sim.apply(Decision(st.spec.job_id, g, o))  # (its outage: the simulator's, physics v6)
        self.log.append((sim.now, st.spec.job_id, frm, str(sim.cluster.type_name_of[g])))

    def apply(self, sim: Simulator) -> bool:
        """Make this decision point's moves; True if any was made."""
        n = len(self.log)
        now = sim.now
        if not self.done_at and now >= self.at:
            self.done_at = True
            c = sim.cluster
            self.occupied_at = sum(len(r) > 0 for r in c.residents) / c.n_gpus
            if self.occupied_at <= self.light:
                for st in running_services(sim):
                    if kind_of(sim, st.gpus[0]) == "A100" and st.setup_until <= now:
                        d = right_sized(sim, st) if self.rs else fewest_residents(sim, st, "T4")
                        if d is not None:
                            self._move(sim, st, d)
        if self.back < math.inf:
            for st in running_services(sim):
                svc = st.spec.service
                assert svc is not None
                if (
                    kind_of(sim, st.gpus[0]) != "A100"
                    and st.serving.p99_ms > self.back * svc.slo_ms
                    and self.backs[st.spec.job_id] < self.max_back
                    and st.setup_until <= now
                ):
                    d = fewest_residents(sim, st, "A100")
                    if d is not None:
                        self.backs[st.spec.job_id] += 1
                        self._move(sim, st, d)
        return len(self.log) > n


class MovingAgent:
    """An agent (``act``) with the move rule applied to ``sim`` (the simulator the runner
    drives it on) before each decision."""

    oracle = False

    def __init__(self, inner: Any, moves: Moves, sim: Simulator) -> None:
        self.inner, self.moves, self.sim = inner, moves, sim
        self.name = f"{inner.name}+moves"
        self.mechanisms = inner.mechanisms
        self.window_order = inner.window_order
        self.migration_slots = getattr(inner, "migration_slots", 0)

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)
        self.moves.reset()

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        sim = self.sim
        if self.moves.apply(sim):
            assert view.codec is not None
            view = ClusterView(sim, view.codec)
            mask = view.codec.mask(sim)
        return int(self.inner.act(view, obs, mask))


class _MovingHeuristic(HeuristicPolicy):
    def __init__(self, inner: HeuristicPolicy, moves: Moves, sim: Simulator) -> None:
        self.inner, self.moves, self.sim = inner, moves, sim

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)
        self.moves.reset()

    def decide(self, view: ClusterView) -> Decision | None:
        sim = self.sim
        if self.moves.apply(sim):
            view = ClusterView(sim, view.codec)
        return self.inner.decide(view)


def moving(policy: Policy, moves: Moves, sim: Simulator) -> Policy:
    """``policy`` with ``moves`` applied to ``sim`` before each of its decisions on it (the
    runner drives a heuristic by ``decide``, with its decision scope and queue order: the
    wrapper keeps them)."""
    if isinstance(policy, HeuristicPolicy):
        attrs = {
            "name": f"{policy.name}+moves",
            "mechanisms": policy.mechanisms,
            "decision_scope": policy.decision_scope,
            "window_order": policy.window_order,
        }
        return type("MovingHeuristic", (_MovingHeuristic,), attrs)(policy, moves, sim)  # type: ignore[no-any-return]
    return MovingAgent(policy, moves, sim)


def _hint_services(agent: str) -> Policy:
    """``agent`` with its hint's service placements (``hint_deviations.Diverging``)."""
    path = Path(__file__).with_name("hint_deviations.py")
    spec = importlib.util.spec_from_file_location("hint_deviations", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Diverging(agent, frozenset({mod.SERVICE}))  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--policy", default="ppo")
    ap.add_argument("--variant", default="none")
    ap.add_argument("--max-back", type=int, default=1)
    ap.add_argument("--seeds", default="0-9", type=seed_spec)
    a = ap.parse_args(argv)
    moves = Moves(a.variant, a.max_back)
    base = _hint_services(a.policy) if moves.hint else make_policy(a.policy)
    sim = make_simulator(load_scenario(a.scenario))
    policy = moving(base, moves, sim)
    for seed in a.seeds:
        m = run_episode(policy, sim, seed)
        rec = {
            "scenario": a.scenario,
            "policy": a.policy,
            "variant": a.variant,
            "seed": seed,
            "jct_mean_s": m["jct_mean_s"],
            "slo": m["slo_attainment"],
            "occupied_at": moves.occupied_at,
            "moves": moves.log,
        }
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
