"""The cluster's typed views (issue 51): compiled, the single-GPU mask loop reads the state
arrays through views held from the cluster's reset (``Cluster.state_views``) and a job's static
parts through views kept with its ``_static`` entry, instead of acquiring ~15 buffers a mask.

Checked here: a copy of a simulator (``Simulator.copy``, a deep copy) and a pickled cluster
build views of their own arrays, so after the original moves on, each cluster's mask equals
the source's numpy passes run on that cluster (``tests/helpers.interpreted``); a reset gives
fresh views of the fresh arrays.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.fleet import cluster as cluster_mod
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Decision, Simulator
from tests.helpers import interpreted

ROOT = Path(__file__).resolve().parents[1]


def _play(sim: Simulator, rng: np.random.Generator, n: int) -> None:
    for _ in range(n):
        if sim.done:
            return
        win = sim.window_jobs()
        if win and sim.placeable(win[0].job_id):
            jid = win[0].job_id
            legal = np.argwhere(sim.mask(jid))
            g, o = legal[rng.integers(len(legal))]
            sim.apply(Decision(jid, int(g), int(o)))
        sim.advance()


def _masks_agree(c: Any, sim: Simulator, rng: np.random.Generator) -> None:
    """The cluster's ``_single_mask`` (compiled: the typed loop) equals the source's numpy
    passes on the same cluster, for random jobs of the episode (online or not, gangs)."""
    src = interpreted(cluster_mod)
    specs = [st.spec for st in sim.jobs.values()]
    caps = sorted(set(c.mem_cap.tolist()))
    for _ in range(30):
        spec = specs[int(rng.integers(len(specs)))]
        kw: dict[str, Any] = {"mem_gb": float(rng.choice([1.0, 7.5, *caps]))}
        if not spec.online:
            kw["num_gpus"] = n = int(rng.choice([1, 1, 2]))
            if n > 1:
                kw["gpu_frac"] = 1.0
        job = replace(spec, **kw)
        a = cluster_mod.Masks._single_mask(c.masks, job)
        b = src.Masks._single_mask(c.masks, job)
        assert np.array_equal(a, b), job


@pytest.mark.parametrize("scenario", ["default", "mig-a100"])
def test_a_copy_s_mask_reads_its_own_state(scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the loop on every fleet here (compiled, it runs below ``_MASK_LOOP_GPUS`` GPUs only)
    monkeypatch.setattr(cluster_mod, "_MASK_LOOP_GPUS", 1 << 30)
    rng = np.random.default_rng(7)
    sim = make_simulator(load_scenario(scenario))
    sim.reset(2)
    _play(sim, rng, 25)
    _masks_agree(sim.cluster, sim, rng)  # (the original's views are built here)
    twin = sim.copy()
    thawed = pickle.loads(pickle.dumps(sim.cluster))
    assert twin.cluster._views is None and thawed._views is None
    n_res = sim.cluster.n_res.copy()
    _play(sim, rng, 40)  # the original moves on; the copy and the pickled one stay
    assert not np.array_equal(n_res, sim.cluster.n_res) or sim.done
    assert np.array_equal(twin.cluster.n_res, n_res) and np.array_equal(thawed.n_res, n_res)
    for c, s in ((twin.cluster, twin), (thawed, twin), (sim.cluster, sim)):
        _masks_agree(c, s, rng)
    _play(twin, rng, 40)  # and the copy moves on too
    _masks_agree(twin.cluster, twin, rng)
    _masks_agree(sim.cluster, sim, rng)
    if not cluster_mod.__file__.endswith(".py"):  # compiled: views were built
        assert twin.cluster.state_views() is not sim.cluster.state_views()
    # a reset replaces the arrays: the next mask views the new ones
    sim.reset(5)
    _play(sim, rng, 10)
    _masks_agree(sim.cluster, sim, rng)


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_twin_s_views_read_its_own_state(how: str) -> None:
    """A view built on a copied, deep-copied or unpickled simulator reads that simulator's
    arrays, not the original's (the views' cache and their shared part stay behind), and the
    twin has its own ``uid``."""
    import copy

    from gpu_sharing_env.sim.view import ClusterView

    rng = np.random.default_rng(3)
    sim = make_simulator(load_scenario("default"))
    sim.reset(4)
    _play(sim, rng, 20)
    ClusterView(sim).job(next(iter(sim.jobs)))  # (the original's views and cache are built)
    twins = {
        "copy": sim.copy,
        "deepcopy": lambda: copy.deepcopy(sim),
        "pickle": lambda: pickle.loads(pickle.dumps(sim)),
    }
    twin = twins[how]()
    assert twin.uid != sim.uid
    _play(twin, rng, 30)
    view = ClusterView(twin)
    assert view.simulator_id == twin.uid
    assert np.array_equal(view.n_res, twin.cluster.n_res)
    assert np.shares_memory(view.n_res, twin.cluster.n_res)
    assert not np.shares_memory(view.n_res, sim.cluster.n_res)


def test_a_cluster_pickled_interpreted_masks_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster pickled by a pure Python process (its kept job entries have no views) gives
    the right masks in a compiled one: the entries are made again with their views."""
    if cluster_mod.__file__.endswith(".py"):
        pytest.skip("this process runs the cluster interpreted: nothing compiled to load it")
    path = tmp_path / "cluster.pkl"
    code = (
        "import pickle, numpy as np; "
        "from gpu_sharing_env.config import load_scenario; "
        "from gpu_sharing_env.sim.build import make_simulator; "
        "from tests.test_cluster_views import _play; "
        "sim = make_simulator(load_scenario('default')); sim.reset(2); "
        "_play(sim, np.random.default_rng(7), 25); "
        "specs = [st.spec for st in sim.jobs.values()]; "
        "[sim.cluster.masks._single_mask(s) for s in specs]; "  # (entries kept, without views)
        f"pickle.dump((sim.cluster, specs), open({str(path)!r}, 'wb'))"
    )
    env = {**os.environ, "GSG_PURE_PYTHON": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)
    with path.open("rb") as f:
        c, specs = pickle.load(f)  # (the file this test's own subprocess wrote)
    assert any(hit[3] is None for hit in c.masks._job_static.values())
    monkeypatch.setattr(cluster_mod, "_MASK_LOOP_GPUS", 1 << 30)
    src = interpreted(cluster_mod)
    for spec in specs:
        assert np.array_equal(
            cluster_mod.Masks._single_mask(c.masks, spec), src.Masks._single_mask(c.masks, spec)
        ), spec
