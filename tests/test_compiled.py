"""The compiled hot path and its pure-Python fallback give the same bits.

``gpu_sharing_env._compile.MODULES`` are compiled by ``setup.py`` (Cython, pure-Python mode)
from the same ``.py`` files that run interpreted. ``GSG_PURE_PYTHON=1`` loads the sources even
where the extensions exist. The same episodes in both modes, in two processes, must agree bit
for bit (``make test`` also reruns the golden, determinism and invariant tests in pure mode).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpu_sharing_env
from gpu_sharing_env import _cython, _modes
from gpu_sharing_env._compile import MODULES, source_stem
from tests.helpers import run_probe

ROOT = Path(__file__).resolve().parents[1]

#: One process's report: its mode, where each listed module came from, a fixed-seed episode's
#: record (tests/test_golden.py's) and a random masked GpuSharing-v1 rollout's hash.
PROBE = r"""
import hashlib, json, sys
import numpy as np
import gymnasium as gym
import gpu_sharing_env
from gpu_sharing_env.config import load_scenario
from gpu_sharing_gym.bench.suite import scaled_scenario
from tests.test_golden import episode_record, _hex

def rollout(cfg, seed, steps):
    env = gym.make("GpuSharing-v1", scenario=cfg)
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    for _ in range(steps):
        for k in sorted(obs):
            h.update(np.ascontiguousarray(obs[k]).tobytes())
        h.update(np.ascontiguousarray(info["action_mask"]).tobytes())
        legal = np.flatnonzero(info["action_mask"])
        obs, r, term, trunc, info = env.step(int(legal[rng.integers(legal.size)]))
        h.update(_hex(r).encode())
        if term or trunc:
            obs, info = env.reset()
    return h.hexdigest()

files = {}
for name in gpu_sharing_env._compile.MODULES:
    __import__(name)
    files[name] = sys.modules[name].__file__
default = load_scenario("default")
print(json.dumps({
    "compiled": list(gpu_sharing_env.COMPILED),
    "files": files,
    "episode": episode_record("default", "first_fit", 1, ()),
    "mig": episode_record("mig-a100", "time_sharing", 0, ()),
    # v1's encoder: the scan (small fleets) and the incremental slots (64+ GPUs)
    "v1_default": rollout(default, 11, 150),
    "v1_128": rollout(scaled_scenario(default, 128), 5, 60),
}))
"""


def _probe(pure: bool) -> dict:
    return run_probe(PROBE, pure)


def test_pure_mode_gives_the_compiled_modes_records_bit_for_bit() -> None:
    pure = _probe(pure=True)
    assert pure["compiled"] == []
    assert all(f.endswith(".py") for f in pure["files"].values()), pure["files"]
    comp = _probe(pure=False)
    # the compiled side is compiled wherever the extensions are built (make setup)
    built = {name for name in MODULES if _modes._extension(name) is not None}
    assert set(comp["compiled"]) <= built
    for name in comp["compiled"]:
        assert not comp["files"][name].endswith(".py"), (name, comp["files"][name])
    for key in ("episode", "mig", "v1_default", "v1_128"):
        assert comp[key] == pure[key], key


def test_the_mode_is_exposed() -> None:
    assert isinstance(gpu_sharing_env.COMPILED, tuple)
    assert set(gpu_sharing_env.COMPILED) <= set(MODULES)


def test_setup_py_compiles_the_packages_list() -> None:
    """One list: setup.py reads ``_compile.MODULES``; every entry is a module with a source."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    assert "compiled_modules" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    ns: dict = {"__file__": str(ROOT / "setup.py")}
    code = (ROOT / "setup.py").read_text().split("\nclass OptionalBuildExt")[0]
    exec(compile(code, "setup.py", "exec"), ns)
    assert ns["compiled_modules"]() == MODULES
    for name in MODULES:
        assert (ROOT / (source_stem(name) + ".py")).is_file(), name
        assert ns["source_of"](name) == source_stem(name) + ".py"


