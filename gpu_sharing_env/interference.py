"""Speed and interference: how fast each job on a GPU progresses.

One pluggable interface, :class:`SpeedModel`. The simulator asks it, whenever the set of residents
of a GPU (or an online service's load) changes, for each resident's progress rate as a fraction
of that job's *solo, exclusive* speed on the same GPU type; and for solo speeds across GPU types
relative to the reference GPU (V100-16GB).

Implementations: :class:`AnalyticSpeedModel` (the default; closed forms whose coefficients are
calibrated in ``scripts/calibrate.py``, see ``docs/calibration.md``) and
:class:`TableSpeedModel` (measured pairwise slowdowns looked up from a table, falling back to
the analytic model for pairs the table lacks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gpu_sharing_env.modes import SharingMode

#: The GPU all ``work_s`` figures are expressed on.
REFERENCE_GPU = "V100-16GB"


@dataclass(frozen=True, slots=True)
class Resident:
    """What the speed model needs to know about one job resident on a GPU.

    Attributes:
        model: Model class (key of ``gpu_sharing_env.zoo.ZOO``).
        sm_frac: MPS active-thread fraction in (0, 1]; 1.0 outside MPS.
        mig_compute_slices: Compute slices of the job's MIG instance (of 7); 0 outside MIG.
        mig_mem_slices: Memory slices of the job's MIG instance (of 8); 0 outside MIG.
        duty: Fraction of wall time the job keeps the GPU busy when running alone (its solo SM
            activity). For an online service this is its current load-dependent utilisation.
        online: An online (latency-critical) service.
        priority: Time-sharing priority; larger runs first (AntMan / PB-time-sharing).
    """

    model: str
    sm_frac: float = 1.0
    mig_compute_slices: int = 0
    mig_mem_slices: int = 0
    duty: float = 1.0
    online: bool = False
    priority: int = 0


class SpeedModel(Protocol):
    """The interface the simulator uses; implement it to plug in another model."""

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """Exclusive-GPU throughput on ``gpu_type`` relative to the reference GPU (V100 = 1)."""
        ...

    def rates(
        self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]
    ) -> list[float]:
        """Each resident's progress rate as a fraction of its solo exclusive speed on this GPU.

        Covers the SM-share curve under MPS, the MIG profile curve, co-runner interference
        (memory bandwidth / L2 under MPS, turn-taking under time-sharing) and context-switch
        overhead. Values are in (0, 1]; MIG instances do not interfere (or barely).
        """
        ...

    def batch_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        """Solo, exclusive latency of one inference batch on ``gpu_type``."""
        ...
