"""Fidelity: the seed papers' published findings, reproduced (or not) with the simulator.

``EXPERIMENTS[id](seeds, quick)`` runs one experiment on a scenario built to match the paper's
setup (``configs/scenarios/fidelity/``) over paired seeds and returns its record: ``id``,
``paper``, ``claim``, ``paper_value``, ``sim_value``, ``verdict`` and ``holds`` (computed from
the simulated numbers: each check's 95 % interval over seeds against the claim's bound,
``fidelity.common``), ``kind`` (``"claim"``, or ``"mechanism"`` where the paper's number is an
input of the setup and the check only confirms a mechanism is wired), plus ``checks``,
``detail``, ``per_seed``, ``seeds`` and ``wall_s``. ``common.run_experiment`` adds parameter
settings, parallel workers and declared brackets; ``gsg reproduce`` is the command line;
``docs/fidelity.md`` the table and the reasons behind every claim that does not hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpu_sharing_gym.fidelity.common import OPS, RECORD_FIELDS, RECORD_KINDS
from gpu_sharing_gym.fidelity.gpulet import gpulet
from gpu_sharing_gym.fidelity.gpupool import gpupool_stp
from gpu_sharing_gym.fidelity.horus import horus
from gpu_sharing_gym.fidelity.muxflow import (
    muxflow_ablation,
    muxflow_errors,
    muxflow_offline,
    muxflow_online,
)
from gpu_sharing_gym.fidelity.pai import pai_reserve_pack, pai_sjf

Experiment = Callable[[Sequence[int], bool], dict[str, Any]]

EXPERIMENTS: dict[str, Experiment] = {
    "muxflow-online": muxflow_online,
    "muxflow-offline": muxflow_offline,
    "muxflow-ablation": muxflow_ablation,
    "muxflow-errors": muxflow_errors,
    "pai-reserve-pack": pai_reserve_pack,
    "pai-sjf": pai_sjf,
    "gpupool-stp": gpupool_stp,
    "horus": horus,
    "gpulet": gpulet,
}

__all__ = ["EXPERIMENTS", "OPS", "RECORD_FIELDS", "RECORD_KINDS", "Experiment"]