def test_a_module_is_found_where_its_package_lies() -> None:
    """In a checkout ``gpu_sharing_gym.baselines`` lies in ``baselines/`` (``SOURCE_DIRS``),
    installed at its dotted path: the extension and staleness checks look there."""
    name = "gpu_sharing_gym.baselines.pai"
    assert source_stem(name) == "baselines/pai"
    assert source_stem(name, checkout=False) == "gpu_sharing_gym/baselines/pai"
    assert _modes._base(name) == ROOT / "baselines" / "pai"
    assert _modes._base("gpu_sharing_env.sim.engine") == ROOT / "gpu_sharing_env/sim/engine"


def test_the_shim_covers_what_the_compiled_modules_use() -> None:
    """Without Cython at run time ``gpu_sharing_env._cython`` stands in for ``cython``: every
    ``cython.X`` a compiled module (or its .pxd-free typing) uses must exist there."""
    used: set[str] = set()
    for name in MODULES:
        text = (ROOT / (source_stem(name) + ".py")).read_text()
        used |= set(re.findall(r"\bcython\.(\w+)", text))
        if "cython." in text:
            assert "from gpu_sharing_env import _cython as cython" in text, name
        if "cython.cimports" in text:  # C functions only where compiled, Python's otherwise
            assert re.search(r"if cython\.compiled:.*\n\s+from cython\.cimports\.", text), name
    used.discard("cimports")
    missing = sorted(u for u in used if not hasattr(_cython, u))
    assert not missing, missing


def test_no_extensions_one_warning_line(tmp_path: Path) -> None:
    """A package without its extensions (no compiler at install) runs and says so once; with
    ``GSG_PURE_PYTHON=1`` it says nothing."""
    shutil.copytree(
        ROOT / "gpu_sharing_env", tmp_path / "gpu_sharing_env",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"),
    )  # fmt: skip
    code = (
        "import gpu_sharing_env, gpu_sharing_env.fleet.cluster as c; "
        "print(gpu_sharing_env.COMPILED, c.__file__.endswith('.py'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in (_modes.PURE_ENV, "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path)
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["()", "True"]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "pure Python" in lines[0], p.stderr
    env[_modes.PURE_ENV] = "1"
    q = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert q.returncode == 0 and q.stderr == "", q.stderr


