"""Train an RL placement agent on a scenario (stable-baselines3 / sb3-contrib).

    gsg train --algo maskable_ppo --scenario default --timesteps 200000 --out runs/ppo
    gsg train --config maskable_ppo_v1 --out runs/v1
    gsg train --algo maskable_ppo --scenario default --out runs/ppo --resume
    gsg train --config maskable_ppo_v1_light --init-from ppo --scenario mig-a100 --out runs/ft
    gsg train --list-configs
    tensorboard --logdir runs/ppo

Hyperparameters come from ``configs/recipes/<algo>.yaml``, or ``--config`` (a shipped recipe's
name, see ``--list-configs``, or a YAML path), rl-zoo style: the ``default:`` entry, overridden
by the scenario's own entry; ``--timesteps``, ``--n-envs`` and ``--seed`` override the file,
``--no-pretrain`` skips its behaviour-cloning warm start; ``--init-from AGENT`` starts from a saved
agent's weights instead (fine-tuning: ``ppo``, or a checkpoint zip of the same network, read as
a state dict, nothing unpickled). ``--scenario a,b`` trains on several scenarios at once (env ``i``
on the ``i % k``-th; ``env_id: GpuSharing-v1`` only, whose padded layouts they share) and
validates on the first. ``--out DIR`` receives ``config.yaml`` (resolved), ``command.txt``
(every invocation), ``model.zip`` (final), ``best_model.zip`` (best validation result meeting
the SLO target; absent if none did), ``metrics.json`` (with the run's ``summary``),
``baselines.json`` (the reference baselines on the validation seeds), ``checkpoints/`` (every
``checkpoint_freq`` timesteps, and on Ctrl-C: a directory with the model and its
normalisation statistics or replay buffer, written as one, and ``last.json`` naming it) and
TensorBoard event files and ``progress.csv`` in ``tb/``. ``--resume`` continues from the last
checkpoint with the configuration saved in ``DIR``: ``progress.csv`` and the event files keep
what was logged up to that checkpoint (one point per tag and step), evaluations and checkpoints
stay at fixed multiples of their frequencies, and resuming a finished run says so and exits 0
(raise ``--timesteps`` to continue it).

The summary at the end compares the last validation with the best baseline on the same seeds,
says whether the scenario's SLO target is met, and lists the model files written.

Training episodes use seeds >= 1,000,000; validation uses ``eval_seeds`` (1000..1004 by
default); the leaderboard's seeds 0..N-1 are never trained on. ``--quiet`` prints errors and
the summary only. Exit codes: 0 done, 2 bad input, 130 Ctrl-C, 143 SIGTERM (checkpoint saved).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import shlex
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpu_sharing_gym.plumbing.cli_args import (
    Parser,
    non_negative_float,
    non_negative_int,
    output_dir,
    positive_int,
)
from gpu_sharing_gym.plumbing.cli_args import fail as cli_fail

PROG = "gsg train"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    p.add_argument(
        "--algo",
        default=None,
        help="maskable_ppo, ppo, a2c or dqn (default: the recipe's, by its name; else "
        "maskable_ppo; a resumed run's own)",
    )
    p.add_argument(
        "--scenario", default="default", help="scenario name or YAML path (a,b: several)"
    )
    p.add_argument(
        "--timesteps", type=positive_int, default=None, help="total timesteps (overrides YAML)"
    )
    p.add_argument("--out", type=output_dir, default=None, help="run directory (required to train)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from DIR's last checkpoint (SB3 unpickles it: resume only run "
        "directories you made or trust)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="NAME|PATH",
        help="a shipped recipe's name (--list-configs) or a YAML path (default: the algo's recipe)",
    )
    p.add_argument("--list-configs", action="store_true", help="list the shipped recipes and exit")
    p.add_argument(
        "--n-envs", type=positive_int, default=None, help="parallel envs (subprocesses if > 1)"
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=None, help="training seed (overrides YAML)"
    )
    p.add_argument(
        "--no-pretrain", action="store_true", help="skip the behaviour-cloning warm start"
    )
    p.add_argument(
        "--init-from",
        default=None,
        metavar="AGENT|ZIP",
        help="start from a saved agent's weights (a pretrained name such as ppo, or a checkpoint "
        "zip with the same network), skipping the warm start: fine-tuning",
    )
    p.add_argument("--quiet", action="store_true", help="print errors and the summary only")
    p.add_argument(
        "--max-minutes",
        type=non_negative_float,
        default=None,
        metavar="M",
        help="stop learning once the run has used M minutes of wall-clock time (pretraining "
        "included; 0: at the first step; the model is saved and evaluated as at the end; "
        "--resume goes on)",
    )
    return p.parse_args(argv)


def fail(msg: str, code: int = 2) -> int:
    return cli_fail(PROG, msg, code)


def list_configs() -> str:
    """The shipped recipes: each name with the first sentence of its description, wrapped (reads
    the YAML files only: no torch needed)."""
    from gpu_sharing_gym.agents.recipes import recipes_table

    return recipes_table(max(60, shutil.get_terminal_size((100, 24)).columns))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_configs:
        print(list_configs())
        return 0
    from gpu_sharing_env.config import ConfigError
    from gpu_sharing_gym.agents.recipes import resolve_config

    try:
        config_ref = resolve_config(args.config) if args.config else None
    except ConfigError as e:
        return fail(str(e))
    if args.out is None:
        return fail("--out: required (the run directory)")
    if config_ref is not None and _trainer(config_ref) == "candidate_dagger":
        return _candidate_dagger(args, config_ref)
    import torch as th
    from stable_baselines3.common.vec_env import VecNormalize

    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
    from gpu_sharing_env.envs.gpu_sharing_v1 import GpuSharingEnvV1
    from gpu_sharing_env.envs.rewards import SLO_WEIGHT
    from gpu_sharing_gym.agents.agent import save_model
    from gpu_sharing_gym.agents.callbacks import (
        CheckpointCallback,
        EvalCallback,
        ProgressBar,
        SimMetricsCallback,
        SloMultiplier,
        TorchThreads,
        WallClockLimit,
        best_baseline,
        latest_checkpoint,
        log_hparams,
        make_logger,
    )
    from gpu_sharing_gym.agents.candidate_policy import (
        CandidateActorCriticPolicy,
        RuleAgreement,
        split_rule_inputs,
    )
    from gpu_sharing_gym.agents.config import (
        ALGOS,
        MASKED_ALGOS,
        default_config_path,
        load_hyperparams,
        resolve_hyperparams,
    )
    from gpu_sharing_gym.agents.envs import (
        common_layout,
        make_expert,
        make_vec_env,
        split_scenarios,
    )
    from gpu_sharing_gym.agents.option_policy import OptionActorCriticPolicy
    from gpu_sharing_gym.agents.policy import SetActorCriticPolicy, SetPoolExtractor, SetPPOPolicy
    from gpu_sharing_gym.plumbing.fileio import atomic_write_text

    th.set_num_threads(1)  # small networks: threads cost more than they give on 2 cores
    out = Path(args.out)
    ckpt = latest_checkpoint(out / "checkpoints")
    saved_cfg = out / "config.yaml"
    if args.algo is None:
        args.algo = _recipe_algo(args.config, ALGOS)
        if args.resume and saved_cfg.is_file():
            args.algo = str(yaml.safe_load(saved_cfg.read_text()).get("algo", args.algo))
    if args.algo not in ALGOS:
        return fail(f"--algo: must be one of {', '.join(ALGOS)} (got {args.algo!r})")
    if args.resume:
        if ckpt is None or not saved_cfg.is_file():
            return fail(f"{out}: nothing to resume (no complete checkpoint and config.yaml)")
        ckpt, damaged = intact_checkpoint(out / "checkpoints")
        if ckpt is None:
            return fail(f"{damaged[0]}; no intact checkpoint to resume from")
        if damaged:
            print(
                f"{PROG}: {damaged[0]}; resuming from the newest intact checkpoint, "
                f"{ckpt.model} ({ckpt.timesteps} timesteps)",
                file=sys.stderr,
            )
        resolved_prev = yaml.safe_load(saved_cfg.read_text())
        if resolved_prev.get("algo") != args.algo:
            return fail(f"{saved_cfg}: algo: the run used {resolved_prev.get('algo')!r}")
        args.scenario = resolved_prev["scenario_arg"]
    elif (out / "config.yaml").exists() and ckpt is not None:
        return fail(f"{out}: already holds a run (use --resume, or another --out)")
    # (a config.yaml with no checkpoint is a start that failed or was stopped before its first
    # checkpoint: nothing to resume, so the same command starts it again)
    try:
        names = split_scenarios(args.scenario)
        scenarios = [load_scenario(n) for n in names]
        scenario = scenarios[0]  # validation scenario
        cfg_path = config_ref or default_config_path(args.algo)
        if args.resume:
            cfg_path = saved_cfg
            settings, algo_kwargs, resolved = resolve_hyperparams(
                {"default": resolved_prev["hyperparams"]}, str(saved_cfg), scenario.name, args.algo
            )
        else:
            settings, algo_kwargs, resolved = load_hyperparams(cfg_path, scenario.name, args.algo)
    except (ConfigError, ValueError) as e:
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
    init_from: str | None = None
    if args.init_from is not None:
        if args.resume:
            return fail("--init-from: a resumed run continues from its own checkpoint")
        from gpu_sharing_gym.agents.agent import AgentLoadError, resolve

        try:
            init_from = str(resolve(args.init_from))
        except (AgentLoadError, OSError, ValueError) as e:
            return fail(f"--init-from: {e}")
    if (args.no_pretrain or init_from is not None) and not args.resume:
        settings = dataclasses.replace(settings, pretrain=None)
        resolved["pretrain"] = None  # config.yaml says what the run did
    masked = args.algo in MASKED_ALGOS
    v1 = settings.env_id == "GpuSharing-v1"
    if v1 and args.algo != "maskable_ppo":
        return fail(f"{cfg_path}: env_id: GpuSharing-v1 agents need --algo maskable_ppo")
    if settings.policy == "candidate" and not v1:
        return fail(f"{cfg_path}: policy: candidate needs env_id: GpuSharing-v1")
    if len(names) > 1 and not v1:
        return fail("--scenario: several scenarios need env_id: GpuSharing-v1 (padded layouts)")
    if args.resume:
        assert ckpt is not None
        done_steps = ckpt.timesteps
        finished = (out / "model.zip").is_file() and "summary" in _read_json(out / "metrics.json")
        if done_steps >= settings.n_timesteps and finished:
            print(
                f"{out}: the run is finished ({done_steps} of {settings.n_timesteps} timesteps);"
                f" nothing to do (raise --timesteps to continue it)"
            )
            return 0
    env_kwargs = dict(settings.env_kwargs)
    if not masked:
        env_kwargs["invalid_action"] = "noop"
    if len(names) > 1:
        env_kwargs.update(common_layout(names, env_kwargs))
    conserving = bool(settings.work_conserving and masked)
    gamma = float(algo_kwargs.get("gamma", 0.99))

    out.mkdir(parents=True, exist_ok=True)
    with (out / "command.txt").open("a") as f:
        f.write(shlex.join([sys.executable, *sys.argv]) + "\n")
    if not args.resume or any(v is not None for v in overrides.values()):
        # (a resume's --timesteps, --n-envs or --seed becomes the run's setting from then on)
        atomic_write_text(
            saved_cfg,
            yaml.safe_dump(
                {"algo": args.algo, "scenario": scenario.name, "scenario_arg": args.scenario,
                 "config_file": resolved_prev["config_file"] if args.resume else str(cfg_path),
                 "hyperparams": resolved,
                 "init_from": resolved_prev.get("init_from") if args.resume else init_from},
                sort_keys=False,
            ),
        )  # fmt: skip

    try:
        probe_kwargs, rule_inputs = split_rule_inputs(env_kwargs)
        probe = (GpuSharingEnvV1 if v1 else GpuSharingEnv)(scenario, **probe_kwargs)
        for name in rule_inputs:
            make_expert(name)
    except ValueError as e:
        return fail(f"{cfg_path}: env_kwargs: {e}")
    meta: dict[str, Any] = {
        "algo": args.algo,
        "scenario": scenario.name,
        "scenarios": [s.name for s in scenarios],
        "env_id": settings.env_id,
        # v0 agents are tied to their option list; v1 agents read options by their features
        "n_options": None if v1 else len(probe.sim.options),
        "options": [o.label for o in probe.sim.options],
        "work_conserving": conserving,
        "expert_hint": settings.expert_hint,
        "window_order": env_kwargs.get("window_order", "fifo"),
        "migration_slots": int(env_kwargs.get("migration_slots", 0)),
        "job_history": bool(env_kwargs.get("job_history", False)),
        "rule_inputs": rule_inputs,
    }
    try:
        venv = make_vec_env(
            names, settings.n_envs, settings.seed, env_kwargs, conserving,
            settings.expert_hint, settings.env_id, settings.paired_reference,
            settings.train_seed_pool, settings.paired_cache_dir, settings.vec_env,
            settings.seed_replay,
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
        if settings.policy == "candidate":
            policy = CandidateActorCriticPolicy
        elif v1:
            policy = OptionActorCriticPolicy
        else:
            policy = SetActorCriticPolicy if masked else SetPPOPolicy
        meta["policy"] = policy.__name__
    meta["policy_kwargs"] = dict(settings.policy_kwargs)

    t_start = time.perf_counter()
    metrics_path = out / "metrics.json"
    prev: dict[str, Any] = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if settings.normalize_reward:
        if args.resume and ckpt is not None and ckpt.vecnormalize.is_file():
            try:
                venv = VecNormalize.load(str(ckpt.vecnormalize), venv)
            except Exception as e:  # truncated or corrupt statistics
                _close_quietly(venv)
                return fail(f"{ckpt.vecnormalize}: cannot resume from it ({type(e).__name__})")
        else:
            venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=gamma,
                                clip_reward=REWARD_CLIP)  # fmt: skip
    if args.resume:
        assert ckpt is not None
        try:
            model = algo_cls.load(ckpt.model, env=venv, device="cpu")
            if hasattr(model, "load_replay_buffer") and ckpt.replay_buffer.is_file():
                model.load_replay_buffer(ckpt.replay_buffer)
        except Exception as e:  # a checkpoint that passed the zip check and still does not load
            _close_quietly(venv)
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return fail(f"{ckpt.model}: cannot resume from it ({reason})")
        if not args.quiet:
            print(f"resuming {out} at {model.num_timesteps} timesteps", file=sys.stderr)
    else:
        try:
            model = algo_cls(
                policy, venv, policy_kwargs=policy_kwargs, seed=settings.seed, device="cpu",
                verbose=0, **algo_kwargs,
            )  # fmt: skip
        except (TypeError, ValueError) as e:
            return fail(f"{cfg_path}: {scenario.name}: {e}")
        if init_from is not None:
            try:
                _init_weights(model, init_from, meta)
            except ValueError as e:
                _close_quietly(venv)
                return fail(f"--init-from: {e}")
    resume_step = int(model.num_timesteps) if args.resume else None
    model.set_logger(make_logger(out / "tb", resume_step))

    # Reference baselines on the validation seeds (once per run directory).
    ref_path = out / "baselines.json"
    if ref_path.exists():
        reference = json.loads(ref_path.read_text())
    else:
        reference = best_baseline(scenario, settings.eval_seeds, settings.eval_baselines)
        atomic_write_text(ref_path, json.dumps(reference, indent=1))

    # Evaluations logged after the checkpoint we resume from are redone on schedule; the best
    # validation result so far still guards best_model.zip.
    full_history: list[dict[str, Any]] = list(prev.get("eval_history", []))
    history = [h for h in full_history if resume_step is None or h["timesteps"] <= resume_step]
    best_so_far = min(
        (h["jct_mean_s"] for h in full_history if h.get("meets_slo")), default=float("inf")
    )
    bc_info: dict[str, Any] = dict(prev.get("pretrain", {}))
    timing: dict[str, Any] = dict(prev.get("timing", {}))

    def run_wall_s() -> float:
        """The run's wall-clock seconds so far (earlier processes of a resumed run included)."""
        return float(prev.get("wall_s", 0.0)) + time.perf_counter() - t_start

    def write_metrics(
        final: dict[str, Any] | None = None, summary: dict[str, Any] | None = None
    ) -> None:
        data = {
            "algo": args.algo,
            "scenario": scenario.name,
            "scenarios": [s.name for s in scenarios],
            "timesteps": int(model.num_timesteps),
            "target_timesteps": settings.n_timesteps,
            "wall_s": run_wall_s(),
            "timing": timing,
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
        if summary is not None:
            data["summary"] = summary
        elif "summary" in prev:
            data["summary"] = prev["summary"]
        atomic_write_text(metrics_path, json.dumps(data, indent=1, default=float))

    checkpoint = CheckpointCallback(out, settings.checkpoint_freq, meta, settings.keep_models)
    if not args.resume:
        log_hparams(model.logger, {"algo": args.algo, "scenario": scenario.name, **resolved})
        if settings.pretrain is not None and args.algo != "dqn":
            t0 = time.perf_counter()
            try:
                bc_info = _pretrain(model, names[0], env_kwargs, settings, conserving, gamma,
                                    out, args.quiet)  # fmt: skip
            except (
                KeyboardInterrupt
            ) as e:  # Ctrl-C, or SIGTERM (gpu_sharing_gym.plumbing.interrupt)
                from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by

                _close_quietly(venv)
                print(f"\n{stopped_by(e)} during pretraining (labelled episodes are cached); "
                      "start again with the same command", file=sys.stderr)  # fmt: skip
                shutil.rmtree(out / "tb", ignore_errors=True)
                saved_cfg.unlink()
                return exit_code(e)
            timing["pretrain_s"] = time.perf_counter() - t0
            for k, v in bc_info.items():
                if isinstance(v, int | float):
                    model.logger.record(f"pretrain/{k}", v)
            model.logger.dump(0)

    # Ctrl-C from here on (the first checkpoint, the evaluator's set-up, learning) saves a
    # checkpoint and says how to go on.
    t_learn, steps0 = time.perf_counter(), int(model.num_timesteps)
    try:
        if not args.resume:
            # a run killed before its first checkpoint resumes after pretraining
            checkpoint.init_callback(model)
            checkpoint.save()
            write_metrics()
        evaluator = EvalCallback(
            args.algo, scenario, settings.eval_seeds, env_kwargs, reference, settings.eval_freq,
            out, meta, settings.figure_every, history, on_eval=lambda h: write_metrics(),
            conserving=conserving, hint=settings.expert_hint, env_id=settings.env_id,
            best_jct=best_so_far,
            clock=run_wall_s,
        )  # fmt: skip
        callbacks = [SimMetricsCallback(), evaluator, checkpoint]
        if rule_inputs:
            callbacks.append(RuleAgreement(rule_inputs))
        if settings.slo_multiplier is not None:
            sm = settings.slo_multiplier
            rkw = dict(env_kwargs.get("reward_kwargs") or {})
            weight = float(rkw.get("slo_weight", SLO_WEIGHT))
            if args.resume and ckpt is not None:  # the weight where the run stopped
                weight = float(ckpt.state().get("slo_weight", weight))
            multiplier = SloMultiplier(
                probe.sim.cfg.slo_target, weight, sm.lr, sm.margin, sm.max_weight, sm.window,
                targets=[float(c.slo_target) for c in venv.get_attr("cfg")],
            )  # fmt: skip
            checkpoint.state = lambda: {"slo_weight": multiplier.weight}
            callbacks.append(multiplier)
        if settings.update_threads != 1:
            callbacks.append(TorchThreads(settings.update_threads))
        if args.max_minutes is not None:
            callbacks.append(WallClockLimit(60.0 * args.max_minutes - run_wall_s()))
        callbacks.append(ProgressBar(settings.n_timesteps, disable=True if args.quiet else None))
        remaining = settings.n_timesteps - model.num_timesteps
        if remaining > 0:
            model.learn(
                total_timesteps=remaining, callback=callbacks, reset_num_timesteps=False,
                progress_bar=False,
            )  # fmt: skip
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (gpu_sharing_gym.plumbing.interrupt)
        from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by

        checkpoint.init_callback(model)
        path = checkpoint.save()
        write_metrics()
        _close_quietly(venv)
        model.logger.close()
        print(
            f"\n{stopped_by(e)} at {model.num_timesteps} timesteps; checkpoint {path} saved; "
            f"continue with --resume",
            file=sys.stderr,
        )
        return exit_code(e)
    learn_s = time.perf_counter() - t_learn
    timing["train_steps_per_s"] = (int(model.num_timesteps) - steps0) / max(learn_s, 1e-9)
    checkpoint.init_callback(model)
    checkpoint.save()
    save_model(model, out / "model.zip", {**meta, "timesteps": int(model.num_timesteps)})
    # The final validation goes through the evaluator: eval/ tags and best_model.zip for it too.
    evaluator.init_callback(model)
    if not history or history[-1]["timesteps"] != model.num_timesteps or not evaluator.last_records:
        evaluator.run()
    final = {**{k: v for k, v in history[-1].items() if k not in ("timesteps", "jct_per_seed")},
             "per_seed": evaluator.last_records}  # fmt: skip
    summary = outcome(
        history[-1], reference, scenario.slo_target, model_files(out), settings.eval_seeds
    )
    write_metrics(final, summary)
    print(
        f"done: {model.num_timesteps} timesteps in {time.perf_counter() - t_start:.0f} s\n"
        + summary_text(summary)
    )
    venv.close()
    return 0


def intact_checkpoint(ckpt_dir: Path) -> tuple[Any, list[str]]:
    """The newest checkpoint under ``ckpt_dir`` whose ``model.zip`` is whole (None if none is),
    and one line for each newer one that is damaged (a truncated or corrupt file), newest first.
    The latest checkpoint (:func:`latest_checkpoint`) comes first; then any other complete
    ``step_*`` directory (one left by a run killed before it removed its older checkpoints)."""
    from gpu_sharing_gym.agents.agent import AgentLoadError, check_checkpoint
    from gpu_sharing_gym.agents.callbacks import (
        CHECKPOINT_MANIFEST,
        Checkpoint,
        latest_checkpoint,
    )

    found: list[Checkpoint] = []
    latest = latest_checkpoint(ckpt_dir)
    if latest is not None:
        found.append(latest)
    others: list[Checkpoint] = []
    for d in ckpt_dir.glob("step_*"):
        steps = _read_json(d / CHECKPOINT_MANIFEST).get("timesteps")
        if isinstance(steps, int) and (d / "model.zip").is_file():
            others.append(Checkpoint(d / "model.zip", steps))
    found += sorted((c for c in others if c not in found), key=lambda c: -c.timesteps)
    damaged: list[str] = []
    for c in found:
        try:
            check_checkpoint(c.model)
        except AgentLoadError as e:
            damaged.append(str(e))
            continue
        return c, damaged
    return None, damaged


def model_files(out: Path) -> list[dict[str, Any]]:
    """The model files a run directory holds (only those that exist), with their timesteps."""
    import zipfile

    from gpu_sharing_gym.agents.agent import META_NAME

    roles = {"model.zip": "final model",
             "best_model.zip": "best validation result meeting the SLO target"}  # fmt: skip
    files = []
    for name, role in roles.items():
        path = out / name
        if not path.is_file():
            continue
        try:
            with zipfile.ZipFile(path) as z:
                steps = json.loads(z.read(META_NAME)).get("timesteps")
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            steps = None
        files.append({"path": str(path), "role": role, "timesteps": steps})
    return files


def outcome(
    last: dict[str, Any],
    reference: dict[str, Any],
    slo_target: float,
    files: list[dict[str, Any]],
    seeds: Any = (),
) -> dict[str, Any]:
    """The run's outcome: the last validation beside the best baseline on the same seeds,
    whether the scenario's SLO target is met, and the model files written."""
    best = reference.get("best")
    base = reference.get("baselines", {}).get(best, {}) if best else {}
    slo = float(last["slo_attainment"])
    return {
        "timesteps": int(last["timesteps"]),
        "eval_seeds": [int(s) for s in (reference.get("seeds") or seeds)],
        "agent": {"jct_mean_s": float(last["jct_mean_s"]), "slo_attainment": slo},
        "best_baseline": {
            "name": best,
            "jct_mean_s": float(base.get("jct_mean_s", float("nan"))),
            "slo_attainment": float(base.get("slo_attainment", float("nan"))),
        },
        "slo_target": float(slo_target),
        # None: no online services, no SLO (slo_attainment is NaN)
        "meets_slo": None if math.isnan(slo) else bool(slo >= slo_target - 1e-12),
        "model_files": files,
    }


def summary_text(s: dict[str, Any]) -> str:
    """:func:`outcome` for people: a few lines."""
    a, b = s["agent"], s["best_baseline"]
    seeds = s["eval_seeds"]
    where = ", ".join(map(str, seeds)) if len(seeds) <= 5 else f"{seeds[0]}, ..., {seeds[-1]}"
    lines = [
        f"validation at {s['timesteps']} timesteps on seeds {where}:",
        f"  agent: jct_mean_s {a['jct_mean_s']:.0f}, slo_attainment {a['slo_attainment']:.4f}",
    ]
    if b["name"] is not None:
        lines.append(
            f"  best baseline {b['name']}: jct_mean_s {b['jct_mean_s']:.0f}, "
            f"slo_attainment {b['slo_attainment']:.4f}"
        )
    if s["meets_slo"] is None:
        lines.append("  no SLO to meet (the scenario has no online services)")
    elif s["meets_slo"]:
        lines.append(f"  meets the SLO target {s['slo_target']:g}")
    else:
        lines.append(
            f"  MISSES the SLO target {s['slo_target']:g} "
            f"(slo_attainment {a['slo_attainment']:.4f})"
        )
    if s["model_files"]:
        lines.append("models:")
        for f in s["model_files"]:
            at = f" at {f['timesteps']} timesteps" if f["timesteps"] is not None else ""
            lines.append(f"  {f['path']}  ({f['role']}{at})")
    if not any(f["path"].endswith("best_model.zip") for f in s["model_files"]):
        lines.append("  (no best_model.zip: no validation met the SLO target)")
    return "\n".join(lines)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _trainer(path: Path) -> str | None:
    """A recipe's top-level ``trainer:`` (a recipe run by another trainer than SB3's), if any."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None  # (the SB3 path reports it)
    return data.get("trainer") if isinstance(data, dict) else None


def _candidate_dagger(args: argparse.Namespace, config: Path) -> int:
    """``trainer: candidate_dagger`` recipes: :mod:`gpu_sharing_gym.agents.candidate_dagger`
    (``--out``, ``--resume``, ``--max-minutes``; the recipe holds every other setting)."""
    taken = {"algo": None, "scenario": "default", "timesteps": None, "n_envs": None, "seed": None,
             "init_from": None, "no_pretrain": False}  # fmt: skip
    for name, unset in taken.items():
        if getattr(args, name, unset) not in (unset, None):
            flag = "--" + name.replace("_", "-")
            return fail(f"{flag}: not taken by a trainer: candidate_dagger recipe ({config})")
    from gpu_sharing_gym.agents.candidate_dagger import main as train_candidates

    argv = ["train", "--config", str(config), "--out", str(args.out)]
    if args.resume:
        argv.append("--resume")
    if args.max_minutes is not None:
        argv += ["--max-minutes", str(args.max_minutes)]
    return train_candidates(argv)


def _recipe_algo(config: str | None, algos: Any) -> str:
    """The algorithm a recipe is for, by its name (``maskable_ppo_v1`` -> ``maskable_ppo``,
    ``dqn`` -> ``dqn``, ``my/dqn_fast.yaml`` -> ``dqn``: the longest algorithm name its file
    name starts with); ``maskable_ppo`` otherwise."""
    if config is None:
        return "maskable_ppo"
    name = Path(config).stem if Path(config).suffix in (".yaml", ".yml") else Path(config).name
    fits = [a for a in algos if name == a or name.startswith(f"{a}_")]
    return max(fits, key=len) if fits else "maskable_ppo"


def _init_weights(model: Any, path: str, meta: dict[str, Any]) -> None:
    """Load a saved agent's policy weights into ``model`` (a fine-tuning start). The agent must
    have been trained with the same env, policy class, ``policy_kwargs`` and hint as the run's
    recipe; the weights are read as a state dict (nothing is unpickled)."""
    from gpu_sharing_gym.agents.agent import AgentLoadError, read_checkpoint

    try:
        saved, state = read_checkpoint(Path(path))
    except (AgentLoadError, OSError, ValueError) as e:
        raise ValueError(str(e)) from None
    # (``window_order`` is absent from checkpoints older than it: FIFO)
    defaults = {"window_order": "fifo"}
    for key in ("env_id", "policy", "policy_kwargs", "expert_hint", "window_order"):
        theirs, ours = saved.get(key, defaults.get(key)), meta.get(key, defaults.get(key))
        if theirs != ours:
            raise ValueError(
                f"{path}: {key} is {theirs!r}, the recipe's is {ours!r} "
                f"(fine-tune with the recipe that trained it)"
            )
    moves_from, moves_to = int(saved.get("migration_slots", 0)), int(meta.get("migration_slots", 0))
    if moves_from != moves_to:
        if moves_from or not moves_to:
            raise ValueError(
                f"{path}: migration_slots is {moves_from}, the recipe's is {moves_to} (an agent "
                f"without migration slots can start one with them, not the other way round)"
            )
        state = widen_job_inputs(state, model.policy.state_dict())
    try:
        model.policy.load_state_dict(state)
    except RuntimeError as e:
        raise ValueError(f"{path}: weights do not fit the recipe's network ({e})") from None


def widen_job_inputs(state: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` (an agent without migration slots) fitted to ``target``'s network (one with
    them): the job encoders' first layers get zero weights for the added ``jobs`` columns
    (``MOVE_FEATURES``), so every queue row is encoded exactly as before (a function-preserving
    widening, as in Chen et al., "Net2Net", ICLR'16): where no job is a migration candidate the
    widened network scores every action as the saved one did. Candidate rows are new rows (at
    first encoded like a queued job with their features) that the pooled context and the
    candidates now include; training learns what the new columns mean. Every other tensor is
    taken as saved."""
    import torch as th

    from gpu_sharing_env.envs.observation_v1 import MOVE_FEATURES

    out = dict(state)
    for k, w in state.items():
        t = target.get(k)
        if (
            t is not None
            and k.endswith("job.0.weight")
            and w.dim() == 2
            and t.shape[0] == w.shape[0]
            and t.shape[1] == w.shape[1] + len(MOVE_FEATURES)
        ):
            out[k] = th.cat([w, w.new_zeros(w.shape[0], len(MOVE_FEATURES))], dim=1)
    return out


def _close_quietly(venv: Any) -> None:
    """Close the envs; subprocess workers that the same Ctrl-C already stopped are not waited
    for (their pipes are closed)."""
    with contextlib.suppress(EOFError, OSError):
        venv.close()


#: ``VecNormalize``'s clip on normalised rewards: high, since a few decisions (a gang that
#: waits for hours) legitimately cost many standard deviations.
REWARD_CLIP = 100.0


def _pretrain(
    model: Any,
    scenario_arg: str,
    env_kwargs: dict[str, Any],
    settings: Any,
    conserving: bool,
    gamma: float,
    out: Path,
    quiet: bool,
) -> dict[str, Any]:
    """Behaviour cloning (and DAgger rounds) into ``model.policy`` from expert-labelled
    episodes (``gpu_sharing_gym.agents.expert``; the planner as expert is expert iteration)."""
    import numpy as np
    import torch as th

    from gpu_sharing_gym.agents.bc import Demos, pretrain
    from gpu_sharing_gym.agents.expert import label_episodes, training_seeds
    from gpu_sharing_gym.plumbing.progress import progress

    pt = settings.pretrain
    total = pt.episodes + pt.lookahead_episodes + pt.dagger_rounds * pt.dagger_episodes
    bar = progress(total, "pretrain", "ep", disable=quiet)
    common: dict[str, Any] = {
        "gamma": gamma,
        "env_id": settings.env_id,
        "hint": settings.expert_hint,
        "paired": settings.paired_reference,
        "conserving": conserving,
        "workers": pt.workers,
        "progress": bar.update,
    }
    cache = Path(pt.cache_dir) if pt.cache_dir else out / "demos"
    data: list[Demos] = []
    info: dict[str, Any] = {}
    if pt.episodes:
        t0 = time.perf_counter()
        demos = label_episodes(
            scenario_arg, env_kwargs, pt.expert, training_seeds(pt.episodes, settings.seed),
            expert_kwargs=pt.expert_kwargs, cache_dir=cache, **common,
        )  # fmt: skip
        data.append(demos)
        info["expert_train_jct_mean_s"] = float(
            np.mean([m["jct_mean_s"] for m in demos.episode_metrics])
        )
        info["label_s"] = time.perf_counter() - t0
    if pt.lookahead_episodes:
        from gpu_sharing_gym.agents.lookahead import lookahead_demonstrations

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
    scale = _value_scale(model, Demos.concat(data))

    def fit(seed: int) -> dict[str, float]:
        th.set_num_threads(settings.update_threads)  # minibatches, as in the PPO update
        try:
            return pretrain(model.policy, Demos.concat(data), pt.epochs, pt.lr, pt.batch_size,
                            seed=seed, value_scale=scale)  # fmt: skip
        finally:
            th.set_num_threads(1)

    t0 = time.perf_counter()
    result = fit(settings.seed)
    student_jct = float("nan")
    for r in range(pt.dagger_rounds):
        student = (
            {
                "format": 2 if settings.env_id == "GpuSharing-v1" else 1,
                "policy": type(model.policy).__name__,
                "policy_kwargs": dict(settings.policy_kwargs),
                "work_conserving": conserving,
                "expert_hint": settings.expert_hint,
                "job_history": bool(env_kwargs.get("job_history", False)),
                "rule_inputs": list(env_kwargs.get("rule_inputs") or []),
            },
            {k: v.detach().clone() for k, v in model.policy.state_dict().items()},
        )
        d = label_episodes(
            scenario_arg, env_kwargs, pt.expert,
            training_seeds(pt.dagger_episodes, settings.seed + 1 + r),
            expert_kwargs=pt.expert_kwargs, student=student, **common,
        )  # fmt: skip
        student_jct = float(np.mean([m["jct_mean_s"] for m in d.episode_metrics]))
        data.append(d)
        result = fit(r + 1)
    info["fit_s"] = time.perf_counter() - t0
    bar.close()
    return {
        **result,
        **info,
        "samples": int(sum(len(d) for d in data)),
        "expert": pt.expert,
        "value_scale": scale,
        "student_train_jct_mean_s": student_jct,
    }


def _value_scale(model: Any, demos: Any) -> float:
    """The factor that puts demonstration returns on the scale of the value targets PPO will
    see: with ``VecNormalize`` rewards are divided by the running standard deviation of the
    return, seeded here from the demonstrations' (when they vary at all)."""
    import numpy as np
    from stable_baselines3.common.vec_env import VecNormalize

    norm = model.get_vec_normalize_env()
    if not isinstance(norm, VecNormalize):
        return 1.0
    std = float(np.std(demos.returns))
    if std < 1e-6:
        return 1.0  # e.g. paired returns of the reference itself: all zero
    norm.ret_rms.var = np.array(std**2)
    norm.ret_rms.count = 100.0  # a prior worth 100 steps: PPO's own returns take over fast
    return 1.0 / std


if __name__ == "__main__":
    sys.exit(main())
