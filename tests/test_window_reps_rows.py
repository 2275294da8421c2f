"""The window build's representatives and rows at scale (docs/notes/2026-12-02-window-reps-and-rows.md).

- ``_Reps.gpus`` and ``_Reps.firsts`` (pointers into their arrays, answers written to a kept
  buffer and copied out) against numpy's sorted union and a dictionary of the keys met, on
  random representatives, peers, classes, modes and rising nodes.
- ``_Writer.fill`` (the targets' GPUs listed from the rows, numpy's log1p of the busy ones
  side by side): at every build of a pruned window rollout on ``default`` scaled to 256 GPUs,
  each row's target GPU cells equal that GPU's row of the whole fleet's table
  (``CandidateBuilder._gpu_rows()``: every GPU, the whole ``left`` array's log1p).
- ``Legality.targets_on`` (the GPUs read through a pointer to their memory) of any int64
  array, a strided one and a list included, equals its answer on a fresh C-order array.

Compiled only (the interpreted build has no representatives and writes every GPU's cells).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.envs import candidates
from gpu_sharing_gym.bench.suite import scaled_scenario

compiled_only = pytest.mark.skipif(
    candidates.__file__.endswith(".py"), reason="envs.candidates runs interpreted here"
)


def _random_reps(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Representatives (rising), each one's peer (-1, or a GPU off its node that is no
    representative, each peer once), classes, modes, the options' modes and rising nodes."""
    n_gpus = int(rng.integers(2, 80))
    node_of = np.sort(rng.integers(0, max(1, n_gpus // 4), size=n_gpus)).astype(np.int64)
    reps = np.sort(rng.choice(n_gpus, size=int(rng.integers(1, n_gpus + 1)), replace=False))
    others = [g for g in range(n_gpus) if g not in set(reps.tolist())]
    rng.shuffle(others)
    alts = np.full(len(reps), -1, dtype=np.int64)
    for i, r in enumerate(reps.tolist()):
        off = [g for g in others if node_of[g] != node_of[r]]
        if off and rng.uniform() < 0.7:
            alts[i] = off[0]
            others.remove(off[0])
    n_cls = int(rng.integers(1, 6))
    cls = rng.integers(0, n_cls, size=n_gpus).astype(np.int64)
    mode = rng.integers(-2, 4, size=n_gpus).astype(np.int64)
    opt_mode = rng.integers(0, 4, size=int(rng.integers(1, 9))).astype(np.int64)
    return reps.astype(np.int64), alts, cls, mode, opt_mode, node_of, np.int64(n_cls)


@compiled_only
def test_reps_gpus_and_firsts_are_numpys() -> None:
    rng = np.random.default_rng(7)
    for _ in range(400):
        reps, alts, cls, mode, opt_mode, node_of, n_cls = _random_reps(rng)
        n_opts = len(opt_mode)
        r = candidates._Reps((reps, alts), cls, mode, opt_mode, node_of, int(n_cls) * n_opts * 2)
        assert r.gpus(-1) is reps
        for here in [-1, *sorted(set(node_of.tolist())), int(node_of.max()) + 1]:
            if here < 0:
                want = reps
            else:
                off = reps[node_of[reps] != here]
                peers = alts[(node_of[reps] == here) & (alts >= 0)]
                want = np.sort(np.concatenate([off, peers, np.flatnonzero(node_of == here)]))
            got = r.gpus(here)
            assert got.dtype == np.int64 and got.flags.c_contiguous
            assert np.array_equal(got, want), (here, got, want)
            # the first of each key among rising flat targets on those GPUs, node ``here`` apart
            cells = np.array(
                [g * n_opts + o for g in want.tolist() for o in range(n_opts)], dtype=np.int64
            )
            flat = np.sort(
                rng.choice(cells, size=int(rng.integers(0, len(cells) + 1)), replace=False)
            )
            seen: set[tuple[int, ...]] = set()
            first = []
            for f in flat.tolist():
                g, o = divmod(f, n_opts)
                key = (int(cls[g]), o, int(mode[g] == opt_mode[o]), int(node_of[g] == here))
                if key not in seen:
                    seen.add(key)
                    first.append(f)
            for arg in (flat, flat.tolist(), np.repeat(flat, 2)[::2]):
                got_f = r.firsts(arg, here)
                assert got_f.dtype == np.int64
                assert got_f.tolist() == first, (here, got_f, first)


def _window_env(gpus: int) -> gym.Env:
    return gym.make(
        "GpuSharing-v3",
        scenario=scaled_scenario(load_scenario("default"), gpus),
        pruning="classes",
        decision_scope="window",
        max_candidates=65536,
    ).unwrapped


@compiled_only
def test_window_rows_gpu_cells_are_the_fleets() -> None:
    """Every row's target GPU cells are that GPU's row of the whole fleet's table, at every
    build of pruned window rollouts (two episodes; migrations and a busy fleet included)."""
    env = _window_env(256)
    builder = env.interface.builder
    at = candidates._COL["type"]
    width = len(candidates._GPU_COLS)
    rows = busy = 0
    for seed in (3, 5):
        _, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(150):
            cands = env.interface.candidates
            whole = builder._gpu_rows()
            gs = cands.gpu[1:]
            got = cands.features[1:, at : at + width]
            assert got.view(np.uint32).tobytes() == whole[gs].view(np.uint32).tobytes()
            rows += len(gs)
            busy += int((env.sim.cluster.n_res[gs] > 0).sum())
            legal = np.flatnonzero(np.asarray(info["action_mask"]).view(bool))
            _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
            if te or tr:
                break
    assert rows > 1000 and busy > 50


@compiled_only
def test_targets_on_reads_any_int64_gpus() -> None:
    env = _window_env(128)
    _, info = env.reset(seed=2)
    rng = np.random.default_rng(2)
    sim = env.sim
    checked = 0
    for _ in range(30):
        for _, jid in sim.queue:
            if not sim.legality.typed_job(jid):
                continue
            gpus = np.sort(rng.choice(sim.cluster.n_gpus, size=9, replace=False)).astype(np.int64)
            want = sim.legality.targets_on(jid, gpus.copy(), False)
            both = np.repeat(gpus, 2)[::2]  # (strided: not C order)
            for arg in (both, gpus.tolist(), gpus.astype(np.int32)):
                assert np.array_equal(sim.legality.targets_on(jid, arg, False), want)
            checked += 1
        legal = np.flatnonzero(np.asarray(info["action_mask"]).view(bool))
        _, _, te, tr, info = env.step(int(legal[rng.integers(legal.size)]))
        if te or tr:
            break
    assert checked > 10
