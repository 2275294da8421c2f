"""The simulator's apply path without objects between its loops (docs/notes/2026-12-01-sim-apply-arrays.md).

- ``Lifecycle.migrate`` passes the job through the queue with one ``Queue.pass_through``
  instead of an ``add`` and ``start``'s ``take``: the queue's state (entries, version, log, the
  count taken, the signatures' counts and their order, the front) is what the two leave, on
  the queue itself and over whole v3 episodes with migrations (an observer keeps the old path:
  the two runs give the same bits).
- ``FleetUsage`` keeps its rows and their sums as float64 arrays (C doubles compiled): after
  any sequence of rows, the sums are the old list code's ``s[k] = s[k] + (new - old)`` bit for
  bit, compiled and interpreted, and ``row``/``rows``/``sums`` give Python floats.
- ``SpeedMemo`` is an extension type compiled (``speed.pxd``): its ``model_duty`` table is the zoo's.
"""

from __future__ import annotations

import copy
import struct
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gpu_sharing_env  # noqa: F401  (registers the envs)
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.physics.zoo import ZOO
from gpu_sharing_env.sim import usage as usage_mod
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision
from gpu_sharing_env.sim.observe import SimObserver
from gpu_sharing_env.sim.state import Status
from tests.helpers import interpreted


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _queue_state(q: Any) -> tuple[Any, ...]:
    return (
        list(q.entries),
        q.version,
        list(q.log),
        q.taken,
        [(k, v[0], v[1].job_id) for k, v in q._sigs.items()],
        q._front is None,
    )


@pytest.mark.parametrize("order", ["fifo", "predicted"])
def test_pass_through_is_an_add_then_a_take(order: str) -> None:
    """On queues of a real episode, ``pass_through`` of a job not in the queue leaves what
    ``add`` then ``take`` leave (with its signature queued and not, the front kept and not)."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(2)
    sim.set_window_order(order)
    while len(sim.waiting.entries) < 4 and not sim.done:
        sim.advance()
    q = sim.waiting
    queued = {jid for _, jid in q.entries}
    outside = [st for jid, st in sim.jobs.items() if jid not in queued][:6]
    assert outside
    checked = 0
    for st in outside:
        for front_known in (False, True):
            if front_known:
                q.front()
            a = copy.deepcopy(q)
            b = copy.deepcopy(q)
            sa = a._jobs.get(st.spec.job_id, st)
            a.add(sa)
            a.take(sa)
            b.pass_through(sa)
            assert _queue_state(a) == _queue_state(b)
            checked += 1
    assert checked >= 2


class _Quiet(SimObserver):
    """An observer that does nothing: with one, ``migrate`` keeps the queue's add and take."""


def _run(observed: bool, seed: int, steps: int) -> tuple[list[bytes], dict[str, Any], int]:
    env = gym.make("GpuSharing-v3", scenario=load_scenario("default"))
    sim = env.unwrapped.sim
    rng = np.random.default_rng(seed)
    out: list[bytes] = []
    _, info = env.reset(seed=seed)
    if observed:
        sim.add_observer(_Quiet())
    moves = 0
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"].view(bool))
        a = int(legal[rng.integers(legal.size)])
        before = sim.acc.migrations
        obs, r, te, tr, info = env.step(a)
        moves += sim.acc.migrations - before
        out.append(_bits(float(r)))
        for v in obs.values() if isinstance(obs, dict) else (obs,):
            out.append(np.ascontiguousarray(v).tobytes())
        q = sim.waiting
        out.append(repr((q.version, q.taken, len(q.log), list(q.entries))).encode())
        if te or tr:
            break
    env.close()
    return out, sim.metrics(), moves


