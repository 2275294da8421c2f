"""Leaderboard cells: one (policy, scenario, seed), run in isolation, saved and resumed.

A cell runs through the one evaluation loop (:func:`gpu_sharing_env.evaluation.runner.evaluate`) on a freshly
built simulator, so its result depends only on its three coordinates (the simulator is
deterministic per seed), whichever process or Ray worker (:mod:`gpu_sharing_gym.backends`) runs it. Each
finished cell is saved atomically as ``DIR/cells/<scenario>/<policy>/<seed>.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpu_sharing_env.config import ScenarioConfig, load_scenario
from gpu_sharing_env.evaluation.metrics import METRIC_NAMES
from gpu_sharing_env.evaluation.occupancy import PlacementRecorder
from gpu_sharing_env.evaluation.runner import evaluate, json_safe
from gpu_sharing_env.policy import Policy
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.sim.engine import Simulator
from gpu_sharing_gym.plumbing.fileio import atomic_write_text

#: Bumped when the cell file layout changes (older files are recomputed).
CELL_FORMAT = 1


@dataclass(frozen=True)
class Cell:
    """One (policy, scenario, seed) of the leaderboard.

    Attributes:
        policy: Registry name (``baselines.POLICIES``).
        scenario: Scenario name (the loaded config's ``name``; output directories use it).
        scenario_path: The YAML file it was loaded from (what workers load).
        seed: Episode seed.
    """

    policy: str
    scenario: str
    scenario_path: str
    seed: int
    variant: str = ""
    """What besides the scenario file decides the episode (``gsg evaluate``'s ``--trace``,
    ``--cluster``, ``--max-jobs``), as a digest; a saved cell is reused only for the same."""

    def path(self, out: Path) -> Path:
        """Where this cell's result file lives under the output directory ``out``."""
        return out / "cells" / self.scenario / policy_dir(self.policy) / f"{self.seed}.json"


def policy_dir(policy: str) -> str:
    """A policy's directory name under the output directory: its name, or for a path (a
    ``model.zip``) the file name and a hash of the whole path, so that the files stay inside the
    output directory and two checkpoints both named ``model.zip`` stay apart."""
    if "/" not in policy and "\\" not in policy:
        return policy
    digest = hashlib.sha256(policy.encode()).hexdigest()[:8]
    return f"{Path(policy).name}-{digest}"


def scenario_digest(path: str | Path) -> str:
    """Content hash of a scenario file: a saved cell is reused only if its scenario is unchanged."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


@lru_cache(maxsize=256)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def policy_digest(policy: str) -> str | None:
    """Content hash of the checkpoint ``policy`` stands for (a shipped agent's name or a path to
    a ``.zip``), None for a registered heuristic: a saved agent cell is reused only if its
    checkpoint is unchanged, so a shipped agent replaced under its name, or a run's
    ``model.zip`` retrained in place, is evaluated again rather than read from the old cells."""
    import gpu_sharing_gym.agents as agents_pkg  # (the package only: no torch)

    if "/" in policy or "\\" in policy or policy.endswith(".zip"):
        path = Path(policy)
    else:
        path = Path(agents_pkg.__file__).resolve().parent / "pretrained" / f"{policy}.zip"
    try:
        st = path.stat()
        return _file_digest(str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return None


def plan_cells(
    policies: Sequence[str], scenario_paths: Mapping[str, str], seeds: Sequence[int]
) -> list[Cell]:
    """All cells, scenario-major then policy then seed (the order of tables and plots)."""
    return [
        Cell(p, s, path, seed)
        for s, path in scenario_paths.items()
        for p in policies
        for seed in seeds
    ]


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def run_cell(
    cell: Cell,
    cfg: ScenarioConfig | None = None,
    policy: Policy | None = None,
    sim: Simulator | None = None,
    detail: bool = True,
    catch: bool = True,
) -> dict[str, Any]:
    """Run one cell; with ``catch`` it never raises (a failure becomes ``status="error"`` with a
    one-line message), without it the failure propagates.

    Returns the JSON-ready content of the cell file: ``record`` (the CSV row), ``extras`` (the
    evaluation record's other keys: ``model_version``, ``x_*``), and with ``detail`` also
    ``timeseries``, ``jobs`` (placements), ``options`` (labels of option indices),
    ``gpu_types`` and ``slo_target`` (what the leaderboard's plots draw). ``cfg``, ``policy``
    and ``sim``, if given, are used instead of building them from the cell (``gsg evaluate``
    keeps one simulator for all its episodes).
    """
    t0 = time.perf_counter()
    base: dict[str, Any] = {
        "format": CELL_FORMAT,
        "cell": {"policy": cell.policy, "scenario": cell.scenario, "seed": cell.seed},
        "variant": cell.variant,
    }
    try:
        base["scenario_digest"] = scenario_digest(cell.scenario_path)
        base["policy_digest"] = policy_digest(cell.policy)
        cfg = cfg if cfg is not None else load_scenario(cell.scenario_path)
        policy = policy if policy is not None else make_policy(cell.policy)
        sim = sim if sim is not None else make_simulator(cfg)
        recorder = PlacementRecorder(sim) if detail else None
        try:
            (rec,) = evaluate(policy, cfg, [cell.seed], sim=sim)
        finally:
            if recorder is not None:
                recorder.detach()
        record: dict[str, Any] = {
            "policy": cell.policy,
            "scenario": cell.scenario,
            "seed": cell.seed,
            "oracle": bool(rec["oracle"]),
        }
        record.update({k: rec[k] for k in METRIC_NAMES})
        record.update(status="ok", error="", wall_s=time.perf_counter() - t0)
        base.update(
            record=json_safe(record),
            extras=json_safe({k: v for k, v in rec.items() if k not in record}),
            slo_target=cfg.slo_target,
        )
        if detail:
            assert recorder is not None
            base.update(
                options=[o.label for o in sim.options],
                gpu_types=list(getattr(sim.cluster, "type_name_of", ())),
                timeseries=[[_finite(float(v)) for v in row] for row in sim.timeseries],
                jobs=recorder.jobs() if recorder.active else [],
            )
    except Exception as e:  # recorded, never propagated: one failing cell must not stop the rest
        if not catch:
            raise
        record = {"policy": cell.policy, "scenario": cell.scenario, "seed": cell.seed}
        record.update({"oracle": None, **dict.fromkeys(METRIC_NAMES)})
        record.update(status="error", error=_one_line(e), wall_s=time.perf_counter() - t0)
        base["record"] = record
    return base


def evaluation_record(result: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's result as :func:`gpu_sharing_env.evaluation.runner.evaluate`'s record (``gsg evaluate
    --json``): policy, scenario, seed, oracle, ``model_version``, the metrics, ``x_*``."""
    rec = {k: v for k, v in result["record"].items() if k not in ("status", "error", "wall_s")}
    return {**rec, **result.get("extras", {})}


def save_cell(out: Path, cell: Cell, result: Mapping[str, Any]) -> None:
    """Atomically write a cell's result file."""
    atomic_write_text(cell.path(out), json.dumps(result, allow_nan=False, separators=(",", ":")))


def load_cell(out: Path, cell: Cell) -> dict[str, Any] | None:
    """A saved result for ``cell``, or None if absent, unreadable, outdated or for another
    version of the scenario file."""
    try:
        data = json.loads(cell.path(out).read_text())
        if data.get("format") != CELL_FORMAT or data["cell"] != {
            "policy": cell.policy,
            "scenario": cell.scenario,
            "seed": cell.seed,
        }:
            return None
        if data.get("scenario_digest") not in (None, scenario_digest(cell.scenario_path)):
            return None
        if data.get("variant", "") != cell.variant:
            return None
        digest = policy_digest(cell.policy)
        if digest is not None and data.get("policy_digest") != digest:
            return None  # another checkpoint under this name (or a cell saved before digests)
        return dict(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pending_cells(out: Path, cells: Iterable[Cell]) -> tuple[list[Cell], dict[Cell, dict]]:
    """Split ``cells`` into those still to run and the saved ``ok`` results (errors rerun)."""
    todo: list[Cell] = []
    done: dict[Cell, dict] = {}
    for c in cells:
        res = load_cell(out, c)
        if res is not None and res["record"].get("status") == "ok":
            done[c] = res
        else:
            todo.append(c)
    return todo, done
