"""``GpuSharing-v0``: GPU-cluster scheduling with time-sharing, MPS and MIG as a Gymnasium env."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, SupportsFloat, SupportsInt

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.envs.observation import ObservationEncoder
from gpu_sharing_env.envs.render import render_ansi, render_rgb
from gpu_sharing_env.envs.rewards import REWARDS, Reward
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.codec import WAIT, ActionCodec
from gpu_sharing_env.sim.constants import WINDOW_ORDERS
from gpu_sharing_env.sim.engine import Decision, Simulator

INVALID_ACTION_MODES = ("noop", "raise")
#: Episode seeds drawn by ``reset()`` without a seed lie in [0, 2**31).
_SEED_BOUND = 2**31 - 1

Obs = dict[str, np.ndarray]


class GpuSharingEnv(gym.Env[Obs, np.int64]):
    """Place jobs on a heterogeneous GPU cluster that shares GPUs by time-sharing, MPS and MIG.

    ## Description

    A simulated cluster of GPU nodes (T4 ... H100, per the scenario) receives offline training
    jobs (gangs of whole GPUs or fractions of one; heavy-tailed durations known only through
    noisy estimates) and online inference services (diurnal load, latency SLO). The agent is the
    scheduler: at every decision point it picks one job from a window of the queue and where it
    goes (first GPU, sharing mode, MPS SM share or MIG instance size), or waits. Co-located jobs
    slow each other (interference model), MPS faults can take down co-located clients, MIG
    re-partitioning takes time. The simulator is event-driven: after a decision that leaves
    nothing to decide at that instant, time advances to the next event (arrival, completion,
    fault, load tick) after which some queued job can be placed.

    ## Action Space

    ``Discrete(1 + queue_window * max_gpus * n_options)``. Action ``0`` waits (always legal).
    Action ``1 + (slot * max_gpus + gpu) * n_options + option`` places the ``slot``-th job of the
    queue window with its first GPU at ``gpu`` using placement option ``option`` (the scenario's
    options in order: exclusive, time-sharing, MPS at each SM share, MIG at each instance size;
    ``env.unwrapped.sim.options``). Gangs take the first legal GPUs from ``gpu`` on.
    ``action_masks()`` (sb3-contrib's contract) and ``info["action_mask"]`` give the legal
    actions as an int8 vector, built from the simulator's own legality function.

    ## Observation Space

    A ``Dict`` of 1-D float32 ``Box`` es (row-major tables; full layout in ``docs/env.md``):

    | key      | shape                          | contents                                       | range   |
    |----------|--------------------------------|------------------------------------------------|---------|
    | gpus     | max_gpus × 26                  | present, type one-hot (8), memory, MIG/MPS     | [0, 1]  |
    |          |                                | capability, mode one-hot (5), residents, free  |         |
    |          |                                | memory/SM/MIG, healthy, ready, hosts online,   |         |
    |          |                                | utilisation, node CPU load                     |         |
    | jobs     | queue_window × 30              | present, online, gang, GPU fraction, memory,   | [0, 1]  |
    |          |                                | CPU, est. work (log), wait (log), attempts,    |         |
    |          |                                | type-constrained, placeable, priority, SLO,    |         |
    |          |                                | model class one-hot (17)                       |         |
    | global   | 11                             | time of day sin/cos, time/horizon, queue and   | [-1, 1] |
    |          |                                | in-system counts (log), window fill, cluster   |         |
    |          |                                | size/max_gpus, empty GPUs, mean util, SLO      |         |
    |          |                                | attainment so far, SLO target                  |         |

    GPU rows beyond the cluster's size are zero (``present`` = 0), so one policy (with a fixed
    ``max_gpus``) serves clusters of several sizes.

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
    load noise derive from the episode seed: ``reset(seed=s)`` replays exactly the episode
    ``gpu_sharing_env.evaluation.runner.run_episode`` runs with seed ``s``; ``reset()`` draws the next episode
    seed from ``self.np_random``, so successive episodes differ yet replay from the first seed.

    ## Episode End

    Terminates when the simulated horizon is reached or every offline job has finished or failed
    (``info["metrics"]`` then holds the episode metrics under the schema's names). The env
    never truncates: the simulated horizon bounds every episode, so ``GpuSharing-v0`` is
    registered without ``max_episode_steps``; pass ``max_episode_steps`` to ``gymnasium.make``
    for a step limit (``TimeLimit``).

    ## Arguments

    ```python
    gymnasium.make("GpuSharing-v0", scenario="default", reward="jct", reward_kwargs=None,
                   invalid_action="noop", render_mode=None, max_gpus=None,
                   window_order="fifo")
    ```

    * ``scenario``: a name in ``configs/scenarios/``, a YAML path, or a ``ScenarioConfig``.
    * ``reward``: a key of ``REWARDS``; ``reward_kwargs`` go to its constructor
      (e.g. ``{"slo_weight": 50.0}``).
    * ``invalid_action``: ``"noop"`` (default) treats an action outside the mask as *wait* and
      sets ``info["invalid_action"]``; ``"raise"`` raises ``ValueError`` with the simulator's
      reason. (``"noop"`` is the default because Gymnasium's and SB3's checkers, and unmasked
      algorithms, sample actions without the mask.) Actions outside the action space always
      raise.
    * ``render_mode``: ``None``, ``"ansi"`` (text: nodes, GPUs, modes, residents, queue) or
      ``"rgb_array"`` (an image of the same).
    * ``max_gpus``: padded GPU count of the observation and action layout; ``None`` takes the
      scenario's ``env.max_gpus``; ``0`` means the cluster's own size.
    * ``window_order``: which queued jobs the window holds. ``"fifo"`` (default): the first
      ``queue_window`` in submission order. ``"predicted"``: services and prioritised jobs first
      (in submission order), then the best-effort jobs with the shortest predicted duration
      (the scenario's estimate over the fastest allowed GPU type's solo speed), so an agent
      can serve the short jobs of a long queue (``Simulator.window_order``).

    ## Version History

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
        max_gpus: int | None = None,
        window_order: str = "fifo",
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
        n_gpus = self.sim.n_gpus
        pad = cfg.env.max_gpus if max_gpus is None else max_gpus
        if isinstance(pad, bool) or not isinstance(pad, int | np.integer) or pad < 0:
            raise ValueError(f"max_gpus: must be None or an integer >= 0 (got {max_gpus!r})")
        pad = int(pad) or n_gpus
        if pad < n_gpus:
            raise ValueError(
                f"max_gpus: must be 0 or >= the cluster's {n_gpus} GPUs (got {pad}; "
                f"scenario {cfg.name})"
            )
        try:
            self.reward_fn: Reward = REWARDS[reward](**dict(reward_kwargs or {}))
        except TypeError as e:
            raise ValueError(f"reward_kwargs: {e}") from None
        self.reward_name = reward
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self.max_gpus = pad
        self.codec = ActionCodec(self.sim.window, pad, len(self.sim.options))
        self.encoder = ObservationEncoder(self.sim, pad)
        self.action_space: spaces.Space[np.int64] = spaces.Discrete(self.codec.n_actions)
        self.observation_space: spaces.Dict = self.encoder.space  # type: ignore[assignment]
        self.episode_seed: int | None = None
        self._mask = np.zeros(self.codec.n_actions, dtype=np.int8)
        self._mask[WAIT] = 1

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Start an episode; ``seed`` seeds the simulator (see Starting State)."""
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(_SEED_BOUND))
        self.episode_seed = int(seed)
        self.sim.reset(self.episode_seed, window_order=self.window_order)
        self.encoder.reset()
        self.reward_fn.reset(self.sim)
        self._mask = self._build_mask()
        return self._observe(), self._info(invalid=None)

    def step(self, action: SupportsInt) -> tuple[Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one decision (or wait); advance to the next decision point if none is left."""
        sim = self.sim
        a = int(action)
        n = len(self._mask)
        if not 0 <= a < n:
            raise ValueError(f"action: must be in 0..{n - 1} (got {a})")
        invalid = False
        if not sim.done:
            if a != WAIT and not self._mask[a]:
                if self.invalid_action == "raise":
                    raise ValueError(f"illegal action {a}: {self.explain(a)}")
                invalid = True
                a = WAIT
            if a == WAIT:
                sim.advance()
            else:
                sim.apply(self._decision(a))
                if not sim.needs_decision():
                    sim.advance()
        reward = float(self.reward_fn(sim))
        self._mask = self._build_mask()
        terminated = sim.done
        info = self._info(invalid=invalid)
        if terminated:
            info["metrics"] = sim.metrics()
        return self._observe(), reward, terminated, False, info

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
        """Why ``action`` is illegal now (the simulator's reason), or None if it is legal."""
        sim = self.sim
        if not 0 <= action < self.codec.n_actions:
            return f"action {action} out of range 0..{self.codec.n_actions - 1}"
        if action == WAIT:
            return None
        if sim.done:
            return "the episode is over"
        slot, gpu, option = self.codec.decode(action)  # type: ignore[misc]
        window = sim.window_jobs()
        if slot >= len(window):
            return f"queue slot {slot} is empty ({len(window)} jobs in the window)"
        if gpu >= sim.n_gpus:
            return f"gpu {gpu} is padding (the cluster has {sim.n_gpus} GPUs)"
        return sim.check(Decision(window[slot].job_id, gpu, option))

    def _decision(self, action: int) -> Decision:
        """The decision legal ``action`` (not wait) stands for."""
        slot, gpu, option = self.codec.decode(action)  # type: ignore[misc]
        return Decision(self.codec.slot_job(self.sim, slot), gpu, option)

    def _build_mask(self) -> np.ndarray:
        """The action mask from the simulator's legality function (a fresh array)."""
        return self.codec.mask(self.sim)

    def _observe(self) -> Obs:
        """The observation now (after :meth:`_build_mask`)."""
        return self.encoder.encode(self.sim)

    def _info(self, invalid: bool | None) -> dict[str, Any]:
        info: dict[str, Any] = {"action_mask": self._mask.copy(), "sim_time_s": self.sim.now}
        if invalid is not None:
            info["invalid_action"] = invalid
        return info
