"""Train an RL placement agent on a scenario (stable-baselines3 / sb3-contrib).

    python scripts/train.py --algo maskable_ppo --scenario default --timesteps 200000 --out runs/ppo
    python scripts/train.py --algo maskable_ppo --scenario default --out runs/ppo --resume
    tensorboard --logdir runs/ppo

Hyperparameters come from ``agents/hyperparams/<algo>.yaml`` (or ``--config``), rl-zoo style: the
``default:`` entry, overridden by the scenario's own entry; ``--timesteps``, ``--n-envs`` and
``--seed`` override the file. ``--out DIR`` receives ``config.yaml`` (resolved), ``command.txt``
(every invocation), ``model.zip`` (final), ``best_model.zip`` (best validation result meeting
the SLO target), ``metrics.json``, ``baselines.json`` (the reference baselines on the validation
seeds), ``checkpoints/last.zip`` (every ``checkpoint_freq`` timesteps, and on Ctrl-C) and
TensorBoard event files in ``tb/``. ``--resume`` continues from ``checkpoints/last.zip`` with
the configuration saved in ``DIR``.

Training episodes use seeds >= 1,000,000; validation uses ``eval_seeds`` (1000..1004 by
default); the leaderboard's seeds 0..N-1 are never trained on. Exit codes: 0 done, 2 bad input,
130 interrupted (checkpoint saved).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import yaml


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    p.add_argument("--algo", default="maskable_ppo", help="maskable_ppo, ppo, a2c or dqn")
    p.add_argument("--scenario", default="default", help="scenario name or YAML path")
    p.add_argument("--timesteps", type=int, default=None, help="total timesteps (overrides YAML)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--resume", action="store_true", help="continue from DIR/checkpoints/last.zip")
    p.add_argument(
        "--config", default=None, help="hyperparameter YAML (agents/hyperparams/ALGO.yaml)"
    )
    p.add_argument("--n-envs", type=int, default=None, help="parallel envs (subprocesses if > 1)")
    p.add_argument("--seed", type=int, default=None, help="training seed (overrides YAML)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def fail(msg: str, code: int = 2) -> int:
    print(f"gsg train: error: {msg}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch as th
    from stable_baselines3.common.logger import configure

    from agents.agent import write_metadata
    from agents.callbacks import (
        CheckpointCallback,
        EvalCallback,
        ProgressBar,
        SimMetricsCallback,
        best_baseline,
        evaluate_model,
        log_hparams,
        summarise,
    )
    from agents.config import (
        ALGOS,
        MASKED_ALGOS,
        default_config_path,
        load_hyperparams,
        resolve_hyperparams,
    )
    from agents.envs import make_vec_env
    from agents.policy import SetActorCriticPolicy, SetPoolExtractor, SetPPOPolicy
    from gpu_sharing_env.config import ConfigError, load_scenario
    from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
    from gpu_sharing_env.fileio import atomic_write_text

    th.set_num_threads(1)  # small networks: threads cost more than they give on 2 cores
    out = Path(args.out)
    ckpt = out / "checkpoints" / "last.zip"
    saved_cfg = out / "config.yaml"
    if args.algo not in ALGOS:
        return fail(f"--algo: must be one of {', '.join(ALGOS)} (got {args.algo!r})")
    if args.resume:
        if not ckpt.is_file() or not saved_cfg.is_file():
            return fail(f"{out}: nothing to resume (no checkpoints/last.zip and config.yaml)")
        resolved_prev = yaml.safe_load(saved_cfg.read_text())
        if resolved_prev.get("algo") != args.algo:
            return fail(f"{saved_cfg}: algo: the run used {resolved_prev.get('algo')!r}")
        args.scenario = resolved_prev["scenario_arg"]
    elif (out / "config.yaml").exists():
        return fail(f"{out}: already holds a run (use --resume, or another --out)")
    try:
        scenario = load_scenario(args.scenario)
        cfg_path = Path(args.config) if args.config else default_config_path(args.algo)
        if args.resume:
            cfg_path = saved_cfg
            settings, algo_kwargs, resolved = resolve_hyperparams(
                {"default": resolved_prev["hyperparams"]}, str(saved_cfg), scenario.name, args.algo
            )
        else:
            settings, algo_kwargs, resolved = load_hyperparams(cfg_path, scenario.name, args.algo)
    except ConfigError as e:
        return fail(str(e))
    overrides = {"n_timesteps": args.timesteps, "n_envs": args.n_envs, "seed": args.seed}
    for k, v in overrides.items():
        if v is not None:
            if v <= 0 and k != "seed":
                return fail(f"--{k.replace('n_', '').replace('_', '-')}: must be > 0 (got {v})")
            resolved[k] = v
    settings = dataclasses.replace(
        settings, **{k: v for k, v in overrides.items() if v is not None}
    )
    masked = args.algo in MASKED_ALGOS
    env_kwargs = dict(settings.env_kwargs)
    if not masked:
        env_kwargs["invalid_action"] = "noop"
    conserving = bool(settings.work_conserving and masked)

    out.mkdir(parents=True, exist_ok=True)
    with (out / "command.txt").open("a") as f:
        f.write(shlex.join([sys.executable, *sys.argv]) + "\n")
    if not args.resume:
        atomic_write_text(
            saved_cfg,
            yaml.safe_dump(
                {"algo": args.algo, "scenario": scenario.name, "scenario_arg": args.scenario,
                 "config_file": str(cfg_path), "hyperparams": resolved}, sort_keys=False,
            ),
        )  # fmt: skip

    meta: dict[str, Any] = {
        "algo": args.algo,
        "scenario": scenario.name,
        "n_options": None,
        "options": [],
        "work_conserving": conserving,
        "expert_hint": settings.expert_hint,
    }
    probe = GpuSharingEnv(scenario, **env_kwargs)
    meta["n_options"] = len(probe.sim.options)
    meta["options"] = [o.label for o in probe.sim.options]

    try:
        venv = make_vec_env(
            args.scenario, settings.n_envs, settings.seed, env_kwargs, conserving,
            settings.expert_hint,
        )  # fmt: skip
    except Exception as e:  # environment construction from a validated config: report briefly
        return fail(f"could not build the environment: {e}")
    algo_cls = ALGOS[args.algo]
    policy_kwargs = dict(settings.policy_kwargs)
    if args.algo == "dqn":
        policy: Any = "MultiInputPolicy"
        policy_kwargs = {"features_extractor_class": SetPoolExtractor,
                         "features_extractor_kwargs": policy_kwargs}  # fmt: skip
        meta["policy"] = "DQNPolicy"
    else:
        policy = SetActorCriticPolicy if masked else SetPPOPolicy
        meta["policy"] = policy.__name__
    meta["policy_kwargs"] = dict(settings.policy_kwargs)

    t_start = time.perf_counter()
    logger = configure(str(out / "tb"), ["tensorboard", "csv"])
    metrics_path = out / "metrics.json"
    prev: dict[str, Any] = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if args.resume:
        model = algo_cls.load(ckpt, env=venv, device="cpu")
        if hasattr(model, "load_replay_buffer") and (ckpt.parent / "replay_buffer.pkl").exists():
            model.load_replay_buffer(ckpt.parent / "replay_buffer.pkl")
        print(f"resuming {out} at {model.num_timesteps} timesteps", file=sys.stderr)
    else:
        try:
            model = algo_cls(
                policy, venv, policy_kwargs=policy_kwargs, seed=settings.seed, device="cpu",
                verbose=0, **algo_kwargs,
            )  # fmt: skip
        except (TypeError, ValueError) as e:
            return fail(f"{cfg_path}: {scenario.name}: {e}")
    model.set_logger(logger)

    # Reference baselines on the validation seeds (once per run directory).
    ref_path = out / "baselines.json"
    if ref_path.exists():
        reference = json.loads(ref_path.read_text())
    else:
        reference = best_baseline(scenario, settings.eval_seeds, settings.eval_baselines)
        atomic_write_text(ref_path, json.dumps(reference, indent=1))

    history: list[dict[str, Any]] = list(prev.get("eval_history", []))
    bc_info: dict[str, Any] = dict(prev.get("pretrain", {}))

    def write_metrics(final: dict[str, Any] | None = None) -> None:
        data = {
            "algo": args.algo,
            "scenario": scenario.name,
            "timesteps": int(model.num_timesteps),
            "target_timesteps": settings.n_timesteps,
            "wall_s": float(prev.get("wall_s", 0.0)) + time.perf_counter() - t_start,
            "eval_seeds": list(settings.eval_seeds),
            "best_baseline": reference.get("best"),
            "baselines": reference.get("baselines", {}),
            "pretrain": bc_info,
            "eval_history": history,
        }
        if final is not None:
            data["final_eval"] = final
        elif "final_eval" in prev:
            data["final_eval"] = prev["final_eval"]
        atomic_write_text(metrics_path, json.dumps(data, indent=1, default=float))

    if not args.resume:
        log_hparams(model.logger, {"algo": args.algo, "scenario": scenario.name, **resolved})
        if settings.pretrain is not None and args.algo != "dqn":
            bc_info = _pretrain(
                model,
                probe,
                args.scenario,
                env_kwargs,
                settings,
                conserving,
                args.quiet,
            )
            for k, v in bc_info.items():
                model.logger.record(f"pretrain/{k}", v)
            model.logger.dump(0)

    checkpoint = CheckpointCallback(out, settings.checkpoint_freq, meta)
    evaluator = EvalCallback(
        args.algo, scenario, settings.eval_seeds, env_kwargs, reference, settings.eval_freq,
        out, meta, settings.figure_every, history, on_eval=lambda h: write_metrics(),
        conserving=conserving, hint=settings.expert_hint,
    )  # fmt: skip
    callbacks = [SimMetricsCallback(), evaluator, checkpoint]
    callbacks.append(ProgressBar(settings.n_timesteps, disable=True if args.quiet else None))
    remaining = settings.n_timesteps - model.num_timesteps
    try:
        if remaining > 0:
            model.learn(
                total_timesteps=remaining, callback=callbacks, reset_num_timesteps=False,
                progress_bar=False,
            )  # fmt: skip
    except KeyboardInterrupt:
        checkpoint.init_callback(model)
        path = checkpoint.save()
        write_metrics()
        print(
            f"\ninterrupted at {model.num_timesteps} timesteps; checkpoint {path} saved; "
            f"continue with --resume",
            file=sys.stderr,
        )
        return 130
    checkpoint.init_callback(model)
    checkpoint.save()
    model.save(out / "model.zip")
    write_metadata(out / "model.zip", {**meta, "timesteps": int(model.num_timesteps)})
    recs, _ = evaluate_model(
        model, args.algo, scenario, settings.eval_seeds, env_kwargs, conserving=conserving,
        hint=settings.expert_hint,
    )  # fmt: skip
    final = {**summarise(recs), "per_seed": recs}
    write_metrics(final)
    best = reference.get("best")
    ref_jct = reference["baselines"][best]["jct_mean_s"] if best else float("nan")
    print(
        f"done: {model.num_timesteps} timesteps in {time.perf_counter() - t_start:.0f} s; "
        f"validation jct_mean_s {final['jct_mean_s']:.0f} (best baseline {best}: {ref_jct:.0f}), "
        f"slo_attainment {final['slo_attainment']:.4f}; model {out / 'model.zip'}"
    )
    venv.close()
    return 0


def _pretrain(
    model: Any,
    env: Any,
    scenario_arg: str,
    env_kwargs: dict[str, Any],
    settings: Any,
    conserving: bool,
    quiet: bool,
) -> dict[str, Any]:
    """Behaviour cloning (and DAgger rounds) into ``model.policy``."""
    import numpy as np
    from tqdm import tqdm

    from agents.agent import RLAgent
    from agents.bc import Demos, demonstrations, pretrain

    pt = settings.pretrain
    gamma = float(getattr(model, "gamma", 0.99))
    total = pt.episodes + pt.lookahead_episodes + pt.dagger_rounds * pt.dagger_episodes
    bar = tqdm(total=total, desc="pretrain", unit="ep", disable=True if quiet else None)
    data = []
    info: dict[str, Any] = {}
    if pt.episodes:
        data.append(demonstrations(env, pt.expert, pt.episodes, gamma, seed=settings.seed,
                                   progress=bar.update, conserving=conserving,
                                   hint=settings.expert_hint))  # fmt: skip
        info["expert_train_jct_mean_s"] = float(
            np.mean([m["jct_mean_s"] for m in data[0].episode_metrics])
        )
    if pt.lookahead_episodes:
        from agents.lookahead import lookahead_demonstrations

        demos, stats = lookahead_demonstrations(
            scenario_arg, dict(env_kwargs), pt.expert, pt.lookahead_episodes, gamma,
            seed=settings.seed + 10_000, workers=pt.workers, conserving=conserving,
            hint=bool(settings.expert_hint), progress=bar.update, horizon=pt.lookahead_horizon,
            margin=pt.lookahead_margin,
        )  # fmt: skip
        data.append(demos)
        info.update(stats)
    if not data:
        bar.close()
        return info

    fit = pretrain(
        model.policy, Demos.concat(data), pt.epochs, pt.lr, pt.batch_size, seed=settings.seed
    )
    student_jct = float("nan")
    for r in range(pt.dagger_rounds):
        agent = RLAgent(
            {
                "policy": type(model.policy).__name__,
                "policy_kwargs": dict(settings.policy_kwargs),
                "work_conserving": conserving,
                "expert_hint": settings.expert_hint,
            },
            model.policy.state_dict(),
        )
        d = demonstrations(
            env, pt.expert, pt.dagger_episodes, gamma, seed=settings.seed + 1 + r,
            progress=bar.update, student=agent.predict, conserving=conserving,
            hint=settings.expert_hint,
        )  # fmt: skip
        student_jct = float(np.mean([m["jct_mean_s"] for m in d.episode_metrics]))
        data.append(d)
        fit = pretrain(
            model.policy, Demos.concat(data), pt.epochs, pt.lr, pt.batch_size, seed=r + 1
        )
    bar.close()
    return {
        **fit,
        **info,
        "samples": int(sum(len(d) for d in data)),
        "expert": pt.expert,
        "student_train_jct_mean_s": student_jct,
    }


if __name__ == "__main__":
    sys.exit(main())
