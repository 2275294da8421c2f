"""Workloads: the job schema, online services, synthetic generators and trace loaders."""

from gpu_sharing_env.workload.job import JobKind, JobSpec, ServiceSpec

__all__ = ["JobKind", "JobSpec", "ServiceSpec"]
