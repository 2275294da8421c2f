"""The rates' and the cluster's leaner reads on the apply/advance path (issue 51; 2026-12-02
note ``docs/notes/2026-12-02-apply-advance-keys.md``).

Checked here, compiled and interpreted alike: ``Rates._mech_bits`` (the three mechanism flags
``gpu_fractions`` reads, one C integer compiled) follows the mechanisms through construction,
``set_mechanisms`` and ``reset``; a miss of the fractions' memo (``SpeedMemo.rates_miss``,
called with the key ``gpu_fractions`` built and looked up) stores the model's answer under that
key, where ``SpeedMemo.rates`` then finds it; the cluster's declared fractions
(``frac_decl``, summed in C by ``_frac_sum`` compiled) are the sum of each GPU's resident
fractions bit for bit at every step of an episode, MPS, gpulets and MIG fleets alike.
``tests/test_golden.py`` and ``tests/test_compiled.py`` compare whole episodes with the recorded
ones and across modes.
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import product

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.sim import rates as rates_mod
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator

#: ``Rates._mech_bits``' bits (``rates.py``'s ``_KERNEL_PRIORITY``, ``_DYNAMIC_SM``,
#: ``_LAUNCH_QUOTA``: C constants compiled, not readable from Python).
_BITS = {"kernel_priority": 1, "dynamic_sm": 2, "launch_quota": 4}


def _random_steps(sim: Simulator, n: int, seed: int, check: object = None) -> int:
    """Up to ``n`` random legal placements (the first legal cell of a random window job's
    mask), ``check(sim)`` after each; returns how many were made."""
    rng = np.random.default_rng(seed)
    made = 0
    sim.advance()
    for _ in range(n):
        if sim.done:
            break
        jobs = [s.job_id for s in sim.window_jobs() if sim.placeable(s.job_id)]
        if not jobs:
            sim.advance()
            continue
        jid = jobs[int(rng.integers(len(jobs)))]
        cells = np.flatnonzero(sim.mask(jid))
        gpu, option = divmod(int(cells[int(rng.integers(len(cells)))]), len(sim.options))
        sim.apply(Decision(jid, gpu, option))
        made += 1
        if callable(check):
            check(sim)
        sim.advance()
    return made


def test_mech_bits_are_the_three_flags() -> None:
    """``_mech_bits`` sets one bit per flag that is on, for every combination."""
    base = make_simulator(load_scenario("default")).mechanisms
    for flags in product((False, True), repeat=3):
        on = dict(zip(_BITS, flags, strict=True))
        m = replace(base, **on)
        assert rates_mod._mech_bits(m) == sum(b for k, b in _BITS.items() if on[k])


def test_the_rates_keep_the_bits_of_the_mechanisms_in_force() -> None:
    """Built, after ``set_mechanisms`` and after ``reset``, ``_mech_bits`` is the bits of
    ``mechanisms`` (a stale value would key the speed model on flags no longer in force)."""
    sim = make_simulator(load_scenario("muxflow-t4"))
    sim.reset(1)
    rates = sim.rates
    assert rates._mech_bits == rates_mod._mech_bits(rates.mechanisms)
    for flags in product((False, True), repeat=3):
        sim.set_mechanisms(**dict(zip(_BITS, flags, strict=True)))
        want = sum(b for b, f in zip(_BITS.values(), flags, strict=True) if f)
        assert rates._mech_bits == want == rates_mod._mech_bits(rates.mechanisms)
    sim.reset(2)
    assert rates._mech_bits == rates_mod._mech_bits(rates.mechanisms)


def test_a_miss_is_memoised_under_the_key_looked_up() -> None:
    """``gpu_fractions`` on an emptied memo misses (``rates_miss``): the answer is stored
    under ``(gpu_type, mode, *keys)``, is the model's own for those residents, and
    ``SpeedMemo.rates`` with the same keys then returns that very list (a hit)."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(3)
    assert _random_steps(sim, 25, 3) > 0
    memo = sim.memo
    c = sim.cluster
    busy = [g for g in range(c.n_gpus) if c.residents[g]]
    assert busy
    for g in busy:
        memo.rates_cache.clear()
        res = sim.rates.residents(g)
        sim.rates.gpu_fractions(g, res)
        # (with an online resident, ``_online_terms`` adds its key alone as well)
        [(key, fr)] = [kv for kv in memo.rates_cache.items() if len(kv[0]) == 2 + len(res)]
        assert key[0] == c.type_name_of[g]
        keys = list(key[2:])
        assert memo.rates(key[0], key[1], keys) is fr
        assert memo.model.rates(key[0], key[1], memo._resident_list(keys)) == fr
        memo.rates_cache.clear()
        again = memo.rates_miss(key, keys)
        assert again == fr and memo.rates_cache[key] is again


@pytest.mark.parametrize("scenario", ["default", "mig-a100", "muxflow-t4", "default+gpulets"])
def test_declared_fractions_are_the_sum_of_the_residents(scenario: str) -> None:
    """After every placement and every run of events, each GPU's ``frac_decl`` is
    ``sum(res_frac[g])`` exactly (0.0 on an empty GPU): the compiled ``_frac_sum`` adds in
    ``sum``'s order from ``0.0``. (``+gpulets``: two MPS gpulets a GPU, the partitions
    ``add`` and ``remove`` open, join and leave with ``gpulets`` read from the views.)"""
    name, _, extra = scenario.partition("+")
    cfg = load_scenario(name)
    if extra:
        cfg = replace(cfg, sharing=replace(cfg.sharing, gpulets=2))
    sim = make_simulator(cfg)
    sim.reset(4)

    def check(s: Simulator) -> None:
        c = s.cluster
        for g in range(c.n_gpus):
            want = float(sum(c.res_frac[g]))
            got = float(c.frac_decl[g])
            assert got == want or (math.isnan(got) and math.isnan(want)), (g, got, want)
            if extra and c.residents[g] and c.mode[g] == 2:  # (MPS: its gpulet partitions)
                assert set(c.gpulet_of(g)) == set(c.residents[g])

    assert _random_steps(sim, 60, 4, check) > 0


def test_pop_kind_pops_what_pop_raw_pops() -> None:
    """``EventQueue.pop_kind`` (``Simulator.advance``'s pop, without the tuple) pops the events
    ``pop_raw`` pops, in the same order, with the same kinds, subjects and stamps, plain events
    and others (an int time, a subject past int64) alike; empty, IndexError as ``pop_raw``."""
    from gpu_sharing_env.sim.events import EventQueue

    rng = np.random.default_rng(7)
    a, b = EventQueue(), EventQueue()
    for i in range(300):
        t: object = float(rng.integers(0, 40)) / 4
        subject: object = int(rng.integers(0, 1000))
        if i % 37 == 0:
            t = int(rng.integers(0, 10))  # not plain: its own tuple
        if i % 53 == 0:
            subject = 1 << 70
        kind, stamp = int(rng.integers(0, 7)), int(rng.integers(0, 5))
        a.push(t, kind, subject, stamp)
        b.push(t, kind, subject, stamp)
    while len(a):
        _, kind, subject, stamp = a.pop_raw()
        assert b.pop_kind() == kind
        assert (b._popped_subject, b._popped_stamp) == (subject, stamp)
        assert type(b._popped_subject) is type(subject)
    assert not len(b)
    with pytest.raises(IndexError):
        b.pop_kind()
