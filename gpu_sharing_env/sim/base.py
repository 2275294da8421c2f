"""The state every part of :class:`~gpu_sharing_env.sim.engine.Simulator` shares, declared once.

``Simulator`` is one class assembled from mixins (``engine.py``: public API and event loop;
``lifecycle.py``: arrivals, starts, stops, faults, migration; ``rates.py``: per-GPU sharing
fractions and job rates; ``ticks.py``: online load ticks, SLO accounting, SysMonitor, time
integration). :class:`SimulatorBase` declares, for type checkers only, the attributes they
share (assigned in ``Simulator.__init__`` and ``reset``) and the methods one mixin calls on
another. It defines nothing at run time: no class attributes, no extra lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_sharing_env.cluster import Cluster, PlacementOption
from gpu_sharing_env.config import MechanismConfig, ScenarioConfig
from gpu_sharing_env.interference import SpeedModel
from gpu_sharing_env.metrics import Accumulator
from gpu_sharing_env.sim.events import EventQueue
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.online import MonitorThresholds
from gpu_sharing_env.sim.state import JobState
from gpu_sharing_env.workload.job import JobSpec
from gpu_sharing_env.workload.predictor import OnlinePredictor

WorkloadFn = Callable[[np.random.Generator], list[JobSpec]]


class SimulatorBase:
    """Attribute and cross-mixin method declarations of ``Simulator`` (see the module doc)."""

    # ---- set in ``__init__`` (static for the simulator's life, but ``mechanisms``)
    cfg: ScenarioConfig
    cluster: Cluster
    options: tuple[PlacementOption, ...]
    workload: WorkloadFn
    mechanisms: MechanismConfig
    horizon_s: float
    thresholds: MonitorThresholds
    window: int
    _node_of: list[int]
    _type_of: list[str]
    _node_gpus: list[range]
    _node_pcie: list[bool]
    _node_vcpus: list[float]
    _mem_cap: list[float]
    _n_gpus_f: float
    _opt_share: list[float]
    _fit_count: dict[tuple[tuple[str, ...], float], int]
    _fault_w: np.ndarray
    _fault_rate_per_s: float

    # ---- the speed model and its memos (set by the ``speed`` setter)
    _speed: SpeedModel
    _rates_cache: dict[tuple[Any, ...], list[float]]
    _solo_cache: dict[tuple[str, str], float]
    _batch_ms: dict[tuple[str, int, int], float]
    _terms_cache: dict[tuple[Any, ...], list[tuple[float, float]]]

    # ---- episode state (set in ``reset``)
    done: bool
    now: float
    n_events: int
    n_service_ticks: int
    rng_fault: np.random.Generator
    rng_noise: np.random.Generator
    jobs: dict[int, JobState]
    _arrivals: list[JobSpec]
    _next_arrival: int
    queue: list[tuple[float, int]]
    events: EventQueue
    acc: Accumulator
    _g_util: np.ndarray
    _g_vals: list[tuple[float, ...]]
    _sums: list[float]
    _online_ids: list[int]
    health: np.ndarray
    _node_factor: list[float]
    _dirty: set[int]
    _fr_mech: MechanismConfig
    _noise_buf: list[float]
    _noise_i: int
    _online_arrived: list[JobState]
    _frag_cv: int
    _frag_qv: int
    _status_version: int
    _live: list[JobState]
    _live_c: list[tuple[Any, ...]]
    _live_version: int
    _queue_version: int
    _queue_log: list[int]
    _window_order: str
    _decision_scope: str  # (``set_decision_scope``)
    _scope_n: int  # how many jobs from the queue's head a decision may place
    predictor: OnlinePredictor | None
    _frag_val: float
    _offline_total: int
    _offline_left: int
    _in_system: int
    _mask_cache: dict[int, tuple[int, np.ndarray, bool]]
    _sig_masks: dict[tuple[Any, ...], tuple[int, np.ndarray, bool]]
    _sig_version: int
    _sig_ok: dict[tuple[Any, ...], bool]
    _queue_sigs: dict[tuple[Any, ...], list[Any]]
    _queue_front: list[tuple[tuple[Any, ...], JobSpec]] | None
    _view_cache: dict[int, tuple[Any, ...]]
    _job_watchers: list[set[int]]
    timeseries: list[tuple[float, float, float, float, float, float]]
    _observers: list[SimObserver]

    if TYPE_CHECKING:
        # Defined by ``engine.Simulator``.
        @property
        def speed(self) -> SpeedModel: ...
        @property
        def n_gpus(self) -> int: ...
        def _queue_entry(self, st: JobState) -> tuple[Any, int]: ...

        # Defined by ``rates._Rates``.
        def _accrue(self, st: JobState) -> None: ...
        def _residents(self, g: int) -> list[JobState]: ...
        def _refresh(self, gpus: Sequence[int]) -> None: ...
        def _solo_batch_ms(self, st: JobState) -> float: ...
        def _gated(self, g: int, res: Sequence[JobState]) -> list[bool]: ...
        def _gpu_fractions(self, g: int, res: list[JobState]) -> None: ...

        # Defined by ``ticks._Ticks``.
        def _update_load(self, st: JobState) -> None: ...

        # Defined by ``lifecycle._Lifecycle``.
        def evict(self, job_id: int) -> None: ...
