"""The reset's draws through numpy's own C distributions (issue 51; ``workload/_npyrandom.pxd``):
compiled, ``workload.synthetic``'s draws and ``Faults.schedule`` call the C function a
``numpy.random.Generator`` method runs, element by element on the same bit generator;
interpreted (and where the import's self-check failed) the same ``.py`` calls the methods.

- Each draw through the C functions equals the method's call from a twin generator, values and
  the bit generator's state after, on random parameters and sizes (empty, one, odd counts that
  leave a 32-bit half unused, the ranges where numpy switches its algorithm).
- ``generate_workload`` compiled equals it with ``GSG_PURE_PYTHON=1`` (a subprocess), every
  array and spec field bit for bit, over every shipped scenario's synthetic config, recurring
  groups on and off, and the generator's state after; an episode with faults likewise.
- The import's self-check turns the C draws off (one warning) where they differ from the
  methods: a deliberately skewed probe.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from gpu_sharing_env.workload import synthetic
from gpu_sharing_env.workload.synthetic import SyntheticWorkloadConfig, generate_workload
from tests.helpers import run_probe

ROOT = Path(__file__).resolve().parents[1]

needs_c = pytest.mark.skipif(
    not synthetic._C_DRAWS, reason="synthetic not compiled with numpy's C distributions"
)


def _same(a: object, b: object) -> bool:
    return synthetic._same(a, b)


def test_c_draws_are_on_where_compiled() -> None:
    """Built against the numpy it runs with, the import's self-check passes: a C draw that
    differs from its method turns them all off (and the tests below would only skip)."""
    if synthetic.__file__.endswith(".py"):
        assert synthetic._C_DRAWS is False
    else:
        assert synthetic._C_DRAWS is True


def _twins(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    return np.random.default_rng(seed), np.random.default_rng(seed)


#: (helper, its arguments after ``rng, dc``): each draw and its edges.
CASES: list[tuple[str, tuple[object, ...]]] = [
    ("_std_normal", ()),
    ("_std_normals", (0,)),
    ("_std_normals", (1,)),
    ("_std_normals", (1000,)),
    ("_uniforms", (0.0, 1.0, 33)),
    ("_uniforms", (1.05, 1.5, 8)),
    ("_uniforms", (-604800.0, 172800.0, 100)),
    ("_uniforms", (0.0, 3.7e-3, 5)),
    ("_uniforms", (2.0, 2.0, 3)),
    ("_uniforms", (-5, 7, 4)),
    ("_uniforms", (0.0, 1.0, 0)),
    ("_exponentials", (60.0, 500)),
    ("_exponentials", (1e-9, 3)),
    ("_exponentials", (0.0, 3)),
    ("_geometrics", (1.0 / 8.0, 200)),
    ("_geometrics", (0.34, 50)),
    ("_geometrics", (1.0, 5)),
    ("_geometrics", (1e-6, 5)),
    ("_poisson", (0.0,)),
    ("_poisson", (3.5,)),
    ("_poisson", (9.999,)),
    ("_poisson", (10.0,)),
    ("_poisson", (2500.0,)),
    ("_integers", (1, 9)),
    ("_integers", (2, 9)),
    ("_integers", (7, 41)),
    ("_integers", (7, 0)),
    ("_integers", (2**32 - 1, 3)),
    ("_integers", (2**32, 3)),
    ("_integers", (2**32 + 1, 3)),
    ("_integers", (2**40, 5)),
]


@needs_c
@pytest.mark.parametrize("seed", [0, 1, 2026, 2**63 + 5])
def test_each_c_draw_is_the_methods(seed: int) -> None:
    a, b = _twins(seed)
    for i, (name, args) in enumerate(CASES):
        fn = getattr(synthetic, name)
        mine = fn(a, a.bit_generator.capsule, *args)
        ref = fn(b, None, *args)
        assert _same(mine, ref), (name, args)
        assert a.bit_generator.state == b.bit_generator.state, (name, args)
        # a 32-bit draw left half used (PCG64 keeps it), then the next case
        if i % 3 == 0:
            assert a.integers(0, 2**32, dtype=np.uint32) == b.integers(0, 2**32, dtype=np.uint32)


@needs_c
def test_c_draws_in_random_order_and_sizes_are_the_methods() -> None:
    pick = np.random.default_rng(7)
    a, b = _twins(99)
    for _ in range(400):
        name, args = CASES[int(pick.integers(len(CASES)))]
        if args and name not in ("_poisson",):
            args = (*args[:-1], int(pick.integers(0, 40)))  # another size
        fn = getattr(synthetic, name)
        assert _same(fn(a, a.bit_generator.capsule, *args), fn(b, None, *args)), (name, args)
    assert a.bit_generator.state == b.bit_generator.state


@needs_c
def test_refused_arguments_go_to_the_method() -> None:
    a = np.random.default_rng(3)
    cap = a.bit_generator.capsule
    for name, args in [
        ("_exponentials", (-1.0, 3)),
        ("_geometrics", (0.0, 3)),
        ("_geometrics", (1.5, 3)),
        ("_poisson", (-1.0,)),
        ("_poisson", (1e19,)),
        ("_integers", (0, 3)),
        ("_uniforms", (1.5, 1.05, 3)),
        ("_uniforms", (0.0, -0.0, 3)),
    ]:
        with pytest.raises(ValueError):
            getattr(synthetic, name)(a, cap, *args)
    with pytest.raises(OverflowError):
        synthetic._uniforms(a, cap, -1e308, 1e308, 3)


def test_draw_capsule_only_for_a_plain_generator() -> None:
    class Sub(np.random.Generator):
        pass

    sub = Sub(np.random.PCG64(1))
    assert synthetic.draw_capsule(sub) is None
    plain = np.random.default_rng(1)
    assert (synthetic.draw_capsule(plain) is not None) == synthetic._C_DRAWS


class _Methods(np.random.Generator):
    """A generator whose draws go through its methods (``draw_capsule`` gives None for a
    subclass): the same stream as ``default_rng`` of the same seed."""


def _methods(seed: int) -> np.random.Generator:
    return _Methods(np.random.PCG64(seed))


def _configs() -> list[SyntheticWorkloadConfig]:
    base = SyntheticWorkloadConfig()
    return [
        base,
        # (workload version 2's draw: the groups and the history from the episode's generator)
        SyntheticWorkloadConfig(past="per_episode"),
        SyntheticWorkloadConfig(past="per_episode", periodic_share=1.0, history_h=30.0),
        SyntheticWorkloadConfig(recurring_share=0.0),
        SyntheticWorkloadConfig(
            periodic_share=1.0,
            period_h_choices=(0.37, 5.0, 24.0, 48.0),
            period_weights=(1, 1, 1, 1),
        ),
        SyntheticWorkloadConfig(periodic_share=0.0, burst_spacing_s=0.0),
        SyntheticWorkloadConfig(arrivals_per_h=40.0, history_h=12.0, diurnal_amplitude=0.0),
        SyntheticWorkloadConfig(
            gpu_request_sizes=(0.5, 1.0), gpu_request_weights=(0.5, 0.5), type_constraint_sets=()
        ),
        # (the whole-GPU sizes weigh 0: the high-GPU requests by ``rng.choice``)
        SyntheticWorkloadConfig(
            gpu_request_sizes=(0.5, 2.0),
            gpu_request_weights=(1.0, 0.0),
            high_gpu_share=0.5,
            num_users=3,
        ),
    ]


@needs_c
def test_periodic_pass_is_the_draws_list_path() -> None:
    for k, cfg in enumerate(_configs()):
        for seed in range(6):
            periods = [p * 3600.0 for p in (1.0, 6.0, 24.0, 0.37, 48.0, 24.0)[: seed + 1]]
            t0, t1 = -cfg.history_h * 3600.0, float(3600 * (seed + 1) + 17)
            a, b = np.random.default_rng(seed), _methods(seed)
            ta, ga = synthetic._periodic_times(cfg, a, periods, t0, t1)
            tb, gb = synthetic._periodic_times(cfg, b, periods, t0, t1)
            assert ta.tobytes() == tb.tobytes() and ga.tobytes() == gb.tobytes(), (k, seed)
            assert ga.dtype == gb.dtype == np.int64
            assert a.bit_generator.state == b.bit_generator.state, (k, seed)


@needs_c
def test_generate_workload_c_draws_are_the_methods_in_process() -> None:
    for k, cfg in enumerate(_configs()):
        for seed in range(4):
            for horizon in (3600.0, 86400.0 * 2):
                a, b = np.random.default_rng(seed), _methods(seed)
                wa = _record(generate_workload(cfg, a, horizon))
                wb = _record(generate_workload(cfg, b, horizon))
                assert wa == wb, (k, seed, horizon)
                assert a.bit_generator.state == b.bit_generator.state, (k, seed, horizon)


def _skewed(rng: np.random.Generator, dc: object) -> list[object]:
    """:func:`synthetic._probe` with its C side one ulp off in one normal."""
    out = synthetic._probe(rng, dc)
    if dc is not None:
        z = out[1]
        assert isinstance(z, np.ndarray)
        z[5] = np.nextafter(z[5], np.inf)
    return out


@needs_c
def test_self_check_turns_a_skewed_path_off() -> None:
    cfg = SyntheticWorkloadConfig()
    before = _record(generate_workload(cfg, np.random.default_rng(4), 86400.0))
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            assert synthetic._init_c_draws(_skewed) is False
        assert [str(w.message) for w in got if w.category is RuntimeWarning] == [
            "gpu-sharing-gym: numpy's C distributions differ from this numpy's Generator; "
            "the workload draws through the Generator's methods"
        ]
        assert synthetic._C_DRAWS is False
        assert synthetic.draw_capsule(np.random.default_rng(0)) is None
        after = _record(generate_workload(cfg, np.random.default_rng(4), 86400.0))
        assert after == before
    finally:
        assert synthetic._init_c_draws() is True
    assert synthetic.draw_capsule(np.random.default_rng(0)) is not None


def _record(w: synthetic.SyntheticWorkload) -> list[object]:
    h = w.history
    return [
        [tuple(map(repr, (s.job_id, s.model, s.submit_s.hex(), s.num_gpus, s.gpu_frac.hex(),
                          s.mem_gb.hex(), s.cpu_cores.hex(), s.work_s.hex(), s.true_mem_gb.hex(),
                          s.gpu_types, s.group, s.user, s.priority))) for s in w.jobs],
        h.group, h.user, h.gpus.tobytes(), h.work_s.tobytes(), h.submit_s.tobytes(),
        sorted(w.pattern.items()), sorted((k, v.hex()) for k, v in w.period_s.items()),
        sorted(w.batch_inference),
    ]  # fmt: skip


#: Draws every shipped scenario's synthetic config (and variants with the recurring groups off,
#: only periodic, only bursty, sweeps without spacing) on a few seeds, and a short episode with
#: faults; prints one digest per draw.
PROBE = r"""
import dataclasses, hashlib, json, sys
import numpy as np
from gpu_sharing_env.config import all_scenario_names, load_scenario
from gpu_sharing_env.sim.build import build_workload
from gpu_sharing_env.workload import synthetic
from tests.test_reset_draws_in_c import _record

