"""The one job schema every generator and trace loader produces.

A :class:`JobSpec` is immutable and describes what was *submitted*. Everything a scheduler may
see about a job is here except the fields marked "truth": those are used by the simulator only
and are hidden from policies by the snapshot (see ``gpu_sharing_env.sim.snapshot``).

Units are in the names: ``_s`` seconds, ``_gb`` gigabytes, ``_ms`` milliseconds.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from itertools import repeat
from typing import Any

import numpy as np

#: Model classes the speed model knows; the zoo (``gpu_sharing_env.physics.zoo``) has one profile each.
#: Loaders map unknown trace models onto these; generators draw from them.
MODEL_CLASSES: tuple[str, ...] = (
    "resnet50",
    "resnet18",
    "vgg16",
    "densenet201",
    "inceptionv3",
    "mobilenet",
    "bert",
    "transformer",
    "gpt2",
    "gnn",
    "deepfm",
    "ncf",
    "ppo",
    "yolov3",
    "deepspeech2",
    "cyclegan",
    "lstm",
)


class JobKind(enum.Enum):
    """Offline training (throughput, JCT) or an online inference service (latency SLO)."""

    OFFLINE = "offline"
    ONLINE = "online"


#: ``JobKind.ONLINE`` read once: on Python 3.11 an enum class's attribute read goes through
#: ``EnumType.__getattr__``'s hook, which calls ``type.__getattribute__`` through a fresh
#: method-wrapper (~900 instructions and a collector-tracked object a read, against a module
#: global's dictionary read; docs/notes/2026-12-01-step-object-overhead.md).
_ONLINE = JobKind.ONLINE


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """The online part of an inference service.

    The request rate follows a smooth diurnal curve (MuxFlow, Sec. 2: "smooth over minutes,
    periodic over days"):
    ``rate(t) = base_rps + (peak_rps - base_rps) * (1 + sin(2*pi*(t - phase_s)/period_s)) / 2``
    times a slowly varying multiplicative noise drawn by the simulator from the episode seed.
    """

    slo_ms: float
    batch_size: int
    base_rps: float
    peak_rps: float
    period_s: float = 86_400.0
    phase_s: float = 0.0
    noise_frac: float = 0.05

    def __post_init__(self) -> None:
        _require(self.slo_ms > 0, "service.slo_ms", "must be > 0")
        _require(self.batch_size >= 1, "service.batch_size", "must be >= 1")
        _require(
            0 <= self.base_rps <= self.peak_rps, "service.base_rps", "0 <= base_rps <= peak_rps"
        )
        _require(self.period_s > 0, "service.period_s", "must be > 0")
        _require(0 <= self.noise_frac < 1, "service.noise_frac", "must be in [0, 1)")

    def rate_rps(self, t_s: float) -> float:
        """Noise-free request rate at simulated time ``t_s`` (:func:`wave_rps`)."""
        base = self.base_rps
        return wave_rps(base, self.peak_rps - base, self.phase_s, self.period_s, t_s)


#: ``2.0 * math.pi`` (``2.0 * math.pi * x`` is ``(2.0 * math.pi) * x``).
_TWO_PI = 2.0 * math.pi


def wave_rps(base: float, span: float, phase: float, period: float, t: float) -> float:
    """A service's noise-free request rate at ``t`` (:class:`ServiceSpec`'s diurnal curve):
    ``base + span * (1 + sin(2 pi (t - phase) / period)) / 2`` with ``span = peak - base``.
    The one place of the formula: ``ServiceSpec.rate_rps`` and the online load's updates
    (``sim/ticks.py``, a C call there) call it. Compiled (``job.pxd``), C doubles and libm's
    ``sin`` (``_c_sin``, the function ``math.sin`` calls): the same IEEE operations in the
    same order as the Python floats."""
    x = _TWO_PI * (t - phase) / period
    if COMPILED:
        s = _c_sin(x)  # type: ignore[name-defined]  # noqa: F821
    else:
        s = math.sin(x)
    wave = (1.0 + s) / 2.0
    return base + span * wave


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One submitted job or service.

    Attributes:
        job_id: Unique within a workload; also the deterministic tie-breaker.
        kind: Offline training job or online service.
        model: A key of ``MODEL_CLASSES``.
        submit_s: Arrival time.
        num_gpus: Gang size; all instances start together. 1 for fractional requests.
        gpu_frac: Requested fraction of one GPU (PAI/openb ``gpu_milli``/1000); 1.0 for whole GPUs.
        mem_gb: Declared GPU memory per instance (what the scheduler sees and packs by).
        cpu_cores: vCPUs per GPU instance (PAI: CPU contention slows jobs).
        work_s: Truth. Offline: solo exclusive run time on the reference GPU (V100-16GB) at full
            speed; online: the service lifetime.
        est_work_s: The estimate schedulers see (PAI's recurring-job predictor; configurable error).
        true_mem_gb: Truth. Peak memory actually used; above ``mem_gb`` means a risk of OOM.
        gpu_types: Allowed GPU type names (empty = any), e.g. openb's ``gpu_spec``.
        checkpoint_interval_s: Offline jobs lose progress since their last checkpoint on failure.
        group: Recurring-job group (PAI: most jobs recur); "" when unknown.
        user: Submitting user or virtual cluster; "" when unknown.
        priority: Larger is more important (resource-guarantee vs opportunistic in AntMan).
        service: Online part; set iff ``kind`` is ONLINE.
    """

    job_id: int
    kind: JobKind
    model: str
    submit_s: float
    num_gpus: int
    gpu_frac: float
    mem_gb: float
    cpu_cores: float
    work_s: float
    est_work_s: float
    true_mem_gb: float = -1.0
    gpu_types: tuple[str, ...] = ()
    checkpoint_interval_s: float = 1800.0
    group: str = ""
    user: str = ""
    priority: int = 0
    service: ServiceSpec | None = field(default=None)

    def __post_init__(self) -> None:
        # Every rule of ``_validate`` in one expression, evaluated in the same order (a workload
        # builds ~130 specs per episode reset): only a spec that breaks one pays for the
        # rule-by-rule walk, which raises for the first broken rule.
        isfinite = math.isfinite
        if not (
            self.model in MODEL_CLASSES
            and isfinite(self.submit_s)
            and self.submit_s >= 0
            and self.num_gpus >= 1
            and 0 < self.gpu_frac <= 1
            and (self.gpu_frac == 1 or self.num_gpus == 1)
            and isfinite(self.mem_gb)
            and self.mem_gb > 0
            and isfinite(self.cpu_cores)
            and self.cpu_cores >= 0
            and isfinite(self.work_s)
            and self.work_s > 0
            and isfinite(self.est_work_s)
            and self.est_work_s > 0
            and self.checkpoint_interval_s > 0
            and (self.kind is _ONLINE) == (self.service is not None)
        ):
            self._validate()
        if self.true_mem_gb < 0:
            object.__setattr__(self, "true_mem_gb", self.mem_gb)

    def _validate(self) -> None:
        """Raise :class:`JobSpecError` naming the first rule the spec breaks."""
        _require(self.model in MODEL_CLASSES, "model", f"one of {', '.join(MODEL_CLASSES)}")
        _require(math.isfinite(self.submit_s) and self.submit_s >= 0, "submit_s", "finite, >= 0")
        _require(self.num_gpus >= 1, "num_gpus", "must be >= 1")
        _require(0 < self.gpu_frac <= 1, "gpu_frac", "must be in (0, 1]")
        _require(self.gpu_frac == 1 or self.num_gpus == 1, "gpu_frac", "fractional only for 1 GPU")
        _require(math.isfinite(self.mem_gb) and self.mem_gb > 0, "mem_gb", "finite, > 0")
        _require(math.isfinite(self.cpu_cores) and self.cpu_cores >= 0, "cpu_cores", ">= 0")
        _require(math.isfinite(self.work_s) and self.work_s > 0, "work_s", "finite, > 0")
        _require(math.isfinite(self.est_work_s) and self.est_work_s > 0, "est_work_s", "> 0")
        _require(self.checkpoint_interval_s > 0, "checkpoint_interval_s", "must be > 0")
        _require(
            (self.kind is _ONLINE) == (self.service is not None),
            "service",
            "set exactly for online jobs",
        )

    @property
    def online(self) -> bool:
        return self.kind is _ONLINE

    def with_estimate(self, est_work_s: float) -> JobSpec:
        """``dataclasses.replace(self, est_work_s=est_work_s)``, validated the same way: the
        other fields are this valid spec's, so only the estimate's rule can break (the error
        ``replace`` gives). The copy is made field by field through the slots (``_copy_with``),
        not through ``__init__`` and its checks: a queue's re-estimation makes ~10^5 of them
        in a replay at 1,000 jobs/min (0.6 us a copy against 1.6 us)."""
        if not (math.isfinite(est_work_s) and est_work_s > 0):
            _require(False, "est_work_s", "> 0")
        return _copy_with(self, est_work_s)

    def without_estimate(self) -> JobSpec:
        """This spec with no estimate: ``est_work_s`` NaN (an episode run without the duration
        predictor, ``Simulator.reset(estimates=False)``, where a placeholder could be the
        truth); ``self`` when it has none already. The only spec whose estimate breaks the
        rule ``with_estimate`` and ``__init__`` check."""
        e = self.est_work_s
        if e != e:
            return self
        return _copy_with(self, math.nan)


