"""The benchmark suite: replay throughput, env steps/s, openb replay, PPO's time in the env,
peak memory.

    gsg bench --json out/bench.json                  # the full suite (~10 min, 2 cores)
    gsg bench --quick --json out/quick.json          # CI-sized (seconds)
    gsg bench --only env --sizes 16,64 --seconds 2
    gsg bench markdown out/bench.json                # -> BENCHMARKS.md

Sections (``--only``, comma-separated; default all):

``replay``
    A 20,000-job PAI-like synthetic trace (``pai-hetero``'s generator: fractional requests,
    heavy-tailed durations, gangs, high-GPU tasks) replayed through the evaluation loop
    (``gpu_sharing_env.evaluation.runner.run_episode``, the leaderboard's loop) with ``first_fit``,
    ``reserve_pack`` and ``muxflow`` on 64, 1,024 and 6,500 GPUs. The fleet is PAI's machine
    mix (P100 x2, T4 x2, V100-32GB x8, V100-16GB x8 nodes by their share of PAI's GPUs) scaled
    to the size. The **density is fixed**: 0.1 job per GPU-hour (PAI's figure,
    ``docs/workloads.md``) and one online service per 28 GPUs (``pai-hetero``'s 8 per 226), so
    the arrival window is 20,000 / (0.1 x GPUs) hours (3,125 h at 64 GPUs, 31 h at 6,500)
    and the horizon that window plus the 72-hour duration cap. ``jobs_per_s`` is offline jobs
    / wall seconds of the whole episode (workload generation included), ``events_per_s`` the
    simulator's events / wall seconds. Each replay runs ``--replay-repeat`` times (default 2,
    in rounds over all policies and sizes) and the fastest run is reported, with every run's
    wall time (``wall_s_runs``). Each replay runs in a fresh subprocess whose peak
    resident set (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, interpreter and imports
    included) is ``peak_mem_mb``.
``openb``
    The real Alibaba openb v2023 trace on its 6,212-GPU fleet (``configs/scenarios/openb.yaml``)
    with ``first_fit``, in a fresh subprocess: ``openb_replay_s`` (skipped with a note when
    the data is absent).
``env``
    ``GpuSharing-v0`` steps/s under uniformly random legal actions at 16, 64, 256 and 1,024
    GPUs beside CartPole-v1 made with ``gymnasium.make`` in the same run (issue 4's contract:
    ``env_steps_per_s``, ``cartpole_steps_per_s``, ``ratio``, ``targets``, ``meets_target``).
    Clusters are ``default``'s GPU mix scaled to the size with jobs and services per GPU kept.
    ``env_work_per_step`` gives, per size, the simulator's events, load ticks and
    service-ticks (ticks x live services) per step, the step time, the step time the target
    allows, and ``tick_math_us_per_step``: service-ticks per step x ``tick_math_us``, the CPython
    time of the online model's arithmetic for one service-tick on local floats (a floor under
    any pure-Python step of this model, see :func:`tick_math_us`).
``ppo``
    MaskablePPO (sb3-contrib) as ``agents.make_model`` builds it, trained on ``default``; the
    env is wrapped to time ``step`` and ``reset``: ``ppo_env_share`` = time in the env /
    training wall time.
``training``
    Only with ``--training`` (or ``--only training``; issue 22), in this one process, one torch
    thread: the default recipe (``configs/recipes/maskable_ppo.yaml`` on ``default``: its env
    wrappers, policy and hyperparameters as ``gsg train`` builds them; the PPO phase only: no
    pretraining, evaluation or checkpoints) trained for ``--training-steps`` (16,384) beside
    SB3 PPO (default ``MlpPolicy`` and hyperparameters, the same SB3) on CartPole-v1 for as
    many steps, the previous default recipe (``maskable_ppo_antman``) as a comparison row, the
    option-agnostic learning recipes (``maskable_ppo_v1_pool``, the first ``ppo``'s, and
    ``maskable_ppo_v1_light``, the current one's) as rows of their own, and raw
    ``GpuSharing-v1`` / ``-v0`` steps/s on ``default`` under random legal actions beside
    CartPole's raw steps/s, with the ratios (and, for the record, raw ``GpuSharing-v1`` on
    ``pai-busy``, a 226-GPU fleet: ``large_fleet``). The default recipe's paired reward reads its
    reference curves from the user's cache when an earlier run left them there (the counts are
    reported: ``reference_curves``). Fewer steps than one rollout
    (``n_steps``) shorten the rollout of both learners to the steps (CI sizes).
``sbs``
    Only when ``SBS_PEER_GIT`` is set (a local git dir of alibaba/clusterdata): our trace
    replay beside Alibaba's PAI v2020 simulator, whole process, at the trace's own arrivals
    and at 1,000 jobs/min (:mod:`gpu_sharing_gym.bench.side_by_side`; issue 24).

``checks`` holds every target of issue 9 with its measured value. Given ``--sizes`` (or
``--seconds``) without ``--only``, only the ``env`` section runs (issue 4's command line).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import gpu_sharing_env  # (registers GpuSharing-v0)
from gpu_sharing_env import _modes
from gpu_sharing_env.config import NodeGroupConfig, ScenarioConfig, load_scenario
from gpu_sharing_env.sim.engine import _NOISE_SCALE, DUTY_STEP, NOISE_AR
from gpu_sharing_gym.plumbing.cli_args import (
    Parser,
    fail,
    int_range,
    non_negative_float,
    non_negative_int,
    output_file,
    positive_float,
    positive_int,
)
from gpu_sharing_gym.plumbing.fileio import atomic_write_text
from gpu_sharing_gym.plumbing.interrupt import exit_code, stopped_by
from gpu_sharing_gym.plumbing.progress import is_tty, progress

PROG = "gsg bench"
SECTIONS = ("replay", "openb", "env", "ppo", "sbs", "training")
#: Sections of a plain run (``training`` runs when asked: ``--training``).
DEFAULT_SECTIONS = ("replay", "openb", "env", "ppo", "sbs")
SIZES = (16, 64, 256, 1024)
TARGETS = {"16": 0.25, "1024": 0.05}
#: GPUs in the default scenario (4 A100 + 4 V100 + 2x2 T4): the unit jobs are scaled from.
DEFAULT_GPUS = 12
#: Synthetic-generator parameters that are arrival rates (scaled with the cluster).
RATE_PARAM_HINTS = ("rate", "per_h", "per_day", "arrivals")

REPLAY_POLICIES = ("first_fit", "reserve_pack", "muxflow")
REPLAY_SIZES = (64, 1024, 6500)
REPLAY_JOBS = 20_000
#: Offline jobs per GPU-hour (PAI: ~0.1 task per GPU per hour).
JOBS_PER_GPU_H = 0.1
#: Online services per GPU (pai-hetero: 8 on 226 GPUs).
SERVICES_PER_GPU = 8 / 226
#: PAI's machine mix (pai_machine_spec.csv: P100x2 798, T4x2 497, V100M32x8 135, V100x8 104):
#: (type, GPUs per node, vCPUs, interconnect, GPUs in PAI's fleet).
PAI_MIX = (
    ("V100-32GB", 8, 96.0, "nvlink", 135 * 8),
    ("V100-16GB", 8, 96.0, "nvlink", 104 * 8),
    ("T4", 2, 96.0, "pcie", 497 * 2),
    ("P100", 2, 64.0, "pcie", 798 * 2),
)
QUICK = {"replay_jobs": 400, "replay_sizes": (64, 256), "env_sizes": (16, 64), "seconds": 0.3}
QUICK_PPO_STEPS = 256
#: Runs of each replay (in rounds); the fastest is reported.
REPLAY_REPEAT = 2
#: Wall-clock cap per replay (s): policies whose decisions scan the fleet in Python would take
#: hours at 6,500 GPUs; their rate is then measured on the part replayed.
REPLAY_MAX_S = 60.0
PPO_STEPS = 4096
#: ``training``: steps of each learner (issue 22 measures ``time/fps`` at 16k steps).
TRAINING_STEPS = 16_384
QUICK_TRAINING_STEPS = 1024
#: ``training``: the recipe and scenario measured.
TRAINING_RECIPE = "maskable_ppo"
#: ``training``: the previous default recipe, measured beside it as a comparison row.
TRAINING_BEFORE = "maskable_ppo_antman"
#: ``training``: the option-agnostic learning recipes (the first ``ppo``'s; the same with the
#: light critic, the current ``ppo``'s; and that on both cores), measured beside it: the
#: recipes that learn, at their own speed.
TRAINING_LEARNERS = ("maskable_ppo_v1_pool", "maskable_ppo_v1_light", "maskable_ppo_v1_fast")
TRAINING_SCENARIO = "default"
#: A large fleet whose raw ``GpuSharing-v1`` steps/s the training section also measures (226
#: GPUs: the observation's incremental resident columns, ``observation_v1.SLOTS_MIN_GPUS``).
LARGE_FLEET_SCENARIO = "pai-busy"
#: Issue 22's targets: training steps/s, training / SB3 PPO on CartPole, latest env / CartPole.
TRAINING_TARGETS = {"steps_per_s": 1000.0, "x_cartpole_ppo": 0.7, "env_x_cartpole": 0.1}
#: Issue 9's targets.
REPLAY_TARGETS = {"first_fit@6500": 2000.0, "muxflow@6500": 500.0}
SCALING_TARGET = 1 / 3
PPO_ENV_SHARE_TARGET = 0.10
REPLAY_MEM_TARGET_MB = 1024.0
#: Alibaba's PAI v2020 simulator, 20,000 jobs on 6,500 GPUs (issue 9): jobs/s range.
PAI_SIM_JOBS_PER_S = (100.0, 210.0)


# ====================================================================== scenarios
def scaled_scenario(base: ScenarioConfig, n_gpus: int) -> ScenarioConfig:
    """``base``'s GPU mix at ``n_gpus`` GPUs (a multiple of 16), jobs per GPU unchanged."""
    if n_gpus % 16:
        raise ValueError(f"--sizes: each size must be a multiple of 16 (got {n_gpus})")
    k = n_gpus // 16
    nodes = (
        NodeGroupConfig("A100-40GB", count=k, gpus_per_node=4, vcpus=64, host_mem_gb=512,
                        interconnect="nvlink"),
        NodeGroupConfig("V100-16GB", count=2 * k, gpus_per_node=4, vcpus=48, host_mem_gb=256,
                        interconnect="nvlink"),
        NodeGroupConfig("T4", count=2 * k, gpus_per_node=2, vcpus=32, host_mem_gb=128,
                        interconnect="pcie"),
    )  # fmt: skip
    scale = n_gpus / DEFAULT_GPUS
    off = base.workload.offline
    params = dict(off.params)
    for key, value in list(params.items()):
        if any(h in key for h in RATE_PARAM_HINTS) and isinstance(value, int | float):
            params[key] = value * scale
    off = dataclasses.replace(
        off, params=params, max_jobs=round(off.max_jobs * scale) if off.max_jobs else 0
    )
    on = dataclasses.replace(
        base.workload.online, num_services=round(base.workload.online.num_services * scale)
    )
    return dataclasses.replace(
        base,
        name=f"{base.name}-{n_gpus}gpu",
        cluster=dataclasses.replace(base.cluster, nodes=nodes, fleet=None),
        workload=dataclasses.replace(base.workload, offline=off, online=on),
        env=dataclasses.replace(base.env, max_gpus=0),
    )


