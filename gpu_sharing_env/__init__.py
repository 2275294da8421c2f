"""gpu-sharing-gym: a Gymnasium environment simulating a heterogeneous GPU cluster that shares
GPUs through time-sharing, MPS and MIG.

Importing the package registers ``GpuSharing-v0``, ``-v1``, ``-v2`` and ``-v3`` with Gymnasium (the env module itself is only
imported when the env is made)::

    import gymnasium
    import gpu_sharing_env  # noqa: F401

    env = gymnasium.make("GpuSharing-v0", scenario="default")

When Gymnasium is not imported yet, the ids are registered as soon as it is (in either order
of the two imports): a process that never makes an env (``gsg evaluate``, a replay) does not
import Gymnasium (~30 ms).
"""

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

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
#: migrations, hold); v3: v2's moves with kept, read-only observation arrays and one mask.
_ENTRY_POINT = "gpu_sharing_env.envs.gpu_sharing:GpuSharingEnv"
_ENVS = {
    "GpuSharing-v0": {"interface": "v0"},
    "GpuSharing-v1": {"interface": "v1"},
    "GpuSharing-v2": {"interface": "v2"},
    "GpuSharing-v3": {"interface": "v3"},
}
#: Ids made without Gymnasium's passive checker: v3's observations are kept arrays overwritten
#: in place (``KeptCandidateMoves``), which the checker would warn of at every make.
_UNCHECKED = frozenset({"GpuSharing-v3"})


def _register_envs() -> None:
    """Register :data:`_ENVS` with Gymnasium (those not registered yet)."""
    # (aliased: ``gpu_sharing_env.registry`` is our policy registry module, not Gymnasium's dict)
    from gymnasium.envs.registration import register as _register
    from gymnasium.envs.registration import registry as _gym_registry

    for env_id, settings in _ENVS.items():
        if env_id not in _gym_registry:
            _register(
                id=env_id,
                entry_point=_ENTRY_POINT,
                max_episode_steps=None,
                nondeterministic=False,
                disable_env_checker=env_id in _UNCHECKED,
                kwargs=settings,
            )
    # v0, v1 and v2 stay supported beside v3 (agents such as ``ppo_default`` and ``ppo`` read
    # their observations; v2's are fresh arrays a step), so Gymnasium's "out of date, consider
    # upgrading" notice on them is noise.
    # (After Gymnasium's import: its own warning filters go before those that exist then.)
    warnings.filterwarnings("ignore", message=r".*GpuSharing-v[012] is out of date.*")


class _RegisterOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``gymnasium`` as the other finders do and registers the envs once it has run
    (then leaves ``sys.meta_path``)."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "gymnasium":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                self._inner = spec.loader
                spec.loader = self
                return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[union-attr]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)  # type: ignore[union-attr]
        _register_envs()


if "gymnasium" in sys.modules:
    _register_envs()
else:
    sys.meta_path.insert(0, _RegisterOnImport())


from gpu_sharing_env.physics.interference import MODEL_VERSION  # noqa: E402
from gpu_sharing_env.workload import WORKLOAD_VERSION  # noqa: E402

__all__ = ["COMPILED", "MODEL_VERSION", "WORKLOAD_VERSION", "__version__"]
