"""Action codec: flat ``Discrete`` actions ↔ placement decisions.

Layout: action 0 is *wait*; action ``1 + (slot * max_gpus + gpu) * n_options + option`` places
the ``slot``-th job of the queue window on ``gpu`` (its first GPU for gangs) with placement
option ``option``. GPUs beyond the cluster's size (padding up to ``max_gpus``) are never legal.

With ``moves`` migration slots, slots ``window .. window + moves - 1`` follow the queue window's:
slot ``window + k`` stands for the ``k``-th of :meth:`Simulator.migration_candidates` (running
jobs), and placing it on ``gpu`` migrates it there (legal destinations:
:meth:`Simulator.migration_mask`, empty GPUs).
"""

from __future__ import annotations

import numpy as np

from gpu_sharing_env.sim.engine import Decision, Simulator

WAIT = 0


class ActionCodec:
    """Translate between actions and :class:`Decision` for one simulator."""

    def __init__(self, window: int, max_gpus: int, n_options: int, moves: int = 0) -> None:
        self.window = window
        self.max_gpus = max_gpus
        self.n_options = n_options
        self.moves = moves
        self.n_actions = 1 + (window + moves) * max_gpus * n_options

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
        return Decision(self.slot_job(sim, slot, action), gpu, option)

    def slot_job(self, sim: Simulator, slot: int, action: int | None = None) -> int:
        """The job id in ``slot`` now: a window job, or a migration candidate past the window.
        Raises ValueError if the slot is empty."""
        what = f"action {action}: " if action is not None else ""
        if slot >= self.window:
            cands = sim.migration_candidates(self.moves)
            k = slot - self.window
            if k >= len(cands):
                raise ValueError(f"{what}migration slot {k} is empty")
            return cands[k]
        if slot >= min(len(sim.queue), sim.window):
            raise ValueError(f"{what}queue slot {slot} is empty")
        return int(sim.queue[slot][1])

    def from_decision(self, sim: Simulator, d: Decision | None) -> int:
        if d is None:
            return WAIT
        ids = [s.job_id for s in sim.window_jobs()]
        if d.job_id in ids:
            slot = ids.index(d.job_id)
        else:  # a running job: its migration slot (ValueError if it has none)
            slot = self.window + sim.migration_candidates(self.moves).index(d.job_id)
        return self.encode(slot, d.gpu, d.option)

    def mask(self, sim: Simulator) -> np.ndarray:
        """int8 mask over all actions, built from the simulator's legality function (a fresh
        array; the envs' and the runner's one mask). GPUs and options beyond the simulator's
        (padding up to ``max_gpus`` and ``n_options``) stay illegal."""
        m = np.zeros(self.n_actions, dtype=np.int8)
        m[WAIT] = 1
        if sim.done:
            return m
        g, n_opt = sim.n_gpus, len(sim.options)
        # (slot, gpu, option) view of the placement actions
        blocks = m[1:].reshape(-1, self.max_gpus, self.n_options)
        for slot, spec in enumerate(sim.window_jobs()):
            blocks[slot, :g, :n_opt] = sim.mask(spec.job_id)
        for k, jid in enumerate(sim.migration_candidates(self.moves)):
            blocks[self.window + k, :g, :n_opt] = sim.migration_mask(jid)
        return m
