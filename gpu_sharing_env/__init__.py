"""gpu-sharing-gym: a Gymnasium environment simulating a heterogeneous GPU cluster that shares
GPUs through time-sharing, MPS and MIG.

Importing the package registers ``GpuSharing-v0`` with Gymnasium (the env module itself is only
imported when the env is made)::

    import gymnasium
    import gpu_sharing_env  # noqa: F401

    env = gymnasium.make("GpuSharing-v0", scenario="default")
"""

from gymnasium.envs.registration import register, registry

__version__ = "0.1.0"

if "GpuSharing-v0" not in registry:
    # No max_episode_steps: the simulated horizon ends every episode (see the env docstring).
    register(
        id="GpuSharing-v0",
        entry_point="gpu_sharing_env.envs.gpu_sharing:GpuSharingEnv",
        max_episode_steps=None,
        nondeterministic=False,
    )

__all__ = ["__version__"]
