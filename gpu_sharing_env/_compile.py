"""The modules compiled with Cython, in one place (``setup.py`` reads this file; the package
reads it at import to know what to look for).

The hot path is compiled from the same ``.py`` files that run interpreted: Cython's pure-Python
mode. Each listed module stays valid Python (typed with ``@cython.locals`` and friends, which the
``cython`` shim turns into no-ops when interpreted, or with a ``.pxd`` beside it); where no C
compiler or no Cython exists the install still succeeds and these modules run as Python.
``GSG_PURE_PYTHON=1`` forces the Python sources even where compiled modules exist.

Adding a module is one line below (a module of a package whose sources lie elsewhere in the
checkout, ``gpu_sharing_gym.baselines`` in ``baselines/``, needs its package in
``SOURCE_DIRS`` too), then ``make setup`` (or ``python setup.py build_ext
--inplace``). Its results must stay bit-identical to the interpreted source: keep Python
semantics (no ``cdivision``, C types only where Python's would be the same IEEE double or a
value that cannot overflow 64 bits).
"""

#: Dotted names of the compiled modules.
MODULES: tuple[str, ...] = (
    "gpu_sharing_env.fleet.cluster",
    "gpu_sharing_env.physics.interference",
    "gpu_sharing_env.sim.state",
    "gpu_sharing_env.sim.accumulator",
    "gpu_sharing_env.sim.events",
    "gpu_sharing_env.sim.engine",
    "gpu_sharing_env.sim.rates",
    "gpu_sharing_env.sim.ticks",
    "gpu_sharing_env.sim.usage",
    "gpu_sharing_env.sim.speed",
    "gpu_sharing_env.sim.legality",
    "gpu_sharing_env.sim.lifecycle",
    "gpu_sharing_env.sim.jobs",
    "gpu_sharing_env.sim.waiting",
    "gpu_sharing_env.sim.view",
    "gpu_sharing_env.sim.failures",
    "gpu_sharing_env.sim.monitor",
    "gpu_sharing_env.envs.observation",
    "gpu_sharing_env.envs.observation_v1",
    "gpu_sharing_env.envs.candidates",
    "gpu_sharing_env.workload.cart",
    "gpu_sharing_env.workload.job",
    "gpu_sharing_env.workload.predictor",
    "gpu_sharing_env.workload.synthetic",
    "gpu_sharing_env.workload.services",
    "gpu_sharing_gym.baselines.pai",
    # (untyped: compiled, they are not compiled from source at every import; the replay's
    # process imports them all, ~100 kB of source)
    "gpu_sharing_env.workload.loaders._common",
    "gpu_sharing_env.workload.loaders._table",
    "gpu_sharing_env.workload.loaders.alibaba",
    "gpu_sharing_env.workload.loaders.philly",
    "gpu_sharing_env.workload.loaders.helios",
    "gpu_sharing_env.workload.estimates",
    "gpu_sharing_env.sim.online",
    "gpu_sharing_env.sim.build",
    "gpu_sharing_env.sim.codec",
    "gpu_sharing_env.sim.observe",
    "gpu_sharing_env.sim.faults",
    "gpu_sharing_gym.baselines.gandiva",
    "gpu_sharing_gym.baselines.reference",
    "gpu_sharing_gym.baselines.base",
    # (untyped: speed_sjf is the paired reward's reference and the default recipe's hint, so
    # it decides at every training step and ~70 times in each reference curve:
    # docs/notes/2026-12-01-cold-training.md)
    "gpu_sharing_gym.baselines.antman",
    "gpu_sharing_gym.baselines.speed_sjf",
    # (the episode metrics' one typed pass; the replay's other interpreted imports stay so:
    # compiled untyped they cut the start-up's bytecode compile but no time was measured, and
    # they lengthen the build: docs/notes/2026-11-30-replay-start-and-end.md)
    "gpu_sharing_env.evaluation.metrics",
)

#: The packages whose sources sit elsewhere in a source checkout than their dotted path says
#: (``pyproject.toml``'s ``[tool.setuptools.package-dir]``); installed, every module lies at its
#: dotted path.
SOURCE_DIRS: dict[str, str] = {"gpu_sharing_gym.baselines": "baselines"}


def source_stem(name: str, checkout: bool = True) -> str:
    """Listed module ``name``'s path without its suffix, relative to the checkout's root
    (``checkout``: ``baselines/pai`` for ``gpu_sharing_gym.baselines.pai``) or to the
    installed packages' directory (its dotted path)."""
    package, _, leaf = name.rpartition(".")
    if checkout and package in SOURCE_DIRS:
        return f"{SOURCE_DIRS[package]}/{leaf}"
    return name.replace(".", "/")