def test_benchmarks_say_which_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gsg bench`` prints and records the mode (``machine_info()["core"]``)."""
    monkeypatch.delenv(_modes.PURE_ENV, raising=False)
    assert _modes.describe(MODULES) == f"compiled ({len(MODULES)} of {len(MODULES)} modules)"
    assert _modes.describe(()) == "pure Python (no compiled modules built)"
    monkeypatch.setenv(_modes.PURE_ENV, "1")
    assert _modes.describe(()) == "pure Python (GSG_PURE_PYTHON=1)"


@pytest.mark.parametrize(
    "name, imports",
    [
        (None, None),  # the first listed module
        # it imports C-only functions of its peers' extensions (``fleet.cluster``'s
        # ``_cluster_add``): they must run from source with it
        ("gpu_sharing_env.sim.lifecycle", "gpu_sharing_env.sim.engine"),
    ],
)
def test_an_edited_source_runs_not_its_stale_build(
    tmp_path: Path, name: str | None, imports: str | None
) -> None:
    """In a checkout, a listed module edited after its extension was built runs from the
    edited ``.py`` (silently: nothing is missing, ``make compiled`` brings it back), and so
    does every module a ``cimport`` joins it to, whichever way."""
    if not gpu_sharing_env.COMPILED:
        pytest.skip("no compiled modules built here")
    name = name or gpu_sharing_env.COMPILED[0]
    if name not in gpu_sharing_env.COMPILED:
        pytest.skip(f"{name} is not compiled here")
    imports = imports or name
    for package in ("gpu_sharing_env", "baselines"):  # (every listed module's checkout dir)
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tmp_path / "pyproject.toml").write_text("")  # a source checkout
    src = tmp_path / (name.replace(".", "/") + ".py")
    ext = _modes._extension(name)
    assert ext is not None
    os.utime(src, (ext.stat().st_mtime + 10, ext.stat().st_mtime + 10))
    code = (
        f"import sys, gpu_sharing_env, {imports}; "
        f"print({name!r} in gpu_sharing_env.COMPILED, sys.modules[{name!r}].__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k not in (_modes.PURE_ENV, "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path)
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.split() == ["False", str(src)]


#: The job record's classes (``sim/state.py``): ``JobState`` and its two sub-records.
RECORD_CLASSES = ("JobState", "ServingState", "JobLedger")


@pytest.mark.parametrize("name", RECORD_CLASSES)
def test_state_pxd_declares_the_job_record_s_fields(name: str) -> None:
    """``sim/state.pxd`` (the compiled ``JobState`` and its sub-records: extension types)
    declares for each class exactly the fields ``state.py``'s ``__slots__`` name, each public
    (the interpreted class reads and writes them all), the float fields as C doubles and a
    sub-record as its class."""
    tree = ast.parse((ROOT / "gpu_sharing_env" / "sim" / "state.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    slots = next(
        ast.literal_eval(s.value)
        for s in cls.body
        if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in s.targets)
    )
    annotations = {
        s.target.id: s.annotation.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and isinstance(s.annotation, ast.Name)
    }
    pxd = (ROOT / "gpu_sharing_env" / "sim" / "state.pxd").read_text()
    block = re.search(rf"^cdef class {name}:\n((?:    .*\n?)+)", pxd, re.M)
    assert block is not None
    declared = dict(
        (field, ctype)
        for ctype, field in re.findall(r"^\s+cdef public (\w+) (\w+)$", block[1], re.M)
    )
    assert set(declared) == set(slots)
    assert {n for n, t in declared.items() if t == "double"} == {
        n for n, t in annotations.items() if t == "float"
    }
    for field, ctype in declared.items():
        if ctype in RECORD_CLASSES:
            assert annotations[field] == ctype, field


def _fields(obj: object) -> dict[str, object]:
    """A job record's fields, its sub-records' as ``"serving.duty"``, ..."""
    out: dict[str, object] = {}
    for name in type(obj).__slots__:  # type: ignore[attr-defined]
        v = getattr(obj, name)
        if type(v).__name__ in RECORD_CLASSES:
            out |= {f"{name}.{k}": x for k, x in _fields(v).items()}
        else:
            out[name] = v
    return out


def test_a_job_record_copies_and_pickles_field_for_field() -> None:
    """Every job record of an episode under way (queued, running and finished, offline and
    online) copies and pickles with every field of it and of its sub-records."""
    import copy
    import pickle

    import numpy as np

    from gpu_sharing_env.config import load_scenario
    from gpu_sharing_env.sim.build import make_simulator
    from gpu_sharing_env.sim.engine import Decision
    from gpu_sharing_env.sim.state import Status

    sim = make_simulator(load_scenario("default"))
    sim.reset(0)
    for _ in range(60):
        win = sim.window_jobs()
        if win and sim.placeable(win[0].job_id):
            g, o = np.argwhere(sim.mask(win[0].job_id))[0]
            sim.apply(Decision(win[0].job_id, int(g), int(o)))
        sim.advance()
    states = list(sim.jobs.values())
    running = [s for s in states if s.status is Status.RUNNING]
    for s in running:
        sim.progress(s.spec.job_id)  # (accrued up to now)
    assert any(s.online and s.serving.rps > 0 for s in running)
    assert any(not s.online and s.ledger.run_time_s > 0 and s.frac for s in running)
    assert any(s.status is Status.DONE for s in states)
    for st in states:
        want = _fields(st)
        assert len(want) == 36
        for twin in (copy.copy(st), pickle.loads(pickle.dumps(st))):
            assert type(twin) is type(st)
            assert type(twin.serving) is type(st.serving) and type(twin.ledger) is type(st.ledger)
            got = _fields(twin)
            assert got.keys() == want.keys()
            for name, b in want.items():
                a = got[name]
                assert a == b or (a != a and b != b), name  # (NaN times: not started, not done)
        twin = copy.copy(st)
        assert twin.gpus is st.gpus  # (shallow)
        # its sub-records its own: a copy's accrual or load never moves the original's
        assert twin.serving is not st.serving and twin.ledger is not st.ledger
