"""Issue 24: a trace replay starts fast because it imports no heavy library. Building the
PAI policies and ``first_fit`` (through the registry, as ``gsg evaluate`` does), the evaluate
command and a PAI-trace simulator imports none of torch, SB3, matplotlib, scipy, sklearn or
networkx (some baselines need them; ``gpu_sharing_gym.baselines`` loads those lazily)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "stable_baselines3", "matplotlib", "scipy", "sklearn", "networkx")

CODE = f"""
import json, sys
import gpu_sharing_gym.cli
from gpu_sharing_gym.commands import evaluate
from gpu_sharing_env.registry import make_policy
from gpu_sharing_env.config import load_scenario
from gpu_sharing_env.evaluation.runner import run_episode
from gpu_sharing_env.sim.build import make_simulator
from gpu_sharing_env.workload.loaders.alibaba import read_pai_tasks
path = sys.argv[1]
with open(path, "w") as f:
    f.write("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\\n")
    f.write("j1,worker,1,Terminated,0,100,100,8,50,\\n")
    f.write("j2,worker,2,Terminated,10,300,200,16,100,T4\\n")
assert len(read_pai_tasks(path).jobs) == 2
for name in ("first_fit", "reserve_pack", "sjf_predicted", "load_balance"):
    pol = make_policy(name)
sim = make_simulator(load_scenario("pai-hetero"))
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""


def test_replay_imports_no_heavy_library(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path / "t.csv")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
