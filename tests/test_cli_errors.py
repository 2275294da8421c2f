"""Every ``gsg`` subcommand speaks one language (gpu_sharing_gym.plumbing.cli_args): a bad option or value is
one line, ``gsg SUBCOMMAND: error: ...``, exit status 2, given before any work starts; ``--help``
says ``usage: gsg SUBCOMMAND``; numbers out of range and output paths that cannot be written
are refused up front; ``gsg train --resume`` over a damaged checkpoint is one line too."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpu_sharing_gym import cli

ROOT = Path(__file__).resolve().parents[1]
#: Every subcommand, as a user types it (``gsg bench replay`` is ``bench`` + ``replay``).
SUBCOMMANDS = [
    *[[c] for c in cli.COMMANDS],
    *[["bench", sub] for sub in cli.BENCH_SUBCOMMANDS],
]
ERROR_LINE = re.compile(r"^gsg [a-z-]+( [a-z-]+)?: error: \S.*$")


def _gsg(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``gsg ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        code = cli.main(args)
    except SystemExit as e:  # argparse's exit (--help, a usage error)
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str, prog: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert ERROR_LINE.match(lines[0]), lines[0]
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("sub", SUBCOMMANDS, ids=" ".join)
def test_every_subcommand_refuses_a_bad_option_in_one_line(
    sub: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _gsg([*sub, "--no-such-option"], capsys)
    assert code == 2
    assert "usage:" not in err and "Traceback" not in err
    _one_error_line(err, "gsg " + " ".join(sub))


@pytest.mark.parametrize("sub", SUBCOMMANDS, ids=" ".join)
def test_every_subcommand_help_names_gsg_subcommand(
    sub: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _gsg([*sub, "--help"], capsys)
    assert code == 0
    assert out.startswith(f"usage: gsg {' '.join(sub)} ")
    # a wheel user has no scripts/ folder and no module to run with python -m
    assert "scripts/" not in out and "python -m" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["evaluate", "--seeds", "abc"],
            "gsg evaluate: error: --seeds: expected an integer N (seeds 0..N-1) or a list like "
            "0,1,2 or 800-859 (got 'abc')",
        ),
        (
            ["leaderboard", "--seeds", "abc"],
            "gsg leaderboard: error: --seeds: expected an integer N (seeds 0..N-1) or a list like "
            "0,1,2 or 800-859 (got 'abc')",
        ),
        (["evaluate", "--seeds", "0"], "gsg evaluate: error: --seeds: must be >= 1 (got '0')"),
        (
            ["evaluate", "--max-jobs", "0"],
            "gsg evaluate: error: --max-jobs: must be an integer >= 1 (got '0')",
        ),
        (
            ["train", "--max-minutes", "-1"],
            "gsg train: error: --max-minutes: must be a number >= 0 (got '-1')",
        ),
        (
            ["train", "--timesteps", "0", "--out", "x"],
            "gsg train: error: --timesteps: must be an integer >= 1 (got '0')",
        ),
        (
            ["train", "--n-envs", "two"],
            "gsg train: error: --n-envs: expected an integer (got 'two')",
        ),
        (["train", "--seed", "-3"], "gsg train: error: --seed: must be an integer >= 0 (got '-3')"),
        (
            ["leaderboard", "--workers", "0"],
            "gsg leaderboard: error: --workers: must be an integer >= 1 (got '0')",
        ),
        (
            ["reproduce", "--seeds", "-1"],
            "gsg reproduce: error: --seeds: must be an integer >= 1 (got '-1')",
        ),
        (
            ["reproduce", "--workers", "0"],
            "gsg reproduce: error: --workers: must be an integer >= 1 (got '0')",
        ),
        (
            ["headroom", "--out", "x", "--samples", "0"],
            "gsg headroom: error: --samples: must be an integer >= 1 (got '0')",
        ),
        (
            ["bench", "--replay-repeat", "0"],
            "gsg bench: error: --replay-repeat: must be an integer >= 1 (got '0')",
        ),
        (
            ["bench", "replay", "--jobs-per-gpu", "-2"],
            "gsg bench replay: error: --jobs-per-gpu: must be a number > 0 (got '-2')",
        ),
        (
            ["trace", "stats", "-", "--format", "synthetic", "--horizon-h", "-5"],
            "gsg trace stats: error: --horizon-h: must be a number > 0 (got '-5')",
        ),
        (
            ["trace", "stats", "-", "--format", "nope"],
            "gsg trace stats: error: --format: invalid choice: 'nope'",
        ),
    ],
)
def test_bad_values_are_one_line_before_any_work(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _gsg(args, capsys)
    assert code == 2
    line = _one_error_line(err, message.split(": error:")[0])
    assert line.startswith(message), line
    assert out == ""


def test_calibrate_errors_name_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _gsg(["calibrate", "--data", str(tmp_path / "none")], capsys)
    assert code == 2
    _one_error_line(err, "gsg calibrate")


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "--policy", "first_fit", "--seeds", "1", "--json", "{dir}"],
        ["calibrate", "--json", "{dir}"],
        ["reproduce", "--json", "{dir}"],
        ["bench", "--json", "{dir}"],
        ["bench", "replay", "--json", "{dir}"],
        ["bench", "markdown", "in.json", "-o", "{dir}"],
        ["leaderboard", "--out", "{file}"],
        ["train", "--out", "{file}"],
        ["headroom", "--out", "{file}"],
        ["evaluate", "--json", "{file}/r.json"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_output_paths_are_checked_before_running(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file option given a directory, a directory option given a file, or a path under a
    file: one line naming the option, exit 2, at once; nothing is left behind."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("keep me\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = [a.format(dir=tmp_path / "dir", file=tmp_path / "file") for a in args]
    code, _, err = _gsg(argv, capsys)
    assert code == 2, err
    line = _one_error_line(err, "gsg " + " ".join(a for a in args[:2] if not a.startswith("-")))
    option = next(a for a in args if a.startswith("-") and "{" in args[args.index(a) + 1])
    assert f"error: {'--out' if option == '-o' else option}: " in line  # the long name
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no .tmp, nothing made
    assert (tmp_path / "file").read_text() == "keep me\n"


def test_evaluate_rows_name_a_custom_policy_as_the_leaderboard_does(tmp_path: Path) -> None:
    """``module:Class`` is one name in both commands: the records' and the leaderboard's rows."""
    (tmp_path / "my_sched.py").write_text(
        "from gpu_sharing_gym.baselines.reference import FirstFit\n\n"
        "class Mine(FirstFit):\n    name = 'mine'\n"
    )
    (tmp_path / "tiny.yaml").write_text(
        "horizon_h: 6\ncluster:\n  nodes:\n    - {gpu_type: V100-16GB, count: 1, gpus_per_node: 2}\n"
        "workload:\n  offline: {params: {arrivals_per_h: 4.0}, max_jobs: 6}\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    common = ["--scenario", "tiny.yaml", "--seeds", "1", "--quiet"]
    p = subprocess.run(
        [sys.executable, "-m", "gpu_sharing_gym.cli", "evaluate", "--policy", "my_sched:Mine",
         *common, "--json", "r.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert [r["policy"] for r in json.loads((tmp_path / "r.json").read_text())] == ["my_sched:Mine"]
    p = subprocess.run(
        [sys.executable, "-m", "gpu_sharing_gym.cli", "leaderboard", "--policies",
         "my_sched:Mine", "--scenarios", "tiny.yaml", "--seeds", "1", "--quiet", "--out", "lb",
         "--workers", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = (tmp_path / "lb" / "leaderboard.csv").read_text().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["my_sched:Mine"]


# ----------------------------------------------------------------------------- gsg train
def test_list_configs_shows_whole_first_sentences_and_one_shipped_recipe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpu_sharing_gym.agents.recipes import AGENT_CONFIG_DIR, recipe_names, recipe_summary

    code, out, _ = _gsg(["train", "--list-configs"], capsys)
    assert code == 0
    entries: dict[str, str] = {}
    name = ""
    for line in out.splitlines():
        if not line.startswith(" "):
            name, _, line = line.partition(" ")
            entries[name] = ""
        entries[name] += " " + line.strip()
    assert sorted(entries) == recipe_names()
    for n, text in entries.items():
        summary = recipe_summary(AGENT_CONFIG_DIR / f"{n}.yaml")
        assert " ".join(text.split()) == summary  # wrapped, never cut
        assert summary.endswith((".", ")", ":")) or summary.endswith("`"), (n, summary)
    shipped = [n for n, text in entries.items() if "recipe of the shipped `ppo`" in text]
    # the shipped agent's card names the recipe its run used
    card = (ROOT / "agents" / "pretrained" / "ppo.md").read_text()
    made = card[card.index("## How it was made") :]
    used = re.findall(r"gsg train --config (\S+)", made)
    assert shipped == used[:1], (shipped, used)


TINY_RECIPE = """
default:
  n_timesteps: 128
  policy_kwargs: {hidden: 16, n_layers: 1}
  eval_freq: 128
  eval_seeds: [1000]
  eval_baselines: [first_fit]
  checkpoint_freq: 64
  n_steps: 64
  batch_size: 64
  n_epochs: 1
  n_envs: 1
  vec_env: in_process
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 128-step training run (about 15 s)."""
    d = tmp_path_factory.mktemp("train")
    (d / "tiny.yaml").write_text(TINY_RECIPE)
    p = subprocess.run(
        [sys.executable, "-m", "gpu_sharing_gym.cli", "train", "--config", str(d / "tiny.yaml"),
         "--no-pretrain", "--out", str(d / "run"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return d / "run"


def _resume(run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_sharing_gym.cli", "train", "--out", str(run), "--resume"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_resume_over_a_truncated_checkpoint_is_one_line(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (ckpt,) = (run / "checkpoints").glob("step_*/model.zip")
    _truncate(ckpt)
    p = _resume(run)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        f"gsg train: error: {ckpt}: corrupt or unreadable checkpoint (File is not a zip file); "
        "no intact checkpoint to resume from"
    ]


def test_resume_falls_back_to_the_newest_intact_checkpoint(tiny_run: Path, tmp_path: Path) -> None:
    """A newer checkpoint whose model.zip is damaged (as a disk-full write could leave it): the
    run resumes from the older intact one, and says so in one line."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (old,) = (run / "checkpoints").glob("step_*")
    new = run / "checkpoints" / "step_0000000192-damaged"
    shutil.copytree(old, new)
    (new / "checkpoint.json").write_text(json.dumps({"timesteps": 192, "files": ["model.zip"]}))
    (run / "checkpoints" / "last.json").write_text(json.dumps({"timesteps": 192, "dir": new.name}))
    _truncate(new / "model.zip")
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(new / "model.zip")
    p = _resume(run)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    notes = [line for line in p.stderr.splitlines() if "intact" in line]
    assert notes == [
        f"gsg train: {new / 'model.zip'}: corrupt or unreadable checkpoint (File is not a zip "
        f"file); resuming from the newest intact checkpoint, {old / 'model.zip'} (128 timesteps)"
    ]
    assert "the run is finished (128 of 128 timesteps)" in p.stdout


def test_an_unknown_subcommand_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _gsg(["evalute"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "gsg: error: unknown command 'evalute' (known: " + ", ".join(cli.COMMANDS) + "; gsg --help)"
    ]
