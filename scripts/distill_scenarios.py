"""DAgger across scenarios: a saved agent learns one scenario's teacher while it is held to
its own decisions on another (docs/agents.md, "Learning Gandiva's packing on `pai-busy`").

    python scripts/distill_scenarios.py label --scenario pai-busy --teacher gandiva \
        --episodes 16 --seed 1 --keep 800 --out runs/distill/pai-busy
    python scripts/distill_scenarios.py anchor --scenario default --episodes 200 --seed 2 \
        --out runs/distill/default
    python scripts/distill_scenarios.py anchor --scenario default-x2 --episodes 50 \
        --services-from-hint --out runs/distill/default-x2-svc
    python scripts/distill_scenarios.py fit --epochs 8 --lr 3e-4 --out runs/distill/agent.zip \
        runs/distill/pai-busy runs/distill/default

``label``: the agent (``--agent``, default ``ppo``) drives training episodes (seeds drawn as
``gsg train`` draws them, :func:`gpu_sharing_gym.agents.expert.training_seeds`) and the
heuristic ``--teacher`` labels every state it reaches (DAgger); ``--keep`` steps are drawn per
episode, since a 226-GPU step weighs ~130 kB. ``anchor``: the same, labelled by the agent
itself, so the fit keeps its decisions on that scenario; with ``--services-from-hint`` the
steps where the agent's or the hint's action places an online service take the hint's action
instead (the agent's service placements replaced by its hint's, the rest kept), and
``--driver`` names another agent to drive the episodes (a second DAgger round: the fitted
agent drives, the labels stay the first agent's). ``fit``: one set of weights fitted to
every directory's steps, one layout each (:func:`gpu_sharing_gym.agents.bc.pretrain_layouts`),
written as a checkpoint of the agent with the new weights (loadable by path wherever a policy
name is accepted). Episodes run with the agent's own window order and hint; the reward is not
used.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch as th

from gpu_sharing_env.envs.observation_v1 import JOB_FEATURES_V1
from gpu_sharing_gym.agents.agent import (
    AgentLoadError,
    RLAgent,
    read_checkpoint,
    resolve,
    rewrite_checkpoint,
)
from gpu_sharing_gym.agents.bc import Demos, pretrain_layouts
from gpu_sharing_gym.agents.envs import HINT
from gpu_sharing_gym.agents.expert import label_episodes, training_seeds
from gpu_sharing_gym.plumbing.fileio import atomic_write_bytes

#: The env of the shipped ``ppo``'s recipe (configs/recipes/maskable_ppo_v1_lagrange.yaml); only
#: ``window_order`` changes what the agent sees, the reward is recorded but not fitted.
ENV = {
    "reward": "jct",
    "window_order": "predicted",
    "reward_kwargs": {"slo_form": "linear", "slo_weight": 50.0},
}
HINT_POLICY = "speed_sjf_queue"


def save(d: Demos, path: Path) -> None:
    meta = np.frombuffer(json.dumps(d.episode_metrics).encode(), dtype=np.uint8)
    obs = {f"obs.{k}": v for k, v in d.obs.items()}
    buf = io.BytesIO()
    np.savez_compressed(
        buf, **obs, masks=d.masks, actions=d.actions, returns=d.returns, metrics=meta
    )
    atomic_write_bytes(path, buf.getvalue())  # (its temporary name is not part-*.npz)


def load(path: Path) -> Demos:
    z = np.load(path)
    obs = {k[4:]: z[k] for k in z.files if k.startswith("obs.")}
    metrics = json.loads(bytes(z["metrics"]).decode())
    return Demos(obs, z["masks"], z["actions"], z["returns"], metrics)


def subsample(d: Demos, k: int, rng: np.random.Generator) -> Demos:
    """``k`` steps of ``d`` drawn without replacement (in order); the hint stored as bool."""
    idx = np.sort(rng.choice(len(d), size=min(k, len(d)), replace=False))
    obs = {key: (v[idx] > 0.5 if key == HINT else v[idx]) for key, v in d.obs.items()}
    return Demos(obs, d.masks[idx], d.actions[idx], d.returns[idx], d.episode_metrics)


def cmd_label(a: argparse.Namespace) -> None:
    meta, state = read_checkpoint(resolve(a.agent))
    seeds = training_seeds(a.episodes, a.seed)
    rng = np.random.default_rng(a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(seeds), 2):  # two at a time: a 226-GPU episode is ~0.6 GB unsampled
        t0 = time.time()
        pair = seeds[i : i + 2]
        d = label_episodes(
            a.scenario, ENV, a.teacher, pair, env_id="GpuSharing-v1", hint=HINT_POLICY,
            paired=HINT_POLICY, student=(meta, state), workers=a.workers,
        )  # fmt: skip
        save(subsample(d, a.keep * len(pair), rng), a.out / f"part-{i:03d}.npz")
        jct = [round(m["jct_mean_s"]) for m in d.episode_metrics]
        print(
            f"seeds {pair}: {len(d)} steps, agent's JCT {jct} ({time.time() - t0:.0f} s)",
            flush=True,
        )


def services_from_hint(d: Demos, agent: RLAgent) -> int:
    """Relabel with the hint's action (``obs["hint"]``) every step of ``d`` where its label or
    the hint places an online service; the number of steps changed."""
    online = JOB_FEATURES_V1.index("online")
    changed = 0
    for i in range(len(d)):
        obs = {k: v[i] for k, v in d.obs.items()}
        max_gpus, slots, n_options = agent.layout(obs, d.masks[i])
        jobs = obs["jobs"].reshape(slots, -1)
        # the online flag of each action's job (wait: none)
        is_service = np.concatenate(
            ([False], np.repeat(jobs[:, online] > 0.5, max_gpus * n_options))
        )
        own, hint = int(d.actions[i]), int(np.argmax(obs[HINT]))
        if hint != own and (is_service[own] or is_service[hint]):
            d.actions[i] = hint
            changed += 1
    return changed


def cmd_anchor(a: argparse.Namespace) -> None:
    meta, state = read_checkpoint(resolve(a.agent))
    driver = (meta, state) if a.driver is None else read_checkpoint(resolve(a.driver))
    d = label_episodes(
        a.scenario, ENV, HINT_POLICY, training_seeds(a.episodes, a.seed), env_id="GpuSharing-v1",
        hint=HINT_POLICY, paired=HINT_POLICY, student=driver, workers=a.workers,
    )  # fmt: skip
    agent = RLAgent(meta, state)
    own = [agent.predict({k: v[i] for k, v in d.obs.items()}, d.masks[i]) for i in range(len(d))]
    d.actions[:] = own
    note = ""
    if a.services_from_hint:
        note = f", {services_from_hint(d, agent)} of them (services) relabelled by the hint"
    a.out.mkdir(parents=True, exist_ok=True)
    save(d, a.out / "part-000.npz")
    print(f"{a.episodes} episodes, {len(d)} steps labelled by the agent itself{note}")


def cmd_fit(a: argparse.Namespace) -> None:
    src = resolve(a.agent)
    meta, state = read_checkpoint(src)
    agent = RLAgent(meta, state)
    parts, policies = [], []
    for folder in a.parts:
        files = sorted(folder.glob("part-*.npz"))
        if not files:
            raise AgentLoadError(f"{folder}: no part-*.npz (run `label` or `anchor` first)")
        d = Demos.concat([load(f) for f in files])
        obs0 = {k: v[0].astype(np.float32) for k, v in d.obs.items()}
        parts.append(d)
        policies.append(agent.policy_for(*agent.layout(obs0, d.masks[0])))

    def log(epoch: int, res: list[tuple[float, float]]) -> None:
        cols = "  ".join(f"{f.name}: loss {p:.4f} acc {q:.3f}" for f, (p, q) in zip(a.parts, res))
        print(f"epoch {epoch}: {cols}", flush=True)

    pretrain_layouts(policies, parts, a.epochs, a.lr, seed=a.seed, log=log)
    buf = io.BytesIO()
    th.save(policies[0].state_dict(), buf)
    rewrite_checkpoint(src, a.out, {"policy.pth": buf.getvalue()})
    print(f"wrote {a.out}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("label", "anchor"):
        s = sub.add_parser(name)
        s.add_argument("--scenario", required=True)
        s.add_argument("--episodes", type=int, required=True)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--out", type=Path, required=True)
        s.add_argument("--agent", default="ppo")
        s.add_argument("--workers", type=int, default=2)
        if name == "label":
            s.add_argument("--teacher", required=True)
            s.add_argument("--keep", type=int, default=800)
        else:
            s.add_argument("--driver", help="the agent that drives the episodes (default: --agent)")
            s.add_argument(
                "--services-from-hint",
                action="store_true",
                help="label with the hint's action where the agent's or the hint's places a service",
            )
    s = sub.add_parser("fit")
    s.add_argument("parts", type=Path, nargs="+")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--epochs", type=int, default=8)
    s.add_argument("--lr", type=float, default=3e-4)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--agent", default="ppo")
    a = p.parse_args(argv)
    try:
        {"label": cmd_label, "anchor": cmd_anchor, "fit": cmd_fit}[a.cmd](a)
    except (AgentLoadError, ValueError, FileNotFoundError) as e:
        print(f"distill_scenarios: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
