"""The episode's running sums (:class:`Accumulator`): what the simulator adds up as the episode
unfolds and :func:`~gpu_sharing_env.evaluation.metrics.compute_metrics` turns into metrics.

Compiled (``gpu_sharing_env/_compile.py``), :class:`Accumulator` is an extension type declared
by ``accumulator.pxd``: the nine time integrals that :meth:`FleetUsage.integrate
<gpu_sharing_env.sim.usage.FleetUsage.integrate>` adds to at every instant are C doubles (a
Python float and a C double hold the same IEEE value; they are floats from the start and only
ever have floats added), so that method adds them with C stores instead of nine attribute reads
and writes through the type's dictionary; the other fields stay Python objects (a counter stays
an ``int``). Interpreted, it is a plain class with these ``__slots__``. Every field reads and
writes as an attribute either way (``sim.acc.in_system_s``): the rewards, the metrics and the
tests read it as a record; :data:`FIELDS` names its fields.
"""

from __future__ import annotations


class Accumulator:
    """Running sums the simulator updates as the episode unfolds."""

    __slots__ = (  # noqa: RUF023  (the record's order: FIELDS, the repr)
        # time integrals (unit·seconds)
        "util_s",
        "sm_s",
        "mem_s",
        "busy_gpu_s",
        "stp_s",
        "oversold_s",
        "online_gpu_s",
        "in_system_s",  # offline jobs in the system (queued or running) x time
        "elapsed_s",
        # frag samples (GPU units), taken at ticks
        "frag_sum",
        "frag_samples",
        # online request accounting
        "requests",
        "requests_ok",
        "latency_weighted_ms",
        "p99_weighted_ms",
        "slowdown_weighted",
        # faults and operations
        "errors_total",
        "errors_propagated",
        "errors_by_cause",
        "gpu_hours_lost",
        "evictions",
        "suspensions",  # a policy's suspensions (``Decision.suspend``)
        "mig_reconfigs",
        "migrations",
        "decisions",
    )

    def __init__(self) -> None:
        self.util_s: float = 0.0
        self.sm_s: float = 0.0
        self.mem_s: float = 0.0
        self.busy_gpu_s: float = 0.0
        self.stp_s: float = 0.0
        self.oversold_s: float = 0.0
        self.online_gpu_s: float = 0.0
        self.in_system_s: float = 0.0
        self.elapsed_s: float = 0.0
        self.frag_sum: float = 0.0
        self.frag_samples: int = 0
        self.requests: float = 0.0
        self.requests_ok: float = 0.0
        self.latency_weighted_ms: float = 0.0
        self.p99_weighted_ms: float = 0.0
        self.slowdown_weighted: float = 0.0
        self.errors_total: int = 0
        self.errors_propagated: int = 0
        self.errors_by_cause: dict[str, int] = {}
        self.gpu_hours_lost: float = 0.0
        self.evictions: int = 0
        self.suspensions: int = 0
        self.mig_reconfigs: int = 0
        self.migrations: int = 0
        self.decisions: int = 0

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in FIELDS)
        return f"Accumulator({fields})"


#: The fields of :class:`Accumulator`, in order (its ``__slots__``; compiled, the extension
#: type has no instance dictionary for ``vars`` to read).
FIELDS: tuple[str, ...] = Accumulator.__slots__
