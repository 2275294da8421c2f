"""Trace loaders: real files (skipped when ``../shared/data`` is absent; ``$GSG_DATA`` overrides)
and malformed fixtures written to ``tmp_path``, one per error class."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_sharing_env.physics.nodes import Interconnect
from gpu_sharing_env.workload.job import JobKind
from gpu_sharing_env.workload.loaders import (
    LOADERS,
    NODE_LOADERS,
    TraceError,
    load_helios,
    load_openb_nodes,
    load_pai_machines,
    load_pai_tasks,
    load_philly,
    model_from_name,
    read_helios,
    read_openb_pods,
    read_pai_tasks,
    read_philly_raw,
)
from gpu_sharing_env.workload.stats import summarize, trace_report

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GSG_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def data_file(rel: str) -> Path:
    p = DATA / rel
    if not p.is_file():
        pytest.skip(f"{p} absent (set GSG_DATA to the shared data directory)")
    return p


# ------------------------------------------------------------------------------- real traces


def test_openb_pods_real() -> None:
    load = read_openb_pods(data_file("alibaba_v2023/openb_pod_list_default.csv"))
    assert load.rows == 8152
    assert len(load.jobs) == 7064  # 6,989 one-GPU + 75 multi-GPU pods
    assert load.skipped == {"cpu_only": 1088}
    assert sum(j.gpu_frac < 1 for j in load.jobs) == 3078  # PROVENANCE: 3,078 fractional
    assert sorted({j.num_gpus for j in load.jobs}) == [1, 2, 4, 8]
    assert {j.priority for j in load.jobs} <= {0, 1, 2, 3}
    assert all(j.kind is JobKind.OFFLINE for j in load.jobs)
    assert [j.job_id for j in load.jobs] == list(range(7064))
    assert all(load.jobs[i].submit_s <= load.jobs[i + 1].submit_s for i in range(7063))


def test_openb_gpuspec_constraints_real() -> None:
    jobs = read_openb_pods(data_file("alibaba_v2023/openb_pod_list_gpuspec33.csv")).jobs
    constrained = [j for j in jobs if j.gpu_types]
    assert len(constrained) == 2388  # non-empty gpu_spec among GPU pods (~33 %, FGD Sec. 6.5)
    assert {t for j in constrained for t in j.gpu_types} == {
        "T4", "P100", "V100-16GB", "V100-32GB", "A10", "A100-40GB"
    }  # fmt: skip
    v100 = [j for j in constrained if j.gpu_types == ("V100-16GB", "V100-32GB")]
    assert len(v100) == 141 + 22  # "V100M16|V100M32" and its duplicated-token variant


def test_openb_nodes_real() -> None:
    nodes = load_openb_nodes(data_file("alibaba_v2023/openb_node_list_gpu_node.csv"))
    assert len(nodes) == 1213
    assert sum(n.num_gpus for n in nodes) == 6212
    everything = load_openb_nodes(data_file("alibaba_v2023/openb_node_list_all_node.csv"))
    assert sum(n.num_gpus for n in everything) == 6212  # the 310 CPU nodes are left out
    by_type = {t: sum(n.num_gpus for n in nodes if n.gpu_type == t) for t in {"T4", "A10"}}
    assert by_type == {"T4": 842, "A10": 2 + 4392}  # A10 nodes + G2 (assumption: A10)
    g3 = [n for n in nodes if n.gpu_type == "A100-40GB"]
    assert len(g3) == 39 and all(n.interconnect is Interconnect.NVLINK for n in g3)


def test_pai_machines_real() -> None:
    nodes = load_pai_machines(data_file("alibaba_v2020/pai_machine_spec.csv"))
    assert len(nodes) == 1897 - 83  # CPU machines left out
    # NSDI'22 Sec. 4.1: 1,295 2-GPU machines and 519 8-GPU machines.
    assert sum(n.num_gpus == 2 for n in nodes) == 1295
    assert sum(n.num_gpus == 8 for n in nodes) == 519
    assert sum(n.num_gpus for n in nodes) == 6742


def test_philly_real_and_fast() -> None:
    path = data_file("philly_via_sia/philly.csv")
    t0 = time.perf_counter()
    jobs = load_philly(path)
    assert time.perf_counter() - t0 < 5.0
    assert len(jobs) == 82_247
    s = summarize(jobs)
    assert s.duration_q["p50"] == 1144.0  # PROVENANCE: median 1,144 s
    assert s.gang_share == pytest.approx((82_247 - 76_627) / 82_247)
    assert jobs[0].submit_s < 86_400  # clock starts at midnight of the first day


def test_philly_window_and_max_jobs() -> None:
    path = data_file("philly_via_sia/philly.csv")
    day = load_philly(path, window_s=(10 * 86_400.0, 11 * 86_400.0))
    assert day and all(0 <= j.submit_s < 86_400 for j in day)
    assert len(load_philly(path, max_jobs=100)) == 100


# ---------------------------------------------------------------------------- good fixtures


def test_pai_tasks_fixture(tmp_path: Path) -> None:
    rows = [
        # job_name, task_name, inst_num, status, start, end, plan_cpu, plan_mem, plan_gpu, type
        "j1,worker,1,Terminated,1000,1600,600,29,50,",  # half a GPU
        "j2,bert_finetune,1,Terminated,1100,1200,400,10,100,V100M32",  # V100-32GB only
        "j3,worker,4,Terminated,1200,4800,800,20,100,MISC",  # 4-GPU gang, any type
        "j4,ps,2,Terminated,1300,1400,400,10,,",  # CPU task: skipped
        "j5,worker,3,Running,1400,,600,10,50,T4",  # 1.5 GPUs -> 2; censored
        "j6,worker,1,Waiting,,,600,10,25,",  # never started
    ]
    path = tmp_path / "pai_task_table.csv"
    path.write_text("\n".join(rows) + "\n")  # header-less, as the official file
    load = read_pai_tasks(path)
    assert load.rows == 6
    assert load.skipped == {"cpu_only": 1, "never_started": 1, "rounded_up": 1}
    j1, j2, j3, j5 = load.jobs
    assert (j1.num_gpus, j1.gpu_frac, j1.work_s, j1.cpu_cores) == (1, 0.5, 600.0, 6.0)
    assert j1.mem_gb == pytest.approx(8.0)  # half of the reference GPU's 16 GB
    assert j2.gpu_types == ("V100-32GB",) and j2.model == "bert"  # name hint
    assert (j3.num_gpus, j3.gpu_frac, j3.gpu_types, j3.cpu_cores) == (4, 1.0, (), 8.0)
    assert (j5.num_gpus, j5.gpu_types) == (2, ("T4",))
    assert load.censored_ids == (3,) and j5.work_s == 4800 - 1400
    header = (
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type"
    )
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    assert load_pai_tasks(path) == load.jobs


def test_philly_raw_fixture(tmp_path: Path) -> None:
    entries = [
        {
            "status": "Pass",
            "vc": "vc1",
            "jobid": "application_1",
            "user": "u1",
            "submitted_time": "2017-10-03 02:45:55",
            "attempts": [
                {
                    "start_time": "2017-10-03 02:46:00",
                    "end_time": "2017-10-03 02:50:00",
                    "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu0"]}],
                },
                {"start_time": "2017-10-03 03:00:00", "end_time": "2017-10-03 04:00:00", "detail": []},
            ],
        },
        {"status": "Killed", "vc": "vc2", "jobid": "application_2", "user": "u2",
         "submitted_time": "2017-10-03 01:00:00", "attempts": []},
        {"status": "Running", "vc": "vc2", "jobid": "application_3_resnet", "user": "u2",
         "submitted_time": "2017-10-03 05:00:00",
         "attempts": [{"start_time": "2017-10-03 05:00:10", "end_time": None,
                       "detail": [{"ip": "m3", "gpus": ["gpu3"]}]}]},
    ]  # fmt: skip
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(entries))
    load = read_philly_raw(path)
    assert load.skipped == {"never_started": 1, "cpu_only": 0}
    a, b = load.jobs
    assert (a.num_gpus, a.work_s, a.user) == (3, 4440.0, "vc1")  # 02:46 to 04:00, retries in
    assert a.submit_s == 2 * 3600 + 45 * 60 + 55  # from midnight
    assert b.model == "resnet50" and load.censored_ids == (1,)
    assert b.work_s == 1.0  # censored at the latest time in the file (its own start): 1 s
    assert read_philly_raw(path).jobs == load.jobs


def test_helios_fixture(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "1,uA,vc1,8,32,1,COMPLETED,2020-04-01 09:00:00,2020-04-01 09:00:05,2020-04-01 10:00:05,3600,5\n"
        "2,uB,vc1,0,4,1,COMPLETED,2020-04-01 09:30:00,2020-04-01 09:30:00,2020-04-01 09:31:00,60,0\n"
        "3,uC,vc2,1,,1,CANCELLED,2020-04-01 08:00:00,2020-04-01 08:00:00,2020-04-01 08:00:00,0,0\n"
    )
    load = read_helios(path)
    assert load.skipped == {"cpu_only": 1} and load.clamped == 1
    c, a = load.jobs  # sorted by submission
    assert (a.num_gpus, a.cpu_cores, a.work_s, a.user, a.submit_s) == (
        8,
        4.0,
        3600.0,
        "uA",
        9 * 3600,
    )
    assert (c.work_s, c.user) == (1.0, "uC")  # 0 s raised to 1 s
    assert load_helios(path) == load.jobs


def test_registries_and_name_hints() -> None:
    assert set(LOADERS) == {"openb", "pai", "philly", "philly-raw", "helios"}
    assert set(NODE_LOADERS) == {"openb", "pai"}
    assert model_from_name("bert-large-finetune") == "bert"
    assert model_from_name("ResNet50_imagenet") == "resnet50"
    assert model_from_name("agate_job") is None and model_from_name("rlhf") is None


def test_models_are_seeded_and_deterministic(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    lines += [f"2017-10-01 00:{m:02d}:00,{60 + m},1,{60 + m},vc" for m in range(60)]
    path.write_text("\n".join(lines) + "\n")
    a = [j.model for j in load_philly(path)]
    assert a == [j.model for j in load_philly(path)]
    assert a != [j.model for j in load_philly(path, model_seed=1)]
    assert len(set(a)) > 5


# ------------------------------------------------------------------------- malformed fixtures

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"
OK_ROW = "2017-10-09 07:01:55,66.0,1,66.0,c1"


def _philly(tmp_path: Path, *rows: str, header: str = PHILLY_HEADER) -> Path:
    path = tmp_path / "philly.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.mark.parametrize(
    ("rows", "row", "field", "rule"),
    [
        ([OK_ROW, "2017-10-09 07:02:00,nan,1,0,c1"], 2, "duration", "must be a finite number >= 0"),
        ([OK_ROW, OK_ROW, "2017-10-09 07:02:00,,1,0,c1"], 3, "duration", "finite number"),
        ([OK_ROW, "2017-10-09 07:02:00,-5,1,0,c1"], 2, "duration", ">= 0"),
        (["2017-10-09 07:02:00,10,two,0,c1"], 1, "num_gpus", "finite integer"),
        ([OK_ROW, "2017-10-09 07:02:00,10,1.5,0,c1"], 2, "num_gpus", "integer"),
        ([OK_ROW, "yesterday,10,1,0,c1"], 2, "timestamp", "date-time"),
    ],
)
def test_philly_bad_values(
    tmp_path: Path, rows: list[str], row: int, field: str, rule: str
) -> None:
    path = _philly(tmp_path, *rows)
    with pytest.raises(TraceError) as e:
        load_philly(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: row {row}: field {field!r}: ")
    assert rule in msg and "\n" not in msg


def test_missing_column(tmp_path: Path) -> None:
    path = _philly(tmp_path, "2017-10-09 07:01:55,1,c1", header="timestamp,num_gpus,cluster")
    with pytest.raises(TraceError, match=r"philly\.csv: field 'duration': required column"):
        load_philly(path)


def test_file_not_found_and_empty(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    with pytest.raises(TraceError, match=r"nope\.csv: file not found"):
        load_philly(missing)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for loader in LOADERS.values():
        with pytest.raises(TraceError, match=r"empty\.csv: file is empty"):
            loader(empty)
    header_only = _philly(tmp_path)
    with pytest.raises(TraceError, match=r"philly\.csv: no data rows"):
        load_philly(header_only)


OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
OPENB_OK = "p0,4000,8192,1,500,,BE,Succeeded,0,100,0"


@pytest.mark.parametrize(
    ("bad", "field", "rule"),
    [
        ("p1,4000,8192,1,500,H20,LS,Running,0,100,0", "gpu_spec", "unknown GPU type"),
        ("p1,4000,8192,1,500,,LS,Running,200,100,200", "deletion_time", "negative duration"),
        ("p1,4000,8192,1,1500,,LS,Running,0,100,0", "gpu_milli", "<= 1000"),
        ("p1,4000,8192,1,0,,LS,Running,0,100,0", "gpu_milli", "> 0 for GPU pods"),
        ("p1,4000,8192,1,500,,Gold,Running,0,100,0", "qos", "must be one of"),
        ("p1,abc,8192,1,500,,LS,Running,0,100,0", "cpu_milli", "finite number"),
        ("p1,4000,8192,1,500,,LS,Running,,100,0", "creation_time", "finite number"),
    ],
)
def test_openb_bad_values(tmp_path: Path, bad: str, field: str, rule: str) -> None:
    path = tmp_path / "openb_pod_list.csv"
    path.write_text("\n".join([OPENB_HEADER, OPENB_OK, bad]) + "\n")
    with pytest.raises(TraceError) as e:
        read_openb_pods(path)
    assert str(e.value).startswith(f"{path}: row 2: field {field!r}: ")
    assert rule in str(e.value)


def test_openb_censoring_and_cpu_pods(tmp_path: Path) -> None:
    path = tmp_path / "openb_pod_list.csv"
    path.write_text(
        "\n".join(
            [
                OPENB_HEADER,
                OPENB_OK,
                "p1,8000,8192,0,0,,BE,Succeeded,5,50,5",  # CPU-only
                "p2,16000,8192,2,1000,V100M16|V100M32,LS,Running,10,,10",  # no deletion time
                "p3,8000,8192,1,1000,G3,Guaranteed,Running,20,100,20",  # running at trace end
            ]
        )
        + "\n"
    )
    load = read_openb_pods(path)
    assert load.skipped == {"cpu_only": 1}
    p0, p2, p3 = load.jobs
    assert (p0.gpu_frac, p0.mem_gb, p0.priority, p0.cpu_cores) == (0.5, 8.0, 0, 4.0)
    assert (p2.num_gpus, p2.cpu_cores, p2.work_s, p2.priority) == (2, 8.0, 90.0, 2)
    assert p2.gpu_types == ("V100-16GB", "V100-32GB") and p3.gpu_types == ("A100-40GB",)
    assert load.censored_ids == (1, 2)


def test_node_lists_bad(tmp_path: Path) -> None:
    path = tmp_path / "openb_node_list.csv"
    path.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,64000,262144,8,X9\n"
    )
    with pytest.raises(
        TraceError, match=r"openb_node_list\.csv: row 2: field 'model': unknown GPU"
    ):
        load_openb_nodes(path)
    path.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn0,64000,262144,2,P100\n"
    )
    with pytest.raises(TraceError, match=r"row 2: field 'sn': must be unique"):
        load_openb_nodes(path)
    pai = tmp_path / "pai_machine_spec.csv"
    pai.write_text("machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm0,T4,96,512,2\nm1,V100,96,,8\n")
    with pytest.raises(TraceError, match=r"pai_machine_spec\.csv: row 2: field 'cap_mem'"):
        load_pai_machines(pai)


def test_pai_tasks_bad(tmp_path: Path) -> None:
    path = tmp_path / "pai_task_table.csv"
    path.write_text("j1,w,1,Terminated,100,50,600,29,50,\n")
    with pytest.raises(TraceError, match=r"row 1: field 'end_time': .*negative duration"):
        load_pai_tasks(path)
    path.write_text("j1,w,1,Terminated,100,150,600,29,50,K80\n")
    with pytest.raises(TraceError, match=r"row 1: field 'gpu_type': unknown GPU type"):
        load_pai_tasks(path)


def test_philly_raw_and_helios_bad(tmp_path: Path) -> None:
    raw = tmp_path / "cluster_job_log"
    raw.write_text(json.dumps([{"jobid": "a", "attempts": []}]))
    with pytest.raises(
        TraceError, match=r"cluster_job_log: row 1: field 'submitted_time': required"
    ):
        read_philly_raw(raw)
    raw.write_text("{not json")
    with pytest.raises(TraceError, match=r"cluster_job_log: line 1: invalid JSON"):
        read_philly_raw(raw)
    hel = tmp_path / "cluster_log.csv"
    hel.write_text("job_id,gpu_num,submit_time,duration\n1,1,2020-04-01 09:00:00,-3\n")
    with pytest.raises(TraceError, match=r"cluster_log\.csv: row 1: field 'duration': .*>= 0"):
        read_helios(hel)


# -------------------------------------------------------------------------------- trace.py


def test_trace_report_synthetic_and_trace(tmp_path: Path) -> None:
    text = trace_report("synthetic", "3", horizon_h=48.0)
    assert "seed 3" in text and "PAI target" in text and "recurring_share" in text
    path = _philly(tmp_path, OK_ROW, "2017-10-09 09:00:00,7200,4,28800,c2")
    text = trace_report("philly", str(path), profile=False)
    assert "2 rows read, 2 jobs" in text and "gang_share" in text
    with pytest.raises(TraceError, match="integer seed"):
        trace_report("synthetic", "abc")


def test_trace_cli_exits_with_one_line(tmp_path: Path) -> None:
    path = _philly(tmp_path, OK_ROW, "2017-10-09 07:02:00,nan,1,0,c1")
    proc = subprocess.run(
        [sys.executable, "scripts/trace.py", "stats", str(path), "--format", "philly"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"gsg trace: error: {path}: row 2: field 'duration': must be a finite number >= 0 "
        "(got 'nan')"
    )


def test_trace_cli_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_sharing_gym.commands import trace as mod

    assert mod.main(["stats", "-", "--format", "synthetic", "--horizon-h", "24"]) == 0
    assert "diurnal profile" in capsys.readouterr().out
