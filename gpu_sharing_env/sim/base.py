"""Types shared by the simulator's modules.

(Until issue 51's split this module declared the attributes of one ``Simulator`` assembled from
mixins; each component now declares its own state in its ``__slots__``: see
:mod:`gpu_sharing_env.sim.engine`.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpu_sharing_env.workload.job import JobSpec

#: A workload: called at every ``Simulator.reset`` with a seeded generator; returns the jobs.
WorkloadFn = Callable[[np.random.Generator], list[JobSpec]]
