"""The workload draw's and the reset's cheaper paths (docs/notes/2026-12-02-reset-and-draw.md):
the specs made by ``job._new_spec_slots`` (the type's allocation, the slots written as
pointers; ``synthetic`` calls it in C), the services through ``new_spec``, ``synthetic._fixed``
without the text where that is exact, the sweeps' times in one typed pass, and the job records
by ``state.new_record``. Each against what it replaced (the f-string, ``JobSpec(...)``, the
sweeps' numpy formula, ``JobState(spec)``), compiled and interpreted."""

from __future__ import annotations

import gc
import sys
from dataclasses import fields

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import ScenarioWorkload, build_workload, make_simulator
from gpu_sharing_env.sim.state import JobLedger, JobState, ServingState, new_record
from gpu_sharing_env.workload import job as job_mod
from gpu_sharing_env.workload import synthetic
from gpu_sharing_env.workload.job import JobKind, JobSpec, JobSpecError, ServiceSpec, new_spec
from gpu_sharing_env.workload.services import ServiceWorkloadConfig, generate_services
from gpu_sharing_env.workload.synthetic import SyntheticWorkloadConfig, generate_workload


def _values(spec: JobSpec) -> list[object]:
    return [getattr(spec, f.name) for f in fields(JobSpec)]


def _args(i: int = 7, **kw: object) -> list[object]:
    """``new_spec``'s positional arguments (a valid offline spec; ``kw`` replaces fields)."""
    base: dict[str, object] = dict(
        job_id=i, kind=JobKind.OFFLINE, model="resnet50", submit_s=12.5, num_gpus=2,
        gpu_frac=1.0, mem_gb=16.0, cpu_cores=4.0, work_s=3600.0, est_work_s=3600.0,
        true_mem_gb=9.5, gpu_types=("V100-16GB",), checkpoint_interval_s=1800.0, group="g3",
        user="u1", priority=1, service=None,
    )  # fmt: skip
    base.update(kw)
    return [base[f.name] for f in fields(JobSpec)]


# ------------------------------------------------------------------------------- the specs
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"true_mem_gb": -1.0},  # (the default: __post_init__ writes mem_gb)
        {"num_gpus": 1, "gpu_frac": 0.5, "gpu_types": ()},
        {"submit_s": 3, "work_s": 10, "est_work_s": np.float64(9.0)},  # (not plain floats)
        {"kind": JobKind.ONLINE, "service": ServiceSpec(50.0, 8, 10.0, 20.0, 600.0, 0.0, 0.1)},
    ],
)
def test_new_spec_is_the_dataclass_spec(kw: dict[str, object]) -> None:
    args = _args(**kw)
    made = new_spec(*args)
    ref = JobSpec(*args)
    assert type(made) is JobSpec
    assert made == ref
    for a, b in zip(_values(made), _values(ref), strict=True):
        assert type(a) is type(b) and (a is b or a == b)
    # (the C call synthetic.py makes, and the module's name for it: the same function)
    assert job_mod._new_spec_slots(*args) == ref


@pytest.mark.parametrize(
    "kw", [{"model": "nope"}, {"num_gpus": 0}, {"gpu_frac": 0.5}, {"mem_gb": float("nan")},
           {"kind": JobKind.ONLINE}, {"work_s": -1.0}],
)  # fmt: skip
def test_new_spec_raises_as_the_dataclass(kw: dict[str, object]) -> None:
    args = _args(**kw)
    with pytest.raises(JobSpecError) as want:
        JobSpec(*args)
    with pytest.raises(JobSpecError) as got:
        new_spec(*args)
    assert str(got.value) == str(want.value)


def test_specs_hold_and_free_their_fields() -> None:
    """A spec's fields are counted references: made, copied with a new estimate and freed,
    every field object's count is back where it was."""
    user = "".join(["user-", "x" * 20])  # (a fresh string, no other holder)
    types = tuple(["A100-40GB"])
    before = sys.getrefcount(user), sys.getrefcount(types)
    specs = [new_spec(*_args(i, user=user, gpu_types=types)) for i in range(500)]
    copies = [s.with_estimate(100.0 + i) for i, s in enumerate(specs)]
    assert all(c.user is user and c.gpu_types is types for c in copies)
    assert sys.getrefcount(user) == before[0] + 1000
    assert [c.est_work_s for c in copies[:3]] == [100.0, 101.0, 102.0]
    del specs, copies
    gc.collect()
    assert (sys.getrefcount(user), sys.getrefcount(types)) == before


