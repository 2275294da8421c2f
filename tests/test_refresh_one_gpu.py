"""``Rates.refresh`` of one GPU with no node factor moved takes a short path (no record of the
jobs met: docs/notes/2026-12-01-replay-episode.md). Its result must be the general loop's: at
decision points of first-fit episodes on ``default``, ``default-x2``, ``mig-a100`` and a small
PAI-format replay, each busy GPU (and an empty one) is recomputed on two copies of the
simulator, once by the short path and once by the general loop (``fresh=()``: the same GPUs,
none of them fresh), and the jobs' rates, fractions, accrual and completion events, the usage
rows and the stale-GPU set must be equal, bit for bit. At every decision point, each GPU's MPS
SM use (kept by ``Cluster.add``/``remove``, compiled through the typed views) must be the sum of
its residents' shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator
from gpu_sharing_env.sim.view import ClusterView
from gpu_sharing_gym.baselines.pai import SjfPredicted
from gpu_sharing_gym.baselines.reference import FirstFit
from tests.test_fit_kept_check import _pai_replay


def _state(sim: Simulator) -> list[Any]:
    jobs = sim.table.jobs
    running = sorted({j for res in sim.cluster.residents for j in res})
    out: list[Any] = [
        (
            j,
            dict(jobs[j].frac),
            jobs[j].sm_eff,
            jobs[j].rate,
            jobs[j].solo_rate,
            jobs[j].epoch,
            jobs[j].work_done,
            jobs[j].last_t,
            jobs[j].ledger.norm_integral,
            jobs[j].ledger.run_time_s,
        )
        for j in running
    ]
    return [*out, sim.usage.rows(), list(sim.usage.sums), sorted(sim.rates._dirty),
            sim.events.items()]  # fmt: skip


def _sm_used_holds(sim: Simulator) -> int:
    """Each GPU's MPS SM use (``Cluster.sm_used``, kept by ``add`` and ``remove``: compiled,
    through the typed views) is the sum of its residents' options' SM shares where the GPU is
    in MPS mode with a limit, else 0; returns the GPUs holding a share."""
    c = sim.cluster
    jobs = sim.table.jobs
    limit = c.fleet.mps_limit_l
    held = 0
    for g, res in enumerate(c.residents):
        want = 0
        if c.mode[g] == SharingMode.MPS and limit[g]:
            want = sum(sim.options[jobs[j].option].sm_pct for j in res)
        assert c.sm_used[g] == want, (g, int(c.sm_used[g]), want)
        held += want > 0
    return held


class _Comparing:
    """Mixed into a policy: before each decision, GPUs refreshed both ways on copies."""

    def setup(self, sim: Simulator, limit: int) -> None:
        self._sim = sim
        self._limit = limit
        self.calls = self.compared = self.shared = self.sm_held = 0

    def decide(self, view: ClusterView) -> Decision | None:
        self.calls += 1
        self.sm_held += _sm_used_holds(self._sim)
        if self.calls <= self._limit:
            sim = self._sim
            residents = sim.cluster.residents
            busy = [g for g, res in enumerate(residents) if res][:6]
            empty = [g for g, res in enumerate(residents) if not res][:1]
            for g in busy + empty:
                short, loop = sim.copy(), sim.copy()
                for s in (short, loop):
                    s.rates.mark_dirty([g])
                short.rates.refresh([g])
                loop.rates.refresh([g], ())
                assert _state(short) == _state(loop), g
                self.compared += 1
                self.shared += len(residents[g]) > 1
        return super().decide(view)  # type: ignore[misc,no-any-return]


class _FirstFit(_Comparing, FirstFit):
    pass


class _Sjf(_Comparing, SjfPredicted):
    pass


@pytest.mark.parametrize("policy", ["first_fit", "sjf_predicted"])
@pytest.mark.parametrize("case", ["default", "default-x2", "mig-a100", "pai-replay"])
def test_one_gpu_refresh_is_the_loop(case: str, policy: str, tmp_path: Path) -> None:
    cfg = _pai_replay(tmp_path) if case == "pai-replay" else load_scenario(case)
    sim = make_simulator(cfg)
    pol = _FirstFit() if policy == "first_fit" else _Sjf()
    pol.setup(sim, limit=40)
    run_episode(pol, sim, 0)
    assert pol.compared > 100, pol.compared
    assert pol.sm_held > 0 or case == "mig-a100", pol.sm_held
    if case in ("default", "pai-replay"):  # (GPUs shared by several jobs among them)
        assert pol.shared > 0, pol.shared
