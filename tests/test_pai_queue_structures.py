"""Issue 24: ``sjf_predicted`` keeps the whole queue in per-request heaps and ``reserve_pack``
skips a decision whose inputs have not changed since one that found nothing. Neither may change
a decision: every call is checked against the plain scan of the queue (a stable sort by
(not online, est_remaining_s), the first job that fits), on a fleet small enough to build a
long queue, including faults (re-queued jobs) and migrations-free gangs. ``first_fit`` finds its
GPU from the cluster's fit index (``ClusterView.first_legal``), checked against the mask's
``argmax``; ``reserve_pack`` keeps node loads and empty runs incrementally (``NodeState``),
checked against a recomputation over the fleet at every decision."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.pai import Allocation, ReservePack, SjfPredicted, first_fit_options


def _congested(faults: bool) -> object:
    sc = load_scenario("pai-hetero")
    nodes = tuple(dataclasses.replace(g, count=max(1, g.count // 8)) for g in sc.cluster.nodes)
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=nodes))
    if not faults:
        rates = {k: 0.0 for k in sc.faults.rate_per_gpu_h}
        sc = dataclasses.replace(sc, faults=dataclasses.replace(sc.faults, rate_per_gpu_h=rates))
    return sc


def _mask_first_fit(view: ClusterView, job: JobView) -> Decision | None:
    """``first_fit`` from the job's mask (the first legal GPU: a column's ``argmax``)."""
    mask = view.mask(job.job_id)
    for o in first_fit_options(view, job):
        col = mask[:, o]
        g = int(col.argmax())
        if col[g]:
            return Decision(job.job_id, g, o)
    return None


def _scan(view: ClusterView) -> Decision | None:
    """The reference: sort the whole queue, place the first job that fits (from its mask)."""
    ids = view.decidable_ids()
    order = np.lexsort((view.est_remaining_s(ids), ~view.online_flags(ids)))
    for i in order.tolist():
        if view.placeable(ids[i]):
            d = _mask_first_fit(view, view.job(ids[i]))
            if d is not None:
                return d
    return None


class _CheckedSjf(SjfPredicted):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.longest = 0

    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        assert d == _scan(view)
        self.calls += 1
        self.longest = max(self.longest, len(view.decidable_ids()))
        return d


@pytest.mark.parametrize("faults", [False, True])
def test_sjf_heaps_decide_as_the_queue_scan(faults: bool) -> None:
    pol = _CheckedSjf()
    run_episode(pol, make_simulator(_congested(faults)), 0)  # type: ignore[arg-type]
    assert pol.calls > 50 and pol.longest > 20  # a real queue was ordered


class _CheckedReservePack(ReservePack):
    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        self._none_key = None  # the same call without the memo
        assert d == super().decide(view)
        # the incremental node loads and empty runs equal a recomputation over the fleet
        fresh = Allocation(view)
        assert np.array_equal(self._nodes.loads(view, Allocation(view)), fresh.node)
        kept = Allocation(view)
        kept.node_state = self._nodes
        for n in (2, 3, 4, 8):
            assert np.array_equal(kept.one_node(n), fresh.one_node(n)), n
        return d


def test_reserve_pack_memo_decides_as_without() -> None:
    run_episode(_CheckedReservePack(), make_simulator(_congested(True)), 0)  # type: ignore[arg-type]
