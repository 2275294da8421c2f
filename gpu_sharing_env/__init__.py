"""gpu-sharing-gym: a Gymnasium environment simulating a heterogeneous GPU cluster that shares
GPUs through time-sharing, MPS and MIG.

Importing the package registers ``GpuSharing-v0``, ``-v1`` and ``-v2`` with Gymnasium (the env module itself is only
imported when the env is made)::

    import gymnasium
    import gpu_sharing_env  # noqa: F401

    env = gymnasium.make("GpuSharing-v0", scenario="default")
"""

import warnings

# (aliased: ``gpu_sharing_env.registry`` is our policy registry module, not Gymnasium's dict)
from gymnasium.envs.registration import register as _register
from gymnasium.envs.registration import registry as _gym_registry

# (first: it decides where the compiled modules load from before any of them is imported)
from gpu_sharing_env import _modes

__version__ = "0.5.0"

#: The modules running compiled in this process (dotted names; empty: pure Python). Which
#: modules are compiled is listed in :mod:`gpu_sharing_env._compile`; ``GSG_PURE_PYTHON=1``
#: runs all of them from their Python sources, with the same results bit for bit.
COMPILED: tuple[str, ...] = _modes.select()

#: The registered env ids and their settings: every id is the one env class
#: (``gpu_sharing_env.envs.gpu_sharing:GpuSharingEnv``) with its interface
#: (``gpu_sharing_env.envs.interfaces``). No max_episode_steps: the simulated horizon ends every
#: episode (see the env docstring). v1: option-agnostic observations (option and job x GPU
#: features), padded layouts; v2: the action picks one of the candidate moves (any queued job,
#: migrations, hold).
_ENTRY_POINT = "gpu_sharing_env.envs.gpu_sharing:GpuSharingEnv"
_ENVS = {
    "GpuSharing-v0": {"interface": "v0"},
    "GpuSharing-v1": {"interface": "v1"},
    "GpuSharing-v2": {"interface": "v2"},
}
for _id, _settings in _ENVS.items():
    if _id not in _gym_registry:
        _register(
            id=_id,
            entry_point=_ENTRY_POINT,
            max_episode_steps=None,
            nondeterministic=False,
            kwargs=_settings,
        )

# v0 and v1 stay supported beside v2 (agents such as ``ppo_default`` and ``ppo`` read their
# observations), so Gymnasium's "out of date, consider upgrading" notice on them is noise.
warnings.filterwarnings("ignore", message=r".*GpuSharing-v[01] is out of date.*")

from gpu_sharing_env.physics.interference import MODEL_VERSION  # noqa: E402
from gpu_sharing_env.workload import WORKLOAD_VERSION  # noqa: E402

__all__ = ["COMPILED", "MODEL_VERSION", "WORKLOAD_VERSION", "__version__"]