class JobSpecError(ValueError):
    """A job field breaks a rule; the message names the field and the rule."""


def _require(ok: bool, field_name: str, rule: str) -> None:
    if not ok:
        raise JobSpecError(f"{field_name}: {rule}")


def _make_copy_with() -> Callable[[JobSpec, float], JobSpec]:
    """``JobSpec.with_estimate``'s copy, generated as ``dataclasses`` generates an
    ``__init__``: one line per field, each written through its slot's descriptor (a frozen
    dataclass's own ``__setattr__`` refuses), ``est_work_s`` the new one."""
    names = [f.name for f in fields(JobSpec)]
    env: dict[str, Any] = {f"_set_{n}": getattr(JobSpec, n).__set__ for n in names}
    env.update(_new=object.__new__, _cls=JobSpec)
    lines = ["def copy_with(self, est_work_s):", "    new = _new(_cls)"]
    lines += [f"    _set_{n}(new, {n if n == 'est_work_s' else 'self.' + n})" for n in names]
    lines.append("    return new")
    exec("\n".join(lines), env)
    return env["copy_with"]  # type: ignore[no-any-return]


def _make_new_spec() -> Callable[..., JobSpec]:
    """:data:`new_spec`, generated as ``dataclasses`` generates an ``__init__``: one line per
    field, each written through its slot's descriptor, then ``__post_init__``."""
    names = [f.name for f in fields(JobSpec)]
    env: dict[str, Any] = {f"_set_{n}": getattr(JobSpec, n).__set__ for n in names}
    env.update(_new=object.__new__, _cls=JobSpec)
    lines = [f"def new_spec({', '.join(names)}):", "    new = _new(_cls)"]
    lines += [f"    _set_{n}(new, {n})" for n in names]
    lines += ["    new.__post_init__()", "    return new"]
    exec("\n".join(lines), env)
    return env["new_spec"]  # type: ignore[no-any-return]