@pytest.mark.parametrize("seed", [0, 5])
def test_migrations_pass_through_the_queue_as_before(seed: int) -> None:
    """Whole v3 episodes with random legal moves (migrations among them): the new path (no
    observer) and the old (an observer: ``add`` and ``start``'s ``take``) give the same
    observations, rewards, queue counters and metrics, bit for bit."""
    new, m_new, moves = _run(False, seed, 250)
    old, m_old, _ = _run(True, seed, 250)
    assert moves > 0
    assert new == old
    assert m_new.keys() == m_old.keys()
    for k in m_new:
        a, b = m_new[k], m_old[k]
        assert a == b or (a != a and b != b), k


def _reference(rows: list[tuple[float, ...]], n: int) -> tuple[list[list[float]], list[float]]:
    """The list code ``set_row`` replaced: per row, ``s[k] = s[k] + (new[k] - old[k])``."""
    table = [[0.0] * 7 for _ in range(n)]
    sums = [0.0] * 7
    for row in rows:
        g = int(row[0])
        new = row[1:]
        for k in range(7):
            sums[k] = sums[k] + (new[k] - table[g][k])
        table[g] = list(new)
    return table, sums


@pytest.mark.parametrize("mode", ["compiled", "interpreted"])
def test_usage_sums_are_the_list_code_s(mode: str) -> None:
    """Random rows (values of many magnitudes, zeros, repeats): the usage's sums and rows are
    the old list code's bit for bit; ``sums``, ``row`` and ``rows`` give Python floats; a
    reset starts from zeros; a copy keeps its own arrays."""
    mod = usage_mod if mode == "compiled" else interpreted(usage_mod)
    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    n = sim.cluster.n_gpus
    u = mod.FleetUsage(sim.cluster, sim.waiting)
    u.reset({})
    rng = np.random.default_rng(7)
    calls: list[tuple[float, ...]] = []
    for i in range(400):
        g = int(rng.integers(n))
        vals = rng.random(7) * 10.0 ** rng.integers(-6, 4, size=7)
        vals[rng.random(7) < 0.2] = 0.0
        if i % 5 == 0:
            vals[:] = 1.0 / 3.0
        calls.append((float(g), *(float(v) for v in vals)))
    for row in calls:
        u.set_row(int(row[0]), *row[1:])
    table, sums = _reference(calls, n)
    assert [_bits(x) for x in u.sums] == [_bits(x) for x in sums]
    assert all(type(x) is float for x in u.sums)
    for g in range(n):
        r = u.row(g)
        assert type(r) is tuple and all(type(x) is float for x in r)
        assert [_bits(x) for x in r] == [_bits(x) for x in table[g]]
    assert u.rows() == [tuple(t) for t in table]
    assert [_bits(x) for x in u.g_util.tolist()] == [_bits(t[0]) for t in table]
    twin = copy.deepcopy(u)
    twin.set_row(0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    assert [_bits(x) for x in u.sums] == [_bits(x) for x in sums]
    u.reset({})
    assert u.sums == [0.0] * 7 and u.rows() == [(0.0,) * 7] * n


def test_usage_sums_follow_an_episode() -> None:
    """Over an episode the kept sums equal the rows' sums (to rounding) and every running job's
    GPU is busy in its row."""
    sim = make_simulator(load_scenario("default"))
    sim.reset(4)
    rng = np.random.default_rng(1)
    for _ in range(60):
        if sim.done:
            break
        win = sim.window_jobs()
        if win and sim.placeable(win[0].job_id):
            legal = np.argwhere(sim.mask(win[0].job_id))
            gi, o = legal[rng.integers(len(legal))]
            sim.apply(Decision(win[0].job_id, int(gi), int(o)))
        sim.advance()
        rows = np.array(sim.usage.rows())
        assert np.allclose(sim.usage.sums, rows.sum(axis=0), atol=1e-9)
        for st in sim.jobs.values():
            if st.status is Status.RUNNING:
                assert all(sim.usage.row(g)[3] == 1.0 for g in st.gpus)


def test_speed_memo_duty_is_the_zoo_s() -> None:
    sim = make_simulator(load_scenario("default"))
    assert sim.memo.model_duty == {name: p.duty for name, p in ZOO.items()}
