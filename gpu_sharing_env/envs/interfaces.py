"""The agent's side of the ``GpuSharing`` env family: what an action means and what is observed.

:class:`~gpu_sharing_env.envs.gpu_sharing.GpuSharingEnv` runs the simulator, the reward, the
invalid-action rule and the episode once for every version; its ``interface`` argument names
one of :data:`INTERFACES`, which lays the decisions out as actions, builds the mask and the
observation and says why an action is illegal:

* v0, :class:`WindowTables`: (window slot, first GPU, option) actions; GPU, job and global
  tables;
* v1, :class:`WindowFeatures`: v0's actions padded, plus migration slots; v0's tables widened,
  option features and job × GPU pair features;
* v2, :class:`CandidateMoves`: one action per move the simulator accepts now; a feature row per
  move.

An interface is built with the env's simulator and its own settings (the env passes on every
argument it does not take itself) and keeps only agent-side state: the codec, the encoder, the
candidates. The env reads its settings and state as its own (``env.max_window``,
``env.candidates``, ``env.index_of(d)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from gpu_sharing_env.envs.candidates import (
    PRUNINGS,
    CandidateBuilder,
    Candidates,
)
from gpu_sharing_env.envs.observation import ObservationEncoder
from gpu_sharing_env.envs.observation_v1 import ObservationEncoderV1
from gpu_sharing_env.sim.codec import WAIT, ActionCodec
from gpu_sharing_env.sim.engine import Decision, Simulator

Obs = dict[str, np.ndarray]

#: The default ``max_candidates``: above the most legal moves seen on ``default`` (parity test).
DEFAULT_MAX_CANDIDATES = 4096
#: ``global`` features of v2: time / horizon, queued jobs (log), offline jobs left (share), empty
#: ready GPUs (share), candidates / ``max_candidates``.
GLOBAL_FEATURES_V2 = ("time", "queued_log", "offline_left", "empty_gpus", "candidates")
DECISION_SCOPES = ("queue", "window")


def _int_at_least(value: object, low: int) -> bool:
    return (
        not isinstance(value, bool) and isinstance(value, int | np.integer) and bool(value >= low)
    )


def _max_gpus(sim: Simulator, max_gpus: int | None) -> int:
    """The padded GPU count: ``None`` takes the scenario's ``env.max_gpus``, 0 the cluster's."""
    n_gpus = sim.n_gpus
    pad = sim.cfg.env.max_gpus if max_gpus is None else max_gpus
    if not _int_at_least(pad, 0):
        raise ValueError(f"max_gpus: must be None or an integer >= 0 (got {max_gpus!r})")
    pad = int(pad) or n_gpus
    if pad < n_gpus:
        raise ValueError(
            f"max_gpus: must be 0 or >= the cluster's {n_gpus} GPUs (got {pad}; "
            f"scenario {sim.cfg.name})"
        )
    return pad


def _pad(name: str, value: int | None, own: int, scenario: str) -> int:
    if value is None or value == 0:
        return own
    if not _int_at_least(value, own):
        raise ValueError(
            f"{name}: must be None, 0 or an integer >= the scenario's {own} (got {value!r}; "
            f"scenario {scenario})"
        )
    return int(value)


class Interface:
    """One version's action layout, mask, observation and reasons (module docstring)."""

    #: The version it serves (its key in :data:`INTERFACES`).
    version: ClassVar[str]
    action_space: spaces.Discrete
    observation_space: spaces.Dict
    #: The queue-window codec a heuristic reads the state through (``ClusterView(sim, codec)``).
    codec: ActionCodec
    #: GPU rows of the layout (padding included) and of ``render_mode="rgb_array"``'s image.
    max_gpus: int

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def sim_settings(self) -> dict[str, Any]:
        """What ``Simulator.reset`` takes besides the seed and the window order."""
        return {}

    def reset(self) -> None:
        """Forget the last episode (after the simulator's reset)."""

    def mask(self) -> np.ndarray:
        """The legal actions now (a fresh int8 array; action 0 is always legal)."""
        raise NotImplementedError

    def observe(self, mask: np.ndarray) -> Obs:
        """The observation now (``mask``: what :meth:`mask` just returned)."""
        raise NotImplementedError

    def decision(self, action: int) -> Decision:
        """The decision the masked-legal ``action`` (not 0) stands for."""
        raise NotImplementedError

    def kept_mask(self) -> np.ndarray | None:
        """The mask array every :meth:`mask` returns, overwritten in place, or None where each
        is a fresh array (v0-v2: ``info["action_mask"]`` is then a copy of it)."""
        return None

    def explain(self, action: int) -> str | None:
        """Why ``action`` is illegal now, or None if it is legal."""
        raise NotImplementedError