out = {"c_draws": synthetic._C_DRAWS, "compiled": not synthetic.__file__.endswith(".py")}
cfgs = {}
for name in all_scenario_names():
    try:
        fn = build_workload(load_scenario(name))
    except Exception:
        continue
    if getattr(fn, "trace_jobs", None) is None and hasattr(fn, "syn_cfg"):
        cfgs[name] = (fn.syn_cfg, fn.cfg.horizon_h * 3600.0)
base, hz = cfgs["default"]
for tag, ch in [("norec", {"recurring_share": 0.0}), ("periodic", {"periodic_share": 1.0}),
                ("bursty", {"periodic_share": 0.0}), ("nospace", {"burst_spacing_s": 0.0}),
                ("nohist", {"history_h": 0.0}), ("busy", {"arrivals_per_h": 60.0}),
                ("v2", {"past": "per_episode"}), ("past1", {"past_seed": 1})]:
    cfgs["default+" + tag] = (dataclasses.replace(base, **ch), hz)
for key, (cfg, hz) in sorted(cfgs.items()):
    for seed in range(3):
        rng = np.random.default_rng(seed)
        rec = _record(synthetic.generate_workload(cfg, rng, hz))
        rec.append(repr(rng.bit_generator.state))
        out[f"{key}/{seed}"] = hashlib.sha256(repr(rec).encode()).hexdigest()
