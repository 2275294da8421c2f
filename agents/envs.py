"""Training environments: ``GpuSharing-v0``/``-v1`` with a training seed range, an expert hint,
paired rewards, monitored and vectorised over one or several scenarios.

Episode seeds below :data:`TRAIN_SEED_MIN` are reserved for evaluation: the leaderboard and
``scripts/evaluate.py`` use seeds ``0..N-1``, the training script's periodic evaluation uses
``1000..``. Training episodes draw their seeds from ``[TRAIN_SEED_MIN, 2**31)``, so an agent
never trains on an episode it is later evaluated on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import gpu_sharing_env  # noqa: F401  (registers GpuSharing-v0 and -v1)
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.base import HeuristicPolicy

#: Smallest training episode seed; every seed below it is held out for evaluation.
TRAIN_SEED_MIN = 1_000_000
_SEED_BOUND = 2**31 - 1
#: Observation key added by :class:`ExpertHint`: a heuristic's proposed action, one-hot over
#: the action space (residual policy learning: the net learns when to deviate).
HINT = "hint"
#: Env ids the training tools build.
ENV_IDS = ("GpuSharing-v0", "GpuSharing-v1")


def work_conserving(mask: np.ndarray) -> np.ndarray:
    """``mask`` without *wait* when some placement is legal (a fresh array)."""
    out = np.array(mask, copy=True)
    if out[1:].any():
        out[0] = 0
    return out


def expert_hint(expert: HeuristicPolicy, env: Any, mask: np.ndarray) -> np.ndarray:
    """One-hot (float32) of the action ``expert`` would take now in ``env`` (unwrapped)."""
    hint = np.zeros(mask.shape[0], dtype=np.float32)
    hint[expert.act(ClusterView(env.sim, env.codec), None, mask)] = 1.0
    return hint


def make_expert(name: str, **kwargs: Any) -> HeuristicPolicy:
    """A heuristic (or the planner) by registry name, built with ``kwargs`` if any (e.g.
    ``make_expert("planner", base="speed_sjf", samples=8)``)."""
    policy: Any = make_policy(name)
    if kwargs:
        try:
            policy = type(policy)(**kwargs)
        except TypeError as e:
            raise ValueError(f"expert {name!r}: {e}") from None
    if not isinstance(policy, HeuristicPolicy) or policy.mechanisms:
        raise ValueError(
            f"expert {name!r}: must be a heuristic without cluster mechanisms (its decisions "
            f"must be expressible as env actions)"
        )
    return policy


class ExpertHint(gym.ObservationWrapper[Any, Any, Any]):
    """Adds ``obs["hint"]``: a heuristic's proposed action, one-hot over the action space.

    The agent's logits add ``hint_gain x hint`` (residual policy learning: Silver et al.,
    "Residual Policy Learning", 2018), so the agent starts from the heuristic and learns when
    to deviate from it. The heuristic sees only what any policy sees (``ClusterView``).
    """

    def __init__(self, env: gym.Env[Any, Any], expert: str) -> None:
        super().__init__(env)
        self.expert = make_expert(expert)
        base = env.observation_space
        n = int(env.action_space.n)  # type: ignore[attr-defined]
        self.observation_space = spaces.Dict(
            {**base.spaces, HINT: spaces.Box(0.0, 1.0, (n,), np.float32)}  # type: ignore[attr-defined]
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.expert.reset(int(self.env.unwrapped.episode_seed))  # type: ignore[attr-defined]
        return self.observation(obs), info

    def observation(self, observation: Any) -> Any:
        env = self.env.unwrapped
        mask = env.action_masks()  # type: ignore[attr-defined]
        return {**observation, HINT: expert_hint(self.expert, env, mask)}


def reference_curve(
    policy: HeuristicPolicy, sim: Simulator, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``policy`` on ``sim``'s episode ``seed`` (the runner's loop) and return the times of
    its decision points and the offline job-seconds in the system by then (``sim.acc
    .in_system_s``), both non-decreasing, the last at the episode's end."""
    sim.mechanisms = sim.cfg.mechanisms
    sim.reset(seed)
    policy.reset(seed)
    codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
    times, integral = [sim.now], [sim.acc.in_system_s]
    while not sim.done:
        d = policy.decide(ClusterView(sim, codec)) if sim.needs_decision() else None
        if d is None:
            sim.advance()
        else:
            sim.apply(d)
        if sim.now > times[-1]:
            times.append(sim.now)
            integral.append(sim.acc.in_system_s)
        else:
            integral[-1] = sim.acc.in_system_s
    return np.asarray(times), np.asarray(integral)


