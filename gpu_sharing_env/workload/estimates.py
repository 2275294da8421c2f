"""Duration estimates with configurable error: what schedulers see instead of ``work_s``.

PAI's predictor (Weng et al., NSDI'22 Sec. 5.2): most tasks recur, and a recurring task's run
time is predictable from earlier instances of its group (PAI fits a CART regressor on user,
group tag and resource request; the group tag matters most). We model the idea, not the CART:

- a job in a recurring group (``group != ""``) with earlier members (submitted before it)
  gets the mean ``work_s`` of those members times ``exp(N(0, group_sigma))`` noise, where
  ``group_sigma`` defaults to ``sigma / 3`` (the group tag cuts the error, Fig. 12);
- every other job (first instance, no group, or ``use_groups=False``) gets its own ``work_s``
  times ``exp(N(0, sigma))`` (a median-unbiased lognormal error).

"Earlier members" uses their true run times, as a history of completed runs would; jobs are
taken in submission order (``job_id`` breaks ties). Online services keep ``est_work_s`` as is
(their lifetime is known). ``sigma == 0`` means perfect estimates (``est_work_s == work_s``);
for ``sigma > 0`` an estimate never equals the truth exactly.
"""

from __future__ import annotations

import math

import numpy as np

from gpu_sharing_env.workload.job import JobSpec


def attach_estimates(
    jobs: list[JobSpec],
    rng: np.random.Generator,
    sigma: float,
    use_groups: bool = True,
    *,
    group_sigma: float | None = None,
) -> list[JobSpec]:
    """Copies of ``jobs`` (same order) with ``est_work_s`` set.

    Args:
        jobs: Jobs in any order.
        rng: Source of the noise (one normal draw per job, in list order, always).
        sigma: Lognormal sigma of the error without group history (>= 0).
        use_groups: Use earlier members of a job's recurring group (PAI's predictor).
        group_sigma: Sigma of the error with group history; default ``sigma / 3``.

    Raises:
        ValueError: A sigma is negative or not finite.
    """
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma: must be finite and >= 0 (got {sigma})")
    g_sigma = sigma / 3.0 if group_sigma is None else group_sigma
    if not (math.isfinite(g_sigma) and g_sigma >= 0):
        raise ValueError(f"group_sigma: must be finite and >= 0 (got {group_sigma})")
    z = rng.standard_normal(len(jobs))
    if sigma == 0:
        return [j if j.online else j.with_estimate(j.work_s) for j in jobs]
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, jobs[i].job_id))
    history: dict[str, tuple[float, int]] = {}  # group -> (sum of work_s, count)
    est = [0.0] * len(jobs)
    for i in order:
        j = jobs[i]
        if j.online:
            est[i] = j.est_work_s
            continue
        past = history.get(j.group) if use_groups and j.group else None
        if past is not None:
            est[i] = past[0] / past[1] * math.exp(g_sigma * float(z[i]))
        else:
            est[i] = j.work_s * math.exp(sigma * float(z[i]))
        if est[i] == j.work_s:  # a zero draw (or a group mean equal to the truth): nudge
            est[i] = math.nextafter(j.work_s, math.inf)
        if j.group:
            s, c = history.get(j.group, (0.0, 0))
            history[j.group] = (s + j.work_s, c + 1)
    # ``JobSpec.with_estimate``: ``dataclasses.replace(j, est_work_s=...)``, faster
    return [j if j.online else j.with_estimate(max(est[i], 1e-9)) for i, j in enumerate(jobs)]
