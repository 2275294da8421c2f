"""``JobSpec.online`` and a spec's checks read ``JobKind.ONLINE`` once, at import
(``workload/job.py``'s ``_ONLINE``), not from the enum class at every call.
The candidates' build reads the statuses it tests the same way (``envs/candidates.py``'s
``_RUNNING``, ``_QUEUED``).

On Python 3.11 an enum class's attribute read (``JobKind.ONLINE``) goes through
``EnumType.__getattr__``'s hook: ``type.__getattribute__`` called through a fresh method-wrapper
(docs/notes/2026-12-01-step-object-overhead.md). The test counts such reads with a counting
``EnumType.__getattribute__``, which every enum class attribute read then calls.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from gpu_sharing_env.sim.view import JobView
from gpu_sharing_env.workload.job import JobKind, JobSpec, JobSpecError, ServiceSpec
from tests.helpers import job

SERVICE = ServiceSpec(slo_ms=100.0, batch_size=8, base_rps=10.0, peak_rps=20.0)


BASE = job(1, 100.0)


def _spec(kind: JobKind, service: ServiceSpec | None = None) -> JobSpec:
    """``tests.helpers``' spec, of ``kind`` with ``service`` (made and checked as any spec)."""
    return replace(BASE, kind=kind, service=service)


def _count_reads(
    monkeypatch: pytest.MonkeyPatch, of: type, counted: Callable[[], bool] = lambda: True
) -> list[str]:
    """The names read from the enum class ``of`` as class attributes from now on, while
    ``counted()``."""
    seen: list[str] = []
    plain = type.__getattribute__

    def counting(cls: type, name: str) -> object:
        if cls is of and counted():
            seen.append(name)
        return plain(cls, name)

    monkeypatch.setattr(enum.EnumType, "__getattribute__", counting, raising=False)
    return seen


@pytest.fixture
def enum_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names read from ``JobKind`` as class attributes while the test runs."""
    yield _count_reads(monkeypatch, JobKind)


def test_online_is_the_kind() -> None:
    assert _spec(JobKind.ONLINE, SERVICE).online is True
    assert _spec(JobKind.OFFLINE).online is False
    view = JobView.__new__(JobView)
    object.__setattr__(view, "kind", JobKind.ONLINE)
    assert view.online is True
    object.__setattr__(view, "kind", JobKind.OFFLINE)
    assert view.online is False


def test_a_service_is_set_exactly_for_online_jobs() -> None:
    with pytest.raises(JobSpecError, match="service"):
        _spec(JobKind.ONLINE)
    with pytest.raises(JobSpecError, match="service"):
        _spec(JobKind.OFFLINE, SERVICE)


def test_the_counter_sees_an_enum_class_read(enum_reads: list[str]) -> None:
    # (the fixture's own check: a read of ``JobKind.ONLINE`` is counted)
    assert JobKind.ONLINE is not None
    assert enum_reads == ["ONLINE"]


def test_online_and_the_checks_read_no_enum_class_attribute(enum_reads: list[str]) -> None:
    online, offline = JobKind.ONLINE, JobKind.OFFLINE  # (read before the count starts)
    enum_reads.clear()
    on, off = _spec(online, SERVICE), _spec(offline)
    assert (on.online, off.online) == (True, False)
    view = JobView.__new__(JobView)
    object.__setattr__(view, "kind", online)
    assert view.online
    assert enum_reads == []


def test_the_candidates_build_reads_no_enum_class_attribute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``envs/candidates.py`` reads the statuses it tests from module globals (a build ran ~9
    # ``Status.*`` class reads a step): none is read while a build or its table is made
    import gymnasium as gym
    import numpy as np

    from gpu_sharing_env.envs.candidates import CandidateBuilder
    from gpu_sharing_env.sim.state import Status
    from tests.test_env import _step_legal

    inside = [0]
    builds = [0]

    def wrapped(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            inside[0] += 1
            builds[0] += 1
            try:
                return method(*args, **kwargs)
            finally:
                inside[0] -= 1

        return call

    for name in ("build", "_assemble"):
        monkeypatch.setattr(CandidateBuilder, name, wrapped(getattr(CandidateBuilder, name)))
    seen = _count_reads(monkeypatch, Status, lambda: inside[0] > 0)
    env = gym.make("GpuSharing-v2", scenario="default")
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    for _ in range(120):
        _, _, done, cut, info = _step_legal(env, info, rng)
        if done or cut:
            _, info = env.reset(seed=1)
    env.close()
    assert inside[0] == 0 and builds[0] > 120
    assert seen == []