def pai_fleet(n_gpus: int) -> tuple[NodeGroupConfig, ...]:
    """PAI's machine mix at exactly ``n_gpus`` GPUs (even): 8-GPU groups rounded to whole
    nodes (at least one), T4 likewise, P100 (2 per node) takes the rest."""
    if n_gpus % 2 or n_gpus < 32:
        raise ValueError(f"replay sizes must be even and >= 32 (got {n_gpus})")
    total = sum(m[4] for m in PAI_MIX)
    groups = []
    left = n_gpus
    for gpu_type, per_node, vcpus, link, gpus in PAI_MIX[:-1]:
        count = max(1, round(n_gpus * gpus / total / per_node))
        left -= count * per_node
        groups.append(NodeGroupConfig(gpu_type, count, per_node, vcpus, 512.0, link))  # type: ignore[arg-type]
    gpu_type, per_node, vcpus, link, _ = PAI_MIX[-1]
    groups.append(NodeGroupConfig(gpu_type, left // per_node, per_node, vcpus, 512.0, link))  # type: ignore[arg-type]
    return tuple(groups)


def replay_scenario(n_gpus: int, n_jobs: int = REPLAY_JOBS) -> ScenarioConfig:
    """``n_jobs`` PAI-like jobs at ``JOBS_PER_GPU_H`` on PAI's mix of ``n_gpus`` GPUs."""
    base = load_scenario("pai-hetero")
    rate = JOBS_PER_GPU_H * n_gpus
    span_h = n_jobs / rate
    off = base.workload.offline
    duration_cap_h = float(off.params.get("duration_max_s", 259_200.0)) / 3600.0
    off = dataclasses.replace(
        off,
        params={**off.params, "arrivals_per_h": rate},
        # 25% slack so the diurnal and weekly cycles still deliver n_jobs; max_jobs cuts there.
        arrival_window_h=1.25 * span_h,
        max_jobs=n_jobs,
    )
    on = dataclasses.replace(
        base.workload.online, num_services=max(1, round(SERVICES_PER_GPU * n_gpus))
    )
    return dataclasses.replace(
        base,
        name=f"pai-replay-{n_gpus}",
        horizon_h=math.ceil(1.25 * span_h + duration_cap_h),
        cluster=dataclasses.replace(base.cluster, nodes=pai_fleet(n_gpus), fleet=None),
        workload=dataclasses.replace(base.workload, offline=off, online=on),
    )


# ====================================================================== replay (subprocess)
def _peak_mem_mb() -> float:
    """Peak resident set of this process in MB (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024.0 * 1024.0) if sys.platform == "darwin" else rss / 1024.0


class _WallCap(Exception):
    """The replay ran past its wall-clock cap."""


def replay_one(
    policy_name: str, cfg: ScenarioConfig, seed: int = 0, max_s: float = 0.0
) -> dict[str, Any]:
    """Replay ``cfg`` with ``policy_name`` in this process; wall time, counts, peak memory.

    With ``max_s`` > 0 the replay stops at the first decision after ``max_s`` wall seconds and
    the rates are those of the part replayed (``partial``: jobs = offline jobs started at least
    once or given up by then).
    """
    from gpu_sharing_env.evaluation.runner import run_episode
    from gpu_sharing_env.registry import make_policy
    from gpu_sharing_env.sim.build import make_simulator

    sim = make_simulator(cfg)
    policy = make_policy(policy_name)
    t0 = time.perf_counter()
    if max_s > 0 and hasattr(policy, "decide"):
        decide = policy.decide
        deadline = t0 + max_s

        def capped(view: Any) -> Any:
            if time.perf_counter() > deadline:
                raise _WallCap
            return decide(view)

        policy.decide = capped  # type: ignore[method-assign]
    partial = False
    try:
        m = run_episode(policy, sim, seed=seed)
    except _WallCap:
        partial = True
        m = sim.metrics()
    wall = time.perf_counter() - t0
    offline = [st for st in sim.jobs.values() if not st.spec.online]
    # a partial replay counts the jobs it got to: started at least once, or given up
    done = [
        not math.isnan(st.ledger.first_start_t) or st.status is st.status.FAILED for st in offline
    ]
    n_off = sum(done) if partial else len(offline)
    return {
        "gpus": sim.n_gpus,
        "jobs": n_off,
        "jobs_in_trace": len(offline),
        "partial": partial,
        "events": sim.n_events,
        "decisions": int(m["decisions"]),
        "jobs_completed": int(m["jobs_completed"]),
        "sim_hours": round(sim.now / 3600.0, 1),
        "wall_s": round(wall, 3),
        "jobs_per_s": round(n_off / wall, 1),
        "events_per_s": round(sim.n_events / wall, 1),
        "peak_mem_mb": round(_peak_mem_mb(), 1),
    }


def _child(args: list[str]) -> dict[str, Any]:
    """Run one replay in a fresh interpreter (peak memory is then the replay's own)."""
    cmd = [sys.executable, "-m", "gpu_sharing_gym.bench.suite", "--_child", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"bench child {args} failed:\n{p.stderr[-2000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def child_main(args: list[str]) -> int:
    kind = args[0]
    if kind == "replay":
        policy, n_gpus, n_jobs, max_s = args[1], int(args[2]), int(args[3]), float(args[4])
        out = replay_one(policy, replay_scenario(n_gpus, n_jobs), max_s=max_s)
    elif kind == "openb":
        cfg = load_scenario("openb")
        if len(args) > 1 and int(args[1]):
            off = dataclasses.replace(cfg.workload.offline, max_jobs=int(args[1]))
            cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, offline=off))
        out = replay_one("first_fit", cfg)
    else:
        raise SystemExit(f"unknown child {kind!r}")
    print(json.dumps(out))
    return 0


def bench_replay(
    policies: list[str], sizes: list[int], n_jobs: int, max_s: float, repeat: int = 1
) -> dict[str, Any]:
    """Each replay ``repeat`` times, in rounds (every policy and size once per round, so that
    the sizes a scaling ratio compares are measured at the same times); the fastest run of
    each is reported (``timeit``'s rule: slower runs measure the machine's other load), with
    every run's wall time in ``wall_s_runs``."""
    out: dict[str, Any] = {}
    for k in range(repeat):
        for n in sizes:
            for p in policies:
                r = _child(["replay", p, str(n), str(n_jobs), str(max_s)])
                key = f"{p}@{n}"
                runs = [*out[key]["wall_s_runs"], r["wall_s"]] if key in out else [r["wall_s"]]
                if key not in out or (r["jobs_per_s"] > out[key]["jobs_per_s"]):
                    out[key] = r
                out[key]["wall_s_runs"] = runs
                part = (
                    f" (partial: {r['jobs']} of {r['jobs_in_trace']} jobs)" if r["partial"] else ""
                )
                print(
                    f"replay {key} (run {k + 1}/{repeat}): {r['jobs_per_s']:.0f} jobs/s,"
                    f" {r['events_per_s']:.0f} events/s, {r['wall_s']:.1f} s,"
                    f" {r['peak_mem_mb']:.0f} MB{part}",
                    flush=True,
                )
    return out


def openb_available() -> bool:
    try:
        cfg = load_scenario("openb")
    except (OSError, ValueError):
        return False
    assert cfg.source_path is not None
    off = cfg.workload.offline
    return (Path(cfg.source_path).parent / off.trace_path).exists()


# ====================================================================== env
def _sim_counts(sim: Any) -> np.ndarray:
    """(events, load ticks, service-ticks) the simulator has run this episode."""
    return np.array([sim.n_events, len(sim.timeseries), sim.n_service_ticks], dtype=np.float64)


def env_steps_per_s(
    env: gym.Env[Any, Any], seconds: float, seed: int = 0
) -> tuple[float, int, dict[str, float]]:
    """Steps per second of ``env`` under uniformly random legal actions, episodes run, and the
    simulator's work per step (events, load ticks, service-ticks)."""
    rng = np.random.default_rng(seed)
    sim = env.unwrapped.sim  # type: ignore[attr-defined]
    _, info = env.reset(seed=seed)
    for _ in range(20):  # warm-up
        legal = np.flatnonzero(info["action_mask"].view(bool))
        _, _, term, trunc, info = env.step(legal[rng.integers(legal.size)])
        if term or trunc:
            _, info = env.reset()
    steps = episodes = 0
    work = -_sim_counts(sim)
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(50):
            # The int8 0/1 mask viewed as bool: the same indices, 4x cheaper to scan at 1,024
            # GPUs (the harness should not dominate what it measures).
            legal = np.flatnonzero(info["action_mask"].view(bool))
            _, _, term, trunc, info = env.step(legal[rng.integers(legal.size)])
            steps += 1
            if term or trunc:
                episodes += 1
                work += _sim_counts(sim)
                _, info = env.reset()
                work -= _sim_counts(sim)
        if time.perf_counter() >= deadline:
            break
    rate = steps / (time.perf_counter() - t0)
    work += _sim_counts(sim)
    per_step = dict(zip(("events", "ticks", "service_ticks"), (work / steps).round(3).tolist()))
    return rate, episodes, per_step


def tick_math_us(n: int = 200_000) -> float:
    """CPython time of one service-tick of the online model's arithmetic alone, in us.

    The load update and SLO accounting ``OnlineLoad.tick`` (``sim/ticks.py``) does for one
    running service at each load tick (AR(1) noise, diurnal rate, duty quantisation, Kingman
    latency, p99, attainment, the request-weighted sums), here on local floats: no attribute
    access, no event queue, no bookkeeping. Times the service-ticks per step, it is a floor
    under any pure-Python step of this model (one service, unvectorised: vectorising pays only
    with hundreds of services per tick).
    """
    sin, exp, log = math.sin, math.exp, math.log
    ar, scale, step = NOISE_AR, _NOISE_SCALE, DUTY_STEP  # the model's constants
    two_pi, now, phase, period = 2.0 * math.pi, 43_200.0, 3_600.0, 86_400.0
    base, span, noise_frac, noise = 40.0, 80.0, 0.1, 0.3
    solo_ms, batch, slo_ms, f, tick = 20.0, 8, 100.0, 0.8, 300.0
    z = requests = ok = lat_w = p99_w = slow_w = p99_max = 0.0
    t_prev, outage_until = now - tick, 0.0
    t0 = time.perf_counter()
    for _ in range(n):
        z = ar * z + scale * noise
        wave = (1.0 + sin(two_pi * (now - phase) / period)) / 2.0
        rps = (base + span * wave) * exp(noise_frac * z)
        duty = rps * solo_ms / 1000.0 / batch
        duty = duty if duty < 1.0 else 1.0
        q = round(duty / step) * step
        q = q if q > step else step
        req = rps * tick
        requests += req
        batch_ms = solo_ms / f
        rho = rps * batch_ms / 1000.0 / batch
        m = batch_ms / (2.0 * (1.0 - rho))
        p99_ms = batch_ms + m * log(100.0 * rho)
        att = 1.0 - rho * exp(-(slo_ms - batch_ms) / m)
        mean_ms = batch_ms + rho * m
        rho_solo = rps * solo_ms / 1000.0 / batch
        solo_mean = solo_ms + rho_solo * (solo_ms / (2.0 * (1.0 - rho_solo)))
        out = (outage_until - t_prev) / tick
        out = 1.0 if out > 1.0 else (out if out > 0.0 else 0.0)
        ok += req * (1.0 - out) * att
        lat_w += req * mean_ms
        p99_w += req * p99_ms
        slow_w += req * mean_ms / solo_mean
        ratio = p99_ms / slo_ms
        if ratio > p99_max:
            p99_max = ratio
    return (time.perf_counter() - t0) / n * 1e6


def cartpole_steps_per_s(seconds: float, seed: int = 0) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    steps = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(500):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            steps += 1
            if term or trunc:
                env.reset()
        if time.perf_counter() >= deadline:
            break
    return steps / (time.perf_counter() - t0)


def bench_env(cfgs: dict[int, ScenarioConfig], seconds: float) -> dict[str, Any]:
    cartpole = cartpole_steps_per_s(seconds)
    rates: dict[str, float] = {}
    episodes: dict[str, int] = {}
    work: dict[str, dict[str, float]] = {}
    for n, cfg in cfgs.items():
        env = gym.make("GpuSharing-v0", scenario=cfg)
        rates[str(n)], episodes[str(n)], work[str(n)] = env_steps_per_s(env, seconds)
        env.close()
    ratio = {k: v / cartpole for k, v in rates.items()}
    tick_us = tick_math_us()
    # Per size: the step the target allows, and the online model's arithmetic alone per step.
    floor: dict[str, dict[str, float]] = {}
    for k, w in work.items():
        floor[k] = {
            **w,
            "us_per_step": round(1e6 / rates[k], 2),
            "tick_math_us_per_step": round(w["service_ticks"] * tick_us, 2),
        }
        if k in TARGETS:
            floor[k]["target_us_per_step"] = round(1e6 / (TARGETS[k] * cartpole), 2)
    print(
        f"{'GPUs':>6} {'steps/s':>10} {'x CartPole':>11} {'target':>7} {'episodes':>9}"
        f" {'us/step':>8} {'events':>7} {'svc-ticks':>9} {'tick math us':>12} {'target us':>9}"
    )
    for k, v in rates.items():
        tgt = f"{TARGETS[k]:.2f}" if k in TARGETS else ""
        fl = floor[k]
        tus = f"{fl['target_us_per_step']:.1f}" if "target_us_per_step" in fl else ""
        print(
            f"{k:>6} {v:>10.0f} {ratio[k]:>11.4f} {tgt:>7} {episodes[k]:>9}"
            f" {fl['us_per_step']:>8.1f} {fl['events']:>7.2f} {fl['service_ticks']:>9.2f}"
            f" {fl['tick_math_us_per_step']:>12.1f} {tus:>9}"
        )
    print(f"{'CartPole-v1':>17} {cartpole:>10.0f} steps/s; one service-tick's arithmetic", end="")
    print(f" {tick_us:.3f} us", flush=True)
    return {
        "env_work_per_step": floor,
        "tick_math_us": round(tick_us, 4),
        "env_steps_per_s": rates,
        "cartpole_steps_per_s": cartpole,
        "ratio": ratio,
        "targets": {k: t for k, t in TARGETS.items() if k in ratio},
        "meets_target": {k: ratio[k] >= t for k, t in TARGETS.items() if k in ratio},
        "episodes": episodes,
        "seconds": seconds,
    }


# ====================================================================== ppo
class TimedEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Accumulates the wall time spent inside the wrapped env's ``step`` and ``reset``."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.env_s = 0.0
        self.steps = 0

    def step(self, action: Any) -> Any:
        t0 = time.perf_counter()
        out = self.env.step(action)
        self.env_s += time.perf_counter() - t0
        self.steps += 1
        return out

    def reset(self, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.env_s += time.perf_counter() - t0
        return out

    def action_masks(self) -> np.ndarray:
        t0 = time.perf_counter()
        m: np.ndarray = self.env.unwrapped.action_masks()  # type: ignore[attr-defined]
        self.env_s += time.perf_counter() - t0
        return m


def _make_ppo(env: gym.Env[Any, Any]) -> tuple[Any, str]:
    from gpu_sharing_gym.agents import make_model

    return make_model(env, seed=0), "gpu_sharing_gym.agents.make_model"


def bench_ppo(steps: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # as gsg train: small networks, 2 cores
    env = TimedEnv(gym.make("GpuSharing-v0", scenario="default"))
    model, what = _make_ppo(env)
    t0 = time.perf_counter()
    model.learn(steps)
    wall = time.perf_counter() - t0
    share = env.env_s / wall
    print(
        f"ppo: {steps} steps in {wall:.1f} s ({steps / wall:.0f} steps/s), env {env.env_s:.2f} s"
        f" = {100 * share:.1f}% [{what}]",
        flush=True,
    )
    return {
        "ppo_env_share": share,
        "ppo": {
            "steps": steps,
            "wall_s": round(wall, 3),
            "env_s": round(env.env_s, 3),
            "steps_per_s": round(steps / wall, 1),
            "model": what,
            "torch_threads": torch.get_num_threads(),
        },
    }


# ====================================================================== training
def _rollout_kwargs(
    algo_kwargs: dict[str, Any], steps: int, n_envs: int, defaults: Any
) -> dict[str, Any]:
    """``algo_kwargs`` with the rollout shortened to ``steps`` when a rollout (``n_steps`` x
    ``n_envs``) is longer (and the minibatch no larger than the rollout)."""
    kw = dict(algo_kwargs)
    n_steps = int(kw.get("n_steps", defaults["n_steps"].default))
    if n_steps * n_envs > steps:
        kw["n_steps"] = max(2, steps // n_envs)
        batch = int(kw.get("batch_size", defaults["batch_size"].default))
        kw["batch_size"] = min(batch, kw["n_steps"] * n_envs)
    return kw


def _timed_learn(
    model: Any, steps: int, callbacks: Sequence[Any] = (), close: bool = True
) -> dict[str, Any]:
    t0 = time.perf_counter()
    model.learn(steps, callback=list(callbacks))
    wall = time.perf_counter() - t0
    done = int(model.num_timesteps)
    if close:
        model.env.close()  # a two-process vector env's worker
    return {
        "steps": done,
        "wall_s": round(wall, 3),
        "steps_per_s": round(done / wall, 1),
        "n_steps": int(model.n_steps),
        "batch_size": int(model.batch_size),
        "n_envs": int(model.n_envs),
    }


def recipe_model(recipe: str, scenario: str, steps: int, seed: int = 0) -> tuple[Any, list[Any]]:
    """A MaskablePPO recipe's model before learning, as ``gsg train`` builds it (its vector
    env and wrappers, policy, hyperparameters), without pretraining; the rollout shortened to
    ``steps`` if longer. With the callbacks ``gsg train`` adds for the recipe's speed (torch
    threads for the update)."""
    import inspect

    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecNormalize

    from gpu_sharing_gym.agents.callbacks import TorchThreads
    from gpu_sharing_gym.agents.config import load_hyperparams, resolve_config
    from gpu_sharing_gym.agents.envs import make_vec_env
    from gpu_sharing_gym.agents.option_policy import OptionActorCriticPolicy
    from gpu_sharing_gym.agents.policy import SetActorCriticPolicy

    settings, algo_kwargs, _ = load_hyperparams(resolve_config(recipe), scenario, "maskable_ppo")
    venv: Any = make_vec_env(
        scenario, settings.n_envs, settings.seed, settings.env_kwargs, settings.work_conserving,
        settings.expert_hint, settings.env_id, settings.paired_reference,
        settings.train_seed_pool, settings.paired_cache_dir, settings.vec_env,
        settings.seed_replay,
    )  # fmt: skip
    if settings.normalize_reward:
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True,
                            gamma=float(algo_kwargs.get("gamma", 0.99)))  # fmt: skip
    v1 = settings.env_id == "GpuSharing-v1"
    defaults = inspect.signature(MaskablePPO.__init__).parameters
    kw = _rollout_kwargs(algo_kwargs, steps, settings.n_envs, defaults)
    model = MaskablePPO(
        OptionActorCriticPolicy if v1 else SetActorCriticPolicy, venv,
        policy_kwargs=dict(settings.policy_kwargs), seed=seed, device="cpu", verbose=0, **kw,
    )  # fmt: skip
    threads = settings.update_threads
    return model, [TorchThreads(threads)] if threads != 1 else []


def _recipe(recipe: str, steps: int) -> tuple[Any, int, list[Any]]:
    """``_timed_learn``'s arguments for ``recipe`` on the training scenario."""
    model, callbacks = recipe_model(recipe, TRAINING_SCENARIO, steps)
    return model, steps, callbacks


def _load_avg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not on every platform
        return None


def bench_training(steps: int, seconds: float) -> dict[str, Any]:
    """Issue 22's figures, measured in this process: the default recipe's training steps/s
    beside SB3 PPO on CartPole-v1, and raw env steps/s beside CartPole's."""
    import inspect

    import stable_baselines3
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)  # as gsg train: small networks, 2 cores
    load_before = _load_avg()
    cartpole = cartpole_steps_per_s(seconds)
    raw: dict[str, float] = {}
    for env_id in ("GpuSharing-v1", "GpuSharing-v0"):
        env = gym.make(env_id, scenario=TRAINING_SCENARIO)
        raw[env_id] = env_steps_per_s(env, seconds)[0]
        env.close()
    env = gym.make("GpuSharing-v1", scenario=LARGE_FLEET_SCENARIO)
    large = env_steps_per_s(env, seconds)[0]
    env.close()

    from gpu_sharing_gym.agents.envs import CURVES, reference_curve_counts

    CURVES.clear()
    model, _, callbacks = _recipe(TRAINING_RECIPE, steps)
    ours = _timed_learn(model, steps, callbacks, close=False)
    # the paired reward's reference curves: computed here, or read from the user's cache
    # (a later run, or any run after the first, reads them)
    ours["reference_curves"] = reference_curve_counts(model.env)
    model.env.close()
    before = _timed_learn(*_recipe(TRAINING_BEFORE, steps))
    learners = {r: _timed_learn(*_recipe(r, steps)) for r in TRAINING_LEARNERS}
    defaults = inspect.signature(PPO.__init__).parameters
    cp_model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=0, device="cpu", verbose=0,
                   **_rollout_kwargs({}, steps, 1, defaults))  # fmt: skip
    theirs = _timed_learn(cp_model, steps)

    x_ppo = ours["steps_per_s"] / theirs["steps_per_s"]
    env_ratio = {k: v / cartpole for k, v in raw.items()}
    w = 56
    print(
        f"training, one process, torch threads {torch.get_num_threads()}, "
        f"SB3 {stable_baselines3.__version__}:"
    )
    print(f"  {'':<{w}} {'steps':>7} {'wall s':>8} {'steps/s':>9} {'x CartPole':>11}")
    rows = (
        (f"MaskablePPO, recipe {TRAINING_RECIPE} on {TRAINING_SCENARIO} (PPO phase)", ours, x_ppo),
        (f"  before: recipe {TRAINING_BEFORE}", before,
         before["steps_per_s"] / theirs["steps_per_s"]),
        *((f"  learning recipe {r}", v, v["steps_per_s"] / theirs["steps_per_s"])
          for r, v in learners.items()),
        ("SB3 PPO (MlpPolicy) on CartPole-v1", theirs, 1.0),
    )  # fmt: skip
    for name, r, x in rows:
        print(
            f"  {name:<{w}} {r['steps']:>7} {r['wall_s']:>8.1f} {r['steps_per_s']:>9.0f} {x:>11.3f}"
        )
    rc = ours["reference_curves"]
    print(f"  ({TRAINING_RECIPE}'s reference curves: {rc['computed']} computed, "
          f"{rc['from_disk']} read from the cache)")  # fmt: skip
    print(f"raw env, random legal actions ({seconds:g} s each):")
    for k, v in [*raw.items(), ("CartPole-v1", cartpole)]:
        name = k if k == "CartPole-v1" else f"{k} on {TRAINING_SCENARIO}"
        x = v / cartpole
        print(f"  {name:<{w}} {'':>7} {'':>8} {v:>9.0f} {x:>11.4f}")
    name = f"GpuSharing-v1 on {LARGE_FLEET_SCENARIO} (a large fleet)"
    print(f"  {name:<{w}} {'':>7} {'':>8} {large:>9.0f} {large / cartpole:>11.4f}")
    sys.stdout.flush()
    return {
        "recipe": TRAINING_RECIPE,
        "scenario": TRAINING_SCENARIO,
        "steps": steps,
        "torch_threads": torch.get_num_threads(),
        "maskable_ppo": ours,
        "before_recipe": TRAINING_BEFORE,
        "maskable_ppo_before": before,
        "x_cartpole_ppo_before": round(before["steps_per_s"] / theirs["steps_per_s"], 4),
        "learners": {
            r: {**v, "x_cartpole_ppo": round(v["steps_per_s"] / theirs["steps_per_s"], 4)}
            for r, v in learners.items()
        },
        "cartpole_ppo": theirs,
        "x_cartpole_ppo": round(x_ppo, 4),
        "env_steps_per_s": {k: round(v, 1) for k, v in raw.items()},
        "cartpole_steps_per_s": round(cartpole, 1),
        "env_x_cartpole": {k: round(v, 5) for k, v in env_ratio.items()},
        # raw GpuSharing-v1 on a large fleet (not a target: for the record)
        "large_fleet": {
            "scenario": LARGE_FLEET_SCENARIO,
            "env_steps_per_s": round(large, 1),
            "env_x_cartpole": round(large / cartpole, 5),
        },
        "seconds": seconds,
        "targets": dict(TRAINING_TARGETS),
        "machine_info": machine_info(),
        # other jobs on the machine: 1-minute load average before and after the section
        "load_avg_1m": [load_before, _load_avg()],
    }


# ====================================================================== machine
def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for mod in ("numpy", "gymnasium", "torch", "stable_baselines3", "sb3_contrib"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        # compiled core or pure Python (GSG_PURE_PYTHON=1, or no extensions built)
        "core": _modes.describe(gpu_sharing_env.COMPILED),
        **versions,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def checks(out: dict[str, Any]) -> dict[str, Any]:
    """Issue 9's targets against the measured figures (those measured in this run)."""
    res: dict[str, Any] = {}
    rep = out.get("replay", {})
    for key, target in REPLAY_TARGETS.items():
        if key in rep:
            v = rep[key]["jobs_per_s"]
            res[f"replay {key} jobs/s >= {target:g}"] = {"value": v, "target": target}
    for p in REPLAY_POLICIES:
        sizes = sorted(int(k.split("@")[1]) for k in rep if k.startswith(f"{p}@"))
        if len(sizes) >= 2:
            lo, hi = rep[f"{p}@{sizes[0]}"], rep[f"{p}@{sizes[-1]}"]
            ratio = hi["jobs_per_s"] / lo["jobs_per_s"]
            res[f"scaling {p} jobs/s {sizes[-1]} / {sizes[0]} GPUs >= 1/3"] = {
                "value": round(ratio, 3),
                "target": round(SCALING_TARGET, 3),
            }
    if rep:
        big = max(int(k.split("@")[1]) for k in rep)
        mem = max(r["peak_mem_mb"] for k, r in rep.items() if k.endswith(f"@{big}"))
        res[f"peak memory of the {big}-GPU replays (MB) <= {REPLAY_MEM_TARGET_MB:g}"] = {
            "value": mem,
            "target": REPLAY_MEM_TARGET_MB,
            "lower_is_better": True,
        }
    for k, t in TARGETS.items():
        if k in out.get("ratio", {}):
            res[f"env steps/s at {k} GPUs / CartPole >= {t:g}"] = {
                "value": round(out["ratio"][k], 4),
                "target": t,
            }
    if "ppo_env_share" in out:
        res[f"env share of MaskablePPO wall time <= {PPO_ENV_SHARE_TARGET:g}"] = {
            "value": round(out["ppo_env_share"], 4),
            "target": PPO_ENV_SHARE_TARGET,
            "lower_is_better": True,
        }
    if "side_by_side" in out:
        from gpu_sharing_gym.bench import side_by_side

        res.update(side_by_side.checks(out["side_by_side"]))
    if "training" in out:
        t, tt = out["training"], TRAINING_TARGETS
        res[f"training steps/s of the default recipe >= {tt['steps_per_s']:g} (issue 22)"] = {
            "value": t["maskable_ppo"]["steps_per_s"],
            "target": tt["steps_per_s"],
        }
        res[f"training steps/s / SB3 PPO on CartPole >= {tt['x_cartpole_ppo']:g} (issue 22)"] = {
            "value": t["x_cartpole_ppo"],
            "target": tt["x_cartpole_ppo"],
        }
        res[f"GpuSharing-v1 steps/s / CartPole >= {tt['env_x_cartpole']:g} (issue 22)"] = {
            "value": t["env_x_cartpole"]["GpuSharing-v1"],
            "target": tt["env_x_cartpole"],
        }
    for v in res.values():
        low = v.get("lower_is_better", False)
        v["met"] = bool(v["value"] <= v["target"] if low else v["value"] >= v["target"])
    return res


# ====================================================================== main
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--_child"]:
        return child_main(argv[1:])
    ap = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", type=output_file, default=None, help="write the results here")
    ap.add_argument("--only", default=None, help=f"sections, comma-separated: {','.join(SECTIONS)}")
    ap.add_argument("--quick", action="store_true", help="CI-sized: small sizes, seconds in all")
    ap.add_argument("--sizes", default=None, help="env: GPU counts (x16)")
    ap.add_argument(
        "--seconds", type=positive_float, default=None, help="env: seconds per measurement"
    )
    ap.add_argument("--scenario", default="default", help="env: base scenario to scale")
    ap.add_argument("--replay-sizes", default=None, help="replay: GPU counts")
    ap.add_argument("--replay-jobs", type=positive_int, default=None, help="replay: offline jobs")
    ap.add_argument("--policies", default=",".join(REPLAY_POLICIES), help="replay: policies")
    ap.add_argument(
        "--replay-max-s",
        type=non_negative_float,
        default=REPLAY_MAX_S,
        help="replay: wall-clock cap per replay; past it the rate is the part's (0: none)",
    )
    ap.add_argument(
        "--replay-repeat",
        type=positive_int,
        default=None,
        help=f"replay: runs of each, fastest reported (default {REPLAY_REPEAT}; --quick 1)",
    )
    ap.add_argument("--ppo-steps", type=positive_int, default=None, help="ppo: training steps")
    ap.add_argument(
        "--training",
        action="store_true",
        help="the training section only (issue 22): the default recipe's steps/s beside SB3 "
        "PPO on CartPole, raw env steps/s beside CartPole's",
    )
    ap.add_argument(
        "--training-steps",
        type=int_range(2),
        default=None,
        help=f"training: steps of each learner (default {TRAINING_STEPS:,}; --quick "
        f"{QUICK_TRAINING_STEPS:,})",
    )
    ap.add_argument(
        "--openb-jobs", type=non_negative_int, default=0, help="openb: first N pods (0: all)"
    )
    ap.add_argument("--quiet", action="store_true", help="no periodic progress lines (off a TTY)")
    args = ap.parse_args(argv)
    from gpu_sharing_env.registry import make_policy

    if args.only is not None:
        sections = [s.strip() for s in args.only.split(",") if s.strip()]
        if args.training and "training" not in sections:
            sections.append("training")
    elif args.training:
        sections = ["training"]
    elif args.sizes is not None or args.seconds is not None:
        sections = ["env"]  # issue 4's command line
    else:
        sections = list(DEFAULT_SECTIONS)
    bad = [s for s in sections if s not in SECTIONS]
    try:
        if bad:
            raise ValueError(f"--only: unknown section(s) {bad} (known: {', '.join(SECTIONS)})")
        q = args.quick
        env_sizes = (
            [int(s) for s in args.sizes.split(",") if s.strip()]
            if args.sizes
            else list(QUICK["env_sizes"] if q else SIZES)  # type: ignore[call-overload]
        )
        seconds = args.seconds if args.seconds is not None else (QUICK["seconds"] if q else 3.0)
        replay_sizes = (
            [int(s) for s in args.replay_sizes.split(",") if s.strip()]
            if args.replay_sizes
            else list(QUICK["replay_sizes"] if q else REPLAY_SIZES)  # type: ignore[call-overload]
        )
        for n in replay_sizes:
            pai_fleet(n)
        replay_jobs = args.replay_jobs or (QUICK["replay_jobs"] if q else REPLAY_JOBS)
        repeat = (
            args.replay_repeat if args.replay_repeat is not None else (1 if q else REPLAY_REPEAT)
        )
        if repeat < 1:
            raise ValueError(f"--replay-repeat: must be >= 1 (got {repeat})")
        ppo_steps = args.ppo_steps or (QUICK_PPO_STEPS if q else PPO_STEPS)
        training_steps = args.training_steps or (QUICK_TRAINING_STEPS if q else TRAINING_STEPS)
        if training_steps < 2:
            raise ValueError(f"--training-steps: must be >= 2 (got {training_steps})")
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        for p in policies:
            make_policy(p)  # UnknownPolicyError (a ValueError) lists the known names
        base = load_scenario(args.scenario)
        cfgs = {n: scaled_scenario(base, n) for n in env_sizes}
    except ValueError as e:
        return fail(PROG, str(e))
    print(f"core: {_modes.describe(gpu_sharing_env.COMPILED)}", flush=True)
    # The measurements print a line each; off a terminal (CI, nohup) a plain progress line
    # every 30 s also says how far the suite is. JSON is written only when all is done.
    try:
        with progress(
            len(sections), "bench", "section", disable=args.quiet or is_tty(sys.stderr)
        ) as bar:
            out = _run_sections(args, sections, bar, q, policies, replay_sizes, replay_jobs,
                                repeat, cfgs, seconds, ppo_steps, training_steps)  # fmt: skip
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM; the replay subprocess is killed
        print(f"\n{PROG}: {stopped_by(e)}; nothing written", file=sys.stderr)
        return exit_code(e)
    for name, c in out["checks"].items():
        print(f"[{'met' if c['met'] else 'NOT met'}] {name}: {c['value']}")
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(out, indent=1))
        print(f"wrote {args.json}")
    return 0


def _run_sections(
    args: argparse.Namespace,
    sections: list[str],
    bar: Any,
    q: bool,
    policies: list[str],
    replay_sizes: list[int],
    replay_jobs: Any,
    repeat: int,
    cfgs: dict[int, ScenarioConfig],
    seconds: Any,
    ppo_steps: Any,
    training_steps: int = TRAINING_STEPS,
) -> dict[str, Any]:
    out: dict[str, Any] = {"machine_info": machine_info(), "quick": bool(q)}
    if "replay" in sections:
        bar.set_postfix_str("replay")
        out["replay"] = bench_replay(
            policies,
            replay_sizes,
            int(replay_jobs),
            args.replay_max_s,
            repeat,
        )
        out["replay_setup"] = {
            "jobs": replay_jobs,
            "jobs_per_gpu_h": JOBS_PER_GPU_H,
            "services_per_gpu": round(SERVICES_PER_GPU, 4),
            "fleet": "PAI machine mix (P100x2, T4x2, V100-32GBx8, V100-16GBx8)",
            "seed": 0,
            "max_wall_s": args.replay_max_s,
            "repeat": repeat,
            "peak_mem": "ru_maxrss of a fresh subprocess per replay (interpreter included)",
            "pai_simulator_jobs_per_s": list(PAI_SIM_JOBS_PER_S),
        }
        bar.update(1)
    if "openb" in sections:
        bar.set_postfix_str("openb")
        if openb_available():
            r = _child(["openb", str(args.openb_jobs or (300 if q else 0))])
            out["openb_replay_s"] = r["wall_s"]
            out["openb"] = r
            print(f"openb first_fit: {r['wall_s']:.1f} s, {r['jobs']} pods, {r['events']} events")
        else:
            out["openb_replay_s"] = None
            out["openb"] = {"skipped": "openb data not found (configs/scenarios/openb.yaml)"}
        bar.update(1)
    if "env" in sections:
        bar.set_postfix_str("env")
        out.update(bench_env(cfgs, float(seconds)))
        bar.update(1)
    if "ppo" in sections:
        bar.set_postfix_str("ppo")
        out.update(bench_ppo(int(ppo_steps)))
        bar.update(1)
    if "training" in sections:
        bar.set_postfix_str("training")
        out["training"] = bench_training(int(training_steps), float(seconds))
        bar.update(1)
    if "sbs" in sections:
        from gpu_sharing_gym.bench import side_by_side

        if side_by_side.enabled():
            bar.set_postfix_str("side by side")
            out["side_by_side"] = side_by_side.run()
        bar.update(1)
    out["checks"] = checks(out)
    out["python"] = platform.python_version()
    out["machine"] = platform.machine()
    return out


if __name__ == "__main__":
    sys.exit(main())
