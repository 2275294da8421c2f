"""Issue 24: ``sjf_predicted`` keeps the whole queue in per-request heaps and ``reserve_pack``
skips a decision whose inputs have not changed since one that found nothing. Neither may change
a decision: every call is checked against the plain scan of the queue (a stable sort by
(not online, est_remaining_s), the first job that fits), on a fleet small enough to build a
long queue, including faults (re-queued jobs) and migrations-free gangs. ``first_fit`` finds its
GPU from the cluster's fit index (``ClusterView.first_legal``), checked against the mask's
``argmax``; ``reserve_pack`` keeps node loads, empty runs and each GPU type's least allocation
incrementally (``NodeState``), checked against a recomputation over the fleet at every
decision."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.view import ClusterView, JobView
from gpu_sharing_gym.baselines.pai import (
    NO_USABLE,
    Allocation,
    NoCandidates,
    NodeState,
    ReservePack,
    SjfPredicted,
    _any_start,
    _first_zero_start,
    _floordiv,
    _room,
    _span_least_loaded,
    _usable_counts,
    _usable_counts_until,
    first_fit_options,
    lexmin,
    pai_column,
    pai_option,
)
from gpu_sharing_gym.baselines.reference import FirstFit


def _v2_draws(sc: Any) -> Any:
    """``sc`` with workload version 2's draws (``past: per_episode``): the coverage floors
    below (picks, shortcuts, questions asked per path) were set on those episodes; the tests
    are about the picks, not the workload."""
    off = sc.workload.offline
    off = dataclasses.replace(off, params={**off.params, "past": "per_episode"})
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, offline=off))


def _congested(faults: bool) -> object:
    sc = _v2_draws(load_scenario("pai-hetero"))
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


class _CheckedFirstFit(FirstFit):
    """``first_fit`` by job id (``ClusterView.first_legal_in``, no JobViews) checked against
    the window scan from each job's view and mask (the first legal GPU: a column's argmax)."""

    def __init__(self) -> None:
        super().__init__()
        self.placed = self.skipped = 0

    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        want = None
        for k, job in enumerate(view.iter_decidable()):
            if view.placeable(job.job_id):
                want = _mask_first_fit(view, job)
                if want is not None:
                    self.skipped += k > 0
                    break
        assert d == want
        self.placed += d is not None
        return d


@pytest.mark.parametrize("faults", [False, True])
def test_first_fit_by_job_id_decides_as_the_mask_scan(faults: bool) -> None:
    pol = _CheckedFirstFit()
    run_episode(pol, make_simulator(_congested(faults)), 0)  # type: ignore[arg-type]
    # placements checked, among them ones past window jobs that did not fit
    assert pol.placed > 50 and pol.skipped > 5, (pol.placed, pol.skipped)


class _CheckedReservePack(ReservePack):
    def __init__(self) -> None:
        super().__init__()
        #: Type minima checked: 0.0 (a type with an unallocated GPU), and positive.
        self.least_zero = self.least_positive = 0

    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        self._none_key = None  # the same call without the memo
        assert d == super().decide(view)
        # the incremental node loads and empty runs equal a recomputation over the fleet
        fresh = Allocation(view)
        assert np.array_equal(self._nodes.loads(view, Allocation(view)), fresh.node)
        assert np.array_equal(self._nodes.gpu_zero(view, fresh), fresh.node[fresh.node_of] == 0.0)
        assert self._nodes.zero_nodes() == np.count_nonzero(fresh.node == 0.0)
        kept = Allocation(view)
        kept.node_state = self._nodes
        for n in (2, 3, 4, 8):
            assert np.array_equal(kept.one_node(n), fresh.one_node(n)), n
        # the per-type least allocation, kept from the unallocated GPUs' counts, equals the
        # fleet-wide reduction
        by_type = fresh.gpu[fresh._by_type]
        least = np.minimum.reduceat(by_type, fresh._type_start).tolist()
        assert self._nodes.type_min(view) == least
        self.least_zero += sum(v == 0.0 for v in least)
        self.least_positive += sum(v > 0.0 for v in least)
        return d


class _NodesBySet(NodeState):
    """``NodeState`` as on a fleet whose nodes' GPUs are not ranges (GPU by GPU, no slices)."""

    def _sync(self, view: ClusterView) -> None:
        super()._sync(view)
        self._node_span = None