class WindowTables(Interface):
    """``GpuSharing-v0``: the jobs of the queue window at (first GPU, option), GPU and job tables.

    ## Action Space

    ``Discrete(1 + queue_window * max_gpus * n_options)``. Action ``0`` waits (always legal).
    Action ``1 + (slot * max_gpus + gpu) * n_options + option`` places the ``slot``-th job of the
    queue window with its first GPU at ``gpu`` using placement option ``option`` (the scenario's
    options in order: exclusive, time-sharing, MPS at each SM share, MIG at each instance size;
    ``env.unwrapped.sim.options``). Gangs take the first legal GPUs from ``gpu`` on. The mask is
    built from the simulator's own legality function (``ActionCodec.mask``).

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

    ## Arguments

    * ``max_gpus``: padded GPU count of the observation and action layout; ``None`` takes the
      scenario's ``env.max_gpus``; ``0`` means the cluster's own size.
    """

    version = "v0"
    encoder: ObservationEncoder | ObservationEncoderV1

    def __init__(self, sim: Simulator, max_gpus: int | None = None) -> None:
        super().__init__(sim)
        self.max_gpus = _max_gpus(sim, max_gpus)
        self._use(
            ActionCodec(sim.window, self.max_gpus, len(sim.options)),
            ObservationEncoder(sim, self.max_gpus),
        )

    def _use(self, codec: ActionCodec, encoder: ObservationEncoder | ObservationEncoderV1) -> None:
        self.codec = codec
        self.encoder = encoder
        self.action_space = spaces.Discrete(codec.n_actions)
        self.observation_space = encoder.space

    def reset(self) -> None:
        self.encoder.reset()

    def mask(self) -> np.ndarray:
        return self.codec.mask(self.sim)

    def observe(self, mask: np.ndarray) -> Obs:
        return self.encoder.encode(self.sim)

    def decision(self, action: int) -> Decision:
        slot, gpu, option = self.codec.decode(action)  # type: ignore[misc]
        return Decision(self.codec.slot_job(self.sim, slot), gpu, option)

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


