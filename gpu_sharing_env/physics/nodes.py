"""Node (machine) specifications: what a fleet is made of.

Kept apart from the GPU catalogue (``hardware.py``) so that trace loaders can build fleets from
node lists without touching GPU physics.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: Canonical GPU type names; ``hardware.GPU_TYPES`` has one entry each.
GPU_TYPE_NAMES: tuple[str, ...] = (
    "T4",
    "P100",
    "V100-16GB",
    "V100-32GB",
    "A10",
    "A100-40GB",
    "A100-80GB",
    "H100-80GB",
)


class Interconnect(enum.Enum):
    """How the GPUs of one node talk to each other (gang jobs inside a node)."""

    NVLINK = "nvlink"
    PCIE = "pcie"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine.

    Attributes:
        name: Unique within a fleet (trace serial number or generated).
        gpu_type: A name in ``GPU_TYPE_NAMES``.
        num_gpus: GPUs in the machine (PAI: 2 or 8).
        vcpus: Schedulable vCPUs.
        host_mem_gb: Host memory.
        interconnect: NVLink or PCIe between the node's GPUs.
    """

    name: str
    gpu_type: str
    num_gpus: int
    vcpus: float
    host_mem_gb: float
    interconnect: Interconnect = Interconnect.PCIE

    def __post_init__(self) -> None:
        if self.gpu_type not in GPU_TYPE_NAMES:
            raise ValueError(
                f"gpu_type: {self.gpu_type!r} is not one of {', '.join(GPU_TYPE_NAMES)}"
            )
        if self.num_gpus < 1:
            raise ValueError("num_gpus: must be >= 1")
        if self.vcpus <= 0 or self.host_mem_gb <= 0:
            raise ValueError("vcpus and host_mem_gb: must be > 0")
