"""``GpuSharing-v1``: ``GpuSharing-v0`` with option-agnostic observations and padded layouts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from gpu_sharing_env.config import ScenarioConfig
from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv, Obs
from gpu_sharing_env.envs.observation_v1 import ObservationEncoderV1
from gpu_sharing_env.sim.codec import WAIT, ActionCodec


def _pad(name: str, value: int | None, own: int, scenario: str) -> int:
    if value is None or value == 0:
        return own
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < own:
        raise ValueError(
            f"{name}: must be None, 0 or an integer >= the scenario's {own} (got {value!r}; "
            f"scenario {scenario})"
        )
    return int(value)


class GpuSharingEnvV1(GpuSharingEnv):
    """``GpuSharing-v0``'s cluster, dynamics, rewards and action semantics, with an observation
    that describes placement options by their features (``docs/env.md``, "GpuSharing-v1").

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

    v0's, plus ``max_window`` and ``max_options`` (``None`` or ``0``: the scenario's own;
    otherwise at least that), which pad the layout like ``max_gpus``, and ``migration_slots``
    (default 0: none). With ``k`` migration slots the action space gains ``k`` job slots after
    the window's: slot ``max_window + i`` holds the ``i``-th of
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

    ## Version History

    * v1: option features, job × GPU pair features, time-until-free, queue statistics beyond
      the window; padded window and options. Dynamics and rewards as v0.
    * v0: Initial version.
    """

    def __init__(
        self,
        scenario: str | os.PathLike[str] | ScenarioConfig = "default",
        reward: str = "jct",
        reward_kwargs: Mapping[str, Any] | None = None,
        invalid_action: Literal["noop", "raise"] = "noop",
        render_mode: str | None = None,
        max_gpus: int | None = None,
        max_window: int | None = None,
        max_options: int | None = None,
        window_order: str = "fifo",
        migration_slots: int = 0,
        job_history: bool = False,
    ) -> None:
        super().__init__(
            scenario, reward, reward_kwargs, invalid_action, render_mode, max_gpus, window_order
        )
        sim = self.sim
        name = self.cfg.name
        window = _pad("max_window", max_window, sim.window, name)
        n_opt = _pad("max_options", max_options, len(sim.options), name)
        if (
            isinstance(migration_slots, bool)
            or not isinstance(migration_slots, int | np.integer)
            or migration_slots < 0
        ):
            raise ValueError(f"migration_slots: must be an integer >= 0 (got {migration_slots!r})")
        self.max_window, self.max_options = window, n_opt
        self.migration_slots = moves = int(migration_slots)
        self.codec = ActionCodec(window, self.max_gpus, n_opt, moves)
        self.encoder = ObservationEncoderV1(  # type: ignore[assignment]
            sim, self.max_gpus, window, n_opt, moves, history=bool(job_history)
        )
        self.action_space = spaces.Discrete(self.codec.n_actions)
        self.observation_space = self.encoder.space
        self._mask = np.zeros(self.codec.n_actions, dtype=np.int8)
        self._mask[WAIT] = 1

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

    def _observe(self) -> Obs:
        """The observation now; the window's legal (job, GPU) pairs come from the mask just
        built (the same ``sim.mask`` rows the encoder would otherwise ask for again)."""
        sim = self.sim
        if sim.done:
            return self.encoder.encode(sim)
        blocks = self._mask[1:].reshape(-1, self.max_gpus, self.codec.n_options)
        rows = blocks if self.migration_slots else blocks[: sim.window]
        legal = rows[:, : sim.n_gpus].any(axis=2)
        return self.encoder.encode(sim, legal)  # type: ignore[call-arg]
