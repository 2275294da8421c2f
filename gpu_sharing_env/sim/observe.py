"""Observers: the simulator's public hooks for code that watches an episode.

Outside code never patches or subclasses the engine's private steps to learn what happened
(the placement log, fidelity experiments' extra bookkeeping, TensorBoard charts); it registers
a :class:`SimObserver` with :meth:`Simulator.add_observer` and is called back::

    class Starts(SimObserver):
        def __init__(self) -> None:
            self.n = 0

        def on_start(self, sim, job_id, gpus, option):
            self.n += 1

    sim.add_observer(obs := Starts())

Every hook is a no-op here; override those you need. Hooks are called after the simulator's
state reflects the event (``on_stop`` and ``on_fault``: just before the job leaves its GPUs, so
``sim.jobs[job_id].gpus`` still names them), with ``sim.now`` the event's time. Observers must
not change the simulation (they get the simulator to read, as a scheduler's view would);
anything they do is outside the episode, so an observed episode is bit-identical to an
unobserved one. Observers belong to one simulator object: :meth:`Simulator.copy` leaves them
out, and they stay registered across ``reset`` until :meth:`Simulator.remove_observer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpu_sharing_env.sim.engine import Simulator
    from gpu_sharing_env.sim.faults import FaultCause
    from gpu_sharing_env.sim.state import Status


class SimObserver:
    """Callbacks on what happens in an episode (all no-ops; override what you need)."""

    def on_reset(self, sim: Simulator) -> None:
        """A new episode starts (before its first event)."""

    def on_start(self, sim: Simulator, job_id: int, gpus: list[int], option: int) -> None:
        """A job was placed on ``gpus`` with placement option ``option`` (also after a
        migration, which stops the job on its old GPUs first)."""

    def on_stop(self, sim: Simulator, job_id: int) -> None:
        """A job is about to leave its GPUs: it finished, failed, was evicted, preempted,
        suspended or migrated (``on_finish``/``on_fault``/``on_evict``/``on_suspend`` say which,
        where one applies)."""

    def on_finish(self, sim: Simulator, job_id: int, status: Status) -> None:
        """A job ended (``Status.DONE``) or an online service reached its end of life."""

    def on_fault(self, sim: Simulator, job_id: int, cause: FaultCause, victim: bool) -> None:
        """A fault struck a running job: its own (``victim`` False) or one that propagated to
        it from a co-located client under MPS (``victim`` True)."""

    def on_evict(self, sim: Simulator, job_id: int) -> None:
        """A running offline job is evicted (SysMonitor, or a policy's preemption)."""

    def on_suspend(self, sim: Simulator, job_id: int) -> None:
        """A policy suspends running offline job ``job_id`` (``Decision.suspend``): it keeps
        its progress and is queued again (called before it leaves its GPUs)."""

    def on_repartition(self, sim: Simulator, gpu: int, delay_s: float) -> None:
        """A GPU started reconfiguring (a MIG re-partition or a mode change) for ``delay_s``."""

    def on_tick(self, sim: Simulator, changed: bool) -> None:
        """A load tick ran (services' request rates, latencies, SysMonitor); ``changed``: it
        changed what a scheduler could decide."""


__all__ = ["SimObserver"]
