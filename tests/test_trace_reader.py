"""The Alibaba readers without pandas (``loaders/_table.py``, the replay path) against pandas'
reader (``engine="pandas"``): the same records bit for bit (every field, its type, floats by
``float.hex``), the same counts and the same one-line errors, on fixtures, generated files and
the shared data (skipped when ``../shared/data`` is absent; ``$GSG_DATA`` overrides). And a
replay's process (``gsg evaluate`` on a PAI trace and fleet) never imports pandas."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_sharing_env.workload.loaders import (
    PAI_TASK_COLUMNS,
    TraceError,
    load_openb_nodes,
    load_pai_machines,
    read_openb_pods,
    read_pai_tasks,
)
from gpu_sharing_env.workload.loaders._common import NAME_HINTS, _any_hint, _hinted_rows
from gpu_sharing_env.workload.loaders._table import _empty, _number, _parse, numeric, read_table

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GSG_DATA", ROOT.parent / "shared" / "data"))


def _value(v: Any) -> Any:
    if isinstance(v, float):
        return ("float", v.hex())
    if isinstance(v, tuple):
        return tuple(_value(x) for x in v)
    return (type(v).__name__, v)


def _key(x: Any) -> Any:
    """Everything a reader returned, floats as ``float.hex`` and every value with its type."""
    if isinstance(x, list):
        return [_key(j) for j in x]
    if dataclasses.is_dataclass(x):
        return [(f.name, _key(getattr(x, f.name))) for f in dataclasses.fields(x)]
    if isinstance(x, dict):
        return sorted((k, _key(v)) for k, v in x.items())
    return _value(x)


def _outcome(read: Callable[..., Any], path: Path, engine: str) -> Any:
    try:
        return _key(read(path, engine=engine))
    except TraceError as e:
        return ("TraceError", str(e))


def assert_same(read: Callable[..., Any], path: Path) -> Any:
    """Both engines read ``path`` alike; the csv engine's outcome."""
    ours = _outcome(read, path, "csv")
    assert ours == _outcome(read, path, "pandas")
    return ours


# ------------------------------------------------------------------------------- PAI tasks
PAI_ROWS = [
    "j1,worker,1,Terminated,1000,1600,600,29,50,",
    "j2,bert_finetune,1,Terminated,1100,1200,400,10,100,V100M32",
    "j3,worker,4,Terminated,1200,4800,800,20,100,MISC",
    "j4,ps,2,Terminated,1300,1400,400,10,,",
    "j5,worker,3,Running,1400,,600,10,50,T4",
    "j6,worker,1,Waiting,,,600,10,25,",
    "j7,resnet-rl,2,Terminated,1500.5,1500.75,0.1,1,33.333333333333336,v100",
    "j8,  gpt ,1,Terminated, 1e3 ,2E3,  ,1,12.5 , P100 ",
    'j9,"lstm, ctr",1,Terminated,1600,1700,nan,1,100,T4',
    "j10,worker,2,Failed,1700,0,600,1,200,",
]


@pytest.mark.parametrize(
    ("header", "newline", "bom"),
    [(False, "\n", False), (True, "\n", False), (True, "\r\n", True), (False, "\r", False)],
)
def test_pai_tasks_fixture_both_engines(
    tmp_path: Path, header: bool, newline: str, bom: bool
) -> None:
    lines = ([",".join(PAI_TASK_COLUMNS)] if header else []) + PAI_ROWS
    lines.insert(3, "")  # a blank line (skipped)
    lines.insert(5, "   ")  # and one of spaces
    path = tmp_path / "pai_task_table.csv"
    path.write_bytes(("\ufeff" if bom else "").encode() + newline.join(lines).encode() + b"\n")
    load = read_pai_tasks(path)
    assert load.rows == len(PAI_ROWS) and len(load.jobs) == 8
    assert assert_same(read_pai_tasks, path) == _key(load)