#: Whether this module runs compiled (``gpu_sharing_env._compile``): then the slots are read
#: and written through CPython's C API (``job.pxd``, ``_slots.pxd``; there a C global, tested
#: per field at no cost).
COMPILED: bool = not __file__.endswith(".py")

#: Each field's slot descriptor, in field order (``_copy_with_slots``, ``_new_spec_slots``).
_SLOTS: tuple[Any, ...] = tuple(getattr(JobSpec, f.name) for f in fields(JobSpec))
#: ``est_work_s``'s position among them.
_EST: int = [f.name for f in fields(JobSpec)].index("est_work_s")


def _put(obj: object, slot: Any, value: object) -> None:
    """``slot.__set__(obj, value)`` for a slot descriptor ``slot`` of ``obj``'s type: compiled,
    CPython's own ``PyMember_SetOne`` (what the descriptor's ``__set__`` calls after checking
    the object's type; ``_slots.pxd``'s ``slot_set``, cimported by ``job.pxd``) without the
    method call."""
    if COMPILED:
        slot_set(obj, slot, value)  # type: ignore[name-defined]  # noqa: F821
    else:
        slot.__set__(obj, value)


def _take(obj: object, slot: Any) -> object:
    """``slot.__get__(obj)`` where ``obj``'s type is exactly the one ``slot`` belongs to
    (compiled: ``PyMember_GetOne``, which the descriptor calls; ``_slots.pxd``'s
    ``slot_get_checked``); any other object (a subclass, or a stand-in with the same attribute
    names, as ``Cluster``'s tests pass) by ``getattr`` of the slot's name, never a read of
    another type's memory."""
    if COMPILED:
        value = slot_get_checked(obj, slot)  # type: ignore[name-defined]  # noqa: F821
    elif type(obj) is slot.__objclass__:
        value = slot.__get__(obj, JobSpec)
    else:
        value = getattr(obj, slot.__name__)
    return value


