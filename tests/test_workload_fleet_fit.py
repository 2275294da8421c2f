"""Workload version 4: the cluster's past knows its fleet.

A recurring group is a script resubmitted on this cluster, and its past runs ran here, so its
request fits the fleet: ``build_workload`` passes the fleet (``SyntheticWorkloadConfig.fleet``,
per GPU type its memory and count) and ``shared_past`` redraws, from the group's own
generator, a group whose template no empty fleet could run (``_fit_groups``). A past with no
such group is version 3's bit for bit; one-off jobs stay as drawn (the simulator fails one the
fleet cannot hold). ``default`` (``past_seed`` 0) had an 8-GPU ``bert`` group at 19.7 GB a
GPU on 4 A100-40GB: one failed job every episode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from gpu_sharing_env.config import ConfigError, all_scenario_names, load_scenario
from gpu_sharing_env.sim.build import build_workload, make_simulator
from gpu_sharing_env.workload import WORKLOAD_VERSION
from gpu_sharing_env.workload import synthetic as S
from gpu_sharing_env.workload.synthetic import (
    SyntheticWorkloadConfig,
    fleet_capacity,
    generate_workload,
    shared_past,
)
from tests.test_workload_shared_past import _digest

WINDOW_S = 8 * 3600.0
DEFAULT_FLEET = (("A100-40GB", 40.0, 4), ("T4", 16.0, 4), ("V100-16GB", 16.0, 4))


def _synthetic_scenarios() -> list[str]:
    out = []
    for name in all_scenario_names():
        cfg = load_scenario(name)
        off = cfg.workload.offline
        if off.source == "synthetic" and float(off.params.get("arrivals_per_h", 10.0)) > 0:
            out.append(name)
    return out


def _one_run_each(cfg: SyntheticWorkloadConfig, tpl: S._Templates, n: int) -> list:
    """A job spec of each template ``0..n-1`` (what its runs submit)."""
    ones = np.ones(n)
    return S._job_specs(cfg, tpl, n, np.arange(n, dtype=np.int64), np.zeros(n), ones, ones)


def test_version() -> None:
    assert WORKLOAD_VERSION == 4


def test_the_loader_passes_the_fleet() -> None:
    wl = build_workload(load_scenario("default"))
    assert wl.syn_cfg.fleet == DEFAULT_FLEET
    assert fleet_capacity([("a100", 2), ("T4", 2), ("A100-40GB", 2)]) == (
        ("A100-40GB", 40.0, 4),
        ("T4", 16.0, 2),
    )
    # per_episode (version 2) and a config built without a fleet: none
    cfg = load_scenario("default")
    off = replace(
        cfg.workload.offline, params={**cfg.workload.offline.params, "past": "per_episode"}
    )
    per = build_workload(replace(cfg, workload=replace(cfg.workload, offline=off)))
    assert per.syn_cfg.fleet is None
    assert SyntheticWorkloadConfig().fleet is None


@pytest.mark.parametrize("name", _synthetic_scenarios())
def test_no_recurring_group_is_unplaceable_on_its_fleet(name: str) -> None:
    cfg = load_scenario(name)
    sim = make_simulator(cfg)
    syn = sim.workload.syn_cfg
    past = shared_past(syn)
    specs = _one_run_each(syn, past.templates, past.n_grp)
    bad = [(s.group, s.model, s.num_gpus, s.mem_gb, s.gpu_types) for s in specs]
    bad = [b for b, s in zip(bad, specs, strict=True) if not sim.table.feasible(s)]
    assert not bad
    # the history's runs of each group asked what its future runs ask
    req = {f"g{k}": s.num_gpus * s.gpu_frac for k, s in enumerate(specs)}
    hist = past.history
    for g, r in zip(hist.group, hist.gpus.tolist(), strict=True):
        if g:
            assert req[g] == r, (g, r)


def test_the_fit_rule_is_the_simulators() -> None:
    # every template of a past drawn without a fleet (groups and the history's one-off jobs,
    # misfits among them): the generator's rule answers as JobTable.feasible does
    for name in ("mig-a100", "pai-busy", "default"):
        sim = make_simulator(load_scenario(name))
        syn = sim.workload.syn_cfg
        rng = np.random.default_rng(5)
        tpl = S._draw_templates(syn, rng, S.draw_capsule(rng), 3000, 0)
        specs = _one_run_each(syn, tpl, 3000)
        got = [S._template_fits(syn, syn.fleet, tpl, k) for k in range(3000)]
        want = [sim.table.feasible(s) for s in specs]
        assert got == want, name
        assert 0 < sum(want) < 3000  # (both answers met)


def test_default_redraws_its_bert_group_and_nothing_else() -> None:
    syn = build_workload(load_scenario("default")).syn_cfg
    old, new = shared_past(replace(syn, fleet=None)), shared_past(syn)
    assert old.refit == () and new.refit == (5,)
    t0, t1 = old.templates, new.templates
    assert (str(t0.models[5]), float(t0.req[5])) == ("bert", 8.0)
    # only group 5's model, request and type constraint moved
    for f in ("high", "models", "req", "constrained", "set_idx"):
        a, b = getattr(t0, f), getattr(t1, f)
        assert np.array_equal(np.delete(a, 5), np.delete(b, 5)), f
    for f in ("users", "cpu_noise"):
        assert np.array_equal(getattr(t0, f), getattr(t1, f)), f
    assert np.array_equal(old.base, new.base) and np.array_equal(old.sig, new.sig)
    assert old.phases == new.phases and old.next_slot == new.next_slot
    assert old.groups.per_period == new.groups.per_period
    h0, h1 = old.history, new.history
    assert h0.group == h1.group and h0.user == h1.user
    assert np.array_equal(h0.submit_s, h1.submit_s) and np.array_equal(h0.work_s, h1.work_s)
    g5 = np.array([g == "g5" for g in h0.group])
    assert g5.sum() > 5
    assert np.array_equal(h0.gpus[~g5], h1.gpus[~g5])
    assert (h0.gpus[g5] == 8.0).all() and (h1.gpus[g5] == float(t1.req[5])).all()
    # an episode: the same submissions, g5's runs ask what fits
    a = generate_workload(syn, np.random.default_rng(1), WINDOW_S).jobs
    b = generate_workload(replace(syn, fleet=None), np.random.default_rng(1), WINDOW_S).jobs
    assert [(j.submit_s, j.work_s, j.group) for j in a] == [
        (j.submit_s, j.work_s, j.group) for j in b
    ]
    moved = [j.group for j, k in zip(a, b, strict=True) if j != k]
    assert moved and set(moved) == {"g5"}


# (generate_workload's digests at main e085a21, workload version 3, which built no fleet:
# ``default-x2``'s past has no group its fleet cannot run, so version 4 keeps them)
@pytest.mark.parametrize(("seed", "want"), [(1, "e01458baaca26ddc"), (6, "eb28c5d3a27ed49a")])
def test_a_past_without_misfits_is_version_3(seed: int, want: str) -> None:
    syn = build_workload(load_scenario("default-x2")).syn_cfg
    assert syn.fleet is not None and shared_past(syn).refit == ()
    assert _digest(generate_workload(syn, np.random.default_rng(seed), WINDOW_S)) == want
    # and default's, drawn without a fleet, is version 3's past 0
    cfg0 = replace(build_workload(load_scenario("default")).syn_cfg, fleet=None)
    assert (
        _digest(generate_workload(cfg0, np.random.default_rng(seed), WINDOW_S))
        == {
            1: "3aa29b133bcb9183",
            6: "582f5073a083511d",
        }[seed]
    )


def test_the_fleet_is_in_the_past_key() -> None:
    syn = build_workload(load_scenario("default")).syn_cfg
    big = (("A100-40GB", 40.0, 8), ("T4", 16.0, 4), ("V100-16GB", 16.0, 4))
    p, q = shared_past(syn), shared_past(replace(syn, fleet=big))
    assert p is not q and shared_past(replace(syn, fleet=big)) is q
    assert p.refit == (5,) and q.refit == ()  # (8 A100s hold the 8-GPU bert group)
    assert str(q.templates.models[5]) == "bert"
    assert shared_past(replace(syn, fleet=None)) is not p


def test_per_episode_ignores_the_fleet() -> None:
    cfg = SyntheticWorkloadConfig(past="per_episode")
    a = generate_workload(cfg, np.random.default_rng(0), WINDOW_S)
    b = generate_workload(replace(cfg, fleet=DEFAULT_FLEET), np.random.default_rng(0), WINDOW_S)
    assert _digest(a) == _digest(b) == "2fa4491283d89d7c"  # (version 2's)


def test_bad_fleet() -> None:
    for bad in ((("X100", 40.0, 4),), (("T4", 16, 4),), (("T4", 16.0, -1),), (("T4", 16.0),)):
        with pytest.raises(ValueError, match=r"^fleet: \(known GPU type, GB > 0, GPUs >= 0\) rows"):
            SyntheticWorkloadConfig(fleet=bad)  # type: ignore[arg-type]
    cfg = load_scenario("default")
    off = replace(cfg.workload.offline, params={**cfg.workload.offline.params, "fleet": []})
    with pytest.raises(
        ConfigError, match=r"workload\.offline\.params\.fleet: set from the cluster"
    ):
        build_workload(replace(cfg, workload=replace(cfg.workload, offline=off)))


def test_a_fleet_nothing_fits_keeps_the_groups() -> None:
    # a fleet no gang and no big model fits (one T4): the misfits stay as drawn after the tries
    syn = replace(SyntheticWorkloadConfig(), fleet=(("T4", 16.0, 1),))
    past, old = shared_past(syn), shared_past(SyntheticWorkloadConfig())
    assert past.refit  # (the 1-GPU redraws fit)
    assert all(S._template_fits(syn, syn.fleet, past.templates, g) for g in past.refit)
    none = replace(SyntheticWorkloadConfig(), fleet=(("T4", 16.0, 0),))
    p0 = shared_past(none)
    assert p0.refit == ()
    assert np.array_equal(p0.templates.req, old.templates.req)


_CHILD = """
import json, numpy as np
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim.build import build_workload
from gpu_sharing_env.workload.synthetic import generate_workload
from tests.test_workload_shared_past import _digest
syn = build_workload(load_scenario("mig-a100")).syn_cfg
print(json.dumps([_digest(generate_workload(syn, np.random.default_rng(s), 8 * 3600.0))
                  for s in (0, 5)]))
"""


@pytest.mark.parametrize("pure", [False, True])
def test_the_redraw_is_the_same_compiled_and_pure(pure: bool) -> None:
    syn = build_workload(load_scenario("mig-a100")).syn_cfg
    assert len(shared_past(syn).refit) == 5
    here = [_digest(generate_workload(syn, np.random.default_rng(s), WINDOW_S)) for s in (0, 5)]
    env = dict(os.environ)
    if pure:
        env["GSG_PURE_PYTHON"] = "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == here
