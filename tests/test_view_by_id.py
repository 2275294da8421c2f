"""``ClusterView``'s by-id reads (no ``JobView`` built) give what the views give: a job's request
(``request``), the queued jobs' waits (``queued_wait_s``) and the decidable ids
(``decidable_ids``), at every decision of episodes with offline jobs, online services and both
decision scopes; and the fleet facts a view holds in its own fields are its episode's."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.view import episode_token
from tests.test_view_builder import first_fit_views


def _bits(values: list[Any]) -> list[tuple[type, Any]]:
    """Each value with its type (``==`` alone would let ``1 == 1.0`` pass)."""
    return [(type(v), v) for v in values]


def checked(sim: Simulator, scope: str, steps: int) -> dict[str, int]:
    """Run ``first_fit`` for ``steps`` steps in decision scope ``scope``, comparing the by-id
    reads with the views' fields at each decision; returns what was compared."""
    seen = {"requests": 0, "online": 0, "waits": 0, "decisions": 0}
    for view in first_fit_views(sim, steps, scope):
        ids = view.decidable_ids()
        assert ids == [j.job_id for j in view.decidable]
        waits = view.queued_wait_s(ids)
        assert _bits(waits) == _bits([view.job(i).wait_s for i in ids])
        seen["waits"] += len(ids)
        for jid in sim.jobs:
            jv = view.job(jid)
            want = (jv.online, jv.model, jv.num_gpus, jv.gpu_frac, jv.mem_gb, jv.gpu_types)
            got = view.request(jid)
            assert _bits(list(got)) == _bits(list(want)), jid
            seen["requests"] += 1
            seen["online"] += jv.online
        fixed = view._fixed
        assert view.episode is fixed.episode is episode_token(sim)
        assert view.options is sim.options is fixed.options
        assert view.gpu_types is fixed.gpu_types and view.type_name is fixed.type_name
        assert view.node_of is fixed.node_of
        seen["decisions"] += 1
    return seen


@pytest.mark.parametrize("scope", ["window", "queue"])
@pytest.mark.parametrize("scenario", ["default", "pai-busy"])
def test_by_id_reads_are_the_views(scenario: str, scope: str) -> None:
    seen = checked(make_simulator(load_scenario(scenario)), scope, 80)
    assert seen["decisions"] > 20 and seen["waits"] > 20 and seen["requests"] > 500, seen
    if scenario == "default":
        assert seen["online"] > 0, seen  # (services' requests compared too)