@pytest.mark.parametrize("case", ["congested", "busy", "congested-by-gpu"])
def test_reserve_pack_memo_decides_as_without(case: str) -> None:
    """Every decision equals the one without the memo, and the state ``NodeState`` keeps
    equals its recomputation over the fleet (by node slices, and GPU by GPU), with types whose
    least allocation is 0.0 and types without an unallocated GPU (congested) both met."""
    pol = _CheckedReservePack()
    if case.endswith("-by-gpu"):
        pol._nodes = _NodesBySet()
    sc = _congested(True) if case.startswith("congested") else _busy_hetero()
    run_episode(pol, make_simulator(sc), 0)  # type: ignore[arg-type]
    assert pol.least_zero > 100
    if case.startswith("congested"):
        assert pol.least_positive > 100, pol.least_positive


def _plain_pick(view: ClusterView, gpus: np.ndarray, gpu_rank: np.ndarray) -> int:
    """``reserve_pack``'s choice among candidates ``gpus`` as first written: :func:`lexmin` of
    (plan rank, node load, -allocation, gpu), the loads recomputed over the fleet."""
    fresh = Allocation(view)
    node = fresh.node
    return lexmin(
        gpus,
        lambda s: gpu_rank[s],
        lambda s: node[fresh.node_of[s]],
        lambda s: -fresh.gpu[s],
    )


class _CountingView:
    """A view that counts the legality questions ``_single_pick`` asks: one GPU
    (``legal``: true or false) and the column (``mask_column``)."""

    def __init__(self, view: ClusterView, counts: dict[str, int]) -> None:
        self._v, self._counts = view, counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._v, name)

    def legal(self, job_id: int, gpu: int, option: int) -> bool:
        ok = self._v.legal(job_id, gpu, option)
        assert ok == bool(self._v.mask(job_id)[gpu, option])
        self._counts["legal" if ok else "illegal"] += 1
        return ok

    def mask_column(self, job_id: int, option: int) -> np.ndarray:
        self._counts["column"] += 1
        return self._v.mask_column(job_id, option)


