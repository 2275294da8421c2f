"""Training environments: ``GpuSharing-v0``/``-v1`` with a training seed range, an expert hint,
paired rewards, monitored and vectorised over one or several scenarios.

Episode seeds below :data:`TRAIN_SEED_MIN` are reserved for evaluation: the leaderboard and
``gsg evaluate`` use seeds ``0..N-1``, the training script's periodic evaluation uses
``1000..``. Training episodes draw their seeds from ``[TRAIN_SEED_MIN, 2**31)``, so an agent
never trains on an episode it is later evaluated on; or, with a seed pool
(:func:`train_seed_pool`), from a fixed set of ``N`` seeds in that range, so that per-episode
work keyed by the seed (the paired reward's reference curve, :class:`ReferenceCurveCache`) is
done once per seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import gpu_sharing_env  # registers GpuSharing-v0 and -v1
from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.evaluation.runner import start_episode
from gpu_sharing_env.physics.interference import MODEL_VERSION
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_env.workload import WORKLOAD_VERSION
from gpu_sharing_gym.baselines.base import HeuristicPolicy

#: Smallest training episode seed; every seed below it is held out for evaluation.
TRAIN_SEED_MIN = 1_000_000
_SEED_BOUND = 2**31 - 1
#: Observation key added by :class:`ExpertHint`: a heuristic's proposed action, one-hot over
#: the action space (residual policy learning: the net learns when to deviate).
HINT = "hint"
#: How several training envs are stepped (:func:`make_vec_env`).
VEC_ENVS = ("in_process", "two_process", "subprocess")
#: Env ids the training tools build.
ENV_IDS = ("GpuSharing-v0", "GpuSharing-v1")
#: Reference curves kept in memory per process (each a few hundred floats on `default`).
CURVE_CACHE_SIZE = 256
#: Bump when what a reference curve file holds, or how a curve is computed, changes.
CURVE_CACHE_VERSION = 2  # (2: a reference's decision scope and mechanisms, as the runner's)
#: Seeds the fixed stream of pooled training seeds (:func:`train_seed_pool`).
_POOL_STREAM = 20_240_601


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
    .in_system_s``), both non-decreasing, the last at the episode's end: the sum of the JCTs
    the runner's ``jct_mean_s`` averages."""
    # (the episode as the runner starts it: without the policy's decision scope,
    # sjf_predicted's curve was another episode's)
    start_episode(policy, sim, seed)
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


def _file_stamp(cfg: ScenarioConfig, path: str) -> list[Any]:
    """(resolved path, size, mtime) of a file a scenario reads, or the bare path if absent."""
    p = Path(path).expanduser()
    if not p.is_absolute() and cfg.source_path:
        cand = Path(cfg.source_path).parent / p
        if cand.exists() or not p.exists():
            p = cand
    try:
        st = p.stat()
    except OSError:
        return [str(p)]
    return [str(p.resolve()), st.st_size, st.st_mtime_ns]


