"""The Gymnasium adapter: the env (one class for every version), its interfaces (action layout,
mask and observation per version), rewards, rendering, conformance."""

from gpu_sharing_env.envs.gpu_sharing import GpuSharingEnv
from gpu_sharing_env.envs.interfaces import INTERFACES
from gpu_sharing_env.envs.rewards import REWARDS

__all__ = ["INTERFACES", "REWARDS", "GpuSharingEnv"]
