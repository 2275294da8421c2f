"""``JobSpec``'s copies and new specs written slot by slot (``workload/job.py``).

Compiled, ``with_estimate``'s copy (``_copy_with_slots``) and ``new_spec``
(``_new_spec_slots``) read and write the fields through CPython's ``PyMember_GetOne`` /
``PyMember_SetOne`` (what a slot descriptor's ``__get__``/``__set__`` call); interpreted, the
same functions go through the descriptors. Both must give what the generated functions (the
interpreted path's ``_make_copy_with`` / ``_make_new_spec``) give: the same field objects,
the same errors, and no reference leaked or lost.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import fields

import pytest

from gpu_sharing_env.workload import job
from gpu_sharing_env.workload.job import MODEL_CLASSES, JobKind, JobSpec, JobSpecError

NAMES = [f.name for f in fields(JobSpec)]


def _values(r: random.Random, valid: bool = True) -> list[object]:
    frac = r.choice([0.25, 0.5, 1.0])
    v: list[object] = [
        r.randrange(10**6),  # job_id
        JobKind.OFFLINE,
        r.choice(MODEL_CLASSES),
        r.uniform(0, 1e6),  # submit_s
        1 if frac < 1 else r.choice([1, 2, 4, 8]),
        frac,
        round(r.uniform(0.5, 80), 2),  # mem_gb
        round(r.uniform(1, 32), 1),  # cpu_cores
        r.lognormvariate(6, 2),  # work_s
        r.lognormvariate(6, 2),  # est_work_s
        r.choice([-1.0, r.uniform(0, 90)]),  # true_mem_gb
        r.choice([(), ("T4",), ("A100-40GB", "A100-80GB")]),
        1800.0,
        r.choice(["", f"g{r.randrange(50)}"]),
        r.choice(["", f"u{r.randrange(100)}"]),
        r.randrange(2),
        None,
    ]
    if not valid:  # one field broken
        i, bad = r.choice([(2, "nope"), (3, -1.0), (4, 0), (5, 1.5), (8, math.nan), (9, 0.0)])
        v[i] = bad
    return v


def _same(a: JobSpec, b: JobSpec) -> None:
    assert type(a) is type(b) is JobSpec
    for n in NAMES:  # the same objects, not only equal ones
        assert getattr(a, n) is getattr(b, n), n


def test_the_slot_copy_is_the_generated_copy() -> None:
    r = random.Random(7)
    generated = job._make_copy_with()
    for _ in range(400):
        spec = JobSpec(*_values(r))
        est = r.lognormvariate(5, 2)
        got = job._copy_with_slots(spec, est)
        _same(got, generated(spec, est))
        assert got.est_work_s is est and got == spec.with_estimate(est)
        assert got is not spec


def test_the_slot_new_spec_is_the_generated_one_or_its_error() -> None:
    r = random.Random(11)
    generated = job._make_new_spec()
    for k in range(600):
        values = _values(r, valid=k % 3 != 0)
        try:
            want: JobSpec | str = generated(*values)
        except JobSpecError as exc:
            want = str(exc)
        try:
            got: JobSpec | str = job._new_spec_slots(*values)
        except JobSpecError as exc:
            got = str(exc)
        if isinstance(want, str):
            assert got == want
        else:
            assert isinstance(got, JobSpec)
            _same(got, want)
            assert got == JobSpec(*values)


def test_slot_writes_keep_reference_counts() -> None:
    r = random.Random(3)
    spec = JobSpec(*_values(r))
    group = spec.group + "-x"  # a fresh string: only this test refers to it
    spec = job._new_spec_slots(*[group if n == "group" else getattr(spec, n) for n in NAMES])
    est = 123.456
    before_g, before_e = sys.getrefcount(group), sys.getrefcount(est)
    copies = [job._copy_with_slots(spec, est) for _ in range(100)]
    assert sys.getrefcount(group) == before_g + 100
    assert sys.getrefcount(est) == before_e + 100
    del copies
    assert sys.getrefcount(group) == before_g
    assert sys.getrefcount(est) == before_e


def test_a_misplaced_estimate_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the estimate written into the field before it (the check above must see it)."""
    monkeypatch.setattr(job, "_EST", job._EST - 1)
    spec = JobSpec(*_values(random.Random(5)))
    got = job._copy_with_slots(spec, 42.0)
    assert got.est_work_s is not job._make_copy_with()(spec, 42.0).est_work_s
