"""Stopping cleanly: Ctrl-C (SIGINT) and SIGTERM end a command with 130 / 143, no traceback, its
worker processes gone and what it wrote resumable; plain progress lines off a terminal; unknown
names as one-line errors (gpu_sharing_gym.plumbing.interrupt, gpu_sharing_gym.plumbing.progress, gsg commands)."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from gpu_sharing_gym import cli
from gpu_sharing_gym.plumbing import interrupt, progress

ROOT = Path(__file__).resolve().parents[1]
#: A scenario whose cells take about half a second each (2 cores, unloaded).
SLOW = """\
name: sigtest
horizon_h: 200
slo_target: 0.9
cluster:
  nodes:
    - {gpu_type: V100-16GB, count: 2, gpus_per_node: 4, vcpus: 32, host_mem_gb: 128}
workload:
  offline: {source: synthetic, params: {}, max_jobs: 1500}
  online: {num_services: 2}
faults:
  rate_per_gpu_h: {user_signal: 0.0, app_error: 0.0, xid: 0.0}
"""
#: Generous: the machine is shared and may be loaded.
START_TIMEOUT_S = 120.0


def _default_sigint() -> None:
    # A test run started in the background (``make test &``) inherits SIGINT as ignored, and
    # Python keeps it ignored: give the child the default Ctrl-C handling.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str], **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_sharing_gym.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own session: every process it starts is findable
        preexec_fn=_default_sigint,
        env={**os.environ, **env},
    )


def _session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid`` (psutil if installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp sid
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(d))
        return pids
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out


def _wait_for(pred: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not pred():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"exited ({proc.returncode}) before {what}: {err.decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {START_TIMEOUT_S} s")
        time.sleep(0.05)


def _read_until(proc: subprocess.Popen[bytes], needle: bytes) -> bytes:
    """stderr of ``proc`` up to and including the first line that holds ``needle``."""
    assert proc.stderr is not None
    fd, buf = proc.stderr.fileno(), b""
    deadline = time.monotonic() + START_TIMEOUT_S
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            pytest.fail(f"no {needle!r} on stderr within {START_TIMEOUT_S} s: {buf[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                proc.wait()
                pytest.fail(f"exited ({proc.returncode}) before {needle!r}: {buf[-2000:]!r}")
            buf += chunk
    return buf


def _finish(proc: subprocess.Popen[bytes], sig: int, timeout: float = 60.0) -> str:
    """Send ``sig`` to the command (its main process only) and return all of its stderr."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"no exit {timeout} s after signal {sig}: {err.decode()[-2000:]}")
    return err.decode()