def _random_pai(rng: random.Random, n: int) -> str:
    names = ["worker", "ps", "bert", "resnet50", "rl-agent", "deepfm_ctr", "x gan", "agate"]
    types = ["", "", "MISC", "T4", "P100", "V100", "V100M32", "v100m16"]
    rows = []
    for k in range(n):
        start = rng.choice([str(rng.randint(0, 10**9)), repr(rng.uniform(0, 1e7)), ""])
        end = rng.choice(["", "0", str(rng.randint(10**9, 2 * 10**9))])
        gpu = rng.choice(["", "0", "100", "50", repr(rng.uniform(1, 800)), f"{rng.random():g}"])
        cpu = rng.choice(["", "600", repr(rng.uniform(0, 9600)), "1e3"])
        rows.append(
            f"job{k},{rng.choice(names)},{rng.randint(1, 16)},Terminated,{start},{end},"
            f"{cpu},{rng.randint(1, 100)},{gpu},{rng.choice(types)}"
        )
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("seed", range(4))
def test_pai_tasks_generated(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "pai_task_table.csv"
    path.write_text(_random_pai(random.Random(seed), 3000))
    assert assert_same(read_pai_tasks, path)[0] != "TraceError"


@pytest.mark.parametrize(
    "bad",
    [
        "j1,w,1,Terminated,100,50,600,29,50,",  # negative duration
        "j1,w,1,Terminated,100,150,600,29,50,K80",  # unknown GPU type
        "j1,w,0,Terminated,100,150,600,29,50,",  # inst_num < 1
        "j1,w,1.5,Terminated,100,150,600,29,50,",  # not an integer
        "j1,w,1,Terminated,-5,150,600,29,50,",  # start < 0
        "j1,w,1,Terminated,100,150,600,29,1_000,",  # pandas' numbers have no underscores
        "j1,w,1,Terminated,100,150,600,29,inf,",
        "j1,w,1,Terminated,100,150,600,29,0x10,",
        "j1,w,1,Terminated,100,150,600,29,\u0661\u0662,",  # Arabic-Indic digits
        "j1,w,1,Terminated,100,150,abc,29,50,",
        "j1,w,,Terminated,100,150,600,29,50,",  # required and empty
    ],
)
def test_pai_tasks_bad_same_error(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "pai_task_table.csv"
    path.write_text("j0,w,1,Terminated,10,20,600,29,50,\n" + bad + "\n")
    out = assert_same(read_pai_tasks, path)
    assert out[0] == "TraceError" and out[1].startswith(f"{path}: row 2: field ")


def test_pai_tasks_odd_rows(tmp_path: Path) -> None:
    path = tmp_path / "pai_task_table.csv"
    for odd in ["j1,w,1", "j1,w,1,Terminated,100,150,600,29,,", "j1,w,1,,100,150,,,1e2,"]:
        path.write_text("j0,w,1,Terminated,10,20,600,29,50,\n" + odd + "\n")
        assert len(assert_same(read_pai_tasks, path)[0][1]) in (1, 2)
    path.write_text("j1,w,1,Terminated,100,150,600,29,,\n")  # no GPU task at all
    assert assert_same(read_pai_tasks, path)[0] == "TraceError"


def test_files_and_columns_same_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    assert assert_same(read_pai_tasks, missing)[0] == "TraceError"
    for text in ["", "\n\n", "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n", "a,b\n1,2\n"]:
        path = tmp_path / "pai_machine_spec.csv"
        path.write_text(text)
        assert assert_same(load_pai_machines, path)[0] == "TraceError"


def test_row_longer_than_header_is_one_line(tmp_path: Path) -> None:
    """Where pandas shifts a row under an implicit index (or raises its parser's error), the
    csv reader names the row."""
    path = tmp_path / "pai_machine_spec.csv"
    path.write_text("machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm0,T4,96,512,2\nm1,T4,96,512,2,7\n")
    with pytest.raises(TraceError, match=r"row 2: 6 fields, more than the header's 5$"):
        load_pai_machines(path)


def test_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pai_machine_spec.csv"
    path.write_bytes(b"machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm\xff0,T4,96,512,2\n")
    with pytest.raises(TraceError, match=r"line 2: not UTF-8"):
        load_pai_machines(path)
    # past the decoder's first chunk the line is still the file's, not the chunk's
    rows = "".join(f"m{k},T4,96,512,2\n" for k in range(5000)).encode()
    path.write_bytes(b"machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n" + rows + b"m\xff,T4,96,512,2\n")
    with pytest.raises(TraceError, match=r"line 5002: not UTF-8"):
        load_pai_machines(path)


@pytest.mark.parametrize("rows", [1, 20_000])
def test_quote_left_open_is_one_line(tmp_path: Path, rows: int) -> None:
    """A quote never closed swallows the rest of the file: an error with its line (pandas:
    "EOF inside string"), whether the field it opens is short or past the csv module's
    default limit of 131,072 characters."""
    path = tmp_path / "pai_machine_spec.csv"
    body = "".join(f"m{k},T4,96,512,2\n" for k in range(rows))
    path.write_text('machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm,"T4,96,512,2\n' + body)
    with pytest.raises(
        TraceError, match=r"^.*pai_machine_spec.csv: line \d+: not a well-formed CSV"
    ):
        load_pai_machines(path)


def test_long_field_reads_as_pandas(tmp_path: Path) -> None:
    """A field longer than the csv module's default limit reads, as pandas reads it."""
    path = tmp_path / "pai_machine_spec.csv"
    path.write_text(f"machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n{'m' * 200_000},T4,96,512,2\n")
    assert len(assert_same(load_pai_machines, path)) == 1  # one machine, read by both


# ------------------------------------------------------------------------------ openb, fleets
def test_openb_fixture_both_engines(tmp_path: Path) -> None:
    path = tmp_path / "openb_pod_list.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "bert-p0,4000,8192,1,500,,BE,Succeeded,0,100,0\n"
        "p1,8000,8192,0,0,,BE,Succeeded,5,50,5\n"
        "p2,16000,8192,2,1000,V100M16|V100M32,LS,Running,10,,10\n"
        "p3,8000,8192,1,1000,G3,Guaranteed,Running,20,100,20\n"
        "p4,3333.5,8192,1,333,t4|T4,burstable , Failed ,21.25,99.5,21\n"
    )
    assert len(assert_same(read_openb_pods, path)[0][1]) == 4  # the jobs
    path.write_text(path.read_text().replace(",Guaranteed,", ",Gold,"))
    assert assert_same(read_openb_pods, path)[0] == "TraceError"


def test_fleets_both_engines(tmp_path: Path) -> None:
    pai = tmp_path / "pai_machine_spec.csv"
    pai.write_text(
        "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm0,T4,96,512,2\nm1,CPU,96,512,0\n"
        "m2,V100M32,96.5,384.25,8\n m3 ,misc,64,512,8\n"
    )
    assert len(assert_same(load_pai_machines, pai)) == 3
    for bad in ["m4,V100,96,,8", "m0,T4,96,512,2", " ,T4,96,512,2", "m4,K80,96,512,2"]:
        pai.write_text(pai.read_text() + bad + "\n")
        assert assert_same(load_pai_machines, pai)[0] == "TraceError"
        pai.write_text("\n".join(pai.read_text().splitlines()[:-1]) + "\n")
    openb = tmp_path / "openb_node_list.csv"
    openb.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,1,8,G2\n")
    assert len(assert_same(load_openb_nodes, openb)) == 2


REAL = [
    (read_openb_pods, "alibaba_v2023/openb_pod_list_default.csv"),
    (read_openb_pods, "alibaba_v2023/openb_pod_list_gpushare100.csv"),
    (read_openb_pods, "alibaba_v2023/openb_pod_list_gpuspec33.csv"),
    (load_openb_nodes, "alibaba_v2023/openb_node_list_all_node.csv"),
    (load_pai_machines, "alibaba_v2020/pai_machine_spec.csv"),
]


@pytest.mark.parametrize(("read", "rel"), REAL, ids=[r for _, r in REAL])
def test_real_files_both_engines(read: Callable[..., Any], rel: str) -> None:
    path = DATA / rel
    if not path.is_file():
        pytest.skip(f"{path} absent (set GSG_DATA to the shared data directory)")
    assert assert_same(read, path)[0] != "TraceError"


# ----------------------------------------------------------------------- cells and numbers
CELLS = ["1", "", " ", "x", "nan", "NULL", '"a,b"', '"q""q"', "-0", "7.5e-3", "\t2\t", "a b"]


@pytest.mark.parametrize("seed", range(6))
def test_tables_generated(tmp_path: Path, seed: int) -> None:
    """Random small CSVs (quotes, blank lines, short rows, odd header cells): the same columns."""
    rng = random.Random(seed)
    path = tmp_path / "t.csv"
    for _ in range(40):
        width = rng.randint(1, 5)
        head = [rng.choice(["a", "b", "a", "", " c ", "d"]) for _ in range(width)]
        head[0] = "a"
        rows = [",".join(head)]
        for _ in range(rng.randint(0, 6)):
            rows.append(",".join(rng.choice(CELLS) for _ in range(rng.randint(1, width))))
            if rng.random() < 0.2:
                rows.append(rng.choice(["", "  "]))
        path.write_text(rng.choice(["\n", "\r\n"]).join(rows) + rng.choice(["", "\n"]))
        out: list[Any] = []
        for engine in ("csv", "pandas"):
            try:
                t = read_table(path, ["a"], engine=engine)
                out.append((t.columns, t.rows))
            except TraceError as e:
                out.append(str(e))
        assert out[0] == out[1], path.read_text()


NUMBERS = [
    "0", "-0", "+1", "1.", ".5", "5e-324", "2.2250738585072011e-308", "1.7976931348623157e+308",
    "1e309", "-1e309", "1e-400", "0.1", "0.30000000000000004", "123456789012345678901234567890",
    "9007199254740993", "1_000", "0x1A", "1e", "e5", "--1", "1.2.3", "inf", "-Infinity",
    "NaN", "nan", "None", "null", "", "1E+05", "\u0661", "１", "1 000", "3.14159265358979323846",
]  # fmt: skip


def test_numbers_bit_for_bit(tmp_path: Path) -> None:
    rng = random.Random(7)
    cells = NUMBERS + [repr(rng.uniform(-1e9, 1e9)) for _ in range(500)]
    for _ in range(500):
        digits, x = rng.randint(0, 20), rng.random() * 10.0 ** rng.randint(-300, 300)
        cells.append(f"{x:.{digits}e}")
    path = tmp_path / "n.csv"
    path.write_text("v\n" + "\n".join(f'"{c}"' for c in cells) + "\n")
    tables = [read_table(path, ["v"], engine=e) for e in ("csv", "pandas")]
    assert tables[0].columns == tables[1].columns
    vals = []
    for t in tables:
        empty = np.array([c.strip().lower() in ("", "nan", "none", "null") for c in t["v"]])
        finite = np.array([c.strip().lower() not in ("inf", "-infinity") for c in t["v"]])
        # the rule would reject most of these cells: check them one at a time
        one = []
        for i in range(t.rows):
            sub = dataclasses.replace(t, columns={"v": [t["v"][i]]}, rows=1)
            try:
                one.append(float(numeric(sub, "v", path, optional=True)[0]).hex())
            except TraceError as e:
                one.append(str(e))
        vals.append(one)
        assert empty.any() and not finite.all()
    assert vals[0] == vals[1]
    assert sum(v.startswith("0x") or v.startswith("-0x") for v in vals[0]) > 1000


@pytest.mark.parametrize(
    "cells",
    [["-0"], ["-0", "1"], ["-0", "1.5"], ["-0", ""], ["-00", "+0"], ["-0", "9223372036854775808"],
     ["-0", "-1", "18446744073709551615"], ["-0", "99999999999999999999"], ["-0", "1e0"]],
)  # fmt: skip
def test_whole_columns(tmp_path: Path, cells: list[str]) -> None:
    """pandas reads a column of integers as integers: its "-0" is then +0.0 (else -0.0)."""
    path = tmp_path / "n.csv"
    path.write_text("v\n" + "\n".join(cells) + "\n")
    got = [
        [x.hex() for x in numeric(read_table(path, ["v"], engine=e), "v", path, optional=True)]
        for e in ("csv", "pandas")
    ]
    assert got[0] == got[1]


def test_unknown_engine() -> None:
    with pytest.raises(ValueError, match="engine 'arrow'"):
        read_table(ROOT / "pyproject.toml", ["a"], engine="arrow")


# ---------------------------------------------------------------------- no pandas in a replay
def test_replay_process_imports_no_pandas(tmp_path: Path) -> None:
    trace = tmp_path / "pai_task_table.csv"
    trace.write_text("\n".join(PAI_ROWS[:3]) + "\n")
    fleet = tmp_path / "pai_machine_spec.csv"
    fleet.write_text("machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm0,V100M32,96,512,8\n")
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('PANDAS', 'pandas' in sys.modules))\n"
        f"sys.argv = ['evaluate.py', '--policy', 'first_fit', '--seeds', '1', '--quiet',"
        f" '--trace', {str(trace)!r}, '--trace-format', 'pai',"
        f" '--cluster', {str(fleet)!r}, '--cluster-format', 'pai']\n"
        f"runpy.run_path({str(ROOT / 'scripts' / 'evaluate.py')!r}, run_name='__main__')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "first_fit" in out.stdout and out.stdout.strip().endswith("PANDAS False")


