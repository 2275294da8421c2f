"""Benchmarks: the suite (:mod:`gsg.bench.suite`), one replay (:mod:`gsg.bench.replay`) and the
``BENCHMARKS.md`` renderer (:mod:`gsg.bench.markdown`)."""
