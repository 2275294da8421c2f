"""``GpuSharing-v2``'s class name: :class:`~gpu_sharing_env.envs.gpu_sharing.GpuSharingEnv`
with the candidate-move interface (:class:`~gpu_sharing_env.envs.interfaces.CandidateMoves`)."""

from __future__ import annotations

from typing import Any

from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.interfaces import (
    DECISION_SCOPES,
    DEFAULT_MAX_CANDIDATES,
    GLOBAL_FEATURES_V2,
)


class GpuSharingEnvV2(GpuSharingEnv):
    """``GpuSharingEnv(..., interface="v2")``: what ``gymnasium.make("GpuSharing-v2")`` builds,
    under its own name (``max_candidates``, ``decision_scope``, ``mechanisms``:
    :class:`~gpu_sharing_env.envs.interfaces.CandidateMoves`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, interface="v2", **kwargs)


__all__ = ["DECISION_SCOPES", "DEFAULT_MAX_CANDIDATES", "GLOBAL_FEATURES_V2", "GpuSharingEnvV2"]