class _CheckedPick(ReservePack):
    """``reserve_pack``'s ``_pick`` (rank by type span, the zero-load shortcut) checked at every
    call against :func:`lexmin` of the full keys over the node loads recomputed over the fleet;
    and the per-GPU loads kept with the node loads against ``node[node_of]``. Counts the
    legality questions of ``_single_pick`` (one GPU, legal or not; the column)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.shortcuts = 0
        self.singles = 0
        #: Single-GPU picks on a node of load 0.0 (``_single_pick``'s early shortcut) and not.
        self.zero_singles = 0
        self.asked = {"legal": 0, "illegal": 0, "column": 0}
        #: Gang picks of ``_gang_zero_pick`` (on a node of load 0.0), its calls without an
        #: answer, and its legality questions (one GPU: legal or not).
        self.gang_zero = self.gang_zero_none = 0
        #: Gang picks not the span's first GPU of load 0.0 (on a smaller node before it).
        self.gang_slow = 0
        self.gang_asked = {"legal": 0, "illegal": 0, "column": 0}

    def _pick(
        self,
        view: ClusterView,
        alloc: Allocation,
        gpus: np.ndarray,
        usable_plans: tuple[str, ...],
        gpu_rank: np.ndarray,
    ) -> int:
        g = super()._pick(view, alloc, gpus, usable_plans, gpu_rank)
        fresh = Allocation(view)
        node = fresh.node
        assert np.array_equal(self._nodes.gpu_loads(view, alloc), node[fresh.node_of])
        assert g == _plain_pick(view, gpus, gpu_rank)
        self.calls += 1
        rank = gpu_rank[gpus]
        sel = gpus[rank == rank.min()]
        self.shortcuts += sel.size > 1 and node[fresh.node_of[sel]].min() == 0.0
        return g

    def _single_pick(
        self, view: ClusterView, job: JobView, alloc: Allocation, usable_plans: tuple[str, ...]
    ) -> tuple[int, int]:
        counting = _CountingView(view, self.asked)
        g, o = super()._single_pick(counting, job, alloc, usable_plans)  # type: ignore[arg-type]
        plans = self._plan_info_id(view, job.job_id)[1]
        assert plans[: len(usable_plans)] == usable_plans
        gpu_rank, _, usable = self._ranks(view, plans, len(usable_plans))
        gpus, want_o, _ = ReservePack._usable_candidates(view, job, alloc, usable)
        assert o == want_o
        if not gpus.size:
            assert g == -1
            return g, o
        self.singles += 1
        assert g == _plain_pick(view, gpus, gpu_rank)
        fresh = Allocation(view)
        self.zero_singles += bool(fresh.node[fresh.node_of[g]] == 0.0)
        return g, o

    def _gang_zero_pick(
        self, view: ClusterView, job: JobView, alloc: Allocation, usable_plans: tuple[str, ...]
    ) -> tuple[int, int]:
        counting = _CountingView(view, self.gang_asked)
        g, o = super()._gang_zero_pick(counting, job, alloc, usable_plans)  # type: ignore[arg-type]
        assert job.num_gpus > 1
        if g < 0:
            self.gang_zero_none += 1
            return g, o
        # the pick among the candidates from the gang mask, the loads recomputed
        plans = self._plan_info_id(view, job.job_id)[1]
        gpu_rank, _, usable = self._ranks(view, plans, len(usable_plans))
        fresh = Allocation(view)
        gpus = _full_candidates(view, job, fresh, usable)
        assert o == pai_option(view, job)
        assert g == _plain_pick(view, gpus, gpu_rank)
        assert fresh.node[fresh.node_of[g]] == 0.0
        self.gang_zero += 1
        spans = self._type_spans
        assert spans is not None
        lo, hi = next((lo, hi) for lo, hi in spans.values() if lo <= g < hi)
        self.gang_slow += g != lo + int((fresh.node[fresh.node_of[lo:hi]] == 0.0).argmax())
        return g, o


class _CheckedPickNoSpans(_CheckedPick):
    """As :class:`_CheckedPick`, as if the GPU types were not contiguous (the rank by gather)."""

    def _fleet_types(self, view: ClusterView) -> dict[str, Any]:
        types = super()._fleet_types(view)
        self._type_spans = None
        return types


@pytest.mark.parametrize(
    ("case", "spans", "least", "asked", "gang"),
    [
        ("busy", True, (200, 0, 1500, 100, 1000), (1500, 20, 15), (60, 0, 1000, 0)),
        ("congested", True, (50, 0, 400, 5, 400), (400, 5, 4), (5, 0, 1000, 0)),
        ("faults", True, (50, 0, 400, 5, 400), (600, 6, 5), (5, 0, 1000, 0)),
        ("busy-faults", True, (200, 0, 1500, 100, 1000), (1500, 20, 15), (80, 2, 1000, 0)),
        ("mixed-nodes", True, (200, 0, 1500, 100, 1000), (1500, 20, 15), (80, 0, 1000, 3)),
        ("busy", False, (2000, 200, 0, 0, 0), (0, 0, 0), (0, 0, 0, 0)),
    ],
)
def test_reserve_pack_pick_is_the_lexmin(
    case: str,
    spans: bool,
    least: tuple[int, int, int, int, int],
    asked: tuple[int, int, int],
    gang: tuple[int, int, int, int],
) -> None:
    """``_pick`` (gangs; every job where the types are not contiguous), ``_single_pick`` and
    ``_gang_zero_pick`` choose the GPU ``lexmin`` of (plan rank, node load, -allocation, gpu)
    does over the candidates, on the lightly loaded PAI fleet (often the zero-load shortcut),
    on a congested one, on a congested one with frequent GPU faults (unhealthy GPUs are empty,
    of load 0.0 and with room, but not legal), on the light one with frequent faults, and on
    the light one with nodes of two sizes for one type.
    ``least``: the fewest picks, shortcuts among them, single-GPU picks, and single-GPU picks
    on a node of load 0.0 (``_single_pick``'s early shortcut) and not. ``asked``: the fewest
    legality questions of ``_single_pick`` of one GPU answered legal, of one GPU answered not
    (the GPU it would pick is not legal: it goes on), and of the column (the one-GPU tries
    failed). ``gang``: the fewest gang picks of ``_gang_zero_pick`` (a usable one-node start
    on an empty node, checked against the pick among the gang mask's candidates), of its
    one-GPU questions answered not legal (an unhealthy GPU of an empty node: it goes on), of
    its calls without an answer, and of its picks past the span's first GPU of load 0.0 (on a
    node too small for the gang: a fleet whose nodes of one type differ in size)."""
    sc = {
        "busy": _busy_hetero,
        "congested": lambda: _congested(True),
        "faults": lambda: _faulty_congested(("exclusive", "time_sharing", "mps"), 100.0),
        "busy-faults": lambda: _with_faults(_busy_hetero(), 30.0),
        "mixed-nodes": _mixed_nodes,
    }[case]()
    pol = _CheckedPick() if spans else _CheckedPickNoSpans()
    # (``faults`` at seed 1: since the requests of jobs a decision did not reach stay kept
    # (``NoCandidates.note_placed``), seed 0's faulty episode asks its one-GPU questions
    # answered not legal and its columns 4 times each; seed 1's 21 and 20 times)
    seed = 1 if case == "faults" else 0
    run_episode(pol, make_simulator(sc), seed)  # type: ignore[arg-type]
    assert (pol._type_spans is not None) == spans
    got = (
        pol.calls, pol.shortcuts, pol.singles, pol.zero_singles, pol.singles - pol.zero_singles
    )  # fmt: skip
    assert all(n >= m for n, m in zip(got, least, strict=True)), got
    got_asked = (pol.asked["legal"], pol.asked["illegal"], pol.asked["column"])
    assert all(n >= m for n, m in zip(got_asked, asked, strict=True)), got_asked
    got_gang = (pol.gang_zero, pol.gang_asked["illegal"], pol.gang_zero_none, pol.gang_slow)
    assert all(n >= m for n, m in zip(got_gang, gang, strict=True)), got_gang


def _full_candidates(
    view: ClusterView, job: JobView, alloc: Allocation, usable: np.ndarray
) -> np.ndarray:
    """``reserve_pack``'s candidates from the gang mask (``pai_column``), as before its
    one-node shortcut: the usable one-node starts if any; else none if a one-node start exists
    elsewhere; else every usable start."""
    o = pai_option(view, job)
    col = pai_column(view, job, alloc, o)
    starts = np.flatnonzero(col & usable)
    if job.num_gpus == 1 or not starts.size:
        return starts
    one = alloc.one_node(job.num_gpus)
    local = starts[one[starts]]
    if local.size:
        return local
    return np.zeros(0, dtype=np.int64) if (col & one).any() else starts


class _CheckedCandidates(ReservePack):
    gangs = 0

    @staticmethod
    def _usable_candidates(
        view: ClusterView, job: JobView, alloc: Allocation, usable: np.ndarray
    ) -> tuple[np.ndarray, int, int]:
        gpus, o, why = ReservePack._usable_candidates(view, job, alloc, usable)
        assert np.array_equal(gpus, _full_candidates(view, job, alloc, usable))
        _CheckedCandidates.gangs += job.num_gpus > 1
        return gpus, o, why


@pytest.mark.parametrize("modes", [("exclusive", "time_sharing", "mps"), ("time_sharing",)])
def test_reserve_pack_gang_shortcut_finds_the_mask_candidates(modes: tuple[str, ...]) -> None:
    """The gang shortcut (single-GPU legality and one-node runs instead of the gang mask) gives
    the same candidates at every call, with faults (unhealthy GPUs are empty but not legal) and
    without an exclusive option (gangs time-share: a legal GPU may be allocated)."""
    sc = _congested(True)
    # GPU faults 100x as often: unhealthy GPUs are empty but not legal, so a one-node run of
    # empty GPUs need not hold a gang
    rates = {k: v * 100 for k, v in sc.faults.rate_per_gpu_h.items()}
    sc = dataclasses.replace(
        sc,
        sharing=dataclasses.replace(sc.sharing, modes=modes),
        faults=dataclasses.replace(sc.faults, rate_per_gpu_h=rates),
    )
    _CheckedCandidates.gangs = 0
    run_episode(_CheckedCandidates(), make_simulator(sc), 0)  # type: ignore[arg-type]
    assert _CheckedCandidates.gangs > 50


class _StubView:
    """What ``ReservePack._gang_quick`` and ``pai_column`` read of a view, on given arrays."""

    def __init__(self, single: np.ndarray, n: int, option: object) -> None:
        self.single, self.n, self.options = single, n, (option,)
        suffix = np.cumsum(single[::-1])[::-1]
        self.gang = single & (suffix >= n)  # ``Cluster.gang_mask``

    def single_column(self, job_id: int, option: int) -> np.ndarray:
        return self.single

    def mask_column(self, job_id: int, option: int) -> np.ndarray:
        return self.gang


class _StubAlloc:
    def __init__(self, gpu: np.ndarray, one: np.ndarray) -> None:
        self.gpu, self._one = gpu, one

    def one_node(self, n: int) -> np.ndarray:
        return self._one


def test_gang_shortcut_on_random_fleets() -> None:
    """Where the shortcut answers, it is the mask's answer, including one-node runs of empty
    GPUs that are not all legal and runs near the fleet's end (the last legal GPUs cannot start
    a gang)."""
    rng = np.random.default_rng(0)
    answered = 0
    reasons = [0, 0]  # NO_USABLE, witness
    for _ in range(3000):
        g, n = int(rng.integers(4, 40)), int(rng.integers(2, 6))
        node_size = int(rng.choice([2, 4, 8]))
        empty = rng.random(g) < rng.uniform(0.1, 0.9)
        single = empty & (rng.random(g) < rng.uniform(0.5, 1.0))  # some empty GPUs not legal
        runs = np.zeros(g, dtype=np.int64)  # empty GPUs of one node from g on
        for i in range(g - 1, -1, -1):
            same = i + 1 < g and (i + 1) // node_size == i // node_size
            runs[i] = (runs[i + 1] + 1 if same else 1) if empty[i] else 0
        alloc = _StubAlloc(np.where(empty, 0.0, 1.0), runs >= n)
        usable = rng.random(g) < rng.uniform(0.0, 1.0)
        view = _StubView(single, n, SimpleNamespace(mode=SharingMode.EXCLUSIVE))
        job = SimpleNamespace(job_id=0, num_gpus=n, gpu_frac=1.0)
        got, why = ReservePack._gang_quick(view, job, alloc, usable, 0)  # type: ignore[arg-type]
        if got is not None:
            answered += 1
            want = _full_candidates(view, job, alloc, usable)  # type: ignore[arg-type]
            assert np.array_equal(got, want), (single, runs, usable, n)
        # why none (``NoCandidates``): no usable legal GPU, or a witness outside the usable
        # GPUs whose run is legal GPU by GPU while no usable GPU is a legal one-node start
        if why == NO_USABLE:
            reasons[0] += 1
            assert got is not None and not got.size and not (single & usable).any()
        elif why >= 0:
            reasons[1] += 1
            assert got is not None and not got.size
            assert single[why : why + n].all() and runs[why] >= n and not usable[why]
            assert not (single & (runs >= n) & usable).any()
    assert answered > 1500 and min(reasons) > 100, reasons


class _AskEveryTime(ReservePack):
    _keep_no_cand = False


class _CheckedNoCandidates(ReservePack):
    """``reserve_pack`` keeping requests without a candidate across decisions
    (:class:`NoCandidates`), checked at every call against a policy that asks every time."""

    def __init__(self) -> None:
        super().__init__()
        self._plain = _AskEveryTime()
        self.calls = 0
        #: Requests answered from what was kept, by reason: no usable GPU legal with room (-1),
        #: a witness elsewhere (a node), no option (None).
        self.kept_hits: dict[str, int] = {"free": 0, "witness": 0}

    def decide(self, view: ClusterView) -> Decision | None:
        kept = dict(self._no_cand._kept)
        d = super().decide(view)
        assert d == self._plain.decide(view)
        self.calls += 1
        for req in self._no_cand._used & kept.keys():
            k = kept[req]
            self.kept_hits["free" if k.witness_node < 0 else "witness"] += 1
        return d


def _busy_hetero() -> object:
    """``pai-hetero`` (PAI's machine mix at 1/20) with four times its arrivals: gangs wait for
    their plans on the 2-GPU nodes while 8-GPU nodes hold empty runs (the replay's case)."""
    sc = _v2_draws(load_scenario("pai-hetero"))
    off = sc.workload.offline
    off = dataclasses.replace(off, params={**off.params, "arrivals_per_h": 100.0})
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, offline=off))


