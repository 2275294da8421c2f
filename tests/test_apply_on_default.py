"""``Simulator.apply``'s leaner paths on ``default`` (issue 51; 2026-12-02 note
``docs/notes/2026-12-02-apply-on-default.md``).

Checked here, compiled and interpreted alike: ``MigLayouts.take``/``release`` (the MIG profiles'
facts read as plain values from ``_MigTables.profile_facts``, the candidates without a sort, a
new instance made by C calls compiled) leave the same instances, slice masks and compute counts
as the code they replace (kept below as ``_RefLayouts``) over random takes and releases on
every MIG GPU type; ``_last_fitting`` (compiled, the bisection over the floats' bits in C) is
the Python bisection's float bit for bit, and the greatest float that fits; ``Legality.
check_fields`` (``Simulator.apply``'s check of a decision's slots) answers what ``check(d)``
answers for legal and illegal decisions, suspensions included. ``tests/test_golden.py`` and
``tests/test_compiled.py`` compare whole episodes with the recorded ones and across modes.
"""

from __future__ import annotations

import math
import struct
from dataclasses import replace

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.fleet import cluster as cluster_mod
from gpu_sharing_env.fleet.cluster import MigInstance, MigLayouts
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import SUSPEND, Decision
from gpu_sharing_env.sim.state import Status


class _RefLayouts(MigLayouts):
    """``MigLayouts.take``/``release`` as they were before (2026-12-02, main ``188982c``)."""

    def take(self, job, gpu, slices):  # type: ignore[no-untyped-def]
        f = self.fleet
        t = int(f.type_idx[gpu])
        gt = f.types[t]
        occ = int(self.occ[gpu])
        cands = sorted(
            (p for p in gt.mig_profiles if p.compute_slices == slices and p.mem_gb >= job.mem_gb),
            key=lambda p: p.mem_gb,
        )
        for inst in self.instances[gpu]:
            if inst.job_id is None and any(inst.profile == p.name for p in cands):
                inst.job_id = job.job_id
                self._mark_ref(gpu, inst, busy=True)
                return inst, False
        for p_idx, prof in enumerate(gt.mig_profiles):
            if prof not in cands:
                continue
            start = int(f.mig.first_start[t, occ, p_idx])
            if start < 0 or not f.mig.creatable[t, occ, self.used[gpu], p_idx]:
                continue
            mask = prof.slice_mask(start)
            self.instances[gpu] = [
                i for i in self.instances[gpu] if i.job_id is not None or not (i.mask & mask)
            ]
            inst = MigInstance(prof.name, start, mask, prof.compute_slices, job.job_id)
            self.instances[gpu].append(inst)
            self._mark_ref(gpu, inst, busy=True)
            return inst, True
        raise RuntimeError("no instance")

    def release(self, job_id, gpu):  # type: ignore[no-untyped-def]
        for inst in self.instances[gpu]:
            if inst.job_id == job_id:
                self._mark_ref(gpu, inst, busy=False)
                inst.job_id = None
                break

    def _mark_ref(self, gpu, inst, busy):  # type: ignore[no-untyped-def]
        sign = 1 if busy else -1
        self.occ[gpu] = int(self.occ[gpu]) ^ inst.mask
        self.used[gpu] += sign * inst.compute


def _state(ml: MigLayouts) -> tuple[object, ...]:
    insts = [
        [(i.profile, i.start, i.mask, i.compute, i.job_id) for i in row] for row in ml.instances
    ]
    for row in ml.instances:
        for i in row:
            assert type(i) is MigInstance
            assert type(i.start) is int and type(i.mask) is int and type(i.compute) is int
    return insts, ml.occ.tolist(), ml.used.tolist(), ml.occ.dtype, ml.used.dtype


@pytest.mark.parametrize("scenario", ["mig-a100", "default"])
def test_mig_take_release_as_before(scenario: str) -> None:
    """Random takes (every profile size, memories around the profiles') and releases on each
    MIG-capable GPU: the same instance chosen or made, the same flag, layouts and counts."""
    sim = make_simulator(load_scenario(scenario))
    sim.reset(5)
    fleet = sim.cluster.fleet
    gpus = [g for g in range(fleet.n_gpus) if fleet.mig_capable[g]]
    if not gpus:
        pytest.skip("no MIG-capable GPU")
    new, ref = MigLayouts(fleet), _RefLayouts(fleet)
    spec0 = next(iter(sim.table.jobs.values())).spec
    rng = np.random.default_rng(7)
    held: dict[int, list[int]] = {g: [] for g in gpus}
    made = 0
    for step in range(3000):
        g = gpus[int(rng.integers(len(gpus)))]
        if held[g] and rng.random() < 0.45:
            jid = held[g].pop(int(rng.integers(len(held[g]))))
            new.release(jid, g)
            ref.release(jid, g)
        else:
            gt = fleet.types[int(fleet.type_idx[g])]
            prof = gt.mig_profiles[int(rng.integers(len(gt.mig_profiles)))]
            mem = prof.mem_gb * float(rng.choice([0.3, 0.99, 1.0, 1.01]))
            job = replace(spec0, job_id=10_000 + step, mem_gb=mem)
            try:
                a = ref.take(job, g, prof.compute_slices)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    new.take(job, g, prof.compute_slices)
                continue
            b = new.take(job, g, prof.compute_slices)
            assert (b[0].profile, b[0].start, b[0].mask, b[0].compute, b[0].job_id, b[1]) == (
                a[0].profile, a[0].start, a[0].mask, a[0].compute, a[0].job_id, a[1]
            )  # fmt: skip
            held[g].append(job.job_id)
            made += 1
        assert _state(new) == _state(ref)
    assert made > 500


