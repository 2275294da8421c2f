"""The Gymnasium adapter: the env, observation encoding, rewards, rendering, conformance."""

from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.rewards import REWARDS

__all__ = ["REWARDS", "GpuSharingEnv"]