def _mixed_nodes() -> object:
    """:func:`_busy_hetero` whose V100-32GB GPUs lie on 4-GPU nodes first, then on 8-GPU
    ones (one type, nodes of two sizes, still contiguous in GPU order)."""
    sc: Any = _busy_hetero()
    groups = []
    for g in sc.cluster.nodes:
        if g.gpu_type == "V100-32GB":
            groups.append(dataclasses.replace(g, count=4, gpus_per_node=4))
        groups.append(g)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=tuple(groups)))


def _with_faults(sc: Any, fault_scale: float) -> object:
    """``sc`` with its GPU faults ``fault_scale`` times as often."""
    rates = {k: v * fault_scale for k, v in sc.faults.rate_per_gpu_h.items()}
    return dataclasses.replace(sc, faults=dataclasses.replace(sc.faults, rate_per_gpu_h=rates))


def _faulty_congested(modes: tuple[str, ...], fault_scale: float) -> object:
    sc = _congested(True)
    rates = {k: v * fault_scale for k, v in sc.faults.rate_per_gpu_h.items()}
    return dataclasses.replace(
        sc,
        sharing=dataclasses.replace(sc.sharing, modes=modes),
        faults=dataclasses.replace(sc.faults, rate_per_gpu_h=rates),
    )


@pytest.mark.parametrize(
    ("case", "free", "witness"),
    [
        ("busy", 70, 400),
        ("congested", 8, 5),
        ("faults", 40, 8),
        ("time-sharing", 30, 8),
    ],
)
def test_reserve_pack_kept_no_candidates_decide_as_asking(
    case: str, free: int, witness: int
) -> None:
    """What ``reserve_pack`` keeps of the requests found without a candidate changes no
    decision: every call equals a policy's that asks every request again, on a lightly loaded
    PAI fleet with gangs waiting for their plans, on a congested one, with frequent GPU faults
    (unhealthy GPUs are empty but not legal: a one-node run need not hold a gang) and with
    gangs time-sharing (no exclusive option). Both reasons for keeping one are used."""
    sc = {
        "busy": _busy_hetero,
        "congested": lambda: _congested(True),
        "faults": lambda: _faulty_congested(("exclusive", "time_sharing", "mps"), 100.0),
        "time-sharing": lambda: _faulty_congested(("time_sharing",), 100.0),
    }[case]()
    pol = _CheckedNoCandidates()
    run_episode(pol, make_simulator(sc), 0)  # type: ignore[arg-type]
    assert pol.calls > 500
    assert pol.kept_hits["free"] > free and pol.kept_hits["witness"] > witness, pol.kept_hits