class PairedReward(gym.Wrapper[Any, Any, Any, Any]):
    """Rewards relative to a reference heuristic on the same episode: an input-dependent
    baseline (Mao et al., "Variance Reduction for Reinforcement Learning in Input-Driven
    Environments", ICLR'19).

    With the ``jct`` reward, ``r_t = -ΔI / S`` (``I``: offline job-seconds in the system,
    ``S = 3600 N``). On reset the reference heuristic runs the same episode (same seed: the same
    arrivals, estimates and faults) on a simulator of its own, giving ``I_ref(τ)``. Each step
    adds the reference's cost over the same stretch of simulated time, and the last step the
    reference's remaining cost::

        r'_t = r_t + (I_ref(τ_{t+1}) - I_ref(τ_t)) / S        (+ (I_ref(T_ref) - I_ref(τ_T)) / S at the end)

    so the return from any step is the agent's return minus the reference's return-to-go from
    the same simulated time, ``b(τ_t, z) = -(I_ref(T_ref) - I_ref(τ_t)) / S``. ``b`` depends on
    the time and the episode's input (``z``: the workload, which no action changes), not on the
    action, so the policy gradient stays unbiased while the workload's share of the return's
    variance (most of it: `default`'s JCT varies 3x across seeds) cancels. An agent that acts
    like the reference earns 0. The SLO term is left as it is. ``info["reference_jct_return"]``
    holds the reference's own return at the end of an episode.
    """

    def __init__(self, env: gym.Env[Any, Any], reference: str) -> None:
        super().__init__(env)
        base: Any = env.unwrapped
        if base.reward_name != "jct":
            raise ValueError(f"paired reward: needs the 'jct' reward (got {base.reward_name!r})")
        self.reference_name = reference
        self.reference = make_expert(reference)
        self._sim = make_simulator(base.cfg)
        self._times = np.zeros(1)
        self._integral = np.zeros(1)
        self._scale = 1.0
        self._prev = 0.0

    def _i_ref(self, t: float) -> float:
        return float(np.interp(t, self._times, self._integral))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        base: Any = self.env.unwrapped
        self._times, self._integral = reference_curve(
            self.reference, self._sim, int(base.episode_seed)
        )
        n = sum(not st.spec.online for st in base.sim.jobs.values())
        self._scale = 3600.0 * max(1, n)
        self._prev = self._i_ref(base.sim.now)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, r, terminated, truncated, info = self.env.step(action)
        now = float(self.env.unwrapped.sim.now)  # type: ignore[attr-defined]
        cur = self._i_ref(now)
        shaped = float(r) + (cur - self._prev) / self._scale
        self._prev = cur
        if terminated:
            shaped += (float(self._integral[-1]) - cur) / self._scale
            info["reference_jct_return"] = -float(self._integral[-1]) / self._scale
        return obs, shaped, terminated, truncated, info


