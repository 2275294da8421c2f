"""Benchmarks: the suite (:mod:`gpu_sharing_gym.bench.suite`), one replay (:mod:`gpu_sharing_gym.bench.replay`) and the
``BENCHMARKS.md`` renderer (:mod:`gpu_sharing_gym.bench.markdown`)."""