def _order(x: float) -> int:
    i = struct.unpack("<q", struct.pack("<d", x))[0]
    return i if i >= 0 else -(i & 0x7FFF_FFFF_FFFF_FFFF)


def test_last_fitting_as_the_python_bisection() -> None:
    """``_last_fitting`` (compiled: in C) is ``_last_fitting_py``'s float bit for bit, fits,
    and the next float up does not (random and edge memories and capacities)."""
    rng = np.random.default_rng(3)
    cases = [(1e-9, 0.0), (80.0, 80.0 + 1e-9), (79.9, 80.000000001), (1e-300, 1e300), (5.0, 5.0)]
    for _ in range(3000):
        cap = float(rng.choice([16.0, 24.0, 40.0, 80.0, 141.0])) + 1e-9
        mem = (
            float(rng.uniform(1e-6, cap * 1.5))
            if rng.random() < 0.8
            else float(rng.uniform(0, 1e-3)) + 1e-12
        )
        cases.append((mem, cap))
    for mem, cap in cases:
        x = cluster_mod._last_fitting.__wrapped__(mem, cap)
        y = cluster_mod._last_fitting_py(mem, cap)
        assert struct.pack("<d", x) == struct.pack("<d", y), (mem, cap, x, y)
        assert x + mem <= cap
        assert math.nextafter(x, math.inf) + mem > cap
        assert _order(x) == _order(y)


def _oracle(sim: object, d: Decision) -> tuple[bool, str | None]:
    """What ``check(d)`` must answer, from the parts it delegates to (the lifecycle's
    ``check_suspend`` and ``check_migration``, the queue's window, the cluster's ``check``):
    (exact, answer), where not exact only the answer's None-ness is fixed (a queued job's fast
    paths answer None for exactly the cells the cluster allows)."""
    life, jobs = sim.lifecycle, sim.table.jobs  # type: ignore[attr-defined]
    if sim.done:  # type: ignore[attr-defined]
        return True, "the episode is over"
    st = jobs.get(d.job_id)
    if d.suspends:
        return True, life.check_suspend(d.job_id, st)
    if st is not None and st.status is Status.RUNNING:
        return True, life.check_migration(st, d.gpu, d.option)
    if st is None or st.status is not Status.QUEUED:
        return True, f"job {d.job_id} is neither queued nor running"
    if d.job_id not in [s.job_id for s in sim.window_jobs()]:  # type: ignore[attr-defined]
        return False, "outside the window"
    return False, sim.cluster.check(st.spec, d.gpu, d.option)  # type: ignore[attr-defined]


@pytest.mark.parametrize("scenario", ["default", "mig-a100"])
def test_check_fields_answers_as_check(scenario: str) -> None:
    """At decision points of an episode: ``check_fields`` of a decision's fields answers what
    the parts ``check`` delegates to answer (:func:`_oracle`), and ``check(d)`` the same, for
    legal cells, illegal ones, out-of-range ones, suspensions and unknown jobs; a legal one
    applied keeps the episode going."""
    sim = make_simulator(load_scenario(scenario))
    sim.reset(4)
    leg = sim.legality
    rng = np.random.default_rng(11)
    n_opt = len(sim.options)
    sim.advance()
    seen_legal = seen_illegal = 0
    for _ in range(150):
        if sim.done:
            break
        ids = list(sim.table.jobs)
        decisions = []
        for _ in range(12):
            jid = ids[int(rng.integers(len(ids)))] if rng.random() < 0.95 else 10**9
            if rng.random() < 0.15:
                decisions.append(Decision(jid, SUSPEND, SUSPEND))
            else:
                gpu = int(rng.integers(-1, sim.cluster.n_gpus + 1))
                decisions.append(Decision(jid, gpu, int(rng.integers(-1, n_opt + 1))))
        for d in decisions:
            exact, want = _oracle(sim, d)
            got = leg.check_fields(d.job_id, d.gpu, d.option, d.batch_size, d.suspends)
            assert (got == want) if exact else ((got is None) == (want is None)), (d, got, want)
            assert leg.check(d) == got
            seen_legal += want is None
            seen_illegal += want is not None
        legal = [d for d in decisions if leg.check(d) is None]
        if legal:
            sim.apply(legal[int(rng.integers(len(legal)))])
        else:
            jobs = [s.job_id for s in sim.window_jobs() if sim.placeable(s.job_id)]
            if jobs:
                jid = jobs[0]
                cell = int(np.flatnonzero(sim.mask(jid))[0])
                sim.apply(Decision(jid, *divmod(cell, n_opt)))
        sim.advance()
    assert seen_legal > 10 and seen_illegal > 100
