"""Test helpers: tiny clusters, fixed workloads and a linear speed model for hand-computed
timelines (so timeline tests check the engine, not the calibrated coefficients)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from gpu_sharing_env.config import ScenarioConfig, from_dict
from gpu_sharing_env.physics.interference import Resident
from gpu_sharing_env.physics.modes import SharingMode
from gpu_sharing_env.physics.nodes import Interconnect, NodeSpec
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_env.workload.job import JobKind, JobSpec, ServiceSpec


class LinearSpeed:
    """Exclusive = 1; TS and MPS-at-100% split evenly; MPS = SM share; MIG = slices/7."""

    SOLO: ClassVar[dict[str, float]] = {"V100-16GB": 1.0, "A100-40GB": 2.0, "T4": 0.5, "P100": 0.6}

    def solo_speed(self, model: str, gpu_type: str) -> float:
        return self.SOLO[gpu_type]

    def rates(self, gpu_type: str, mode: SharingMode, residents: Sequence[Resident]) -> list[float]:
        n = len(residents)
        if mode is SharingMode.MIG:
            return [r.mig_compute_slices / 7.0 for r in residents]
        if mode is SharingMode.MPS:
            return [r.sm_frac for r in residents]
        return [1.0 / n] * n

    def batch_latency_ms(self, model: str, gpu_type: str, batch_size: int) -> float:
        return 10.0


def scenario(**over: Any) -> ScenarioConfig:
    data: dict[str, Any] = {
        "name": "test",
        "cluster": {"nodes": [{"gpu_type": "V100-16GB", "count": 1, "gpus_per_node": 1}]},
        "horizon_h": 10.0,
        "tick_s": 300.0,
        "sharing": {"mps_start_s": 0.0, "mig_reconfig_s": 5.0, "mig_mode_switch_s": 60.0},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k] = {**data[k], **v}
        else:
            data[k] = v
    return from_dict(ScenarioConfig, data, src="<test>")


def job(
    jid: int,
    work_s: float,
    submit_s: float = 0.0,
    mem_gb: float = 4.0,
    num_gpus: int = 1,
    cpu: float = 1.0,
    **kw: Any,
) -> JobSpec:
    return JobSpec(
        job_id=jid,
        kind=JobKind.OFFLINE,
        model=kw.pop("model", "resnet50"),
        submit_s=submit_s,
        num_gpus=num_gpus,
        gpu_frac=1.0,
        mem_gb=mem_gb,
        cpu_cores=cpu,
        work_s=work_s,
        est_work_s=work_s,
        **kw,
    )


def service(
    jid: int, lifetime_s: float, rps: float = 50.0, slo_ms: float = 100.0, batch_size: int = 8
) -> JobSpec:
    return JobSpec(
        job_id=jid,
        kind=JobKind.ONLINE,
        model="bert",
        submit_s=0.0,
        num_gpus=1,
        gpu_frac=1.0,
        mem_gb=4.0,
        cpu_cores=1.0,
        work_s=lifetime_s,
        est_work_s=lifetime_s,
        service=ServiceSpec(
            slo_ms=slo_ms, batch_size=batch_size, base_rps=rps, peak_rps=rps, noise_frac=0.0
        ),
    )


def nodes(
    gpu_type: str = "V100-16GB",
    n_nodes: int = 1,
    gpus: int = 1,
    vcpus: float = 64.0,
    interconnect: str = "nvlink",
) -> list[NodeSpec]:
    return [
        NodeSpec(f"n{i}", gpu_type, gpus, vcpus, 256.0, Interconnect(interconnect))
        for i in range(n_nodes)
    ]


def make_sim(
    jobs: list[JobSpec], node_list: list[NodeSpec] | None = None, **over: Any
) -> Simulator:
    return Simulator(
        scenario(**over), node_list or nodes(), lambda rng: list(jobs), speed=LinearSpeed()
    )


def option(sim: Simulator, label: str) -> int:
    return [o.label for o in sim.options].index(label)


def place_at_random(sim: Simulator, rng: Any, p: float = 0.8, batch_p: float = 0.0) -> bool:
    """With probability ``p``, place a random placeable job of the window at a random legal
    (GPU, option) (``rng`` a numpy Generator); an online service, with probability ``batch_p``,
    with a batch size of its own (1-8). Returns whether one was placed."""
    import numpy as np

    from gpu_sharing_env.sim.engine import Decision

    placeable = [s for s in sim.window_jobs() if sim.placeable(s.job_id)]
    if not placeable or rng.random() >= p:
        return False
    s = placeable[int(rng.integers(len(placeable)))]
    legal = np.argwhere(sim.mask(s.job_id))
    g, o = legal[int(rng.integers(len(legal)))]
    own = batch_p > 0.0 and s.service is not None and rng.random() < batch_p
    sim.apply(Decision(s.job_id, int(g), int(o), int(rng.integers(1, 9)) if own else 0))
    return True


def check_service_load(st: Any, z: float, rps: float, duty_before: float) -> bool:
    """Assert a live service's load is the formula's, bit for bit: its noise state ``z``, its
    request rate ``rps`` and, on GPUs, its duty quantised with ``round`` (else unchanged from
    ``duty_before``). Returns whether it is on GPUs."""
    from gpu_sharing_env.sim.constants import DUTY_STEP

    sv = st.serving
    assert sv.noise_z.hex() == z.hex() and sv.rps.hex() == rps.hex()
    if not st.gpus:
        assert sv.duty == duty_before
        return False
    duty = rps * sv.solo_batch_ms / 1000.0 / st.effective_batch_size
    want = max(DUTY_STEP, round(min(1.0, duty) / DUTY_STEP) * DUTY_STEP)
    assert sv.duty.hex() == want.hex()
    return True


# ---------------------------------------------------------------- golden files
#: Relative tolerance of a golden metric when the numeric stack differs from the recording's.
GOLDEN_REL_TOL = 1e-9


def numeric_stack() -> str:
    """The numeric stack golden files are bit-exact for: library versions and the BLAS kernel.
    numpy releases change the last bit of some reductions (SIMD and pairwise sums), and so does
    OpenBLAS's kernel for the CPU it runs on (MuxFlow's MLP predictor trains with BLAS: the same
    wheels gave a one-ulp different ``gpu_mem_util`` on a SkylakeX kernel than where the goldens
    were recorded), and numpy's SIMD loops by the CPU features they dispatch on (the same wheels
    summed ``gpu_mem_util`` one ulp apart on two CPUs); one ulp changes every hash downstream."""
    import hashlib

    import numpy
    import scipy
    from threadpoolctl import threadpool_info

    blas = sorted(
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    )
    from numpy._core._multiarray_umath import __cpu_features__

    simd = ",".join(sorted(k for k, on in __cpu_features__.items() if on))
    cpu = hashlib.sha256(simd.encode()).hexdigest()[:8]
    return (
        f"numpy {numpy.__version__}, scipy {scipy.__version__}, blas {'; '.join(blas)}, simd {cpu}"
    )


def assert_golden_metrics(got: dict[str, str], want: dict[str, str], exact: bool) -> None:
    """Metrics recorded as ``float.hex``: equal bit for bit when ``exact`` (the same numeric
    stack as the recording), else within :data:`GOLDEN_REL_TOL` (a model change moves metrics
    by far more than that; a numpy release by an ulp)."""
    if exact:
        assert got == want  # a failure names the metric that moved
        return
    assert sorted(got) == sorted(want)
    moved = {}
    for k, w in want.items():
        g = got[k]
        if g == w:
            continue
        a, b = float.fromhex(g), float.fromhex(w)
        if not abs(a - b) <= GOLDEN_REL_TOL * max(abs(a), abs(b), 1e-300):
            moved[k] = (a, b)
    assert not moved, f"metrics moved (got, golden): {moved}"


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as a module (the probes and tools are scripts, not package modules)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def interpreted(module: ModuleType) -> ModuleType:
    """A compiled module's Python source, loaded a second time under another name: the two
    bodies of an ``if cython.compiled:`` function run side by side on the same inputs."""
    path = module.__file__.split(".cpython")[0].removesuffix(".py") + ".py"  # type: ignore[union-attr]
    name = "_source_" + module.__name__.replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # (while it runs: dataclasses look their module up)
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[name]
    return mod


def installed_modules() -> dict[str, Path]:
    """Every module the wheel installs, by its installed name -> its file in this checkout
    (``scripts/typecheck.py`` reads the mapping from ``pyproject.toml``)."""
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("_typecheck", root / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {s.module: root / s.path for s in mod.sources()}


def tiny_scenario_yaml(max_jobs: int, name: str | None = None) -> str:
    """A scenario YAML small enough for CLI tests: one node of two V100s, ``max_jobs`` synthetic
    jobs and one service over two hours, no faults."""
    head = f"name: {name}\n" if name else ""
    return head + (
        "horizon_h: 2\n"
        "slo_target: 0.9\n"
        "cluster:\n"
        "  nodes:\n"
        "    - {gpu_type: V100-16GB, count: 1, gpus_per_node: 2, vcpus: 32, host_mem_gb: 128}\n"
        "workload:\n"
        f"  offline: {{source: synthetic, params: {{}}, max_jobs: {max_jobs}}}\n"
        "  online: {num_services: 1}\n"
        "faults:\n"
        "  rate_per_gpu_h: {user_signal: 0.0, app_error: 0.0, xid: 0.0}\n"
    )


def run_probe(code: str, pure: bool, timeout: float = 300) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter at the repository's root, compiled (``pure`` False:
    ``GSG_PURE_PYTHON`` unset) or interpreted (set to 1); returns the JSON object its last line
    of output prints."""
    from gpu_sharing_env import _modes

    env = {k: v for k, v in os.environ.items() if k != _modes.PURE_ENV}
    if pure:
        env[_modes.PURE_ENV] = "1"
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))