class _Forgetting(NoCandidates):
    """:class:`NoCandidates` forgetting at each update every request a decision did not ask
    (before ``note_placed``): the requests of the jobs after the one placed among them."""

    def note_placed(self) -> None:
        pass


class _CountingAsks(ReservePack):
    """``reserve_pack`` recording its decisions and counting its ``_usable_candidates`` calls
    (a gang's request asked from the fleet's arrays)."""

    def __init__(self, noting: bool) -> None:
        super().__init__()
        if not noting:
            self._no_cand = _Forgetting()
        self.asks = 0
        self.decisions: list[Decision | None] = []

    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        self.decisions.append(d)
        return d

    def _usable_candidates(  # type: ignore[override]
        self, view: ClusterView, job: JobView, alloc: Allocation, usable: np.ndarray
    ) -> tuple[np.ndarray, int, int]:
        self.asks += 1
        return ReservePack._usable_candidates(view, job, alloc, usable)  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", ["busy", "faults"])
def test_reserve_pack_keeps_the_requests_a_placement_did_not_reach(case: str) -> None:
    """A decision that places a job does not ask the jobs after it: what is kept of their
    requests stays (``NoCandidates.note_placed``), so fewer of them are asked again from the
    fleet's arrays than where they are forgotten, with the same decisions (every decision is
    also checked against a policy asking every time:
    ``test_reserve_pack_kept_no_candidates_decide_as_asking``)."""
    make = {
        "busy": _busy_hetero,
        "faults": lambda: _faulty_congested(("exclusive", "time_sharing", "mps"), 100.0),
    }[case]
    noting, forgetting = _CountingAsks(True), _CountingAsks(False)
    for pol in (noting, forgetting):
        run_episode(pol, make_simulator(make()), 0)  # type: ignore[arg-type]
    assert noting.decisions == forgetting.decisions
    assert len(noting.decisions) > 500
    assert noting.asks < forgetting.asks, (noting.asks, forgetting.asks)