# ------------------------------------------------------------------------------ name hints
def test_hinted_rows_as_the_pattern_finds_them() -> None:
    """``assign_models`` finds the rows with a hint by ``str.find`` over the joined names: the
    rows where :func:`_any_hint` matches, on random names (keys in any case, glued to letters,
    digits and punctuation, non-ASCII letters and newlines inside names)."""
    rng = random.Random(3)
    alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-./"
    keys = [k for k, _ in NAME_HINTS]
    for _ in range(2000):
        names = []
        for _ in range(rng.randint(1, 30)):
            parts = [
                rng.choice([*keys, "".join(rng.choice(alpha) for _ in range(rng.randint(0, 4)))])
                for _ in range(rng.randint(0, 4))
            ]
            name = "".join(p.upper() if rng.random() < 0.2 else p for p in parts)
            if rng.random() < 0.03:
                name += rng.choice(["é", "\n", "\u212a", "\u017f", "\u0130"])
            names.append(name)
        want = [i for i, nm in enumerate(names) if _any_hint().search(nm) is not None]
        assert _hinted_rows(names) == want, names


def test_the_name_patterns_are_compiled_at_their_first_use() -> None:
    """The name hints' patterns are not compiled at import (a replay of names without a hint
    never compiles them), and are once a name is looked up."""
    code = (
        "import gpu_sharing_env.workload.loaders._common as c\n"
        "print(c._hint_res.cache_info().currsize, c._any_hint.cache_info().currsize)\n"
        "print(c.model_from_name('bert-x'), c._hint_res.cache_info().currsize)\n"
        "print(c._hinted_rows(['j0', 'gpt\u00e9']), c._any_hint.cache_info().currsize)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["0 0", "bert 1", "[1] 1"], out.stdout


def test_columns_with_blank_cells_parse_as_cell_by_cell() -> None:
    """``_parse``'s fast path for columns of numbers and blank cells (a PAI task table's
    ``plan_gpu``) gives what the cell-by-cell path gives: values bit for bit, NaN and empty where
    a cell is blank; a column with any other odd cell still goes cell by cell."""
    rng = random.Random(11)
    odd = [c for c in NUMBERS if c != ""]
    fast = 0
    for _ in range(2_000):
        n = rng.randint(1, 12)
        kinds = rng.choices(["blank", "float", "odd"], weights=[3, 6, 1], k=n)
        pick = {"blank": lambda: "", "float": lambda: repr(rng.uniform(-1e6, 1e6)),
                "odd": lambda: rng.choice(odd)}  # fmt: skip
        cells = [pick[k]() for k in kinds]
        v, empty = _parse(cells)
        ref_v = np.fromiter(map(_number, cells), dtype=np.float64, count=n)
        assert [x.hex() for x in v] == [x.hex() for x in ref_v], cells
        assert empty.tolist() == _empty(cells).tolist(), cells
        fast += "blank" in kinds and "odd" not in kinds
    assert fast > 500  # columns of numbers and blanks: the fast path's
