"""Physics v6: an online service moved to another GPU is a new replica and serves nothing for
``sharing.migration_s`` (``Lifecycle.migrate``), charged as a fault's restart is
(``serving.outage_until``); an offline job's move and a service's first placement are as before."""

from __future__ import annotations

import pytest

from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.online import latency
from tests.helpers import job, make_sim, nodes, option, service

TICK_S = 300.0  # tests.helpers.scenario's load tick
MOVE_S = 30.0


def _sim(*extra) -> Simulator:  # type: ignore[no-untyped-def]
    """A constant-load service on GPU 0 of three V100s (the same latency on each: only the
    outage tells a moved service from one left alone); offline arrivals at 600 s and 1,200 s
    are decision points between load ticks."""
    jobs = [service(0, 36_000.0), job(1, 1e5, 600.0), job(2, 1e5, 1_200.0), *extra]
    sim = make_sim(jobs, nodes(gpus=3), sharing={"migration_s": MOVE_S})
    sim.reset(0)
    sim.apply(Decision(0, 0, option(sim, "excl")))
    return sim


def _served(move: bool) -> tuple[Simulator, float, float, float, float]:
    """Run to 600 s, move the service to GPU 1 (or not), run to 1,200 s: the requests and
    those served within the SLO before and after."""
    sim = _sim()
    sim.advance()
    assert sim.now == 600.0
    req0, ok0 = sim.acc.requests, sim.acc.requests_ok
    if move:
        d = Decision(0, 1, option(sim, "excl"))
        assert sim.check(d) is None  # a move of a running service stays legal
        sim.apply(d)
        assert sim.jobs[0].gpus == [1]
    sim.advance()
    assert sim.now == 1_200.0
    return sim, req0, ok0, sim.acc.requests, sim.acc.requests_ok


def test_a_moved_service_serves_nothing_for_the_move() -> None:
    stay, req0, ok0, req1, ok1 = _served(move=False)
    moved, mreq0, mok0, mreq1, mok1 = _served(move=True)
    assert (mreq0, mok0) == (req0, ok0)  # the same episode up to the move
    assert moved.jobs[0].serving.outage_until == 600.0 + MOVE_S
    assert stay.jobs[0].serving.outage_until == 0.0
    assert mreq1 == req1  # the requests arrive all the same
    served, lost = ok1 - ok0, (ok1 - ok0) - (mok1 - mok0)
    assert served > 0.0
    # The first tick after the move (600-900 s) loses its share MOVE_S / TICK_S of the requests
    # it would have served (the tick counts an outage from its window's start, as a fault's);
    # the second (900-1,200 s) serves as the service left alone does.
    assert lost == pytest.approx(served / 2.0 * MOVE_S / TICK_S, rel=1e-9)
    assert moved.metrics()["migrations"] == 1


def _offline_moved(move: bool) -> tuple[Simulator, float]:
    """Job 1 placed on GPU 1 at 600 s, moved to GPU 2 at 1,200 s (or not), run to 1,800 s."""
    sim = _sim(job(3, 1e5, 1_800.0))
    sim.advance()
    sim.apply(Decision(1, 1, option(sim, "excl")))
    sim.advance()
    assert sim.now == 1_200.0
    ok = sim.acc.requests_ok
    if move:
        st = sim.jobs[1]
        sim.apply(Decision(1, 2, option(sim, "excl")))
        assert st.gpus == [2]
        assert st.setup_until == 1_200.0 + MOVE_S  # the pause it always paid
        assert st.serving.outage_until == 0.0
    sim.advance()
    assert sim.now == 1_800.0
    return sim, sim.acc.requests_ok - ok


def test_an_offline_job_s_move_is_unchanged() -> None:
    """An offline job moved pauses ``migration_s`` (its ``setup_until``) and keeps its
    progress; the service, which did not move, loses nothing for it."""
    stay, ok_stay = _offline_moved(move=False)
    moved, ok_moved = _offline_moved(move=True)
    assert moved.jobs[0].serving.outage_until == 0.0
    assert ok_moved == ok_stay > 0.0
    assert moved.metrics()["migrations"] == 1
    # the pause: 30 s less work done by 1,800 s than left alone (V100 solo speed 1)
    for sim in (stay, moved):
        sim.rates.accrue(sim.jobs[1])
    assert stay.jobs[1].work_done - moved.jobs[1].work_done == pytest.approx(MOVE_S)


def test_a_service_s_first_placement_pays_nothing_extra() -> None:
    sim = _sim()
    assert sim.jobs[0].serving.outage_until == 0.0
    sim.advance()
    assert sim.now == 600.0
    acc = sim.acc
    # two full ticks served at the service's attainment: nothing lost to an outage
    assert acc.requests > 0.0 and sim.jobs[0].serving.outage_until == 0.0
    assert acc.requests_ok == pytest.approx(acc.requests * _attainment(sim), rel=1e-12)


def _attainment(sim: Simulator) -> float:
    """The service's attainment on its GPU alone (the latency model at its last tick)."""
    st = sim.jobs[0]
    svc = st.spec.service
    lat = latency(st.serving.solo_batch_ms, st.serving.rps, st.effective_batch_size, svc.slo_ms)
    return lat.attainment
