"""Where a hinted agent's decisions differ from its hint, and what each kind of difference costs.

    python scripts/hint_deviations.py muxflow-t4 --seeds 0-9
    python scripts/hint_deviations.py default-x2 --seeds 0-9 --agent ppo --override all

A hinted agent (``expert_hint`` in its checkpoint, e.g. ``ppo`` with speed_sjf_queue) is
replayed episode by episode; at every decision the hint's action and the agent's are compared
and the difference classed: ``hold`` (the agent waits, the hint places), ``place`` (the agent
places, the hint waits), ``job`` (another window job), ``option`` (the same job, another
placement option) or ``gpu`` (the same job and option on another GPU). With ``--override``
the named kinds are replaced by the hint's action (``all``: every one, which is the hint
itself run as the agent runs; ``service``: every difference where either places an online
service), so each kind's cost is the JCT difference of the two runs.
Per seed it prints the counts, mean JCT, SLO attainment and the mean JCT per job class.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any, ClassVar

import numpy as np

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import WAIT, ActionCodec
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.agents.agent import load_agent
from gpu_sharing_gym.agents.envs import make_expert
from gpu_sharing_gym.plumbing.cli_args import seed_spec

KINDS = ("hold", "place", "job", "option", "gpu")
#: ``--override`` may also name this: every difference where either action places a service
SERVICE = "service"


def kind(codec: ActionCodec, agent_a: int, hint_a: int) -> str | None:
    """The kind of difference between the agent's action and the hint's (None: the same)."""
    if agent_a == hint_a:
        return None
    if agent_a == WAIT:
        return "hold"
    if hint_a == WAIT:
        return "place"
    a, h = codec.decode(agent_a), codec.decode(hint_a)
    assert a is not None and h is not None
    if a[0] != h[0]:
        return "job"
    return "option" if a[2] != h[2] else "gpu"


class _Recording:
    """The hint heuristic, remembering its last action."""

    def __init__(self, expert: Any) -> None:
        self.expert = expert
        self.last = WAIT

    def reset(self, seed: int) -> None:
        self.expert.reset(seed)

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        self.last = int(self.expert.act(view, obs, mask))
        return self.last


class Diverging:
    """An agent run through the Policy protocol that counts where it leaves its hint, and takes
    the hint instead for the kinds in ``override``."""

    oracle = False
    mechanisms: ClassVar[dict[str, bool]] = {}

    def __init__(self, agent_ref: str, override: frozenset[str] = frozenset()) -> None:
        self.agent = load_agent(agent_ref)
        hint = self.agent.meta.get("expert_hint")
        if not hint:
            raise SystemExit(f"{agent_ref}: no expert_hint in its checkpoint")
        self.hint = _Recording(make_expert(str(hint)))
        self.agent._expert = self.hint  # the agent asks this for its hint (RLAgent.act)
        self.override = override
        self.name = self.agent.name
        self.window_order = self.agent.window_order
        self.migration_slots = self.agent.migration_slots
        self.counts: Counter[str] = Counter()
        #: (time, kind, the agent's choice, the hint's) of every difference this episode
        self.log: list[tuple[float, str, str, str]] = []

    def reset(self, seed: int) -> None:
        self.agent.reset(seed)
        self.counts = Counter()
        self.log = []

    def act(self, view: ClusterView, obs: Any, mask: np.ndarray) -> int:
        a = int(self.agent.act(view, obs, mask))
        k = kind(view.codec, a, self.hint.last)
        self.counts["decisions"] += 1
        if k is not None:
            self.counts[k] += 1
            self.log.append((view.now_s, k, describe(view, a), describe(view, self.hint.last)))
            if k in self.override or (
                SERVICE in self.override
                and (places_service(view, a) or places_service(view, self.hint.last))
            ):
                return self.hint.last
        return a


def places_service(view: ClusterView, action: int) -> bool:
    """Whether ``action`` places an online service."""
    d = view.codec.decode(action)
    return d is not None and view.window[d[0]].service is not None


def describe(view: ClusterView, action: int) -> str:
    """An action in words: wait, or the job's class and model, the GPU's type and the option."""
    d = view.codec.decode(action)
    if d is None:
        return "wait"
    slot, gpu, option = d
    job = view.window[slot]
    cls = "service" if job.service is not None else f"{job.num_gpus}gpu est={job.est_work_s:.0f}s"
    return f"{cls} {job.model} -> {view.type_name[gpu]}#{gpu} {view.options[option]}"


def job_class(spec: Any) -> str:
    """A coarse class: service, gang, prioritised, else by predicted solo work."""
    if spec.service is not None:
        return "service"
    if spec.num_gpus > 1:
        return "gang"
    if spec.priority > 0:
        return "prio"
    w = spec.est_work_s
    return "short<30m" if w < 1800 else ("mid<4h" if w < 4 * 3600 else "long")


def class_jct(sim: Any) -> dict[str, float]:
    """Mean JCT per job class of offline jobs (as the metrics count them: unfinished jobs with
    their time in the system so far)."""
    by: dict[str, list[float]] = {}
    for j in sim.table.jobs.values():
        if j.online or j.status not in (Status.DONE, Status.QUEUED, Status.RUNNING):
            continue
        end = j.ledger.finish_t if j.status is Status.DONE else sim.now
        by.setdefault(job_class(j.spec), []).append(end - j.spec.submit_s)
    return {k: float(np.mean(v)) for k, v in sorted(by.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--seeds", default="0-9", type=seed_spec)
    ap.add_argument("--agent", default="ppo")
    ap.add_argument(
        "--override", default="", help="kinds to replace by the hint (or 'service'), or 'all'"
    )
    a = ap.parse_args(argv)
    override = frozenset(KINDS if a.override == "all" else filter(None, a.override.split(",")))
    if not override <= {*KINDS, SERVICE}:
        raise SystemExit(f"--override: kinds are {', '.join(KINDS)}, {SERVICE} or all")
    cfg = load_scenario(a.scenario)
    sim = make_simulator(cfg)
    pol = Diverging(a.agent, override)
    for seed in a.seeds:
        m = run_episode(pol, sim, seed)
        rec = {
            "scenario": a.scenario,
            "seed": seed,
            "override": sorted(override),
            "jct_mean_s": m["jct_mean_s"],
            "slo": m["slo_attainment"],
            **{k: pol.counts[k] for k in ("decisions", *KINDS)},
            "class_jct": class_jct(sim),
            "differences": pol.log,
        }
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