class WindowFeatures(WindowTables):
    """``GpuSharing-v1``: v0's actions with padded layouts, options described by their features.

    ## Action Space

    As v0: ``Discrete(1 + max_window * max_gpus * max_options)``; action ``0`` waits (always
    legal), action ``1 + (slot * max_gpus + gpu) * max_options + option`` places the ``slot``-th
    window job with its first GPU at ``gpu`` using placement option ``option``. Slots past the
    scenario's queue window and options past its option list are padding and never legal, so
    envs of several scenarios can share one layout (a vector env needs equal spaces).

    ## Observation Space

    A ``Dict`` of 1-D float32 ``Box`` es (``gpu_sharing_env.envs.observation_v1``): v0's
    ``gpus``, ``jobs`` and ``global`` tables widened with time-until-free per GPU,
    resource-guarantee residents, predicted durations and statistics of the queue beyond the
    window; ``options`` (each option's mode one-hot, SM share, MIG compute and memory slices)
    and ``pairs`` (per window job and GPU: legality, solo speed, predicted share, rate and
    duration). A network that reads options through their features has no weight whose shape
    depends on the number of options, GPUs or window slots.

    ## Arguments

    v0's ``max_gpus``, plus ``max_window`` and ``max_options`` (``None`` or ``0``: the
    scenario's own; otherwise at least that), which pad the layout like ``max_gpus``, and
    ``migration_slots`` (default 0: none). With ``k`` migration slots the action space gains
    ``k`` job slots after the window's: slot ``max_window + i`` holds the ``i``-th of
    ``Simulator.migration_candidates`` (running offline single-GPU jobs on shared GPUs with at
    least 300 s of estimated work left, longest time left first), and placing it on an empty GPU
    migrates it there (Gandiva's introspective migration: a checkpoint-restore pause of
    ``sharing.migration_s``, progress kept). Their ``jobs`` rows follow the window's, and every
    ``jobs`` row gains two columns (``MOVE_FEATURES``: running, time left at the current rate).
    Decision points are unchanged (a migration is offered where a placement decision is due).
    ``job_history=True`` (default False: the spaces of trained agents stay as they are) adds
    ``history`` (per job slot, ``HISTORY_FEATURES``: group tag and user hashed, finished runs of
    the group, their mean and spread, time since its last submission, its estimated period: what
    ``ClusterView.group_stats`` gives heuristics) and ``nodes`` (per GPU its node).
    """

    version = "v1"

    def __init__(
        self,
        sim: Simulator,
        max_gpus: int | None = None,
        max_window: int | None = None,
        max_options: int | None = None,
        migration_slots: int = 0,
        job_history: bool = False,
    ) -> None:
        Interface.__init__(self, sim)  # (v0's would build v0's encoder for nothing)
        self.max_gpus = pad = _max_gpus(sim, max_gpus)
        name = sim.cfg.name
        window = _pad("max_window", max_window, sim.window, name)
        n_opt = _pad("max_options", max_options, len(sim.options), name)
        if not _int_at_least(migration_slots, 0):
            raise ValueError(f"migration_slots: must be an integer >= 0 (got {migration_slots!r})")
        self.max_window, self.max_options = window, n_opt
        self.migration_slots = moves = int(migration_slots)
        self._use(
            ActionCodec(window, pad, n_opt, moves),
            ObservationEncoderV1(sim, pad, window, n_opt, moves, history=bool(job_history)),
        )

    def observe(self, mask: np.ndarray) -> Obs:
        """The observation now; the window's legal (job, GPU) pairs come from the mask just
        built (the same ``sim.mask`` rows the encoder would otherwise ask for again)."""
        sim = self.sim
        if sim.done:
            return self.encoder.encode(sim)
        blocks = mask[1:].reshape(-1, self.max_gpus, self.codec.n_options)
        rows = blocks if self.migration_slots else blocks[: sim.window]
        legal = rows[:, : sim.n_gpus].any(axis=2)
        return self.encoder.encode(sim, legal)  # type: ignore[call-arg]

    def explain(self, action: int) -> str | None:
        """Why ``action`` is illegal now (padding, or the simulator's reason), or None."""
        if 0 < action < self.codec.n_actions:
            slot, gpu, option = self.codec.decode(action)  # type: ignore[misc]
            if option >= len(self.sim.options):
                return f"option {option} is padding (the scenario has {len(self.sim.options)})"
            if slot >= self.max_window:
                return self._explain_move(slot - self.max_window, gpu, option)
            if slot >= self.sim.window:
                return f"queue slot {slot} is padding (the window holds {self.sim.window})"
        return super().explain(action)

    def _explain_move(self, k: int, gpu: int, option: int) -> str | None:
        """Why moving migration candidate ``k`` to ``gpu`` with ``option`` is illegal, or None
        (from the legality the mask holds: asking the simulator to check a migration would
        move the job's residency around)."""
        sim = self.sim
        if sim.done:
            return "the episode is over"
        cands = sim.migration_candidates(self.migration_slots)
        if k >= len(cands):
            return f"migration slot {k} is empty ({len(cands)} candidates)"
        if gpu >= sim.n_gpus:
            return f"gpu {gpu} is padding (the cluster has {sim.n_gpus} GPUs)"
        if sim.migration_mask(cands[k])[gpu, option]:
            return None
        if sim.cluster.n_res[gpu] > 0 or not sim.cluster.ready[gpu]:
            return f"gpu {gpu} is not empty and ready (a migration goes to an empty GPU)"
        return sim.cluster.check(sim.jobs[cands[k]].spec, gpu, option) or "not legal"


