"""The simulator's model constants, and the hot path's precomputed aliases of enum members.

Shared by :mod:`~gpu_sharing_env.sim.engine` (which re-exports the public ones) and the modules
holding the rest of :class:`~gpu_sharing_env.sim.engine.Simulator` (``lifecycle``, ``rates``,
``ticks``).
"""

from __future__ import annotations

import math

from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.events import EventKind
from gpu_sharing_env.sim.online import Health
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.workload.job import JobKind

#: Gang jobs spanning nodes synchronise over the network (assumption: 15% slower than one
#: NVLink node; Sia's placement profiles show multi-node step times 10-30% above single-node).
CROSS_NODE_FACTOR = 0.85
#: Gang jobs inside a PCIe node (assumption: 5% slower than NVLink).
PCIE_GANG_FACTOR = 0.95
#: Orders of the queue (``Simulator.window_order``): submission order, or commitments first and
#: then shortest predicted duration first.
WINDOW_ORDERS = ("fifo", "predicted")
#: Resolution of an online service's utilisation as seen by co-runners (2 %).
DUTY_STEP = 0.02
#: Smoothness of the online load noise (AR(1) coefficient per tick): smooth over minutes.
NOISE_AR = 0.9
#: Innovation scale of the AR(1) noise (stationary variance 1).
_NOISE_SCALE = math.sqrt(1 - NOISE_AR**2)
#: Standard normals are drawn from ``rng_noise`` this many at a time (the same stream, in the
#: same order, as one draw per use: numpy's generators fill arrays element by element).
_NOISE_CHUNK = 512
#: Enum members read on the hot path: an enum class's attribute read (``Status.DONE``) goes
#: through ``EnumType.__getattr__``'s hook in Python 3.11 (~800 instructions), a module
#: global's is a dictionary hit.
_RUNNING = Status.RUNNING
_QUEUED = Status.QUEUED
_DONE = Status.DONE
_FAILED = Status.FAILED
#: ``spec.online`` is ``spec.kind is _ONLINE``: the hot paths read the field (a property call
#: is a Python frame per read).
_ONLINE = JobKind.ONLINE
_MODES = tuple(SharingMode)  # indexed by value
_MIG = SharingMode.MIG
_MPS = SharingMode.MPS
#: Event kinds as plain ints (``EventQueue.pop_raw``): no enum construction per event.
_K_COMPLETE = int(EventKind.COMPLETE)
_K_END = int(EventKind.END)
_K_FAULT = int(EventKind.FAULT)
_K_OOM = int(EventKind.OOM)
_K_READY = int(EventKind.READY)
_K_TICK = int(EventKind.TICK)
_K_ARRIVAL = int(EventKind.ARRIVAL)
assert all(m.value == i for i, m in enumerate(_MODES))
_HEALTHY = int(Health.HEALTHY)