def _copy(dst: object, src: object, slot: Any) -> None:
    """``_put(dst, slot, _take(src, slot))``: compiled, ``_slots.pxd``'s ``slot_copy`` (an
    object field's pointer copied with its reference counted, as the two C calls do it)."""
    if COMPILED:
        slot_copy(dst, src, slot)  # type: ignore[name-defined]  # noqa: F821
    else:
        slot.__set__(dst, slot.__get__(src, JobSpec))


def _alloc() -> JobSpec:
    """``object.__new__(JobSpec)``, no field set: compiled, ``_slots.pxd``'s ``plain_new`` (the
    type's ``tp_alloc``, as ``object_new`` calls it) without the method call."""
    if COMPILED:
        return plain_new(JobSpec)  # type: ignore[name-defined,no-any-return]  # noqa: F821
    return object.__new__(JobSpec)


def _copy_with_slots(spec: JobSpec, est_work_s: float) -> JobSpec:
    """:func:`_make_copy_with`'s copy, compiled: every slot read from ``spec`` and written
    into a new object in field order, ``est_work_s`` the new one (``spec`` must be a
    :class:`JobSpec` with every field set, as every spec is)."""
    new = _alloc()
    # (the globals read once: compiled, a typed tuple and a C index, no int boxed a field)
    slots = _SLOTS
    est = _EST
    for i in range(len(slots)):
        if i == est:
            _put(new, slots[i], est_work_s)
        else:
            _copy(new, spec, slots[i])
    return new  # type: ignore[no-any-return]


def _new_spec_slots(
    job_id: int,
    kind: JobKind,
    model: str,
    submit_s: float,
    num_gpus: int,
    gpu_frac: float,
    mem_gb: float,
    cpu_cores: float,
    work_s: float,
    est_work_s: float,
    true_mem_gb: float,
    gpu_types: tuple[str, ...],
    checkpoint_interval_s: float,
    group: str,
    user: str,
    priority: int,
    service: ServiceSpec | None,
) -> JobSpec:
    """:func:`_make_new_spec`'s ``new_spec``, compiled: each field written through its slot
    (:func:`_put`), then ``__post_init__``'s rules (:func:`_rules_hold`; where one breaks, its
    own check). Interpreted, the generated function (:data:`new_spec`), the fastest there;
    compiled, ``synthetic.py`` calls this one in C (``cimport``, ``synthetic.pxd``)."""
    values = (
        job_id,
        kind,
        model,
        submit_s,
        num_gpus,
        gpu_frac,
        mem_gb,
        cpu_cores,
        work_s,
        est_work_s,
        true_mem_gb,
        gpu_types,
        checkpoint_interval_s,
        group,
        user,
        priority,
        service,
    )
    if not COMPILED:
        return _NEW_SPEC_PY(*values)  # type: ignore[misc,no-any-return]
    new = _alloc()
    slots = _SLOTS
    for i in range(len(slots)):
        _put(new, slots[i], values[i])
    if not _rules_hold(values):
        new.__post_init__()  # (a rule broken, or a value not a plain float: its own check)
    elif true_mem_gb < 0:  # (what ``__post_init__`` does after its rules)
        _put(new, _SLOTS[_TRUE_MEM], mem_gb)
    return new  # type: ignore[no-any-return]