class CandidateMoves(Interface):
    """``GpuSharing-v2``: the action picks one candidate move (issue 53, item 1).

    ## Action Space

    ``Discrete(max_candidates)``. Each decision point enumerates, from the state alone, every
    move the simulator accepts (``gpu_sharing_env.envs.candidates``): index 0 holds (waits for
    the next event); then every queued job of the decision scope at every legal (first GPU,
    option), gangs included; then every running job to every empty, ready GPU and option where
    it may go (a migration: checkpoint, ``sharing.migration_s`` pause, progress kept; a moved
    online service serves nothing for that time, an outage as a fault's restart); with
    ``suspend=True``, then every running job that may be suspended (``Decision.suspend``). The mask
    marks the real candidates (``env.unwrapped.candidates.moves`` lists them as ``Decision`` s;
    ``index_of(decision)`` finds one); indices beyond them are illegal. More legal moves than
    ``max_candidates`` raise ``TooManyCandidates`` (one line; pass a larger ``max_candidates``).

    ## Observation Space

    ``candidates``: ``max_candidates × len(CANDIDATE_FEATURES)`` float32 in [-1, 1], one row per
    candidate (the move's kind, the job as ``ClusterView`` gives it to a heuristic with its
    group history, the target GPU's type, node, residents and free capacity, the option, solo
    speed), zero rows beyond them (with ``suspend=True`` one column more,
    ``SUSPEND_FEATURE``: ``candidate_features(True)``; with ``pair_features=True``
    ``PAIR_FEATURES`` last); ``candidate_mask``: 1 for the real
    rows; ``global``: ``GLOBAL_FEATURES_V2``.

    ## Arguments

    ``max_candidates`` (default None: :data:`DEFAULT_MAX_CANDIDATES`), ``decision_scope``
    (``"queue"``, the default: any queued job; ``"window"``: the first ``queue_window`` only, as
    under v0/v1 and for window heuristics) and ``mechanisms`` (cluster mechanisms such as
    ``{"protection": True}`` switched on at every reset, as the runner does for a policy that
    deploys them). No padding: the GPUs are the cluster's own.

    ``pruning``: ``"none"`` (the default) offers every legal move; ``"classes"`` keeps, per
    job and option, one target (the lowest GPU) of each class of interchangeable ones (same
    GPU type, mode and residents' signature, same kind of node and its free GPUs as one, some
    or all; gangs by the classes of the GPUs they take and the nodes they span:
    ``gpu_sharing_env.envs.candidates``), single-GPU migrations alike: 6-7x fewer candidates on
    ``pai-busy``. ``keep_moves`` (a callable of the simulator, asked at every decision point,
    e.g. the heuristics whose choices are an agent's inputs) names decisions kept as
    candidates under any pruning, so each of those rules' episodes is one the env can play.

    ``suspend`` (default False: the default candidates and observation are as before):
    suspensions are candidates too (Gandiva's suspend-resume: the job keeps its progress, leaves
    its GPUs and is queued again; an ordinary placement of it resumes it), one per running job
    ``Simulator.suspendable`` names, after the migrations, each row's kind in the extra
    ``suspend`` column. Like a migration, a suspension is offered where a placement decision
    is due.

    ``pair_features`` (default False: the default observation is as before): each row gains
    :data:`~gpu_sharing_env.envs.candidates.PAIR_FEATURES` last, from the offline co-location
    profile ``ClusterView.profile`` gives the rules (memoised per episode): the job's profiled
    speed on the target with its other residents under the move's option (relative to its solo
    speed there), the mean profiled speed those residents lose to it, their mean attained
    service and the job's own (seconds run, log-scaled; a suspension's row: the job where it
    runs).
    """

    version = "v2"

    def __init__(
        self,
        sim: Simulator,
        max_candidates: int | None = None,
        decision_scope: str = "queue",
        mechanisms: Mapping[str, bool] | None = None,
        pruning: str = "none",
        keep_moves: Callable[[Simulator], Iterable[Decision | None]] | None = None,
        suspend: bool = False,
        pair_features: bool = False,
    ) -> None:
        super().__init__(sim)
        n = self._default_max_candidates(sim) if max_candidates is None else max_candidates
        if not _int_at_least(n, 2):
            raise ValueError(f"max_candidates: must be an integer >= 2 (got {max_candidates!r})")
        if decision_scope not in DECISION_SCOPES:
            raise ValueError(
                f"decision_scope: must be one of {', '.join(DECISION_SCOPES)} "
                f"(got {decision_scope!r})"
            )
        if pruning not in PRUNINGS:
            raise ValueError(f"pruning: must be one of {', '.join(PRUNINGS)} (got {pruning!r})")
        if keep_moves is not None and not callable(keep_moves):
            raise ValueError(f"keep_moves: must be None or a callable (got {keep_moves!r})")
        if not isinstance(suspend, bool | np.bool_):
            raise ValueError(f"suspend: must be True or False (got {suspend!r})")
        if not isinstance(pair_features, bool | np.bool_):
            raise ValueError(f"pair_features: must be True or False (got {pair_features!r})")
        try:
            self.mech = replace(sim.cfg.mechanisms, **dict(mechanisms or {}))
        except TypeError as e:
            raise ValueError(f"mechanisms: {e}") from None
        self.max_gpus = sim.n_gpus
        self.codec = ActionCodec(sim.window, sim.n_gpus, len(sim.options))
        self.max_candidates = n = int(n)
        self.decision_scope = decision_scope
        self.pruning = pruning
        self.keep_moves = keep_moves
        self.suspend = bool(suspend)
        self.pair_features = bool(pair_features)
        self.builder = CandidateBuilder(
            sim, n, pruning, self.suspend, self.pair_features, f"GpuSharing-{self.version}"
        )
        #: Columns of a candidate row (``candidate_features(suspend, pair_features)``).
        self.n_features = width = self.builder.n_features
        self.candidates = Candidates.hold_only(width)
        #: The candidates whose ``table`` an observation has been given (it is handed out once).
        self._observed: Candidates | None = None
        self.action_space = spaces.Discrete(n)
        self.observation_space = self._spaces()

    def _default_max_candidates(self, sim: Simulator) -> int:
        """``max_candidates`` where None is passed: :data:`DEFAULT_MAX_CANDIDATES`."""
        return DEFAULT_MAX_CANDIDATES

    def _spaces(self) -> spaces.Dict:
        """The observation space (after the builder)."""
        n = self.max_candidates
        return spaces.Dict(
            {
                "candidates": spaces.Box(-1.0, 1.0, (n, self.n_features), np.float32),
                "candidate_mask": spaces.Box(0.0, 1.0, (n,), np.float32),
                "global": spaces.Box(-1.0, 1.0, (len(GLOBAL_FEATURES_V2),), np.float32),
            }
        )

    def sim_settings(self) -> dict[str, Any]:
        return {"mechanisms": self.mech, "decision_scope": self.decision_scope}

    def mask(self) -> np.ndarray:
        keep: Iterable[Decision | None] = ()
        if self.keep_moves is not None and not self.sim.done:
            keep = list(self.keep_moves(self.sim))  # (asked at every decision point)
        self.candidates = self.builder.build(keep if self.pruning != "none" else ())
        mask = np.zeros(self.max_candidates, dtype=np.int8)
        mask[: len(self.candidates)] = 1
        return mask

    def observe(self, mask: np.ndarray) -> Obs:
        sim = self.sim
        n = self.max_candidates
        cands = self.candidates
        k = len(cands)
        # the build's own zero-padded table, the first time it is observed; otherwise a copy
        feats = cands.table
        if feats is None or cands is self._observed or feats.shape != (n, self.n_features):
            feats = np.zeros((n, self.n_features), dtype=np.float32)
            feats[:k] = cands.features
        else:
            self._observed = cands
        total, left = sim.offline_jobs
        c = sim.cluster
        # (the share of empty, ready GPUs: ``np.mean``'s float64 sum of 0s and 1s is exact, so
        # their count over n is the same double; the legality keeps them for the cluster's
        # version, and the candidates' build has just asked for them)
        empty = len(sim.legality.empty_ready()) / c.n_gpus if c.n_gpus else 0.0
        glob = np.array(
            [
                min(1.0, sim.now / max(sim.horizon_s, 1e-9)),
                min(1.0, math.log1p(len(sim.queue)) / math.log1p(1e4)),
                left / max(1, total),
                empty,
                k / n,
            ],
            dtype=np.float32,
        )
        return {"candidates": feats, "candidate_mask": mask.astype(np.float32), "global": glob}

    def decision(self, action: int) -> Decision:
        d = self.candidates.move(action)
        assert d is not None
        return d

    def index_of(self, d: Decision | None) -> int | None:
        """The action that carries out decision ``d`` now (0 for None), or None if ``d`` is
        not among the candidates."""
        return self.candidates.index_of(d)

    def explain(self, action: int) -> str | None:
        if not 0 <= action < self.max_candidates:
            return f"action {action} out of range 0..{self.max_candidates - 1}"
        if action == 0:
            return None
        if self.sim.done:
            return "the episode is over"
        n = len(self.candidates)
        if action >= n:
            return f"candidate {action} is padding ({n} candidates now)"
        return None


