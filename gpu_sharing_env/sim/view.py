"""Read-only snapshots for policies: what a real scheduler could see.

A :class:`ClusterView` exposes the queue (submitted fields and *estimates*, never the true
duration or true memory peak), the GPUs' sharing state, residents and their observable progress,
and online services' observed load and latency. Arrays are read-only views (no copies on the hot
path). Policies that need hidden truth must call :meth:`ClusterView.oracle_spec` and declare
themselves oracles (they are marked on the leaderboard).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpu_sharing_env.cluster import MigInstance, PlacementOption
from gpu_sharing_env.hardware import GpuType
from gpu_sharing_env.interference import Resident
from gpu_sharing_env.modes import SharingMode
from gpu_sharing_env.sim.codec import ActionCodec
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.workload.job import JobKind, JobSpec, ServiceSpec


@dataclass(frozen=True, slots=True)
class JobView:
    """A job as a scheduler sees it (no ground truth)."""

    job_id: int
    kind: JobKind
    model: str
    submit_s: float
    num_gpus: int
    gpu_frac: float
    mem_gb: float
    cpu_cores: float
    est_work_s: float
    gpu_types: tuple[str, ...]
    priority: int
    group: str
    service: ServiceSpec | None
    status: Status
    gpus: tuple[int, ...]
    option: int
    work_done: float
    attempts: int
    wait_s: float
    rps: float
    p99_ms: float

    @property
    def online(self) -> bool:
        return self.kind is JobKind.ONLINE

    @property
    def est_remaining_s(self) -> float:
        """Estimated remaining reference-GPU seconds (estimate minus observed progress)."""
        return max(0.0, self.est_work_s - self.work_done)


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class ClusterView:
    """A read-only snapshot of the simulator for policies (valid until the next step)."""

    def __init__(self, sim: Simulator, codec: ActionCodec | None = None) -> None:
        self._sim = sim
        self.codec = codec
        #: job id -> (cluster version, read-only mask): policies ask for a mask per GPU.
        self._masks: dict[int, tuple[int, np.ndarray]] = {}
        c = sim.cluster
        self.now_s = sim.now
        self.n_gpus = c.n_gpus
        self.options: tuple[PlacementOption, ...] = sim.options
        self.gpu_types: tuple[GpuType, ...] = c.gpu_type_of
        self.type_name: tuple[str, ...] = c.type_name_of
        #: The fleet's GPU type names (sorted) and each GPU's index into them (static).
        self.type_names: tuple[str, ...] = c.type_names
        self.type_idx = _ro(c.type_idx)
        self.node_of = _ro(c.node_of)
        self.mode = _ro(c.mode)
        self.n_res = _ro(c.n_res)
        self.mem_cap_gb = _ro(c.mem_cap)
        self.mem_used_gb = _ro(c.mem_decl)  # declared (what a scheduler's accounting sees)
        #: Sum of the residents' requested GPU fractions (``JobView.gpu_frac``) per GPU.
        self.frac_used = _ro(c.frac_decl)
        self.sm_used_pct = _ro(c.sm_used)
        self.online_count = _ro(c.online_count)
        self.healthy = _ro(c.healthy)
        self.ready = _ro(c.ready)
        self.util = _ro(sim._g_util)  # observed GPU utilisation (nvidia-smi style)
        self.max_residents = c.sharing.max_residents
        self.slo_target = sim.cfg.slo_target

    def job(self, job_id: int) -> JobView:
        st = self._sim.jobs[job_id]
        status = st.status
        wait_s = self.now_s - st.enqueue_t if status is Status.QUEUED else 0.0
        # Every field that can change, with the state object itself (ids repeat across
        # episodes): an unchanged job gets the JobView built last time (they are immutable).
        key = (status, st.run_id, st.work_done, st.attempts, st.rps, st.p99_ms, wait_s)
        cache = self._sim._view_cache
        hit = cache.get(job_id)
        if hit is not None and hit[0] is st and hit[1] == key:
            return hit[2]
        s = st.spec
        jv = JobView(
            job_id=s.job_id,
            kind=s.kind,
            model=s.model,
            submit_s=s.submit_s,
            num_gpus=s.num_gpus,
            gpu_frac=s.gpu_frac,
            mem_gb=s.mem_gb,
            cpu_cores=s.cpu_cores,
            est_work_s=s.est_work_s,
            gpu_types=s.gpu_types,
            priority=s.priority,
            group=s.group,
            service=s.service,
            status=status,
            gpus=tuple(st.gpus),
            option=st.option,
            work_done=st.work_done,
            attempts=st.attempts,
            wait_s=wait_s,
            rps=st.rps,
            p99_ms=st.p99_ms,
        )
        cache[job_id] = (st, key, jv)
        return jv

    @property
    def window(self) -> list[JobView]:
        """The queued jobs a decision may place, in queue order."""
        return [self.job(s.job_id) for s in self._sim.window_jobs()]

    @property
    def queue(self) -> list[JobView]:
        return [self.job(s.job_id) for s in self._sim.queued_jobs()]

    def residents(self, gpu: int) -> list[JobView]:
        return [self.job(j) for j in self._sim.cluster.residents[gpu]]

    def resident_ids(self, gpu: int) -> tuple[int, ...]:
        """The job ids of ``residents(gpu)`` (no JobViews built)."""
        return tuple(self._sim.cluster.residents[gpu])

    def mig_instances(self, gpu: int) -> tuple[MigInstance, ...]:
        return tuple(
            MigInstance(i.profile, i.start, i.mask, i.compute, i.job_id)
            for i in self._sim.cluster.mig_instances[gpu]
        )

    def mask(self, job_id: int) -> np.ndarray:
        """Legal (gpu, option) placements of a queued job (read-only)."""
        version = self._sim.cluster.version
        hit = self._masks.get(job_id)
        if hit is None or hit[0] != version:
            hit = self._masks[job_id] = (version, _ro(self._sim.mask(job_id)))
        return hit[1]

    def solo_speed(self, model: str, gpu: int) -> float:
        """Profiled solo speed of a model class on a GPU (relative to V100): public profiles."""
        return self._sim._solo_speed(model, self.type_name[gpu])  # memoised speed.solo_speed

    def profile(
        self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident], noise: float = 0.03
    ) -> list[float]:
        """An offline profiling run: co-locate ``residents`` and measure their normalised speeds.

        This is what the papers' predictors are trained on (MuxFlow, GPUPool, GPULet profile
        pairs before scheduling). Measurements carry multiplicative noise (default 3%),
        deterministic per input, so predictors see data, not the model's formulas.
        """
        rates = self._sim.speed.rates(gpu_type, mode, residents)
        rng = np.random.default_rng(zlib.crc32(repr((gpu_type, int(mode), residents)).encode()))
        return [min(1.0, max(1e-3, r * (1.0 + noise * rng.standard_normal()))) for r in rates]

    def profile_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        """Profiled solo latency of one inference batch (GPULet's offline profiles)."""
        return self._sim.speed.batch_latency_ms(model, gpu_type, batch_size)

    def oracle_spec(self, job_id: int) -> JobSpec:
        """The true job spec (duration, true memory). Only for policies marked ``oracle``."""
        return self._sim.jobs[job_id].spec