def _no_process_left(sid: int, within_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := _session_pids(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _table(out: Path) -> pd.DataFrame:
    df = pd.read_csv(out / "leaderboard.csv").drop(columns="wall_s")
    return df.sort_values(["policy", "seed"]).reset_index(drop=True)


# ------------------------------------------------------------------ commands under a signal
def test_sigterm_stops_leaderboard_workers_and_rerun_resumes(tmp_path: Path) -> None:
    scen = tmp_path / "sigtest.yaml"
    scen.write_text(SLOW)
    out = tmp_path / "lb"
    args = ["leaderboard", "--scenarios", str(scen), "--policies", "first_fit,time_sharing",
            "--seeds", "6", "--out", str(out), "--quiet"]  # fmt: skip
    proc = _start([*args, "--workers", "2"])
    cells = out / "cells" / "sigtest"
    _wait_for(lambda: any(cells.glob("*/*.json")), proc, "a first finished cell")
    err = _finish(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert "terminated (SIGTERM); finished cells are saved, rerun to resume" in err
    assert _no_process_left(proc.pid) == [], "worker processes outlived the leaderboard"
    saved = {p: p.read_bytes() for p in cells.glob("*/*.json")}
    assert 0 < len(saved) < 12  # stopped midway
    assert not list(out.rglob("*.tmp"))
    assert all(json.loads(b)["record"]["status"] == "ok" for b in saved.values())
    # The same command again computes only the missing cells...
    assert cli.main([*args, "--workers", "1"]) == 0
    assert all(p.read_bytes() == b for p, b in saved.items())
    # ... and ends where an uninterrupted run does.
    ref = tmp_path / "ref"
    assert cli.main([*args[:-2], str(ref), "--quiet", "--workers", "1"]) == 0
    pd.testing.assert_frame_equal(_table(out), _table(ref))


def _records(path: Path) -> list[dict]:
    """``gsg evaluate --json``'s records without their wall-clock times."""
    return [{k: v for k, v in r.items() if k != "x_wall_s"} for r in json.loads(path.read_text())]


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_signal_to_evaluate_keeps_finished_episodes_and_rerun_resumes(
    sig: int, code: int, said: str, tmp_path: Path
) -> None:
    scen = tmp_path / "sigtest.yaml"
    scen.write_text(SLOW)
    record = tmp_path / "r.json"
    args = ["evaluate", "--scenario", str(scen), "--policy", "first_fit,time_sharing",
            "--seeds", "6", "--json", str(record), "--quiet"]  # fmt: skip
    proc = _start(args)
    cells = tmp_path / "r.partial" / "cells" / "sigtest"
    # each finished episode is a file written whole (a rename), so its presence is enough
    _wait_for(lambda: any(cells.glob("*/*.json")), proc, "a first finished episode")
    err = _finish(proc, sig)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert f"gsg evaluate: {said} after " in err
    assert f"kept in {tmp_path / 'r.partial'}; run the same command again to resume" in err
    assert _no_process_left(proc.pid) == []
    saved = {p: p.read_bytes() for p in cells.glob("*/*.json")}
    assert 0 < len(saved) < 12  # stopped midway, the finished episodes kept
    assert not record.exists() and not list(tmp_path.rglob("*.tmp"))
    # The same command again runs only the missing episodes: the kept ones are read back as
    # they are (their files untouched), and the records equal an uninterrupted run's.
    stamp = {p: p.stat().st_mtime_ns for p in saved}
    assert cli.main(args) == 0
    assert all(p.stat().st_mtime_ns == stamp[p] for p in saved if p.exists())
    assert not (tmp_path / "r.partial").exists()  # everything is in r.json now
    ref = tmp_path / "ref.json"
    assert cli.main([*args[:-2], str(ref), "--quiet"]) == 0
    assert _records(record) == _records(ref)


def test_evaluate_rerun_reads_kept_episodes_instead_of_running_them(tmp_path: Path) -> None:
    """A kept episode is read back, not run again: planted into the kept folder with a marker
    value, the marker comes out in the records (while the scenario file is unchanged)."""
    scen = tmp_path / "tiny.yaml"
    scen.write_text(SLOW.replace("max_jobs: 1500", "max_jobs: 20"))
    out = tmp_path / "r.json"
    args = ["evaluate", "--scenario", str(scen), "--policy", "first_fit", "--seeds", "2",
            "--json", str(out), "--quiet"]  # fmt: skip
    assert cli.main(args) == 0
    first = json.loads(out.read_text())
    # the state a stopped run leaves: seed 0 kept, seed 1 not yet run
    from gpu_sharing_gym.cells import Cell, save_cell

    cell = Cell("first_fit", "sigtest", str(scen.resolve()), 0)
    kept = {"format": 1, "cell": {"policy": "first_fit", "scenario": "sigtest", "seed": 0},
            "variant": "", "scenario_digest": None, "policy_digest": None,
            "record": {**{k: first[0][k] for k in first[0] if not k.startswith("x_")
                          and k != "model_version"}, "jct_mean_s": 12345.0, "status": "ok",
                       "error": "", "wall_s": 0.0},
            "extras": {"model_version": first[0]["model_version"]}}  # fmt: skip
    save_cell(tmp_path / "r.partial", cell, kept)
    assert cli.main(args) == 0
    again = json.loads(out.read_text())
    assert again[0]["jct_mean_s"] == 12345.0  # read back, not recomputed
    assert again[1]["jct_mean_s"] == first[1]["jct_mean_s"]


def test_non_tty_progress_lines_and_quiet(tmp_path: Path) -> None:
    scen = tmp_path / "sigtest.yaml"
    scen.write_text(SLOW)
    args = ["evaluate", "--scenario", str(scen), "--policy", "first_fit", "--seeds", "2"]
    env = {**os.environ, "GSG_PROGRESS_INTERVAL": "0.05"}
    cmd = [sys.executable, "-m", "gpu_sharing_gym.cli", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stderr.splitlines() if " episodes (" in x]
    assert lines, p.stderr
    # e.g. "first_fit seed 1: 1/2 episodes (50%), elapsed 0:00:01, ETA 0:00:01, sim 20.3 h, ..."
    assert all(", elapsed " in x and "\r" not in x for x in lines)
    assert any(x.startswith("first_fit seed ") for x in lines)
    assert lines[-1].split(": ", 1)[1].startswith("2/2 episodes (100%)")
    q = subprocess.run([*cmd, "--quiet"], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300)  # fmt: skip
    assert q.returncode == 0 and q.stderr == "", q.stderr


def test_cli_turns_an_escaped_interrupt_into_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for exc, code, said in [
        (KeyboardInterrupt(), 130, "interrupted"),
        (interrupt.Terminated(), 143, "terminated (SIGTERM)"),
    ]:

        def command(argv: list[str] | None, exc: BaseException = exc) -> int:
            raise exc

        monkeypatch.setattr(cli, "_load", lambda module: command)
        assert cli.main(["trace", "stats"]) == code
        assert capsys.readouterr().err.strip() == f"gsg trace: {said}"


# ------------------------------------------------------------------ interrupt helpers
def test_sigterm_raises_terminated_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(interrupt.Terminated) as info, interrupt.sigterm_raises():
        signal.raise_signal(signal.SIGTERM)
    assert isinstance(info.value, KeyboardInterrupt)
    assert interrupt.exit_code(info.value) == 143
    assert signal.getsignal(signal.SIGTERM) == before
    # A library that re-raises a plain KeyboardInterrupt (Ray) still counts as SIGTERM...
    assert interrupt.exit_code(KeyboardInterrupt()) == 143
    with interrupt.sigterm_raises():  # ... until the next command starts
        assert interrupt.exit_code(KeyboardInterrupt()) == 130


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handling in this process for the test: under ``make test &`` the
    interpreter starts with SIGINT ignored and never installs ``default_int_handler``."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("python_sigint")
def test_signals_held_acts_on_a_signal_when_the_block_ends() -> None:
    after: list[str] = []
    with (
        pytest.raises(interrupt.Terminated),
        interrupt.sigterm_raises(),
        interrupt.signals_held() as got,
    ):
        signal.raise_signal(signal.SIGTERM)
        after.append("went on")  # the signal did not cut the block short ...
        assert got == [signal.SIGTERM]
    assert after == ["went on"]  # ... and was acted on (Terminated) when it ended
    with pytest.raises(KeyboardInterrupt), interrupt.signals_held():
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("python_sigint")
def test_wait_first_ends_on_a_signal_and_raises_after_it() -> None:
    from concurrent.futures import Future

    never: Future[int] = Future()  # never finishes: only the signal can end the wait
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupt.wait_first([never], poll_s=0.05)
    finally:
        timer.join()
    done: Future[int] = Future()
    done.set_result(1)
    assert interrupt.wait_first([never, done]) == {done}


def test_exit_process_does_not_wait_for_a_stuck_thread() -> None:
    # A non-daemon thread blocked for good (as a pool's manager thread on a lock that an
    # interrupted main thread held) keeps a plain exit waiting forever; after an interrupt,
    # exit_process ends the process with its status once the grace is over. (A plain
    # sys.exit here would hang: the subprocess timeout would fail the test.)
    code = (
        "import threading; from gpu_sharing_gym.plumbing.interrupt import exit_process\n"
        "lock = threading.Lock(); lock.acquire()\n"
        "threading.Thread(target=lock.acquire).start()\n"
        "print('saved', flush=True)\n"
        "exit_process(143, grace_s=0.2)\n"
    )
    _exits_with(code, 143, b"saved\n")


def _exits_with(code: str, status: int, stdout: bytes) -> None:
    """Python ``code`` run in a subprocess ends with ``status`` and prints ``stdout``."""
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=START_TIMEOUT_S
    )
    assert res.returncode == status, res.stderr.decode()
    assert res.stdout == stdout


def test_exit_process_leaves_the_objects_out_of_the_final_collection() -> None:
    # The interpreter's exit collects cyclic garbage over every object still tracked (a
    # replay's whole episode); exit_process freezes them first. The atexit handlers run
    # after it (they see the frozen objects) and the status and the output are kept.
    code = (
        "import atexit, gc; from gpu_sharing_gym.plumbing.interrupt import exit_process\n"
        "kept = [[i] for i in range(1000)]\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() >= 1000, flush=True))\n"
        "print('saved', flush=True)\n"
        "exit_process(3)\n"
    )
    _exits_with(code, 3, b"saved\nfrozen True\n")


def _block(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
    time.sleep(600)


def test_process_pool_stops_its_workers_on_interrupt(tmp_path: Path) -> None:
    started = tmp_path / "started"
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupt.process_pool(2) as pool:
        futures = [pool.submit(_block, str(started)) for _ in range(4)]
        while not started.exists():
            assert time.monotonic() - t0 < START_TIMEOUT_S
            time.sleep(0.05)
        procs = list(pool._processes.values())
        raise KeyboardInterrupt
    assert procs
    # ``stop_pool`` has SIGTERMed and joined (or SIGKILLed) every worker. The executor's own
    # manager thread also reaps its workers, and ``Process.is_alive`` reads a child that another
    # thread reaped a moment ago as alive (``waitpid`` fails with ECHILD before that thread has
    # stored the exit code), and it fails the running futures asynchronously: poll until both
    # settle (generously, for a loaded machine) instead of asserting at a fixed moment.
    deadline = time.monotonic() + 120
    while any(p.is_alive() for p in procs) or not all(f.done() for f in futures):
        assert time.monotonic() < deadline, (procs, futures)
        time.sleep(0.05)
    assert all(f.cancelled() or f.exception() is not None for f in futures)


# ------------------------------------------------------------------ plain progress
def test_plain_progress_line_counts_elapsed_and_eta() -> None:
    now = [100.0]
    buf = io.StringIO()
    bar = progress.PlainProgress(
        12, "cells", "cell", initial=2, file=buf, clock=lambda: now[0], start=False
    )
    bar.update(3)
    now[0] += 90.0
    bar.set_postfix_str("first_fit seed 4")
    # 3 cells in 90 s this run -> 7 left take 210 s
    assert bar.line() == "cells: 5/12 cells (42%), elapsed 0:01:30, ETA 0:03:30, first_fit seed 4"
    bar.emit()
    bar.update(7)
    bar.close()  # the last state, since a line was written before
    assert buf.getvalue().splitlines()[-1].startswith("cells: 12/12 cells (100%), elapsed")
    quiet = io.StringIO()
    with progress.PlainProgress(3, "x", file=quiet, start=False) as short:
        short.update(3)
    assert quiet.getvalue() == ""  # nothing was due: a short run stays silent


def test_progress_picks_plain_lines_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.5")
    assert progress.interval_s() == 0.5
    for bad in ("0", "-1", "x", "nan"):
        monkeypatch.setenv(progress.INTERVAL_ENV, bad)
        assert progress.interval_s() == progress.DEFAULT_INTERVAL_S
    with progress.progress(3, file=io.StringIO()) as bar:
        assert isinstance(bar, progress.PlainProgress)
    with progress.progress(3, disable=True, file=io.StringIO()) as bar:
        assert isinstance(bar, progress.NullProgress) and bar.disable


# ------------------------------------------------------------------ unknown names
@pytest.mark.parametrize(
    ("argv", "named", "listed"),
    [
        (["evaluate", "--policy", "nosuch", "--quiet"], "unknown policy 'nosuch'", "first_fit"),
        (["evaluate", "--scenario", "nosuch", "--quiet"], "scenario 'nosuch'", "default"),
        (["leaderboard", "--policies", "first_fit,nosuch", "--scenarios", "default"],
         "unknown policy 'nosuch'", "first_fit"),
        (["leaderboard", "--policies", "first_fit", "--scenarios", "default,nosuch"],
         "scenario 'nosuch'", "default"),
        (["train", "--scenario", "nosuch"], "scenario 'nosuch'", "default"),
        (["bench", "replay", "--policy", "nosuch"], "unknown policy 'nosuch'", "first_fit"),
    ],
)  # fmt: skip
def test_unknown_names_are_one_line_listing_the_known(
    argv: list[str], named: str, listed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "train":
        pytest.importorskip("stable_baselines3")
    if argv[0] in ("leaderboard", "train"):
        argv = [*argv, "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"gsg {argv[0]}")
    assert named in err and "known: " in err and listed in err.split("known: ", 1)[1]