def test_services_are_the_dataclass_specs() -> None:
    """``generate_services`` through ``new_spec``: each spec equals ``JobSpec(...)`` with the
    keywords it passed before (the defaults left to the dataclass)."""
    for params in ({"num_services": 3}, {"num_services": 5, "lifetime_s": 7200.0}):
        cfg = ServiceWorkloadConfig(**params)  # type: ignore[arg-type]
        for seed in range(3):
            out = generate_services(cfg, np.random.default_rng(seed), 86_400.0, 40)
            assert len(out) == cfg.num_services
            for i, s in enumerate(out):
                ref = JobSpec(
                    job_id=40 + i, kind=JobKind.ONLINE, model=s.model, submit_s=cfg.submit_s,
                    num_gpus=1, gpu_frac=1.0, mem_gb=s.mem_gb, cpu_cores=cfg.cpu_cores,
                    work_s=s.work_s, est_work_s=s.work_s, user=f"svc{i}",
                    priority=cfg.priority, service=s.service,
                )  # fmt: skip
                assert s == ref and s.true_mem_gb == s.mem_gb
                for a, b in zip(_values(s), _values(ref), strict=True):
                    assert type(a) is type(b)


# ------------------------------------------------------------------------- the rounding
def _ties(n: int, count: int) -> list[float]:
    """Doubles nearest ``(k + 1/2) / 10 ** n`` and their two neighbours (the ties' sides)."""
    out: list[float] = []
    for k in range(count):
        v = (k + 0.5) / 10**n
        out += [v, float(np.nextafter(v, 0.0)), float(np.nextafter(v, np.inf))]
    return out


def test_fixed_is_the_f_string() -> None:
    rng = np.random.default_rng(5)
    scale = np.array([1.0, 10.0, 100.0, 1e4, 1e7, 1e12])
    vals = (rng.random(30_000) * scale[rng.integers(0, scale.size, 30_000)]).tolist()
    specials = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 0.5, 1.5, 2.5, 0.125, 0.375, 4.5e15, 1e16,
                1e300, float("inf"), float("-inf"), float("nan")]  # fmt: skip
    for n in (0, 1, 2, 3, 4, 6, 10, 17, 22, 23):
        xs = vals[:: 1 if n <= 3 else 5] + _ties(n, 3000 if n <= 3 else 300) + specials
        xs += [-x for x in xs[:2000]]
        for x in xs:
            got, want = synthetic._fixed(x, n), float(f"{x:.{n}f}")
            assert repr(got) == repr(want), (x, n)  # (repr: -0.0 and nan told apart)


# --------------------------------------------------------------------------- the sweeps
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"group_size_min": 2, "group_size_mean": 2.5},
        {"group_size_min": 4, "group_size_mean": 12.0, "burst_spacing_s": 900.0},
        {"burst_spacing_s": 0.0},
        {"arrivals_per_h": 40.0, "burst_gap_h": 2.0},
    ],
)
def test_sweeps_are_numpys_rows(params: dict[str, object]) -> None:
    """The sweeps' typed pass (``_sweep_times``, compiled) gives numpy's padded rows'
    (``_sweep_rows``, interpreted) times and groups, on the sweeps ``_sweeps`` draws; and
    ``_sweeps`` itself returns them."""
    cfg = SyntheticWorkloadConfig(**params)  # type: ignore[arg-type]
    for seed in range(4):
        for t0, t1 in ((0.0, 86_400.0), (-7 * 86_400.0, 3_600.0), (0.0, 600.0)):
            rng = np.random.default_rng(seed)
            dc = synthetic.draw_capsule(rng)
            starts = synthetic._arrivals(cfg, rng, t0, t1, 9 / cfg.burst_gap_h / cfg.arrivals_per_h)
            owner = 5 + synthetic._integers(rng, dc, 9, starts.size)
            p = 1.0 / (cfg.group_size_mean - cfg.group_size_min + 1.0)
            sizes = cfg.group_size_min + synthetic._geometrics(rng, dc, p, starts.size) - 1
            n = int(sizes.sum())
            spacing = cfg.burst_spacing_s
            gaps = synthetic._exponentials(rng, dc, spacing, n) if spacing else np.zeros(n)
            t_w, g_w = synthetic._sweep_rows(starts, sizes, gaps, owner, t1)
            t_out, g_out = np.empty(n), np.empty(n, dtype=np.intp)
            m = synthetic._sweep_times(starts, sizes, gaps, owner, t1, t_out, g_out)
            assert t_out[:m].tobytes() == t_w.tobytes()
            assert g_out[:m].astype(np.int64).tobytes() == g_w.tobytes()
            # ``_sweeps`` draws the same and returns those (int64 groups)
            again = np.random.default_rng(seed)
            t, g = synthetic._sweeps(cfg, again, synthetic.draw_capsule(again), 5, 9, t0, t1)
            assert t.dtype == np.float64 and g.dtype == np.int64
            assert t.tobytes() == t_w.tobytes() and g.tobytes() == g_w.tobytes()
            assert again.random() == rng.random()  # (the stream after: the same)


