"""Action codec: flat ``Discrete`` actions ↔ placement decisions.

Layout: action 0 is *wait*; action ``1 + (slot * max_gpus + gpu) * n_options + option`` places
the ``slot``-th job of the queue window on ``gpu`` (its first GPU for gangs) with placement
option ``option``. GPUs beyond the cluster's size (padding up to ``max_gpus``) are never legal.
"""

from __future__ import annotations

import numpy as np

from gpu_sharing_env.sim.engine import Decision, Simulator

WAIT = 0


class ActionCodec:
    """Translate between actions and :class:`Decision` for one simulator."""

    def __init__(self, window: int, max_gpus: int, n_options: int) -> None:
        self.window = window
        self.max_gpus = max_gpus
        self.n_options = n_options
        self.n_actions = 1 + window * max_gpus * n_options

    def encode(self, slot: int, gpu: int, option: int) -> int:
        return 1 + (slot * self.max_gpus + gpu) * self.n_options + option

    def decode(self, action: int) -> tuple[int, int, int] | None:
        """(slot, gpu, option), or None for wait."""
        if action == WAIT:
            return None
        a = action - 1
        slot, rest = divmod(a, self.max_gpus * self.n_options)
        gpu, option = divmod(rest, self.n_options)
        return slot, gpu, option

    def to_decision(self, sim: Simulator, action: int) -> Decision | None:
        """The decision an action stands for (None for wait). Raises ValueError if the slot is
        empty or the action is out of range."""
        if not 0 <= action < self.n_actions:
            raise ValueError(f"action {action} out of range 0..{self.n_actions - 1}")
        d = self.decode(action)
        if d is None:
            return None
        slot, gpu, option = d
        window = sim.window_jobs()
        if slot >= len(window):
            raise ValueError(f"action {action}: queue slot {slot} is empty")
        return Decision(window[slot].job_id, gpu, option)

    def from_decision(self, sim: Simulator, d: Decision | None) -> int:
        if d is None:
            return WAIT
        ids = [s.job_id for s in sim.window_jobs()]
        return self.encode(ids.index(d.job_id), d.gpu, d.option)

    def mask(self, sim: Simulator) -> np.ndarray:
        """int8 mask over all actions, built from the simulator's legality function."""
        m = np.zeros(self.n_actions, dtype=np.int8)
        m[WAIT] = 1
        if sim.done:
            return m
        g = sim.n_gpus
        block = self.max_gpus * self.n_options
        for slot, spec in enumerate(sim.window_jobs()):
            legal = sim.mask(spec.job_id)
            if not legal.any():
                continue
            full = np.zeros((self.max_gpus, self.n_options), dtype=np.int8)
            full[:g] = legal
            start = 1 + slot * block
            m[start : start + block] = full.ravel()
        return m
