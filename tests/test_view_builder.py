"""``ClusterView.job`` builds its views without ``JobView.__init__`` (``view._new_view``, the
fields written through the slots' descriptors): the same views as ``JobView(**fields)``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim import view as view_mod
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.sim.state import Status
from gpu_sharing_env.sim.view import ClusterView, JobView


def reference_view(sim: Simulator, job_id: int) -> JobView:
    """A job's view through ``JobView``'s own ``__init__``, by keyword (what ``ClusterView.job``
    built before ``_new_view``)."""
    st = sim.jobs[job_id]
    s, sv, led = st.spec, st.serving, st.ledger
    return JobView(
        job_id=s.job_id,
        kind=s.kind,
        model=s.model,
        submit_s=s.submit_s,
        num_gpus=s.num_gpus,
        gpu_frac=s.gpu_frac,
        mem_gb=s.mem_gb,
        cpu_cores=s.cpu_cores,
        est_work_s=s.est_work_s,
        gpu_types=s.gpu_types,
        priority=s.priority,
        group=s.group,
        service=s.service,
        status=st.status,
        gpus=tuple(st.gpus),
        option=st.option,
        work_done=st.work_done,
        attempts=led.attempts,
        wait_s=sim.now - led.enqueue_t if st.status is Status.QUEUED else 0.0,
        rps=sv.rps,
        p99_ms=sv.p99_ms,
        batch_size=st.effective_batch_size,
        user=s.user,
    )


def same_fields(a: JobView, b: JobView) -> bool:
    """Field for field: the same type and value (``==`` alone would let ``1 == 1.0`` pass)."""
    for f in fields(JobView):
        x: Any = getattr(a, f.name)
        y: Any = getattr(b, f.name)
        if type(x) is not type(y) or x != y:
            return False
    return True


def first_fit_views(sim: Simulator, steps: int, scope: str = "window") -> Iterator[ClusterView]:
    """Run ``first_fit`` for up to ``steps`` steps in decision scope ``scope``, yielding the
    view of each decision before the policy decides on it."""
    policy = make_policy("first_fit")
    sim.reset(0)
    sim.set_decision_scope(scope)
    policy.reset(0)
    for _ in range(steps):
        if sim.done:
            break
        if not sim.needs_decision():
            sim.advance()
            continue
        view = ClusterView(sim)
        yield view
        d = policy.decide(view)
        if d is None:
            sim.advance()
        else:
            sim.apply(d)


def views_checked(sim: Simulator, steps: int) -> int:
    """Run ``first_fit`` for ``steps`` decisions, comparing every job's view (queued, running,
    done, online) with :func:`reference_view` at each; returns the views compared."""
    n = 0
    for view in first_fit_views(sim, steps):
        for jid in sim.jobs:
            got = view.job(jid)
            assert type(got) is JobView
            assert same_fields(got, reference_view(sim, jid)), jid
            assert got == reference_view(sim, jid)
            n += 1
    return n


@pytest.mark.parametrize("scenario", ["default", "pai-busy"])
def test_views_equal_init_built(scenario: str) -> None:
    sim = make_simulator(load_scenario(scenario))
    assert views_checked(sim, 60) > 500


def test_a_builder_with_two_fields_swapped_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison catches a builder that writes a field from the wrong value (here
    ``mem_gb`` and ``cpu_cores`` swapped, the planted mutation)."""
    new_view = view_mod._new_view

    def swapped(*values: Any) -> JobView:
        v = list(values)
        names = [f.name for f in fields(JobView)]
        i, j = names.index("mem_gb"), names.index("cpu_cores")
        v[i], v[j] = v[j], v[i]
        return new_view(*v)  # type: ignore[no-any-return]

    monkeypatch.setattr(view_mod, "_new_view", swapped)
    sim = make_simulator(load_scenario("default"))
    with pytest.raises(AssertionError):
        views_checked(sim, 60)