def scenario_digest(cfg: ScenarioConfig) -> str:
    """A hash of a scenario's resolved content: every field of ``cfg``, and the size and time
    of the trace or fleet file it reads."""
    files = []
    if cfg.workload.offline.trace_path:
        files.append(_file_stamp(cfg, cfg.workload.offline.trace_path))
    if cfg.cluster.fleet is not None:
        files.append(_file_stamp(cfg, cfg.cluster.fleet.path))
    text = json.dumps([dataclasses.asdict(cfg), files], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def curve_key(cfg: ScenarioConfig | str, reference: str, seed: int) -> str:
    """What a reference curve depends on, hashed: the scenario's content (``cfg``, or its
    :func:`scenario_digest`), the reference's name, the episode seed, the sharing physics
    (``MODEL_VERSION``), the workload model (``WORKLOAD_VERSION``) and the package version
    (the heuristics' code)."""
    digest = cfg if isinstance(cfg, str) else scenario_digest(cfg)
    spec = [CURVE_CACHE_VERSION, MODEL_VERSION, WORKLOAD_VERSION, gpu_sharing_env.__version__]
    spec += [digest, reference]
    return hashlib.sha256(json.dumps([*spec, int(seed)]).encode()).hexdigest()[:32]


class ReferenceCurveCache:
    """Reference curves (:func:`reference_curve`) by :func:`curve_key`: a bounded in-process LRU
    and, with ``directory``, ``<key>.npz`` files there (two float64 arrays, loaded without
    pickle; written to a temporary name and renamed, so readers never see half a file, and
    several processes may share the directory). A curve is a pure function of its key, so a
    hit returns the same floats as computing it again."""

    def __init__(self, maxsize: int = CURVE_CACHE_SIZE) -> None:
        self.maxsize = maxsize
        self._mem: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.hits = self.disk_hits = self.misses = 0

    def clear(self) -> None:
        self._mem.clear()
        self.hits = self.disk_hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._mem)

    def get(
        self,
        key: str,
        compute: Callable[[], tuple[np.ndarray, np.ndarray]],
        directory: str | Path | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The curve for ``key``: from memory, else from ``directory``, else ``compute()``."""
        if key in self._mem:
            self._mem.move_to_end(key)
            self.hits += 1
            return self._mem[key]
        curve = self._load(Path(directory) / f"{key}.npz") if directory else None
        if curve is not None:
            self.disk_hits += 1
        else:
            self.misses += 1
            times, integral = compute()
            curve = (np.asarray(times, dtype=np.float64), np.asarray(integral, dtype=np.float64))
            if directory:
                self._save(Path(directory) / f"{key}.npz", curve)
        for a in curve:
            a.flags.writeable = False  # shared between episodes and envs
        self._mem[key] = curve
        while len(self._mem) > self.maxsize:
            self._mem.popitem(last=False)
        return curve

    @staticmethod
    def _load(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            with np.load(path, allow_pickle=False) as f:
                times, integral = f["times"], f["integral"]
        except (OSError, KeyError, ValueError):  # absent, or not a curve file: recompute
            return None
        if times.dtype != np.float64 or times.shape != integral.shape or times.ndim != 1:
            return None
        return times, integral

    @staticmethod
    def _save(path: Path, curve: tuple[np.ndarray, np.ndarray]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npz")
        np.savez(tmp, times=curve[0], integral=curve[1])
        os.replace(tmp, path)


#: ``paired_cache_dir`` value naming the user's cache (:func:`user_cache_dir`).
USER_CACHE = "user"


def user_cache_dir() -> Path:
    """Where this project keeps what it can recompute: ``$GSG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/gpu-sharing-gym``, else ``~/.cache/gpu-sharing-gym``."""
    if os.environ.get("GSG_CACHE_DIR"):
        return Path(os.environ["GSG_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "gpu-sharing-gym"


def resolve_cache_dir(cache_dir: str | Path | None) -> Path | None:
    """A reference-curve directory as a recipe names it: None (memory only), ``"user"``
    (``user_cache_dir()/reference-curves``) or a path (``~`` expanded)."""
    if cache_dir is None:
        return None
    if str(cache_dir) == USER_CACHE:
        return user_cache_dir() / "reference-curves"
    return Path(cache_dir).expanduser()


#: The process's reference curves (shared by every :class:`PairedReward` in it).
CURVES = ReferenceCurveCache()


def _curve_counts() -> tuple[int, int]:
    return CURVES.misses, CURVES.disk_hits


def reference_curve_counts(venv: VecEnv) -> dict[str, int]:
    """Reference curves ``computed`` and read ``from_disk`` by ``venv``'s envs since
    ``CURVES.clear()`` (in this process, and in a ``two_process`` worker, whose cache is its
    own)."""
    from gpu_sharing_gym.agents.vec import TwoProcessVecEnv

    inner = venv.unwrapped  # below VecNormalize and other wrappers
    computed, from_disk = _curve_counts()
    if isinstance(inner, TwoProcessVecEnv):
        c, d = inner.call_in_worker(_curve_counts)
        computed, from_disk = computed + c, from_disk + d
    return {"computed": computed, "from_disk": from_disk}


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

    The curve ``I_ref`` is computed once per (scenario content, seed, reference, physics
    version) and kept in :data:`CURVES` (bounded, in memory) and, with ``cache_dir``, on disk;
    ``cache=False`` recomputes it on every reset (the rewards are the same either way).
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        reference: str,
        cache: bool = True,
        cache_dir: str | Path | None = None,
    ) -> None:
        super().__init__(env)
        base: Any = env.unwrapped
        if base.reward_name != "jct":
            raise ValueError(f"paired reward: needs the 'jct' reward (got {base.reward_name!r})")
        self.reference_name = reference
        self.reference = make_expert(reference)
        self.cache = cache
        self.cache_dir = resolve_cache_dir(cache_dir)
        self._sim: Simulator | None = None  # built on the first miss
        self._digest: tuple[Any, str] | None = None  # (cfg, scenario_digest(cfg))
        self._times = np.zeros(1)
        self._integral = np.zeros(1)
        self._scale = 1.0
        self._prev = 0.0

    def _compute(self, base: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
        if self._sim is None:
            self._sim = make_simulator(base.cfg)
        return reference_curve(self.reference, self._sim, seed)

    def _i_ref(self, t: float) -> float:
        return float(np.interp(t, self._times, self._integral))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        base: Any = self.env.unwrapped
        ep_seed = int(base.episode_seed)
        if self.cache:
            if self._digest is None or self._digest[0] is not base.cfg:
                self._digest = (base.cfg, scenario_digest(base.cfg))
            key = curve_key(self._digest[1], self.reference_name, ep_seed)
            self._times, self._integral = CURVES.get(
                key, lambda: self._compute(base, ep_seed), self.cache_dir
            )
        else:
            self._times, self._integral = self._compute(base, ep_seed)
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


def train_seed_pool(n: int) -> np.ndarray:
    """``n`` distinct episode seeds in the training range, the same in every process and run
    (the first ``n`` distinct draws of a fixed stream: pool ``n`` is a prefix of pool ``n+1``)."""
    if n < 1:
        raise ValueError(f"train_seed_pool: must be >= 1 (got {n})")
    rng = np.random.default_rng(_POOL_STREAM)
    seen: dict[int, None] = {}
    while len(seen) < n:
        seen.setdefault(int(rng.integers(TRAIN_SEED_MIN, _SEED_BOUND)), None)
    return np.fromiter(seen, dtype=np.int64, count=n)


class SeedReplay:
    """Prioritised replay of the training pool's seeds by the agent's regret against the paired
    reference: Prioritized Level Replay (Jiang, Grefenstette and Rocktäschel, ICML 2021, "PLR"),
    with a seed as the level and, as its score, the agent's last regret on it,
    ``max(0, -paired return)`` (the hours of mean JCT, plus the SLO term, by which it trailed the
    reference heuristic on that seed), a true regret where PLR estimates one from value errors.

    A draw takes a seed never played with probability ``1 - seen / pool`` (uniformly among them:
    every seed gets a score), else a played seed from PLR's mixture
    ``(1 - rho) P_S + rho P_C``: ``P_S`` by rank of score, ``(1 / rank) ** (1 / beta)``, and
    ``P_C`` by staleness, the episodes since the seed was last drawn (so that seeds the agent
    wins are revisited and a regression on them is seen). PLR's defaults are ``beta = 0.1``,
    ``rho = 0.1`` on Procgen's 200 levels; here eight envs draw at once from 512 seeds and a
    seed's episode is long, so the defaults below are broader (the top-ranked seed
    gets ~15 % of the rank share instead of ~100 %). Ties in score go to the lower pool index.

    One table is shared by every env of an in-process vector env (:func:`make_vec_env`); with
    subprocess envs each process keeps its own. The table is not saved with checkpoints: a
    resumed run starts it afresh, as it does the stream of seeds.
    """

    def __init__(self, pool: np.ndarray, beta: float = 1.0, rho: float = 0.3) -> None:
        if not (beta > 0 and 0.0 <= rho <= 1.0):
            raise ValueError(f"SeedReplay: beta > 0 and 0 <= rho <= 1 (got {beta}, {rho})")
        self.pool = pool
        self.beta = float(beta)
        self.rho = float(rho)
        n = int(pool.size)
        self.score = np.zeros(n)
        self.seen = np.zeros(n, dtype=bool)
        self.last = np.zeros(n)
        self.draws = 0

    def draw(self, rng: np.random.Generator) -> int:
        """A pool index (and counts the draw for staleness)."""
        n = self.pool.size
        n_seen = int(self.seen.sum())
        self.draws += 1
        if n_seen == 0 or (n_seen < n and rng.random() >= n_seen / n):
            unseen = np.flatnonzero(~self.seen)
            i = int(unseen[rng.integers(unseen.size)])
        else:
            idx = np.flatnonzero(self.seen)
            order = np.lexsort((idx, -self.score[idx]))  # score descending, index ascending
            p_s = np.empty(idx.size)
            p_s[order] = (1.0 / np.arange(1, idx.size + 1)) ** (1.0 / self.beta)
            p_s /= p_s.sum()
            stale = self.draws - self.last[idx]
            p_c = stale / stale.sum() if stale.sum() > 0 else np.full(idx.size, 1.0 / idx.size)
            p = (1.0 - self.rho) * p_s + self.rho * p_c
            i = int(idx[rng.choice(idx.size, p=p / p.sum())])
        self.seen[i] = True
        self.last[i] = self.draws
        return i

    def update(self, i: int, paired_return: float) -> None:
        """Record an episode's paired return on pool index ``i``."""
        self.score[i] = max(0.0, -float(paired_return))


