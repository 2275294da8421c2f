"""gpu-sharing-gym's evaluation harness and command line (``gsg``).

* :mod:`gpu_sharing_gym.leaderboard`, :mod:`gpu_sharing_gym.backends`: policies x scenarios x seeds, resumable, local
  processes or Ray.
* :mod:`gpu_sharing_gym.report`, :mod:`gpu_sharing_gym.plots`: CSV, Markdown, HTML, plots and TensorBoard of a
  leaderboard.
* :mod:`gpu_sharing_gym.ci`: means over seeds ± 95 % confidence half-widths (Student t), as every report
  prints them.
* :mod:`gpu_sharing_gym.fidelity`: the seed papers' findings as experiments (``gsg reproduce``).
* :mod:`gpu_sharing_gym.bench`: the benchmark suite (``gsg bench``) and ``BENCHMARKS.md``.
* :mod:`gpu_sharing_gym.cli`: ``gsg evaluate | train | leaderboard | calibrate | bench | trace | reproduce``.

Policies are found by name through :mod:`gpu_sharing_env.registry` (entry points), so the
harness imports no policy package to list or build them.
"""