class _Kept:
    """One set of ``GpuSharing-v3``'s kept arrays: the candidate table, the mask and ``global``
    (writable: the builder's and the interface's), the read-only views of them that
    observations hand out, and how many rows of the table and the mask the last observation
    used (hold's at least)."""

    __slots__ = ("glob", "mask", "table", "used", "views")

    def __init__(self, n: int, width: int, n_global: int) -> None:
        self.table = np.zeros((n, width), dtype=np.float32)
        self.mask = np.zeros(n, dtype=np.int8)
        self.mask[0] = 1
        self.glob = np.zeros(n_global, dtype=np.float32)
        self.used = 1
        self.views = self._views()

    def _views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        views = []
        for a in (self.table, self.mask, self.glob):
            v = a.view()
            v.flags.writeable = False
            views.append(v)
        return views[0], views[1], views[2]

    def __getstate__(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        # (the views are remade of the copied arrays: a copied view would be an array of its own)
        return self.table, self.mask, self.glob, self.used

    def __setstate__(self, state: tuple[np.ndarray, np.ndarray, np.ndarray, int]) -> None:
        self.table, self.mask, self.glob, self.used = state
        self.views = self._views()


class KeptCandidateMoves(CandidateMoves):
    """``GpuSharing-v3``: v2's candidate moves (the same simulator, candidates, features, order
    and decisions) under an observation contract built for speed.

    ## Kept buffers

    The observation's arrays are the env's own, made once (at construction) and overwritten in
    place: the candidate builder writes a step's rows straight into the kept table and zeroes
    only what those writes leave of the previous observation (``CandidateBuilder.build``'s
    ``out``: no fresh ``max_candidates``-row table a step). They are handed out read-only (``flags.writeable`` False). **An observation is
    valid until the env's next ``step``; copy what you keep.** Each ``reset`` switches to a
    second set of arrays, so an episode's last observation (and its ``info["action_mask"]``)
    stays as it is through the next episode: a vector env that keeps the final observation
    and resets the env (Stable-Baselines3's ``terminal_observation``, Gymnasium's
    ``final_obs``) keeps it right. Stable-Baselines3's ``DummyVecEnv`` and ``SubprocVecEnv``
    and Gymnasium's ``SyncVectorEnv`` copy each observation into buffers of their own.
    Gymnasium's ``check_env`` asserts that no two calls return shared arrays
    (``check_returned_data_not_reused``): v3 fails that one check by design, and is registered
    with ``disable_env_checker=True`` (the passive checker would warn of it at every
    ``gymnasium.make``).

    ## One mask

    One kept int8 array is the observation's ``candidate_mask``, ``info["action_mask"]`` and
    ``env.action_masks()`` (MaskablePPO's): 1 for the real candidates, 0 beyond them.

    ## Observation Space

    v2's, but for the mask's dtype: ``candidates`` (``max_candidates × n_features`` float32 in
    [-1, 1], the candidates' rows, zero rows beyond them), ``candidate_mask``
    (``max_candidates`` int8 in {0, 1}; v2: float32) and ``global``
    (:data:`GLOBAL_FEATURES_V2`, float32).

    ## Arguments

    v2's (:class:`CandidateMoves`), but ``max_candidates`` defaults to ``None``: the
    scenario's ``env.max_candidates`` (0 there: :data:`DEFAULT_MAX_CANDIDATES`).
    """

    version = "v3"

    def _default_max_candidates(self, sim: Simulator) -> int:
        return sim.cfg.env.max_candidates or DEFAULT_MAX_CANDIDATES

    def _spaces(self) -> spaces.Dict:
        n, width = self.max_candidates, self.n_features
        #: The kept arrays now, and the other set (the last episode's final observation).
        self._kept = _Kept(n, width, len(GLOBAL_FEATURES_V2))
        self._other = _Kept(n, width, len(GLOBAL_FEATURES_V2))
        return spaces.Dict(
            {
                "candidates": spaces.Box(-1.0, 1.0, (n, width), np.float32),
                "candidate_mask": spaces.Box(0, 1, (n,), np.int8),
                "global": spaces.Box(-1.0, 1.0, (len(GLOBAL_FEATURES_V2),), np.float32),
            }
        )

    def reset(self) -> None:
        # (the other set: the episode's final observation stays as it was handed out)
        self._kept, self._other = self._other, self._kept

    def kept_mask(self) -> np.ndarray:
        return self._kept.views[1]

    def mask(self) -> np.ndarray:
        keep: Iterable[Decision | None] = ()
        if self.keep_moves is not None and not self.sim.done:
            keep = list(self.keep_moves(self.sim))  # (asked at every decision point)
        kept = self._kept
        used = kept.used
        # (the rows written straight into the kept table, those the last observation used
        # beyond them zeroed; where the build raises, the arrays are left as they were)
        self.candidates = cands = self.builder.build(
            keep if self.pruning != "none" else (), kept.table, used
        )
        mask = kept.mask
        k = len(cands)
        if k < used:
            mask[k:used] = 0
        else:
            mask[used:k] = 1
        kept.used = k
        return kept.views[1]

    def observe(self, mask: np.ndarray) -> Obs:
        sim = self.sim
        kept = self._kept
        total, left = sim.offline_jobs
        c = sim.cluster
        # (v2's values, each cast to float32 as it is written into the kept array)
        glob = kept.glob
        glob[0] = min(1.0, sim.now / max(sim.horizon_s, 1e-9))
        glob[1] = min(1.0, math.log1p(len(sim.queue)) / math.log1p(1e4))
        glob[2] = left / max(1, total)
        glob[3] = len(sim.legality.empty_ready()) / c.n_gpus if c.n_gpus else 0.0
        glob[4] = kept.used / self.max_candidates
        table, kmask, g = kept.views
        return {"candidates": table, "candidate_mask": kmask, "global": g}


#: The interfaces by version: ``GpuSharingEnv(interface=...)`` names one, and each registered id
#: (``gpu_sharing_env._ENVS``) is the env with one of them.
INTERFACES: dict[str, type[Interface]] = {
    i.version: i for i in (WindowTables, WindowFeatures, CandidateMoves, KeptCandidateMoves)
}

__all__ = [
    "DECISION_SCOPES",
    "DEFAULT_MAX_CANDIDATES",
    "GLOBAL_FEATURES_V2",
    "INTERFACES",
    "CandidateMoves",
    "Interface",
    "KeptCandidateMoves",
    "Obs",
    "WindowFeatures",
    "WindowTables",
]