class TrainSeeds(gym.Wrapper[Any, Any, Any, Any]):
    """``reset()`` without a seed draws the episode seed from the training range, or, with
    ``seed_pool`` N > 0, uniformly from the N fixed seeds of :func:`train_seed_pool` (episodes
    then repeat, so per-seed work such as the paired reward's reference curve is cached), or,
    given a :class:`SeedReplay` table over that pool, by the agent's regret on each seed (the
    episode's summed reward is its paired return: wrap a :class:`PairedReward` env).

    With ``conserving``, the action mask also hides *wait* whenever a job can be placed (a
    work-conserving scheduler; see :func:`work_conserving`).
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        conserving: bool = False,
        seed_pool: int = 0,
        replay: SeedReplay | None = None,
    ) -> None:
        super().__init__(env)
        self._rng = np.random.default_rng(0)
        self.conserving = conserving
        self.pool = train_seed_pool(seed_pool) if seed_pool else None
        if replay is not None and (self.pool is None or replay.pool.size != self.pool.size):
            raise ValueError("seed replay needs train_seed_pool > 0 (the pool it ranks)")
        self.replay = replay
        self._index = -1
        self._return = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            # A seed here seeds the stream of training seeds (SB3 seeds each env once).
            self._rng = np.random.default_rng(seed)
        if self.pool is None:
            episode_seed = int(self._rng.integers(TRAIN_SEED_MIN, _SEED_BOUND))
        elif self.replay is None:
            episode_seed = int(self.pool[self._rng.integers(self.pool.size)])
        else:
            self._index = self.replay.draw(self._rng)
            self._return = 0.0
            episode_seed = int(self.pool[self._index])
        return self.env.reset(seed=episode_seed, options=options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        r = float(reward)
        if self.replay is not None and self._index >= 0:
            self._return += r
            if terminated or truncated:
                self.replay.update(self._index, self._return)
                self._index = -1
        return obs, r, terminated, truncated, info

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

    kw = {k: v for k, v in (env_kwargs or {}).items() if k != "rule_inputs"}
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
    seed_pool: int = 0,
    paired_cache_dir: str | Path | None = None,
    replay: SeedReplay | None = None,
) -> gym.Env[Any, Any]:
    """One monitored training env (episode seeds from the training range unless
    ``train_seeds`` is False; from ``seed_pool`` fixed seeds if > 0, drawn by ``replay`` if
    given); ``paired`` names the reference of :class:`PairedReward` (curves also kept in
    ``paired_cache_dir`` if given)."""
    if env_id not in ENV_IDS:
        raise ValueError(f"env_id: must be one of {', '.join(ENV_IDS)} (got {env_id!r})")
    kwargs, rules = split_rule_inputs(env_kwargs)  # (``rule_inputs``: RuleChoices)
    env: gym.Env[Any, Any] = gym.make(env_id, scenario=scenario, **kwargs)
    if rules:
        env = RuleChoices(env, rules)
    if paired:
        env = PairedReward(env, paired, cache_dir=paired_cache_dir)
    if hint:
        env = ExpertHint(env, hint)
    if not train_seeds:
        return env
    return Monitor(TrainSeeds(env, conserving, seed_pool, replay))


def make_vec_env(
    scenario: str | Sequence[str],
    n_envs: int,
    seed: int,
    env_kwargs: Mapping[str, Any] | None = None,
    conserving: bool = False,
    hint: str | None = None,
    env_id: str = "GpuSharing-v0",
    paired: str | None = None,
    seed_pool: int = 0,
    paired_cache_dir: str | Path | None = None,
    vec_env: str = "in_process",
    seed_replay: bool = False,
) -> VecEnv:
    """``n_envs`` training envs (env ``i`` on the ``i % k``-th of ``k`` scenarios).

    ``vec_env="in_process"`` steps them one after another in this process (SB3's
    ``DummyVecEnv``): the policy still runs one batched forward over all of them, and no
    observation is pickled between processes, which on two cores is the faster choice (issue
    22); ``"subprocess"``: one process per env (``SubprocVecEnv``). The episodes are the same
    either way. ``seed_replay`` draws pooled seeds by the agent's regret (:class:`SeedReplay`,
    one table per scenario, shared by that scenario's in-process envs; needs ``paired`` and
    ``seed_pool``)."""
    names = split_scenarios(scenario)
    if seed_replay and not (paired and seed_pool):
        raise ValueError("seed_replay needs paired_reference and train_seed_pool")
    tables = {n: SeedReplay(train_seed_pool(seed_pool)) for n in names} if seed_replay else {}
    kwargs = dict(env_kwargs or {})
    if len(names) > 1:
        if env_id != "GpuSharing-v1":
            raise ValueError("several scenarios need env_id GpuSharing-v1 (padded layouts)")
        kwargs.update(common_layout(names, kwargs))

    def factory(name: str) -> Callable[[], gym.Env[Any, Any]]:
        return lambda: make_env(
            name,
            kwargs,
            conserving,
            hint,
            env_id,
            paired,
            True,
            seed_pool,
            paired_cache_dir,
            tables.get(name),
        )

    fns = [factory(names[i % len(names)]) for i in range(n_envs)]
    if vec_env not in VEC_ENVS:
        raise ValueError(f"vec_env {vec_env!r}: one of {', '.join(VEC_ENVS)}")
    if n_envs == 1 or vec_env == "in_process":
        venv: VecEnv = DummyVecEnv(fns)
    elif vec_env == "two_process":
        from gpu_sharing_gym.agents.vec import TwoProcessVecEnv

        venv = TwoProcessVecEnv(fns)
    else:
        venv = SubprocVecEnv(fns, start_method="spawn")
    venv.seed(seed)
    return venv


#: The rules whose choices the candidate policy may read and whose agreement is logged.
RULES = ("speed_sjf_queue", "sjf_predicted", "gandiva", "antman")
#: Observation key of :class:`RuleChoices`: each rule's action index now (float32).
RULES_KEY = "rules"
#: The env keyword that names the rules (:func:`split_rule_inputs` takes it out).
RULE_INPUTS = "rule_inputs"


def split_rule_inputs(env_kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """(the env's own keywords, the rules named by ``rule_inputs``) of a recipe's env_kwargs."""
    kw = dict(env_kwargs or {})
    rules = kw.pop(RULE_INPUTS, None) or []
    if isinstance(rules, str) or not all(isinstance(r, str) for r in rules):
        raise ValueError(f"{RULE_INPUTS}: a list of heuristic names (got {rules!r})")
    return kw, list(rules)


def rule_actions(rules: Sequence[Any], view: ClusterView, mask: np.ndarray) -> np.ndarray:
    """Each rule's action (index into the env's action space) for the view now, float32."""
    return np.array([r.act(view, None, mask) for r in rules], dtype=np.float32)


class RuleChoices(gym.ObservationWrapper[Any, Any, Any]):
    """Adds ``obs["rules"]``: the action each of ``rules`` would take now (an input feature
    and what :class:`RuleAgreement` compares the agent's actions with; never a target)."""

    def __init__(self, env: gym.Env[Any, Any], rules: Sequence[str]) -> None:
        super().__init__(env)
        self.names = list(rules)
        self.rules = [make_expert(n) for n in self.names]
        n = int(env.action_space.n)  # type: ignore[attr-defined]
        base: Any = env.observation_space
        self.observation_space = spaces.Dict(
            {**base.spaces, RULES_KEY: spaces.Box(0.0, float(n), (len(self.names),), np.float32)}
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        for r in self.rules:
            r.reset(int(self.env.unwrapped.episode_seed))  # type: ignore[attr-defined]
        return self.observation(obs), info

    def observation(self, observation: Any) -> Any:
        env: Any = self.env.unwrapped
        view = ClusterView(env.sim, env.codec)
        return {**observation, RULES_KEY: rule_actions(self.rules, view, env.action_masks())}