#: ``MODEL_CLASSES`` as a set (a ``str``'s membership: the same answer as the tuple's).
_MODELS: frozenset[str] = frozenset(MODEL_CLASSES)
#: ``true_mem_gb``'s position among the fields.
_TRUE_MEM: int = [f.name for f in fields(JobSpec)].index("true_mem_gb")


def _rules_hold(v: tuple[Any, ...]) -> bool:
    """Whether every rule of ``JobSpec.__post_init__`` holds for a spec's fields ``v`` (in
    field order), decided only where ``model`` is a ``str``, ``num_gpus`` an ``int`` and the
    other numbers ``float``s, exactly (False otherwise: ``__post_init__`` decides, and raises
    its error). Compiled
    (``job.pxd``), the numbers are C doubles (a ``float``'s own value; finite: ``x - x ==
    0.0``): ~70 instructions instead of ``__post_init__``'s ~5 k of attribute reads and calls
    (a reset of ``default`` makes ~60 specs through :data:`new_spec`)."""
    kind, model, submit_s, num_gpus, gpu_frac = v[1], v[2], v[3], v[4], v[5]
    mem_gb, cpu_cores, work_s, est_work_s = v[6], v[7], v[8], v[9]
    checkpoint_interval_s, service = v[12], v[16]
    if not (
        type(model) is str
        and type(num_gpus) is int
        and type(submit_s) is float
        and type(gpu_frac) is float
        and type(mem_gb) is float
        and type(cpu_cores) is float
        and type(work_s) is float
        and type(est_work_s) is float
        and type(checkpoint_interval_s) is float
    ):
        return False
    s = submit_s
    f = gpu_frac
    m = mem_gb
    c = cpu_cores
    w = work_s
    e = est_work_s
    k = checkpoint_interval_s
    return bool(
        model in _MODELS
        and s - s == 0.0
        and s >= 0
        and num_gpus >= 1
        and 0 < f <= 1
        and (f == 1 or num_gpus == 1)
        and m - m == 0.0
        and m > 0
        and c - c == 0.0
        and c >= 0
        and w - w == 0.0
        and w > 0
        and e - e == 0.0
        and e > 0
        and k > 0
        and (kind is _ONLINE) == (service is not None)
    )


#: ``JobSpec.with_estimate``'s copy (compiled: :func:`_copy_with_slots`, ~10x fewer
#: instructions than the generated function's descriptor calls; interpreted: the generated
#: function, the fastest there).
_copy_with: Callable[[JobSpec, float], JobSpec] = (
    _copy_with_slots if COMPILED else _make_copy_with()
)

#: ``JobSpec(*values)`` with every field given, in field order: the same spec (the same
#: checks, ``__post_init__``), or the same error. Its fields are written through the slots'
#: descriptors instead of a frozen dataclass's ``object.__setattr__`` (0.9 us a spec against
#: 1.7 us: the generator builds one per episode job); compiled, through CPython's C API
#: (:func:`_new_spec_slots`).
#: (interpreted: the generated function, which :func:`_new_spec_slots` calls there)
_NEW_SPEC_PY: Callable[..., JobSpec] | None = None if COMPILED else _make_new_spec()
new_spec: Callable[..., JobSpec] = _new_spec_slots if COMPILED else _NEW_SPEC_PY  # type: ignore[assignment]


