"""gpu-sharing-gym's evaluation harness and command line (``gsg``).

* :mod:`gsg.leaderboard`, :mod:`gsg.backends`: policies x scenarios x seeds, resumable, local
  processes or Ray.
* :mod:`gsg.report`, :mod:`gsg.plots`: CSV, Markdown, HTML, plots and TensorBoard of a
  leaderboard.
* :mod:`gsg.ci`: means over seeds ± 95 % confidence half-widths (Student t), as every report
  prints them.
* :mod:`gsg.fidelity`: the seed papers' findings as experiments (``gsg reproduce``).
* :mod:`gsg.bench`: the benchmark suite (``gsg bench``) and ``BENCHMARKS.md``.
* :mod:`gsg.cli`: ``gsg evaluate | train | leaderboard | calibrate | bench | trace | reproduce``.

Policies are found by name through :mod:`gpu_sharing_env.registry` (entry points), so the
harness imports no policy package to list or build them.
"""
