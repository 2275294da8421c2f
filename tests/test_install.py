"""The installed product: a wheel built from this tree, installed into a fresh venv outside the
repository, used as a new user would (``gsg`` command, ``gym.make``, a plug-in policy).

The fast test (``make test``) gives the fresh venv the project venv's dependencies through a
``.pth`` line (they are not what is under test) and installs the wheel itself with
``--no-deps``: the package, its data, its entry points and its console script come only from the
wheel. ``test_wheel_fully_isolated`` (slow) installs everything from the package index instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml

from gpu_sharing_env._compile import MODULES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "custom_policy.md"
#: A few jobs on a small cluster: `gsg train` in the fresh venv takes seconds.
SMALL_SCENARIO = """
description: a few jobs on a small cluster (install test)
horizon_h: 24
cluster:
  nodes:
    - {gpu_type: A100-40GB, count: 1, gpus_per_node: 4, vcpus: 64, host_mem_gb: 512, interconnect: nvlink}
    - {gpu_type: T4, count: 1, gpus_per_node: 2, vcpus: 32, host_mem_gb: 128, interconnect: pcie}
workload:
  offline:
    source: synthetic
    params: {arrivals_per_h: 8.0, duration_max_s: 7200.0}
    arrival_window_h: 1
    max_jobs: 6
  online:
    num_services: 1
env:
  queue_window: 2
"""
IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "runs", "out", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
    ".hypothesis", "tests",
)  # fmt: skip

PLUGIN = '''
"""A third-party scheduler: the first queued job on the emptiest GPU that takes it."""
import numpy as np

from gpu_sharing_env.policy import HeuristicPolicy
from gpu_sharing_env.sim.engine import Decision


class Emptiest(HeuristicPolicy):
    name = "emptiest"

    def decide(self, view):
        for job in view.window:
            mask = view.mask(job.job_id)
            for opt in range(mask.shape[1]):
                legal = np.flatnonzero(mask[:, opt])
                if legal.size:
                    g = min(legal, key=lambda g: (view.n_res[g], view.util[g], g))
                    return Decision(job.job_id, int(g), opt)
        return None
'''


#: A guard against a hung command, not a timing check: building the wheel compiles the
#: Cython modules (minutes on 2 cores), and it ran past 600 s at load ~6
#: (2026-12-01, the suite with `-n 2` beside two other jobs).
RUN_TIMEOUT_S = 1800


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert p.returncode == 0, (
        f"{cmd} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    )
    return p.stdout


def _wheel(tmp: Path) -> Path:
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    dist = tmp / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(src)],
        cwd=tmp,
    )  # fmt: skip
    (wheel,) = dist.glob("gpu_sharing_gym-*.whl")
    return wheel


def _top_level_names(wheel: Path) -> set[str]:
    """The import names a wheel installs: its top-level entries other than its metadata."""
    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
    return {t.removesuffix(".py") for t in tops if not t.endswith((".dist-info", ".data"))}


def _check_wheel_contents(wheel: Path) -> None:
    # The project's own two names only: agents/, baselines/ and configs/ install beneath them;
    # scripts/ and tests/ stay in the checkout.
    assert _top_level_names(wheel) == {"gpu_sharing_env", "gpu_sharing_gym"}
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert "gpu_sharing_env/configs/recipes/maskable_ppo_v1.yaml" in names
    assert "gpu_sharing_gym/agents/train.py" in names
    # The compiled hot path (setup.py), built where Cython is (the dev extra), beside its source.
    if importlib.util.find_spec("Cython") is not None:
        for name in MODULES:
            stem = name.replace(".", "/")
            assert f"{stem}.py" in names, name
            assert any(n.startswith(f"{stem}.") and n.endswith((".so", ".pyd")) for n in names)


def _doc_plugin(work: Path) -> str:
    """docs/custom_policy.md's walkthrough as a throwaway package: the page's policy module and
    its entry-point snippet; returns the policy's registered name."""
    text = DOC.read_text()
    code = re.findall(r"```python\n(# my_sched\.py\n.*?)```", text, re.S)[0]
    (snippet,) = re.findall(
        r"```toml\n(\[project\.entry-points\.\"gpu_sharing_gym\.policies\"\]\n.*?)```", text, re.S
    )
    (name,) = re.findall(r"^(\w+) = ", snippet, re.M)
    pkg = work / "doc_plugin"
    pkg.mkdir()
    (pkg / "my_sched.py").write_text(code)
    (pkg / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "my-sched"
            version = "0.0.1"
            [tool.setuptools]
            py-modules = ["my_sched"]
            """
        )
        + snippet
    )
    return name


def _venv(tmp: Path) -> tuple[Path, Path]:
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    return venv, bindir / "python"


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return env


def _use_the_product(venv: Path, py: Path, work: Path) -> None:
    env = _clean_env(venv)
    # The package comes from the wheel, not from this checkout.
    where = _run(
        [str(py), "-c", "import gpu_sharing_env; print(gpu_sharing_env.__file__)"], work, env
    )
    assert Path(where.strip()).is_relative_to(venv), where
    out = _run(
        [str(venv / "bin" / "gsg"), "evaluate", "--policy", "ppo_default", "--scenario", "default",
         "--seeds", "1", "--quiet", "--json", "ppo.json"],
        work, env,
    )  # fmt: skip
    assert "ppo_default" in out and (work / "ppo.json").is_file()
    code = textwrap.dedent(
        """
        import gymnasium as gym, gpu_sharing_env
        from gpu_sharing_env.config import load_scenario
        env = gym.make("GpuSharing-v0", scenario="default")
        obs, info = env.reset(seed=0)
        assert info["action_mask"].any()
        print(load_scenario("heldout_load").name, load_scenario("heldout/heldout_mix").name)
        """
    )
    assert _run([str(py), "-c", code], work, env).split() == ["heldout_load", "heldout_mix"]
    # A third-party policy two ways: module:Class on the command line, and an entry point.
    (work / "my_sched.py").write_text(PLUGIN)
    env_pp = {**env, "PYTHONPATH": str(work)}
    out = _run(
        [str(venv / "bin" / "gsg"), "evaluate", "--policy", "my_sched:Emptiest,first_fit",
         "--scenario", "default", "--seeds", "1", "--quiet"],
        work, env_pp,
    )  # fmt: skip
    assert "my_sched:Emptiest" in out  # named as given, as the leaderboard names it
    # The leaderboard from the wheel: a shipped suite by name (configs installed as package
    # data), overridden to one seed and two policies, the third-party one among them.
    out = _run(
        [str(venv / "bin" / "gsg"), "leaderboard", "--suite", "demo", "--policies",
         "first_fit,my_sched:Emptiest", "--seeds", "1", "--workers", "1", "--quiet",
         "--out", str(work / "lb")],
        work, env_pp,
    )  # fmt: skip
    assert "my_sched:Emptiest" in out and (work / "lb" / "index.html").is_file()
    plugin = work / "plugin"
    (plugin / "my_plugin").mkdir(parents=True)
    (plugin / "my_plugin" / "__init__.py").write_text(PLUGIN)
    (plugin / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "my-plugin"
            version = "0.0.1"
            [project.entry-points."gpu_sharing_gym.policies"]
            emptiest = "my_plugin:Emptiest"
            """
        )
    )
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(plugin)],
         work, env)  # fmt: skip
    out = _run([str(venv / "bin" / "gsg"), "evaluate", "--help"], work, env)
    assert "emptiest" in out  # listed among the registered names
    # docs/custom_policy.md's walkthrough, as written there, installed beside ours
    name = _doc_plugin(work)
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
          str(work / "doc_plugin")], work, env)  # fmt: skip
    out = _run([str(venv / "bin" / "gsg"), "evaluate", "--help"], work, env)
    assert name in out
    out = _run(
        [str(venv / "bin" / "gsg"), "evaluate", "--policy", name, "--scenario", "default",
         "--seeds", "1", "--quiet", "--json", "mine.json"],
        work, env,
    )  # fmt: skip
    assert name in out and (work / "mine.json").is_file()
    # Training from the wheel: a shipped recipe by name, seconds on a small scenario.
    (work / "small.yaml").write_text(SMALL_SCENARIO)
    out = _run(
        [str(venv / "bin" / "gsg"), "train", "--config", "maskable_ppo_v1", "--scenario",
         "small.yaml", "--timesteps", "64", "--n-envs", "1", "--no-pretrain", "--quiet",
         "--out", "run"],
        work, env,
    )  # fmt: skip
    assert "validation at" in out and str(Path("run") / "model.zip") in out
    summary = json.loads((work / "run" / "metrics.json").read_text())["summary"]
    assert all((work / f["path"]).is_file() for f in summary["model_files"])
    # the recipe came from the installed package data, not from a checkout
    recipe = Path(yaml.safe_load((work / "run" / "config.yaml").read_text())["config_file"])
    assert recipe.name == "maskable_ppo_v1.yaml" and recipe.is_relative_to(venv), recipe