def offline_specs(
    *,
    model: Sequence[str],
    submit_s: Sequence[float],
    num_gpus: Sequence[int],
    gpu_frac: Sequence[float],
    mem_gb: Sequence[float],
    cpu_cores: Sequence[float],
    work_s: Sequence[float],
    gpu_types: Sequence[tuple[str, ...]],
    group: Sequence[str],
    user: Sequence[str],
    priority: Sequence[int],
) -> list[JobSpec]:
    """``[JobSpec(job_id=i, kind=OFFLINE, model=model[i], ..., est_work_s=work_s[i], ...) for i
    in range(n)]`` (the other fields their defaults): the same specs, or the same first error.

    A trace loader builds ~20,000 specs at once (2.9 us each through ``__init__``: a frozen
    dataclass writes each field with ``object.__setattr__``, then the checks). Here the rules
    of ``JobSpec.__post_init__`` are checked column by column with numpy; when every row keeps
    them, the fields are written column by column through the slots' descriptors (``map`` over
    the new objects; compiled, each write through CPython's C API as ``_copy_with_slots``
    writes one: a 20,000-job trace's specs in 112 M instructions instead of 222 M); else the
    specs are built one by one through ``JobSpec``, which raises for the first broken row."""
    n = len(work_s)
    s = np.asarray(submit_s, dtype=float)
    g = np.asarray(num_gpus, dtype=float)  # (ints below 2**53: the same comparisons)
    f = np.asarray(gpu_frac, dtype=float)
    mem, cpu = np.asarray(mem_gb, dtype=float), np.asarray(cpu_cores, dtype=float)
    w = np.asarray(work_s, dtype=float)
    with np.errstate(invalid="ignore"):
        ok = (
            all(m in MODEL_CLASSES for m in set(model))
            and bool(np.all(np.isfinite(s) & (s >= 0)))
            and bool(np.all(g >= 1))
            and bool(np.all((f > 0) & (f <= 1) & ((f == 1) | (g == 1))))
            and bool(np.all(np.isfinite(mem) & (mem > 0)))
            and bool(np.all(np.isfinite(cpu) & (cpu >= 0)))
            and bool(np.all(np.isfinite(w) & (w > 0)))
        )
    # the columns the keywords name, each one field of the same name
    given: dict[str, Sequence[Any]] = {
        "model": model,
        "submit_s": submit_s,
        "num_gpus": num_gpus,
        "gpu_frac": gpu_frac,
        "mem_gb": mem_gb,
        "cpu_cores": cpu_cores,
        "work_s": work_s,
        "gpu_types": gpu_types,
        "group": group,
        "user": user,
        "priority": priority,
    }
    if not ok:
        offline = JobKind.OFFLINE
        return [
            JobSpec(
                job_id=i,
                kind=offline,
                est_work_s=work_s[i],
                **{name: col[i] for name, col in given.items()},
            )
            for i in range(n)
        ]
    specs = list(map(object.__new__, repeat(JobSpec, n)))
    columns: dict[str, Any] = {
        **given,
        "job_id": range(n),
        "kind": repeat(JobKind.OFFLINE, n),
        "est_work_s": work_s,
        "true_mem_gb": mem_gb,  # (``true_mem_gb < 0``: the declared memory)
    }
    for fl in fields(JobSpec):
        col = columns.get(fl.name)
        if col is None:
            col = repeat(fl.default, n)  # (checkpoint_interval_s, service: plain defaults)
        slot = getattr(JobSpec, fl.name)
        if COMPILED:  # each write as ``__set__`` makes it, without the method call (``_put``)
            for spec, value in zip(specs, col):
                _put(spec, slot, value)
        else:
            deque(map(slot.__set__, specs, col), maxlen=0)
    return specs
