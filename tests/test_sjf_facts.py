"""Issue 51: ``SjfPredicted._sync`` reads the new queue entries' SJF keys from one
``ClusterView.sjf_facts`` call (Python values, one pass) instead of ``est_remaining_s`` and
``online_flags`` (numpy arrays made lists again), ``submit_times`` and ``mask_signatures``.
The facts must be those methods' values bit for bit and type for type, and the heaps the same
as the old ``_sync`` builds: checked on random job sets of real episodes (running and finished
jobs too, whose progress passes their estimate), on hand-made edge values, and by running the
old ``_sync`` beside the new one at every decision of congested episodes with faults."""

from __future__ import annotations

import dataclasses
import random
import struct
from heapq import heappush
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.pai import SjfPredicted


def _bits(x: Any) -> Any:
    """``x`` with its exact type and, for floats, its IEEE bits (``-0.0`` is not ``0.0``)."""
    if isinstance(x, tuple):
        return tuple(_bits(v) for v in x)
    if type(x) is float:
        return ("float", struct.pack("<d", x))
    return (type(x).__name__, x)


def _old_facts(view: ClusterView, ids: list[int]) -> list[tuple[Any, ...]]:
    """The facts as the old ``_sync`` read them (numpy arrays, then ``tolist``)."""
    est = view.est_remaining_s(ids).tolist()
    online = view.online_flags(ids).tolist()
    submit = view.submit_times(ids)
    sigs = view.mask_signatures(ids)
    return [(not online[k], est[k], submit[k], sigs[k]) for k in range(len(ids))]


def _old_sync(pol: Any, view: ClusterView) -> None:
    """``SjfPredicted._sync`` as it was before ``sjf_facts`` (1fcd36e), on ``pol``'s state."""
    if pol._episode is not view.episode:
        pol._episode, pol._mark, pol._latest, pol._heaps = view.episode, 0, {}, {}
    new = view.queue_log(pol._mark)
    if not new:
        return
    base, pol._mark = pol._mark, pol._mark + len(new)
    est = view.est_remaining_s(new).tolist()
    online = view.online_flags(new).tolist()
    submit = view.submit_times(new)
    heaps, latest = pol._heaps, pol._latest
    for k, (jid, sig) in enumerate(zip(new, view.mask_signatures(new), strict=True)):
        latest[jid] = base + k
        h = heaps.get(sig)
        if h is None:
            h = heaps[sig] = []
        heappush(h, (not online[k], est[k], submit[k], jid, base + k))


def _congested() -> object:
    """``pai-hetero`` on an eighth of its fleet: a long queue, faults re-queueing jobs, and
    estimates that run short of the work (progress past the estimate clamps to 0)."""
    sc = load_scenario("pai-hetero")
    nodes = tuple(dataclasses.replace(g, count=max(1, g.count // 8)) for g in sc.cluster.nodes)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=nodes))


class _Twin(SjfPredicted):
    """The new ``_sync`` deciding, the old one run beside it on a copy of the state before
    it, compared after every sync; random job sets' facts compared with the old reads."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.shadow = SimpleNamespace(_episode=None, _mark=0, _latest={}, _heaps={})
        self.pick = random.Random(seed)
        self.checked = 0
        self.clamped = 0

    def _sync(self, view: ClusterView) -> None:
        # the shadow starts from the state the last decision left (its lazy pops included)
        sh = self.shadow
        sh._episode, sh._mark, sh._latest = self._episode, self._mark, dict(self._latest)
        sh._heaps = {sig: list(h) for sig, h in self._heaps.items()}
        super()._sync(view)
        _old_sync(self.shadow, view)
        assert self._mark == self.shadow._mark
        assert self._latest == self.shadow._latest
        assert _bits(tuple(self._heaps)) == _bits(tuple(self.shadow._heaps))
        for sig, h in self._heaps.items():
            assert _bits(tuple(h)) == _bits(tuple(self.shadow._heaps[sig]))
        n = len(view._sim.jobs)
        ids = self.pick.sample(range(n), min(n, 12))
        facts = view.sjf_facts(ids)
        assert _bits(tuple(facts)) == _bits(tuple(_old_facts(view, ids)))
        self.clamped += sum(1 for f in facts if f[1] == 0.0)
        self.checked += 1

    def decide(self, view: ClusterView) -> Decision | None:
        return super().decide(view)


@pytest.mark.parametrize("seed", [0, 1])
def test_sync_as_the_old_sync(seed: int) -> None:
    pol = _Twin(seed)
    run_episode(pol, make_simulator(_congested()), seed)  # type: ignore[arg-type]
    assert pol.checked > 50 and pol.clamped > 0  # many syncs, some estimates overrun


def test_facts_edge_values() -> None:
    """Hand-made jobs: an int estimate, a float32 one, progress past the estimate, exactly
    at it, a truthy non-bool ``online``; the facts' values and types are the old reads'."""
    base = load_scenario("default")
    sim = make_simulator(base)
    sim.reset(seed=0)
    spec = sim.jobs[0].spec if sim.jobs else None
    assert spec is not None
    cases: list[tuple[Any, float, Any]] = [
        (7, 0.0, False),
        (np.float32(3.3), 1.0, True),
        (2.5, 9.0, False),
        (2.5, 2.5, 1),
        (1e300, -1e300, 0),
        (0.1, 0.30000000000000004, None),
    ]
    jobs = []
    for est, done, online in cases:
        jobs.append(SimpleNamespace(spec=_with(spec, est), work_done=done, online=online))
    view = ClusterView.__new__(ClusterView)
    view._sim = SimpleNamespace(jobs=jobs, estimates=True)  # type: ignore[assignment]
    ids = list(range(len(jobs)))
    assert _bits(tuple(view.sjf_facts(ids))) == _bits(tuple(_old_facts(view, ids)))


def _with(spec: Any, est: Any) -> Any:
    """``spec`` with ``est_work_s`` set to ``est`` as is (no validation, no conversion)."""
    new = dataclasses.replace(spec)
    object.__setattr__(new, "est_work_s", est)
    return new