import gymnasium as gym
import gpu_sharing_env
cfg = load_scenario("default")
faults = dataclasses.replace(cfg.faults, rate_per_gpu_h={"user_signal": 0.5, "app_error": 0.3, "xid": 0.2})
env = gym.make("GpuSharing-v2", scenario=dataclasses.replace(cfg, faults=faults)).unwrapped
h = hashlib.sha256()
errors = 0
for ep in range(2):
    pick = np.random.default_rng(100 + ep)
    obs, info = env.reset(seed=ep)
    for _ in range(150):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        obs, r, te, tr, info = env.step(int(legal[pick.integers(legal.size)]))
        h.update(np.float64(r).tobytes())
        h.update(repr(env.sim.now).encode())
        if te or tr:
            break
    h.update(repr(sorted((k, v) for k, v in env.sim.metrics().items() if isinstance(v, (int, float)))).encode())
    errors += env.sim.acc.errors_total
out["faults"] = h.hexdigest()
out["fault_count"] = errors
print(json.dumps(out))
"""


def _run(pure: bool) -> dict:
    return run_probe(PROBE, pure, timeout=600)


def test_generate_workload_compiled_is_pure_bit_for_bit() -> None:
    pure = _run(pure=True)
    comp = _run(pure=False)
    assert pure.pop("c_draws") is False and pure.pop("compiled") is False
    assert comp.pop("c_draws") == comp.pop("compiled")  # (on wherever it is compiled)
    assert len(pure) > 20 and pure["fault_count"] > 0
    assert comp == pure


def test_per_run_passes_are_numpys_expressions() -> None:
    """``_scaled_at``, ``_clipped_at``, ``_mem_use`` (the compiled per-run arithmetic) against
    the numpy expressions they replace, with NaN, infinities, zeros and the bounds' ties."""
    pick = np.random.default_rng(11)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 10.0, 14 * 86400.0, 0.95, 0.05, 1.0])
    for case in range(200):
        m, n = int(pick.integers(1, 30)), int(pick.integers(0, 200))
        a = np.exp(pick.normal(6.0, 3.0, m))
        if case % 3 == 0:
            a[pick.integers(m)] = special[pick.integers(special.size)]
        lab = pick.integers(0, m, n)
        z = pick.standard_normal(n)
        e = np.exp(pick.normal(0.0, 2.0, n))
        if n and case % 2 == 0:
            e[pick.integers(0, n, 3)] = special[pick.integers(0, special.size, 3)]
        lo, hi = 10.0, 14 * 86400.0
        out = np.empty(n)
        synthetic._scaled_at(a, lab, z, out)
        assert out.tobytes() == (a[lab] * z).tobytes(), case
        synthetic._clipped_at(a, lab, e, lo, hi, out)
        assert out.tobytes() == np.clip(a[lab] * e, lo, hi).tobytes(), case
        r, over = pick.random(n), pick.uniform(1.05, 1.5, n)
        med = float(pick.choice([0.6, 1.0, 0.95 / 3.0]))
        synthetic._mem_use(e, med, r, 0.3, over, out)
        ref = np.where(r < 0.3, over, np.maximum(np.minimum(med * e, 0.95), 0.05))
        assert out.tobytes() == ref.tobytes(), case
