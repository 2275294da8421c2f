"""``Legality.check`` answers a decision at the placement ``Legality.first_legal_in`` kept for the
job at the cluster's version without asking again (docs/notes/2026-12-01-replay-episode.md).
The answer must be the cluster's legality function's: at every decision point of first-fit
episodes (the window and the whole queue, ``sjf_predicted``), every job in the decision scope
is checked at the kept cell (a fresh one, and the one kept at the previous decision point, by
then stale) against ``Cluster.check``. On ``default``, ``default-x2``, ``mig-a100``, a congested
``pai-hetero`` (a long queue, gangs, GPU types) and a small PAI-format replay built here."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.pai import SjfPredicted
from gpu_sharing_gym.baselines.reference import FirstFit, first_fit_order
from tests.test_no_estimates import pai_trace


def _pai_replay(tmp_path: Path) -> ScenarioConfig:
    """A PAI-format task table arriving faster than a 16-GPU fleet of two types serves it."""
    return pai_trace(tmp_path, n=300, seed=5)


def _congested() -> ScenarioConfig:
    sc = load_scenario("pai-hetero")
    nodes = tuple(dataclasses.replace(g, count=max(1, g.count // 8)) for g in sc.cluster.nodes)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=nodes))


class _Checking:
    """Mixed into a first-fit policy: after each of its decisions, every job of the decision
    scope is checked at the cell kept now and at the one kept at the previous decision point."""

    def setup(self, sim: Simulator, limit: int) -> None:
        self._sim = sim
        self._limit = limit
        self.checked = self.fresh_legal = self.illegal = self.stale_differs = self.calls = 0
        self._prev: tuple[Any, ...] = (-1, None, -1, -1)

    def _compare(self, view: ClusterView, kept: tuple[Any, ...]) -> None:
        sim = self._sim
        version, spec, g, o = kept
        if g < 0:
            return
        for jid in view.decidable_ids():
            st = sim.jobs[jid]
            why = sim.legality.check(Decision(jid, g, o))
            old = sim.cluster.check(st.spec, g, o)
            assert (why is None) == (old is None), (jid, g, o, why, old)
            self.checked += 1
            self.illegal += old is not None
            if st.spec is spec and version == sim.cluster.version:
                assert why is None  # the kept answer itself is legal
                self.fresh_legal += 1
            elif st.spec is spec:
                self.stale_differs += old is not None  # stale: the cell no longer fits it

    def decide(self, view: ClusterView) -> Decision | None:
        self.calls += 1
        if self.calls <= self._limit:
            self._compare(view, self._prev)  # the previous point's cell, checked now
        d = super().decide(view)  # type: ignore[misc]
        if self.calls <= self._limit:
            leg = self._sim.legality
            self._compare(view, leg._fit_kept)
            # a cell kept for a job the decision does not place (it stays queued: by the next
            # decision point the cluster has changed and the kept cell is stale)
            for jid in view.decidable_ids():
                if d is not None and jid == d.job_id:
                    continue
                order = first_fit_order(view, view.gpu_frac(jid))
                if leg.first_legal_in(self._sim.jobs[jid].spec, order)[0] >= 0:
                    self._compare(view, leg._fit_kept)
                    break
            self._prev = leg._fit_kept
        return d  # type: ignore[no-any-return]


class _CheckedFirstFit(_Checking, FirstFit):
    pass


class _CheckedSjf(_Checking, SjfPredicted):
    pass


def _cases(tmp_path: Path) -> dict[str, ScenarioConfig]:
    return {
        "default": load_scenario("default"),
        "default-x2": load_scenario("default-x2"),
        "mig-a100": load_scenario("mig-a100"),
        "pai-hetero-congested": _congested(),
        "pai-replay": _pai_replay(tmp_path),
    }


@pytest.mark.parametrize("policy", ["first_fit", "sjf_predicted"])
@pytest.mark.parametrize(
    "case", ["default", "default-x2", "mig-a100", "pai-hetero-congested", "pai-replay"]
)
def test_kept_first_fit_cell_checks_as_the_cluster(case: str, policy: str, tmp_path: Path) -> None:
    sim = make_simulator(_cases(tmp_path)[case])
    pol = _CheckedFirstFit() if policy == "first_fit" else _CheckedSjf()
    pol.setup(sim, limit=300)
    run_episode(pol, sim, 0)
    assert pol.fresh_legal > 50, pol.fresh_legal
    if case in ("pai-hetero-congested", "pai-replay"):
        # queues: other jobs checked at a kept cell, some of them illegal there, and kept cells
        # gone stale by the next decision point
        assert pol.checked > pol.fresh_legal and pol.illegal > 0, (pol.checked, pol.illegal)
        assert pol.stale_differs > 0, pol.stale_differs


def test_reset_forgets_the_kept_cell() -> None:
    sim = make_simulator(load_scenario("default"))
    run_episode(FirstFit(), sim, 0)  # type: ignore[arg-type]
    sim.reset(1)
    assert sim.legality._fit_kept[1] is None