def test_wheel_in_fresh_venv_outside_the_repo(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    _check_wheel_contents(wheel)
    venv, py = _venv(tmp_path)
    # Dependencies from the project's environment (not under test); pip itself too.
    site = Path(
        subprocess.check_output(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    deps = Path(sysconfig.get_paths()["purelib"])
    (site / "_project_deps.pth").write_text(f"{deps}\n")
    env = _clean_env(venv)
    _run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        tmp_path,
        env,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    _use_the_product(venv, py, work)


@pytest.mark.slow
def test_wheel_fully_isolated(tmp_path: Path) -> None:
    """Everything from the index (CPU torch first, as the README says); about a minute."""
    wheel = _wheel(tmp_path)
    _check_wheel_contents(wheel)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    py = venv / "bin" / "python"
    env = _clean_env(venv)
    _run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0"], tmp_path, env)
    _run([str(py), "-m", "pip", "install", "-q", f"{wheel}[rl]"], tmp_path, env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    _use_the_product(venv, py, work)


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser from PyPI (dev extra)
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_expression_with_its_file() -> None:
    """PEP 639 metadata (setuptools >= 77): ``license`` an SPDX string and ``license-files``,
    not the deprecated table setuptools warns about on every build."""
    data = _pyproject()
    project = data["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] and all((ROOT / f).is_file() for f in project["license-files"])
    (req,) = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    assert int(re.fullmatch(r"setuptools>=(\d+)", req).group(1)) >= 77  # type: ignore[union-attr]


def test_torch_install_advice_is_the_readmes() -> None:
    """pyproject.toml's comment and the README give the same command for the CPU build."""
    text = (ROOT / "pyproject.toml").read_text()
    advice = set(re.findall(r"`(pip install torch[^`]*)`", text))
    assert advice, "pyproject.toml no longer says how to install torch"
    readme = (ROOT / "README.md").read_text()
    assert all(a in readme for a in advice), advice