class TrainSeeds(gym.Wrapper[Any, Any, Any, Any]):
    """``reset()`` without a seed draws the episode seed from the training range.

    With ``conserving``, the action mask also hides *wait* whenever a job can be placed (a
    work-conserving scheduler; see :func:`work_conserving`).
    """

    def __init__(self, env: gym.Env[Any, Any], conserving: bool = False) -> None:
        super().__init__(env)
        self._rng = np.random.default_rng(0)
        self.conserving = conserving

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            # A seed here seeds the stream of training seeds (SB3 seeds each env once).
            self._rng = np.random.default_rng(seed)
        episode_seed = int(self._rng.integers(TRAIN_SEED_MIN, _SEED_BOUND))
        return self.env.reset(seed=episode_seed, options=options)

    def action_masks(self) -> np.ndarray:
        mask: np.ndarray = self.env.unwrapped.action_masks()  # type: ignore[attr-defined]
        return work_conserving(mask) if self.conserving else mask


def split_scenarios(scenario: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (ValueError if empty)."""
    names = scenario.split(",") if isinstance(scenario, str) else list(scenario)
    names = [s.strip() for s in names if s.strip()]
    if not names:
        raise ValueError("--scenario: give at least one scenario")
    return names


def common_layout(
    scenarios: Sequence[str], env_kwargs: Mapping[str, Any] | None = None
) -> dict[str, int]:
    """``GpuSharing-v1`` padding (``max_gpus``, ``max_window``, ``max_options``) that every
    scenario fits, so that their envs share one observation and action space."""
    from gpu_sharing_env.envs.gpu_sharing_v1 import GpuSharingEnvV1

    kw = dict(env_kwargs or {})
    out = {"max_gpus": 0, "max_window": 0, "max_options": 0}
    for s in scenarios:
        env = GpuSharingEnvV1(s, **{k: v for k, v in kw.items() if k not in out})
        out["max_gpus"] = max(out["max_gpus"], env.max_gpus, int(kw.get("max_gpus") or 0))
        out["max_window"] = max(out["max_window"], env.max_window)
        out["max_options"] = max(out["max_options"], env.max_options)
    return out


def make_env(
    scenario: str,
    env_kwargs: Mapping[str, Any] | None = None,
    conserving: bool = False,
    hint: str | None = None,
    env_id: str = "GpuSharing-v0",
    paired: str | None = None,
    train_seeds: bool = True,
) -> gym.Env[Any, Any]:
    """One monitored training env (episode seeds from the training range unless
    ``train_seeds`` is False); ``paired`` names the reference of :class:`PairedReward`."""
    if env_id not in ENV_IDS:
        raise ValueError(f"env_id: must be one of {', '.join(ENV_IDS)} (got {env_id!r})")
    env: gym.Env[Any, Any] = gym.make(env_id, scenario=scenario, **dict(env_kwargs or {}))
    if paired:
        env = PairedReward(env, paired)
    if hint:
        env = ExpertHint(env, hint)
    if not train_seeds:
        return env
    return Monitor(TrainSeeds(env, conserving))


def make_vec_env(
    scenario: str | Sequence[str],
    n_envs: int,
    seed: int,
    env_kwargs: Mapping[str, Any] | None = None,
    conserving: bool = False,
    hint: str | None = None,
    env_id: str = "GpuSharing-v0",
    paired: str | None = None,
) -> VecEnv:
    """``n_envs`` training envs (env ``i`` on the ``i % k``-th of ``k`` scenarios): in this
    process for 1, in subprocesses for more."""
    names = split_scenarios(scenario)
    kwargs = dict(env_kwargs or {})
    if len(names) > 1:
        if env_id != "GpuSharing-v1":
            raise ValueError("several scenarios need env_id GpuSharing-v1 (padded layouts)")
        kwargs.update(common_layout(names, kwargs))

    def factory(name: str) -> Callable[[], gym.Env[Any, Any]]:
        return lambda: make_env(name, kwargs, conserving, hint, env_id, paired)

    fns = [factory(names[i % len(names)]) for i in range(n_envs)]
    venv: VecEnv = DummyVecEnv(fns) if n_envs == 1 else SubprocVecEnv(fns, start_method="spawn")
    venv.seed(seed)
    return venv