class _RecordingIds(ReservePack):
    """``reserve_pack`` noting each decidable job's plan info (:meth:`_plan_info_id`)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[int, tuple[object, ...]] = {}

    def decide(self, view: ClusterView) -> Decision | None:
        for jid in view.decidable_ids():
            self.seen[jid] = self._plan_info_id(view, jid)
        return super().decide(view)


@pytest.mark.parametrize("case", ["busy", "time-sharing"])
def test_reserve_pack_request_ids_name_the_request(case: str) -> None:
    """The ids that key a decision's sets and the kept requests (``_request_ids``) are equal
    for two jobs iff their requests are: the room test's (plans, GPU memory, GPU fraction) and
    all a candidate depends on (those, GPUs, type constraint, online), on episodes whose jobs
    differ in each of them."""
    sc = _busy_hetero() if case == "busy" else _faulty_congested(("time_sharing",), 1.0)
    pol = _RecordingIds()
    run_episode(pol, make_simulator(sc), 0)  # type: ignore[arg-type]
    room: dict[tuple[object, ...], set[object]] = {}
    full: dict[tuple[object, ...], set[object]] = {}
    for _, plans, job, room_id, req_id, n in pol.seen.values():
        assert n == job.num_gpus  # type: ignore[attr-defined]
        r = (plans, job.mem_gb, job.gpu_frac)  # type: ignore[attr-defined]
        room.setdefault(r, set()).add(room_id)
        whole = (*r, n, job.gpu_types, job.online)  # type: ignore[attr-defined]
        full.setdefault(whole, set()).add(req_id)
    for ids in (room, full):
        assert all(len(v) == 1 for v in ids.values())  # one id per request
        assert len({next(iter(v)) for v in ids.values()}) == len(ids)  # and per id one request
    # the requests differ in every field (a field left out of the key would merge some)
    keys = list(full)
    for i in (0, 1, 2, 3, 4, 5):
        assert len({k[i] for k in keys}) > 1, i


def _float_bits(x: float) -> tuple[float, float]:
    """A float with its sign (``0.0 == -0.0``, their signs differ)."""
    return x, math.copysign(1.0, x)


def test_usable_counts_are_the_python_expression() -> None:
    """``_usable_counts`` (compiled: C doubles through CPython's own float floor division,
    ``_floordiv``) gives ``min(1 + int(w // timeout), n)``, ``min(99, n)`` without a timeout,
    on edge and random waits and timeouts: among them waits whose quotient C's
    ``floor(w / timeout)`` rounds up (``7.0 // 0.1`` is 69.0, ``floor(7.0 / 0.1)`` 70.0)."""
    rng = np.random.default_rng(51)
    waits = [7.0, 0.0, -0.0, 1e-320, 599.9999999999999, 600.0, 1e300, 0.30000000000000004]
    waits += [float(k) for k in range(400)] + [k * 0.1 for k in range(400)]
    waits += rng.uniform(0.0, 1e5, 2000).tolist() + (rng.integers(0, 60, 2000) * 300.0).tolist()
    timeouts = [300.0, 0.1, 0.3, 0.7, 7.0, 1e-3, math.inf, 0.0, -1.0]
    timeouts += rng.uniform(1e-3, 1e4, 8).tolist()
    up = 0  # (cases where ``floor(w / timeout)`` is not ``w // timeout``)
    for timeout in timeouts:
        n_plans = rng.integers(1, 9, len(waits)).tolist()
        want = [
            min(1 + int(w // timeout) if timeout > 0 else 99, n)
            for w, n in zip(waits, n_plans, strict=True)
        ]
        got = _usable_counts(waits, n_plans, timeout)
        assert got == want and all(type(x) is int for x in got), timeout
        if timeout > 0:
            for w in waits:
                assert _float_bits(_floordiv(w, timeout)) == _float_bits(w // timeout)
                up += math.floor(w / timeout) != w // timeout
    assert up > 10, up


def test_usable_counts_hold_until_the_time_given() -> None:
    """``_usable_counts_until`` counts as ``_usable_counts`` of the waits ``now - enq`` (the
    same doubles), and at every later time before the one it returns the counts are the same:
    random enqueue times (up to ~1e7 s, where a sum's rounding is ~1e-9 s) and timeouts, the
    times tried among them just before the returned one (where a count one timeout late, or
    the step without its margin, would already have grown)."""
    rng = np.random.default_rng(5101)
    timeouts = [300.0, 0.1, 0.3, 7.0, 1e-3, math.inf, 0.0, -1.0]
    timeouts += rng.uniform(1e-3, 1e4, 6).tolist()
    tried = steps = 0
    for k in range(3000):
        timeout = timeouts[k % len(timeouts)]
        n = int(rng.integers(1, 12))
        scale = float(rng.choice([1e3, 1e5, 1e7]))
        enq = rng.uniform(0.0, scale, n).tolist()
        if k % 3 == 0 and timeout > 0 and math.isfinite(timeout):  # at (or next to) a step
            enq[0] = math.nextafter(enq[1 % n] - int(rng.integers(1, 5)) * timeout, 0.0)
        now = max(enq) + float(
            rng.choice([0.0, rng.uniform(0.0, 5.0 * min(max(timeout, 1e-3), 1e4))])
        )
        n_plans = rng.integers(1, 9, n).tolist()
        out: list[int] = []
        until = _usable_counts_until(enq, now, n_plans, timeout, out)
        assert out == _usable_counts([now - e for e in enq], n_plans, timeout)
        assert all(type(x) is int for x in out)
        if not math.isfinite(until):
            # (no timeout: every plan; an infinite one: the first only, forever)
            assert not 0 < timeout < math.inf or out == n_plans
            continue
        if until <= now:  # (within the margin of a step: counted afresh at the next call)
            continue
        steps += 1
        later = [math.nextafter(until, -math.inf), until - 1e-12 * abs(until)]
        later += rng.uniform(now, until, 4).tolist()
        for t in later:
            if now <= t < until:
                tried += 1
                assert _usable_counts([t - e for e in enq], n_plans, timeout) == out, (k, t)
    assert steps > 1000 and tried > 5000, (steps, tried)


class _CheckedUsable(ReservePack):
    """At every decision: the usable plan counts the decision kept (``_use_memo``) are those
    of the waits now (``queued_wait_s``), and the decision is the one counted afresh."""

    def __init__(self) -> None:
        super().__init__()
        self.reused = 0
        self.requeued = 0
        self._enq: dict[int, float] = {}

    def decide(self, view: ClusterView) -> Decision | None:
        before = self._use_memo
        d = super().decide(view)
        memo = self._use_memo
        assert memo is not None
        ids = view.decidable_ids()
        n_plans = self._ids_memo[3]
        assert memo[4] == _usable_counts(view.queued_wait_s(ids), n_plans, self.plan_timeout_s)
        self.reused += memo is before
        for jid, e in zip(ids, view.queued_enqueue_t(ids), strict=True):
            self.requeued += self._enq.get(jid, e) != e
            self._enq[jid] = e
        self._use_memo = None  # the same call counting afresh
        self._none_key = None
        assert d == super().decide(view)
        return d


@pytest.mark.parametrize("case", ["congested", "busy"])
def test_reserve_pack_usable_counts_kept_as_counted(case: str) -> None:
    """The window's usable plan counts, kept until their next step while no job left the
    queue, are the counts of the waits at every decision, and decide as counted afresh (with
    faults: jobs re-queued with new enqueue times)."""
    pol = _CheckedUsable()
    sc = _congested(True) if case == "congested" else _busy_hetero()
    run_episode(pol, make_simulator(sc), 0)  # type: ignore[arg-type]
    assert pol.reused > 100, pol.reused
    if case == "congested":
        assert pol.requeued > 0


def test_the_queue_counts_the_jobs_that_left_it() -> None:
    """``Queue.taken`` (``ClusterView.queue_taken``) grows by one at each start and only
    then, and a reset sets it to 0."""
    sim = make_simulator(_congested(True))
    sim.reset(0)
    starts = 0
    pol = FirstFit()
    while not sim.done and starts < 50:
        view = ClusterView(sim)
        assert view.queue_taken() == sim.waiting.taken == starts
        d = pol.decide(view)
        if d is None:
            sim.advance()
            continue
        queued = len(sim.queue)
        sim.apply(d)
        starts += len(sim.queue) < queued
    assert starts == 50
    sim.reset(1)
    assert sim.waiting.taken == 0


class _CheckedScans(ReservePack):
    """At every decision, after deciding: ``NodeState``'s span scans (``_first_zero_start``,
    keyed by the span start and not, ``_any_start``, ``_span_least_loaded``) against numpy's
    over the fleet's arrays, on the GPU types' spans and on random ranges (keyed there too:
    hints at more starts than the policy keeps)."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.found = {"zero": 0, "zero_start": 0, "least": 0, "least_positive": 0}

    def decide(self, view: ClusterView) -> Decision | None:
        d = super().decide(view)
        nodes, fresh = self._nodes, Allocation(view)
        zero = np.array(nodes.gpu_zero(view, fresh))
        runs = np.array(nodes.empty_runs(view))
        load = fresh.node[fresh.node_of]  # (recomputed over the fleet)
        frac = np.asarray(view.frac_used)
        n_gpus = view.n_gpus
        spans = [(0, n_gpus), *(self._type_spans or {}).values()]
        spans += [tuple(sorted(self.rng.integers(0, n_gpus + 1, 2).tolist())) for _ in range(2)]
        for lo, hi in spans:
            for n in (0, 2, 4, 8):
                z = zero[lo:hi] & (runs[lo:hi] >= n) if n else zero[lo:hi]
                want = lo + int(np.flatnonzero(z)[0]) if z.any() else -1
                for keyed in (True, False):
                    assert _first_zero_start(nodes, lo, hi, n, keyed) == want, (lo, hi, n)
                self.found["zero_start" if n else "zero"] += want >= 0
                if n:
                    assert _any_start(nodes, lo, hi, n) == bool((runs[lo:hi] >= n).any())
            for f in (0.25, 0.5, 1.0):
                room = np.flatnonzero(_room(frac[lo:hi], f)) + lo
                want = lexmin(room, lambda g: load[g], lambda g: -frac[g]) if room.size else -1
                assert _span_least_loaded(view, nodes, lo, hi, f) == want, (lo, hi, f)
                self.found["least"] += want >= 0
                self.found["least_positive"] += want >= 0 and load[want] > 0.0
        return d


@pytest.mark.parametrize("case", ["busy", "congested"])
def test_reserve_pack_span_scans_are_numpy_s(case: str) -> None:
    """The typed span scans ``reserve_pack`` picks with (a node's GPUs passed over together
    where its load rules them out; the first GPU of load 0.0 searched from where the last scan
    of the span found it, kept as nodes empty) find what numpy's scans of the recomputed loads,
    zero flags and empty runs find, at every decision of an episode."""
    pol = _CheckedScans(7)
    sc = _congested(True) if case == "congested" else _busy_hetero()
    run_episode(pol, make_simulator(sc), 0)  # type: ignore[arg-type]
    # every kind of answer was met, often
    assert min(pol.found.values()) > 100, pol.found
