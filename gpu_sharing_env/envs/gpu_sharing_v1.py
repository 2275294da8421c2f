"""``GpuSharing-v1``'s class name: :class:`~gpu_sharing_env.envs.gpu_sharing.GpuSharingEnv`
with the option-feature interface (:class:`~gpu_sharing_env.envs.interfaces.WindowFeatures`)."""

from __future__ import annotations

from typing import Any

from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv


class GpuSharingEnvV1(GpuSharingEnv):
    """``GpuSharingEnv(..., interface="v1")``: what ``gymnasium.make("GpuSharing-v1")`` builds,
    under its own name (``max_gpus``, ``max_window``, ``max_options``, ``migration_slots``,
    ``job_history``: :class:`~gpu_sharing_env.envs.interfaces.WindowFeatures`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, interface="v1", **kwargs)


__all__ = ["GpuSharingEnvV1"]
