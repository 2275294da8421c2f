"""Sharing modes: how the jobs on one GPU share it."""

from __future__ import annotations

import enum


class SharingMode(enum.IntEnum):
    """A GPU's sharing mode is part of its state; changing it has a cost (see ``sim.engine``).

    EXCLUSIVE: one job owns the GPU.
    TIME_SHARING: contexts take turns (Gandiva, AntMan); optional priority for online work.
    MPS: spatial sharing with per-client SM limits (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE).
    MIG: hardware-isolated instances in NVIDIA's legal layouts (A100/H100 only).
    """

    EXCLUSIVE = 0
    TIME_SHARING = 1
    MPS = 2
    MIG = 3
