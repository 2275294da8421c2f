"""The speed model and its memos (a component of :class:`~gpu_sharing_env.sim.engine.Simulator`).

:class:`SpeedMemo` owns the speed/interference model (``interference.SpeedModel``) the simulator
was built with and the memo tables of its pure answers: per-GPU rates of a set of residents,
solo speeds, solo batch latencies and the latency terms of online services. The model never
changes for a simulator's life, so neither does any entry (the tables are capped, not
invalidated).
"""

from __future__ import annotations

from typing import Any

try:  # compiled (gpu_sharing_env._compile): C calls below; interpreted: no-ops
    import cython
except ModuleNotFoundError:
    from gpu_sharing_env import _cython as cython  # type: ignore[no-redef]

from gpu_sharing_env.fleet.cluster import Cluster
from gpu_sharing_env.physics.interference import AnalyticSpeedModel, Resident, SpeedModel
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.state import JobState

#: Entries a memo table keeps before it is emptied (a replay of a big fleet meets many keys).
MEMO_CAP = 65_536

# How the frozen dataclass ``Resident`` writes its fields (its generated ``__init__``):
# ``object.__setattr__``; compiled, the C function behind it, called without the slot wrapper
# and its argument tuple (as ``engine.Decision.__init__``).
if cython.compiled:
    from cython.cimports.cpython.object import PyObject_GenericSetAttr as _setattr
else:
    _setattr = object.__setattr__


def _new_resident(k: tuple[Any, ...]) -> Resident:
    """``Resident(*k)`` for a resident key of ``Rates.gpu_fractions`` (eight fields, a ninth
    with gpulets): compiled, the dataclass's ``__init__`` written out as C calls (the same
    fields, stored as the generated one stores them; ~1 k instructions where the generated
    bytecode, which runs interpreted, takes ~14 k); interpreted, the constructor itself."""
    if not cython.compiled or not 8 <= len(k) <= 9:
        return Resident(*k)
    r = object.__new__(Resident)
    _setattr(r, "model", k[0])
    _setattr(r, "sm_frac", k[1])
    _setattr(r, "mig_compute_slices", k[2])
    _setattr(r, "mig_mem_slices", k[3])
    _setattr(r, "duty", k[4])
    _setattr(r, "online", k[5])
    _setattr(r, "priority", k[6])
    _setattr(r, "batch", k[7])
    _setattr(r, "gpulet", k[8] if len(k) > 8 else -1)
    return r


class SpeedMemo:
    """The speed model and its memoised answers."""

    __slots__ = (
        "_fresh",
        "_residents",
        "_type_idx",
        "_type_names",
        "batch_ms",
        "has_terms",
        "model",
        "rates_cache",
        "solo_cache",
        "terms_cache",
    )

    def __init__(self, model: SpeedModel, cluster: Cluster) -> None:
        #: The speed/interference model (fixed for the simulator's life).
        self.model = model
        # the fleet's GPU types (static): index per GPU, name per index
        self._type_idx = cluster.type_idx
        self._type_names = cluster.type_names
        #: ``rates`` per (gpu_type, mode, *resident keys); read inline on the hot path.
        self.rates_cache: dict[tuple[Any, ...], list[float]] = {}
        #: ``solo_speed`` per (model, gpu_type).
        self.solo_cache: dict[tuple[str, str], float] = {}
        #: Solo batch latency per (model, gpu type index, batch size).
        self.batch_ms: dict[tuple[str, int, int], float] = {}
        #: ``latency_terms`` per (gpu_type, mode, *resident keys).
        self.terms_cache: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
        #: Whether the model has ``latency_terms`` (else the terms are zero).
        self.has_terms = hasattr(model, "latency_terms")
        #: ``Resident`` per resident key (frozen: one object serves every set it is in; its
        #: construction was ~40 % of a miss).
        self._residents: dict[tuple[Any, ...], Resident] = {}
        #: What a miss of :attr:`rates_cache` asks: the analytic model's ``fresh_rates`` (its
        #: answer without the model's own memo, which a miss here would only fill: the same
        #: values), else the model's ``rates``.
        self._fresh = (
            model.fresh_rates  # type: ignore[attr-defined]
            if type(model).rates is AnalyticSpeedModel.rates and hasattr(model, "fresh_rates")
            else model.rates
        )

    def _resident_list(self, keys: list[tuple[Any, ...]]) -> list[Resident]:
        """The ``Resident`` of each key (memoised)."""
        made = self._residents
        out = []
        for k in keys:
            r = made.get(k)
            if r is None:
                if len(made) >= MEMO_CAP:
                    made.clear()
                r = made[k] = _new_resident(k)
            out.append(r)
        return out

    def rates(self, gpu_type: str, mode: SharingMode, keys: list[tuple[Any, ...]]) -> list[float]:
        """``model.rates`` for residents given as field tuples (memoised: a pure function)."""
        key = (gpu_type, mode, *keys)
        hit = self.rates_cache.get(key)
        if hit is None:
            hit = self._fresh(gpu_type, mode, self._resident_list(keys))
            if len(self.rates_cache) >= MEMO_CAP:
                self.rates_cache.clear()
            self.rates_cache[key] = hit
        return hit

    def terms(
        self, gpu_type: str, mode: SharingMode, keys: list[tuple[Any, ...]]
    ) -> list[tuple[float, float]]:
        """The model's ``latency_terms`` (only where :attr:`has_terms`) for residents given as
        field tuples (memoised)."""
        key = (gpu_type, mode, *keys)
        terms = self.terms_cache.get(key)
        if terms is None:
            terms = self.model.latency_terms(  # type: ignore[attr-defined]
                gpu_type, mode, self._resident_list(keys)
            )
            if len(self.terms_cache) >= MEMO_CAP:
                self.terms_cache.clear()
            self.terms_cache[key] = terms
        return terms

    def solo_speed(self, model: str, gpu_type: str) -> float:
        """``model.solo_speed`` (memoised: a pure function of its arguments)."""
        v = self.solo_cache.get((model, gpu_type))
        if v is None:
            v = self.solo_cache[model, gpu_type] = self.model.solo_speed(model, gpu_type)
        return v

    def solo_batch_ms(self, st: JobState) -> float:
        """Solo batch latency of online ``st`` on the type of its first GPU, at the batch size
        it runs with (``JobState.effective_batch_size``; memoised)."""
        assert st.spec.service is not None
        batch = st.effective_batch_size
        key = (st.spec.model, int(self._type_idx[st.gpus[0]]), batch)
        ms = self.batch_ms.get(key)
        if ms is None:
            gt = self._type_names[key[1]]
            ms = self.batch_ms[key] = self.model.batch_latency_ms(key[0], gt, batch)
        return ms
