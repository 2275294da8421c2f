"""The ``GpuSharing`` env family: GPU-cluster scheduling with time-sharing, MPS and MIG as a
Gymnasium env. One class, :class:`GpuSharingEnv`, serves ``GpuSharing-v0`` to ``-v3``;
its ``interface`` (``gpu_sharing_env.envs.interfaces``) is what the versions differ in."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any, Literal, SupportsFloat, SupportsInt

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.envs.interfaces import INTERFACES, Interface, Obs
from gpu_sharing_env.envs.render import render_ansi, render_rgb
from gpu_sharing_env.envs.rewards import REWARDS, Reward
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import WAIT, ActionCodec
from gpu_sharing_env.sim.constants import WINDOW_ORDERS
from gpu_sharing_env.sim.engine import Simulator

INVALID_ACTION_MODES = ("noop", "raise")
#: Episode seeds drawn by ``reset()`` without a seed lie in [0, 2**31).
_SEED_BOUND = 2**31 - 1


def _interface(sim: Simulator, name: str, settings: Mapping[str, Any]) -> Interface:
    """The interface ``name`` built with ``settings`` (one-line errors for unknown ones)."""
    cls = INTERFACES.get(name)
    if cls is None:
        raise ValueError(f"interface: must be one of {', '.join(INTERFACES)} (got {name!r})")
    takes = list(inspect.signature(cls).parameters)[1:]  # (after the simulator)
    unknown = [k for k in settings if k not in takes]
    if unknown:
        raise ValueError(
            f"{unknown[0]}: GpuSharing-{name} takes no such argument (its own: "
            f"{', '.join(takes) or 'none'})"
        )
    return cls(sim, **settings)


class GpuSharingEnv(gym.Env[Obs, np.int64]):
    """Place jobs on a heterogeneous GPU cluster that shares GPUs by time-sharing, MPS and MIG.

    ## Description

    A simulated cluster of GPU nodes (T4 ... H100, per the scenario) receives offline training
    jobs (gangs of whole GPUs or fractions of one; heavy-tailed durations known only through
    noisy estimates) and online inference services (diurnal load, latency SLO). The agent is the
    scheduler: at every decision point it picks a move (which queued job goes where: first GPU,
    sharing mode, MPS SM share or MIG instance size; or a migration or, v2 with
    ``suspend=True``, a suspension), or waits. Co-located jobs
    slow each other (interference model), MPS faults can take down co-located clients, MIG
    re-partitioning takes time. The simulator is event-driven: after a decision that leaves
    nothing to decide at that instant, time advances to the next event (arrival, completion,
    fault, load tick) after which some queued job can be placed.

    One class serves every version: ``interface`` (a key of
    :data:`~gpu_sharing_env.envs.interfaces.INTERFACES`) sets how moves are laid out as actions
    and what is observed; the simulator, rewards, ``info`` and episode rules are the same.
    ``gymnasium.make("GpuSharing-v0")`` is this class with ``interface="v0"``, and so on.

    ## Action Space

    A flat ``Discrete`` in which action ``0`` waits (always legal). ``action_masks()``
    (sb3-contrib's contract) and ``info["action_mask"]`` give the legal actions as an int8
    vector, built from the simulator's own legality function.

    * v0 (:class:`~gpu_sharing_env.envs.interfaces.WindowTables`):
      ``Discrete(1 + queue_window * max_gpus * n_options)``, action
      ``1 + (slot * max_gpus + gpu) * n_options + option`` places the ``slot``-th job of the
      queue window with its first GPU at ``gpu`` using placement option ``option``.
    * v1 (:class:`~gpu_sharing_env.envs.interfaces.WindowFeatures`): v0's layout padded to
      ``max_window`` and ``max_options``, plus ``migration_slots`` job slots for running jobs.
    * v2 (:class:`~gpu_sharing_env.envs.interfaces.CandidateMoves`):
      ``Discrete(max_candidates)``, one action per move the simulator accepts now.
    * v3 (:class:`~gpu_sharing_env.envs.interfaces.KeptCandidateMoves`): v2's; the mask is one
      kept array, ``info["action_mask"]`` and ``action_masks()`` the same object.

    ## Observation Space

    A ``Dict`` of float32 ``Box`` es with finite bounds (layouts in ``docs/env.md`` and in the
    interfaces' docstrings): v0 GPU, job and global tables padded to ``max_gpus`` (rows beyond
    the cluster's size are zero, so one policy serves clusters of several sizes); v1 those
    widened plus option and job × GPU pair features; v2 one feature row per candidate move;
    v3 v2's rows in kept arrays, overwritten in place and handed out read-only (valid until
    the next ``step``: copy what you keep), its ``candidate_mask`` int8.

    ## Rewards

    Selected by ``reward`` from ``REWARDS``. The default ``"jct"``:
    ``r_t = -Δ(job-seconds of offline jobs in the system) / (3600 · N) - λ · Δ max(0,
    slo_target - SLO attainment so far)`` with ``N`` the episode's offline jobs and ``λ = 100``;
    the return is minus the mean hours per job in the system (= ``jct_mean_s / 3600`` when all
    complete) minus ``λ`` times the final SLO shortfall, so it tracks the leaderboard's primary
    objective. Also ``"throughput"`` (normalised progress per GPU-hour) and ``"slo"`` (the SLO
    term alone). See ``gpu_sharing_env.envs.rewards``.

    ## Starting State

    An empty cluster (no GPU configured) at t = 0; the simulator runs to the first arrival that
    can be placed. The workload (arrivals, durations, estimate errors, services), fault times and
    load noise derive from the episode seed (a synthetic scenario's recurring groups and its
    history before t = 0 are the cluster's own, from its ``past_seed``, the same every episode:
    workload version 3): ``reset(seed=s)`` replays exactly the episode
    ``gpu_sharing_env.evaluation.runner.run_episode`` runs with seed ``s``; ``reset()`` draws the next episode
    seed from ``self.np_random``, so successive episodes differ yet replay from the first seed.

    ## Episode End

    Terminates when the simulated horizon is reached or every offline job has finished or failed
    (``info["metrics"]`` then holds the episode metrics under the schema's names). The env
    never truncates: the simulated horizon bounds every episode, so the ids are registered
    without ``max_episode_steps``; pass ``max_episode_steps`` to ``gymnasium.make`` for a step
    limit (``TimeLimit``).

    ## Arguments

    ```python
    gymnasium.make("GpuSharing-v0", scenario="default", reward="jct", reward_kwargs=None,
                   invalid_action="noop", render_mode=None, window_order="fifo",
                   max_gpus=None)
    ```

    * ``scenario``: a name in ``configs/scenarios/``, a YAML path, or a ``ScenarioConfig``.
    * ``reward``: a key of ``REWARDS``; ``reward_kwargs`` go to its constructor
      (e.g. ``{"slo_weight": 50.0}``).
    * ``invalid_action``: ``"noop"`` (default) treats an action outside the mask as *wait* and
      sets ``info["invalid_action"]``; ``"raise"`` raises ``ValueError`` with the reason.
      (``"noop"`` is the default because Gymnasium's and SB3's checkers, and unmasked
      algorithms, sample actions without the mask.) Actions outside the action space always
      raise.
    * ``render_mode``: ``None``, ``"ansi"`` (text: nodes, GPUs, modes, residents, queue) or
      ``"rgb_array"`` (an image of the same).
    * ``window_order``: which queued jobs the window holds. ``"fifo"`` (default): the first
      ``queue_window`` in submission order. ``"predicted"``: services and prioritised jobs first
      (in submission order), then the best-effort jobs with the shortest predicted duration
      (the scenario's estimate over the fastest allowed GPU type's solo speed), so an agent
      can serve the short jobs of a long queue (``Simulator.window_order``).
    * ``interface``: ``"v0"`` (default), ``"v1"``, ``"v2"`` or ``"v3"`` (each registered id
      sets it).
    * The interface's own settings (keyword arguments): v0 ``max_gpus`` (padded GPU count;
      ``None`` takes the scenario's ``env.max_gpus``, ``0`` the cluster's own size); v1
      ``max_gpus``, ``max_window``, ``max_options``, ``migration_slots``, ``job_history``; v2
      ``max_candidates``, ``decision_scope``, ``mechanisms``, ``pruning``, ``keep_moves``,
      ``suspend`` (suspensions as candidates; default False), ``pair_features`` (co-location
      profile columns on every candidate row; default False); v3 v2's (``max_candidates=None``:
      the scenario's ``env.max_candidates``). Another version's setting raises a one-line
      ``ValueError``.

    The interface's settings and state read as the env's: ``env.codec``, ``env.max_gpus``,
    ``env.encoder`` (v0, v1), ``env.max_window`` (v1), ``env.candidates`` and
    ``env.index_of(decision)`` (v2, v3).

    ## Version History

    * v3: v2's moves under a contract built for speed: kept read-only observation arrays,
      one int8 mask (``docs/env.md``).
    * v2: candidate actions over the whole queue and migrations (suspensions with
      ``suspend=True``); candidate feature rows.
    * v1: option features, job × GPU pair features, time-until-free, queue statistics beyond
      the window; padded window and options. Dynamics and rewards as v0.
    * v0: Initial version.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(
        self,
        scenario: str | os.PathLike[str] | ScenarioConfig = "default",
        reward: str = "jct",
        reward_kwargs: Mapping[str, Any] | None = None,
        invalid_action: Literal["noop", "raise"] = "noop",
        render_mode: str | None = None,
        *,
        window_order: str = "fifo",
        interface: str = "v0",
        **settings: Any,
    ) -> None:
        if isinstance(scenario, ScenarioConfig):
            cfg = scenario
        elif isinstance(scenario, str | os.PathLike):
            cfg = load_scenario(os.fspath(scenario))
        else:
            raise ValueError(
                f"scenario: must be a scenario name, a YAML path or a ScenarioConfig "
                f"(got {type(scenario).__name__})"
            )
        if reward not in REWARDS:
            raise ValueError(f"reward: must be one of {', '.join(REWARDS)} (got {reward!r})")
        if invalid_action not in INVALID_ACTION_MODES:
            raise ValueError(
                f"invalid_action: must be one of {', '.join(INVALID_ACTION_MODES)}"
                f" (got {invalid_action!r})"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode: must be None or one of {', '.join(self.metadata['render_modes'])}"
                f" (got {render_mode!r})"
            )
        if window_order not in WINDOW_ORDERS:
            raise ValueError(
                f"window_order: must be one of {', '.join(WINDOW_ORDERS)} (got {window_order!r})"
            )
        self.cfg = cfg
        self.sim: Simulator = make_simulator(cfg)
        #: Which queued jobs the window (the action's job slots) holds: the first
        #: ``queue_window`` in submission order, or services first and then the shortest
        #: predicted jobs of the whole queue (``Simulator.window_order``).
        self.window_order = window_order
        #: The version's action layout, mask, observation and reasons.
        self.interface: Interface = _interface(self.sim, interface, settings)
        try:
            self.reward_fn: Reward = REWARDS[reward](**dict(reward_kwargs or {}))
        except TypeError as e:
            raise ValueError(f"reward_kwargs: {e}") from None
        self.reward_name = reward
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self.action_space: spaces.Space[np.int64] = self.interface.action_space
        self.observation_space: spaces.Dict = self.interface.observation_space  # type: ignore[assignment]
        self.episode_seed: int | None = None
        kept = self.interface.kept_mask()
        #: Whether the mask is the interface's kept array (v3): ``info["action_mask"]`` is
        #: then that array, not a copy.
        self._kept = kept is not None
        if kept is None:
            kept = np.zeros(self.interface.action_space.n, dtype=np.int8)
            kept[WAIT] = 1
        self._mask = kept

    def __setstate__(self, state: dict[str, Any]) -> None:
        # (a copy's mask is its interface's kept array again, not a copy of the original's)
        self.__dict__.update(state)
        kept = self.interface.kept_mask() if state.get("_kept") else None
        if kept is not None:
            self._mask = kept

    @property
    def codec(self) -> ActionCodec:
        """The queue-window codec (v2: the cluster's own layout, for ``ClusterView``)."""
        return self.interface.codec

    @property
    def max_gpus(self) -> int:
        """GPU rows of the layout, padding included (v2: the cluster's size)."""
        return self.interface.max_gpus

    def __getattr__(self, name: str) -> Any:
        # Only names the env lacks arrive here: the interface's settings and state read as the
        # env's (``env.max_window``, ``env.candidates``, ``env.index_of(d)``).
        interface = self.__dict__.get("interface")
        if interface is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        try:
            return getattr(interface, name)
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r} "
                f"(interface {interface.version})"
            ) from None

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Start an episode; ``seed`` seeds the simulator (see Starting State): the runner's
        episode for that seed (v2: with the same decision scope, window order and mechanisms)."""
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(_SEED_BOUND))
        self.episode_seed = int(seed)
        face = self.interface
        self.sim.reset(self.episode_seed, window_order=self.window_order, **face.sim_settings())
        face.reset()
        self.reward_fn.reset(self.sim)
        self._mask = face.mask()
        return face.observe(self._mask), self._info(invalid=None)

    def step(self, action: SupportsInt) -> tuple[Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one decision (or wait); advance to the next decision point if none is left."""
        sim = self.sim
        face = self.interface
        a = int(action)
        n = len(self._mask)
        if not 0 <= a < n:
            raise ValueError(f"action: must be in 0..{n - 1} (got {a})")
        invalid = False
        if not sim.done:
            if a != WAIT and not self._mask[a]:
                if self.invalid_action == "raise":
                    raise ValueError(f"illegal action {a}: {face.explain(a)}")
                invalid = True
                a = WAIT
            if a == WAIT:
                sim.advance()
            else:
                sim.apply(face.decision(a))
                if not sim.needs_decision():
                    sim.advance()
        reward = float(self.reward_fn(sim))
        self._mask = face.mask()
        terminated = sim.done
        info = self._info(invalid=invalid)
        if terminated:
            info["metrics"] = sim.metrics()
        return face.observe(self._mask), reward, terminated, False, info

    def set_slo_weight(self, weight: float) -> None:
        """Set the reward's SLO weight λ from the next step on (constrained training adapts it
        as a Lagrange multiplier: ``gpu_sharing_gym.agents.callbacks.SloMultiplier``)."""
        term = getattr(self.reward_fn, "slo", self.reward_fn)
        if not hasattr(term, "slo_weight"):
            raise ValueError(f"reward {self.reward_name!r} has no SLO weight")
        if not weight >= 0:
            raise ValueError(f"slo_weight: must be >= 0 (got {weight!r})")
        term.slo_weight = float(weight)

    def action_masks(self) -> np.ndarray:
        """Legal actions now (int8, 1 = legal; index 0, wait, is always legal)."""
        return self._mask

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn(
                "You are calling render method without specifying any render mode. "
                'You can specify the render_mode at initialization, e.g. gymnasium.make("'
                'GpuSharing-v0", render_mode="rgb_array")'
            )
            return None
        if self.render_mode == "ansi":
            return render_ansi(self.sim)
        return render_rgb(self.sim, self.max_gpus)

    # ------------------------------------------------------------------ helpers
    def explain(self, action: int) -> str | None:
        """Why ``action`` is illegal now (padding, or the simulator's reason), or None if it
        is legal."""
        return self.interface.explain(action)

    def _info(self, invalid: bool | None) -> dict[str, Any]:
        mask = self._mask if self._kept else self._mask.copy()
        info: dict[str, Any] = {"action_mask": mask, "sim_time_s": self.sim.now}
        if invalid is not None:
            info["invalid_action"] = invalid
        return info