def test_sweep_times_by_hand() -> None:
    starts = np.array([0.0, 100.0, 5.0])
    sizes = np.array([3, 1, 2], dtype=np.int64)
    gaps = np.array([9.0, 1.0, 2.0, 7.0, 8.0, 0.25])  # (each sweep's first gap not used)
    owner = np.array([4, 5, 6], dtype=np.int64)
    t_out, g_out = np.empty(6), np.empty(6, dtype=np.intp)
    m = synthetic._sweep_times(starts, sizes, gaps, owner, 50.0, t_out, g_out)
    assert m == 5
    assert t_out[:m].tolist() == [0.0, 1.0, 3.0, 5.0, 5.25]
    assert g_out[:m].tolist() == [4, 4, 4, 6, 6]


# ------------------------------------------------------------------------ the whole draw
def test_draw_is_the_same_episode_to_episode() -> None:
    """Two draws from equal generators give equal jobs (``JobSpec`` equality, field types
    included), and a draw leaves no state behind that changes the next."""
    w = build_workload(load_scenario("default"))
    assert isinstance(w, ScenarioWorkload)
    cfg = w.syn_cfg
    a = generate_workload(cfg, np.random.default_rng(11), 86_400.0).jobs
    generate_workload(cfg, np.random.default_rng(12), 86_400.0)
    b = generate_workload(cfg, np.random.default_rng(11), 86_400.0).jobs
    assert len(a) > 20 and a == b
    for x, y in zip(a, b, strict=True):
        assert [type(v) for v in _values(x)] == [type(v) for v in _values(y)]
        assert x.job_id == a.index(x)


# -------------------------------------------------------------------------- the records
def _fields(obj: object, names: tuple[str, ...]) -> list[object]:
    return [getattr(obj, n) for n in names]


def _same(a: list[object], b: list[object]) -> bool:
    return all(
        type(x) is type(y) and (x is y or x == y or (x != x and y != y))  # (nan: nan)
        for x, y in zip(a, b, strict=True)
    )


def test_new_record_is_the_constructed_record() -> None:
    online = JobSpec(*_args(kind=JobKind.ONLINE, service=ServiceSpec(50.0, 8, 1.0, 2.0)))
    for spec in (JobSpec(*_args()), online):
        made, ref = new_record(spec), JobState(spec)
        assert type(made) is JobState and made.spec is spec
        assert made.online is (spec.kind is JobKind.ONLINE)
        plain = tuple(n for n in JobState.__slots__ if n not in ("serving", "ledger"))
        assert _same(_fields(made, plain), _fields(ref, plain))
        for sub, cls in (("serving", ServingState), ("ledger", JobLedger)):
            a, b = getattr(made, sub), getattr(ref, sub)
            assert type(a) is cls and _same(_fields(a, cls.__slots__), _fields(b, cls.__slots__))
            assert _same(_fields(a, cls.__slots__), _fields(cls(), cls.__slots__))
    # each record its own containers and sub-records
    r1, r2 = new_record(online), new_record(online)
    for n in ("gpus", "mig", "frac", "serving", "ledger"):
        assert getattr(r1, n) is not getattr(r2, n)
    r1.gpus.append(3)
    r1.frac[3] = 0.5
    assert r2.gpus == [] and r2.frac == {}


def test_reset_makes_fresh_records_each_episode() -> None:
    sim = make_simulator(load_scenario("default"))
    sim.reset(5)
    first = dict(sim.jobs)
    for _ in range(40):
        sim.advance()
        if sim.done:
            break
    sim.reset(5)
    assert sim.jobs.keys() == first.keys()
    for jid, st in sim.jobs.items():
        assert st is not first[jid] and st.serving is not first[jid].serving
        assert st.status.name == "FUTURE" or st.spec.submit_s == 0.0
        assert st.ledger.attempts == 0 or st.spec.submit_s == 0.0
