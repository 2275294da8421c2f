"""Workloads: the job schema, online services, synthetic generators and trace loaders."""

from gpu_sharing_env.workload.job import JobKind, JobSpec, ServiceSpec

#: Version of the workload model (generators and duration estimates); results carry it beside
#: ``interference.MODEL_VERSION``. 2: recurring groups (periodic, bursty, one-off) with a
#: pre-episode history, estimates from PAI's CART fitted online on finished runs (issue 50).
WORKLOAD_VERSION = 2

__all__ = ["WORKLOAD_VERSION", "JobKind", "JobSpec", "ServiceSpec"]
