"""The speed memo's ``Resident`` objects and its inlined latency-terms lookup, against what they
replace: every ``Resident`` the memo made (compiled, its frozen dataclass ``__init__`` written out
as C calls: ``speed._new_resident``) is ``Resident(*key)`` field for field, type for type; every
memoised rate and latency term is the model's fresh answer for its key, bit for bit (episodes of
``default``, ``default-x2``, ``mig-a100`` and ``default`` with gpulets, placed at random)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.constants import CROSS_NODE_FACTOR, PCIE_GANG_FACTOR
from gpu_sharing_env.sim.speed import _new_resident
from tests.helpers import place_at_random

FIELDS = [f.name for f in dataclasses.fields(Resident)]


def _same(made: Resident, want: Resident) -> None:
    """Field for field, the same value of the same type (``1 == 1.0`` and ``True == 1`` are
    not enough: a rate's bits may depend on which one it reads)."""
    assert type(made) is Resident
    for name in FIELDS:
        a, b = getattr(made, name), getattr(want, name)
        assert type(a) is type(b) and a == b, (name, a, b)
    assert made == want and hash(made) == hash(want) and repr(made) == repr(want)


def _bits(xs: Any) -> list[bytes]:
    return [struct.pack("<d", x) for x in xs]


def test_new_resident_is_the_constructor() -> None:
    """Keys of eight fields (no gpulets), nine (a gpulet) and any other length (the
    constructor itself) give the constructor's object; the object is frozen as before."""
    keys: list[tuple[Any, ...]] = [
        ("resnet50", 0.5, 0, 0, 0.25, False, 0, 0),
        ("bert", 1.0, 3, 4, 0.001, True, 105, 16),
        ("gpt2", 0.3, 0, 0, 0.7, True, 2, 8, 1),
        ("yolov3", 1.0, 0, 0, 0.5, False, 0, 0, -1),
        ("resnet50",),
        ("bert", 0.5, 0, 0, 0.2),
    ]
    for k in keys:
        made = _new_resident(k)
        _same(made, Resident(*k))
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.duty = 0.0  # type: ignore[misc]


def _scenarios() -> list[ScenarioConfig]:
    base = load_scenario("default")
    gpulets = dataclasses.replace(base, sharing=dataclasses.replace(base.sharing, gpulets=2))
    return [base, load_scenario("default-x2"), load_scenario("mig-a100"), gpulets]


def _check_rates(sim: Any) -> int:
    """Each running job's rate is ``solo * frac * cpu`` (``Rates.set_rate``; compiled, C
    doubles), a gang's the least of its members' ``solo * net * frac * cpu``, bit for bit.
    Returns how many were seen."""
    rates = sim.rates
    node_of = sim.cluster.node_of
    type_of = sim.cluster.type_name_of
    n = 0
    for st in sim.jobs.values():
        if not st.gpus or st.rate == 0.0:
            continue
        solos = [sim.memo.solo_speed(st.spec.model, type_of[g]) for g in st.gpus]
        cpus = [rates._node_factor[int(node_of[g])] for g in st.gpus]
        if len(st.gpus) == 1:
            g = st.gpus[0]
            want = solos[0] * st.frac[g] * cpus[0]
            assert st.solo_rate == solos[0], st.spec.job_id
        else:  # a gang: its slowest member, each multiplied in the one-GPU order
            nodes = {int(node_of[g]) for g in st.gpus}
            net = 1.0
            if len(nodes) > 1:
                net = CROSS_NODE_FACTOR
            elif rates._node_pcie[nodes.pop()]:
                net = PCIE_GANG_FACTOR
            want = min(s * net * st.frac[g] * c for s, g, c in zip(solos, st.gpus, cpus))
        assert st.rate.hex() == want.hex(), (st.spec.job_id, st.rate, want)
        n += 1
    return n


@pytest.mark.parametrize("cfg", _scenarios(), ids=["default", "default-x2", "mig-a100", "gpulets"])
def test_memo_entries_are_the_models_answers(cfg: ScenarioConfig) -> None:
    """Random placements over a few hundred decisions: the memo's ``Resident`` of each key is
    ``Resident(*key)``, and each memoised rate list and latency-terms list is what the model
    computes afresh for its key's residents (the lookups the rates make inline read these
    tables), bit for bit."""
    sim = make_simulator(cfg)
    rng = np.random.default_rng(5)
    steps = rates_checked = 0
    for seed in range(2):
        sim.reset(seed)
        while not sim.done and steps < 300 * (seed + 1):
            place_at_random(sim, rng)
            sim.advance()
            steps += 1
            rates_checked += _check_rates(sim)
    assert rates_checked > 100, rates_checked
    memo = sim.memo
    model = memo.model
    assert len(memo._residents) > 5 and len(memo.rates_cache) > 5, len(memo._residents)
    for k, r in memo._residents.items():
        _same(r, Resident(*k))
    for key, fr in memo.rates_cache.items():
        gpu_type, mode, *keys = key
        want = model.rates(gpu_type, mode, [Resident(*k) for k in keys])
        assert _bits(fr) == _bits(want), key
    for key, terms in memo.terms_cache.items():
        gpu_type, mode, *keys = key
        want = model.latency_terms(gpu_type, mode, [Resident(*k) for k in keys])
        assert [_bits(t) for t in terms] == [_bits(t) for t in want], key


def test_views_follow_the_cluster_asked() -> None:
    """``Cluster.state_views`` (compiled: ``_views_of``, which keeps the last cluster's views)
    gives views of the cluster asked, as two simulators alternate, after a reset (new arrays)
    and in a copy: compiled, ``add`` and ``remove`` count residents, memory and CPUs through
    them, so each cluster's arrays agree with its own residents (``check_invariants``)."""
    rng = np.random.default_rng(11)
    a = make_simulator(load_scenario("default"))
    b = make_simulator(load_scenario("default"))
    a.reset(0)
    b.reset(1)
    placed = 0
    for i in range(150):
        sim = a if i % 3 else b
        if i == 62:  # (``a`` stepped last: its views are the ones kept)
            a.reset(2)  # new arrays: the next views are of them
        if i == 100:
            a = a.copy()  # another cluster, its own arrays
        placed += place_at_random(sim, rng, 1.0)
        sim.advance()
        for x in (a, b):
            c = x.cluster
            c.check_invariants()
            assert list(c.n_res) == [len(r) for r in c.residents]
            assert list(c.online_count) == [sum(x.jobs[j].online for j in r) for r in c.residents]
    assert placed > 50, placed
