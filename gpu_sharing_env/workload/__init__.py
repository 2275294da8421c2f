"""Workloads: the job schema, online services, synthetic generators and trace loaders."""

from gpu_sharing_env.workload.job import JobKind, JobSpec, ServiceSpec

#: Version of the workload model (generators and duration estimates); results carry it beside
#: ``interference.MODEL_VERSION``. 2: recurring groups (periodic, bursty, one-off) with a
#: pre-episode history, estimates from PAI's CART fitted online on finished runs (issue 50).
#: 3: the cluster's own past (``past: shared``): the groups and the history drawn once per
#: scenario, an episode's seed draws only its future (issue 51; ``past: per_episode`` is 2's).
#: 4: the past knows the fleet: a recurring group no empty fleet could run is redrawn (a past
#: without one is version 3's, bit for bit).
WORKLOAD_VERSION = 4

__all__ = ["WORKLOAD_VERSION", "JobKind", "JobSpec", "ServiceSpec"]
